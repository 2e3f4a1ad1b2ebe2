//! The views of [`crate::views`] at the mount: per-dataset view sets, and sidecar inodes.
//!
//! Every dataset gets its [`ViewSet`] built once, on first `getattr`/`open`/`read` or listing,
//! and kept while the kernel holds the dataset's inode, keyed by it (building reads no data;
//! a set without any view is not kept at all). When the set
//! has a primary view (byte-order conversion, or the text of a variable-length dataset), the
//! dataset file serves it instead of the raw image, and its size is the view's length.
//!
//! Sidecars (`NAME.npy`, `NAME.hdr`, `NAME.tif`) are regular 0444 files with their own inode
//! numbers, derived from the dataset's inode and the sidecar's slot in [`SLOTS`]:
//! `SIDECAR_BASE + 3 * ino + slot`. Object inodes are below `inode::LINK_BASE` (2^62), link
//! inodes count up from there, and fallback inodes count up from 2^63, so the range from
//! [`SIDECAR_BASE`] (3 * 2^62, 2^62 numbers) is free for the sidecars of every dataset whose
//! inode is below 2^62 / 3 (objects of a file of over 1 EiB, and the first 2^58 objects of
//! other files, numbered from `inode::EXTERNAL_BASE` = 2^60); a dataset with a larger inode
//! (only a corrupt file, or a mount that met more than 2^58 objects in other files, has one)
//! gets no sidecars. A sidecar handed out to the kernel (a lookup, a `readdirplus` entry) is
//! counted like an inode and keeps its dataset's inode known (`inode::InodeTable::pin`) until
//! the kernel forgets it, so later requests on its number find the dataset.
//!
//! A sidecar never shadows a real link: the listing drops a sidecar whose name is taken, and
//! a lookup finds the real link first; either way one log line says so.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};

use super::attr::{Attr, FileKind};
use super::dir::{self, DirEntry};
use super::error::{FsError, FsResult};
use super::inode::{self, Node, NodeKind};
use super::name::Name;
use super::{read, H5Fs};
use crate::io::ReadCtx;
use crate::model::{Dataset, ObjectId, ObjectKind};
use crate::sync::{lock, read, write};
use crate::views::{ByteOrderMode, View, ViewKind, ViewOptions, ViewSet};

/// First sidecar inode number (see the module docs for why the range is free).
pub const SIDECAR_BASE: u64 = 3 << 62;

/// Sidecar kinds, in slot order.
pub const SLOTS: [ViewKind; 3] = [ViewKind::Npy, ViewKind::EnviHeader, ViewKind::Tiff];

/// Sidecar numbers per dataset.
const STRIDE: u64 = SLOTS.len() as u64;

/// Datasets with an inode at or above this get no sidecars (their numbers would overflow).
const MAX_DATASET_INO: u64 = (1 << 62) / STRIDE;

/// True when `ino` is in the sidecar range.
pub fn is_sidecar(ino: u64) -> bool {
    ino >= SIDECAR_BASE
}

/// The inode of the sidecar of `kind` of the dataset `ds_ino`, if it can have one.
pub fn sidecar_ino(ds_ino: u64, kind: ViewKind) -> Option<u64> {
    let slot = SLOTS.iter().position(|&k| k == kind)? as u64;
    if ds_ino >= MAX_DATASET_INO {
        return None;
    }
    // ds_ino < 2^62 / STRIDE, so 3 * 2^62 + STRIDE * ds_ino + slot < 2^64 - 1 (the top
    // number stays free for `fuse`'s ceiling file).
    Some(SIDECAR_BASE + STRIDE * ds_ino + slot)
}

/// The dataset inode and kind a sidecar inode stands for.
pub fn sidecar_parts(ino: u64) -> Option<(u64, ViewKind)> {
    let rel = ino.checked_sub(SIDECAR_BASE)?;
    let kind = *SLOTS.get((rel % STRIDE) as usize)?;
    Some((rel / STRIDE, kind))
}

