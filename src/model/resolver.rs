//! One resolver for every other file a mount (or a library user) opens: files reached through
//! external links, virtual-dataset sources, and raw files of external storage.
//!
//! # Path policy
//! A name found in a file is resolved as libhdf5 resolves it: a relative name against the
//! directory of the file that holds it (the directory as that file was reached, so a chain of
//! links walks from file to file), an absolute name as it is. The path's `.` and `..` are
//! folded by text, then symlinks on disk are resolved ([`std::fs::canonicalize`]). Unless the
//! mount allows outside paths ([`ResolverOptions::allow_outside_paths`], the mount option
//! `allow_external_paths`), both the folded path and the canonical one must lie inside the
//! mount's root: the mounted file's directory, or the mounted directory. A name refused this
//! way is [`Error::Unsupported`] (the mount answers `EOPNOTSUPP` for data that needs it and
//! shows a link to it as a dangling symlink), with one wording for every kind of reference; a
//! name that leads nowhere is [`Error::NotFound`].
//!
//! # Identity and the bound on open files
//! A file is known by its canonical path and by its device and inode, so two spellings, a
//! symlink or a hard link reach one [`FileIdx`], which stays the file's for the life of the
//! resolver. Open files (parsed HDF5 files with their descriptor and metadata caches, and raw
//! descriptors of external storage) live in one LRU bounded by
//! [`ResolverOptions::max_open_files`]: opening one more closes the least recently used, and a
//! file closed this way is opened again, transparently, when next asked for. A caller keeps an
//! open file only for the length of one operation (it asks by [`FileIdx`] each time), so the
//! descriptors in use stay within the bound plus one per thread at work. Files may be pinned
//! (the mounted file is), and are then never closed.
//!
//! Every HDF5 file decodes into the resolver's one chunk cache, under a cache id that the file
//! keeps across a reopen, so the cache budget holds for the whole mount and a reopened file
//! finds its chunks again.
//!
//! Opening a file reads its superblock and root object header from disk; that happens under
//! the file's own slot lock only, never under the lock every lookup takes, so a slow or large
//! file delays only the requests that need that file.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use lru::LruCache;

use super::file::{File, OpenOptions};
use crate::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::io::{ByteSource, Opener};
use crate::layout::external::RawOpener;
use crate::sync::lock;

/// Index of a file known to a resolver.
pub type FileIdx = u32;

/// Default bound on open files.
pub const DEFAULT_MAX_OPEN_FILES: usize = 256;

/// Fewest open files a resolver keeps (a VDS file and its source, or a link's two ends).
pub const MIN_OPEN_FILES: usize = 2;

/// How a resolver finds and bounds files.
#[derive(Clone, Debug)]
pub struct ResolverOptions {
    /// Every file must lie under this directory (after symlinks are resolved) unless
    /// `allow_outside_paths`.
    pub root: PathBuf,
    /// Follow names that lead outside `root`.
    pub allow_outside_paths: bool,
    /// Most files open at once (at least [`MIN_OPEN_FILES`]).
    pub max_open_files: usize,
    /// Bytes of the one chunk cache every file decodes into.
    pub cache_bytes: u64,
    /// Where the files come from when they are not local files (a remote mount): paths
    /// are then the origin's object paths, resolved the same way but without symlinks,
    /// and a name that is an absolute path (a local file of whoever wrote it) is refused.
    pub origin: Option<Arc<dyn Opener>>,
}

/// Counters of a resolver, for statistics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolverStats {
    /// Files known (each with its index).
    pub known: u64,
    /// Files open now.
    pub open: u64,
    /// Opens, first ones and reopens.
    pub opens: u64,
    /// Files closed by the bound.
    pub evictions: u64,
}

/// Fold `.` and `..` out of a path by its text (a `..` at the root stays at the root).
pub fn fold(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` made absolute (against the current directory) and folded.
pub fn absolute(path: &Path) -> PathBuf {
    fold(&std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// A file found by [`Resolver::locate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The path as resolved from the name (folded, symlinks kept): what the file is opened
    /// as, and the directory its own relative names are resolved against.
    pub path: PathBuf,
    /// The path with symlinks resolved: the file's identity.
    pub canonical: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Hdf5,
    Raw,
}

