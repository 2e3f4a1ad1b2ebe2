//! The thin FUSE adapter: kernel requests to [`H5Fs`] calls, results to replies.
//!
//! Each callback converts its arguments, runs one [`H5Fs`] operation inside
//! [`std::panic::catch_unwind`] (a panic answers `EIO` — fuser replies `EIO` for a reply that
//! is dropped unsent — and is logged; the mount lives on) and sends the reply. Failures are
//! logged once per object by [`H5Fs::log_error`]. Mutating operations answer `EROFS`, ioctls
//! `ENOTTY` (without a log line above debug).
//!
//! fuser runs `threads` session loops on cloned `/dev/fuse` descriptors, so requests are
//! served concurrently and a slow chunk decode does not stall other readers. At `init` the
//! kernel is asked for requests of 1 MiB, or up to 4 MiB with `--max-request` where the
//! kernel allows it (its readahead offer, usually 128 KiB, is the ceiling here; the daemon
//! raises the mount's `read_ahead_kb` afterwards) and for `readdirplus`;
//! files are opened with `FOPEN_KEEP_CACHE`, so re-reads and `mmap` are page-cache hits.
//! A walk pays as few round trips as the kernel allows: directories are opened by the kernel
//! alone where it can (`FUSE_NO_OPENDIR_SUPPORT`), their listings are kept in its page cache,
//! entries and attributes come with the listing (`readdirplus`) and live long
//! ([`H5Fs::ttl`]), and `ls -l` learns at its first file that there are no security labels
//! or ACLs to ask for (`super::xattr`).
//! When the file is re-read while mounted (`super::refresh`), a [`Notifier`] tells the kernel
//! which of those cached entries, attributes and pages to drop. The kernel's `forget` (and
//! `batch_forget`, which fuser splits into single forgets) gives back its counts of the inodes
//! handed out, and the core drops what it no longer holds ([`H5Fs::forget`]).
//!
//! Built with the `bench-ceiling` feature (benchmarks only), the adapter also serves the
//! memory-backed file of `fs::ceiling` (feature `bench-ceiling`).

use std::ffi::OsStr;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType,
    Filesystem, FopenFlags, Generation, INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, SessionACL, TimeOrNow, WriteFlags,
};

use super::attr::{Attr, FileKind, BLKSIZE, DIR_BLKSIZE};
use super::error::FsError;
use super::gate::{Gate, Turn};
use super::refresh::Invalidation;
use super::stats::Op;
use super::{H5Fs, XattrReply};

/// Largest request (reads and readahead) every kernel grants: 256 pages, the fixed limit of
/// kernels before 6.13, and the default of the others. Asked for unless told otherwise.
pub const DEFAULT_MAX_REQUEST: u32 = 1 << 20;

/// Largest request that can be asked for (`--max-request`).
pub const LARGEST_REQUEST: u32 = 4 << 20;

/// The kernel's limit on the pages of one FUSE request, where it can be changed (Linux 6.13
/// and later; root can raise it).
pub const MAX_PAGES_LIMIT: &str = "/proc/sys/fs/fuse/max_pages_limit";

/// The largest request the kernel grants, in bytes, given the text of [`MAX_PAGES_LIMIT`]
/// (`None`: no such file, a kernel before 6.13) and the page size: never below
/// [`DEFAULT_MAX_REQUEST`], which every kernel grants.
pub fn granted_request(limit_text: Option<&str>, page: u64) -> u64 {
    limit_text
        .and_then(|t| t.trim().parse::<u64>().ok())
        .and_then(|pages| pages.checked_mul(page))
        .unwrap_or(0)
        .max(u64::from(DEFAULT_MAX_REQUEST))
}

/// The size of a memory page of this machine.
pub fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|p| u64::try_from(p).ok())
        .filter(|&p| p >= 512)
        .unwrap_or(4096)
}

