//! Inode numbers, and the table of the inodes the kernel knows.
//!
//! Numbers. An HDF5 object is identified by the address of its object header ([`ObjectId`]);
//! every hard link to it reaches the same header, so its number is a function of the
//! address. Objects of the mounted file are `address + 2` (the root group is always the FUSE
//! root inode 1, and `+ 2` keeps every other object clear of it). Objects of other files,
//! reached through external links or, in a directory mount, of every file, are identified by
//! `(file, address)` (the file by its index in the mount's resolver, `model::resolver`):
//! `EXTERNAL_BASE + file · 2^40 + address` for the first 2^20 files and addresses below 2^40.
//! Numbers that can be worked out again are the same for the life of the mount, whatever the
//! kernel forgot in between.
//!
//! Everything else is numbered from counters: the entries of a mounted directory (by their
//! path below its root) and objects that do not fit the ranges above (an address of the
//! mounted file at or above [`EXTERNAL_BASE`], which only a corrupt file has, or of another
//! file at or above 2^40) from [`COUNTER_BASE`] (then from 2^63); soft and external
//! links, which are not objects, by `(parent inode, name)` from [`LINK_BASE`]. A counted
//! number is remembered while its inode is known and, after that, among the last
//! [`RESERVED`] numbers handed out, so the same entry keeps its number between the listing
//! that showed it and the lookup that follows, and across a forget followed by a lookup;
//! past that bound a forgotten entry may come back under a new number, which is valid (the
//! kernel holds none of its old one). Sidecar view files (`NAME.npy`, `NAME.hdr`) are not in
//! this table: `super::views` numbers them from `views::SIDECAR_BASE` (3 * 2^62), above every
//! range handed out here.
//!
//! Known inodes. The table holds an inode only once it was handed to the kernel: a lookup's
//! answer or a `readdirplus` entry ([`InodeTable::remember`], one count each, as FUSE counts
//! `nlookup`). The kernel gives the counts back with `forget` when it drops an inode from its
//! caches ([`InodeTable::forget`]); an inode whose count reaches zero is removed, unless other
//! known inodes need it (its known children, whose paths go through it; a dataset's
//! sidecars: [`InodeTable::pin`]). Listing a directory therefore adds nothing here: a node is
//! made for each entry as it is handed out (its number worked out again, or taken from the
//! listing's counter reservation). Each known inode is a small record (see `store`); the
//! [`Node`] the filesystem works with is built from it on demand, its path from its parents'
//! names.
//!
//! With the Zarr tree (`super::zarr`), whose own tables hold numbers of this one, nodes are
//! kept from their making to the unmount and `forget` is ignored.

mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use lru::LruCache;

use self::store::{Record, Store, Tag};
use super::name::Name;
use crate::model::{FileIdx, ObjectId};
use crate::sync::{read, write};

/// The FUSE root inode.
pub const ROOT_INO: u64 = 1;

/// First number of objects of files other than the mounted one (see the module docs; the
/// range is `2^60 .. 2^61`).
pub const EXTERNAL_BASE: u64 = 1 << 60;

/// Bits of an address in a number of the [`EXTERNAL_BASE`] range; the file index takes the
/// bits above, up to [`COUNTER_BASE`].
const EXTERNAL_ADDR_BITS: u32 = 40;

/// First number of the counted range: entries of a mounted directory and objects whose
/// address fits no range above.
pub const COUNTER_BASE: u64 = 1 << 61;

/// First number of soft/external links. Object addresses below [`EXTERNAL_BASE`] give
/// numbers below it too, so the ranges cannot meet.
pub const LINK_BASE: u64 = 1 << 62;

/// Where the counted range goes on once it reaches [`LINK_BASE`].
const FALLBACK_BASE: u64 = 1 << 63;

/// Counted numbers remembered for entries the kernel does not hold (see the module docs).
pub const RESERVED: usize = 1 << 16;

/// Parents followed when building a path, at most (a path of more levels is cut short; no
/// real file nests so deep, and a cycle cannot arise, as a directory has one parent).
const MAX_DEPTH: usize = 4096;

