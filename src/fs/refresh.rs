//! Growing files (`--refresh SECONDS`): re-reading the mounted file while a writer appends.
//!
//! Mechanism. Without refresh the mount parses the file once: attributes, listings and
//! decoded chunks are kept, and the kernel may cache entries, attributes and pages for an hour.
//! With refresh, a [`Watcher`] is asked every period whether the file changed: it compares a
//! [`Stamp`] (device, inode, size, modification and change times) with the one of the state
//! being served. On a change, [`H5Fs::refresh`] opens a new [`File`] on the same path (fresh
//! superblock and headers, and a new file id in the same chunk cache: an unfiltered edge
//! chunk is rewritten in place as rows are added, so chunks decoded before must not be served
//! again; they age out of the cache, whose budget stays one) and checks it against every
//! object the kernel has been shown: each object of the mounted file still has a readable
//! header, each dataset still opens, each group whose listing was built still lists, and a
//! dataset whose size changed reads [`PROBE`] bytes at its new end and at its old end (the
//! old view cannot serve as a reference: it parses lazily, so it too reads the changed file).
//! A check that fails is a writer caught mid-write (a non-SWMR writer updates structures in
//! place, in no particular order): the old view stays, and the next period tries again, as the
//! stamp taken before the attempt is not recorded as served.
//!
//! A new view that passes is swapped in: attributes and listings are dropped (recomputed on
//! demand from the new file; view sets rebuild themselves, being kept per dataset handle), and
//! the kernel is told what to forget, as [`Invalidation`]s the FUSE adapter sends as
//! notifications: attributes of every inode whose attributes changed, and for a dataset
//! whose size changed the cached pages from its old end rounded down to [`PAGE`] (the kernel
//! zero-filled the rest of the last page), or all of them if the dataset did not simply grow
//! along its first dimension; sidecars (`.npy`, `.hdr`) of such a dataset entirely (their
//! headers describe the shape); for a directory whose listing changed, each added, removed or
//! changed name and its cached listing. Entries the kernel learned by lookup alone expire with
//! their time-to-live, no longer than the period. Inode numbers are object-header addresses,
//! so they stay the same across refreshes, and open handles keep working.
//!
//! Between a write and the refresh that follows, the old view parses lazily from the changed
//! file and may meet structures it cannot read (a non-SWMR writer moves things). A read that
//! fails with `EIO` then asks for a check at once ([`Wakeup`]) and waits, at most
//! [`RETRY_WAIT`], for it: if it swapped in a new view, the read is retried there once. The
//! read waits only for the swap, not for the notifications sent after it (the kernel may hold
//! the page being read while it invalidates).
//!
//! Bytes already served do not change for a writer that only appends: rows keep their values,
//! and a new view starts with the old one. A SWMR writer writes data before the metadata that
//! points at it, so every state it leaves reads; for other writers the checks and the retry
//! above stand in, without a guarantee. A dataset that shrinks, changes type or grows along
//! another dimension is logged and served in its new state. Only the mounted file is
//! watched: files reached through external links are served as first opened.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::attr::{Attr, FileKind};
use super::dir::Listing;
use super::{read, views, H5Fs, Mounted, Node, NodeKind};
use crate::error::ErrorClass;
use crate::model::{Dataset, File, ObjectId, ObjectKind};
use crate::sync::{lock, wait_timeout_while, write};

/// Granularity of the kernel's page cache invalidation: the largest common page size (64 KiB
/// pages on some arm64 and ppc64 kernels), so rounding down to it covers any smaller page.
pub const PAGE: u64 = 1 << 16;

/// Bytes read at the old and the new end of a dataset that changed size, to check a new view.
pub const PROBE: u32 = 1 << 16;

/// Whether an operation that fails with `EIO` asks for a check of the file and, if a new
/// view comes, is tried again there ([`H5Fs::retry_after_refresh`]): the kernel's requests
/// do; the refresh's own reads must not (they would wait for the check they are part of).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Retry {
    InNewView,
    No,
}

/// Longest a failed read waits for a check of the file before answering its error.
pub const RETRY_WAIT: Duration = Duration::from_secs(1);

