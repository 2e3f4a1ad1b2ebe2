//! The mount as a Zarr store (`--zarr`, `--zarr=2`): the tree of the Zarr mapping
//! ([`crate::views::zarr`]) served as directories and files.
//!
//! Every HDF5 group is a directory holding its metadata documents (v3 `zarr.json`; v2
//! `.zgroup` and `.zattrs`) and its children; every dataset is a directory (0555) holding
//! its documents and one file (0444) per chunk key that exists: v3 `c/0/1/2` (directories
//! `c`, `c/0`, `c/0/1`), v2 `0.1.2`. In a directory or prefix mount each subdirectory and
//! each HDF5 file is a group (the file's root group, under the file's name); other files
//! are left out. The root's documents carry the consolidated metadata of the whole store
//! (`docs`).
//!
//! What is shown (see `tree`): hard, soft and external links to datasets are arrays at
//! each path that leads to them; a group appears at the first path it is found at, like the
//! plain tree's directories, and is left out at the others (a Zarr store has no links);
//! committed datatypes, dangling links and names Zarr cannot hold (reserved `__` names in
//! v3, a document's name, names of only periods) are left out. Each left-out name is logged
//! once.
//!
//! Chunk keys. A key exists exactly for each chunk the file holds (an unwritten chunk has
//! no key, so a Zarr reader fills it with the fill value); a lookup of any other name in the
//! grid answers `ENOENT`. Listings ask the array about each grid position (bounded, see
//! [`keys`]); a prefix directory of v3 answers a lookup for any position of the grid, and
//! is listed when a chunk below it exists. A key's size is the chunk's without reading it;
//! its bytes are read at the first read of the file and kept a while (`cache`). On a
//! remote source, a reader going through an array's keys in grid order has the next
//! chunks fetched ahead in few merged requests (`ahead`).
//!
//! Failures. A dataset that cannot be mapped (its array cannot be built) has documents that
//! fail with `EIO`, and no keys; one whose chunk index or chunks cannot be read fails those
//! keys with `EIO`. Either way one log line names the array and the cause, and the rest of
//! the store reads. The array directory's xattr [`ENCODING_XATTR`] says how its chunks are
//! served (stored bytes passed through, or decoded, and why); its other xattrs are the
//! dataset's, as in the plain tree.
//!
//! The mount stays read-only; the file is taken not to change (the Zarr tree does not
//! combine with `--refresh`), so documents and numbers are kept for the mount's life.

mod ahead;
mod cache;
mod docs;
pub mod keys;
mod table;
mod tree;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::attr::{Attr, FileKind};
use super::error::{FsError, FsResult};
use super::inode::{Node, NodeKind};
use super::{H5Fs, Xattrs};
use crate::error::ErrorClass;
use crate::io::ReadCtx;
use crate::model::{File, FileIdx, ObjectId};
use crate::views::zarr::{ZarrArray, ZarrOptions, ZarrVersion};
use keys::{KeyNode, KeyTree};
use table::{ArrayDir, Entry, KeyBlock, ZarrTable};

pub use table::{is_zarr_ino, ZARR_BASE};

/// The xattr of an array directory saying how its chunks are served.
pub const ENCODING_XATTR: &str = "user.h5mount.zarr_encoding";

/// Grid positions one listing asks about at most (see [`keys`]).
pub const MAX_LISTED_POSITIONS: u64 = 1 << 20;

/// The Zarr tree's state in a mount.
#[derive(Debug)]
pub struct ZarrFs {
    pub opts: ZarrOptions,
    table: ZarrTable,
    arrays: cache::ArrayCache,
    chunks: cache::ChunkCache,
    key_listings: cache::ListingCache,
    /// Held while the root's consolidated document is made (once, not by each caller).
    consolidating: Mutex<()>,
    /// Set when the store was found too large for consolidated metadata (not walked again,
    /// and the root no longer lists `.zmetadata`).
    too_big: AtomicBool,
    /// Nodes the consolidated metadata describes at most ([`docs::MAX_CONSOLIDATED`]; lower
    /// in tests).
    max_consolidated: AtomicUsize,
    /// netCDF's phony dimension names of the datasets of recently seen groups
    /// ([`crate::views::zarr::dims::phony_names`]: worked out once per group, not per array).
    phony: Mutex<lru::LruCache<(FileIdx, ObjectId), Arc<PhonyNames>>>,
}

