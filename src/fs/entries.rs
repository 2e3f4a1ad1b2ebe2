//! Directory entries and the kernel's counts of them: lookups, listings, `readdirplus` and
//! `forget`.
//!
//! A listing ([`H5Fs::listing`]) is built from a group's links (or a mounted directory's
//! entries, `super::hostdir`) and makes no inode: each entry carries its number (worked out
//! from the object's address, or reserved from a counter, see `super::inode`), its kind and,
//! where the number does not tell it, where it comes from ([`Origin`]). A lookup
//! ([`H5Fs::lookup`]) and each `readdirplus` entry ([`H5Fs::readdirplus`]) make the entry's
//! node from that (a group's link found in the kept listing, else through the model) and
//! hand it to the kernel, which counts it; `forget` ([`H5Fs::forget`]) gives the counts back,
//! and what the kernel no longer holds is dropped: the inode, and its listing, view set and
//! kept attributes. Plain `readdir` hands out no inode (the kernel keeps only names and
//! numbers), so a `find` that reads most of a large directory that way leaves nothing here.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use super::attr::{Attr, FileKind};
use super::dir::{self, DirEntry, Listing, Origin};
use super::error::{FsError, FsResult};
use super::inode::{self, Node, NodeKind};
use super::name::Name;
use super::{views, H5Fs};
use crate::model::{LinkTarget, ObjectId, ObjectKind};
use crate::sync::lock;

/// An entry found for the kernel: an inode of the table, or a sidecar view of a dataset.
#[derive(Clone, Debug)]
pub enum Found {
    Node(Arc<Node>),
    Sidecar { ino: u64, dataset: Arc<Node> },
}