/// One state of the file on disk: a write changes its size or times, a replacement its inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of `meta`.
    pub fn of_meta(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// A stamp that matches no file (a source with no local state to compare).
    pub fn unknown() -> Stamp {
        Stamp {
            dev: u64::MAX,
            ino: u64::MAX,
            len: u64::MAX,
            mtime: (0, 0),
            ctime: (0, 0),
        }
    }

    /// The stamp of the file at `path` now.
    pub fn of(path: &Path) -> std::io::Result<Stamp> {
        std::fs::metadata(path).map(|m| Stamp::of_meta(&m))
    }
}

/// A kernel cache entry to drop after a refresh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalidation {
    /// The attributes of `ino`, and its cached data from byte `from` on (`None`: attributes
    /// only).
    Inode { ino: u64, from: Option<u64> },
    /// The entry `name` of directory `parent`.
    Entry { parent: u64, name: String },
}

/// What one check of the file found.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The file is as served.
    Unchanged,
    /// The file changed but was not taken: why (the old view is still served; the next check
    /// tries again).
    Kept(String),
    /// A new view is served; the kernel must forget these.
    Refreshed(Vec<Invalidation>),
}

/// Watches the mounted file for changes and refreshes the filesystem.
#[derive(Debug)]
pub struct Watcher {
    path: PathBuf,
    /// The state being served (`None`: unknown, so the next check refreshes).
    served: Option<Stamp>,
    /// For a source that tells its state itself (a remote object: its ETag, by a HEAD), the
    /// identity being served.
    served_id: Option<String>,
}

impl Watcher {
    /// Watch `path`, whose state `served` (taken before it was opened) is being served.
    pub fn new(path: &Path, served: Option<Stamp>) -> Watcher {
        Watcher {
            path: path.to_path_buf(),
            served,
            served_id: None,
        }
    }

    /// Check the file once; refresh `fs` if it changed. A mounted directory is checked
    /// entry by entry ([`H5Fs::refresh_dir`]).
    pub fn check(&mut self, fs: &H5Fs) -> Outcome {
        if matches!(fs.mounted, Mounted::Dir { .. }) {
            let inv = fs.refresh_dir();
            return if inv.is_empty() {
                Outcome::Unchanged
            } else {
                Outcome::Refreshed(inv)
            };
        }
        if let Some(source) = fs.main_file().map(|f| f.storage().source().clone()) {
            if let Some(now) = source.remote().map(|r| r.current_identity()) {
                let now = match now {
                    Ok(n) => n,
                    Err(e) => return Outcome::Kept(e.to_string()),
                };
                let served = self.served_id.get_or_insert_with(|| source.identity());
                if *served == now {
                    return Outcome::Unchanged;
                }
                return match fs.refresh() {
                    Ok(inv) => {
                        self.served_id = Some(now);
                        Outcome::Refreshed(inv)
                    }
                    Err(why) => Outcome::Kept(why),
                };
            }
        }
        let now = match Stamp::of(&self.path) {
            Ok(s) => s,
            Err(e) => return Outcome::Kept(format!("{}: {e}", self.path.display())),
        };
        if self.served == Some(now) {
            return Outcome::Unchanged;
        }
        match fs.refresh() {
            Ok(inv) => {
                // The stamp from before the file was read: a write during the refresh makes
                // the next check read it again.
                self.served = Some(now);
                Outcome::Refreshed(inv)
            }
            Err(why) => Outcome::Kept(why),
        }
    }
}

#[derive(Debug, Default)]
struct WakeState {
    /// A check was asked for since the last one started.
    requested: bool,
    /// A check is running.
    checking: bool,
    /// Checks completed.
    checks: u64,
    /// New views swapped in.
    swaps: u64,
}

/// Meeting point of the refresh thread and reads that failed: reads ask for a check and wait
/// for a new view; the refresh thread sleeps between checks until asked.
#[derive(Debug, Default)]
pub struct Wakeup {
    state: Mutex<WakeState>,
    cv: Condvar,
}