/// Dimension names by dataset, of one group.
type PhonyNames = std::collections::HashMap<ObjectId, Vec<String>>;

/// Groups whose phony dimension names are kept.
const PHONY_GROUPS: usize = 256;

impl ZarrFs {
    pub fn new(opts: ZarrOptions) -> ZarrFs {
        ZarrFs {
            opts,
            table: ZarrTable::new(),
            arrays: cache::ArrayCache::new(),
            chunks: cache::ChunkCache::new(),
            key_listings: cache::ListingCache::new(),
            consolidating: Mutex::new(()),
            too_big: AtomicBool::new(false),
            max_consolidated: AtomicUsize::new(docs::MAX_CONSOLIDATED),
            phony: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(PHONY_GROUPS).unwrap_or(std::num::NonZeroUsize::MIN),
            )),
        }
    }

    /// The phony dimension names of the datasets of group `group` of `file`.
    fn phony_names(&self, file: &File, idx: FileIdx, group: ObjectId) -> Arc<PhonyNames> {
        if let Some(p) = crate::sync::lock(&self.phony).get(&(idx, group)) {
            return p.clone();
        }
        let p = Arc::new(crate::views::zarr::dims::phony_names(file, group));
        crate::sync::lock(&self.phony).put((idx, group), p.clone());
        p
    }

    /// The documents of a group directory, by name (`.zmetadata` only at the root, v2, and
    /// not once the store is known to be too large for it).
    fn group_documents(&self, root: bool) -> &'static [&'static str] {
        let consolidated = root && !self.too_big.load(Ordering::Relaxed);
        match (self.opts.version, consolidated) {
            (ZarrVersion::V3, _) => &["zarr.json"],
            (ZarrVersion::V2, false) => &[".zgroup", ".zattrs"],
            (ZarrVersion::V2, true) => &[".zgroup", ".zattrs", ".zmetadata"],
        }
    }

    /// The documents of an array directory, by name.
    fn array_documents(&self) -> &'static [&'static str] {
        match self.opts.version {
            ZarrVersion::V3 => &["zarr.json"],
            ZarrVersion::V2 => &[".zarray", ".zattrs"],
        }
    }
}

impl H5Fs {
    /// The Zarr tree of this mount, if it serves one.
    pub(super) fn zarr(&self) -> Option<&ZarrFs> {
        self.zarr.as_ref()
    }

    /// Lower the number of groups and arrays past which the Zarr store gets no consolidated
    /// metadata (tests: a store past the real limit is too large to build in one).
    #[doc(hidden)]
    pub fn zarr_limit_consolidated(&self, nodes: usize) {
        if let Some(z) = self.zarr() {
            z.max_consolidated.store(nodes, Ordering::Relaxed);
        }
    }

    /// What the Zarr number `ino` stands for.
    fn zarr_entry(&self, z: &ZarrFs, ino: u64) -> FsResult<Entry> {
        z.table.get(ino).ok_or(FsError::Errno(libc::ENOENT))
    }

    /// The file of index `file` (the mounted one as held now, or through the resolver).
    fn file_at(&self, file: crate::model::FileIdx, path: &str) -> FsResult<Arc<File>> {
        if let super::Mounted::File { idx, held } = &self.mounted {
            if file == *idx {
                return Ok(crate::sync::read(held).clone());
            }
        }
        self.resolver.get(file).map_err(|e| FsError::model(path, e))
    }

