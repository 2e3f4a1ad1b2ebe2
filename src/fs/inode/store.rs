//! The storage of known inodes: one small fixed-size record each, with counts.
//!
//! A walk of a million objects leaves a million inodes known to the kernel, so a record is
//! kept small: its number, its parent's, its name (inline when short, see `super::super::name`),
//! its file, its kind and two counts; everything else is derived (the path from the parents'
//! names, an object's address from its number) or kept beside for the few records that need
//! it (symlink texts, anchors, objects numbered from a counter). Records sit in a slab, a
//! `Vec` whose free slots are reused, found by number through a hash table of slot indices
//! (4 bytes a slot, hashed by the record's number: a map from number to slot would take 16).
//!
//! The counts: `lookups` is the kernel's (FUSE's `nlookup`: one for each reply that handed
//! the inode out, given back by `forget`); `pins` counts the records that need this one to
//! stay: the known records whose parent it is (their paths go through it) and the sidecars
//! of a dataset. A record whose two counts are zero is removed, and with it the pin it held
//! on its parent, which may go in turn. A count that reaches `u32::MAX` stays there: the
//! record is kept for the mount rather than dropped while the kernel may still hold it.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::super::name::Name;
use crate::model::FileIdx;

/// What a record stands for (the rest of its kind is derived or kept beside).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    Object,
    Symlink,
    HostDir,
    HostFile,
    FileRoot,
}

/// One known inode.
#[derive(Clone, Debug)]
pub struct Record {
    pub ino: u64,
    /// The directory it was found in (the root's is itself).
    pub parent: u64,
    /// Its name there (empty for the root).
    pub name: Name,
    /// The file the object lives in (for a symlink: the file holding the link).
    pub file: FileIdx,
    pub lookups: u32,
    pub pins: u32,
    pub tag: Tag,
    /// Made before the last refresh (see `InodeTable::mark_before_refresh`).
    pub before_refresh: bool,
}

/// Slab size from which removals compact it once it is three quarters free.
const COMPACT_FROM: usize = 4096;

/// The records, by number.
#[derive(Debug, Default)]
pub struct Store {
    slots: Vec<Option<Record>>,
    free: Vec<u32>,
    /// Slot indices, hashed by their record's number.
    index: HashTable<u32>,
    hasher: std::hash::RandomState,
}

/// The number of the record in slot `i` (0 for a free slot: the index names none).
fn ino_at(slots: &[Option<Record>], i: u32) -> u64 {
    slots
        .get(i as usize)
        .and_then(|s| s.as_ref())
        .map_or(0, |r| r.ino)
}

impl Store {
    fn slot(&self, ino: u64) -> Option<u32> {
        let h = self.hasher.hash_one(ino);
        self.index
            .find(h, |&i| ino_at(&self.slots, i) == ino)
            .copied()
    }

    /// The record of `ino`.
    pub fn get(&self, ino: u64) -> Option<&Record> {
        let i = self.slot(ino)?;
        self.slots.get(i as usize)?.as_ref()
    }

    /// The record of `ino`, to change.
    pub fn get_mut(&mut self, ino: u64) -> Option<&mut Record> {
        let i = self.slot(ino)?;
        self.slots.get_mut(i as usize)?.as_mut()
    }

    /// Whether `ino` has a record.
    pub fn contains(&self, ino: u64) -> bool {
        self.slot(ino).is_some()
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Add `r` (replacing a record of the same number).
    pub fn insert(&mut self, r: Record) {
        if let Some(old) = self.get_mut(r.ino) {
            *old = r;
            return;
        }
        let h = self.hasher.hash_one(r.ino);
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(r);
                i
            }
            None => {
                // Fewer than 2^32 records: each stands for an inode the kernel holds.
                let i = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
                self.slots.push(Some(r));
                i
            }
        };
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index
            .insert_unique(h, slot, |&i| hasher.hash_one(ino_at(slots, i)));
    }

    /// Remove the record of `ino`.
    pub fn remove(&mut self, ino: u64) -> Option<Record> {
        let h = self.hasher.hash_one(ino);
        let slots = &self.slots;
        let entry = self
            .index
            .find_entry(h, |&i| ino_at(slots, i) == ino)
            .ok()?;
        let (i, _) = entry.remove();
        let r = self.slots.get_mut(i as usize)?.take();
        self.free.push(i);
        // Give memory back once most of a large walk is forgotten.
        if self.slots.len() >= COMPACT_FROM && self.index.len() < self.slots.len() / 4 {
            self.compact();
        }
        r
    }

    /// Move the records to the front of a new slab, and shrink the index.
    fn compact(&mut self) {
        let live: Vec<Record> = std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .collect();
        self.free = Vec::new();
        self.index = HashTable::with_capacity(live.len());
        self.slots = Vec::with_capacity(live.len());
        for r in live {
            self.insert(r);
        }
    }

    /// Every record.
    pub fn iter(&self) -> impl Iterator<Item = &Record> {
        self.slots.iter().flatten()
    }

    /// Every record, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Record> {
        self.slots.iter_mut().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ino: u64) -> Record {
        Record {
            ino,
            parent: 1,
            name: Name::new("d0000001"),
            file: 0,
            lookups: 1,
            pins: 0,
            tag: Tag::Object,
            before_refresh: false,
        }
    }

    #[test]
    fn slots_are_reused_and_records_stay_small() {
        assert!(std::mem::size_of::<Option<Record>>() <= 56);
        assert_eq!(std::mem::size_of::<u32>(), 4, "an index slot");
        let mut s = Store::default();
        for i in 0..10 {
            s.insert(rec(100 + i));
        }
        assert_eq!(s.len(), 10);
        assert!(s.remove(103).is_some() && s.remove(103).is_none());
        s.insert(rec(500));
        assert_eq!(s.slots.len(), 10, "the free slot was taken");
        assert_eq!(s.get(500).map(|r| r.ino), Some(500));
        assert!(!s.contains(103));
        for i in (0..10).filter(|&i| i != 3) {
            s.remove(100 + i);
        }
        s.remove(500);
        assert_eq!(s.len(), 0);
        // A large slab is compacted as it empties, its records still found.
        for i in 0..100_000 {
            s.insert(rec(10 + i));
        }
        for i in 0..99_000 {
            s.remove(10 + i);
        }
        assert!(s.slots.len() < 10_000, "{}", s.slots.len());
        assert!((99_000..100_000).all(|i| s.get(10 + i).map(|r| r.ino) == Some(10 + i)));
    }
}