impl Wakeup {
    fn lock(&self) -> std::sync::MutexGuard<'_, WakeState> {
        lock(&self.state)
    }

    /// New views swapped in so far.
    pub fn swaps(&self) -> u64 {
        self.lock().swaps
    }

    /// Refresh thread: wait until a check is asked for or `period` passed, then mark a check
    /// as running (end it with [`Wakeup::checked`]).
    pub fn wait_turn(&self, period: Duration) {
        let st = self.lock();
        let mut st = wait_timeout_while(&self.cv, st, period, |st| !st.requested);
        st.requested = false;
        st.checking = true;
    }

    /// Refresh thread: the check marked by [`Wakeup::wait_turn`] is over.
    pub fn checked(&self) {
        let mut st = self.lock();
        st.checking = false;
        st.checks += 1;
        self.cv.notify_all();
    }

    fn swapped(&self) {
        self.lock().swaps += 1;
        self.cv.notify_all();
    }

    /// A read failed while `seen` views had been swapped in: ask for a check and wait for one
    /// that started after this call (at most `timeout`). True if a new view came since `seen`.
    pub fn request_and_wait(&self, seen: u64, timeout: Duration) -> bool {
        let mut st = self.lock();
        let target = st.checks + if st.checking { 2 } else { 1 };
        st.requested = true;
        self.cv.notify_all();
        let st = wait_timeout_while(&self.cv, st, timeout, |st| {
            st.swaps == seen && st.checks < target
        });
        st.swaps != seen
    }
}

/// What a refresh compares: the inodes the kernel was shown, with their old attributes, and
/// the listings built.
struct Before {
    nodes: Vec<(Arc<Node>, Attr)>,
    listings: HashMap<u64, Arc<Listing>>,
}

impl H5Fs {
    /// Re-read the mounted file and serve the new state (see the module docs); `Err` with the
    /// reason when the new state cannot be read and the old one stays.
    pub fn refresh(&self) -> Result<Vec<Invalidation>, String> {
        let Mounted::File { idx, held } = &self.mounted else {
            return Ok(self.refresh_dir());
        };
        let old = self.main_file().ok_or("no mounted file")?;
        // The same cache, under a new file id: the old view's chunks are never served for the
        // new one and age out, and files reached through external links, opened on this
        // cache, keep sharing the one budget.
        let new = self.resolver.open_fresh(*idx).map_err(|e| e.to_string())?;
        if new.root() != old.root() {
            return Err(format!(
                "root group moved from {:#x} to {:#x} (another file?); not followed",
                old.root().0,
                new.root().0
            ));
        }
        let before = {
            let nodes = self.inodes.nodes();
            let shown = lock(&self.shown);
            Before {
                nodes: nodes
                    .into_iter()
                    .filter_map(|n| shown.get(&n.ino).copied().map(|a| (n, a)))
                    .collect(),
                listings: self.listings.all(),
            }
        };
        self.check_new(&old, &new, &before)?;
        // Swap first, then drop what was computed from the old file: a reader that computes
        // attributes after this sees the new file (see the listings' generation).
        self.resolver.replace(*idx, new.clone(), true);
        *write(held) = new.clone();
        self.listings.clear();
        self.forget_attrs();
        self.relink(&before);
        self.wakeup.swapped();
        self.stats().on_refresh();
        Ok(self.invalidations(&old, &new, &before))
    }

    /// Look up again every soft and external link the kernel has been shown, so that one
    /// whose text changed gets it (see `InodeTable::symlink`); a link that is gone keeps its
    /// node, which its parent's listing or lookup no longer leads to.
    fn relink(&self, before: &Before) {
        for (node, _) in &before.nodes {
            if !matches!(node.kind, NodeKind::Symlink { .. }) {
                continue;
            }
            if let Some((_, name)) = node.path.rsplit_once('/') {
                let _ = self.find(node.parent, name);
            }
        }
    }

    /// Where the refresh thread waits and failed reads ask for a check.
    pub fn wakeup(&self) -> &Wakeup {
        &self.wakeup
    }

