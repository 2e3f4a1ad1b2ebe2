//! The metadata documents of the Zarr tree, and the root's consolidated metadata.
//!
//! A group's documents are the mapping's ([`group_metadata`]); a directory of a mounted
//! directory, which is no HDF5 group, has those of a group without attributes
//! ([`plain_group_documents`]); an array's are its array's ([`ZarrArray::metadata`]).
//!
//! Consolidated metadata lets a reader open the whole store with one read. The root holds
//! the documents of every group and array below it, found by walking the Zarr tree as its
//! listings show it (so exactly what a reader would find by listing), keyed by their paths
//! relative to the root:
//! - v2: the file `.zmetadata`, `{"zarr_consolidated_format": 1, "metadata": {".zgroup":
//!   ..., ".zattrs": ..., "a/.zgroup": ..., "a/x/.zarray": ..., ...}}`;
//! - v3: the member `consolidated_metadata` of the root's `zarr.json`, `{"kind": "inline",
//!   "must_understand": false, "metadata": {"a": <a's zarr.json>, "a/x": ..., ...}}`, each
//!   group in it carrying an empty one of its own, as zarr-python writes it.
//!
//! An object whose documents cannot be made (an array that cannot be served, a file of a
//! mounted directory that cannot be opened) is left out of it, with the log line its own
//! failure writes. A store of more than [`MAX_CONSOLIDATED`] nodes gets none (one log line):
//! v2's `.zmetadata` does not exist (it is listed until the first walk finds the store too
//! large, not after) and v3's root `zarr.json` has no `consolidated_metadata`; readers then
//! list the tree, which always works.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::table::{Document, Entry};
use super::{is_zarr_ino, ZarrFs};
use crate::fs::attr::FileKind;
use crate::fs::error::{FsError, FsResult};
use crate::fs::inode::{Node, NodeKind, ROOT_INO};
use crate::fs::H5Fs;
use crate::sync::lock;
use crate::views::zarr::{document_bytes, group_metadata, Documents, ZarrOptions, ZarrVersion};

/// Nodes (groups and arrays) the consolidated metadata describes at most.
pub const MAX_CONSOLIDATED: usize = 100_000;

/// The documents of a group that is no HDF5 group (a directory of a mounted directory).
pub fn plain_group_documents(opts: ZarrOptions) -> Documents {
    match opts.version {
        ZarrVersion::V3 => vec![(
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "group", "attributes": {}}),
        )],
        ZarrVersion::V2 => vec![
            (".zgroup", json!({"zarr_format": 2})),
            (".zattrs", json!({})),
        ],
    }
}

/// The `consolidated_metadata` member of v3 (`metadata`: by path).
fn inline(metadata: Map<String, Value>) -> Value {
    json!({"kind": "inline", "must_understand": false, "metadata": metadata})
}

impl H5Fs {
    /// The bytes of document `doc` (made once).
    pub(super) fn zarr_document(&self, z: &ZarrFs, doc: &Document) -> FsResult<Arc<Vec<u8>>> {
        if let Some(b) = doc.bytes.get() {
            return Ok(b.clone());
        }
        let root = doc.dir == ROOT_INO;
        // The root's documents walk the whole store: made by one caller, the others wait.
        let _one = root.then(|| lock(&z.consolidating));
        if let Some(b) = doc.bytes.get() {
            return Ok(b.clone());
        }
        let value = match (root, doc.name) {
            (true, ".zmetadata") => self.consolidated(z)?.ok_or(FsError::Errno(libc::ENOENT))?,
            (true, "zarr.json") => {
                let mut v = self.zarr_documents(z, ROOT_INO)?.find(doc.name)?;
                if let (Some(all), Some(o)) = (self.consolidated(z)?, v.as_object_mut()) {
                    o.insert("consolidated_metadata".into(), all);
                }
                v
            }
            _ => self.zarr_documents(z, doc.dir)?.find(doc.name)?,
        };
        let bytes = Arc::new(document_bytes(&value));
        Ok(doc.bytes.get_or_init(|| bytes).clone())
    }

    /// The documents of the directory `dir` (a group's or an array's), without
    /// consolidated metadata.
    fn zarr_documents(&self, z: &ZarrFs, dir: u64) -> FsResult<Named> {
        if is_zarr_ino(dir) {
            let Entry::Array(a) = self.zarr_entry(z, dir)? else {
                return Err(FsError::Errno(libc::ENOTDIR));
            };
            return Ok(Named(self.zarr_array(z, &a)?.metadata()));
        }
        let node = self.node(dir)?;
        self.group_documents_of(z, &node).map(Named)
    }

