//! Positioned reads of an HDF5 file with bounds checks, through its [`ByteSource`].
//!
//! Addresses passed to [`Storage::read_at`] are *relative* HDF5 addresses; the base address
//! (non-zero after a user block) is added here, so no other code has to think about it.

use std::path::Path;
use std::sync::Arc;

use super::source::{ByteSource, DataHint, LocalFile, ReadCtx};
use crate::error::{Error, Result};

pub use super::source::open_data_file;

/// A shared, cheaply clonable handle on a byte source plus the base address for HDF5
/// addresses.
#[derive(Clone, Debug)]
pub struct Storage {
    inner: Arc<dyn ByteSource>,
    base: u64,
    /// What data reads through this handle belong to (see [`Storage::for_dataset`]).
    hint: DataHint,
    /// For whom data reads through this handle are made (see [`Storage::for_read`]).
    ctx: ReadCtx,
}

impl Storage {
    /// Open a file on disk for reading. The length is taken once; later growth is not seen.
    pub fn open(path: &Path) -> std::io::Result<Storage> {
        Ok(Storage::from_source(Arc::new(LocalFile::open(path)?)))
    }

    /// Read from `source`.
    pub fn from_source(source: Arc<dyn ByteSource>) -> Storage {
        Storage {
            inner: source,
            base: 0,
            hint: DataHint::default(),
            ctx: ReadCtx::default(),
        }
    }

    /// The byte source.
    pub fn source(&self) -> &Arc<dyn ByteSource> {
        &self.inner
    }

    /// The same file with a different base address (relative address 0 = absolute `base`).
    pub fn with_base(&self, base: u64) -> Storage {
        Storage {
            inner: self.inner.clone(),
            base,
            hint: self.hint,
            ctx: self.ctx,
        }
    }

    /// The same file, for the data of one dataset: `object` is its object header address,
    /// `extent` its block `(relative address, length)` when it is stored as one. A remote
    /// source uses them to read ahead within the dataset ([`DataHint`]).
    pub fn for_dataset(&self, object: u64, extent: Option<(u64, u64)>) -> Storage {
        let extent = extent.and_then(|(a, n)| {
            let start = self.base.checked_add(a)?;
            Some((start, start.checked_add(n)?))
        });
        Storage {
            inner: self.inner.clone(),
            base: self.base,
            hint: DataHint { object, extent },
            ctx: self.ctx,
        }
    }

    /// The same file and dataset, for one read made for `ctx` (see [`ReadCtx`]): what its
    /// data reads and notes tell a remote source.
    pub fn for_read(&self, ctx: ReadCtx) -> Storage {
        Storage {
            inner: self.inner.clone(),
            base: self.base,
            hint: self.hint,
            ctx,
        }
    }

    /// For whom reads through this handle are made.
    pub fn ctx(&self) -> ReadCtx {
        self.ctx
    }

    /// The base address added to every relative address.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Length of the file in bytes (absolute, including any user block).
    pub fn file_len(&self) -> u64 {
        self.inner.len()
    }

    /// Number of bytes available from relative address `addr` to the end of the file.
    pub fn available(&self, addr: u64) -> u64 {
        match self.base.checked_add(addr) {
            Some(abs) => self.inner.len().saturating_sub(abs),
            None => 0,
        }
    }

    /// Whether every read costs a request (a remote source): the layers above then work
    /// out and send [`Storage::prefetch`] hints, which cost them some lookups.
    pub fn wants_hints(&self) -> bool {
        self.inner.remote().is_some()
    }

    /// See [`RemoteSource::warm_up`](super::RemoteSource::warm_up); nothing for a local
    /// source.
    pub fn warm_up(&self) {
        if let Some(r) = self.inner.remote() {
            r.warm_up();
        }
    }