/// A sidecar, as its number tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sidecar {
    /// The dataset's inode.
    pub dataset: u64,
    pub kind: ViewKind,
    /// HDF5 path of the dataset plus the suffix (for messages).
    pub path: String,
}

/// A view set and the dataset it was built for.
type SetOf = (Weak<Dataset>, Arc<ViewSet>);

/// The view sets of a mount and the sidecars shown so far.
#[derive(Debug)]
pub struct Views {
    pub opts: ViewOptions,
    /// By dataset inode: the set and the dataset it describes (a `Weak`, so the allocation
    /// and with it the address stays reserved: no other dataset can compare equal).
    sets: RwLock<HashMap<u64, SetOf>>,
    /// The sidecars the kernel holds, with their counts (see the module docs).
    shown: Mutex<HashMap<u64, u32>>,
}

impl Views {
    /// The views of a mount.
    pub fn new(opts: ViewOptions) -> Views {
        Views {
            opts,
            sets: RwLock::new(HashMap::new()),
            shown: Mutex::new(HashMap::new()),
        }
    }

    /// True when some sidecar kind is switched on (listings then look at datasets).
    pub fn any_sidecars(&self) -> bool {
        self.opts.npy || self.opts.envi || self.opts.tiff
    }

    /// The set of dataset `ino` opened as `ds`, built by `build` on first use. Sets without
    /// any view are not kept (they would hold the dataset; rebuilding one reads nothing). A
    /// set is kept with the dataset it was built for and rebuilt for another one (after the
    /// file was re-read, see `super::refresh`, the same inode is a new dataset).
    pub fn set(
        &self,
        ino: u64,
        ds: &Arc<Dataset>,
        build: impl FnOnce(&ViewOptions) -> ViewSet,
    ) -> Arc<ViewSet> {
        if let Some((of, s)) = read(&self.sets).get(&ino) {
            if std::ptr::eq(of.as_ptr(), Arc::as_ptr(ds)) {
                return s.clone();
            }
        }
        let built = Arc::new(build(&self.opts));
        if built.primary.is_none() && built.sidecars.is_empty() {
            return built;
        }
        let mut map = write(&self.sets);
        match map.get(&ino) {
            Some((of, s)) if std::ptr::eq(of.as_ptr(), Arc::as_ptr(ds)) => s.clone(),
            _ => {
                map.insert(ino, (Arc::downgrade(ds), built.clone()));
                built
            }
        }
    }

    /// Sidecar `ino` handed out once more; true the first time (its dataset must then be
    /// kept known).
    pub fn hand_out(&self, ino: u64) -> bool {
        let mut map = lock(&self.shown);
        let c = map.entry(ino).or_insert(0);
        *c = c.saturating_add(1);
        *c == 1
    }

    /// The kernel forgot `n` counts of sidecar `ino`; true when none is left (its dataset
    /// need not be kept for it any more). A count that reached `u32::MAX` stays.
    pub fn forget(&self, ino: u64, n: u64) -> bool {
        let mut map = lock(&self.shown);
        let Some(c) = map.get_mut(&ino) else {
            return false;
        };
        if *c == u32::MAX {
            return false;
        }
        *c = c.saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
        if *c == 0 {
            map.remove(&ino);
            return true;
        }
        false
    }

    /// Whether the kernel holds sidecar `ino`.
    pub fn known(&self, ino: u64) -> bool {
        lock(&self.shown).contains_key(&ino)
    }

    /// Sidecars the kernel holds.
    pub fn known_count(&self) -> usize {
        lock(&self.shown).len()
    }

    /// Drop the view set of dataset inode `ino` (the kernel forgot it).
    pub fn drop_set(&self, ino: u64) {
        let mut sets = write(&self.sets);
        if sets.remove(&ino).is_some() && sets.len() < sets.capacity() / 8 {
            sets.shrink_to_fit();
        }
    }
}

/// The view of `kind` among the sidecars of `set`.
pub fn find_sidecar(set: &ViewSet, kind: ViewKind) -> Option<&View> {
    set.sidecars.iter().find(|v| v.kind() == kind)
}