/// An open file in the LRU.
#[derive(Clone)]
enum Handle {
    Hdf5(Arc<File>),
    Raw(Arc<dyn ByteSource>),
}

/// One known file.
struct Slot {
    kind: Kind,
    /// The path it was first reached by (opened as this).
    path: PathBuf,
    /// Its chunk-cache id, kept across reopens (a new one once it changed: [`Resolver::forget`]).
    cache_file: AtomicU64,
    /// Held while the file is being opened: one open per file at a time.
    opening: Mutex<()>,
    /// The last handle opened, while anyone still holds it (a file closed by the bound but
    /// still in use is taken back rather than opened twice).
    last: Mutex<Option<WeakHandle>>,
    /// Why it could not be opened, once that is known (not retried): the error itself, so
    /// its class and the address it names stay.
    failed: Mutex<Option<Error>>,
    /// Its open file is owned by a library user's [`File::open`] (which owns this resolver):
    /// held here weakly only, so the two do not keep each other alive.
    owned: std::sync::atomic::AtomicBool,
}

enum WeakHandle {
    Hdf5(Weak<File>),
    Raw(Weak<dyn ByteSource>),
}

impl WeakHandle {
    fn upgrade(&self) -> Option<Handle> {
        match self {
            WeakHandle::Hdf5(w) => w.upgrade().map(Handle::Hdf5),
            WeakHandle::Raw(w) => w.upgrade().map(Handle::Raw),
        }
    }
}

impl Handle {
    fn downgrade(&self) -> WeakHandle {
        match self {
            Handle::Hdf5(f) => WeakHandle::Hdf5(Arc::downgrade(f)),
            Handle::Raw(f) => WeakHandle::Raw(Arc::downgrade(f)),
        }
    }
}

struct State {
    slots: Vec<Arc<Slot>>,
    by_path: HashMap<(Kind, PathBuf), FileIdx>,
    by_ident: HashMap<(Kind, u64, u64), FileIdx>,
    open: LruCache<FileIdx, Handle>,
    pinned: HashMap<FileIdx, Arc<File>>,
}

/// The files of a mount (see the module docs).
pub struct Resolver {
    /// Follows no name at all (its one file came from memory, not from a directory).
    isolated: bool,
    root: PathBuf,
    root_canon: PathBuf,
    allow_outside: bool,
    max_open: usize,
    cache: Arc<ChunkCache>,
    state: Mutex<State>,
    opens: AtomicU64,
    evictions: AtomicU64,
    origin: Option<Arc<dyn Opener>>,
    /// The buffers its files' chunk decodes reuse.
    scratch: Arc<crate::filters::ScratchPool>,
    /// Background listings of its files' groups running now ([`Resolver::begin_crawl`]).
    crawls: Arc<AtomicUsize>,
    /// Itself, handed to the files it opens (they hold it weakly: the resolver owns them).
    me: Weak<Resolver>,
}

/// The slot of one background listing of groups ([`Resolver::begin_crawl`]), given back
/// when dropped.
pub(crate) struct CrawlSlot(Arc<AtomicUsize>);

impl Drop for CrawlSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("root", &self.root)
            .field("max_open", &self.max_open)
            .finish()
    }
}

impl Resolver {
    /// A resolver with nothing open yet.
    pub fn new(opts: ResolverOptions) -> Arc<Resolver> {
        Resolver::with_cache(opts.clone(), Arc::new(ChunkCache::new(opts.cache_bytes)))
    }

    /// A resolver whose files decode into `cache` (`opts.cache_bytes` unused).
    pub fn with_cache(opts: ResolverOptions, cache: Arc<ChunkCache>) -> Arc<Resolver> {
        Resolver::build(opts, cache, false)
    }

