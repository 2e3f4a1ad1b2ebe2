//! The directory listings a mount keeps: built once per directory, kept while there is room.
//!
//! A listing is built at the first `readdir`, `readdirplus` or lookup in a host directory
//! that needs it, and the kernel then reads it a page at a time: each request continues at
//! an offset, so the listing must stay while one directory is read. Beyond that it saves the
//! model's work for lookups (a group's lookups find their entries here). The kernel keeps
//! what it read in its own page cache, so an old listing is seldom asked for again.
//!
//! Bounds: at most [`LISTED_BYTES`] bytes of listings ([`Listing::bytes`]), least recently
//! used out first, the newest kept even when it alone is larger (a directory of a million
//! entries read a page at a time must not be listed again for each page). A listing is
//! dropped too when the kernel forgets its directory (`super::inode`): nothing asks for it
//! until the directory is looked up again.
//!
//! A refresh (`super::refresh`) drops listings built from the file before it; a listing
//! built while a refresh ran is not kept ([`Listings::keep`] with the generation it started
//! from).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::dir::Listing;
use crate::sync::lock;

/// Bytes of listings kept at most (see the module docs for the one exception).
pub const LISTED_BYTES: usize = 16 << 20;

#[derive(Debug)]
struct Kept {
    lru: LruCache<u64, Arc<Listing>>,
    bytes: usize,
    /// Bumped each time a refresh drops listings.
    gen: u64,
}

/// The listings kept, by directory inode.
#[derive(Debug)]
pub struct Listings {
    kept: Mutex<Kept>,
}

impl Default for Listings {
    fn default() -> Self {
        Listings::new()
    }
}

impl Listings {
    /// No listing kept.
    pub fn new() -> Listings {
        Listings {
            kept: Mutex::new(Kept {
                lru: LruCache::unbounded(),
                bytes: 0,
                gen: 0,
            }),
        }
    }

    /// The listing of `ino`, if kept (marked as used).
    pub fn get(&self, ino: u64) -> Option<Arc<Listing>> {
        lock(&self.kept).lru.get(&ino).cloned()
    }

    /// The generation now: pass it to [`Listings::keep`] for a listing built from here on.
    pub fn gen(&self) -> u64 {
        lock(&self.kept).gen
    }

    /// Keep `listing` as the listing of `ino` unless a refresh dropped the listings since
    /// generation `gen` (it was built from the file before it), or another one was kept
    /// meanwhile (which wins); the listing to serve.
    pub fn keep(&self, ino: u64, gen: u64, listing: Arc<Listing>) -> Arc<Listing> {
        let mut k = lock(&self.kept);
        if k.gen != gen {
            return listing;
        }
        if let Some(l) = k.lru.get(&ino) {
            return l.clone();
        }
        k.bytes = k.bytes.saturating_add(listing.bytes());
        k.lru.put(ino, listing.clone());
        while k.bytes > LISTED_BYTES && k.lru.len() > 1 {
            match k.lru.pop_lru() {
                Some((_, old)) => k.bytes = k.bytes.saturating_sub(old.bytes()),
                None => break,
            }
        }
        listing
    }

    /// Drop the listing of `ino`, if kept.
    pub fn remove(&self, ino: u64) -> Option<Arc<Listing>> {
        let mut k = lock(&self.kept);
        let old = k.lru.pop(&ino)?;
        k.bytes = k.bytes.saturating_sub(old.bytes());
        Some(old)
    }

    /// Drop the listings of `inos`; those that were kept, by inode. The generation moves
    /// on: a listing being built now is not kept.
    pub fn take(&self, inos: impl IntoIterator<Item = u64>) -> HashMap<u64, Arc<Listing>> {
        let mut k = lock(&self.kept);
        k.gen = k.gen.wrapping_add(1);
        let mut out = HashMap::new();
        for ino in inos {
            if let Some(l) = k.lru.pop(&ino) {
                k.bytes = k.bytes.saturating_sub(l.bytes());
                out.insert(ino, l);
            }
        }
        out
    }

    /// Drop every listing (the generation moves on).
    pub fn clear(&self) {
        let mut k = lock(&self.kept);
        k.gen = k.gen.wrapping_add(1);
        k.lru.clear();
        k.bytes = 0;
    }

    /// Every listing kept, by inode.
    pub fn all(&self) -> HashMap<u64, Arc<Listing>> {
        let k = lock(&self.kept);
        k.lru.iter().map(|(i, l)| (*i, l.clone())).collect()
    }

    /// The inodes of the listings kept.
    pub fn inos(&self) -> Vec<u64> {
        lock(&self.kept).lru.iter().map(|(i, _)| *i).collect()
    }

    /// Listings kept and their bytes.
    pub fn size(&self) -> (usize, usize) {
        let k = lock(&self.kept);
        (k.lru.len(), k.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::dir::{dots, DirEntry};
    use crate::fs::FileKind;

    fn listing(n: usize) -> Arc<Listing> {
        let mut e = dots(1, 1);
        e.extend((0..n).map(|i| DirEntry {
            ino: i as u64 + 10,
            kind: FileKind::RegularFile,
            name: format!("d{i:07}").as_str().into(),
        }));
        Arc::new(Listing::new(e))
    }

    #[test]
    fn bounded_by_bytes_the_newest_kept_and_generations_respected() {
        let l = Listings::new();
        let small = listing(100);
        let per = small.bytes();
        let fits = LISTED_BYTES / per;
        for ino in 0..fits as u64 + 5 {
            l.keep(ino, l.gen(), small.clone());
        }
        let (n, bytes) = l.size();
        assert!(n <= fits && bytes <= LISTED_BYTES, "{n} {bytes}");
        assert!(l.get(0).is_none() && l.get(fits as u64 + 4).is_some());
        let big = listing(1_000_000);
        assert!(big.bytes() > LISTED_BYTES);
        l.keep(1 << 40, l.gen(), big.clone());
        assert_eq!(l.size(), (1, big.bytes()), "the newest stays alone");
        // A listing built before a refresh dropped them is served, not kept.
        let gen = l.gen();
        l.clear();
        l.keep(7, gen, small.clone());
        assert!(l.get(7).is_none());
        l.keep(7, l.gen(), small.clone());
        assert!(
            Arc::ptr_eq(&l.keep(7, l.gen(), listing(3)), &small),
            "the first wins"
        );
        assert!(l.remove(7).is_some() && l.size() == (0, 0));
    }
}