thread_local! {
    /// The buffer each FUSE thread reads answers into (at most `read::MAX_READ` bytes).
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How the filesystem is mounted (a plain mirror of the mount options the daemon accepts).
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Source shown in `/proc/mounts` (the HDF5 file's path by default).
    pub fsname: String,
    /// Type suffix shown as `fuse.<subtype>`.
    pub subtype: String,
    pub allow_other: bool,
    pub allow_root: bool,
    /// Let the kernel check permissions against the modes (on by default).
    pub default_permissions: bool,
    pub auto_unmount: bool,
    /// Worker threads serving requests.
    pub threads: usize,
    /// The largest request to ask the kernel for, in bytes ([`DEFAULT_MAX_REQUEST`] to
    /// [`LARGEST_REQUEST`]; the kernel grants at most its limit, see [`granted_request`]).
    pub max_request: u32,
}

/// A mounted, not yet running session.
pub struct Mounted {
    session: fuser::Session<FuseFs>,
    core: Arc<H5Fs>,
    /// Where it is mounted, when `fusermount3` mounted it (see [`super::fusermount`]): it is
    /// unmounted the same way.
    by_helper: Option<std::path::PathBuf>,
    /// Where it is mounted.
    path: std::path::PathBuf,
}

/// Sends cache invalidations to the kernel for a mounted session (from any thread, never
/// from inside a request handler: the kernel may wait for that request to finish).
#[derive(Clone, Debug)]
pub struct Notifier(fuser::Notifier);

impl Notifier {
    /// Send `invs`; returns the number the kernel refused (an inode or entry it no longer
    /// holds is not an error).
    pub fn send(&self, invs: &[Invalidation]) -> usize {
        let mut failed = 0;
        for inv in invs {
            let r = match inv {
                // A negative offset: attributes only; a length of 0: to the end.
                Invalidation::Inode { ino, from } => {
                    let off = from.map_or(-1, |f| i64::try_from(f).unwrap_or(i64::MAX));
                    self.0.inval_inode(INodeNo(*ino), off, 0)
                }
                Invalidation::Entry { parent, name } => {
                    self.0.inval_entry(INodeNo(*parent), OsStr::new(name))
                }
            };
            if let Err(e) = r {
                log::debug!("invalidation {inv:?}: {e}");
                failed += 1;
            }
        }
        failed
    }
}

/// Unmounts a running session from another thread.
pub enum Unmounter {
    /// Mounted by fuser: by the kernel call itself (as root) or through the helper.
    Direct(std::path::PathBuf),
    /// Mounted through `fusermount3` by h5mount, for a user who cannot open /dev/fuse.
    Helper(std::path::PathBuf),
}

impl Unmounter {
    /// Unmount (the running session then ends).
    pub fn unmount(&mut self) -> io::Result<()> {
        match self {
            Unmounter::Direct(path) => match nix::mount::umount(path.as_path()) {
                Ok(()) => Ok(()),
                // Not root: the helper unmounts what it mounted for this user.
                Err(nix::errno::Errno::EPERM) => super::fusermount::unmount(path, false),
                Err(e) => Err(e.into()),
            },
            Unmounter::Helper(path) => super::fusermount::unmount(path, false),
        }
    }
}

impl Mounted {
    /// A handle that unmounts this session.
    pub fn unmounter(&mut self) -> Unmounter {
        match &self.by_helper {
            Some(path) => Unmounter::Helper(path.clone()),
            None => Unmounter::Direct(self.path.clone()),
        }
    }

    /// True when `fusermount3` mounted it, because this user cannot open `/dev/fuse`.
    pub fn by_helper(&self) -> bool {
        self.by_helper.is_some()
    }

    /// The filesystem being served.
    pub fn fs(&self) -> Arc<H5Fs> {
        self.core.clone()
    }

    /// A handle that sends cache invalidations to the kernel for this session.
    pub fn notifier(&self) -> Notifier {
        Notifier(self.session.notifier())
    }

    /// Serve requests until the filesystem is unmounted.
    ///
    /// A session fuser mounted itself unmounts its mount point when it is dropped, whatever
    /// is mounted there by then: after an unmount from outside (`fusermount3 -u`, `umount`)
    /// that can already be a new mount of the same directory, which it would take down. So
    /// the session runs on its own thread, the background session holding the mount; its
    /// thread is joined and the rest is forgotten rather than dropped (the process exits
    /// next; the kernel has ended the connection already).
    pub fn run(self) -> io::Result<()> {
        if self.by_helper.is_some() {
            // Wrapping a descriptor it did not mount, fuser unmounts nothing.
            return self.session.run();
        }
        let mut bg = self.session.spawn()?;
        let session = std::mem::replace(&mut bg.guard, std::thread::spawn(|| Ok(())));
        std::mem::forget(bg);
        session
            .join()
            .map_err(|_| io::Error::other("the FUSE session thread panicked"))?
    }
}

/// Mount `fs` at `mountpoint` (the kernel handshake is done when this returns).
pub fn mount(fs: H5Fs, mountpoint: &Path, opts: &MountOptions) -> io::Result<Mounted> {
    let mut options = vec![
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::FSName(opts.fsname.clone()),
        // As a kernel option rather than `MountOption::Subtype`: fuser's direct mount (as
        // root) drops `Subtype`, and the kernel takes `subtype=` itself (fstype
        // `fuse.<subtype>` in /proc/mounts); fusermount3 accepts it too.
        MountOption::CUSTOM(format!("subtype={}", opts.subtype)),
    ];
    if opts.default_permissions {
        options.push(MountOption::DefaultPermissions);
    }
    if opts.auto_unmount {
        options.push(MountOption::AutoUnmount);
    }
    let mut config = fuser::Config::default();
    config.mount_options = options;
    config.acl = if opts.allow_other {
        SessionACL::All
    } else if opts.allow_root {
        SessionACL::RootAndOwner
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(opts.threads.max(1));
    config.clone_fd = true;
    let core = Arc::new(fs);
    let adapter = FuseFs {
        core: core.clone(),
        threads: opts.threads.max(1),
        max_request: opts.max_request.clamp(DEFAULT_MAX_REQUEST, LARGEST_REQUEST),
        kernel_opendir: true,
        gate: Gate::new(opts.threads.max(1)),
        #[cfg(feature = "bench-ceiling")]
        ceiling: super::ceiling::Ceiling::from_env(),
    };
    if super::fusermount::device_denied() {
        // The helper's options: what fuser would pass it, plus the access rule.
        let mut helper_opts = vec![
            "ro".to_string(),
            "nodev".into(),
            "nosuid".into(),
            format!("fsname={}", opts.fsname),
            format!("subtype={}", opts.subtype),
        ];
        if opts.default_permissions {
            helper_opts.push("default_permissions".into());
        }
        if opts.allow_other {
            helper_opts.push("allow_other".into());
        } else if opts.allow_root {
            helper_opts.push("allow_root".into());
        }
        let fd = super::fusermount::mount(mountpoint, &helper_opts.join(",")).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "/dev/fuse cannot be opened by this user, and {} could not mount either: \
                     {e}. FUSE needs /dev/fuse readable and writable by the users who mount \
                     (mode 0666, as most systems ship it): ask an administrator, or mount as \
                     root",
                    super::fusermount::HELPER
                ),
            )
        })?;
        log::info!(
            "/dev/fuse cannot be opened by this user: mounted through {}",
            super::fusermount::HELPER
        );
        // A cloned descriptor would be a new open of /dev/fuse, refused the same way: the
        // worker threads share the one the helper sent.
        config.clone_fd = false;
        let acl = config.acl;
        let session = fuser::Session::from_fd(adapter, fd, acl, config)?;
        return Ok(Mounted {
            session,
            core,
            by_helper: Some(mountpoint.to_path_buf()),
            path: mountpoint.to_path_buf(),
        });
    }
    let session = fuser::Session::new(adapter, mountpoint, &config)?;
    Ok(Mounted {
        session,
        core,
        by_helper: None,
        path: mountpoint.to_path_buf(),
    })
}

