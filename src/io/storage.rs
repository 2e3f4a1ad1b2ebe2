//! Positioned reads (`pread`) of the HDF5 file with bounds checks.
//!
//! We never mmap the file: a file truncated while mounted must give an error, not SIGBUS.
//! Addresses passed to [`Storage::read_at`] are *relative* HDF5 addresses; the base address
//! (non-zero after a user block) is added here, so no other code has to think about it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Open `path` for reading if it is a regular file (or a block device). A name that leads to
/// a FIFO, socket or character device is refused before anything reads it: opening a FIFO
/// blocks until a writer appears, which would hang the request (and a mount's worker) that
/// followed a link to it. The open itself does not block (`O_NONBLOCK`, which has no effect
/// on regular files and block devices).
pub fn open_data_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let ft = file.metadata()?.file_type();
    if ft.is_file() || ft.is_block_device() {
        Ok(file)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ))
    }
}

/// A shared, cheaply clonable handle on an open file plus the base address for HDF5 addresses.
#[derive(Clone, Debug)]
pub struct Storage {
    inner: Arc<Inner>,
    base: u64,
}

#[derive(Debug)]
struct Inner {
    file: File,
    len: u64,
    path: PathBuf,
}

impl Storage {
    /// Open a file for reading. The length is taken once; later growth is not seen.
    pub fn open(path: &Path) -> std::io::Result<Storage> {
        let file = open_data_file(path)?;
        let len = file.metadata()?.len();
        Ok(Storage {
            inner: Arc::new(Inner {
                file,
                len,
                path: path.to_path_buf(),
            }),
            base: 0,
        })
    }

    /// The same file with a different base address (relative address 0 = absolute `base`).
    pub fn with_base(&self, base: u64) -> Storage {
        Storage {
            inner: self.inner.clone(),
            base,
        }
    }

    /// The base address added to every relative address.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Length of the file in bytes (absolute, including any user block).
    pub fn file_len(&self) -> u64 {
        self.inner.len
    }

    /// Number of bytes available from relative address `addr` to the end of the file.
    pub fn available(&self, addr: u64) -> u64 {
        match self.base.checked_add(addr) {
            Some(abs) => self.inner.len.saturating_sub(abs),
            None => 0,
        }
    }

    /// Fill `buf` from relative address `addr`. Fails with [`Error::Truncated`] if the range is
    /// not entirely inside the file.
    pub fn read_at(&self, addr: u64, buf: &mut [u8], what: &'static str) -> Result<()> {
        let len = buf.len() as u64;
        let abs = self
            .base
            .checked_add(addr)
            .filter(|a| a.checked_add(len).is_some_and(|end| end <= self.inner.len))
            .ok_or(Error::Truncated { what, addr })?;
        let mut done = 0usize;
        while done < buf.len() {
            match self.inner.file.read_at(&mut buf[done..], abs + done as u64) {
                Ok(0) => return Err(Error::Truncated { what, addr }),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        what,
                        addr,
                        len,
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    /// Read `len` bytes at relative address `addr` into a new vector. The length is checked
    /// against the file before allocating, so a corrupt length cannot cause a huge allocation.
    pub fn read_vec(&self, addr: u64, len: u64, what: &'static str) -> Result<Vec<u8>> {
        if len > self.available(addr) {
            return Err(Error::Truncated { what, addr });
        }
        let mut v = vec![0u8; len as usize];
        self.read_at(addr, &mut v, what)?;
        Ok(v)
    }

    /// Read `len` bytes at `addr` whose last four bytes are the lookup3 checksum of the rest
    /// (every version-2 structure of the format), and verify it.
    pub fn read_checksummed(&self, addr: u64, len: u64, what: &'static str) -> Result<Vec<u8>> {
        let buf = self.read_vec(addr, len, what)?;
        if !crate::io::checksum::verify_lookup3(&buf) {
            return Err(Error::Checksum { what, addr });
        }
        Ok(buf)
    }

    /// Read up to `len` bytes at `addr`, fewer if the file ends first (used when a structure's
    /// size is not known in advance, e.g. an object header prefix).
    pub fn read_up_to(&self, addr: u64, len: u64, what: &'static str) -> Result<Vec<u8>> {
        let n = len.min(self.available(addr));
        if n == 0 && len > 0 {
            return Err(Error::Truncated { what, addr });
        }
        self.read_vec(addr, n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        // No writer ever opens it: a blocking open would hang this test.
        let e = Storage::open(&fifo).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(
            Storage::open(Path::new("/dev/null")).is_err(),
            "character device"
        );
        let plain = dir.path().join("f");
        std::fs::write(&plain, b"abc").unwrap();
        assert_eq!(Storage::open(&plain).unwrap().file_len(), 3);
    }
}