    /// Log once that the array at `path` fails, and why; the error answered (`EIO`).
    fn zarr_fail(&self, path: &str, what: &str, e: &crate::Error) -> FsError {
        self.log_once(&format!("zarr {path}"), || {
            format!("Zarr array {path}: {what}: {e}")
        });
        FsError::Errno(libc::EIO)
    }

    /// The array of array directory `dir` (built once, kept a while).
    fn zarr_array(&self, z: &ZarrFs, dir: &ArrayDir) -> FsResult<Arc<ZarrArray>> {
        let file = self
            .file_at(dir.file, &dir.path)
            .map_err(|e| self.zarr_fail_fs(&dir.path, e))?;
        // The group holding it, when of the same file: netCDF's phony dimension names are
        // per group.
        let group = self
            .node(dir.parent)
            .ok()
            .filter(|n| n.file == dir.file)
            .and_then(|n| self.object(&n).ok());
        z.arrays
            .get(&file, dir.id, || {
                let ds = file.dataset(dir.id)?;
                let mut a = ZarrArray::new(&file, &ds, z.opts)?;
                if a.dimension_names().is_none() {
                    if let Some(g) = group {
                        if let Some(names) = z.phony_names(&file, dir.file, g).get(&dir.id) {
                            a.set_dimension_names(names.clone());
                        }
                    }
                }
                Ok(a)
            })
            .map_err(|e| self.zarr_fail(&dir.path, "cannot be served", &e))
    }

    /// [`H5Fs::zarr_fail`] for a filesystem error.
    fn zarr_fail_fs(&self, path: &str, e: FsError) -> FsError {
        match e {
            FsError::Model { error, .. } => self.zarr_fail(path, "its file", &error),
            other => other,
        }
    }

    /// The numbers of the chunk keys of array directory `dir`.
    fn zarr_keys(&self, z: &ZarrFs, dir: &ArrayDir) -> FsResult<(Arc<ZarrArray>, Arc<KeyBlock>)> {
        let array = self.zarr_array(z, dir)?;
        if let Some(Some(block)) = dir.keys.get() {
            return Ok((array, block.clone()));
        }
        let block = KeyTree::new(z.opts.version, &array.grid_shape())
            .and_then(|tree| z.table.keys(dir, tree));
        match block {
            Some(b) => Ok((array, b)),
            None => {
                let e = crate::Error::limit("Zarr chunk grid", 0, "too many chunk keys to number");
                Err(self.zarr_fail(&dir.path, "its chunk keys", &e))
            }
        }
    }

    /// The array directory of key block `block`.
    fn zarr_block_dir(&self, z: &ZarrFs, block: &KeyBlock) -> FsResult<Arc<ArrayDir>> {
        match self.zarr_entry(z, block.array)? {
            Entry::Array(a) => Ok(a),
            _ => Err(FsError::Errno(libc::EIO)),
        }
    }

    /// The path of key `key` of `dir` (for messages).
    fn key_path(dir: &ArrayDir, key: &str) -> String {
        super::inode::join_path(&dir.path, key)
    }

    /// Attributes of a Zarr entry of `kind` and `size`.
    fn zarr_attr(&self, ino: u64, kind: FileKind, size: u64) -> Attr {
        Attr::new(
            ino,
            kind,
            size,
            (self.opts.uid, self.opts.gid),
            self.opts.file_mtime,
        )
    }

    /// `getattr` of a number of the Zarr range.
    pub(super) fn zarr_getattr(&self, z: &ZarrFs, ino: u64) -> FsResult<Attr> {
        match self.zarr_entry(z, ino)? {
            Entry::Array(_) => Ok(self.zarr_attr(ino, FileKind::Directory, 0)),
            Entry::Document(d) => {
                let len = self.zarr_document(z, &d)?.len() as u64;
                Ok(self.zarr_attr(ino, FileKind::RegularFile, len))
            }
            Entry::Key(block, local) => {
                match block.tree.node(local).ok_or(FsError::Errno(libc::ENOENT))? {
                    KeyNode::Dir(_) => Ok(self.zarr_attr(ino, FileKind::Directory, 0)),
                    KeyNode::Chunk(coords) => {
                        let dir = self.zarr_block_dir(z, &block)?;
                        self.chunk_attr(z, &dir, ino, &coords)
                    }
                }
            }
        }
    }

