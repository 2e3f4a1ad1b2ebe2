//! Errors of filesystem operations and the one table that turns them into errno values.
//!
//! An operation fails either with a plain condition the filesystem itself decides (no such
//! entry, read-only, buffer too small: [`FsError::Errno`]) or with a library [`Error`] met while
//! serving an object ([`FsError::Model`]). The second kind carries the object path so the
//! adapter can log it once per object; [`errno_of`] is the single exhaustive mapping from
//! [`ErrorClass`] to errno, so a new class cannot be forgotten.

use crate::error::{Error, ErrorClass};

/// Why a filesystem operation failed.
#[derive(Debug)]
pub enum FsError {
    /// A condition decided by the filesystem itself (ENOENT, EROFS, ERANGE, ENODATA...).
    Errno(i32),
    /// The library failed while serving `path`.
    Model { path: String, error: Error },
}

impl FsError {
    /// Wrap a library error met while serving the object at `path`.
    pub fn model(path: &str, error: Error) -> FsError {
        FsError::Model {
            path: path.to_string(),
            error,
        }
    }

    /// The errno reported to the kernel.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::Errno(e) => *e,
            FsError::Model { error, .. } => errno_of(error.errno_class()),
        }
    }
}

/// Result of a filesystem operation.
pub type FsResult<T> = std::result::Result<T, FsError>;

/// The errno for each error class: the only place this mapping exists.
pub fn errno_of(class: ErrorClass) -> i32 {
    match class {
        ErrorClass::Io => libc::EIO,
        ErrorClass::Unsupported => libc::EOPNOTSUPP,
        ErrorClass::NotFound => libc::ENOENT,
        ErrorClass::Invalid => libc::EINVAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_map_to_errno() {
        let e = FsError::model("/a", Error::corrupt("object header", 0x40, "bad"));
        assert_eq!(e.errno(), libc::EIO);
        let e = FsError::model("/a", Error::unsupported("layout", "virtual"));
        assert_eq!(e.errno(), libc::EOPNOTSUPP);
        let e = FsError::model("/a", Error::NotFound("x".into()).in_object("/a"));
        assert_eq!(e.errno(), libc::ENOENT);
        assert_eq!(FsError::Errno(libc::EROFS).errno(), libc::EROFS);
    }
}