    /// Run `op`; with refresh on, if it fails with `EIO`, ask for a check of the file and,
    /// if a new view comes within [`RETRY_WAIT`] (or the period, if shorter), run it again.
    pub(super) fn retry_after_refresh<T>(
        &self,
        retry: Retry,
        mut op: impl FnMut() -> super::FsResult<T>,
    ) -> super::FsResult<T> {
        let Some(period) = self.opts.refresh.filter(|_| retry == Retry::InNewView) else {
            return op();
        };
        let seen = self.wakeup.swaps();
        match op() {
            Err(e) if e.errno() == libc::EIO => {
                if self.wakeup.request_and_wait(seen, period.min(RETRY_WAIT)) {
                    op()
                } else {
                    Err(e)
                }
            }
            r => r,
        }
    }

    /// Check a mounted directory once: directories whose entries changed are listed again,
    /// and HDF5 files that changed are closed so their next use reads them afresh (each
    /// one's objects, listings and attributes are dropped). Returns what the kernel must
    /// forget (nothing when nothing changed).
    pub fn refresh_dir(&self) -> Vec<Invalidation> {
        if self.resolver.origin().is_some() {
            // A prefix of a bucket: its listings stay as first read (no LIST per period).
            return Vec::new();
        }
        let stamps: Vec<(u64, Stamp)> = lock(&self.host_stamps)
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        let mut out = Vec::new();
        let mut changed_dirs = Vec::new();
        let mut changed_files = Vec::new();
        for (ino, was) in stamps {
            let Some(node) = self.inodes.get(ino) else {
                continue;
            };
            let Some(rel) = node.host_path() else {
                continue;
            };
            if Stamp::of(&self.host_abs(rel)).ok() == Some(was) {
                continue;
            }
            match node.kind {
                NodeKind::HostDir { .. } => changed_dirs.push(ino),
                _ => changed_files.push(node),
            }
        }
        if changed_dirs.is_empty() && changed_files.is_empty() {
            return out;
        }
        let before: HashMap<u64, Arc<Listing>> = {
            // The listings of the changed directories, and every listing of a changed file.
            let mut of_files = Vec::new();
            for f in changed_files.iter().filter(|f| f.is_file_root()) {
                for ino in self.listings.inos() {
                    if self.inodes.get(ino).is_some_and(|n| n.file == f.file) {
                        of_files.push(ino);
                    }
                }
            }
            let dropped = of_files.iter().copied().chain(changed_dirs.iter().copied());
            let mut taken = self.listings.take(dropped);
            for ino in of_files {
                if taken.remove(&ino).is_some() {
                    out.push(Invalidation::Inode { ino, from: Some(0) });
                }
            }
            taken
        };
        {
            let mut stamps = lock(&self.host_stamps);
            for ino in &changed_dirs {
                stamps.remove(ino);
            }
            for f in &changed_files {
                stamps.remove(&f.ino);
            }
        }
        for f in &changed_files {
            out.push(Invalidation::Inode {
                ino: f.ino,
                from: Some(0),
            });
            if !f.is_file_root() {
                continue;
            }
            log::info!("{}: changed on disk; read afresh", f.path);
            self.resolver.forget(f.file);
            // Every node of the file, whether or not its attributes were asked since the
            // last refresh: the kernel may hold pages of any of them.
            for node in self.inodes.nodes() {
                if node.file == f.file && node.ino != f.ino {
                    out.push(Invalidation::Inode {
                        ino: node.ino,
                        from: Some(0),
                    });
                }
            }
        }
        self.forget_attrs();
        for (dir, was) in before {
            let now = self.listing(dir).ok();
            for e in &was.entries {
                if now.as_ref().and_then(|l| l.find(&e.name)) != Some(e) {
                    out.push(Invalidation::Entry {
                        parent: dir,
                        name: e.name.to_string(),
                    });
                }
            }
            for e in now.iter().flat_map(|l| l.entries.iter()) {
                if was.find(&e.name).is_none() {
                    out.push(Invalidation::Entry {
                        parent: dir,
                        name: e.name.to_string(),
                    });
                }
            }
            out.push(Invalidation::Inode {
                ino: dir,
                from: Some(0),
            });
        }
        self.wakeup.swapped();
        self.stats().on_refresh();
        out
    }

