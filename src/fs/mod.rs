//! The filesystem: fuser-free operations over the model, and the thin FUSE adapter.
//!
//! [`H5Fs`] implements every operation as a plain method that takes inode numbers and returns
//! small result structs or an [`FsError`]; [`fuse`] converts kernel requests to these calls and
//! the results to replies, and is the only code that names fuser. Groups are directories,
//! datasets regular files whose bytes are the dataset's image, committed datatypes empty
//! files, soft links symlinks; an external link shows the object it leads to (a dangling
//! symlink naming it when it cannot be followed, see `external`). A mounted directory shows
//! its HDF5 files as directories and passes its other files through ([`hostdir`]). Every file
//! other than the mounted one is found by the mount's resolver (`model::resolver`). The
//! mount is read-only: every mutating operation answers `EROFS`. With `--zarr` the tree is a
//! Zarr store instead ([`zarr`]).
//!
//! The inodes the kernel holds are counted ([`inode`]): a lookup's answer and each
//! `readdirplus` entry count one, and the kernel's `forget` ([`H5Fs::forget`]) gives them
//! back; an inode forgotten is dropped with what was kept for it (its listing, its view set),
//! so the daemon's memory follows what the kernel holds, not what a walk has seen. The file
//! is taken not to change while mounted, unless the mount re-reads it (`--refresh`, see
//! [`refresh`]): listings are kept while there is room ([`listings`]), attributes are
//! computed from the model's caches at each `getattr` (which the kernel seldom sends: it
//! caches them for [`H5Fs::ttl`]), and with refresh on, the attributes shown are kept per
//! known inode, for the refresh to compare. Failures are logged once per object path.

pub mod attr;
#[cfg(feature = "bench-ceiling")]
mod ceiling;
pub mod dir;
mod entries;
pub mod error;
mod external;
pub mod fuse;
mod fusermount;
pub mod gate;
pub mod hostdir;
pub mod inode;
pub mod listings;
pub mod name;
pub mod prefetch;
mod quick;
pub mod read;
pub mod refresh;
pub mod siblings;
pub mod stats;
pub mod views;
pub mod xattr;
pub mod zarr;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

pub use attr::{Attr, FileKind};
pub use dir::{DirEntry, Listing, Origin};
pub use entries::Found;
pub use error::{FsError, FsResult};
pub use inode::{Node, NodeKind, ROOT_INO};
use refresh::Retry;
pub use xattr::XattrReply;

use crate::io::ReadCtx;
use crate::model::{Dataset, File, FileIdx, ObjectId, ObjectKind, Resolver};
use crate::sync::{self, lock};
use crate::views::ViewOptions;

/// How the mounted tree presents itself (owner, fallback times).
#[derive(Clone, Debug)]
pub struct FsOptions {
    /// Owner of every inode.
    pub uid: u32,
    pub gid: u32,
    /// Time shown for objects without a stored modification time (the HDF5 file's mtime).
    pub file_mtime: SystemTime,
    /// Size of the HDF5 file, reported by `statfs`.
    pub file_size: u64,
    /// Which views to serve (see [`views`]); text for variable-length data is always on.
    pub views: ViewOptions,
    /// How often the file is checked for changes ([`refresh`]); `None`: never.
    pub refresh: Option<Duration>,
    /// Serve the tree as a Zarr store ([`zarr`]); `None`: the plain tree. The Zarr tree
    /// takes the file not to change (no refresh) and shows no views.
    pub zarr: Option<crate::views::zarr::ZarrOptions>,
}

/// Distinct failures remembered for log-once, the most recent kept: a failure forgotten
/// (more than this many others came after it) is logged again when it recurs, so the log
/// grows with the distinct failures a mount meets, never with the reads that repeat them.
const MAX_LOGGED: usize = 100_000;

/// What `statfs` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub blocks: u64,
    pub files: u64,
    pub bsize: u32,
    pub namelen: u32,
}

/// What is mounted.
#[derive(Debug)]
enum Mounted {
    /// One HDF5 file, file `idx` of the resolver; `held` keeps the file served now alive.
    File {
        idx: FileIdx,
        held: RwLock<Arc<File>>,
    },
    /// A directory (absolute, folded): see [`hostdir`].
    Dir { root: PathBuf },
}

