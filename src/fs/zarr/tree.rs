//! Listings and lookups of the Zarr tree's directories: which links of a group become
//! groups and arrays, and which keys an array directory shows (see the parent module).
//!
//! Group and host directory listings are kept with the plain tree's listings; the listings
//! of array and key directories, which may hold many keys, in a bounded cache of their own
//! (`super::cache`).

use std::sync::Arc;

use super::keys::KeyNode;
use super::table::{ArrayDir, Entry, KeyBlock};
use super::{is_zarr_ino, ZarrFs, MAX_LISTED_POSITIONS};
use crate::fs::attr::{Attr, FileKind};
use crate::fs::dir::{self, DirEntry, Listing};
use crate::fs::error::{FsError, FsResult};
use crate::fs::inode::{self, Anchor, Node, NodeKind, ROOT_INO};
use crate::fs::H5Fs;
use crate::model::resolver::fold;
use crate::model::{File, FileIdx, Link, LinkTarget, ObjectId, ObjectKind};
use crate::views::zarr::ZarrVersion;

/// Why Zarr cannot hold the node name `name`, if it cannot.
pub fn name_problem(name: &str, version: ZarrVersion) -> Option<&'static str> {
    let documents: &[&str] = match version {
        ZarrVersion::V3 => &["zarr.json"],
        ZarrVersion::V2 => &[".zarray", ".zgroup", ".zattrs", ".zmetadata"],
    };
    if name.bytes().all(|b| b == b'.') {
        Some("a name of only periods")
    } else if version == ZarrVersion::V3 && name.starts_with("__") {
        Some("names starting with __ are reserved in Zarr v3")
    } else if documents.contains(&name) {
        Some("the name of a Zarr metadata document")
    } else {
        None
    }
}

/// The rest of the mount path `path` below `prefix`, if it is or lies below it.
fn below<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let prefix = prefix.trim_end_matches('/');
    let rest = path.strip_prefix(prefix)?;
    match rest {
        "" => Some(""),
        _ => rest.strip_prefix('/'),
    }
}

/// The HDF5 path, in its own file, of the group shown as `node`.
fn h5_path(node: &Node) -> String {
    let Some(a) = &node.anchor else {
        return node.path.clone();
    };
    match below(&node.path, &a.mount_path) {
        Some("") | None => a.h5_path.clone(),
        Some(rest) => inode::join_path(&a.h5_path, rest),
    }
}

impl H5Fs {
    /// Log once that the entry at `path` is left out of the Zarr store, and why.
    fn zarr_leave_out(&self, path: &str, why: impl FnOnce() -> String) {
        self.log_once(&format!("zarr-left-out {path}"), || {
            format!("{path}: left out of the Zarr store: {}", why())
        });
    }

    /// `listing` in a Zarr mount.
    pub(in crate::fs) fn zarr_listing(&self, z: &ZarrFs, ino: u64) -> FsResult<Arc<Listing>> {
        if is_zarr_ino(ino) {
            if let Some(l) = z.key_listings.get(ino) {
                return Ok(l.clone());
            }
            let listing = Arc::new(match self.zarr_entry(z, ino)? {
                Entry::Document(_) => return Err(FsError::Errno(libc::ENOTDIR)),
                Entry::Array(dir) => self.array_listing(z, &dir)?,
                Entry::Key(block, local) => self.key_listing(z, &block, local)?,
            });
            z.key_listings.put(ino, listing.clone());
            return Ok(listing);
        }
        if let Some(l) = self.cached_listing(ino) {
            return Ok(l);
        }
        let gen = self.listings.gen();
        let node = self.node(ino)?;
        let listing = Arc::new(self.group_listing(z, &node)?);
        Ok(self.listings.keep(ino, gen, listing))
    }