    fn build(opts: ResolverOptions, cache: Arc<ChunkCache>, isolated: bool) -> Arc<Resolver> {
        let root = absolute(&opts.root);
        let root_canon = match opts.origin {
            Some(_) => root.clone(),
            None => std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone()),
        };
        let max_open = opts.max_open_files.max(MIN_OPEN_FILES);
        Arc::new_cyclic(|me| Resolver {
            isolated,
            root,
            root_canon,
            allow_outside: opts.allow_outside_paths,
            max_open,
            cache,
            state: Mutex::new(State {
                slots: Vec::new(),
                by_path: HashMap::new(),
                by_ident: HashMap::new(),
                open: LruCache::unbounded(),
                pinned: HashMap::new(),
            }),
            opens: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            origin: opts.origin,
            scratch: Arc::default(),
            crawls: Arc::default(),
            me: me.clone(),
        })
    }

    /// A resolver for a file that is not on disk (see [`File::from_source`]): it follows no
    /// name of another file.
    pub fn isolated(cache_bytes: u64) -> Arc<Resolver> {
        let opts = ResolverOptions {
            root: PathBuf::from("/"),
            allow_outside_paths: false,
            max_open_files: MIN_OPEN_FILES,
            cache_bytes,
            origin: None,
        };
        Resolver::build(opts, Arc::new(ChunkCache::new(cache_bytes)), true)
    }

    /// A slot for a file its owner opened from a byte source (no path to reopen it by).
    pub(super) fn register_source(&self, name: &str) -> FileIdx {
        let loc = Located {
            path: PathBuf::from(name),
            canonical: PathBuf::from(format!("\0source:{name}")),
        };
        self.register(Kind::Hdf5, &loc)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The mount root (absolute, folded).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root with symlinks resolved.
    pub fn canonical_root(&self) -> &Path {
        &self.root_canon
    }

    /// Whether names may lead outside the root.
    pub fn allow_outside_paths(&self) -> bool {
        self.allow_outside
    }

    /// The bound on open files.
    pub fn max_open_files(&self) -> usize {
        self.max_open
    }

    /// A slot for one background listing of groups of its files, if fewer than
    /// [`super::file::MAX_CRAWLS`] run now.
    pub(crate) fn begin_crawl(&self) -> Option<CrawlSlot> {
        let slot = CrawlSlot(self.crawls.clone());
        (self.crawls.fetch_add(1, Ordering::AcqRel) < super::file::MAX_CRAWLS).then_some(slot)
    }

    /// The buffers every file's chunk decodes reuse.
    pub fn scratch(&self) -> &Arc<crate::filters::ScratchPool> {
        &self.scratch
    }

    /// The chunk cache every file decodes into.
    pub fn chunk_cache(&self) -> &Arc<ChunkCache> {
        &self.cache
    }

    /// What the files' remote origin has asked its server (`None` for local files).
    pub fn requests(&self) -> Option<crate::io::RequestCounts> {
        self.origin.as_ref()?.requests()
    }

    /// Counters now.
    pub fn stats(&self) -> ResolverStats {
        let st = self.lock();
        ResolverStats {
            known: st.slots.len() as u64,
            open: (st.open.len() + st.pinned.len()) as u64,
            opens: self.opens.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }

    /// Whether `path` (absolute, folded or canonical) lies inside the root.
    pub fn inside(&self, path: &Path) -> bool {
        path.starts_with(&self.root) || path.starts_with(&self.root_canon)
    }

    /// Where the name `name`, found in a file whose directory is `dir`, leads under the path
    /// policy (see the module docs). `what` names the kind of reference in messages
    /// ("external link", "virtual dataset source", "external storage file").
    pub fn locate(&self, dir: &Path, name: &str, what: &'static str) -> Result<Located> {
        if name.is_empty() {
            return Err(Error::NotFound(format!("{what} with an empty file name")));
        }
        if self.isolated {
            return Err(Error::unsupported(
                what,
                format!("{name:?}: the file was not opened from a directory, so no other file is followed"),
            ));
        }
        if let Some(origin) = &self.origin {
            return self.locate_remote(origin.as_ref(), dir, name, what);
        }
        let path = absolute(&dir.join(name));
        let refuse = |resolved: &Path| {
            Error::unsupported(
                what,
                format!(
                    "{name:?} resolves to {}, outside the mount root {} \
                     (mount option allow_external_paths follows it)",
                    resolved.display(),
                    self.root.display()
                ),
            )
        };
        if !self.allow_outside && !self.inside(&path) {
            return Err(refuse(&path));
        }
        let canonical = match std::fs::canonicalize(&path) {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // "virtual dataset source file x.h5", "file x.h5" (not "file file").
                let noun = if what.ends_with("file") { "" } else { " file" };
                return Err(Error::NotFound(format!("{what}{noun} {name}")));
            }
            Err(source) => {
                return Err(Error::Open {
                    what,
                    source: std::sync::Arc::new(std::io::Error::new(
                        source.kind(),
                        format!("{}: {source}", path.display()),
                    )),
                })
            }
        };
        if !self.allow_outside && !canonical.starts_with(&self.root_canon) {
            return Err(refuse(&canonical));
        }
        Ok(Located { path, canonical })
    }

    /// [`Resolver::locate`] among the objects of `origin`: relative names against `dir`;
    /// the URL of an object of the same origin as its path; anything else refused.
    fn locate_remote(
        &self,
        origin: &dyn Opener,
        dir: &Path,
        name: &str,
        what: &'static str,
    ) -> Result<Located> {
        let base = origin.url("/");
        let rel = if let Some(p) = name.strip_prefix(base.as_str()) {
            format!("/{p}")
        } else if name.contains("://") {
            return Err(Error::unsupported(
                what,
                format!("{name:?} is on another server or bucket than {base}"),
            ));
        } else if name.starts_with('/') {
            return Err(Error::unsupported(
                what,
                format!("{name:?} is a local path, and the file is remote ({base})"),
            ));
        } else {
            name.to_string()
        };
        let path = fold(&dir.join(rel));
        if !self.allow_outside && !self.inside(&path) {
            return Err(Error::unsupported(
                what,
                format!(
                    "{name:?} resolves to {}, outside the mounted {} \
                     (mount option allow_external_paths follows it)",
                    origin.url(&path.to_string_lossy()),
                    origin.url(&self.root.to_string_lossy()),
                ),
            ));
        }
        Ok(object_of_origin(&path))
    }

    /// The index of the file at `loc`, known from now on (nothing is opened).
    fn register(&self, kind: Kind, loc: &Located) -> FileIdx {
        let ident = match self.origin {
            Some(_) => None,
            None => std::fs::metadata(&loc.canonical)
                .ok()
                .map(|m| (kind, m.dev(), m.ino())),
        };
        let mut st = self.lock();
        if let Some(&idx) = st.by_path.get(&(kind, loc.canonical.clone())) {
            return idx;
        }
        if let Some(idx) = ident.and_then(|k| st.by_ident.get(&k).copied()) {
            st.by_path.insert((kind, loc.canonical.clone()), idx);
            st.by_path.insert((kind, loc.path.clone()), idx);
            return idx;
        }
        let idx = st.slots.len() as FileIdx;
        st.slots.push(Arc::new(Slot {
            kind,
            path: loc.path.clone(),
            cache_file: AtomicU64::new(self.cache.new_file_id()),
            opening: Mutex::new(()),
            last: Mutex::new(None),
            failed: Mutex::new(None),
            owned: std::sync::atomic::AtomicBool::new(false),
        }));
        st.by_path.insert((kind, loc.canonical.clone()), idx);
        st.by_path.insert((kind, loc.path.clone()), idx);
        if let Some(k) = ident {
            st.by_ident.insert(k, idx);
        }
        idx
    }

    /// Make `file` (opened by its owner as file `idx`) the one this resolver hands out while
    /// the owner keeps it.
    pub(super) fn adopt(&self, idx: FileIdx, file: &Arc<File>) {
        if let Ok(slot) = self.slot(idx) {
            *lock(&slot.last) = Some(WeakHandle::Hdf5(Arc::downgrade(file)));
            slot.owned.store(true, Ordering::Release);
        }
    }

    /// The index of the HDF5 file at `path`, checked against the policy as a name found in
    /// nothing (relative paths against the current directory), without opening it.
    pub fn register_path(&self, path: &Path) -> Result<FileIdx> {
        if self.origin.is_some() {
            // An object of the origin, named by the user or a listing: no policy to apply.
            return Ok(self.register(Kind::Hdf5, &object_of_origin(path)));
        }
        let loc = self.locate(Path::new("/"), &path.to_string_lossy(), "file")?;
        Ok(self.register(Kind::Hdf5, &loc))
    }

    /// The HDF5 file named `name` in a file whose directory is `dir`: its index and the open
    /// file.
    pub fn open_named(
        &self,
        dir: &Path,
        name: &str,
        what: &'static str,
    ) -> Result<(FileIdx, Arc<File>)> {
        let loc = self.locate(dir, name, what)?;
        let idx = self.register(Kind::Hdf5, &loc);
        Ok((idx, self.get(idx)?))
    }

    /// The path file `idx` is opened as.
    pub fn path_of(&self, idx: FileIdx) -> Option<PathBuf> {
        self.lock().slots.get(idx as usize).map(|s| s.path.clone())
    }

    /// Serve `file` (a new view of the same path, see `fs::refresh`) as file `idx` from now
    /// on, kept open for good (`pin`: the mounted file) or under the bound.
    pub fn replace(&self, idx: FileIdx, file: Arc<File>, pin: bool) {
        let slot = self.lock().slots.get(idx as usize).cloned();
        if let Some(slot) = slot {
            *lock(&slot.last) = Some(WeakHandle::Hdf5(Arc::downgrade(&file)));
            *lock(&slot.failed) = None;
            slot.owned.store(false, Ordering::Release);
        }
        let mut st = self.lock();
        st.open.pop(&idx);
        if pin {
            st.pinned.insert(idx, file);
        } else {
            st.pinned.remove(&idx);
            st.open.put(idx, Handle::Hdf5(file));
            self.evict(&mut st);
        }
    }

    /// Forget why file `idx` failed to open and close it, so the next use opens it afresh
    /// (its contents changed), under a new cache id: chunks decoded from its old contents
    /// are never served again.
    pub fn forget(&self, idx: FileIdx) {
        let slot = {
            let mut st = self.lock();
            st.open.pop(&idx);
            st.slots.get(idx as usize).cloned()
        };
        if let Some(slot) = slot {
            *lock(&slot.last) = None;
            *lock(&slot.failed) = None;
            slot.cache_file
                .store(self.cache.new_file_id(), Ordering::Release);
        }
    }

    /// Open file `idx` again under a new cache id (what a refresh compares against the one
    /// being served), without serving it.
    pub fn open_fresh(&self, idx: FileIdx) -> Result<Arc<File>> {
        let path = self
            .path_of(idx)
            .ok_or_else(|| Error::NotFound(format!("file #{idx}")))?;
        self.open_file(idx, &path, self.cache.new_file_id())
    }

    /// Close the least recently used files beyond the bound.
    fn evict(&self, st: &mut State) {
        let budget = self.max_open.saturating_sub(st.pinned.len()).max(1);
        while st.open.len() > budget {
            if st.open.pop_lru().is_none() {
                break;
            }
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn slot(&self, idx: FileIdx) -> Result<Arc<Slot>> {
        self.lock()
            .slots
            .get(idx as usize)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("file #{idx}")))
    }

    /// The handle of `idx` if it is open (or still held by someone), touched in the LRU.
    fn cached(&self, idx: FileIdx, slot: &Slot) -> Option<Handle> {
        let mut st = self.lock();
        if let Some(f) = st.pinned.get(&idx) {
            return Some(Handle::Hdf5(f.clone()));
        }
        if let Some(h) = st.open.get(&idx) {
            return Some(h.clone());
        }
        let back = lock(&slot.last).as_ref().and_then(WeakHandle::upgrade)?;
        if slot.owned.load(Ordering::Acquire) {
            return Some(back);
        }
        st.open.put(idx, back.clone());
        self.evict(&mut st);
        Some(back)
    }

    fn handle(&self, idx: FileIdx) -> Result<Handle> {
        // The common case, an open file, takes the lock once.
        let slot = {
            let mut st = self.lock();
            if let Some(f) = st.pinned.get(&idx) {
                return Ok(Handle::Hdf5(f.clone()));
            }
            if let Some(h) = st.open.get(&idx) {
                return Ok(h.clone());
            }
            st.slots.get(idx as usize).cloned()
        }
        .ok_or_else(|| Error::NotFound(format!("file #{idx}")))?;
        if let Some(h) = self.cached(idx, &slot) {
            return Ok(h);
        }
        if let Some(e) = lock(&slot.failed).clone() {
            return Err(e);
        }
        let _one = lock(&slot.opening);
        if let Some(h) = self.cached(idx, &slot) {
            return Ok(h);
        }
        let opened = match slot.kind {
            Kind::Hdf5 => self
                .open_file(idx, &slot.path, slot.cache_file.load(Ordering::Acquire))
                .map(Handle::Hdf5),
            Kind::Raw => match &self.origin {
                Some(origin) => origin.open(&slot.path.to_string_lossy()),
                None => crate::io::LocalFile::open(&slot.path)
                    .map(|f| Arc::new(f) as Arc<dyn ByteSource>),
            }
            .map(Handle::Raw)
            .map_err(|e| Error::Open {
                what: "external data file",
                source: std::sync::Arc::new(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", slot.path.display()),
                )),
            }),
        };
        let h = match opened {
            Ok(h) => h,
            Err(e) => {
                // A file that does not open is not tried again for every request: its
                // error stands until the file is forgotten (a refresh saw it change).
                if !matches!(e, Error::Io { .. } | Error::Open { .. }) {
                    *lock(&slot.failed) = Some(e.clone());
                }
                return Err(e);
            }
        };
        self.opens.fetch_add(1, Ordering::Relaxed);
        *lock(&slot.last) = Some(h.downgrade());
        let mut st = self.lock();
        st.open.put(idx, h.clone());
        self.evict(&mut st);
        Ok(h)
    }

    fn open_file(&self, idx: FileIdx, path: &Path, cache_file: u64) -> Result<Arc<File>> {
        if let Some(origin) = &self.origin {
            let p = path.to_string_lossy();
            let source = origin.open(&p).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::NotFound(format!("file {}", origin.url(&p))),
                _ => Error::Open {
                    what: "HDF5 file",
                    source: std::sync::Arc::new(e),
                },
            })?;
            return File::open_source_member(
                source,
                path,
                self.me.clone(),
                idx,
                self.cache.clone(),
                cache_file,
            );
        }
        File::open_member(path, self.me.clone(), idx, self.cache.clone(), cache_file)
    }

    /// The origin of a remote mount's files.
    pub fn origin(&self) -> Option<&Arc<dyn Opener>> {
        self.origin.as_ref()
    }

    /// The HDF5 file `idx`, opened (again) if it is not open.
    pub fn get(&self, idx: FileIdx) -> Result<Arc<File>> {
        match self.handle(idx)? {
            Handle::Hdf5(f) => Ok(f),
            Handle::Raw(_) => Err(Error::Invalid(format!("file #{idx} is not HDF5"))),
        }
    }
}