/// Groups in the root that [`H5Fs::warm_up`] reads, at most (each on a thread of its own
/// while it waits for its round trips).
pub const WARM_GROUPS: usize = 16;
/// Headers of a group's children that [`H5Fs::warm_up`] reads, at most: on a store that
/// answers one range per GET, each may cost a request nobody asked for.
pub const WARM_CHILDREN: usize = 256;

/// The mounted file or directory.
#[derive(Debug)]
pub struct H5Fs {
    /// Every HDF5 and raw file the mount opens (see `model::resolver`).
    resolver: Arc<Resolver>,
    mounted: Mounted,
    opts: FsOptions,
    inodes: inode::InodeTable,
    listings: listings::Listings,
    /// With refresh on: the attributes shown of each known inode, which a refresh compares
    /// with the new file's.
    shown: Mutex<HashMap<u64, Attr>>,
    /// Failed reads ask the refresh thread for a check here ([`refresh`]).
    wakeup: refresh::Wakeup,
    logged: Mutex<lru::LruCache<String, ()>>,
    /// Open-file streams and the decode-ahead workers.
    prefetch: prefetch::Prefetcher,
    /// Readahead by listing order: fetching (remote sources) and decoding the datasets after
    /// the reader's.
    siblings: siblings::Siblings,
    /// Open handles of datasets read as they are (no view): what their reads need, resolved
    /// once at open (see [`Handle`]).
    handles: RwLock<HashMap<u64, Arc<Handle>>>,
    views: views::Views,
    /// Request counters, served as [`stats::STATS_XATTR`].
    stats: stats::Stats,
    /// The Zarr tree, when the mount serves one.
    zarr: Option<zarr::ZarrFs>,
    /// Directory mounts: the state of each host directory when its listing was built (a
    /// refresh rebuilds listings whose directory changed).
    host_stamps: Mutex<HashMap<u64, refresh::Stamp>>,
    /// The mount reads from a remote source (fixed for its life; see `quick`).
    remote: bool,
}

/// An open file handle of a dataset served as its raw bytes: the dataset and its stream,
/// found once at open, so a read that hits the chunk cache takes no lock of the inode or
/// file tables (only this table's shared lock, its own stream's and the cache's). Not used
/// with refresh on, where the file under a handle may be replaced.
#[derive(Debug)]
struct Handle {
    ds: Arc<Dataset>,
    /// The dataset's path, for messages.
    path: String,
    stream: Option<Mutex<prefetch::Stream>>,
}

/// Debug builds only: a read of the object at the HDF5 path named by this environment
/// variable panics, so the mount tests can check that a panicking request is contained (no
/// natural panic is known to trigger).
#[cfg(debug_assertions)]
pub const TEST_PANIC_ENV: &str = "H5MOUNT_TEST_PANIC_PATH";

/// Access-mode bits of `access(2)`.
const W_OK: i32 = 2;
const X_OK: i32 = 1;

impl H5Fs {
    /// The filesystem of the mounted file `file`; the other files it names are found by its
    /// resolver.
    pub fn new(file: Arc<File>, opts: FsOptions) -> H5Fs {
        let resolver = file
            .resolver()
            .expect("a file being mounted has its resolver");
        let inodes = inode::InodeTable::new(file.idx(), file.root());
        let mounted = Mounted::File {
            idx: file.idx(),
            held: RwLock::new(file),
        };
        H5Fs::with(resolver, mounted, inodes, opts)
    }

    /// The filesystem of the mounted directory `resolver.root()` (see [`hostdir`]).
    pub fn for_directory(resolver: Arc<Resolver>, opts: FsOptions) -> H5Fs {
        let root = resolver.root().to_path_buf();
        let inodes = inode::InodeTable::for_directory();
        H5Fs::with(resolver, Mounted::Dir { root }, inodes, opts)
    }