    /// Hint that the ranges `(relative address, length)` will be read soon (nothing for a
    /// local source).
    pub fn prefetch(&self, ranges: &[(u64, u64)]) {
        let Some(r) = self.inner.remote() else {
            return;
        };
        let abs: Vec<(u64, u64)> = ranges
            .iter()
            .filter_map(|&(a, n)| Some((self.base.checked_add(a)?, n)))
            .collect();
        if !abs.is_empty() {
            r.prefetch(&abs);
        }
    }

    /// Whether every range `(relative address, length)` of `ranges` is here now, so that
    /// reading it costs no request: always for a local source (see
    /// [`RemoteSource::cached`](super::RemoteSource::cached)).
    pub fn cached(&self, ranges: &[(u64, u64)]) -> bool {
        let Some(r) = self.inner.remote() else {
            return true;
        };
        ranges
            .iter()
            .all(|&(a, n)| self.base.checked_add(a).is_some_and(|abs| r.cached(abs, n)))
    }

    /// Note that a reader reads the data at relative addresses `addr..end` now (see
    /// [`RemoteSource::note_data`](super::RemoteSource::note_data)).
    pub fn note_data(&self, addr: u64, end: u64) {
        let Some(r) = self.inner.remote() else {
            return;
        };
        if let (Some(a), Some(e)) = (self.base.checked_add(addr), self.base.checked_add(end)) {
            r.note_data(a, e, &self.hint, self.ctx);
        }
    }

    /// Fill `buf` from relative address `addr`. Fails with [`Error::Truncated`] if the range is
    /// not entirely inside the file.
    pub fn read_at(&self, addr: u64, buf: &mut [u8], what: &'static str) -> Result<()> {
        self.read_impl(addr, buf, what, ReadAs::Meta)
    }

    /// [`Storage::read_at`] for the bytes of a dataset (chunks, contiguous data), which a
    /// remote source reads ahead of a sequential reader and caches apart from metadata.
    pub fn read_data(&self, addr: u64, buf: &mut [u8], what: &'static str) -> Result<()> {
        self.read_impl(addr, buf, what, ReadAs::Data)
    }

    /// [`Storage::read_data`] for bytes the caller keeps in another form and reads no more
    /// (a chunk decoded into the chunk cache): a remote source lets their pages go
    /// ([`RemoteSource::read_data_once`](super::RemoteSource::read_data_once)).
    pub fn read_data_once(&self, addr: u64, buf: &mut [u8], what: &'static str) -> Result<()> {
        self.read_impl(addr, buf, what, ReadAs::Once)
    }

    fn read_impl(&self, addr: u64, buf: &mut [u8], what: &'static str, how: ReadAs) -> Result<()> {
        let len = buf.len() as u64;
        let abs = self
            .base
            .checked_add(addr)
            .filter(|a| {
                a.checked_add(len)
                    .is_some_and(|end| end <= self.inner.len())
            })
            .ok_or_else(|| Error::truncated(what, addr, len, self.available(addr)))?;
        let mut done = 0usize;
        while done < buf.len() {
            let at = abs + done as u64;
            let got = match (self.inner.remote(), how) {
                (Some(r), ReadAs::Data) => {
                    r.read_data_at(at, &mut buf[done..], &self.hint, self.ctx)
                }
                (Some(r), ReadAs::Once) => {
                    r.read_data_once(at, &mut buf[done..], &self.hint, self.ctx)
                }
                _ => self.inner.read_at(at, &mut buf[done..]),
            };
            match got {
                Ok(0) => {
                    // The source ended early (a file truncated while mounted).
                    return Err(Error::Truncated {
                        what,
                        addr,
                        offset: done as u64,
                        need: len - done as u64,
                        have: 0,
                    });
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        what,
                        addr,
                        len,
                        source: Arc::new(source),
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
            return Err(Error::truncated(what, addr, len, self.available(addr)));
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
            return Err(Error::truncated(what, addr, len, 0));
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

/// How [`Storage::read_impl`] reads: metadata, dataset bytes, or dataset bytes read once.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadAs {
    Meta,
    Data,
    Once,
}
