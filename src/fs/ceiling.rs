//! Benchmarks only (cargo feature `bench-ceiling`, off by default): the FUSE ceiling file.
//!
//! With `H5MOUNT_BENCH_CEILING_MIB=N` in the daemon's environment, the root also holds a
//! hidden file `/.h5mount-ceiling` of N MiB answered by the FUSE adapter straight from one
//! buffer, with the same threads, request sizes and cache flags as datasets: the fastest any
//! read path of this daemon can be, the reference `mount-tests/bench/run` compares
//! uncompressed datasets against. Production builds contain none of this.

use fuser::{FileAttr, FileType, INodeNo};

use super::attr::Attr;
use super::fuse::file_attr;

/// The environment variable that turns on the ceiling file (its size in MiB).
pub const ENV: &str = "H5MOUNT_BENCH_CEILING_MIB";
/// Name of the ceiling file in the root directory (not listed).
pub const NAME: &str = ".h5mount-ceiling";
/// Its inode: the top of the sidecar range, which no dataset inode of a real file reaches.
pub const INO: u64 = u64::MAX;
/// Largest ceiling file accepted.
const MAX_MIB: u64 = 4096;

/// A trivial memory-backed file answered straight from one buffer.
pub struct Ceiling {
    data: Vec<u8>,
}

impl Ceiling {
    /// From [`ENV`], if set to a size from 1 to [`MAX_MIB`] MiB.
    pub fn from_env() -> Option<Ceiling> {
        let mib: u64 = std::env::var(ENV).ok()?.trim().parse().ok()?;
        if mib == 0 || mib > MAX_MIB {
            return None;
        }
        let len = usize::try_from(mib << 20).ok()?;
        // Non-zero bytes, so no layer can take a shortcut for zero pages.
        let data = (0..len).map(|i| (i % 251) as u8 | 1).collect();
        Some(Ceiling { data })
    }

    /// Its attributes: a read-only regular file owned like the root.
    pub fn attr(&self, root: &Attr) -> FileAttr {
        let mut a = file_attr(root);
        a.ino = INodeNo(INO);
        a.size = self.data.len() as u64;
        a.blocks = a.size.div_ceil(512);
        a.kind = FileType::RegularFile;
        a.perm = 0o444;
        a.nlink = 1;
        a
    }

    /// The bytes of a read at `offset` of at most `size` bytes (empty past the end).
    pub fn read(&self, offset: u64, size: u32) -> &[u8] {
        let start = usize::try_from(offset).map_or(self.data.len(), |o| o.min(self.data.len()));
        let end = start.saturating_add(size as usize).min(self.data.len());
        &self.data[start..end]
    }
}
