//! Positioned reads of an HDF5 file with bounds checks, through its [`ByteSource`].
//!
//! Addresses passed to [`Storage::read_at`] are *relative* HDF5 addresses; the base address
//! (non-zero after a user block) is added here, so no other code has to think about it.

use std::path::Path;
use std::sync::Arc;

use super::source::{ByteSource, DataHint, LocalFile};
use crate::error::{Error, Result};

pub use super::source::open_data_file;

/// Data hints held back on a thread: the source they are for (by address) and their
/// absolute ranges.
type Holding = Option<(usize, Vec<(u64, u64)>)>;

thread_local! {
    /// This thread's held-back data hints ([`Storage::gather_data_hints`]).
    static GATHERED: std::cell::RefCell<Holding> = const { std::cell::RefCell::new(None) };
}

/// Data ranges (absolute) held back by [`Storage::gather_data_hints`], to be given to the
/// source at once by [`Storage::give`].
#[derive(Debug, Default)]
pub struct Gathered(Vec<(u64, u64)>);

impl Gathered {
    /// Add `other`'s ranges to these.
    pub fn append(&mut self, mut other: Gathered) {
        self.0.append(&mut other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A shared, cheaply clonable handle on a byte source plus the base address for HDF5
/// addresses.
#[derive(Clone, Debug)]
pub struct Storage {
    inner: Arc<dyn ByteSource>,
    base: u64,
    /// What data reads through this handle belong to (see [`Storage::for_dataset`]).
    hint: DataHint,
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
        }
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

    /// Whether the source wants [`Storage::prefetch`] hints (see
    /// [`ByteSource::wants_hints`]).
    pub fn wants_hints(&self) -> bool {
        self.inner.wants_hints()
    }

    /// Hint that the ranges `(relative address, length)` will be read soon.
    pub fn prefetch(&self, ranges: &[(u64, u64)]) {
        let abs: Vec<(u64, u64)> = ranges
            .iter()
            .filter_map(|&(a, n)| Some((self.base.checked_add(a)?, n)))
            .collect();
        if !abs.is_empty() {
            self.inner.prefetch(&abs);
        }
    }

    /// Hint that the data ranges `(relative address, length)` will be read soon, as
    /// [`Storage::prefetch`], unless this thread is gathering data hints for this file's
    /// source ([`Storage::gather_data_hints`]): then they are held back.
    pub fn prefetch_data(&self, ranges: &[(u64, u64)]) {
        let abs: Vec<(u64, u64)> = ranges
            .iter()
            .filter_map(|&(a, n)| Some((self.base.checked_add(a)?, n)))
            .collect();
        let key = self.source_key();
        let held = GATHERED.with(|g| match g.borrow_mut().as_mut() {
            Some((k, v)) if *k == key => {
                v.extend_from_slice(&abs);
                true
            }
            _ => false,
        });
        if !held && !abs.is_empty() {
            self.inner.prefetch(&abs);
        }
    }

    /// Run `f` with the data hints it gives this file's source on this thread
    /// ([`Storage::prefetch_data`]) held back and returned, so that the hints of several
    /// datasets go to the source together ([`Storage::give`]): one request for the
    /// neighbouring data of several, not one each. Other hints (a chunk index's nodes,
    /// which the lookups that follow them read) go out at once.
    pub fn gather_data_hints<R>(&self, f: impl FnOnce() -> R) -> (R, Gathered) {
        struct Restore(Holding);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                GATHERED.with(|g| *g.borrow_mut() = prev);
            }
        }
        let prev = GATHERED.with(|g| g.borrow_mut().replace((self.source_key(), Vec::new())));
        let restore = Restore(prev);
        let r = f();
        let got = GATHERED.with(|g| g.borrow_mut().take());
        drop(restore);
        (r, Gathered(got.map(|(_, v)| v).unwrap_or_default()))
    }

    /// Give the source the data hints `gathered` ([`Storage::gather_data_hints`]) at once.
    pub fn give(&self, gathered: Gathered) {
        let mut ranges = gathered.0;
        if !ranges.is_empty() {
            ranges.sort_unstable();
            ranges.dedup();
            self.inner.prefetch(&ranges);
        }
    }

    /// The source's identity for [`GATHERED`]: its address.
    fn source_key(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }

    /// Note that a reader reads the data at relative addresses `addr..end` now (see
    /// [`ByteSource::note_data`]).
    pub fn note_data(&self, addr: u64, end: u64) {
        if let (Some(a), Some(e)) = (self.base.checked_add(addr), self.base.checked_add(end)) {
            self.inner.note_data(a, e, &self.hint);
        }
    }

    /// Fill `buf` from relative address `addr`. Fails with [`Error::Truncated`] if the range is
    /// not entirely inside the file.
    pub fn read_at(&self, addr: u64, buf: &mut [u8], what: &'static str) -> Result<()> {
        self.read_impl(addr, buf, what, false)
    }

    /// [`Storage::read_at`] for the bytes of a dataset (chunks, contiguous data), which a
    /// remote source reads ahead of a sequential reader and caches apart from metadata.
    pub fn read_data(&self, addr: u64, buf: &mut [u8], what: &'static str) -> Result<()> {
        self.read_impl(addr, buf, what, true)
    }

    fn read_impl(&self, addr: u64, buf: &mut [u8], what: &'static str, data: bool) -> Result<()> {
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
            let got = if data {
                self.inner.read_data_at(at, &mut buf[done..], &self.hint)
            } else {
                self.inner.read_at(at, &mut buf[done..])
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

    /// A source that records the prefetch calls it gets.
    #[derive(Debug, Default)]
    struct Hinted(std::sync::Mutex<Vec<Vec<(u64, u64)>>>);

    impl ByteSource for Hinted {
        fn len(&self) -> u64 {
            1 << 20
        }
        fn read_at(&self, _offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            Ok(buf.len())
        }
        fn prefetch(&self, ranges: &[(u64, u64)]) {
            self.0.lock().unwrap().push(ranges.to_vec());
        }
        fn wants_hints(&self) -> bool {
            true
        }
        fn identity(&self) -> String {
            "hinted".into()
        }
        fn name(&self) -> String {
            "hinted".into()
        }
    }

    #[test]
    fn gathered_data_hints_go_to_the_source_together_and_others_at_once() {
        let src = Arc::new(Hinted::default());
        let s = Storage::from_source(src.clone()).with_base(100);
        let other = Storage::from_source(Arc::new(Hinted::default()));
        let calls = || src.0.lock().unwrap().clone();
        let (_, a) = s.gather_data_hints(|| {
            s.prefetch_data(&[(50, 10)]);
            // Not data (an index's nodes): at once.
            s.prefetch(&[(0, 5)]);
            // Another source's data: not held back here.
            other.prefetch_data(&[(7, 7)]);
        });
        let (_, b) = s.gather_data_hints(|| s.prefetch_data(&[(10, 10), (50, 10)]));
        assert_eq!(calls(), [vec![(100, 5)]]);
        let mut all = a;
        all.append(b);
        s.give(all);
        // Absolute, sorted, once each.
        assert_eq!(calls(), [vec![(100, 5)], vec![(110, 10), (150, 10)]]);
        // Outside gathering: at once.
        s.prefetch_data(&[(1, 1)]);
        assert_eq!(calls().last(), Some(&vec![(101, 1)]));
    }
}
