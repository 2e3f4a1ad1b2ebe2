//! Inode numbers: stable for the mount, derived from object identity.
//!
//! An HDF5 object is identified by the address of its object header ([`ObjectId`]); every hard
//! link to it reaches the same header, so the inode number is a function of the address:
//! `address + 2` (the root group is always the FUSE root inode 1, and `+ 2` keeps every other
//! object clear of it). Addresses above [`LINK_BASE`] can only come from a corrupt file; such
//! objects get numbers from a counter in the top range instead.
//!
//! Objects of other files, reached through external links or, in a directory mount, of every
//! file, are identified by `(file, address)` (the file by its index in the mount's resolver,
//! `model::resolver`) and numbered from a counter starting at [`EXTERNAL_BASE`]; addresses of
//! the mounted file at or above it take the fallback counter, so the ranges never meet. The
//! entries of a mounted directory (directories, HDF5 files shown as directories, other files)
//! are identified by their path below the mount root and numbered from the same counter.
//!
//! Soft and external links are not objects: each `(parent inode, name)` pair gets its own
//! number from a counter starting at [`LINK_BASE`], remembered for the life of the mount.
//! Sidecar view files (`NAME.npy`, `NAME.hdr`) are not in this table: `super::views` numbers
//! them from `views::SIDECAR_BASE` (3 * 2^62), above every range handed out here.
//!
//! Nodes are never forgotten (the kernel's `forget` is ignored): the table grows with the
//! number of distinct objects and links visited, which the file bounds.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use std::path::PathBuf;

use super::attr::Attr;
use crate::model::{FileIdx, ObjectId};
use crate::sync::{read, write};

/// The FUSE root inode.
pub const ROOT_INO: u64 = 1;

/// First inode number of soft/external links. Object addresses below this give inode numbers
/// below it too, so the two ranges cannot meet (files are far smaller than 2^62 bytes).
pub const LINK_BASE: u64 = 1 << 62;

/// First inode number of objects of files other than the mounted one (below 2^61, so their
/// sidecar numbers fit too).
pub const EXTERNAL_BASE: u64 = 1 << 60;

/// First inode number for objects whose address is too large for `address + 2`.
const FALLBACK_BASE: u64 = 1 << 63;

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

/// One inode.
#[derive(Debug)]
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
    /// Attributes, computed on first use.
    pub attr: OnceLock<Attr>,
    /// Made before the last refresh (see [`InodeTable::reset_attrs`]): where the object was
    /// shown then may not lead to it in the new view, so its path is taken again from where
    /// it is found next ([`InodeTable::rebind`]).
    pub before_refresh: bool,
}

impl Node {
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
}

impl NodeKind {
    fn host_rel(&self) -> Option<&PathBuf> {
        match self {
            NodeKind::HostDir { rel } | NodeKind::HostFile { rel } | NodeKind::FileRoot { rel } => {
                Some(rel)
            }
            _ => None,
        }
    }
}

impl Tables {
    /// The next number of the counted range (objects of other files, host entries).
    fn next_counter(&mut self) -> u64 {
        if self.next_external < LINK_BASE {
            let ino = self.next_external;
            self.next_external += 1;
            ino
        } else {
            let ino = self.next_fallback;
            self.next_fallback = self.next_fallback.saturating_add(1);
            ino
        }
    }
}

#[derive(Debug, Default)]
struct Tables {
    nodes: HashMap<u64, Arc<Node>>,
    by_object: HashMap<(FileIdx, ObjectId), u64>,
    by_link: HashMap<(u64, String), u64>,
    by_host: HashMap<PathBuf, u64>,
    /// The [`NodeKind::FileRoot`] node of each file that has one.
    file_roots: HashMap<FileIdx, u64>,
    /// The file whose objects are numbered by address (the mounted file).
    direct: Option<FileIdx>,
    next_link: u64,
    next_external: u64,
    next_fallback: u64,
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

impl InodeTable {
    /// A table holding only the root group of the mounted file `file`, whose objects are
    /// numbered by address.
    pub fn new(file: FileIdx, root: ObjectId) -> InodeTable {
        let t = InodeTable::with_root(NodeKind::Object(root), file, Some(file));
        t.write().by_object.insert((file, root), ROOT_INO);
        t
    }

    /// A table holding only the root of a mounted directory.
    pub fn for_directory() -> InodeTable {
        let t = InodeTable::with_root(
            NodeKind::HostDir {
                rel: PathBuf::new(),
            },
            FileIdx::MAX,
            None,
        );
        t.write().by_host.insert(PathBuf::new(), ROOT_INO);
        t
    }

