//! File attributes of mounted objects, in a fuser-free form the adapter converts.
//!
//! The HDF5 file is immutable while mounted, so attributes are computed once per inode and
//! cached by the caller. Modes are fixed: groups are `r-xr-xr-x` directories, datasets and
//! committed datatypes `r--r--r--` files, links `rwxrwxrwx` symlinks (the kernel ignores a
//! symlink's mode).

use std::time::SystemTime;

/// What the kernel sees an inode as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    RegularFile,
    Symlink,
}

/// Preferred I/O size reported in `st_blksize`: large, so that `cp`, `dd` and friends issue
/// reads the size of the kernel's maximum FUSE request (1 MiB) instead of 4 KiB.
pub const BLKSIZE: u32 = 1 << 20;

/// `st_blksize` of directories and symlinks.
pub const DIR_BLKSIZE: u32 = 4096;

/// The largest size the kernel accepts for a file (it refuses attributes with a larger
/// one, which would fail `stat` with `EIO`): sizes are signed there. A dataset of more bytes
/// (a never-written dataset of 2^61 four-byte elements has 2^63) shows this size.
pub const MAX_SIZE: u64 = i64::MAX as u64;

/// Attributes of one inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub size: u64,
    pub kind: FileKind,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: SystemTime,
}

impl Attr {
    /// Attributes for an inode of `kind` with the fixed mode of that kind; `size` at most
    /// [`MAX_SIZE`].
    pub fn new(ino: u64, kind: FileKind, size: u64, owner: (u32, u32), mtime: SystemTime) -> Attr {
        let perm = match kind {
            FileKind::Directory => 0o555,
            FileKind::RegularFile => 0o444,
            FileKind::Symlink => 0o777,
        };
        Attr {
            ino,
            size: size.min(MAX_SIZE),
            kind,
            perm,
            nlink: 1,
            uid: owner.0,
            gid: owner.1,
            mtime,
        }
    }

    /// Size in 512-byte blocks, as `st_blocks` counts.
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(512)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_blocks() {
        let t = SystemTime::UNIX_EPOCH;
        let a = Attr::new(5, FileKind::RegularFile, 513, (1, 2), t);
        assert_eq!(a.perm, 0o444);
        assert_eq!(a.blocks(), 2);
        assert_eq!(Attr::new(1, FileKind::Directory, 0, (0, 0), t).perm, 0o555);
        assert_eq!(Attr::new(9, FileKind::Symlink, 3, (0, 0), t).blocks(), 1);
        let huge = Attr::new(7, FileKind::RegularFile, 1 << 63, (0, 0), t);
        assert_eq!(huge.size, i64::MAX as u64);
        assert_eq!(huge.blocks(), 1 << 54);
    }
}