    /// The documents of the group directory `node`.
    fn group_documents_of(&self, z: &ZarrFs, node: &Node) -> FsResult<Documents> {
        if let NodeKind::HostDir { .. } = node.kind {
            return Ok(plain_group_documents(z.opts));
        }
        let id = self.group(node)?;
        let file = self.file_of(node)?;
        group_metadata(&file, id, z.opts).map_err(|e| FsError::model(&node.path, e))
    }

    /// The consolidated metadata of the store (v2: the whole `.zmetadata` document; v3:
    /// the root's `consolidated_metadata` member); `None` past [`MAX_CONSOLIDATED`].
    fn consolidated(&self, z: &ZarrFs) -> FsResult<Option<Value>> {
        if z.too_big.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut found: Vec<(String, Value)> = Vec::new();
        let root = self.node(ROOT_INO)?;
        let v2 = z.opts.version == ZarrVersion::V2;
        if v2 {
            for (name, v) in self.group_documents_of(z, &root)? {
                found.push((name.to_string(), v));
            }
        }
        let mut nodes = 0usize;
        if !self.walk(z, ROOT_INO, "", &mut found, &mut nodes) {
            z.too_big.store(true, Ordering::Relaxed);
            // The root's listing, made during the walk, named `.zmetadata`: made again
            // without it.
            self.listings.remove(ROOT_INO);
            log::warn!(
                "the Zarr store has more than {} groups and arrays: no consolidated metadata \
                 (readers list the tree instead)",
                z.max_consolidated.load(Ordering::Relaxed)
            );
            return Ok(None);
        }
        // Shallower paths first, then by bytes (each parent's children together, as
        // zarr-python reads them back); a map sorts by bytes anyway.
        found.sort_by(|a, b| {
            let depth = |k: &str| k.matches('/').count();
            (depth(&a.0), a.0.as_bytes()).cmp(&(depth(&b.0), b.0.as_bytes()))
        });
        let metadata: Map<String, Value> = found.into_iter().collect();
        Ok(Some(match v2 {
            true => json!({"zarr_consolidated_format": 1, "metadata": metadata}),
            false => inline(metadata),
        }))
    }

    /// Add the documents of everything below directory `dir` (at `rel`, relative to the
    /// root) to `found`, counting nodes in `nodes`; false past [`MAX_CONSOLIDATED`].
    fn walk(
        &self,
        z: &ZarrFs,
        dir: u64,
        rel: &str,
        found: &mut Vec<(String, Value)>,
        nodes: &mut usize,
    ) -> bool {
        let listing = match self.zarr_listing(z, dir) {
            Ok(l) => l,
            Err(e) => {
                // Only the part below `dir` is missing.
                self.log_error("consolidated metadata", &e);
                return true;
            }
        };
        for e in listing.entries.iter().skip(2) {
            if e.kind != FileKind::Directory {
                continue;
            }
            *nodes += 1;
            if *nodes > z.max_consolidated.load(Ordering::Relaxed) {
                return false;
            }
            let path = match rel {
                "" => e.name.to_string(),
                _ => format!("{rel}/{}", e.name),
            };
            let docs = match self.zarr_documents(z, e.ino) {
                Ok(d) => d.0,
                Err(err) => {
                    self.log_error("consolidated metadata", &err);
                    continue;
                }
            };
            let group = !is_zarr_ino(e.ino);
            for (name, mut v) in docs {
                match z.opts.version {
                    ZarrVersion::V2 => found.push((format!("{path}/{name}"), v)),
                    ZarrVersion::V3 => {
                        if let (true, Some(o)) = (group, v.as_object_mut()) {
                            o.insert("consolidated_metadata".into(), inline(Map::new()));
                        }
                        found.push((path.clone(), v));
                    }
                }
            }
            if group && !self.walk(z, e.ino, &path, found, nodes) {
                return false;
            }
        }
        true
    }
}

/// Documents, to take one by name.
struct Named(Documents);

impl Named {
    /// The document `name` (`ENOENT` when the mapping has none of that name).
    fn find(self, name: &str) -> FsResult<Value> {
        self.0
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .ok_or(FsError::Errno(libc::ENOENT))
    }
}