    fn with(
        resolver: Arc<Resolver>,
        mounted: Mounted,
        inodes: inode::InodeTable,
        opts: FsOptions,
    ) -> H5Fs {
        let prefetch = prefetch::Prefetcher::new(resolver.chunk_cache().capacity());
        let views = views::Views::new(opts.views);
        let zarr = opts.zarr.map(zarr::ZarrFs::new);
        let remote = resolver.origin().is_some()
            || matches!(&mounted, Mounted::File { held, .. }
                if sync::read(held).storage().wants_hints());
        if zarr.is_some() {
            // Its own tables hold numbers of the inode table.
            inodes.keep_all();
        }
        H5Fs {
            siblings: siblings::Siblings::with_decoder(prefetch.workers()),
            prefetch,
            handles: RwLock::new(HashMap::new()),
            resolver,
            mounted,
            opts,
            inodes,
            listings: listings::Listings::new(),
            shown: Mutex::new(HashMap::new()),
            wakeup: refresh::Wakeup::default(),
            logged: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(MAX_LOGGED).unwrap_or(std::num::NonZeroUsize::MIN),
            )),
            views,
            stats: stats::Stats::default(),
            host_stamps: Mutex::new(HashMap::new()),
            remote,
            zarr,
        }
    }

    /// The resolver of the mount's files.
    pub fn resolver(&self) -> &Arc<Resolver> {
        &self.resolver
    }

    /// The mounted file (`None` for a directory mount).
    pub fn main_file(&self) -> Option<Arc<File>> {
        match &self.mounted {
            Mounted::File { held, .. } => Some(sync::read(held).clone()),
            Mounted::Dir { .. } => None,
        }
    }

    /// How long the kernel may cache entries and attributes: as long as practical, as the
    /// file is immutable while mounted, or no longer than the refresh period.
    pub fn ttl(&self) -> Duration {
        let long = Duration::from_secs(3600);
        self.opts.refresh.map_or(long, |p| p.min(long))
    }

    fn node(&self, ino: u64) -> FsResult<Arc<Node>> {
        self.inodes.get(ino).ok_or(FsError::Errno(libc::ENOENT))
    }

    /// The object `node` stands for (the root group, for an HDF5 file of a mounted
    /// directory: opening the file).
    fn object(&self, node: &Node) -> FsResult<ObjectId> {
        match &node.kind {
            NodeKind::Object(id) => Ok(*id),
            NodeKind::FileRoot { .. } => Ok(self.file_of(node)?.root()),
            _ => Err(FsError::Errno(libc::EINVAL)),
        }
    }

    /// The file `node` lives in.
    fn file_of(&self, node: &Node) -> FsResult<Arc<File>> {
        if let Mounted::File { idx, held } = &self.mounted {
            if node.file == *idx {
                // The mounted file, on every read: no lock shared with other files' lookups.
                return Ok(sync::read(held).clone());
            }
        }
        self.resolver
            .get(node.file)
            .map_err(|e| FsError::model(&node.path, e))
    }

    /// The dataset `id` of the file `node` lives in (errors name the node's path).
    fn dataset_of(&self, node: &Node, id: ObjectId) -> FsResult<Arc<crate::model::Dataset>> {
        self.file_of(node)?
            .dataset(id)
            .map_err(|e| FsError::model(&node.path, e))
    }

    fn kind(&self, node: &Node, id: ObjectId) -> FsResult<ObjectKind> {
        self.file_of(node)?
            .kind(id)
            .map_err(|e| FsError::model(&node.path, e))
    }

    /// Log `msg` about `path` unless the same key was logged before.
    pub fn log_once(&self, key: &str, msg: impl FnOnce() -> String) {
        let mut logged = lock(&self.logged);
        if logged.put(key.to_string(), ()).is_none() {
            log::warn!("{}", msg());
        }
    }

    /// Log a failed operation once per object (filesystem-decided errors are not logged).
    pub fn log_error(&self, op: &str, err: &FsError) {
        if let FsError::Model { path, error } = err {
            self.log_once(path, || {
                format!("{op} {path}: {error} (errno {})", err.errno())
            });
        }
    }

    /// Attributes of `ino` (with refresh on, tried again in a new view if they fail).
    pub fn getattr(&self, ino: u64) -> FsResult<Attr> {
        self.retry_after_refresh(Retry::InNewView, || {
            self.getattr_once(ino, Retry::InNewView)
        })
    }

    /// [`H5Fs::getattr`] tried once; `retry`: whether a dataset's size that fails is tried
    /// again in a new view.
    fn getattr_once(&self, ino: u64, retry: Retry) -> FsResult<Attr> {
        if let Some(z) = self.zarr().filter(|_| zarr::is_zarr_ino(ino)) {
            return self.zarr_getattr(z, ino);
        }
        if views::is_sidecar(ino) {
            return self.sidecar_getattr(ino);
        }
        let node = self.node(ino)?;
        self.attr_of_with(&node, retry)
    }

    /// Attributes of `node` (known, or about to be handed out): from the model's caches; with
    /// refresh on, the ones shown first, until the next refresh (see [`refresh`]).
    pub(super) fn attr_of(&self, node: &Node) -> FsResult<Attr> {
        self.attr_of_with(node, Retry::InNewView)
    }

    /// [`H5Fs::attr_of`]; `retry`: whether a dataset's size that fails is tried again in a
    /// new view.
    fn attr_of_with(&self, node: &Node, retry: Retry) -> FsResult<Attr> {
        let refresh = self.opts.refresh.is_some();
        // A refresh moves the generation on before it drops the attributes shown: ones
        // computed from the file before it are not kept.
        let gen = self.listings.gen();
        if refresh {
            if let Some(a) = lock(&self.shown).get(&node.ino) {
                return Ok(*a);
            }
        }
        let ino = node.ino;
        let owner = (self.opts.uid, self.opts.gid);
        let attr = match &node.kind {
            NodeKind::HostDir { .. } | NodeKind::HostFile { .. } | NodeKind::FileRoot { .. } => {
                self.host_attr(node)?
            }
            NodeKind::Symlink { target } => Attr::new(
                ino,
                FileKind::Symlink,
                target.len() as u64,
                owner,
                self.opts.file_mtime,
            ),
            NodeKind::Object(id) => {
                let id = *id;
                let kind = self.kind(node, id)?;
                let (fkind, size) = match kind {
                    ObjectKind::Group => (FileKind::Directory, 0),
                    // Retried in a new view before the size falls back to 0.
                    ObjectKind::Dataset => match self.retry_after_refresh(retry, || {
                        self.dataset_of(node, id)
                            .and_then(|ds| self.served_len(node, &ds))
                    }) {
                        Ok(len) => {
                            if len > attr::MAX_SIZE {
                                let path = &node.path;
                                self.log_once(path, || {
                                    format!(
                                        "{path}: {len} bytes, more than a file can show: its \
                                         size shows as {}, and the bytes past that cannot be \
                                         read",
                                        attr::MAX_SIZE
                                    )
                                });
                            }
                            (FileKind::RegularFile, len)
                        }
                        Err(e) => {
                            self.log_error("getattr", &e);
                            (FileKind::RegularFile, 0)
                        }
                    },
                    ObjectKind::NamedDatatype | ObjectKind::Unknown => (FileKind::RegularFile, 0),
                };
                let file = self.file_of(node)?;
                let mtime = match file.mtime(id) {
                    Ok(Some(secs)) => SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
                    _ => self.opts.file_mtime,
                };
                let mut a = Attr::new(ino, fkind, size, owner, mtime);
                a.nlink = file.refcount(id).unwrap_or(1).max(1);
                a
            }
        };
        if refresh {
            let mut shown = lock(&self.shown);
            if self.listings.gen() == gen {
                return Ok(*shown.entry(ino).or_insert(attr));
            }
        }
        Ok(attr)
    }

    /// Attributes shown for a listed entry whose real attributes cannot be computed.
    pub fn placeholder_attr(&self, e: &DirEntry) -> Attr {
        let owner = (self.opts.uid, self.opts.gid);
        Attr::new(e.ino, e.kind, 0, owner, self.opts.file_mtime)
    }

    /// Build the root directory's listing now, and fetch the links of up to [`WARM_GROUPS`]
    /// of the groups in it and the headers of up to [`WARM_CHILDREN`] of their children,
    /// several groups at once (on a
    /// remote source the headers of a group's children come together, in one round trip),
    /// so that the first `ls`, `find` or open near the root finds them fetched instead of
    /// paying their round trips one after another. Only the root's listing is built (its
    /// entries are the mount's first; the groups below are read in the model only): which
    /// path of a group with several names is its directory still follows the order in
    /// which the user reaches them, as on a mount without warm-up once its root is listed.
    /// Then the source learns what its readers' first requests would otherwise learn on
    /// their way ([`crate::io::RemoteSource::warm_up`]: whether an HTTP server answers GETs of
    /// several ranges). The daemon runs it once a remote mount is ready (`--no-warm-up` not
    /// to). Its progress shows in the statistics (`remote_warm_up`: 2 once all it reads is
    /// read); a failure is left to the read that needs it.
    pub fn warm_up(&self) {
        self.stats.set_warm_up(1);
        // A panic on a damaged file ends the warm-up, not the mount, and it still says done.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.warm_up_now()));
        self.stats.set_warm_up(2);
    }

    fn warm_up_now(&self) {
        // Not the background crawl of the root's groups as well: they are read here (the
        // first ones; the others crawled as the listing would).
        match self.listing_with(inode::ROOT_INO, false) {
            Ok(root) => {
                let root_node = self.node(inode::ROOT_INO);
                let groups: Vec<(Arc<File>, ObjectId)> = (2..root.entries.len())
                    .filter(|&i| root.entries[i].kind == FileKind::Directory)
                    .filter_map(|i| {
                        let found = self.entry_found(root_node.as_ref().ok()?, &root, i).ok()?;
                        let Found::Node(node) = found else {
                            return None;
                        };
                        match node.kind {
                            NodeKind::Object(id) => Some((self.file_of(&node).ok()?, id)),
                            _ => None,
                        }
                    })
                    .collect();
                let (now, later) = groups.split_at(groups.len().min(WARM_GROUPS));
                std::thread::scope(|s| {
                    for (file, id) in now {
                        s.spawn(move || file.warm_group(*id, WARM_CHILDREN));
                    }
                });
                // The others as a listing of the root would: crawled in the background.
                if let Some((file, _)) = later.first() {
                    let ids = later
                        .iter()
                        .filter(|(f, _)| Arc::ptr_eq(f, file))
                        .map(|(_, id)| *id)
                        .collect();
                    file.prefetch_groups(ids);
                }
            }
            Err(e) => log::debug!("warm-up: the root listing failed: {e:?}"),
        }
        // What the source learns on its first requests (whether an HTTP server answers
        // GETs of several ranges), learnt now rather than on a reader's first requests.
        if let Mounted::File { held, .. } = &self.mounted {
            let file = sync::read(held).clone();
            file.storage().warm_up();
        }
    }

    /// Check that `ino` is a directory that can be listed.
    pub fn opendir(&self, ino: u64) -> FsResult<()> {
        self.listing(ino).map(|_| ())
    }

    /// Open `ino` for reading; any write intent is `EROFS`.
    pub fn open(&self, ino: u64, flags: i32) -> FsResult<()> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(FsError::Errno(libc::EROFS));
        }
        if let Some(z) = self.zarr().filter(|_| zarr::is_zarr_ino(ino)) {
            return self.zarr_open(z, ino);
        }
        if views::is_sidecar(ino) {
            return self.sidecar_open(ino);
        }
        let node = self.node(ino)?;
        match node.kind {
            NodeKind::HostFile { .. } => return Ok(()),
            NodeKind::HostDir { .. } => return Err(FsError::Errno(libc::EISDIR)),
            _ => {}
        }
        let id = self.object(&node)?;
        match self.kind(&node, id)? {
            ObjectKind::Group => Err(FsError::Errno(libc::EISDIR)),
            ObjectKind::Dataset => {
                let ds = self.dataset_of(&node, id)?;
                self.open_dataset(&node, &ds)
            }
            ObjectKind::NamedDatatype | ObjectKind::Unknown => Ok(()),
        }
    }

    /// Open `ino` for reading as [`H5Fs::open`] does; returns a file handle whose sequential
    /// reads ([`H5Fs::read_handle`]) decode ahead. Release it with [`H5Fs::release`].
    pub fn open_handle(&self, ino: u64, flags: i32) -> FsResult<u64> {
        self.open(ino, flags)?;
        // Zarr documents and keys are served from their own caches, with no handle.
        if views::is_sidecar(ino) || (self.zarr.is_some() && zarr::is_zarr_ino(ino)) {
            return Ok(0);
        }
        let node = self.node(ino)?;
        if matches!(node.kind, NodeKind::HostFile { .. }) {
            return Ok(0);
        }
        let id = self.object(&node)?;
        if self.kind(&node, id)? != ObjectKind::Dataset {
            return Ok(0);
        }
        let ds = self.dataset_of(&node, id)?;
        let fh = if self.opts.refresh.is_some() || self.has_primary_view(&node, &ds) {
            self.prefetch.open(&ds)
        } else {
            let fh = self.prefetch.new_handle();
            let handle = Handle {
                stream: self.prefetch.stream_for(&ds).map(Mutex::new),
                ds,
                path: node.path.clone(),
            };
            crate::sync::write(&self.handles).insert(fh, Arc::new(handle));
            fh
        };
        if let Ok(file) = self.file_of(&node) {
            if let Some(place) = self.place_of(&node, &file) {
                self.siblings.on_open(&file, place, fh);
            }
        }
        Ok(fh)
    }

    /// A descriptor of handle `fh` was closed (a FUSE flush: sent while `close` waits, unlike
    /// the release that may come later).
    pub fn flush(&self, fh: u64) {
        self.siblings.on_close(fh);
    }

    /// Where the object of `node` is in the listing of its directory, a group of `file`
    /// (see [`siblings::Place`]); `None` when that is not known (a node first found at
    /// another path, a directory of another file, a group whose links are no longer cached:
    /// an open never reads a listing for this).
    fn place_of(&self, node: &Node, file: &File) -> Option<siblings::Place> {
        let parent = self.node(node.parent).ok()?;
        if parent.file != node.file {
            return None;
        }
        let group = parent.object()?;
        let (index, count) = cached_position(file, group, &node.path)?;
        let grand = match parent.parent == parent.ino {
            true => None,
            false => self
                .node(parent.parent)
                .ok()
                .filter(|g| g.file == node.file)
                .and_then(|g| g.object()),
        };
        // The group's own place among its parent's links.
        let parent_place = grand.and_then(|g| Some((g, cached_position(file, g, &parent.path)?.0)));
        Some(siblings::Place {
            group,
            index,
            count,
            parent: parent_place,
        })
    }

    /// Forget file handle `fh`.
    pub fn release(&self, fh: u64) {
        crate::sync::write(&self.handles).remove(&fh);
        self.prefetch.release(fh);
        self.siblings.on_close(fh);
    }

    /// Read `size` bytes at `offset` of `ino`.
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let mut out = Vec::new();
        let answer = self.read_handle(ReadCtx::default(), ino, 0, offset, size, &mut out)?;
        Ok(match answer {
            read::Answer::Buffer => out,
            shared => shared.bytes(&[]).to_vec(),
        })
    }

    /// Read `size` bytes at `offset` of `ino` through handle `fh` into `out` (resized to the
    /// bytes read; a reused buffer keeps its pages, so a request costs no allocation), or
    /// answer with a run of a cached chunk, leaving `out` alone. With refresh on, a read that
    /// fails is tried again if a new view of the file came meanwhile. `ctx`: for whom.
    pub fn read_handle(
        &self,
        ctx: ReadCtx,
        ino: u64,
        fh: u64,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<read::Answer> {
        let r = self.retry_after_refresh(Retry::InNewView, || {
            self.read_handle_once(ctx, ino, fh, offset, size, out)
        });
        let answered = r.as_ref().map_or(0, |a| a.bytes(out).len());
        self.stats.on_read(size, answered);
        r
    }

    fn read_handle_once(
        &self,
        ctx: ReadCtx,
        ino: u64,
        fh: u64,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<read::Answer> {
        if let Some(z) = self.zarr().filter(|_| zarr::is_zarr_ino(ino)) {
            *out = self.zarr_read(z, ctx, ino, offset, size)?;
            return Ok(read::Answer::Buffer);
        }
        if fh != 0 {
            let handle = crate::sync::read(&self.handles).get(&fh).cloned();
            if let Some(h) = handle {
                #[cfg(debug_assertions)]
                if std::env::var_os(TEST_PANIC_ENV).is_some_and(|p| p == h.path.as_str()) {
                    panic!("test panic reading {}", h.path);
                }
                if let Some(stream) = &h.stream {
                    self.prefetch
                        .on_read_stream(ctx, stream, &h.ds, offset, u64::from(size));
                }
                return read::read_answer(ctx, &h.ds, offset, size, out)
                    .map_err(|e| FsError::model(&h.path, e));
            }
        }
        if views::is_sidecar(ino) {
            *out = self.sidecar_read(ctx, ino, offset, size)?;
            return Ok(read::Answer::Buffer);
        }
        let node = self.node(ino)?;
        #[cfg(debug_assertions)]
        if std::env::var_os(TEST_PANIC_ENV).is_some_and(|p| p == node.path.as_str()) {
            panic!("test panic reading {}", node.path);
        }
        match &node.kind {
            NodeKind::HostFile { rel } => {
                self.host_read(&node, rel, offset, size, out)?;
                return Ok(read::Answer::Buffer);
            }
            NodeKind::HostDir { .. } => return Err(FsError::Errno(libc::EISDIR)),
            _ => {}
        }
        let id = self.object(&node)?;
        match self.kind(&node, id)? {
            ObjectKind::Group => Err(FsError::Errno(libc::EISDIR)),
            ObjectKind::Dataset => {
                let ds = self.dataset_of(&node, id)?;
                if self.has_primary_view(&node, &ds) {
                    // A view (byte order, text) replaces the raw bytes.
                    *out = self.read_dataset(ctx, &node, &ds, offset, size)?;
                    return Ok(read::Answer::Buffer);
                }
                self.prefetch.on_read(ctx, fh, &ds, offset, u64::from(size));
                read::read_answer(ctx, &ds, offset, size, out)
                    .map_err(|e| FsError::model(&node.path, e))
            }
            ObjectKind::NamedDatatype | ObjectKind::Unknown => {
                out.clear();
                Ok(read::Answer::Buffer)
            }
        }
    }

    /// The text of symlink `ino`.
    pub fn readlink(&self, ino: u64) -> FsResult<Vec<u8>> {
        if views::is_sidecar(ino) {
            return Err(FsError::Errno(libc::EINVAL));
        }
        match &self.node(ino)?.kind {
            NodeKind::Symlink { target } => Ok(target.as_bytes().to_vec()),
            _ => Err(FsError::Errno(libc::EINVAL)),
        }
    }

    /// All `user.*` xattrs of `ino`, computed on demand. An HDF5 attribute that cannot be
    /// read is refused alone: left out of the names (logged once), its own `getxattr` an
    /// error, the others shown.
    fn xattrs(&self, node: &Node) -> FsResult<Xattrs> {
        let id = match node.kind {
            NodeKind::Object(id) => id,
            NodeKind::FileRoot { .. } => self.object(node)?,
            _ => return Ok(Xattrs::default()),
        };
        let mut out = Vec::new();
        let mut refused = Vec::new();
        match self.kind(node, id)? {
            ObjectKind::Dataset => {
                let ds = self.dataset_of(node, id)?;
                for (k, v) in xattr::dataset_xattrs(&ds.info) {
                    out.push((k, v.into_bytes()));
                }
            }
            ObjectKind::NamedDatatype => {
                // A committed datatype is an empty file described by its type.
                let t = self
                    .file_of(node)?
                    .named_datatype(id)
                    .map_err(|e| FsError::model(&node.path, e))?;
                out.push((
                    format!("{}h5.dtype", xattr::USER),
                    t.numpy_str().into_bytes(),
                ));
            }
            _ => {}
        }
        let attrs = self
            .file_of(node)?
            .attribute_results(id)
            .map_err(|e| FsError::model(&node.path, e))?;
        for a in attrs {
            // A name an xattr cannot carry is passed over whether its value reads or not.
            let name = match &a {
                Ok(a) => &a.name,
                Err(r) => &r.name,
            };
            let key = format!("{}@{}", node.path, name);
            if !xattr::attr_visible(name) {
                self.log_once(&key, || {
                    format!(
                        "attribute {:?} of {} not shown as an xattr",
                        name, node.path
                    )
                });
                continue;
            }
            match a {
                Ok(a) => out.push((
                    format!("{}{}", xattr::USER, a.name),
                    a.render().into_bytes(),
                )),
                Err(r) => {
                    self.log_once(&key, || {
                        format!(
                            "attribute {:?} of {} not shown: {}",
                            r.name, node.path, r.error
                        )
                    });
                    let name = format!("{}{}", xattr::USER, r.name);
                    refused.push((name, FsError::model(&node.path, r.error)));
                }
            }
        }
        Ok(Xattrs {
            shown: out,
            refused,
        })
    }

    /// `getxattr`: the value of `name` (size query when `size` is 0); on the root,
    /// [`stats::STATS_XATTR`] is the mount's statistics, whatever the root group holds.
    pub fn getxattr(&self, ino: u64, name: &OsStr, size: u32) -> FsResult<XattrReply> {
        if xattr::unsupported(name) {
            // No security labels or ACLs here (see `xattr`): `ls -l` then stops asking.
            return Err(FsError::Errno(libc::EOPNOTSUPP));
        }
        let zarr = self.zarr().filter(|_| zarr::is_zarr_ino(ino));
        if views::is_sidecar(ino) && zarr.is_none() {
            return Err(FsError::Errno(libc::ENODATA));
        }
        let node = match zarr {
            Some(_) => None,
            None => Some(self.node(ino)?),
        };
        let nodata = FsError::Errno(libc::ENODATA);
        // `ls -l` asks for security and ACL attributes of every file: answer without
        // touching the file.
        let name = name.to_str().ok_or(FsError::Errno(libc::ENODATA))?;
        if !name.starts_with(xattr::USER) {
            return Err(nodata);
        }
        if ino == ROOT_INO && name == stats::STATS_XATTR {
            // Fits in u32: a few hundred bytes.
            if size == 0 {
                return Ok(XattrReply::Size(stats::max_text_len() as u32));
            }
            return xattr::reply(self.stats_text().into_bytes(), size);
        }
        let mut all = match (zarr, node) {
            (Some(z), _) => self.zarr_xattrs(z, ino)?,
            (None, Some(node)) => self.xattrs(&node)?,
            (None, None) => return Err(FsError::Errno(libc::ENOENT)),
        };
        if let Some(i) = all.shown.iter().position(|(k, _)| k == name) {
            return xattr::reply(all.shown.swap_remove(i).1, size);
        }
        match all.refused.into_iter().find(|(k, _)| k == name) {
            Some((_, e)) => Err(e),
            None => Err(nodata),
        }
    }

    /// The mount's counters (see [`stats`]); the daemon records its readahead here.
    pub fn stats(&self) -> &stats::Stats {
        &self.stats
    }

    /// The text of [`stats::STATS_XATTR`]: this mount's counters now.
    pub fn stats_text(&self) -> String {
        let cache = self.resolver.chunk_cache().clone();
        let mut prefetch = self.prefetch.stats();
        (prefetch.walk_steps, prefetch.walk_done) = self.siblings.steps();
        self.stats
            .snapshot(
                cache.stats(),
                cache.capacity(),
                prefetch,
                self.resolver.stats(),
                self.resolver.requests().unwrap_or_default(),
                self.known_inodes() as u64,
            )
            .render()
    }

    /// Inodes the kernel holds now, sidecars included (the root counts: it is always known).
    pub fn known_inodes(&self) -> usize {
        self.inodes.len() + self.views.known_count()
    }

    /// `listxattr`: the NUL-separated names (size query when `size` is 0).
    pub fn listxattr(&self, ino: u64, size: u32) -> FsResult<XattrReply> {
        if let Some(z) = self.zarr().filter(|_| zarr::is_zarr_ino(ino)) {
            let all = self.zarr_xattrs(z, ino)?;
            let list = xattr::name_list(all.shown.iter().map(|(k, _)| k.as_str()));
            return xattr::reply(list, size);
        }
        if views::is_sidecar(ino) {
            return xattr::reply(Vec::new(), size);
        }
        let node = self.node(ino)?;
        let all = self.xattrs(&node)?;
        let list = xattr::name_list(all.shown.iter().map(|(k, _)| k.as_str()));
        xattr::reply(list, size)
    }

    /// `access`: consulted only without `default_permissions`; the tree is readable by all
    /// and writable by none.
    pub fn access(&self, ino: u64, mask: i32) -> FsResult<()> {
        let attr = self.getattr(ino)?;
        if mask & W_OK != 0 {
            return Err(FsError::Errno(libc::EROFS));
        }
        if mask & X_OK != 0 && attr.kind == FileKind::RegularFile {
            return Err(FsError::Errno(libc::EACCES));
        }
        Ok(())
    }

    /// `statfs`: the file's size in 4 KiB blocks, nothing free.
    pub fn statfs(&self) -> StatFs {
        StatFs {
            blocks: self.opts.file_size.div_ceil(4096),
            files: self.known_inodes() as u64,
            bsize: 4096,
            namelen: dir::NAME_MAX as u32,
        }
    }
}

/// The xattrs of one object: names and values shown, and the names of HDF5 attributes that
/// could not be read, each with its error.
#[derive(Default)]
struct Xattrs {
    shown: Vec<(String, Vec<u8>)>,
    refused: Vec<(String, FsError)>,
}

/// The index of the last name of `path` among the links of `group` of `file`, and their
/// number, from links already read only (`None` when they are not cached).
fn cached_position(file: &File, group: ObjectId, path: &str) -> Option<(usize, usize)> {
    let links = file.cached_links(group)?;
    let index = links.position(path.rsplit('/').next()?)?;
    Some((index, links.len()))
}