/// The dataset name and sidecar kind `name` would be a sidecar of, when its suffix is one.
pub fn split_sidecar_name(name: &str) -> Option<(&str, ViewKind)> {
    SLOTS.iter().find_map(|&k| {
        name.strip_suffix(k.name_suffix())
            .filter(|base| !base.is_empty())
            .map(|base| (base, k))
    })
}

impl H5Fs {
    /// The view set of the dataset `ds` shown as `node` (built once).
    pub(super) fn view_set(&self, node: &Node, ds: &Arc<Dataset>) -> Arc<ViewSet> {
        self.views.set(node.ino, ds, |opts| {
            let set = match self.file_of(node) {
                Ok(file) => ViewSet::for_dataset(&file, ds, opts),
                Err(_) => ViewSet::default(),
            };
            for (kind, why) in &set.skipped {
                log::debug!("{}: no {kind:?} view: {why}", node.path);
            }
            set
        })
    }

    /// What the dataset file of `node` serves instead of the raw image, if anything.
    fn primary(&self, node: &Node, ds: &Arc<Dataset>) -> Option<Arc<ViewSet>> {
        // The common case, decided without building a set: fixed-size data as stored.
        if ds.info.dtype.is_fixed_size() && self.views.opts.byte_order == ByteOrderMode::AsStored {
            return None;
        }
        let set = self.view_set(node, ds);
        set.primary.is_some().then_some(set)
    }

    /// Size of the dataset file of `node`: the primary view's length, else the image's.
    pub(super) fn served_len(&self, node: &Node, ds: &Arc<Dataset>) -> FsResult<u64> {
        match self.primary(node, ds) {
            Some(set) => view_len(&node.path, set.primary.as_ref()),
            None => Ok(ds.len()),
        }
    }

    /// `open` of the dataset file of `node`: a primary view must measure itself (the text
    /// view reads its strings here, once); otherwise the image must be servable.
    pub(super) fn open_dataset(&self, node: &Node, ds: &Arc<Dataset>) -> FsResult<()> {
        if let Some(set) = self.primary(node, ds) {
            if set.primary.as_ref().map(View::kind) == Some(ViewKind::Text) {
                return view_len(&node.path, set.primary.as_ref()).map(|_| ());
            }
        }
        // An empty image needs no reader (one whose size cannot even be worked out, such as
        // dimensions whose product overflows, is no empty image). Otherwise an empty read
        // reports a dataset that
        // cannot be served at all (unsupported layout or type, broken layout message) at
        // open, not at each read.
        if ds.is_empty() && !ds.is_broken() {
            return Ok(());
        }
        ds.read_at(0, &mut [])
            .map(|_| ())
            .map_err(|e| FsError::model(&node.path, e))
    }

    /// `read` of the dataset file of `node`.
    /// Whether reads of this dataset file are served by a view instead of the raw bytes.
    pub(super) fn has_primary_view(&self, node: &Node, ds: &Arc<Dataset>) -> bool {
        self.primary(node, ds).is_some()
    }

    pub(super) fn read_dataset(
        &self,
        ctx: ReadCtx,
        node: &Node,
        ds: &Arc<Dataset>,
        offset: u64,
        size: u32,
    ) -> FsResult<Vec<u8>> {
        match self.primary(node, ds) {
            Some(set) => read_view(ctx, &node.path, set.primary.as_ref(), offset, size),
            None => read::read(ctx, ds, offset, size).map_err(|e| FsError::model(&node.path, e)),
        }
    }

    /// The sidecar `ino` stands for and its dataset's node, a known one (the kernel holds
    /// the sidecar, which keeps it).
    fn sidecar_node(&self, ino: u64) -> FsResult<(Sidecar, Arc<Node>)> {
        let (ds_ino, kind) = sidecar_parts(ino).ok_or(FsError::Errno(libc::ENOENT))?;
        let node = self.node(ds_ino)?;
        let sc = Sidecar {
            dataset: ds_ino,
            kind,
            path: format!("{}{}", node.path, kind.name_suffix()),
        };
        Ok((sc, node))
    }