    /// Attributes of the chunk key `coords` of `dir` (number `ino`); `ENOENT` when the
    /// chunk was never written.
    fn chunk_attr(&self, z: &ZarrFs, dir: &ArrayDir, ino: u64, coords: &[u64]) -> FsResult<Attr> {
        let array = self.zarr_array(z, dir)?;
        match array.chunk_len(coords) {
            Ok(Some(len)) => Ok(self.zarr_attr(ino, FileKind::RegularFile, len)),
            Ok(None) => Err(FsError::Errno(libc::ENOENT)),
            Err(e) => Err(self.zarr_fail(&dir.path, "its chunk index", &e)),
        }
    }

    /// `lookup` in a Zarr mount.
    pub(super) fn zarr_lookup(&self, z: &ZarrFs, parent: u64, name: &str) -> FsResult<Attr> {
        let enoent = || FsError::Errno(libc::ENOENT);
        if name == "." {
            return self.getattr(parent);
        }
        if !is_zarr_ino(parent) {
            let node = self.node(parent)?;
            if name == ".." {
                return self.getattr(node.parent);
            }
            return self.zarr_group_lookup(z, &node, name);
        }
        match self.zarr_entry(z, parent)? {
            Entry::Document(_) => Err(FsError::Errno(libc::ENOTDIR)),
            Entry::Array(dir) => {
                if name == ".." {
                    return self.getattr(dir.parent);
                }
                if let Some(&doc) = z.array_documents().iter().find(|&&d| d == name) {
                    return self.document_attr(z, dir.ino, doc);
                }
                // Only these can be keys: other names are absent even where the array
                // cannot be served (a reader probing for another format's documents).
                let could_be_key = match z.opts.version {
                    ZarrVersion::V3 => name == "c",
                    ZarrVersion::V2 => name.bytes().all(|b| b.is_ascii_digit() || b == b'.'),
                };
                if !could_be_key {
                    return Err(enoent());
                }
                let (array, block) = self.zarr_keys(z, &dir)?;
                let coords = match z.opts.version {
                    ZarrVersion::V3 => Vec::new(),
                    ZarrVersion::V2 => array.parse_chunk_key(name).ok_or_else(enoent)?,
                };
                self.key_attr(z, &dir, &block, &coords)
            }
            Entry::Key(block, local) => {
                let KeyNode::Dir(prefix) = block.tree.node(local).ok_or_else(enoent)? else {
                    return Err(FsError::Errno(libc::ENOTDIR));
                };
                let dir = self.zarr_block_dir(z, &block)?;
                if name == ".." {
                    return match prefix.split_last() {
                        None => self.getattr(dir.ino),
                        Some((_, up)) => {
                            let l = block.tree.local(up).ok_or_else(enoent)?;
                            self.getattr(block.base + l)
                        }
                    };
                }
                let c = block
                    .tree
                    .coordinate(prefix.len(), name)
                    .ok_or_else(enoent)?;
                let mut coords = prefix;
                coords.push(c);
                self.key_attr(z, &dir, &block, &coords)
            }
        }
    }

    /// Attributes of the key tree node at `coords` of `dir` (a chunk's only if it exists).
    fn key_attr(
        &self,
        z: &ZarrFs,
        dir: &ArrayDir,
        block: &KeyBlock,
        coords: &[u64],
    ) -> FsResult<Attr> {
        let local = block
            .tree
            .local(coords)
            .ok_or(FsError::Errno(libc::ENOENT))?;
        let ino = block.base + local;
        match block.tree.node(local) {
            Some(KeyNode::Chunk(c)) => self.chunk_attr(z, dir, ino, &c),
            Some(KeyNode::Dir(_)) => Ok(self.zarr_attr(ino, FileKind::Directory, 0)),
            None => Err(FsError::Errno(libc::ENOENT)),
        }
    }