impl H5Fs {
    /// Look `name` up in the directory `parent` and hand the entry to the kernel (one count).
    /// A group's name is found in its kept listing, else through the model.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> FsResult<Attr> {
        let enoent = || FsError::Errno(libc::ENOENT);
        let name = name.to_str().ok_or_else(enoent)?;
        if let Some(z) = self.zarr() {
            return self.zarr_lookup(z, parent, name);
        }
        let (found, attr) = self.find(parent, name)?;
        self.hand_out(&found);
        Ok(attr)
    }

    /// The entry `name` of directory `parent` and its attributes, without handing it out.
    pub(super) fn find(&self, parent: u64, name: &str) -> FsResult<(Found, Attr)> {
        let enoent = || FsError::Errno(libc::ENOENT);
        let node = self.node(parent)?;
        if name == "." || name == ".." {
            let ino = if name == "." { parent } else { node.parent };
            let n = self.node(ino)?;
            let attr = self.attr_of(&n)?;
            return Ok((Found::Node(n), attr));
        }
        let listing = match node.kind {
            NodeKind::HostDir { .. } => Some(self.listing(parent)?),
            _ => self.listings.get(parent),
        };
        if let Some(listing) = listing {
            let i = listing.position(name).ok_or_else(enoent)?;
            let found = self.entry_found(&node, &listing, i)?;
            let attr = self.found_attr(&found)?;
            return Ok((found, attr));
        }
        let id = self.group(&node)?;
        let link = self
            .file_of(&node)?
            .lookup(id, name)
            .map_err(|e| FsError::model(&node.path, e))?;
        let Some(link) = link else {
            return self.lookup_sidecar(&node, id, name);
        };
        let child = self
            .child(&node, &link.name, &link.target)
            .ok_or_else(enoent)?;
        let attr = self.attr_of(&child)?;
        Ok((Found::Node(child), attr))
    }

    /// Hand `found` to the kernel: one more count of its inode (a sidecar keeps its dataset's
    /// inode known while the kernel holds it).
    pub(super) fn hand_out(&self, found: &Found) {
        match found {
            Found::Node(n) => self.inodes.remember(n),
            Found::Sidecar { ino, dataset } => {
                if self.views.hand_out(*ino) {
                    self.inodes.pin(dataset);
                }
            }
        }
    }

    /// The kernel forgot `n` counts of `ino`: once it holds none, the inode goes, with what
    /// was kept for it and the parents only it kept (see [`super::inode`]).
    pub fn forget(&self, ino: u64, n: u64) {
        if self.zarr.is_some() {
            return;
        }
        let removed = if views::is_sidecar(ino) {
            match views::sidecar_parts(ino) {
                Some((ds, _)) if self.views.forget(ino, n) => self.inodes.unpin(ds),
                _ => Vec::new(),
            }
        } else {
            self.inodes.forget(ino, n)
        };
        if removed.is_empty() {
            return;
        }
        let refresh = self.opts.refresh.is_some();
        for &ino in &removed {
            self.listings.remove(ino);
            self.views.drop_set(ino);
        }
        if refresh {
            let mut shown = lock(&self.shown);
            let mut stamps = lock(&self.host_stamps);
            for ino in &removed {
                shown.remove(ino);
                stamps.remove(ino);
            }
        }
    }

    /// Attributes of a found entry.
    fn found_attr(&self, found: &Found) -> FsResult<Attr> {
        match found {
            Found::Node(n) => self.attr_of(n),
            Found::Sidecar { ino, dataset } => self.sidecar_attr(dataset, *ino),
        }
    }

    /// The entry `index` of `listing`, the listing of `dir`: the known inode of its number,
    /// else made from what the listing keeps (see the module docs).
    pub(super) fn entry_found(
        &self,
        dir: &Node,
        listing: &Listing,
        index: usize,
    ) -> FsResult<Found> {
        let enoent = || FsError::Errno(libc::ENOENT);
        let e = listing.entries.get(index).ok_or_else(enoent)?;
        if index < 2 {
            return Ok(Found::Node(self.node(e.ino)?));
        }
        if views::is_sidecar(e.ino) {
            let (ds_ino, kind) = views::sidecar_parts(e.ino).ok_or_else(enoent)?;
            let dataset = match self.inodes.get(ds_ino) {
                Some(n) => n,
                None => {
                    let base = e.name.strip_suffix(kind.name_suffix()).ok_or_else(enoent)?;
                    let i = listing.position(base).ok_or_else(enoent)?;
                    match self.entry_found(dir, listing, i)? {
                        Found::Node(n) => n,
                        Found::Sidecar { .. } => return Err(enoent()),
                    }
                }
            };
            return Ok(Found::Sidecar {
                ino: e.ino,
                dataset,
            });
        }
        if let Some(n) = self.inodes.get(e.ino) {
            return Ok(Found::Node(n));
        }
        let node = match listing.origin(index) {
            Some(Origin::Link(target)) => self.child(dir, &e.name, target),
            Some(Origin::Host(kind, file)) => {
                Some(self.inodes.host(dir, &e.name, kind.clone(), *file))
            }
            Some(Origin::HostSymlink(text)) => {
                Some(self.inodes.symlink(dir, &e.name, text.clone()))
            }
            None => match self.inodes.object_of_number(e.ino) {
                Some((file, id)) if file == dir.file => {
                    self.child(dir, &e.name, &LinkTarget::Hard(id))
                }
                _ => None,
            },
        };
        node.map(Found::Node).ok_or_else(enoent)
    }

    /// `readdirplus` of directory `ino` from `offset`: each entry with its attributes to
    /// `add` (with the offset after it and how long the kernel may keep it), until `add`
    /// answers that the reply is full (that entry not taken). Each entry taken but `.` and
    /// `..` is handed out (the kernel counts them so). An entry whose attributes fail is
    /// still listed, with a placeholder the kernel must not keep (a time to live of zero):
    /// the next stat asks again and gets the error.
    pub fn readdirplus(
        &self,
        ino: u64,
        offset: u64,
        mut add: impl FnMut(&DirEntry, u64, &Attr, Duration) -> bool,
    ) -> FsResult<()> {
        let listing = self.listing(ino)?;
        let ttl = self.ttl();
        if self.zarr.is_some() {
            // Every node of the Zarr tree is kept: nothing to count.
            for (next, e) in listing.from_offset(offset) {
                let (attr, ttl) = match self.getattr(e.ino) {
                    Ok(a) => (a, ttl),
                    Err(_) => (self.placeholder_attr(e), Duration::ZERO),
                };
                if add(e, next, &attr, ttl) {
                    break;
                }
            }
            return Ok(());
        }
        let dir = self.node(ino)?;
        for (next, e) in listing.from_offset(offset) {
            let index = (next - 1) as usize;
            let found = self.entry_found(&dir, &listing, index);
            let attr = match &found {
                Ok(f) => self.found_attr(f),
                Err(_) => Err(FsError::Errno(libc::ENOENT)),
            };
            let (attr, life) = match attr {
                Ok(a) => (a, ttl),
                Err(_) => (self.placeholder_attr(e), Duration::ZERO),
            };
            if add(e, next, &attr, life) {
                break;
            }
            if let (Ok(f), true) = (found, index >= 2) {
                self.hand_out(&f);
            }
        }
        Ok(())
    }

    /// The group `node` stands for (`ENOTDIR` if it is something else; `EIO` for an HDF5 file
    /// of a mounted directory whose root object is not a group, a corrupt superblock).
    pub(super) fn group(&self, node: &Node) -> FsResult<ObjectId> {
        let id = match node.kind {
            NodeKind::Object(id) => id,
            NodeKind::FileRoot { .. } => self.object(node)?,
            _ => return Err(FsError::Errno(libc::ENOTDIR)),
        };
        let kind = self.kind(node, id)?;
        if kind == ObjectKind::Group {
            return Ok(id);
        }
        if node.is_file_root() {
            return Err(FsError::model(
                &node.path,
                crate::Error::corrupt(
                    "root group",
                    id.0,
                    format!("the superblock's root object is a {kind:?}, not a group"),
                ),
            ));
        }
        Err(FsError::Errno(libc::ENOTDIR))
    }

    /// The node of the link `name` to `target` in the group of `node`; `None` (and a log
    /// line, once) for links that cannot be shown.
    pub(super) fn child(&self, node: &Node, name: &str, target: &LinkTarget) -> Option<Arc<Node>> {
        if let Some(why) = dir::bad_name(name) {
            let path = inode::join_path(&node.path, name);
            self.log_once(&path, || format!("skipping link {path:?}: {why}"));
            return None;
        }
        match target {
            LinkTarget::Hard(cid) => {
                // Linux directories cannot have several parents (the kernel answers ELOOP for
                // a link to an ancestor and EIO for one to the root): a group already shown
                // at another path appears here as a symlink to that path.
                self.object_child(node, name, node.file, *cid, node.anchor.clone())
            }
            LinkTarget::External { file, path: opath } => {
                let path = inode::join_path(&node.path, name);
                match self.follow_external(node, file, opath) {
                    Ok((fidx, cid)) => {
                        let anchor = Arc::new(inode::Anchor {
                            file_name: file.clone(),
                            h5_path: crate::model::resolver::fold(std::path::Path::new(opath))
                                .to_string_lossy()
                                .into_owned(),
                            mount_path: path,
                        });
                        self.object_child(node, name, fidx, cid, Some(anchor))
                    }
                    Err(why) => {
                        let text = dir::symlink_text(&node.path, target).unwrap_or_default();
                        self.log_once(&path, || {
                            if dir::is_refused(&text) {
                                format!(
                                    "link {path:?} would lead outside the mount; shown dangling"
                                )
                            } else {
                                format!(
                                    "external link {path:?} to {file}::{opath} not followed: {why}"
                                )
                            }
                        });
                        Some(self.inodes.symlink(node, name, text))
                    }
                }
            }
            LinkTarget::Soft(target) if node.anchor.is_some() => {
                self.soft_in_external(node, name, target)
            }
            LinkTarget::UserDefined(t) => {
                let path = inode::join_path(&node.path, name);
                self.log_once(&path, || {
                    format!("skipping link {path:?}: user-defined link type {t}")
                });
                None
            }
            other => {
                let text = dir::symlink_text(&node.path, other).unwrap_or_default();
                if dir::is_refused(&text) {
                    let path = inode::join_path(&node.path, name);
                    self.log_once(&path, || {
                        format!("link {path:?} would lead outside the mount; shown dangling")
                    });
                }
                Some(self.inodes.symlink(node, name, text))
            }
        }
    }

    /// The kept listing of `ino`, if any.
    pub(super) fn cached_listing(&self, ino: u64) -> Option<Arc<Listing>> {
        self.listings.get(ino)
    }

    /// The listing of directory `ino` (built on first use).
    pub fn listing(&self, ino: u64) -> FsResult<Arc<Listing>> {
        self.listing_with(ino, true)
    }

    /// [`H5Fs::listing`]; `crawl`: on a remote source, list the groups in it in the
    /// background too (see [`crate::model::File::prefetch_groups`]).
    pub(super) fn listing_with(&self, ino: u64, crawl: bool) -> FsResult<Arc<Listing>> {
        if let Some(z) = self.zarr() {
            return self.zarr_listing(z, ino);
        }
        if let Some(l) = self.listings.get(ino) {
            return Ok(l);
        }
        if views::is_sidecar(ino) {
            return Err(FsError::Errno(libc::ENOTDIR));
        }
        let gen = self.listings.gen();
        let node = self.node(ino)?;
        if let NodeKind::HostDir { rel } = &node.kind {
            let listing = Arc::new(self.host_listing(&node, rel)?);
            return Ok(self.listings.keep(ino, gen, listing));
        }
        let id = self.group(&node)?;
        let file = self.file_of(&node)?;
        let links = file.links(id).map_err(|e| FsError::model(&node.path, e))?;
        file.prefetch_headers(&links, usize::MAX);
        let mut entries = dir::dots(ino, node.parent);
        entries.reserve(links.len());
        let mut origins = Vec::new();
        let mut groups = Vec::new();
        let sidecars = self.views.any_sidecars();
        let mut files: Vec<(Name, Arc<Node>)> = Vec::new();
        for link in links.iter() {
            let Some(child) = self.child(&node, link.name, &link.target) else {
                continue;
            };
            let kind = match child.kind {
                NodeKind::Symlink { .. } => FileKind::Symlink,
                NodeKind::Object(cid) => match self.kind(&child, cid) {
                    Ok(ObjectKind::Group) => {
                        if child.file == node.file {
                            groups.push(cid);
                        }
                        FileKind::Directory
                    }
                    Ok(_) => FileKind::RegularFile,
                    Err(e) => {
                        self.log_error("readdir", &e);
                        FileKind::RegularFile
                    }
                },
                NodeKind::HostDir { .. } | NodeKind::FileRoot { .. } => FileKind::Directory,
                NodeKind::HostFile { .. } => FileKind::RegularFile,
            };
            // The number tells a hard link to an object of this file numbered by address;
            // anything else keeps its link.
            let told = match (&child.kind, &link.target) {
                (NodeKind::Object(cid), LinkTarget::Hard(lid)) => {
                    cid == lid
                        && child.file == node.file
                        && self.inodes.object_of_number(child.ino) == Some((node.file, *cid))
                }
                _ => false,
            };
            if !told {
                // Fewer entries than 2^32: a group lists at most 10 million links.
                origins.push((entries.len() as u32, Origin::Link(link.target.clone())));
            }
            let name = Name::new(link.name);
            if sidecars && kind == FileKind::RegularFile {
                files.push((name.clone(), child.clone()));
            }
            entries.push(DirEntry {
                ino: child.ino,
                kind,
                name,
            });
        }
        if crawl {
            file.prefetch_groups(groups);
        }
        self.add_sidecars(&node, &mut entries, &files);
        drop(files);
        let listing = Arc::new(Listing::with_origins(entries, origins));
        // The listing stands in for the model's list of a large group: lookups find their
        // links here.
        if links.bytes() > crate::model::links::LINKS_CACHE_BYTES {
            file.uncache_links(id);
        }
        Ok(self.listings.keep(ino, gen, listing))
    }
}