    /// The sidecar, dataset and view set behind sidecar inode `ino`.
    fn sidecar_target(&self, ino: u64) -> FsResult<(Sidecar, Arc<Dataset>, Arc<ViewSet>)> {
        let (sc, node) = self.sidecar_node(ino)?;
        let id = self.object(&node)?;
        let ds = self.dataset_of(&node, id)?;
        let set = self.view_set(&node, &ds);
        Ok((sc, ds, set))
    }

    /// `getattr` of a sidecar.
    pub(super) fn sidecar_getattr(&self, ino: u64) -> FsResult<Attr> {
        let (_, node) = self.sidecar_node(ino)?;
        self.sidecar_attr(&node, ino)
    }

    /// Attributes of sidecar `ino` of the dataset `node` (known or about to be).
    pub(super) fn sidecar_attr(&self, node: &Node, ino: u64) -> FsResult<Attr> {
        let (_, kind) = sidecar_parts(ino).ok_or(FsError::Errno(libc::ENOENT))?;
        let path = format!("{}{}", node.path, kind.name_suffix());
        let id = self.object(node)?;
        let ds = self.dataset_of(node, id)?;
        let set = self.view_set(node, &ds);
        let size = view_len(&path, find_sidecar(&set, kind))?;
        // Owner and time of the dataset.
        let a = self.attr_of(node)?;
        Ok(Attr::new(
            ino,
            FileKind::RegularFile,
            size,
            (a.uid, a.gid),
            a.mtime,
        ))
    }

    /// `open` of a sidecar: an `.npy` or `.tif` of a dataset that cannot be read fails like
    /// it.
    pub(super) fn sidecar_open(&self, ino: u64) -> FsResult<()> {
        let (sc, ds, _) = self.sidecar_target(ino)?;
        if matches!(sc.kind, ViewKind::Npy | ViewKind::Tiff) && !ds.is_empty() {
            ds.read_at(0, &mut [])
                .map_err(|e| FsError::model(&sc.path, e))?;
        }
        Ok(())
    }

    /// `read` of a sidecar.
    pub(super) fn sidecar_read(
        &self,
        ctx: ReadCtx,
        ino: u64,
        offset: u64,
        size: u32,
    ) -> FsResult<Vec<u8>> {
        let (sc, _, set) = self.sidecar_target(ino)?;
        read_view(ctx, &sc.path, find_sidecar(&set, sc.kind), offset, size)
    }

    /// The number of the sidecar of kind `kind` of the dataset `child`, if it has one.
    fn sidecar_of(&self, child: &Node, kind: ViewKind) -> Option<u64> {
        let id = child.object()?;
        let file = self.file_of(child).ok()?;
        if !matches!(file.kind(id), Ok(ObjectKind::Dataset)) {
            return None;
        }
        let ds = file.dataset(id).ok()?;
        let set = self.view_set(child, &ds);
        find_sidecar(&set, kind)?;
        sidecar_ino(child.ino, kind)
    }

    /// Add the sidecars of the datasets `files` (entries of the listing of `dir`, each with
    /// its node) to `entries`; a sidecar whose name is a real link is left out, with a log
    /// line.
    pub(super) fn add_sidecars(
        &self,
        dir: &Node,
        entries: &mut Vec<DirEntry>,
        files: &[(Name, Arc<Node>)],
    ) {
        if !self.views.any_sidecars() {
            return;
        }
        let taken: HashSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        let mut extra = Vec::new();
        for (base, child) in files {
            if !matches!(child.kind, NodeKind::Object(_)) {
                continue;
            }
            for kind in SLOTS {
                let name = format!("{}{}", base, kind.name_suffix());
                let Some(ino) = self.sidecar_of(child, kind) else {
                    continue;
                };
                if taken.contains(name.as_str()) {
                    let path = inode::join_path(&dir.path, &name);
                    self.log_once(&path, || {
                        format!("sidecar {path:?} not shown: a real link has that name")
                    });
                    continue;
                }
                if dir::bad_name(&name).is_some() {
                    continue;
                }
                extra.push(DirEntry {
                    ino,
                    kind: FileKind::RegularFile,
                    name: name.into(),
                });
            }
        }
        entries.extend(extra);
    }

