//! Inode numbers of the Zarr tree's own entries: array directories, metadata documents and
//! the chunk key trees of arrays.
//!
//! Groups keep the nodes of the plain tree (`super::super::inode`); everything else of the
//! Zarr tree is numbered here, from [`ZARR_BASE`] up, a range the plain tree gives only to
//! the sidecar views, which a Zarr mount does not serve. Array directories and documents
//! take one number each, handed out on first sight and keyed by their directory and name,
//! so a path keeps its number for the life of the mount; an array directory is a node of
//! its own at each path that leads to the dataset (a directory has one parent). An array's
//! chunk keys take one block of consecutive numbers, allocated the first time a key of the
//! array is needed, numbered by [`KeyTree`] from the coordinates alone: reading a million
//! chunks adds no entry here. Numbers are never reused; when the range is used up (only a
//! grid of absurd size can do that) the array that asks gets none and its keys fail.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::ahead::Sweep;
use super::keys::KeyTree;
use crate::fs::inode::Anchor;
use crate::model::{FileIdx, ObjectId};
use crate::sync::{read, write};

/// First inode number of the Zarr tree's own entries.
pub const ZARR_BASE: u64 = 3 << 62;

/// Whether `ino` is in the Zarr tree's range.
pub fn is_zarr_ino(ino: u64) -> bool {
    ino >= ZARR_BASE
}

/// A dataset shown as an array directory at one path.
#[derive(Debug)]
pub struct ArrayDir {
    pub ino: u64,
    /// The group directory holding it.
    pub parent: u64,
    /// Its path in the mount (for messages).
    pub path: String,
    pub file: FileIdx,
    pub id: ObjectId,
    pub anchor: Option<Arc<Anchor>>,
    /// Its chunk keys' numbers, once needed (`None`: too many to number).
    pub keys: OnceLock<Option<Arc<KeyBlock>>>,
    /// Its readers' progress through its chunk keys (remote sources: see [`super::ahead`]).
    pub ahead: Mutex<Option<Sweep>>,
}

/// A metadata document in a group or array directory.
#[derive(Debug)]
pub struct Document {
    pub ino: u64,
    /// The directory holding it.
    pub dir: u64,
    pub name: &'static str,
    /// Its bytes, once made (the file does not change while mounted).
    pub bytes: OnceLock<Arc<Vec<u8>>>,
}

/// The chunk keys of one array directory.
#[derive(Debug)]
pub struct KeyBlock {
    pub base: u64,
    /// The array directory's number.
    pub array: u64,
    pub tree: KeyTree,
}

/// What a number of the range stands for.
#[derive(Clone, Debug)]
pub enum Entry {
    Array(Arc<ArrayDir>),
    Document(Arc<Document>),
    /// A node of a key tree, by its local number.
    Key(Arc<KeyBlock>, u64),
}

#[derive(Clone, Debug)]
enum Slot {
    Array(Arc<ArrayDir>),
    Document(Arc<Document>),
    Keys(Arc<KeyBlock>),
}

#[derive(Debug)]
struct Tables {
    next: u64,
    /// By first number (a block's base, or the single number of the others).
    slots: BTreeMap<u64, Slot>,
    by_name: HashMap<(u64, String), u64>,
}

/// The numbers of a mount's Zarr entries.
#[derive(Debug)]
pub struct ZarrTable {
    tables: RwLock<Tables>,
}

impl ZarrTable {
    pub fn new() -> ZarrTable {
        ZarrTable {
            tables: RwLock::new(Tables {
                next: ZARR_BASE,
                slots: BTreeMap::new(),
                by_name: HashMap::new(),
            }),
        }
    }

    /// What `ino` stands for, if it was handed out.
    pub fn get(&self, ino: u64) -> Option<Entry> {
        let t = read(&self.tables);
        let (&start, slot) = t.slots.range(..=ino).next_back()?;
        match slot {
            Slot::Array(a) if start == ino => Some(Entry::Array(a.clone())),
            Slot::Document(d) if start == ino => Some(Entry::Document(d.clone())),
            Slot::Keys(k) => {
                let local = ino - start;
                (local < k.tree.len()).then(|| Entry::Key(k.clone(), local))
            }
            _ => None,
        }
    }

