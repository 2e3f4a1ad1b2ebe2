//! The library's error type and its classification.
//!
//! Every layer below `fs` returns [`Error`]. Each variant names the structure that failed and
//! its file address, so one log line is enough to find the fault. The `fs` layer maps
//! [`Error::errno_class`] to an errno in one place.

use std::fmt;

/// Result alias used by every layer of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How an error should be reported to a caller that only understands errno values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The bytes could not be read or did not decode: EIO.
    Io,
    /// A valid feature this reader does not implement: EOPNOTSUPP.
    Unsupported,
    /// A path or name that does not exist: ENOENT.
    NotFound,
    /// The caller asked for something meaningless (bad argument): EINVAL.
    Invalid,
}

/// Errors from reading and decoding an HDF5 file.
/// Errors are `Clone` (a cached failure is answered to every waiter), so the operating
/// system's error is kept shared.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// The operating system failed a read.
    #[error("I/O error reading {len} bytes at {addr:#x} ({what}): {source}")]
    Io {
        what: &'static str,
        addr: u64,
        len: u64,
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// A file could not be opened (the message of `source` names it).
    #[error("cannot open {what}: {source}")]
    Open {
        what: &'static str,
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// A structure extends past the end of the file (or of its enclosing block): `need`
    /// bytes were wanted at `offset` bytes into the structure at `addr`, `have` were there.
    #[error(
        "{what} at {addr:#x} is truncated: {need} bytes needed at offset {offset}, {have} there"
    )]
    Truncated {
        what: &'static str,
        addr: u64,
        offset: u64,
        need: u64,
        have: u64,
    },
    /// A byte image (a dataset's, read whole by a tool) ended before its length.
    #[error("{what} ended after {got} of {want} bytes")]
    ShortImage {
        what: &'static str,
        got: u64,
        want: u64,
    },
    /// A structure's bytes are inconsistent.
    #[error("corrupt {what} at {addr:#x}: {detail}")]
    Corrupt {
        what: &'static str,
        addr: u64,
        detail: String,
    },
    /// A stored checksum does not match the bytes.
    #[error("checksum mismatch in {what} at {addr:#x}")]
    Checksum { what: &'static str, addr: u64 },
    /// A bound that protects against hostile files was hit (depth, count, size).
    #[error("limit exceeded in {what} at {addr:#x}: {detail}")]
    Limit {
        what: &'static str,
        addr: u64,
        detail: String,
    },
    /// A feature of the format that is valid but not implemented.
    #[error("unsupported {what}: {detail}")]
    Unsupported { what: &'static str, detail: String },
    /// A filter failed to decode a chunk.
    #[error("filter {id} ({name}) failed on chunk at {addr:#x}: {detail}")]
    Filter {
        id: u16,
        name: &'static str,
        addr: u64,
        detail: String,
    },
    /// A filter is not available in this build.
    #[error("filter {id} ({name}) is not supported")]
    UnknownFilter { id: u16, name: String },
    /// A named object does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A caller error.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// An error annotated with the HDF5 object path it happened in.
    #[error("{path}: {source}")]
    InObject {
        path: String,
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(what: &'static str, addr: u64, detail: impl fmt::Display) -> Self {
        Error::Corrupt {
            what,
            addr,
            detail: detail.to_string(),
        }
    }

    /// Shorthand for [`Error::Truncated`] of a read of `need` bytes at `addr` (offset 0) with
    /// `have` bytes there.
    pub fn truncated(what: &'static str, addr: u64, need: u64, have: u64) -> Self {
        Error::Truncated {
            what,
            addr,
            offset: 0,
            need,
            have,
        }
    }

    /// Shorthand for [`Error::Limit`].
    pub fn limit(what: &'static str, addr: u64, detail: impl fmt::Display) -> Self {
        Error::Limit {
            what,
            addr,
            detail: detail.to_string(),
        }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(what: &'static str, detail: impl fmt::Display) -> Self {
        Error::Unsupported {
            what,
            detail: detail.to_string(),
        }
    }

    /// Wrap this error with the object path it concerns (idempotent: keeps the innermost path).
    pub fn in_object(self, path: impl Into<String>) -> Self {
        match self {
            e @ Error::InObject { .. } => e,
            e => Error::InObject {
                path: path.into(),
                source: Box::new(e),
            },
        }
    }

    /// How this error should be surfaced as an errno.
    pub fn errno_class(&self) -> ErrorClass {
        match self {
            Error::Io { .. }
            | Error::Truncated { .. }
            | Error::ShortImage { .. }
            | Error::Open { .. }
            | Error::Corrupt { .. }
            | Error::Checksum { .. }
            | Error::Limit { .. }
            | Error::Filter { .. } => ErrorClass::Io,
            Error::Unsupported { .. } | Error::UnknownFilter { .. } => ErrorClass::Unsupported,
            Error::NotFound(_) => ErrorClass::NotFound,
            Error::Invalid(_) => ErrorClass::Invalid,
            Error::InObject { source, .. } => source.errno_class(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clone (what every waiter of a failed cache load gets) keeps the operating system's
    /// error itself, shared, with its kind and text.
    #[test]
    fn clones_share_the_io_error() {
        let e = Error::Io {
            what: "chunk",
            addr: 0x10,
            len: 4,
            source: std::sync::Arc::new(std::io::Error::from_raw_os_error(libc::EIO)),
        }
        .in_object("/d");
        let c = e.clone();
        assert_eq!(c.to_string(), e.to_string());
        let (Error::InObject { source: a, .. }, Error::InObject { source: b, .. }) = (&e, &c)
        else {
            panic!("{e:?}")
        };
        let (Error::Io { source: a, .. }, Error::Io { source: b, .. }) = (&**a, &**b) else {
            panic!("{a:?}")
        };
        assert!(std::sync::Arc::ptr_eq(a, b));
        assert_eq!(b.raw_os_error(), Some(libc::EIO));
    }
}
