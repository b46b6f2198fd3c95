//! The ids and hashes the interfaces hand the host, each checked once where it is read (a
//! route's path, a tool call's arguments) and then carried as its own type, so a task id is
//! never passed where a run id belongs and no handler checks the same text twice.
//!
//! Each is text underneath: serde reads and writes it as a plain string (the stored and the
//! wire forms are unchanged), and a value that fails its check does not deserialize.

use crate::input::{check_id, IdError};
use std::fmt;

/// What is wrong with a hash or a content id, said to the person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error("is not a SHA-256 hash: give the 64 lowercase hex digits shown (e.g. on the card)")]
    PayloadHash,
    #[error("is not a content id: `sha256:` and 64 lowercase hex digits")]
    ContentId,
}

/// What is wrong with an id, a hash or a content id given at an interface.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdParseError {
    #[error(transparent)]
    Id(#[from] IdError),
    #[error(transparent)]
    Digest(#[from] DigestError),
}

/// The prefix of a content id (§13.5): the hash it names is SHA-256.
pub const CONTENT_ID_PREFIX: &str = "sha256:";

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Checks the text once; the value then stays valid.
            pub fn parse(text: impl Into<String>) -> Result<Self, IdParseError> {
                let text = text.into();
                let check: fn(&str) -> Result<(), IdParseError> = $check;
                check(&text)?;
                Ok($name(text))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// Reads as the text it is, so a checked id passes wherever `&str` is taken.
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdParseError;
            fn from_str(s: &str) -> Result<Self, IdParseError> {
                $name::parse(s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                $name::parse(text).map_err(serde::de::Error::custom)
            }
        }
    };
}

text_id!(
    /// A run's id (the host makes them: UUIDv7 text); checked as every looked-up id is.
    RunId,
    |s| Ok(check_id(s)?)
);

text_id!(
    /// A task's id on the board (§13.1); checked as every looked-up id is.
    TaskId,
    |s| Ok(check_id(s)?)
);

text_id!(
    /// The hash an approval binds to (§7): SHA-256 of the payload's canonical JSON, as 64
    /// lowercase hex digits ([`crate::payload_hash`]).
    PayloadHash,
    |s| {
        check_id(s)?;
        if is_sha256_hex(s) {
            Ok(())
        } else {
            Err(DigestError::PayloadHash.into())
        }
    }
);

text_id!(
    /// An artifact's content id (§13.5): `sha256:` and the 64 lowercase hex digits of the
    /// SHA-256 of its bytes.
    ContentId,
    |s| {
        check_id(s)?;
        match s.strip_prefix(CONTENT_ID_PREFIX) {
            Some(h) if is_sha256_hex(h) => Ok(()),
            _ => Err(DigestError::ContentId.into()),
        }
    }
);

impl ContentId {
    /// The hex digest after the prefix.
    pub fn digest(&self) -> &str {
        &self.0[CONTENT_ID_PREFIX.len()..]
    }
}

/// One attempt of a task: the task and the attempt's number (1 for the first claim).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct AttemptRef {
    pub task: TaskId,
    pub n: u32,
}

impl AttemptRef {
    /// An attempt's number starts at 1.
    pub fn new(task: TaskId, n: u32) -> Result<Self, AttemptNumberError> {
        if n == 0 {
            return Err(AttemptNumberError);
        }
        Ok(AttemptRef { task, n })
    }
}

/// An attempt number of 0: attempts are counted from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be 1 or more (attempts are counted from 1, as the claim answered)")]
pub struct AttemptNumberError;

impl fmt::Display for AttemptRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} attempt {}", self.task, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_checked_once_and_kept_as_given() {
        let r = RunId::parse("019a-run").unwrap();
        assert_eq!(r.as_str(), "019a-run");
        assert_eq!(r.to_string(), "019a-run");
        assert_eq!(r, "019a-run");
        for bad in ["", "r\u{0}", "r\n"] {
            assert!(
                matches!(RunId::parse(bad), Err(IdParseError::Id(_))),
                "{bad:?}"
            );
            assert!(TaskId::parse(bad).is_err(), "{bad:?}");
        }
        assert!(RunId::parse("x".repeat(crate::input::ID_BYTES_MAX + 1)).is_err());
    }

    #[test]
    fn serde_reads_and_writes_the_plain_text_and_refuses_a_bad_one() {
        let t: TaskId = serde_json::from_str("\"t-1\"").unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"t-1\"");
        let e = serde_json::from_str::<RunId>("\"a\\u0007b\"").unwrap_err();
        assert!(e.to_string().contains("control character"), "{e}");
        assert!(serde_json::from_str::<RunId>("7").is_err());
    }

    #[test]
    fn a_payload_hash_is_64_lowercase_hex_digits() {
        let h = crate::payload_hash(&serde_json::json!({"a": 1})).unwrap();
        assert_eq!(PayloadHash::parse(h.clone()).unwrap().as_str(), h);
        for bad in [&h[..63], &h.to_uppercase(), &format!("sha256:{h}"), "zz"] {
            assert_eq!(
                PayloadHash::parse(bad),
                Err(IdParseError::Digest(DigestError::PayloadHash)),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_content_id_is_the_prefix_and_a_sha256() {
        let hex = crate::sha256_hex(b"x");
        let cid = ContentId::parse(format!("sha256:{hex}")).unwrap();
        assert_eq!(cid.digest(), hex);
        for bad in [
            hex.clone(),
            format!("sha1:{hex}"),
            format!("sha256:{}", &hex[1..]),
        ] {
            assert_eq!(
                ContentId::parse(bad.clone()),
                Err(IdParseError::Digest(DigestError::ContentId)),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_attempt_is_counted_from_one() {
        let t = TaskId::parse("t").unwrap();
        assert_eq!(AttemptRef::new(t.clone(), 0), Err(AttemptNumberError));
        let a = AttemptRef::new(t, 2).unwrap();
        assert_eq!(a.to_string(), "t attempt 2");
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::json!({"task": "t", "n": 2})
        );
    }
}