/// The fuser [`Filesystem`] over [`H5Fs`].
pub struct FuseFs {
    core: Arc<H5Fs>,
    threads: usize,
    /// The largest request asked for at `init`, in bytes.
    max_request: u32,
    /// Directories are opened by the kernel alone (see `init`): `opendir` answers `ENOSYS`.
    kernel_opendir: bool,
    /// Which thread waits for the next request ([`super::gate`]).
    gate: Gate,
    #[cfg(feature = "bench-ceiling")]
    ceiling: Option<super::ceiling::Ceiling>,
}

fn kind(k: FileKind) -> FileType {
    match k {
        FileKind::Directory => FileType::Directory,
        FileKind::RegularFile => FileType::RegularFile,
        FileKind::Symlink => FileType::Symlink,
    }
}

pub(super) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks(),
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: a.mtime,
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        // Directories keep a small block size: readdir(3) sizes its buffer from it, and a
        // 1 MiB buffer per directory read costs the kernel a large allocation each time.
        blksize: if a.kind == FileKind::RegularFile {
            BLKSIZE
        } else {
            DIR_BLKSIZE
        },
        flags: 0,
    }
}

fn errno(e: &FsError) -> Errno {
    Errno::from_i32(e.errno())
}

impl FuseFs {
    /// Run one operation; a panic is logged and (by dropping the unsent reply) answered EIO.
    fn guard(&self, op: &'static str, f: impl FnOnce(&H5Fs)) {
        if catch_unwind(AssertUnwindSafe(|| f(&self.core))).is_err() {
            log::error!("panic in {op}; answered EIO");
        }
    }

    /// Count one request of kind `op` ([`super::stats`]) that is answered from memory, or
    /// may take long (`quick` false); the turn ends once the handler has answered.
    fn enter(&self, op: Op, quick: bool) -> Turn<'_> {
        self.core.stats().on_op(op, 1);
        self.gate.arrive(quick)
    }

    fn fail(core: &H5Fs, op: &str, e: FsError) -> Errno {
        core.log_error(op, &e);
        errno(&e)
    }
}