    fn with_root(kind: NodeKind, file: FileIdx, direct: Option<FileIdx>) -> InodeTable {
        let mut t = Tables {
            next_link: LINK_BASE,
            next_external: EXTERNAL_BASE,
            next_fallback: FALLBACK_BASE,
            direct,
            ..Tables::default()
        };
        t.nodes.insert(
            ROOT_INO,
            Arc::new(Node {
                ino: ROOT_INO,
                parent: ROOT_INO,
                path: "/".to_string(),
                file,
                anchor: None,
                kind,
                attr: OnceLock::new(),
                before_refresh: false,
            }),
        );
        InodeTable {
            tables: RwLock::new(t),
        }
    }

    /// The node of the entry `name` of the mounted directory's `parent`, standing for `kind`
    /// (a host kind; created on first sight, keyed by its path below the root). A
    /// [`NodeKind::FileRoot`] carries its file's index `file`.
    pub fn host(&self, parent: &Node, name: &str, kind: NodeKind, file: FileIdx) -> Arc<Node> {
        let rel = kind.host_rel().cloned().unwrap_or_default();
        {
            let t = self.read();
            if let Some(n) = t.by_host.get(&rel).and_then(|ino| t.nodes.get(ino)) {
                if n.kind == kind {
                    return n.clone();
                }
            }
        }
        let mut t = self.write();
        if let Some(n) = t.by_host.get(&rel).and_then(|ino| t.nodes.get(ino)) {
            if n.kind == kind {
                return n.clone();
            }
        }
        // A new entry, or one whose kind changed (a file replaced by a directory): a new
        // inode, so the kernel never mixes the two.
        let ino = t.next_counter();
        let is_root = matches!(kind, NodeKind::FileRoot { .. });
        let node = Arc::new(Node {
            ino,
            parent: parent.ino,
            path: join_path(&parent.path, name),
            file,
            anchor: is_root.then(|| {
                Arc::new(Anchor {
                    file_name: rel.to_string_lossy().into_owned(),
                    h5_path: "/".to_string(),
                    mount_path: join_path(&parent.path, name),
                })
            }),
            kind,
            attr: OnceLock::new(),
            before_refresh: false,
        });
        t.by_host.insert(rel, ino);
        if is_root {
            t.file_roots.insert(file, ino);
        }
        t.nodes.insert(ino, node.clone());
        node
    }

    /// The [`NodeKind::FileRoot`] node of file `file`, if it has one.
    pub fn file_root(&self, file: FileIdx) -> Option<Arc<Node>> {
        let t = self.read();
        t.file_roots
            .get(&file)
            .and_then(|i| t.nodes.get(i))
            .cloned()
    }

    /// The node of `ino`, if it was handed out.
    pub fn get(&self, ino: u64) -> Option<Arc<Node>> {
        self.read().nodes.get(&ino).cloned()
    }

    /// Number of inodes handed out so far.
    pub fn len(&self) -> usize {
        self.read().nodes.len()
    }

    /// Always false: the root exists from the start.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The node of object `id` of the file of `parent`, reached as `name` in `parent`
    /// (created on first sight).
    pub fn object(&self, parent: &Node, name: &str, id: ObjectId) -> Arc<Node> {
        self.object_in(parent, name, parent.file, id, parent.anchor.clone())
    }

    /// The node of object `id` of file `file`, reached as `name` in `parent` (created on
    /// first sight, with `anchor`).
    pub fn object_in(
        &self,
        parent: &Node,
        name: &str,
        file: FileIdx,
        id: ObjectId,
        anchor: Option<Arc<Anchor>>,
    ) -> Arc<Node> {
        if let Some(node) = self.existing_object(file, id) {
            return node;
        }
        let mut t = self.write();
        if let Some(node) = t
            .by_object
            .get(&(file, id))
            .and_then(|ino| t.nodes.get(ino))
        {
            return node.clone();
        }
        let direct = id.0.checked_add(2).filter(|&i| i < EXTERNAL_BASE);
        let ino = match direct {
            Some(ino) if t.direct == Some(file) => ino,
            _ if t.direct != Some(file) => t.next_counter(),
            _ => {
                let ino = t.next_fallback;
                t.next_fallback = t.next_fallback.saturating_add(1);
                ino
            }
        };
        let node = Arc::new(Node {
            ino,
            parent: parent.ino,
            path: join_path(&parent.path, name),
            file,
            anchor,
            kind: NodeKind::Object(id),
            attr: OnceLock::new(),
            before_refresh: false,
        });
        t.by_object.insert((file, id), ino);
        t.nodes.insert(ino, node.clone());
        node
    }

