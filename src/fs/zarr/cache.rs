//! The caches of the Zarr tree: built arrays ([`ZarrArray`], whose building reads the
//! dataset's header and attributes) and the bytes of recently read chunk keys. Both load
//! through the crate's single flight (`crate::sync::flight`): however many readers miss the
//! same entry at once, it is built or read once. And the listings of key directories.
//!
//! Bounds. Arrays: at most [`MAX_ARRAYS`], least recently used out first. An array holds its
//! dataset and with it the dataset's file open, so an entry is kept with the file it was
//! built from (weakly): when the mount's resolver has closed that file (its bound on open
//! files), the entry is stale, rebuilt at its next use and swept out at the next insert, so
//! the cache does not keep closed files open for long. Chunks: at most [`CHUNK_BUDGET`]
//! bytes, least recently used out first; the newest chunk is kept even when it alone is
//! larger, so that the reads of one large chunk key, a piece at a time, decode it once.
//! Listings of array and key directories: at most [`LISTED_ENTRIES`] entries in all, by the
//! same rule (the newest is kept, so that the `readdir` calls of one large listing, a few
//! entries each, find it).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, Weak};

use lru::LruCache;

use crate::error::Error;
use crate::fs::dir::Listing;
use crate::model::{File, FileIdx, ObjectId};
use crate::sync::flight::{on_panic, Flights, Role};
use crate::sync::lock;
use crate::views::zarr::ZarrArray;

/// Built arrays kept at most.
pub const MAX_ARRAYS: usize = 4096;

/// Bytes of chunk keys kept at most (see the module docs for the one exception).
pub const CHUNK_BUDGET: u64 = 64 << 20;

/// Entries of key listings kept at most (see the module docs for the one exception).
pub const LISTED_ENTRIES: usize = 1 << 21;

type ArrayKey = (FileIdx, ObjectId);

#[derive(Debug)]
struct Arrays {
    built: LruCache<ArrayKey, (Weak<File>, Arc<ZarrArray>)>,
    flights: Flights<ArrayKey, Arc<ZarrArray>, Error>,
}

/// Built arrays, by file and dataset.
#[derive(Debug)]
pub struct ArrayCache {
    state: Mutex<Arrays>,
}

impl ArrayCache {
    pub fn new() -> ArrayCache {
        ArrayCache {
            state: Mutex::new(Arrays {
                built: LruCache::new(NonZeroUsize::new(MAX_ARRAYS).unwrap_or(NonZeroUsize::MIN)),
                flights: Flights::new(),
            }),
        }
    }

    /// The array of dataset `id` of `file` (the file as open now), built by `build` unless
    /// kept.
    pub fn get(
        &self,
        file: &Arc<File>,
        id: ObjectId,
        build: impl FnOnce() -> Result<ZarrArray, Error>,
    ) -> Result<Arc<ZarrArray>, Error> {
        let key = (file.idx(), id);
        let role = {
            let mut s = lock(&self.state);
            if let Some((of, a)) = s.built.get(&key) {
                if std::ptr::eq(of.as_ptr(), Arc::as_ptr(file)) {
                    return Ok(a.clone());
                }
            }
            s.flights.join_or_start(key)
        };
        if let Role::Waiter(flight) = role {
            return flight.wait();
        }
        let outcome = on_panic(
            || build().map(Arc::new),
            || {
                if let Some(f) = lock(&self.state).flights.take(key) {
                    f.land(Err(Error::Invalid(
                        "building the Zarr array panicked".into(),
                    )));
                }
            },
        );
        let flight = {
            let mut s = lock(&self.state);
            if let Ok(a) = &outcome {
                // Entries of files closed since are of no use: out with them.
                let dead: Vec<ArrayKey> = s
                    .built
                    .iter()
                    .filter(|(_, (of, _))| of.strong_count() == 0)
                    .map(|(k, _)| *k)
                    .collect();
                for k in dead {
                    s.built.pop(&k);
                }
                s.built.put(key, (Arc::downgrade(file), a.clone()));
            }
            s.flights.take(key)
        };
        if let Some(f) = flight {
            f.land(outcome.clone());
        }
        outcome
    }
}

#[derive(Debug)]
struct Chunks {
    kept: LruCache<u64, Arc<Vec<u8>>>,
    bytes: u64,
    flights: Flights<u64, Arc<Vec<u8>>, Error>,
}

/// The bytes of chunk keys read lately, by inode number.
#[derive(Debug)]
pub struct ChunkCache {
    state: Mutex<Chunks>,
}

impl ChunkCache {
    pub fn new() -> ChunkCache {
        ChunkCache {
            state: Mutex::new(Chunks {
                kept: LruCache::unbounded(),
                bytes: 0,
                flights: Flights::new(),
            }),
        }
    }