    /// Lookup of `name` in `dir` when no real link has that name: the sidecar it names, if
    /// any (`ENOENT` otherwise), with its dataset's node.
    pub(super) fn lookup_sidecar(
        &self,
        dir: &Node,
        dir_id: ObjectId,
        name: &str,
    ) -> FsResult<(super::Found, Attr)> {
        let enoent = || FsError::Errno(libc::ENOENT);
        if !self.views.any_sidecars() || dir::bad_name(name).is_some() {
            return Err(enoent());
        }
        let (base, kind) = split_sidecar_name(name).ok_or_else(enoent)?;
        let link = self
            .file_of(dir)?
            .lookup(dir_id, base)
            .map_err(|e| FsError::model(&dir.path, e))?
            .ok_or_else(enoent)?;
        let child = self
            .child(dir, &link.name, &link.target)
            .ok_or_else(enoent)?;
        let ino = self.sidecar_of(&child, kind).ok_or_else(enoent)?;
        let attr = self.sidecar_attr(&child, ino)?;
        Ok((
            super::Found::Sidecar {
                ino,
                dataset: child,
            },
            attr,
        ))
    }
}

/// Length of `view`, errors naming `path`.
fn view_len(path: &str, view: Option<&View>) -> FsResult<u64> {
    let view = view.ok_or(FsError::Errno(libc::ENOENT))?;
    view.len().map_err(|e| FsError::model(path, e))
}

/// Bytes `offset..offset + size` of `view`, read for `ctx`.
fn read_view(
    ctx: ReadCtx,
    path: &str,
    view: Option<&View>,
    offset: u64,
    size: u32,
) -> FsResult<Vec<u8>> {
    let view = view.ok_or(FsError::Errno(libc::ENOENT))?;
    let len = view.len().map_err(|e| FsError::model(path, e))?;
    read::read_image(len, offset, size, |off, buf| view.read_in(ctx, off, buf))
        .map_err(|e| FsError::model(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::inode::LINK_BASE;

    #[test]
    fn sidecar_numbers_round_trip_and_stay_clear_of_other_ranges() {
        for ds in [2u64, 802, 1 << 60, (1 << 60) + 12345, MAX_DATASET_INO - 1] {
            for kind in SLOTS {
                let ino = sidecar_ino(ds, kind).unwrap();
                assert!(is_sidecar(ino) && ino > LINK_BASE && ino >= 1 << 63);
                assert_eq!(sidecar_parts(ino), Some((ds, kind)));
            }
        }
        assert_ne!(
            sidecar_ino(802, ViewKind::Npy),
            sidecar_ino(802, ViewKind::EnviHeader)
        );
        assert_ne!(
            sidecar_ino(802, ViewKind::Tiff),
            sidecar_ino(803, ViewKind::Npy)
        );
        assert!(sidecar_ino(MAX_DATASET_INO - 1, ViewKind::Tiff).unwrap() < u64::MAX);
        assert_eq!(sidecar_ino(MAX_DATASET_INO, ViewKind::Npy), None);
        assert_eq!(sidecar_ino(1 << 61, ViewKind::Npy), None);
        assert_eq!(sidecar_ino(u64::MAX, ViewKind::Npy), None);
        assert_eq!(sidecar_ino(2, ViewKind::Text), None);
        assert!(!is_sidecar(LINK_BASE) && !is_sidecar(1 << 63));
        assert_eq!(sidecar_parts(5), None);
    }

    #[test]
    fn sidecar_names() {
        assert_eq!(split_sidecar_name("a.npy"), Some(("a", ViewKind::Npy)));
        assert_eq!(
            split_sidecar_name("x.y.hdr"),
            Some(("x.y", ViewKind::EnviHeader))
        );
        assert_eq!(split_sidecar_name("a.tif"), Some(("a", ViewKind::Tiff)));
        assert_eq!(split_sidecar_name(".npy"), None);
        assert_eq!(split_sidecar_name("a.txt"), None);
    }
}