    /// Entries for the documents `names` of directory `dir`.
    fn document_entries(
        &self,
        z: &ZarrFs,
        dir: u64,
        names: &[&'static str],
    ) -> FsResult<Vec<DirEntry>> {
        names
            .iter()
            .map(|&name| {
                let doc = z
                    .table
                    .document(dir, name)
                    .ok_or(FsError::Errno(libc::ENOSPC))?;
                Ok(DirEntry {
                    ino: doc.ino,
                    kind: FileKind::RegularFile,
                    name: name.into(),
                })
            })
            .collect()
    }

    /// The listing of a group, a host directory or an HDF5 file of a mounted directory.
    fn group_listing(&self, z: &ZarrFs, node: &Node) -> FsResult<Listing> {
        let mut entries = dir::dots(node.ino, node.parent);
        let docs = z.group_documents(node.ino == ROOT_INO);
        entries.extend(self.document_entries(z, node.ino, docs)?);
        if let NodeKind::HostDir { rel } = &node.kind {
            let host = self.host_listing(node, rel)?;
            for e in host.entries.into_iter().skip(2) {
                let path = inode::join_path(&node.path, &e.name);
                let kind = self.inodes.get(e.ino).map(|n| n.kind.clone());
                if !matches!(
                    kind,
                    Some(NodeKind::HostDir { .. } | NodeKind::FileRoot { .. })
                ) {
                    // Not an error of the file: other files are simply not part of a store.
                    log::debug!("{path}: not a directory or an HDF5 file: not in the Zarr store");
                    continue;
                }
                if let Some(why) = name_problem(&e.name, z.opts.version) {
                    self.zarr_leave_out(&path, || why.into());
                    continue;
                }
                entries.push(e);
            }
            return Ok(Listing::new(entries));
        }
        let id = self.group(node)?;
        let file = self.file_of(node)?;
        let links = file.links(id).map_err(|e| FsError::model(&node.path, e))?;
        file.prefetch_headers(&links, usize::MAX);
        for link in links.iter() {
            if let Some(e) = self.zarr_child(z, node, &file, &link.to_link()) {
                entries.push(e);
            }
        }
        Ok(Listing::new(entries))
    }

    /// `lookup` of `name` in a directory of the plain tree's nodes (a group, a host
    /// directory, an HDF5 file of a mounted directory).
    pub(in crate::fs) fn zarr_group_lookup(
        &self,
        z: &ZarrFs,
        node: &Node,
        name: &str,
    ) -> FsResult<Attr> {
        let enoent = || FsError::Errno(libc::ENOENT);
        if let Some(l) = self.cached_listing(node.ino) {
            return self.getattr(l.find(name).ok_or_else(enoent)?.ino);
        }
        let docs = z.group_documents(node.ino == ROOT_INO);
        if let Some(&doc) = docs.iter().find(|&&d| d == name) {
            return self.document_attr(z, node.ino, doc);
        }
        match node.kind {
            NodeKind::HostDir { .. } => {
                let l = self.zarr_listing(z, node.ino)?;
                self.getattr(l.find(name).ok_or_else(enoent)?.ino)
            }
            NodeKind::Object(_) | NodeKind::FileRoot { .. } => {
                let id = self.group(node)?;
                let file = self.file_of(node)?;
                let link = file
                    .lookup(id, name)
                    .map_err(|e| FsError::model(&node.path, e))?
                    .ok_or_else(enoent)?;
                let e = self.zarr_child(z, node, &file, &link).ok_or_else(enoent)?;
                self.getattr(e.ino)
            }
            _ => Err(FsError::Errno(libc::ENOTDIR)),
        }
    }

    /// The entry of `link` of the group `dir` (of `file`) in the Zarr tree; `None`, and a
    /// log line once, for a link the store leaves out.
    fn zarr_child(
        &self,
        z: &ZarrFs,
        dir: &Node,
        file: &Arc<File>,
        link: &Link,
    ) -> Option<DirEntry> {
        let name = &link.name;
        let path = inode::join_path(&dir.path, name);
        if let Some(why) = dir::bad_name(name).or_else(|| name_problem(name, z.opts.version)) {
            self.zarr_leave_out(&path, || why.into());
            return None;
        }
        let target: Result<(FileIdx, ObjectId, Option<Arc<Anchor>>), String> = match &link.target {
            LinkTarget::Hard(id) => Ok((dir.file, *id, dir.anchor.clone())),
            LinkTarget::Soft(t) => follow_soft(dir, file, t).map(|(f, id)| (f, id, None)),
            LinkTarget::External {
                file: fname,
                path: opath,
            } => self.follow_external(dir, fname, opath).map(|(f, id)| {
                let anchor = Arc::new(Anchor {
                    file_name: fname.clone(),
                    h5_path: fold(std::path::Path::new(opath))
                        .to_string_lossy()
                        .into_owned(),
                    mount_path: path.clone(),
                });
                (f, id, Some(anchor))
            }),
            LinkTarget::UserDefined(t) => Err(format!("user-defined link type {t}")),
        };
        let (fidx, id, anchor) = match target {
            Ok(t) => t,
            Err(why) => {
                self.zarr_leave_out(&path, || format!("link not followed: {why}"));
                return None;
            }
        };
        let tfile = match self.file_at(fidx, &path) {
            Ok(f) => f,
            Err(e) => {
                self.zarr_leave_out(&path, || format!("{e:?}"));
                return None;
            }
        };
        match tfile.kind(id) {
            Ok(ObjectKind::Group) => {
                if matches!(link.target, LinkTarget::Soft(_)) {
                    self.zarr_leave_out(&path, || "a soft link to a group".into());
                    return None;
                }
                let seen = self
                    .inodes
                    .existing_object(fidx, id)
                    .or_else(|| self.inodes.file_root(fidx).filter(|_| tfile.root() == id));
                if let Some(seen) = seen.filter(|s| s.path != path) {
                    self.zarr_leave_out(&path, || format!("the group is shown at {}", seen.path));
                    return None;
                }
                let node = self.inodes.object_in(dir, name, fidx, id, anchor);
                Some(DirEntry {
                    ino: node.ino,
                    kind: FileKind::Directory,
                    name: name.as_str().into(),
                })
            }
            Ok(ObjectKind::Dataset) => {
                let a = z.table.array(dir.ino, name, path, (fidx, id), anchor)?;
                // A netCDF dimension without a variable is no array: readers of netCDF
                // show it as a dimension only (the arrays name it). One that cannot be
                // built is shown, its documents failing.
                if self
                    .zarr_array(z, &a)
                    .is_ok_and(|arr| arr.is_dimension_only())
                {
                    return None;
                }
                Some(DirEntry {
                    ino: a.ino,
                    kind: FileKind::Directory,
                    name: name.as_str().into(),
                })
            }
            Ok(kind) => {
                self.zarr_leave_out(&path, || format!("a {kind:?}, neither group nor dataset"));
                None
            }
            Err(e) => {
                self.zarr_leave_out(&path, || format!("its header cannot be read: {e}"));
                None
            }
        }
    }

    /// The listing of an array directory: its documents and `c` (v3), or its documents and
    /// every chunk key that exists (v2).
    fn array_listing(&self, z: &ZarrFs, dir: &ArrayDir) -> FsResult<Listing> {
        let mut entries = dir::dots(dir.ino, dir.parent);
        entries.extend(self.document_entries(z, dir.ino, z.array_documents())?);
        // An array that cannot be served has no keys (its documents fail; logged).
        let Ok((array, block)) = self.zarr_keys(z, dir) else {
            return Ok(Listing::new(entries));
        };
        let mut budget = MAX_LISTED_POSITIONS;
        let exists = |c: &[u64]| array.chunk_exists(c);
        let index_err = |e: crate::Error| self.zarr_fail(&dir.path, "its chunk index", &e);
        let (found, cut) = match z.opts.version {
            ZarrVersion::V3 => {
                let (any, cut) = block
                    .tree
                    .any_below(&[], &mut budget, exists)
                    .map_err(index_err)?;
                let kind = match block.tree.rank() {
                    0 => FileKind::RegularFile,
                    _ => FileKind::Directory,
                };
                let shown = (any || cut).then_some((Vec::new(), kind));
                (shown.into_iter().collect::<Vec<_>>(), cut)
            }
            ZarrVersion::V2 => {
                let (all, cut) = block
                    .tree
                    .existing_children(&[], &mut budget, exists)
                    .map_err(index_err)?;
                let files = all.into_iter().map(|c| (c, FileKind::RegularFile));
                (files.collect(), cut)
            }
        };
        for (coords, kind) in found {
            let Some(local) = block.tree.local(&coords) else {
                continue;
            };
            let name = match z.opts.version {
                ZarrVersion::V3 => "c".to_string(),
                ZarrVersion::V2 => array.chunk_key(&coords),
            };
            entries.push(DirEntry {
                ino: block.base + local,
                kind,
                name: name.into(),
            });
        }
        if cut {
            self.listing_cut(&dir.path);
        }
        Ok(Listing::new(entries))
    }

    /// The listing of the v3 key directory `local` of `block`: the coordinates below it
    /// that lead to a chunk that exists.
    fn key_listing(&self, z: &ZarrFs, block: &Arc<KeyBlock>, local: u64) -> FsResult<Listing> {
        let Some(KeyNode::Dir(prefix)) = block.tree.node(local) else {
            return Err(FsError::Errno(libc::ENOTDIR));
        };
        let dir = self.zarr_block_dir(z, block)?;
        let array = self.zarr_array(z, &dir)?;
        let parent = match prefix.split_last() {
            None => dir.ino,
            Some((_, up)) => block.base + block.tree.local(up).unwrap_or(0),
        };
        let mut entries = dir::dots(block.base + local, parent);
        let mut budget = MAX_LISTED_POSITIONS;
        let (children, cut) = block
            .tree
            .existing_children(&prefix, &mut budget, |c| array.chunk_exists(c))
            .map_err(|e| self.zarr_fail(&dir.path, "its chunk index", &e))?;
        for c in children {
            let (Some(l), Some(last)) = (block.tree.local(&c), c.last()) else {
                continue;
            };
            let kind = match c.len() == block.tree.rank() {
                true => FileKind::RegularFile,
                false => FileKind::Directory,
            };
            entries.push(DirEntry {
                ino: block.base + l,
                kind,
                name: last.to_string().into(),
            });
        }
        if cut {
            self.listing_cut(&dir.path);
        }
        Ok(Listing::new(entries))
    }

    /// Log once that a listing of the keys of the array at `path` was cut short.
    fn listing_cut(&self, path: &str) {
        self.log_once(&format!("zarr-cut {path}"), || {
            format!(
                "Zarr array {path}: a listing of its chunk keys stopped after \
                 {MAX_LISTED_POSITIONS} grid positions; keys past them read but are not listed"
            )
        });
    }
}

/// The file and object the soft link to `target` in group `dir` of `file` leads to, or why
/// it is not followed (a path with `..`, as in the plain tree, or one that names nothing).
fn follow_soft(dir: &Node, file: &Arc<File>, target: &str) -> Result<(FileIdx, ObjectId), String> {
    if target.split('/').any(|c| c == "..") {
        return Err(format!("soft link to {target}: a path with a .. component"));
    }
    let abs = match target.starts_with('/') {
        true => target.to_string(),
        false => inode::join_path(&h5_path(dir), target),
    };
    let (f, id) = file
        .follow(&abs)
        .map_err(|e| format!("soft link to {target}: {e}"))?;
    Ok((f.idx(), id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_zarr_cannot_hold() {
        use ZarrVersion::{V2, V3};
        for n in ["...", "zarr.json", "__x"] {
            assert!(name_problem(n, V3).is_some(), "{n}");
        }
        for n in [".zarray", ".zgroup", ".zattrs", ".zmetadata", "."] {
            assert!(name_problem(n, V2).is_some(), "{n}");
        }
        for n in ["c", "0", "a.b", "_x", "x__", "zarr.json.bak"] {
            assert!(name_problem(n, V3).is_none(), "{n}");
        }
        assert!(name_problem("__x", V2).is_none());
        assert!(name_problem("zarr.json", V2).is_none());
    }

    #[test]
    fn paths_below_an_anchor() {
        assert_eq!(below("/a/b/c", "/a/b"), Some("c"));
        assert_eq!(below("/a/b", "/a/b/"), Some(""));
        assert_eq!(below("/a/bc", "/a/b"), None);
        assert_eq!(below("/x", "/"), Some("x"));
    }
}
