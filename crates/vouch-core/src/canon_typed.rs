//! RFC 8785 canonical JSON written straight from a `Serialize` type, with no
//! `serde_json::Value` in between: the journal's typed events are canonicalized this way once
//! each, for the chain's hash.
//!
//! It writes what [`crate::canonical_json`] writes for `serde_json::to_value(v)`: object
//! members sorted by the UTF-16 code units of their names, strings escaped as `JSON.stringify`
//! escapes them, integers up to 2^53 as their digits. What it cannot promise to write alike it
//! refuses instead ([`TypedCanonError`]), and the caller takes the `Value` path: a
//! floating-point number (its stored text may read back one ULP away, so the hash is taken of
//! what is read back), an integer beyond 2^53, a map key that is not text or an integer, and
//! an object naming a member twice.

use serde::ser::{self, Serialize};

/// Why a value was not written by the typed path; the `Value` path writes it instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("not canonicalized from its type: {0}")]
pub struct TypedCanonError(String);

impl ser::Error for TypedCanonError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        TypedCanonError(msg.to_string())
    }
}

fn refuse<T>(what: &str) -> Result<T, TypedCanonError> {
    Err(TypedCanonError(what.to_string()))
}

/// The canonical JSON of `v`, written from its type; see the module's documentation for what
/// it refuses.
pub fn canonical_typed<T: Serialize + ?Sized>(v: &T) -> Result<String, TypedCanonError> {
    let mut w = Writer {
        out: String::with_capacity(256),
        members: Vec::new(),
        keys: String::new(),
        scratch: String::new(),
    };
    v.serialize(&mut w)?;
    Ok(w.out)
}

/// One object member written to `out`: its name in `keys[key]`, its `"name":value` text in
/// `out[text]`.
struct Member {
    key: (usize, usize),
    text: (usize, usize),
}

/// The output and the stacks the objects being written share (an object's members sit above
/// its enclosing object's until it is closed), so no object allocates on its own.
struct Writer {
    out: String,
    members: Vec<Member>,
    keys: String,
    scratch: String,
}

/// An object being written: where its members start on the stacks and in `out`.
struct Object<'w> {
    w: &'w mut Writer,
    first_member: usize,
    keys_mark: usize,
    /// The index in `out` after the object's `{`.
    body: usize,
    /// A struct variant's object closes a second, enclosing object (`{"variant":{...}}`).
    variant: bool,
}

impl Writer {
    fn open_object(&mut self, variant: Option<&'static str>) -> Object<'_> {
        if let Some(name) = variant {
            self.out.push('{');
            crate::write_canonical_str(name, &mut self.out);
            self.out.push(':');
        }
        self.out.push('{');
        Object {
            first_member: self.members.len(),
            keys_mark: self.keys.len(),
            body: self.out.len(),
            variant: variant.is_some(),
            w: self,
        }
    }

    fn number_u64(&mut self, n: u64) -> Result<(), TypedCanonError> {
        if n > 1 << 53 {
            return refuse("an integer beyond 2^53");
        }
        let mut buf = [0u8; 20];
        let mut at = buf.len();
        let mut n = n;
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &buf[at..] {
            self.out.push(char::from(d));
        }
        Ok(())
    }

    fn number_i64(&mut self, n: i64) -> Result<(), TypedCanonError> {
        if n < 0 {
            if n.unsigned_abs() > 1 << 53 {
                return refuse("an integer beyond 2^53");
            }
            self.out.push('-');
        }
        self.number_u64(n.unsigned_abs())
    }
}

impl Object<'_> {
    /// Start a member named `key` (its value is written next, straight to `out`).
    fn key(&mut self, key: &str) {
        let w = &mut *self.w;
        if w.members.len() > self.first_member {
            w.out.push(',');
        }
        let k0 = w.keys.len();
        w.keys.push_str(key);
        let t0 = w.out.len();
        crate::write_canonical_str(key, &mut w.out);
        w.out.push(':');
        w.members.push(Member {
            key: (k0, w.keys.len()),
            text: (t0, t0),
        });
    }

    /// The member started last is written up to here.
    fn value_written(&mut self) {
        let end = self.w.out.len();
        if let Some(m) = self.w.members.last_mut() {
            m.text.1 = end;
        }
    }