    /// The bytes of chunk key `ino`, read by `read` unless kept.
    pub fn get(
        &self,
        ino: u64,
        read: impl FnOnce() -> Result<Vec<u8>, Error>,
    ) -> Result<Arc<Vec<u8>>, Error> {
        let role = {
            let mut s = lock(&self.state);
            if let Some(b) = s.kept.get(&ino) {
                return Ok(b.clone());
            }
            s.flights.join_or_start(ino)
        };
        if let Role::Waiter(flight) = role {
            return flight.wait();
        }
        let outcome = on_panic(
            || read().map(Arc::new),
            || {
                if let Some(f) = lock(&self.state).flights.take(ino) {
                    f.land(Err(Error::Invalid("reading the chunk panicked".into())));
                }
            },
        );
        let flight = {
            let mut s = lock(&self.state);
            if let Ok(b) = &outcome {
                s.bytes = s.bytes.saturating_add(b.len() as u64);
                if let Some(old) = s.kept.put(ino, b.clone()) {
                    s.bytes = s.bytes.saturating_sub(old.len() as u64);
                }
                while s.bytes > CHUNK_BUDGET && s.kept.len() > 1 {
                    match s.kept.pop_lru() {
                        Some((_, old)) => s.bytes = s.bytes.saturating_sub(old.len() as u64),
                        None => break,
                    }
                }
            }
            s.flights.take(ino)
        };
        if let Some(f) = flight {
            f.land(outcome.clone());
        }
        outcome
    }

    /// Bytes kept now.
    #[cfg(test)]
    fn kept_bytes(&self) -> u64 {
        lock(&self.state).bytes
    }
}

/// Listings of array and key directories, by inode number.
#[derive(Debug)]
pub struct ListingCache {
    state: Mutex<(LruCache<u64, Arc<Listing>>, usize)>,
}

impl ListingCache {
    pub fn new() -> ListingCache {
        ListingCache {
            state: Mutex::new((LruCache::unbounded(), 0)),
        }
    }

    /// The listing of `ino`, if kept.
    pub fn get(&self, ino: u64) -> Option<Arc<Listing>> {
        lock(&self.state).0.get(&ino).cloned()
    }

    /// Keep `listing` as the listing of `ino`.
    pub fn put(&self, ino: u64, listing: Arc<Listing>) {
        let mut s = lock(&self.state);
        let (kept, entries) = &mut *s;
        *entries = entries.saturating_add(listing.entries.len());
        if let Some(old) = kept.put(ino, listing) {
            *entries = entries.saturating_sub(old.entries.len());
        }
        while *entries > LISTED_ENTRIES && kept.len() > 1 {
            match kept.pop_lru() {
                Some((_, old)) => *entries = entries.saturating_sub(old.entries.len()),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_stay_within_the_budget_but_the_newest_is_kept() {
        let c = ChunkCache::new();
        let quarter = (CHUNK_BUDGET / 4) as usize;
        for ino in 0..6 {
            c.get(ino, || Ok(vec![0; quarter])).unwrap();
        }
        assert_eq!(c.kept_bytes(), CHUNK_BUDGET);
        // Kept: no second read.
        c.get(5, || panic!("read again")).unwrap();
        let big = c.get(9, || Ok(vec![1; 2 * CHUNK_BUDGET as usize])).unwrap();
        assert_eq!(big.len() as u64, 2 * CHUNK_BUDGET);
        assert_eq!(c.kept_bytes(), 2 * CHUNK_BUDGET, "the newest alone");
        c.get(9, || panic!("read again")).unwrap();
        let e = c
            .get(3, || Err(Error::corrupt("chunk", 0, "bad")))
            .unwrap_err();
        assert!(e.to_string().contains("bad"));
        // A failure is not kept.
        assert_eq!(*c.get(3, || Ok(vec![7])).unwrap(), vec![7]);
    }

    #[test]
    fn listings_stay_within_their_entries_but_the_newest_is_kept() {
        let listing = |n: usize| {
            let e = |i: usize| crate::fs::dir::DirEntry {
                ino: i as u64,
                kind: crate::fs::FileKind::RegularFile,
                name: i.to_string().into(),
            };
            Arc::new(Listing::new((0..n).map(e).collect()))
        };
        let c = ListingCache::new();
        c.put(1, listing(LISTED_ENTRIES / 2));
        c.put(2, listing(LISTED_ENTRIES / 2));
        assert!(c.get(1).is_some() && c.get(2).is_some());
        c.put(3, listing(LISTED_ENTRIES + 1));
        assert!(c.get(1).is_none() && c.get(2).is_none());
        assert_eq!(c.get(3).unwrap().entries.len(), LISTED_ENTRIES + 1);
    }
}