    /// Attributes of the document `name` of directory `dir`.
    fn document_attr(&self, z: &ZarrFs, dir: u64, name: &'static str) -> FsResult<Attr> {
        let doc = z
            .table
            .document(dir, name)
            .ok_or(FsError::Errno(libc::ENOSPC))?;
        self.zarr_getattr(z, doc.ino)
    }

    /// `open` of a Zarr number: documents and keys must be servable.
    pub(super) fn zarr_open(&self, z: &ZarrFs, ino: u64) -> FsResult<()> {
        match self.zarr_entry(z, ino)? {
            Entry::Array(_) => Err(FsError::Errno(libc::EISDIR)),
            Entry::Document(d) => self.zarr_document(z, &d).map(|_| ()),
            Entry::Key(..) => match self.zarr_getattr(z, ino)?.kind {
                FileKind::Directory => Err(FsError::Errno(libc::EISDIR)),
                _ => Ok(()),
            },
        }
    }

    /// `read` of a Zarr number: `size` bytes at `offset` of a document or chunk key, read
    /// for `ctx`.
    pub(super) fn zarr_read(
        &self,
        z: &ZarrFs,
        ctx: ReadCtx,
        ino: u64,
        offset: u64,
        size: u32,
    ) -> FsResult<Vec<u8>> {
        let bytes = match self.zarr_entry(z, ino)? {
            Entry::Array(_) => return Err(FsError::Errno(libc::EISDIR)),
            Entry::Document(d) => self.zarr_document(z, &d)?,
            Entry::Key(block, local) => {
                let KeyNode::Chunk(coords) =
                    block.tree.node(local).ok_or(FsError::Errno(libc::ENOENT))?
                else {
                    return Err(FsError::Errno(libc::EISDIR));
                };
                let dir = self.zarr_block_dir(z, &block)?;
                let array = self.zarr_array(z, &dir)?;
                ahead::on_key_read(&dir.ahead, &array, &coords);
                let got = z.chunks.get(ino, || {
                    array.chunk(ctx, &coords)?.ok_or_else(|| {
                        crate::Error::NotFound(Self::key_path(&dir, &array.chunk_key(&coords)))
                    })
                });
                match got {
                    Ok(b) => b,
                    Err(e) if e.errno_class() == ErrorClass::NotFound => {
                        return Err(FsError::Errno(libc::ENOENT))
                    }
                    Err(e) => return Err(self.zarr_fail(&dir.path, "reading a chunk", &e)),
                }
            }
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let end = start.saturating_add(size as usize).min(bytes.len());
        Ok(bytes[start..end].to_vec())
    }

    /// The xattrs of a Zarr number: an array directory's are its dataset's and
    /// [`ENCODING_XATTR`]; the others have none.
    pub(super) fn zarr_xattrs(&self, z: &ZarrFs, ino: u64) -> FsResult<Xattrs> {
        let Entry::Array(dir) = self.zarr_entry(z, ino)? else {
            return Ok(Xattrs::default());
        };
        let node = Node {
            ino: dir.ino,
            parent: dir.parent,
            path: dir.path.clone(),
            file: dir.file,
            anchor: dir.anchor.clone(),
            kind: NodeKind::Object(dir.id),
            before_refresh: false,
        };
        let mut all = self.xattrs(&node)?;
        match self.zarr_array(z, &dir) {
            Ok(a) => all
                .shown
                .push((ENCODING_XATTR.to_string(), a.encoding().into_bytes())),
            Err(e) => all.refused.push((ENCODING_XATTR.to_string(), e)),
        }
        Ok(all)
    }
}