/// The object at `path` of a resolver's origin (paths there have no symlinks: the folded
/// path is the canonical one).
fn object_of_origin(path: &Path) -> Located {
    let path = fold(&Path::new("/").join(path));
    Located {
        canonical: path.clone(),
        path,
    }
}

impl RawOpener for Resolver {
    fn check(&self, dir: &Path, name: &str) -> Result<PathBuf> {
        match self.locate(dir, name, "external storage file") {
            Ok(loc) => Ok(loc.path),
            // A missing file fails only the reads that touch it (as libhdf5 does).
            Err(Error::NotFound(_)) => Ok(absolute(&dir.join(name))),
            Err(e) => Err(e),
        }
    }

    fn open_raw(&self, path: &Path) -> Result<Arc<dyn ByteSource>> {
        let known = self
            .lock()
            .by_path
            .get(&(Kind::Raw, path.to_path_buf()))
            .copied();
        let idx = match known {
            Some(idx) => idx,
            // A path `check` (or a listing) gave: an object of the origin.
            None if self.origin.is_some() => self.register(Kind::Raw, &object_of_origin(path)),
            None => {
                let loc = self.locate(
                    Path::new("/"),
                    &path.to_string_lossy(),
                    "external storage file",
                )?;
                self.register(Kind::Raw, &loc)
            }
        };
        match self.handle(idx)? {
            Handle::Raw(f) => Ok(f),
            Handle::Hdf5(_) => Err(Error::Invalid(format!("{} is HDF5", path.display()))),
        }
    }
}