/// What an inode stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// An HDF5 object (group, dataset, committed datatype).
    Object(ObjectId),
    /// A soft or external link, with the symlink text served by `readlink`.
    Symlink { target: String },
    /// A directory of the mounted directory (path below the mount root; the root is `""`).
    HostDir { rel: PathBuf },
    /// A file of the mounted directory that is not HDF5, served byte for byte.
    HostFile { rel: PathBuf },
    /// An HDF5 file of the mounted directory (the node's `file`), shown as a directory
    /// holding its root group; the file is opened on first use inside it.
    FileRoot { rel: PathBuf },
}

/// An external link's target: the object at HDF5 path `h5_path` of its file appears at
/// `mount_path` in the mount.
#[derive(Debug, PartialEq, Eq)]
pub struct Anchor {
    pub file_name: String,
    pub h5_path: String,
    pub mount_path: String,
}

/// One inode, as the filesystem works with it (built from the table's record, or made for an
/// entry about to be handed out).
#[derive(Clone, Debug)]
pub struct Node {
    pub ino: u64,
    /// Inode of the directory it was first found in (the root's parent is itself).
    pub parent: u64,
    /// Path in the mount it was first found at (for messages and relative symlink targets).
    pub path: String,
    /// The file the object lives in (for a symlink: the file holding the link).
    pub file: FileIdx,
    /// For nodes reached through an external link: where the linked object is in its file
    /// and where it appears in the mount (soft links of that file are translated with it).
    pub anchor: Option<Arc<Anchor>>,
    pub kind: NodeKind,
    /// Made before the last refresh (see [`InodeTable::mark_before_refresh`]): where the
    /// object was shown then may not lead to it in the new view, so its path is taken again
    /// from where it is found next ([`InodeTable::rebind`]).
    pub before_refresh: bool,
}

impl Node {
    /// Node `ino` standing for `kind`, found as `name` in `parent` (made now: not from
    /// before a refresh).
    fn child(
        parent: &Node,
        name: &str,
        ino: u64,
        file: FileIdx,
        anchor: Option<Arc<Anchor>>,
        kind: NodeKind,
    ) -> Node {
        Node {
            ino,
            parent: parent.ino,
            path: join_path(&parent.path, name),
            file,
            anchor,
            kind,
            before_refresh: false,
        }
    }

    /// The object this node stands for, if it is one (the root group of a [`NodeKind::FileRoot`]
    /// is known only once its file is open: see `H5Fs::object_of`).
    pub fn object(&self) -> Option<ObjectId> {
        match self.kind {
            NodeKind::Object(id) => Some(id),
            _ => None,
        }
    }

    /// True for an HDF5 file of a mounted directory.
    pub fn is_file_root(&self) -> bool {
        matches!(self.kind, NodeKind::FileRoot { .. })
    }

    /// The path below the mount root of a node of the mounted directory.
    pub fn host_path(&self) -> Option<&std::path::Path> {
        match &self.kind {
            NodeKind::HostDir { rel } | NodeKind::HostFile { rel } | NodeKind::FileRoot { rel } => {
                Some(rel)
            }
            _ => None,
        }
    }

    /// The last component of the node's path (empty for the root).
    pub fn name(&self) -> &str {
        if self.ino == ROOT_INO {
            return "";
        }
        self.path.rsplit('/').next().unwrap_or("")
    }
}

/// What a counted number is remembered by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Object(FileIdx, ObjectId),
    Link(u64, Name),
    Host(String, HostTag),
}

/// The host kinds, in a [`Key`]: an entry whose kind changed (a file replaced by a
/// directory) gets a new number, so the kernel never mixes the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum HostTag {
    Dir,
    File,
    Root,
}