impl Filesystem for FuseFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let request = self.max_request;
        if let Err(max) = config.set_max_readahead(request) {
            let _ = config.set_max_readahead(max);
        }
        // fuser asks for max(max_write, max_readahead) in pages; the kernel grants at most
        // its limit.
        let _ = config.set_max_write(request);
        log::debug!(
            "asked the kernel for requests of up to {} KiB",
            request >> 10
        );
        let bg = u16::try_from(self.threads.saturating_mul(4)).unwrap_or(u16::MAX);
        let _ = config.set_max_background(bg.max(16));
        for flag in [
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
        ] {
            // A kernel without one of these still works, just slower.
            let _ = config.add_capabilities(flag);
        }
        // A kernel that can open directories by itself is told so by the first `opendir`
        // answering ENOSYS: no opendir or releasedir round trip per directory walked, and it
        // keeps listings cached as ours would ask (FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE). A
        // directory that cannot be listed then fails at its first read instead of its open.
        self.kernel_opendir = config
            .capabilities()
            .contains(InitFlags::FUSE_NO_OPENDIR_SUPPORT);
        // POSIX ACLs stay off: the ACL queries of `ls -l` reach the daemon, which answers
        // that the filesystem has none (EOPNOTSUPP, see `super::xattr`), and `ls` stops
        // asking; the kernel checks permissions against the modes alone.
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _turn = self.enter(Op::Lookup, self.core.lookup_in_memory(parent.0, name));
        #[cfg(feature = "bench-ceiling")]
        if let Some(ceil) = &self.ceiling {
            if parent.0 == super::inode::ROOT_INO && name == super::ceiling::NAME {
                return self.guard("lookup", |c| match c.getattr(parent.0) {
                    Ok(root) => reply.entry(&c.ttl(), &ceil.attr(&root), Generation(0)),
                    Err(e) => reply.error(Self::fail(c, "lookup", e)),
                });
            }
        }
        self.guard("lookup", |c| match c.lookup(parent.0, name) {
            Ok(a) => reply.entry(&c.ttl(), &file_attr(&a), Generation(0)),
            Err(e) => reply.error(Self::fail(c, "lookup", e)),
        })
    }

    // fuser's `batch_forget` (whose argument type it does not export) calls this per inode.
    // No turn at the gate: one batch of forgets from the kernel calls this once per inode
    // on one thread, which must not park between them.
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.core.stats().on_op(Op::Forget, 1);
        // No reply: a panic is only logged.
        self.guard("forget", |c| c.forget(ino.0, nlookup));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _turn = self.enter(Op::Getattr, self.core.attr_in_memory(ino.0));
        #[cfg(feature = "bench-ceiling")]
        if let Some(ceil) = self
            .ceiling
            .as_ref()
            .filter(|_| ino.0 == super::ceiling::INO)
        {
            return self.guard("getattr", |c| match c.getattr(super::inode::ROOT_INO) {
                Ok(root) => reply.attr(&c.ttl(), &ceil.attr(&root)),
                Err(e) => reply.error(Self::fail(c, "getattr", e)),
            });
        }
        self.guard("getattr", |c| match c.getattr(ino.0) {
            Ok(a) => reply.attr(&c.ttl(), &file_attr(&a)),
            Err(e) => reply.error(Self::fail(c, "getattr", e)),
        })
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _turn = self.enter(Op::Readlink, false);
        self.guard("readlink", |c| match c.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(Self::fail(c, "readlink", e)),
        })
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.enter(Op::Open, false);
        #[cfg(feature = "bench-ceiling")]
        if self.ceiling.is_some() && ino.0 == super::ceiling::INO {
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
        }
        self.guard("open", |c| match c.open_handle(ino.0, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(Self::fail(c, "open", e)),
        })
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        #[cfg(feature = "bench-ceiling")]
        if let Some(ceil) = self
            .ceiling
            .as_ref()
            .filter(|_| ino.0 == super::ceiling::INO)
        {
            return reply.data(ceil.read(offset, size));
        }
        let _turn = self.gate.arrive(false);
        let pid = req.pid();
        self.guard("read", |c| {
            // Each FUSE thread answers from its own reused buffer: no allocation or page
            // faults per request. The reads are made for the thread that asked (a remote
            // source follows each reader's own way through the file).
            READ_BUF.with(|b| {
                let mut buf = b.borrow_mut();
                let ctx = crate::io::ReadCtx::reader(pid);
                let answer = c.read_handle(ctx, ino.0, fh.0, offset, size, &mut buf);
                match answer {
                    Ok(answer) => reply.data(answer.bytes(&buf)),
                    Err(e) => reply.error(Self::fail(c, "read", e)),
                }
            })
        })
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _turn = self.enter(Op::Release, true);
        // Handle 0 (sidecars, and the benchmark ceiling file) holds nothing to release.
        self.guard("release", |c| {
            c.release(fh.0);
            reply.ok()
        })
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _turn = self.enter(Op::Flush, true);
        self.guard("flush", |c| {
            c.flush(fh.0);
            reply.ok()
        })
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        let _turn = self.enter(Op::Other, true);
        reply.ok()
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.enter(Op::Opendir, self.kernel_opendir);
        // The kernel may cache listings (and keep them across opens): they change only when
        // the file is re-read, which invalidates them.
        let flags = FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE;
        if self.kernel_opendir {
            return reply.error(Errno::ENOSYS);
        }
        self.guard("opendir", |c| match c.opendir(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), flags),
            Err(e) => reply.error(Self::fail(c, "opendir", e)),
        })
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _turn = self.enter(
            Op::Readdir,
            self.core.listing_in_memory(ino.0, offset, false),
        );
        self.guard("readdir", |c| match c.listing(ino.0) {
            Ok(listing) => {
                for (next, e) in listing.from_offset(offset) {
                    if reply.add(INodeNo(e.ino), next, kind(e.kind), e.name.as_str()) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(Self::fail(c, "readdir", e)),
        })
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _turn = self.enter(
            Op::Readdirplus,
            self.core.listing_in_memory(ino.0, offset, true),
        );
        self.guard("readdirplus", |c| {
            let r = c.readdirplus(ino.0, offset, |e, next, attr, ttl| {
                let (ino, name) = (INodeNo(attr.ino), e.name.as_str());
                reply.add(ino, next, name, &ttl, &file_attr(attr), Generation(0))
            });
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(Self::fail(c, "readdirplus", e)),
            }
        })
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _turn = self.enter(Op::Releasedir, true);
        reply.ok()
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _turn = self.enter(Op::Statfs, true);
        self.guard("statfs", |c| {
            let s = c.statfs();
            reply.statfs(s.blocks, 0, 0, s.files, 0, s.bsize, s.namelen, s.bsize)
        })
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _turn = self.enter(Op::Getxattr, H5Fs::xattr_in_memory(name));
        self.guard("getxattr", |c| match c.getxattr(ino.0, name, size) {
            Ok(XattrReply::Size(n)) => reply.size(n),
            Ok(XattrReply::Data(d)) => reply.data(&d),
            Err(e) => reply.error(Self::fail(c, "getxattr", e)),
        })
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _turn = self.enter(Op::Listxattr, false);
        self.guard("listxattr", |c| match c.listxattr(ino.0, size) {
            Ok(XattrReply::Size(n)) => reply.size(n),
            Ok(XattrReply::Data(d)) => reply.data(&d),
            Err(e) => reply.error(Self::fail(c, "listxattr", e)),
        })
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let _turn = self.enter(Op::Access, true);
        self.guard("access", |c| match c.access(ino.0, mask.bits()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(Self::fail(c, "access", e)),
        })
    }

    // Everything below would modify the file: read-only filesystem.

    fn setattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn mkdir(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }

    /// No ioctl is served: ENOTTY, what a regular file answers. Quietly, as callers probe
    /// with them all the time (Python's `open` asks every file whether it is a terminal);
    /// fuser's default would log a warning per call.
    fn ioctl(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let _turn = self.enter(Op::Other, true);
        log::debug!("ioctl {cmd:#x} on inode {}: ENOTTY", ino.0);
        reply.error(Errno::ENOTTY)
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let _turn = self.enter(Op::Other, true);
        reply.error(Errno::EROFS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_granted_request_follows_the_kernel_limit_never_below_1_mib() {
        let page = 4096;
        let mib = 1 << 20;
        // No limit file (kernels before 6.13), or one that says nothing usable: 1 MiB.
        for text in [None, Some("x\n"), Some(""), Some("18446744073709551615")] {
            assert_eq!(granted_request(text, page), mib, "{text:?}");
        }
        assert_eq!(granted_request(Some("256\n"), page), mib);
        assert_eq!(granted_request(Some("32\n"), page), mib);
        assert_eq!(granted_request(Some("1024\n"), page), 4 * mib);
        assert_eq!(granted_request(Some("65535"), page), 65535 * 4096);
        assert_eq!(granted_request(Some("256"), 16384), 4 * mib);
        assert!(page_size() >= 512);
    }
}