    /// Put the members in canonical order and close the object.
    fn close(self) -> Result<(), TypedCanonError> {
        let w = self.w;
        let members = &mut w.members[self.first_member..];
        let keys = w.keys.as_str();
        let name = |m: &Member| &keys[m.key.0..m.key.1];
        let sorted = members
            .windows(2)
            .all(|p| crate::canon::utf16_order(name(&p[0]), name(&p[1])).is_lt());
        if !sorted {
            members.sort_unstable_by(|a, b| crate::canon::utf16_order(name(a), name(b)));
            if members.windows(2).any(|p| name(&p[0]) == name(&p[1])) {
                return refuse("an object naming a member twice");
            }
            w.scratch.clear();
            w.scratch.push_str(&w.out[self.body..]);
            w.out.truncate(self.body);
            for (i, m) in members.iter().enumerate() {
                if i > 0 {
                    w.out.push(',');
                }
                let (a, b) = (m.text.0 - self.body, m.text.1 - self.body);
                w.out.push_str(&w.scratch[a..b]);
            }
        }
        w.members.truncate(self.first_member);
        w.keys.truncate(self.keys_mark);
        w.out.push('}');
        if self.variant {
            w.out.push('}');
        }
        Ok(())
    }
}

/// An array being written; `variant`: a tuple variant's array closes an enclosing object too.
struct Array<'w> {
    w: &'w mut Writer,
    first: bool,
    variant: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), TypedCanonError> {
        if !self.first {
            self.w.out.push(',');
        }
        self.first = false;
        v.serialize(&mut *self.w)
    }

    fn close(self) -> Result<(), TypedCanonError> {
        self.w.out.push(']');
        if self.variant {
            self.w.out.push('}');
        }
        Ok(())
    }
}

impl<'w> ser::Serializer for &'w mut Writer {
    type Ok = ();
    type Error = TypedCanonError;
    type SerializeSeq = Array<'w>;
    type SerializeTuple = Array<'w>;
    type SerializeTupleStruct = Array<'w>;
    type SerializeTupleVariant = Array<'w>;
    type SerializeMap = Object<'w>;
    type SerializeStruct = Object<'w>;
    type SerializeStructVariant = Object<'w>;

    fn serialize_bool(self, v: bool) -> Result<(), TypedCanonError> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), TypedCanonError> {
        self.number_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), TypedCanonError> {
        self.number_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), TypedCanonError> {
        self.number_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), TypedCanonError> {
        self.number_i64(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), TypedCanonError> {
        self.number_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), TypedCanonError> {
        self.number_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), TypedCanonError> {
        self.number_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), TypedCanonError> {
        self.number_u64(v)
    }
    fn serialize_f32(self, _: f32) -> Result<(), TypedCanonError> {
        refuse("a floating-point number")
    }
    fn serialize_f64(self, _: f64) -> Result<(), TypedCanonError> {
        refuse("a floating-point number")
    }
    fn serialize_char(self, v: char) -> Result<(), TypedCanonError> {
        crate::write_canonical_str(v.encode_utf8(&mut [0u8; 4]), &mut self.out);
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), TypedCanonError> {
        crate::write_canonical_str(v, &mut self.out);
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), TypedCanonError> {
        refuse("bytes")
    }
    fn serialize_none(self) -> Result<(), TypedCanonError> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), TypedCanonError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), TypedCanonError> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), TypedCanonError> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), TypedCanonError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), TypedCanonError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), TypedCanonError> {
        self.out.push('{');
        crate::write_canonical_str(variant, &mut self.out);
        self.out.push(':');
        v.serialize(&mut *self)?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'w>, TypedCanonError> {
        self.out.push('[');
        Ok(Array {
            w: self,
            first: true,
            variant: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'w>, TypedCanonError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Array<'w>, TypedCanonError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Array<'w>, TypedCanonError> {
        self.out.push('{');
        crate::write_canonical_str(variant, &mut self.out);
        self.out.push_str(":[");
        Ok(Array {
            w: self,
            first: true,
            variant: true,
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Object<'w>, TypedCanonError> {
        Ok(self.open_object(None))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Object<'w>, TypedCanonError> {
        Ok(self.open_object(None))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Object<'w>, TypedCanonError> {
        Ok(self.open_object(Some(variant)))
    }
}

macro_rules! array_impl {
    ($($tr:ident :: $m:ident),*) => {$(
        impl ser::$tr for Array<'_> {
            type Ok = ();
            type Error = TypedCanonError;
            fn $m<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), TypedCanonError> {
                self.element(v)
            }
            fn end(self) -> Result<(), TypedCanonError> {
                self.close()
            }
        }
    )*};
}
array_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

macro_rules! struct_impl {
    ($($tr:ident),*) => {$(
        impl ser::$tr for Object<'_> {
            type Ok = ();
            type Error = TypedCanonError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result<(), TypedCanonError> {
                self.key(key);
                v.serialize(&mut *self.w)?;
                self.value_written();
                Ok(())
            }
            fn end(self) -> Result<(), TypedCanonError> {
                self.close()
            }
        }
    )*};
}
struct_impl!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = TypedCanonError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), TypedCanonError> {
        let name = key.serialize(KeyText)?;
        self.key(&name);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), TypedCanonError> {
        v.serialize(&mut *self.w)?;
        self.value_written();
        Ok(())
    }
    fn end(self) -> Result<(), TypedCanonError> {
        self.close()
    }
}