#[derive(Debug)]
struct Tables {
    store: Store,
    /// Known inodes numbered from a counter, by what they stand for.
    by_key: HashMap<Key, u64>,
    /// Counted numbers handed out lately (see the module docs).
    reserved: LruCache<Key, u64>,
    /// Known objects numbered from a counter: their address.
    ids: HashMap<u64, ObjectId>,
    /// Known symlinks: their text.
    targets: HashMap<u64, Box<str>>,
    /// Known inodes whose anchor is not their parent's (see [`Node::anchor`]).
    anchors: HashMap<u64, Option<Arc<Anchor>>>,
    /// The known [`NodeKind::FileRoot`] of each file that has one.
    file_roots: HashMap<FileIdx, u64>,
    /// The file whose objects are numbered by address (the mounted file), and its root.
    direct: Option<(FileIdx, ObjectId)>,
    next_link: u64,
    next_counter: u64,
    /// Keep every node made, for the mount (the Zarr tree).
    keep_all: bool,
}

/// The inode table of a mount.
#[derive(Debug)]
pub struct InodeTable {
    tables: RwLock<Tables>,
}

/// Join a group path and a link name.
pub fn join_path(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// The number worked out for object `id` of `file`, if it has one: `direct` is the mounted
/// file and its root group.
fn derived(direct: Option<(FileIdx, ObjectId)>, file: FileIdx, id: ObjectId) -> Option<u64> {
    match direct {
        Some((f, root)) if f == file => {
            if id == root {
                return Some(ROOT_INO);
            }
            id.0.checked_add(2).filter(|&n| n < EXTERNAL_BASE)
        }
        _ => {
            if id.0 >> EXTERNAL_ADDR_BITS != 0 {
                return None;
            }
            let f = u64::from(file);
            let n = EXTERNAL_BASE + (f << EXTERNAL_ADDR_BITS) + id.0;
            (f < (COUNTER_BASE - EXTERNAL_BASE) >> EXTERNAL_ADDR_BITS).then_some(n)
        }
    }
}

/// The object a worked-out number stands for (the inverse of [`derived`]).
fn underived(direct: Option<(FileIdx, ObjectId)>, ino: u64) -> Option<(FileIdx, ObjectId)> {
    if ino == ROOT_INO {
        return direct;
    }
    if ino < EXTERNAL_BASE {
        let (f, _) = direct?;
        return Some((f, ObjectId(ino.checked_sub(2)?)));
    }
    if ino < COUNTER_BASE {
        let rel = ino - EXTERNAL_BASE;
        let file = FileIdx::try_from(rel >> EXTERNAL_ADDR_BITS).ok()?;
        return Some((file, ObjectId(rel & ((1 << EXTERNAL_ADDR_BITS) - 1))));
    }
    None
}

impl Tables {
    fn new(direct: Option<(FileIdx, ObjectId)>) -> Tables {
        Tables {
            store: Store::default(),
            by_key: HashMap::new(),
            reserved: LruCache::unbounded(),
            ids: HashMap::new(),
            targets: HashMap::new(),
            anchors: HashMap::new(),
            file_roots: HashMap::new(),
            direct,
            next_link: LINK_BASE,
            next_counter: COUNTER_BASE,
            keep_all: false,
        }
    }

    /// The number of the entry `key`: its known inode's, else the one reserved for it, else
    /// a new one (reserved). `link`: from the link range.
    fn number(&mut self, key: Key, link: bool) -> u64 {
        if let Some(&ino) = self.by_key.get(&key) {
            return ino;
        }
        if let Some(&ino) = self.reserved.get(&key) {
            return ino;
        }
        let ino = if link {
            let n = self.next_link;
            self.next_link = self.next_link.saturating_add(1);
            n
        } else {
            let n = self.next_counter;
            self.next_counter = match self.next_counter.checked_add(1) {
                Some(LINK_BASE) => FALLBACK_BASE,
                Some(next) => next,
                None => u64::MAX,
            };
            n
        };
        self.reserve(key, ino);
        ino
    }

    /// Remember `ino` as the number of `key` (the oldest reservation goes past [`RESERVED`]).
    fn reserve(&mut self, key: Key, ino: u64) {
        self.reserved.put(key, ino);
        if self.reserved.len() > RESERVED {
            self.reserved.pop_lru();
        }
    }

    /// The path of known inode `ino`, from its parents' names.
    fn path(&self, ino: u64) -> String {
        let mut names: Vec<&str> = Vec::new();
        let mut cur = ino;
        let mut whole = false;
        for _ in 0..MAX_DEPTH {
            if cur == ROOT_INO {
                whole = true;
                break;
            }
            let Some(r) = self.store.get(cur) else {
                break;
            };
            names.push(&r.name);
            cur = r.parent;
        }
        // A path cut short (an ancestor missing: never for a known inode, whose parents it
        // keeps) starts with an ellipsis, for messages.
        let mut out = String::from(if whole { "" } else { "/…" });
        for n in names.iter().rev() {
            out.push('/');
            out.push_str(n);
        }
        if out.is_empty() {
            out.push('/');
        }
        out
    }

    /// The anchor of known inode `ino`: its own, else its nearest ancestor's.
    fn anchor(&self, ino: u64) -> Option<Arc<Anchor>> {
        let mut cur = ino;
        for _ in 0..MAX_DEPTH {
            if let Some(a) = self.anchors.get(&cur) {
                return a.clone();
            }
            if cur == ROOT_INO {
                return None;
            }
            cur = self.store.get(cur)?.parent;
        }
        None
    }

    /// The node of known inode `ino`.
    fn node(&self, ino: u64) -> Option<Node> {
        let r = self.store.get(ino)?;
        let path = self.path(ino);
        let rel = || PathBuf::from(path.strip_prefix('/').unwrap_or(&path));
        let kind = match r.tag {
            Tag::Object => {
                let id = match self.ids.get(&ino) {
                    Some(&id) => id,
                    None => underived(self.direct, ino)?.1,
                };
                NodeKind::Object(id)
            }
            Tag::Symlink => NodeKind::Symlink {
                target: self.targets.get(&ino).map(|t| t.to_string())?,
            },
            Tag::HostDir => NodeKind::HostDir { rel: rel() },
            Tag::HostFile => NodeKind::HostFile { rel: rel() },
            Tag::FileRoot => NodeKind::FileRoot { rel: rel() },
        };
        Some(Node {
            ino,
            parent: r.parent,
            file: r.file,
            anchor: self.anchor(ino),
            kind,
            before_refresh: r.before_refresh,
            path,
        })
    }

    /// Add node `n` to the known inodes with no counts (its parent pinned).
    fn insert(&mut self, n: &Node) {
        let (tag, key) = match &n.kind {
            NodeKind::Object(id) => {
                let counted = derived(self.direct, n.file, *id) != Some(n.ino);
                if counted {
                    self.ids.insert(n.ino, *id);
                }
                (Tag::Object, counted.then_some(Key::Object(n.file, *id)))
            }
            NodeKind::Symlink { target } => {
                self.targets.insert(n.ino, target.as_str().into());
                (Tag::Symlink, Some(Key::Link(n.parent, Name::new(n.name()))))
            }
            NodeKind::HostDir { rel } => (Tag::HostDir, Some(host_key(rel, HostTag::Dir))),
            NodeKind::HostFile { rel } => (Tag::HostFile, Some(host_key(rel, HostTag::File))),
            NodeKind::FileRoot { rel } => {
                self.file_roots.insert(n.file, n.ino);
                (Tag::FileRoot, Some(host_key(rel, HostTag::Root)))
            }
        };
        if let Some(key) = key {
            self.by_key.insert(key, n.ino);
        }
        if n.anchor != self.anchor(n.parent) {
            self.anchors.insert(n.ino, n.anchor.clone());
        }
        if let Some(p) = self.store.get_mut(n.parent).filter(|_| n.ino != ROOT_INO) {
            p.pins = p.pins.saturating_add(1);
        }
        self.store.insert(Record {
            ino: n.ino,
            parent: n.parent,
            name: Name::new(n.name()),
            file: n.file,
            lookups: 0,
            pins: 0,
            tag,
            before_refresh: n.before_refresh,
        });
    }

    /// Remove `ino` if neither the kernel nor another inode needs it, and then its parent if
    /// that one is no longer needed either; the numbers removed.
    fn release(&mut self, ino: u64, removed: &mut Vec<u64>) {
        let mut cur = ino;
        for _ in 0..MAX_DEPTH {
            let Some(r) = self.store.get(cur) else {
                return;
            };
            if cur == ROOT_INO || r.lookups != 0 || r.pins != 0 {
                return;
            }
            let key = self.key_of(r);
            let Some(r) = self.store.remove(cur) else {
                return;
            };
            removed.push(cur);
            self.ids.remove(&cur);
            self.targets.remove(&cur);
            self.anchors.remove(&cur);
            if self.file_roots.get(&r.file) == Some(&cur) {
                self.file_roots.remove(&r.file);
            }
            if let Some(key) = key {
                if self.by_key.get(&key) == Some(&cur) {
                    self.by_key.remove(&key);
                }
                // Its number stays reserved: a lookup soon after gets the same one.
                self.reserve(key, cur);
            }
            match self.store.get_mut(r.parent) {
                Some(p) => p.pins = p.pins.saturating_sub(1),
                None => return,
            }
            cur = r.parent;
        }
    }

    /// The counter key of a record being removed (its path is built before its parents go).
    fn key_of(&self, r: &Record) -> Option<Key> {
        let rel = || {
            let p = self.path(r.parent);
            let p = join_path(&p, &r.name);
            p.strip_prefix('/').unwrap_or(&p).to_string()
        };
        match r.tag {
            Tag::Object => self.ids.get(&r.ino).map(|&id| Key::Object(r.file, id)),
            Tag::Symlink => Some(Key::Link(r.parent, r.name.clone())),
            Tag::HostDir => Some(Key::Host(rel(), HostTag::Dir)),
            Tag::HostFile => Some(Key::Host(rel(), HostTag::File)),
            Tag::FileRoot => Some(Key::Host(rel(), HostTag::Root)),
        }
    }
}

fn host_key(rel: &std::path::Path, tag: HostTag) -> Key {
    Key::Host(rel.to_string_lossy().into_owned(), tag)
}

impl InodeTable {
    /// A table holding only the root group of the mounted file `file`, whose objects are
    /// numbered by address.
    pub fn new(file: FileIdx, root: ObjectId) -> InodeTable {
        InodeTable::with_root(NodeKind::Object(root), file, Some((file, root)))
    }

    /// A table holding only the root of a mounted directory.
    pub fn for_directory() -> InodeTable {
        let kind = NodeKind::HostDir {
            rel: PathBuf::new(),
        };
        InodeTable::with_root(kind, FileIdx::MAX, None)
    }

    fn with_root(kind: NodeKind, file: FileIdx, direct: Option<(FileIdx, ObjectId)>) -> InodeTable {
        let mut t = Tables::new(direct);
        t.store.insert(Record {
            ino: ROOT_INO,
            parent: ROOT_INO,
            name: Name::new(""),
            file,
            lookups: u32::MAX,
            pins: 0,
            tag: match kind {
                NodeKind::Object(_) => Tag::Object,
                _ => Tag::HostDir,
            },
            before_refresh: false,
        });
        InodeTable {
            tables: RwLock::new(t),
        }
    }

    /// Keep every node from its making to the unmount and ignore `forget` (the Zarr tree).
    pub fn keep_all(&self) {
        self.write().keep_all = true;
    }

    /// The node of `ino`, if the kernel knows it.
    pub fn get(&self, ino: u64) -> Option<Arc<Node>> {
        self.read().node(ino).map(Arc::new)
    }

    /// Number of inodes known.
    pub fn len(&self) -> usize {
        self.read().store.len()
    }

    /// Always false: the root exists from the start.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// A node made now: kept at once when every node is (the Zarr tree), else handed back
    /// to be remembered when the kernel gets it.
    fn made(&self, node: Node) -> Arc<Node> {
        let mut t = self.write();
        if t.keep_all && !t.store.contains(node.ino) {
            t.insert(&node);
            if let Some(r) = t.store.get_mut(node.ino) {
                r.lookups = u32::MAX;
            }
        }
        Arc::new(node)
    }

    /// The node of the entry `name` of the mounted directory's `parent`, standing for `kind`
    /// (a host kind, numbered by its path below the root). A [`NodeKind::FileRoot`] carries
    /// its file's index `file`.
    pub fn host(&self, parent: &Node, name: &str, kind: NodeKind, file: FileIdx) -> Arc<Node> {
        let tag = match kind {
            NodeKind::HostDir { .. } => HostTag::Dir,
            NodeKind::FileRoot { .. } => HostTag::Root,
            _ => HostTag::File,
        };
        let rel = match &kind {
            NodeKind::HostDir { rel } | NodeKind::HostFile { rel } | NodeKind::FileRoot { rel } => {
                rel.clone()
            }
            _ => PathBuf::new(),
        };
        let key = host_key(&rel, tag);
        let ino = {
            let mut t = self.write();
            let ino = t.number(key, false);
            if let Some(n) = t.node(ino) {
                return Arc::new(n);
            }
            ino
        };
        let mut node = Node::child(parent, name, ino, file, None, kind);
        if matches!(node.kind, NodeKind::FileRoot { .. }) {
            node.anchor = Some(Arc::new(Anchor {
                file_name: rel.to_string_lossy().into_owned(),
                h5_path: "/".to_string(),
                mount_path: node.path.clone(),
            }));
        }
        self.made(node)
    }

    /// The known [`NodeKind::FileRoot`] node of file `file`, if it has one.
    pub fn file_root(&self, file: FileIdx) -> Option<Arc<Node>> {
        let t = self.read();
        let ino = *t.file_roots.get(&file)?;
        t.node(ino).map(Arc::new)
    }

    /// The node of object `id` of the file of `parent`, reached as `name` in `parent`.
    pub fn object(&self, parent: &Node, name: &str, id: ObjectId) -> Arc<Node> {
        self.object_in(parent, name, parent.file, id, parent.anchor.clone())
    }

    /// The node of object `id` of file `file`: the known one (found first elsewhere, say),
    /// else one reached as `name` in `parent`, with `anchor`.
    pub fn object_in(
        &self,
        parent: &Node,
        name: &str,
        file: FileIdx,
        id: ObjectId,
        anchor: Option<Arc<Anchor>>,
    ) -> Arc<Node> {
        let ino = {
            let t = self.read();
            let d = derived(t.direct, file, id);
            if let Some(n) = d.and_then(|ino| t.node(ino)) {
                return Arc::new(n);
            }
            d
        };
        let ino = match ino {
            Some(ino) => ino,
            None => {
                let mut t = self.write();
                let ino = t.number(Key::Object(file, id), false);
                if let Some(n) = t.node(ino) {
                    return Arc::new(n);
                }
                ino
            }
        };
        self.made(Node::child(
            parent,
            name,
            ino,
            file,
            anchor,
            NodeKind::Object(id),
        ))
    }

    /// The object a number worked out from an address stands for (see the module docs); `None`
    /// for a counted number.
    pub fn object_of_number(&self, ino: u64) -> Option<(FileIdx, ObjectId)> {
        underived(self.read().direct, ino)
    }

    /// The node of the soft or external link `name` in `parent`, whose symlink text is
    /// `target`; a known one whose link changed (after a refresh, see `super::refresh`) gets
    /// the new text under the same number.
    pub fn symlink(&self, parent: &Node, name: &str, target: String) -> Arc<Node> {
        let key = Key::Link(parent.ino, Name::new(name));
        let ino = {
            let mut t = self.write();
            let ino = t.number(key, true);
            if t.store.contains(ino) {
                if t.targets.get(&ino).map(|s| &**s) != Some(target.as_str()) {
                    t.targets.insert(ino, target.as_str().into());
                }
                if let Some(n) = t.node(ino) {
                    return Arc::new(n);
                }
            }
            ino
        };
        self.made(Node::child(
            parent,
            name,
            ino,
            parent.file,
            parent.anchor.clone(),
            NodeKind::Symlink { target },
        ))
    }

    /// The node handed out to the kernel once more (a lookup's answer or a `readdirplus`
    /// entry): known from now on, one more count to give back.
    pub fn remember(&self, node: &Node) {
        self.count(node, true);
    }

    /// Keep `node` known for another inode that needs it (a sidecar of the dataset), until
    /// [`InodeTable::unpin`].
    pub fn pin(&self, node: &Node) {
        self.count(node, false);
    }

    fn count(&self, node: &Node, lookup: bool) {
        let mut t = self.write();
        if !t.store.contains(node.ino) {
            t.insert(node);
        }
        if let Some(r) = t.store.get_mut(node.ino) {
            let c = if lookup { &mut r.lookups } else { &mut r.pins };
            *c = c.saturating_add(1);
        }
    }

    /// Undo one [`InodeTable::pin`]; the numbers removed.
    pub fn unpin(&self, ino: u64) -> Vec<u64> {
        let mut t = self.write();
        let mut removed = Vec::new();
        if t.keep_all {
            return removed;
        }
        if let Some(r) = t.store.get_mut(ino) {
            r.pins = r.pins.saturating_sub(1);
            t.release(ino, &mut removed);
        }
        removed
    }

    /// The kernel forgot `n` of the counts of `ino`: the numbers of the inodes removed (it,
    /// once no count is left and nothing needs it, and parents it kept).
    pub fn forget(&self, ino: u64, n: u64) -> Vec<u64> {
        let mut t = self.write();
        let mut removed = Vec::new();
        if t.keep_all {
            return removed;
        }
        let Some(r) = t.store.get_mut(ino) else {
            return removed;
        };
        if r.lookups == u32::MAX {
            // Saturated: how many the kernel holds is not known any more.
            return removed;
        }
        r.lookups = r
            .lookups
            .saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
        t.release(ino, &mut removed);
        removed
    }

    /// Every known node.
    pub fn nodes(&self) -> Vec<Arc<Node>> {
        let t = self.read();
        t.store
            .iter()
            .filter_map(|r| t.node(r.ino))
            .map(Arc::new)
            .collect()
    }

    /// The file was read again (see `super::refresh`): every known node but the root was made
    /// before it.
    pub fn mark_before_refresh(&self) {
        let mut t = self.write();
        for r in t.store.iter_mut() {
            r.before_refresh = r.ino != ROOT_INO;
        }
    }

    /// Node `old` (an object's, made before a refresh) as found now: `name` in `parent`,
    /// the same number.
    pub fn rebind(&self, old: &Node, parent: &Node, name: &str) -> Arc<Node> {
        let node = Node::child(
            parent,
            name,
            old.ino,
            old.file,
            old.anchor.clone(),
            old.kind.clone(),
        );
        let mut t = self.write();
        let Some(was) = t.store.get(old.ino).map(|r| r.parent) else {
            return Arc::new(node);
        };
        if let Some(r) = t.store.get_mut(old.ino) {
            r.parent = parent.ino;
            r.name = Name::new(name);
            r.before_refresh = false;
        }
        if was != parent.ino && old.ino != ROOT_INO {
            if let Some(p) = t.store.get_mut(parent.ino) {
                p.pins = p.pins.saturating_add(1);
            }
            if let Some(p) = t.store.get_mut(was) {
                p.pins = p.pins.saturating_sub(1);
            }
            // The old parent goes if nothing else needs it (its listing ages out).
            t.release(was, &mut Vec::new());
        }
        if node.anchor != t.anchor(parent.ino) {
            t.anchors.insert(old.ino, node.anchor.clone());
        } else {
            t.anchors.remove(&old.ino);
        }
        Arc::new(node)
    }

    /// The known node of object `id` of file `file`.
    pub fn existing_object(&self, file: FileIdx, id: ObjectId) -> Option<Arc<Node>> {
        let t = self.read();
        let ino = match derived(t.direct, file, id) {
            Some(ino) => ino,
            None => *t.by_key.get(&Key::Object(file, id))?,
        };
        t.node(ino).map(Arc::new)
    }

    // A poisoned lock only means another thread panicked while holding it; the maps are
    // updated with single inserts, so they are still consistent.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        read(&self.tables)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Tables> {
        write(&self.tables)
    }
}

#[cfg(test)]
mod tests;
