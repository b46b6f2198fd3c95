//! Reading a file someone named (a script, a routine, an input, a payload, a type file) with a
//! byte limit: the read stops one byte past the limit, so `/dev/zero`, a FIFO or a file that
//! grows while it is read costs at most the limit in memory, never all of it.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Bytes an input file given on the command line (`--script`, `--routine`, `--input`,
/// `--payload`) holds at most: twice a payload (1 MiB), and no more than one turn
/// (`host::TURN_BYTES_MAX`), so whatever a script says fits the journal.
pub const INPUT_FILE_BYTES_MAX: u64 = 2 << 20;

/// Bytes a secret's file (a model key, a destination's password) holds at most: a key is a
/// line; a file named by mistake (`/dev/zero`, a log) is refused at the limit, not read whole.
pub const SECRET_FILE_BYTES_MAX: u64 = 64 << 10;

/// Why a file could not be read; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{what} {}: more than {bytes_max} bytes (the limit); give a smaller file", path.display())]
    TooLarge {
        what: String,
        path: PathBuf,
        bytes_max: u64,
    },
    #[error("cannot read {what} {}: {source}", path.display())]
    Io {
        what: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Read at most `bytes_max` bytes of `path` as UTF-8 text; `what` names the file for people
/// ("script", "routine").
pub fn read_text(path: &Path, what: &str, bytes_max: u64) -> Result<String, ReadError> {
    let bytes = read_bytes(path, what, bytes_max)?;
    String::from_utf8(bytes).map_err(|e| ReadError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// Read at most `bytes_max` bytes of `path`, refusing a longer file at the limit.
pub fn read_bytes(path: &Path, what: &str, bytes_max: u64) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    f.take(bytes_max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > bytes_max {
        return Err(ReadError::TooLarge {
            what: what.to_string(),
            path: path.to_path_buf(),
            bytes_max,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_read_only_to_the_limit() {
        let e = read_text(Path::new("/dev/zero"), "script", 1024).unwrap_err();
        assert!(matches!(
            e,
            ReadError::TooLarge {
                bytes_max: 1024,
                ..
            }
        ));
        let text = e.to_string();
        assert!(
            text.contains("/dev/zero") && text.contains("1024"),
            "{text}"
        );
    }

    #[test]
    fn a_file_at_the_limit_reads_and_one_byte_more_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "abcd").unwrap();
        assert_eq!(read_text(&p, "input", 4).unwrap(), "abcd");
        assert!(matches!(
            read_text(&p, "input", 3),
            Err(ReadError::TooLarge { .. })
        ));
        assert!(matches!(
            read_text(&dir.path().join("missing"), "input", 3),
            Err(ReadError::Io { .. })
        ));
    }
}