    /// The node of the soft or external link `name` in `parent`, whose symlink text is
    /// `target`: created on first sight, and given the new text under the same inode number
    /// when the link changed (after a refresh, see `super::refresh`).
    pub fn symlink(&self, parent: &Node, name: &str, target: String) -> Arc<Node> {
        let key = (parent.ino, name.to_string());
        let same =
            |node: &Node| matches!(&node.kind, NodeKind::Symlink { target: t } if *t == target);
        if let Some(node) = {
            let t = self.read();
            t.by_link
                .get(&key)
                .and_then(|ino| t.nodes.get(ino))
                .filter(|n| same(n))
                .cloned()
        } {
            return node;
        }
        let mut t = self.write();
        if let Some(old) = t
            .by_link
            .get(&key)
            .and_then(|ino| t.nodes.get(ino))
            .cloned()
        {
            if same(&old) {
                return old;
            }
            let node = Arc::new(Node {
                ino: old.ino,
                parent: old.parent,
                path: old.path.clone(),
                file: old.file,
                anchor: old.anchor.clone(),
                kind: NodeKind::Symlink { target },
                attr: OnceLock::new(),
                before_refresh: false,
            });
            t.nodes.insert(old.ino, node.clone());
            return node;
        }
        let ino = t.next_link;
        t.next_link = t.next_link.saturating_add(1);
        let node = Arc::new(Node {
            ino,
            parent: parent.ino,
            path: join_path(&parent.path, name),
            file: parent.file,
            anchor: parent.anchor.clone(),
            kind: NodeKind::Symlink { target },
            attr: OnceLock::new(),
            before_refresh: false,
        });
        t.by_link.insert(key, ino);
        t.nodes.insert(ino, node.clone());
        node
    }

    /// Every node handed out so far.
    pub fn nodes(&self) -> Vec<Arc<Node>> {
        self.read().nodes.values().cloned().collect()
    }

    /// Forget every computed attribute (after the file was re-read, see `super::refresh`):
    /// each node is replaced by a copy with an empty `attr`. A reader still holding an old
    /// node may fill that copy's `attr`, which no one looks at again.
    pub fn reset_attrs(&self) {
        let mut t = self.write();
        for node in t.nodes.values_mut() {
            *node = Arc::new(Node {
                ino: node.ino,
                parent: node.parent,
                path: node.path.clone(),
                file: node.file,
                anchor: node.anchor.clone(),
                kind: node.kind.clone(),
                attr: OnceLock::new(),
                before_refresh: node.ino != ROOT_INO,
            });
        }
    }

    /// Node `old` (an object's, made before a refresh) as found now: `name` in `parent`,
    /// the same inode number.
    pub fn rebind(&self, old: &Node, parent: &Node, name: &str) -> Arc<Node> {
        let node = Arc::new(Node {
            ino: old.ino,
            parent: parent.ino,
            path: join_path(&parent.path, name),
            file: old.file,
            anchor: old.anchor.clone(),
            kind: old.kind.clone(),
            attr: OnceLock::new(),
            before_refresh: false,
        });
        self.write().nodes.insert(old.ino, node.clone());
        node
    }

    /// The node of object `id` of file `file`, if it was handed out.
    pub fn existing_object(&self, file: FileIdx, id: ObjectId) -> Option<Arc<Node>> {
        let t = self.read();
        t.by_object
            .get(&(file, id))
            .and_then(|ino| t.nodes.get(ino))
            .cloned()
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
mod tests {
    use super::*;

    #[test]
    fn objects_share_inodes_and_links_get_their_own() {
        let t = InodeTable::new(0, ObjectId(96));
        let root = t.get(ROOT_INO).unwrap();
        assert_eq!(root.object(), Some(ObjectId(96)));
        let a = t.object(&root, "a", ObjectId(800));
        assert_eq!(a.ino, 802);
        assert_eq!(a.path, "/a");
        let b = t.object(&root, "b", ObjectId(800));
        assert_eq!(b.ino, 802, "hard links share the inode");
        assert_eq!(b.path, "/a", "first path wins");
        // A hard link back to the root is the root.
        assert_eq!(t.object(&a, "up", ObjectId(96)).ino, ROOT_INO);
        let s1 = t.symlink(&a, "s", "x".into());
        let s2 = t.symlink(&root, "s", "x".into());
        assert!(s1.ino >= LINK_BASE && s2.ino >= LINK_BASE && s1.ino != s2.ino);
        assert_eq!(
            t.symlink(&a, "s", "y".into()).ino,
            s1.ino,
            "stable per (parent, name)"
        );
        assert_eq!(s1.path, "/a/s");
        let huge = t.object(&root, "h", ObjectId(u64::MAX));
        assert!(huge.ino >= FALLBACK_BASE);
        let high = t.object(&root, "hi", ObjectId(EXTERNAL_BASE));
        assert!(
            high.ino >= FALLBACK_BASE,
            "main addresses never reach the external range"
        );
        assert_eq!(t.len(), 6);
        // The same address in another file is another object.
        let ext = t.object_in(&root, "x", 1, ObjectId(800), None);
        assert!((EXTERNAL_BASE..LINK_BASE).contains(&ext.ino));
        assert_eq!(ext.file, 1);
        let inside = t.object(&ext, "y", ObjectId(900));
        assert_eq!(inside.file, 1, "children live in their parent's file");
        assert_eq!(inside.ino, ext.ino + 1);
        assert_eq!(
            t.object_in(&a, "again", 1, ObjectId(800), None).ino,
            ext.ino
        );
    }
}