    /// The array directory `name` in group directory `parent`, standing for dataset `id` of
    /// `file` (made on first sight; `None` when the range is used up).
    pub fn array(
        &self,
        parent: u64,
        name: &str,
        path: String,
        (file, id): (FileIdx, ObjectId),
        anchor: Option<Arc<Anchor>>,
    ) -> Option<Arc<ArrayDir>> {
        let key = (parent, name.to_string());
        if let Some(Entry::Array(a)) = self.named(&key) {
            return Some(a);
        }
        let mut t = write(&self.tables);
        if let Some(Slot::Array(a)) = t.by_name.get(&key).and_then(|i| t.slots.get(i)) {
            return Some(a.clone());
        }
        let ino = take(&mut t, 1)?;
        let a = Arc::new(ArrayDir {
            ino,
            parent,
            path,
            file,
            id,
            anchor,
            keys: OnceLock::new(),
            ahead: Mutex::new(None),
        });
        t.slots.insert(ino, Slot::Array(a.clone()));
        t.by_name.insert(key, ino);
        Some(a)
    }

    /// The document `name` of directory `dir` (made on first sight).
    pub fn document(&self, dir: u64, name: &'static str) -> Option<Arc<Document>> {
        let key = (dir, name.to_string());
        if let Some(Entry::Document(d)) = self.named(&key) {
            return Some(d);
        }
        let mut t = write(&self.tables);
        if let Some(Slot::Document(d)) = t.by_name.get(&key).and_then(|i| t.slots.get(i)) {
            return Some(d.clone());
        }
        let ino = take(&mut t, 1)?;
        let d = Arc::new(Document {
            ino,
            dir,
            name,
            bytes: OnceLock::new(),
        });
        t.slots.insert(ino, Slot::Document(d.clone()));
        t.by_name.insert(key, ino);
        Some(d)
    }

    /// The key block of array directory `array` for `tree` (allocated on first use).
    pub fn keys(&self, array: &ArrayDir, tree: KeyTree) -> Option<Arc<KeyBlock>> {
        array
            .keys
            .get_or_init(|| {
                let mut t = write(&self.tables);
                let base = take(&mut t, tree.len().max(1))?;
                let block = Arc::new(KeyBlock {
                    base,
                    array: array.ino,
                    tree,
                });
                t.slots.insert(base, Slot::Keys(block.clone()));
                Some(block)
            })
            .clone()
    }

    fn named(&self, key: &(u64, String)) -> Option<Entry> {
        let ino = *read(&self.tables).by_name.get(key)?;
        self.get(ino)
    }
}

/// `n` consecutive numbers, if the range has them: the last one handed out is at most
/// `u64::MAX - 1` (the top number is the benchmark ceiling file's).
fn take(t: &mut Tables, n: u64) -> Option<u64> {
    let start = t.next;
    let end = start.checked_add(n)?;
    t.next = end;
    Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::zarr::ZarrVersion;

    #[test]
    fn numbers_are_stable_and_blocks_resolve_to_their_nodes() {
        let t = ZarrTable::new();
        let a = t
            .array(1, "x", "/x".into(), (0, ObjectId(800)), None)
            .unwrap();
        assert_eq!(a.ino, ZARR_BASE);
        let again = t.array(1, "x", "/x".into(), (0, ObjectId(800)), None);
        assert_eq!(again.unwrap().ino, a.ino);
        let other = t.array(5, "x", "/g/x".into(), (0, ObjectId(800)), None);
        assert_ne!(other.unwrap().ino, a.ino, "one directory per path");
        let d = t.document(a.ino, "zarr.json").unwrap();
        assert!(matches!(t.get(d.ino), Some(Entry::Document(_))));
        let tree = KeyTree::new(ZarrVersion::V3, &[2, 2]).unwrap();
        let block = t.keys(&a, tree.clone()).unwrap();
        assert_eq!(t.keys(&a, tree).unwrap().base, block.base, "allocated once");
        for local in 0..block.tree.len() {
            match t.get(block.base + local) {
                Some(Entry::Key(b, l)) => assert_eq!((b.array, l), (a.ino, local)),
                other => panic!("{local}: {other:?}"),
            }
        }
        let past = block.base + block.tree.len();
        assert!(t.get(past).is_none(), "nothing handed out there");
        assert!(is_zarr_ino(past) && !is_zarr_ino(ZARR_BASE - 1));
    }

    #[test]
    fn the_range_runs_out_for_the_array_that_breaks_it_only() {
        let t = ZarrTable::new();
        let a = t
            .array(1, "a", "/a".into(), (0, ObjectId(1)), None)
            .unwrap();
        let huge = KeyTree::new(ZarrVersion::V2, &[1 << 61, 2]).unwrap();
        assert!(t.keys(&a, huge).is_none());
        let b = t
            .array(1, "b", "/b".into(), (0, ObjectId(2)), None)
            .unwrap();
        let small = KeyTree::new(ZarrVersion::V2, &[3]).unwrap();
        assert!(t.keys(&b, small).is_some());
    }
}