/// Options for [`File::open`]: a resolver rooted at the file's directory.
pub(super) fn standalone(path: &Path, options: &OpenOptions) -> ResolverOptions {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    ResolverOptions {
        root: options.root.clone().unwrap_or_else(|| dir.to_path_buf()),
        allow_outside_paths: options.allow_outside_paths,
        max_open_files: options.max_open_files,
        cache_bytes: options.cache_bytes,
        origin: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The objects of a pretend server, from memory.
    #[derive(Debug)]
    struct MemOrigin(HashMap<String, Arc<[u8]>>);

    impl Opener for MemOrigin {
        fn open(&self, path: &str) -> std::io::Result<Arc<dyn ByteSource>> {
            let b = self.0.get(path).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{path}: no such object"),
                )
            })?;
            Ok(Arc::new(crate::io::Memory::new(b.clone(), path)))
        }

        fn url(&self, path: &str) -> String {
            format!("s3://bucket/{}", path.trim_start_matches('/'))
        }
    }

    #[test]
    fn remote_names_stay_in_the_origin_and_the_mounted_prefix() {
        let sample: Arc<[u8]> =
            std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.h5"))
                .unwrap()
                .into();
        let origin = MemOrigin(HashMap::from([("/d/f.h5".to_string(), sample.clone())]));
        let make = |allow| {
            Resolver::new(ResolverOptions {
                root: PathBuf::from("/d"),
                allow_outside_paths: allow,
                max_open_files: 4,
                cache_bytes: 1 << 20,
                origin: Some(Arc::new(MemOrigin(origin.0.clone()))),
            })
        };
        let r = make(false);
        let dir = Path::new("/d");
        let at = |r: &Resolver, name: &str| r.locate(dir, name, "external link").map(|l| l.path);
        assert_eq!(at(&r, "x.h5").unwrap(), Path::new("/d/x.h5"));
        assert_eq!(at(&r, "./sub/../y.h5").unwrap(), Path::new("/d/y.h5"));
        assert_eq!(at(&r, "s3://bucket/d/z.h5").unwrap(), Path::new("/d/z.h5"));
        for refused in [
            "../e/x.h5",
            "/d/x.h5",
            "/etc/passwd",
            "s3://other/d/x.h5",
            "s3://bucket/e/x.h5",
        ] {
            let e = at(&r, refused).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{refused}: {e}");
        }
        let open = make(true);
        assert_eq!(at(&open, "../e/x.h5").unwrap(), Path::new("/e/x.h5"));
        assert!(
            at(&open, "/e/x.h5").is_err(),
            "a local path, even when allowed"
        );
        // Files open through the origin; a missing one fails its own use only.
        let idx = r.register_path(Path::new("/d/f.h5")).unwrap();
        let f = r.get(idx).unwrap();
        assert!(!f.links(f.root()).unwrap().is_empty());
        let gone = r.register_path(Path::new("/d/gone.h5")).unwrap();
        assert!(r.get(gone).is_err());
        let raw = r.open_raw(Path::new("/d/f.h5")).unwrap();
        assert_eq!(raw.len(), sample.len() as u64);
    }

    #[test]
    fn fold_removes_dots() {
        assert_eq!(fold(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(fold(Path::new("/a/../../c")), PathBuf::from("/c"));
        assert_eq!(fold(Path::new("a/../../c")), PathBuf::from("../c"));
    }

    fn resolver(root: &Path, allow: bool, max: usize) -> Arc<Resolver> {
        Resolver::new(ResolverOptions {
            root: root.to_path_buf(),
            allow_outside_paths: allow,
            max_open_files: max,
            cache_bytes: 1 << 20,
            origin: None,
        })
    }

    #[test]
    fn one_policy_for_names_symlinks_and_dotdot() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("root");
        let out = top.path().join("out");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(root.join("in.bin"), b"in").unwrap();
        std::fs::write(out.join("x.bin"), b"out").unwrap();
        std::os::unix::fs::symlink(out.join("x.bin"), root.join("link.bin")).unwrap();
        std::os::unix::fs::symlink("../in.bin", root.join("sub/up.bin")).unwrap();
        let r = resolver(&root, false, 4);
        let what = "external link";
        assert!(r.locate(&root, "in.bin", what).is_ok());
        assert!(r.locate(&root.join("sub"), "../in.bin", what).is_ok());
        assert!(r.locate(&root.join("sub"), "up.bin", what).is_ok());
        for (dir, name) in [
            (&root, "link.bin"),
            (&root, "../out/x.bin"),
            (&root, "/etc/passwd"),
        ] {
            let e = r.locate(dir, name, what).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{name}: {e}");
            assert!(e.to_string().contains("allow_external_paths"), "{e}");
        }
        assert!(matches!(
            r.locate(&root, "gone.bin", what),
            Err(Error::NotFound(_))
        ));
        let allowed = resolver(&root, true, 4);
        assert!(allowed.locate(&root, "link.bin", what).is_ok());
        assert!(allowed.locate(&root, "../out/x.bin", what).is_ok());
        // Raw files: the same policy, one descriptor per file, kept in the one LRU.
        let a = r.open_raw(&root.join("in.bin")).unwrap();
        let b = r.open_raw(&root.join("sub/up.bin")).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one file by canonical path");
        assert!(r.open_raw(&root.join("link.bin")).is_err());
    }

    #[test]
    fn the_library_follows_external_links_under_the_policy() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/fixtures/extlinks");
        let f = File::open(&dir.join("main_latest.h5"), &OpenOptions::default()).unwrap();
        let (t, id) = f.follow("/ext_grp/ds").unwrap();
        assert!(t.path().ends_with("sub/a_latest.h5"));
        assert_eq!(t.dataset(id).unwrap().info.shape, vec![100, 50]);
        // A chain through two files, and a path crossing a link in the middle.
        let (c, _) = f.follow("/chain").unwrap();
        assert!(
            c.path().ends_with("sub/b_latest.h5"),
            "{}",
            c.path().display()
        );
        assert!(f.follow("/mid_chain").is_ok());
        assert!(
            f.resolve("/ext_grp/ds").is_err(),
            "resolve stays in the file"
        );
        let e = f.follow("/outside").unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(matches!(f.follow("/missing_file"), Err(Error::NotFound(_))));
        // One resolver: the file reached twice is one open file.
        let (again, _) = f.follow("/ext_ds").unwrap();
        assert!(Arc::ptr_eq(&t, &again));
        let r = f.resolver().unwrap();
        assert!(r.stats().known >= 3);
        let opts = OpenOptions {
            allow_outside_paths: true,
            ..OpenOptions::default()
        };
        let f = File::open(&dir.join("main_latest.h5"), &opts).unwrap();
        // Allowed, it is looked for (the fixture keeps no file there).
        assert!(matches!(f.follow("/outside"), Err(Error::NotFound(_))));
    }

    #[test]
    fn a_file_from_memory_reads_alike_and_follows_no_name() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/fixtures/extlinks");
        let bytes = std::fs::read(dir.join("main_latest.h5")).unwrap();
        let mem = crate::io::Memory::new(bytes, "main in memory");
        let f = File::from_source(Arc::new(mem), &OpenOptions::default()).unwrap();
        let disk = File::open(&dir.join("main_latest.h5"), &OpenOptions::default()).unwrap();
        let read = |f: &File| {
            let d = f.dataset(f.resolve("/local").unwrap()).unwrap();
            crate::io::read_fully(d.len(), "test", |o, b| d.read_at(o, b)).unwrap()
        };
        assert_eq!(read(&f), read(&disk));
        let e = f.follow("/ext_ds").unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(disk.follow("/ext_ds").is_ok());
    }

    #[test]
    fn open_files_stay_within_the_bound_and_reopen() {
        let top = tempfile::tempdir().unwrap();
        for k in 0..10 {
            std::fs::write(top.path().join(format!("f{k}")), [k as u8; 4]).unwrap();
        }
        let r = resolver(top.path(), false, 3);
        for round in 0..3 {
            for k in 0..10 {
                let f = r.open_raw(&top.path().join(format!("f{k}"))).unwrap();
                let mut b = [0u8; 1];
                f.read_at(0, &mut b).unwrap();
                assert_eq!(b[0], k as u8, "round {round}");
                drop(f);
                assert!(r.stats().open <= 3);
            }
        }
        let s = r.stats();
        assert_eq!(s.known, 10);
        assert_eq!(s.opens, 30, "each evicted file is reopened on demand");
        assert_eq!(s.evictions, 27);
    }
}