/// A map key as the member name `serde_json` gives it: text as it is, an integer as its
/// digits; anything else is refused.
struct KeyText;

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = TypedCanonError;
    type SerializeSeq = ser::Impossible<String, TypedCanonError>;
    type SerializeTuple = ser::Impossible<String, TypedCanonError>;
    type SerializeTupleStruct = ser::Impossible<String, TypedCanonError>;
    type SerializeTupleVariant = ser::Impossible<String, TypedCanonError>;
    type SerializeMap = ser::Impossible<String, TypedCanonError>;
    type SerializeStruct = ser::Impossible<String, TypedCanonError>;
    type SerializeStructVariant = ser::Impossible<String, TypedCanonError>;

    fn serialize_str(self, v: &str) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_char(self, v: char) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, TypedCanonError> {
        Ok(variant.to_string())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<String, TypedCanonError> {
        v.serialize(self)
    }
    fn serialize_i8(self, v: i8) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, TypedCanonError> {
        Ok(v.to_string())
    }
    fn serialize_bool(self, _: bool) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_f32(self, _: f32) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_f64(self, _: f64) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_none(self) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_unit(self) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, TypedCanonError> {
        refuse("a map key that is not text")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, TypedCanonError> {
        refuse("a map key that is not text")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Serialize;
    use std::collections::BTreeMap;

    /// What the `Value` path writes for `v`.
    fn by_value<T: Serialize>(v: &T) -> String {
        let value = serde_json::to_value(v).expect("to_value");
        serde_json_canonicalizer::to_string(&value).expect("independent canonical")
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        Accepted { reference: String },
        Lost { reason: String, tries: u32 },
    }

    #[derive(Serialize)]
    enum Plain {
        Unit,
        New(i64),
        Tuple(u8, String),
        Struct { z: bool, a: Option<String> },
    }

    #[derive(Serialize)]
    struct Wide {
        zeta: String,
        alpha: Vec<Plain>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        mid: BTreeMap<String, i64>,
        tagged: Tagged,
        value: serde_json::Value,
        numbered: BTreeMap<u32, bool>,
        unit: (),
        chars: (char, char),
        #[serde(rename = "é")]
        accent: i8,
        #[serde(rename = "\u{e000}")]
        private_use: i16,
        #[serde(rename = "😀")]
        astral: u16,
    }

    fn wide(s: String, n: i64, map: BTreeMap<String, i64>) -> Wide {
        Wide {
            zeta: s.clone(),
            alpha: vec![
                Plain::Unit,
                Plain::New(n),
                Plain::Tuple(7, s.clone()),
                Plain::Struct {
                    z: true,
                    a: Some(s.clone()),
                },
            ],
            skipped: None,
            mid: map.clone(),
            tagged: if n % 2 == 0 {
                Tagged::Accepted { reference: s }
            } else {
                Tagged::Lost {
                    reason: s,
                    tries: 3,
                }
            },
            value: serde_json::to_value(&map).expect("map"),
            numbered: [(3, true), (20, false), (100, true)].into_iter().collect(),
            unit: (),
            chars: ('"', '\u{1f}'),
            accent: -1,
            private_use: 2,
            astral: 3,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// The typed writer agrees with an independent RFC 8785 implementation of the value the
        /// type serializes to.
        #[test]
        fn typed_equals_the_value_path(
            s in "[a-z\"\\\\\u{0}-\u{1f}\u{7f}é€\u{e000}\u{ffff}😀]{0,8}",
            n in -(1i64 << 53)..=(1i64 << 53),
            map in proptest::collection::btree_map("[a-zé\u{e000}😀\u{0}]{0,3}", any::<i32>().prop_map(i64::from), 0..20),
        ) {
            let w = wide(s, n, map);
            prop_assert_eq!(canonical_typed(&w).expect("typed"), by_value(&w));
        }
    }

    #[test]
    fn what_it_cannot_write_alike_it_refuses() {
        assert!(canonical_typed(&0.5f64).is_err());
        assert!(canonical_typed(&serde_json::json!({"a": [1, 2.5]})).is_err());
        assert!(canonical_typed(&((1u64 << 53) + 1)).is_err());
        assert!(canonical_typed(&(-(1i64 << 53) - 1)).is_err());
        assert_eq!(
            canonical_typed(&(1u64 << 53)).ok(),
            Some(by_value(&(1u64 << 53)))
        );
        let bool_keys: BTreeMap<bool, u8> = [(true, 1)].into_iter().collect();
        assert!(canonical_typed(&bool_keys).is_err());
        #[derive(Serialize)]
        struct Twice {
            a: u8,
            #[serde(flatten)]
            more: BTreeMap<String, u8>,
        }
        let twice = Twice {
            a: 1,
            more: [("a".to_string(), 2)].into_iter().collect(),
        };
        assert!(canonical_typed(&twice).is_err(), "a member named twice");
    }
}