    /// Every object of the mounted file the kernel knows must still be readable in `new`
    /// where it was in `old`.
    fn check_new(&self, old: &File, new: &File, before: &Before) -> Result<(), String> {
        let fail = |n: &Node, e: crate::error::Error| format!("{}: {e}", n.path);
        for (node, _) in &before.nodes {
            let Some(id) = node.object().filter(|_| node.file == old.idx()) else {
                continue;
            };
            let Ok(kind) = old.kind(id) else {
                continue;
            };
            let new_kind = new.kind(id).map_err(|e| fail(node, e))?;
            match kind {
                ObjectKind::Dataset => {
                    let (Ok(was), ObjectKind::Dataset) = (old.dataset(id), new_kind) else {
                        continue;
                    };
                    let now = new.dataset(id).map_err(|e| fail(node, e))?;
                    if was.len() != now.len() {
                        probe(node, &now, was.len())?;
                    }
                }
                ObjectKind::Group
                    if new_kind == ObjectKind::Group && before.listings.contains_key(&node.ino) =>
                {
                    new.links(id).map_err(|e| fail(node, e))?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// What the kernel must forget once `new` replaced `old`.
    fn invalidations(&self, old: &File, new: &File, before: &Before) -> Vec<Invalidation> {
        let mut out = Vec::new();
        // A remote object is replaced whole (a new ETag): any byte may differ, not only
        // what an append adds, so the kernel drops every page it holds of the file.
        let replaced = new.storage().source().remote().is_some();
        for (node, was) in &before.nodes {
            if replaced && was.kind == FileKind::RegularFile && node.file == old.idx() {
                out.push(Invalidation::Inode {
                    ino: node.ino,
                    from: Some(0),
                });
                continue;
            }
            let now = match self.getattr_once(node.ino, Retry::No) {
                Ok(a) => a,
                Err(_) => {
                    out.push(Invalidation::Inode {
                        ino: node.ino,
                        from: Some(0),
                    });
                    continue;
                }
            };
            let relinked = self.relinked(node);
            if now == *was && !relinked {
                continue;
            }
            // A symlink's text is cached like file data (`FUSE_CACHE_SYMLINKS`).
            let from = if relinked {
                Some(0)
            } else if now.kind == FileKind::RegularFile && now.size != was.size {
                let grew = now.size > was.size
                    && node.file == old.idx()
                    && node.object().is_some_and(|id| appended(old, new, id));
                if !grew {
                    log::warn!(
                        "{}: changed other than by appending ({} -> {} bytes); serving the \
                         new state",
                        node.path,
                        was.size,
                        now.size
                    );
                }
                for kind in views::SLOTS {
                    if let Some(ino) =
                        views::sidecar_ino(node.ino, kind).filter(|&ino| self.views.known(ino))
                    {
                        out.push(Invalidation::Inode { ino, from: Some(0) });
                    }
                }
                Some(if grew { was.size / PAGE * PAGE } else { 0 })
            } else {
                None
            };
            out.push(Invalidation::Inode {
                ino: node.ino,
                from,
            });
        }
        for (&dir, was) in &before.listings {
            let now = self.listing(dir).ok();
            let mut changed = false;
            for e in &was.entries {
                if now.as_ref().and_then(|l| l.find(&e.name)) != Some(e) {
                    changed = true;
                    out.push(Invalidation::Entry {
                        parent: dir,
                        name: e.name.to_string(),
                    });
                }
            }
            for e in now.iter().flat_map(|l| l.entries.iter()) {
                if was.find(&e.name).is_none() {
                    changed = true;
                    out.push(Invalidation::Entry {
                        parent: dir,
                        name: e.name.to_string(),
                    });
                }
            }
            if changed {
                out.push(Invalidation::Inode {
                    ino: dir,
                    from: Some(0),
                });
            }
        }
        out
    }
}

impl H5Fs {
    /// Every node was made from the file before a refresh: its attributes are computed
    /// afresh, and its path taken again where it is found next (see `InodeTable::rebind`).
    fn forget_attrs(&self) {
        self.inodes.mark_before_refresh();
        lock(&self.shown).clear();
    }

    /// True for a symlink whose text the refresh changed (its attributes may not show it: a
    /// text of the same length).
    fn relinked(&self, was: &Node) -> bool {
        let NodeKind::Symlink { target } = &was.kind else {
            return false;
        };
        self.node(was.ino).is_ok_and(|now| match &now.kind {
            NodeKind::Symlink { target: t } => t != target,
            _ => false,
        })
    }
}

/// Read [`PROBE`] bytes of `ds` before its end and before `old_len`, its length in the old
/// view. Only bytes that do not decode fail the check: a dataset this reader cannot serve
/// anyway (an unavailable filter, a missing virtual source) does not hold back the others.
fn probe(node: &Node, ds: &Dataset, old_len: u64) -> Result<(), String> {
    for end in [ds.len(), old_len.min(ds.len())] {
        let start = end.saturating_sub(u64::from(PROBE));
        // `end - start` is at most PROBE.
        match read::read(
            crate::io::ReadCtx::default(),
            ds,
            start,
            (end - start) as u32,
        ) {
            Err(e) if e.errno_class() == ErrorClass::Io => {
                return Err(format!("{}: {e}", node.path))
            }
            _ => {}
        }
    }
    Ok(())
}

/// True when dataset `id` of `new` is dataset `id` of `old` with rows added: same type,
/// layout and trailing dimensions, a first dimension at least as long. Its image then starts
/// with the old image.
fn appended(old: &File, new: &File, id: ObjectId) -> bool {
    let (Ok(a), Ok(b)) = (old.dataset(id), new.dataset(id)) else {
        return false;
    };
    let (a, b) = (&a.info, &b.info);
    a.dtype == b.dtype
        && a.layout == b.layout
        && a.shape.len() == b.shape.len()
        && a.shape.first() <= b.shape.first()
        && a.shape.get(1..) == b.shape.get(1..)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::time::{Instant, SystemTime};

    use super::*;
    use crate::fs::{FsOptions, ROOT_INO};
    use crate::views::{ViewKind, ViewOptions};

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/mount-tests/fixtures/grow");

    fn snapshot(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(FIXTURES).join(name)).unwrap()
    }

    /// Overwrite `path` in place with `bytes` (no truncation first, as a writer would).
    fn overwrite(path: &Path, bytes: &[u8]) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all(bytes).unwrap();
        f.set_len(bytes.len() as u64).unwrap();
    }

    fn mount(path: &Path, npy: bool) -> H5Fs {
        let file = File::open(path, &crate::model::OpenOptions::default()).unwrap();
        let views = ViewOptions {
            npy,
            envi: false,
            text: true,
            byte_order: Default::default(),
            ..Default::default()
        };
        let opts = FsOptions {
            uid: 0,
            gid: 0,
            file_mtime: SystemTime::UNIX_EPOCH,
            file_size: 0,
            views,
            refresh: Some(std::time::Duration::from_secs(1)),
            zarr: None,
        };
        H5Fs::new(file, opts)
    }

    fn ino(fs: &H5Fs, path: &str) -> u64 {
        let mut ino = ROOT_INO;
        for name in path.split('/').filter(|c| !c.is_empty()) {
            ino = fs.lookup(ino, OsStr::new(name)).unwrap().ino;
        }
        ino
    }

    fn read_all(fs: &H5Fs, ino: u64) -> Vec<u8> {
        let len = fs.getattr(ino).unwrap().size;
        fs.read(ino, 0, u32::try_from(len).unwrap()).unwrap()
    }

    fn gz(rows: u64) -> Vec<u8> {
        (0..rows)
            .flat_map(|i| (0..3).map(move |j| (i * 4 + j + 1) as i32))
            .flat_map(i32::to_le_bytes)
            .collect()
    }

    #[test]
    fn swmr_snapshots_grow_and_invalidate_exactly_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.h5");
        std::fs::write(&path, snapshot("swmr_a.h5")).unwrap();
        let mut w = Watcher::new(&path, Some(Stamp::of(&path).unwrap()));
        let fs = mount(&path, true);
        assert_eq!(w.check(&fs), Outcome::Unchanged);
        let (data, gz_ino, plain, fixed) = (
            ino(&fs, "/data"),
            ino(&fs, "/data/gz"),
            ino(&fs, "/data/plain"),
            ino(&fs, "/fixed"),
        );
        // Listed as the kernel does, which hands out every entry.
        for dir in [ROOT_INO, data] {
            fs.readdirplus(dir, 0, |_, _, _, _| false).unwrap();
        }
        assert_eq!(read_all(&fs, gz_ino), gz(20));
        let npy = views::sidecar_ino(gz_ino, ViewKind::Npy).unwrap();
        let plain_npy = views::sidecar_ino(plain, ViewKind::Npy).unwrap();
        assert_eq!(fs.lookup(data, OsStr::new("gz.npy")).unwrap().ino, npy);
        let fixed_bytes = read_all(&fs, fixed);

        overwrite(&path, &snapshot("swmr_b.h5"));
        let Outcome::Refreshed(inv) = w.check(&fs) else {
            panic!("not refreshed");
        };
        let expect = |ino, old_size: u64| Invalidation::Inode {
            ino,
            from: Some(old_size / PAGE * PAGE),
        };
        let mut inv = inv;
        inv.sort_by_key(|i| format!("{i:?}"));
        let mut want = vec![
            expect(gz_ino, 240),
            expect(plain, 160),
            Invalidation::Inode {
                ino: npy,
                from: Some(0),
            },
            // Handed out by the readdirplus of /data.
            Invalidation::Inode {
                ino: plain_npy,
                from: Some(0),
            },
        ];
        want.sort_by_key(|i| format!("{i:?}"));
        assert_eq!(inv, want, "only the grown datasets and their .npy");
        assert_eq!(fs.getattr(gz_ino).unwrap().size, 45 * 12);
        assert_eq!(read_all(&fs, gz_ino), gz(45));
        assert_eq!(read_all(&fs, fixed), fixed_bytes);
        assert_eq!(w.check(&fs), Outcome::Unchanged);

        overwrite(&path, &snapshot("swmr_c.h5"));
        let Outcome::Refreshed(inv) = w.check(&fs) else {
            panic!("not refreshed");
        };
        for name in ["extra", "extra.npy"] {
            let e = Invalidation::Entry {
                parent: ROOT_INO,
                name: name.into(),
            };
            assert_eq!(inv.contains(&e), name == "extra", "{name}");
        }
        for name in ["new", "new.npy"] {
            let e = Invalidation::Entry {
                parent: data,
                name: name.into(),
            };
            assert!(inv.contains(&e), "{name}: {inv:?}");
        }
        for dir in [ROOT_INO, data] {
            assert!(inv.contains(&Invalidation::Inode {
                ino: dir,
                from: Some(0)
            }));
        }
        assert!(inv.contains(&expect(gz_ino, 540)));
        assert_eq!(read_all(&fs, gz_ino), gz(60));
        assert_eq!(read_all(&fs, ino(&fs, "/extra/note")), [7, 8, 9]);
        assert_eq!(read_all(&fs, ino(&fs, "/data/new")).len(), 80);
        assert_eq!(read_all(&fs, fixed), fixed_bytes);
    }

    #[test]
    fn failed_reads_wake_the_refresh_thread_and_learn_whether_a_view_came() {
        let w = Arc::new(Wakeup::default());
        let long = Duration::from_secs(30);
        // Nobody checks: the wait ends at its timeout, with no new view.
        let t = Instant::now();
        assert!(!w.request_and_wait(0, Duration::from_millis(50)));
        assert!(t.elapsed() >= Duration::from_millis(50));
        // That request is still pending: the refresh thread's next turn takes it. (Left
        // pending, the thread below could take it and begin its check before the read asks,
        // and the read, asking during a check, would wait for a second check that never
        // comes.)
        let t = Instant::now();
        w.wait_turn(long);
        w.checked();
        assert!(t.elapsed() < long / 2);
        // A refresh thread that finds nothing new: the read learns it at once.
        let thread = |swap: bool| {
            let w = w.clone();
            std::thread::spawn(move || {
                w.wait_turn(long);
                if swap {
                    w.swapped();
                }
                w.checked();
            })
        };
        let t = Instant::now();
        let h = thread(false);
        assert!(!w.request_and_wait(w.swaps(), long));
        h.join().unwrap();
        assert!(t.elapsed() < long / 2);
        // One that swaps in a new view.
        let h = thread(true);
        assert!(w.request_and_wait(0, long));
        h.join().unwrap();
        assert_eq!(w.swaps(), 1);
        // The refresh thread sleeps its period when nobody asks.
        let t = Instant::now();
        w.wait_turn(Duration::from_millis(30));
        w.checked();
        assert!(t.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn changed_soft_links_get_their_new_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.h5");
        std::fs::write(&path, snapshot("links_a.h5")).unwrap();
        let mut w = Watcher::new(&path, Some(Stamp::of(&path).unwrap()));
        let fs = mount(&path, false);
        let (alias, far, gone) = (ino(&fs, "/alias"), ino(&fs, "/far"), ino(&fs, "/gone"));
        assert_eq!(fs.readlink(alias).unwrap(), b"x");
        assert_eq!(fs.readlink(far).unwrap(), b"x");
        assert_eq!(fs.readlink(gone).unwrap(), b"y");
        assert_eq!(fs.getattr(far).unwrap().size, 1);

        overwrite(&path, &snapshot("links_b.h5"));
        let Outcome::Refreshed(inv) = w.check(&fs) else {
            panic!("not refreshed");
        };
        // Same inode numbers, new texts: of the same length (/alias) and longer (/far).
        assert_eq!(ino(&fs, "/alias"), alias);
        assert_eq!(fs.readlink(alias).unwrap(), b"y");
        assert_eq!(ino(&fs, "/far"), far);
        assert_eq!(fs.readlink(far).unwrap(), b"sub/z");
        assert_eq!(fs.getattr(far).unwrap().size, 5);
        // The kernel drops the cached texts (FUSE_CACHE_SYMLINKS) of both.
        for ino in [alias, far] {
            assert!(
                inv.contains(&Invalidation::Inode { ino, from: Some(0) }),
                "{ino}: {inv:?}"
            );
        }
        assert!(fs.lookup(ROOT_INO, OsStr::new("gone")).is_err());
        assert_eq!(w.check(&fs), Outcome::Unchanged);
    }

    #[test]
    fn another_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.h5");
        std::fs::write(&path, snapshot("swmr_a.h5")).unwrap();
        let mut w = Watcher::new(&path, Some(Stamp::of(&path).unwrap()));
        let fs = mount(&path, false);
        let gz_ino = ino(&fs, "/data/gz");
        // An earliest-format file: its root group lies elsewhere.
        overwrite(&path, &snapshot("plain_b.h5"));
        let out = w.check(&fs);
        assert!(
            matches!(&out, Outcome::Kept(why) if why.contains("root group moved")),
            "{out:?}"
        );
        assert_eq!(fs.getattr(gz_ino).unwrap().size, 20 * 12);
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(w.check(&fs), Outcome::Kept(_)), "file gone");
    }

    #[test]
    fn a_torn_file_keeps_the_old_view_until_it_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.h5");
        let a = snapshot("plain_a.h5");
        std::fs::write(&path, &a).unwrap();
        let mut w = Watcher::new(&path, Some(Stamp::of(&path).unwrap()));
        let fs = mount(&path, false);
        let gz_ino = ino(&fs, "/data/gz");
        assert_eq!(read_all(&fs, gz_ino), gz(20));
        // The start of b over a: a writer caught mid-write.
        let b = snapshot("plain_b.h5");
        let mut torn = b[..b.len() / 2].to_vec();
        torn.extend_from_slice(&a[torn.len().min(a.len())..]);
        overwrite(&path, &torn);
        // Its metadata points at chunks not written yet: kept, also once settled.
        for _ in 0..2 {
            let out = w.check(&fs);
            assert!(matches!(out, Outcome::Kept(_)), "{out:?}");
            assert_eq!(read_all(&fs, gz_ino), gz(20));
        }
        overwrite(&path, &b);
        assert!(matches!(w.check(&fs), Outcome::Refreshed(_)));
        assert_eq!(read_all(&fs, gz_ino), gz(45));
        assert_eq!(w.check(&fs), Outcome::Unchanged);
    }
}
