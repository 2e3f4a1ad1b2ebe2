//! Running a mount: checks before mounting, background mode, readiness, signals, shutdown.
//!
//! Before anything is mounted the HDF5 file is opened and its root parsed (a directory is
//! only checked to be readable: its files are opened on first use) and the mountpoint
//! checked; a failure is one line on stderr and exit status 2.
//!
//! Background mode (the default) re-executes this binary as `--daemon-child --foreground`
//! with its stdout connected to a pipe, stdin and stderr on /dev/null. The child starts a new
//! session (`setsid`: no controlling terminal, out of the shell's process group), mounts, and
//! once `stat` of the mountpoint answers through the live session (inode 1 on a new device)
//! writes `ready` to the pipe; a failure is written as `error: ...`. The parent returns 0 on
//! `ready`, and exit 1 with the reason on an error, on the child's death, or after
//! [`READY_TIMEOUT`] (for a remote source, the request and retry bounds plus 5 s, as opening
//! it may retry that long; then the child is sent SIGTERM).
//!
//! SIGTERM, SIGINT and SIGHUP are blocked in every thread and taken by one thread with
//! `sigwait`, so no code runs in signal-handler context. Each one unmounts (falling back to a
//! lazy `fusermount3 -uz` if the mount is busy); the session then ends and the process exits
//! 0. An unmount from outside (`fusermount3 -u`, `umount`) ends the session the same way.
//!
//! With `--refresh`, a `refresh` thread checks the file every period (see
//! [`h5mount::fs::refresh`]) and sends the kernel the invalidations a re-read calls for.

use std::fs::OpenOptions as FsOpen;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nix::sys::signal::{SigSet, Signal};

use h5mount::fs::fuse::{self, MountOptions, Notifier};
use h5mount::fs::refresh::{Outcome, Stamp, Watcher};
use h5mount::fs::{FsOptions, H5Fs};
use h5mount::model::{File, ObjectKind, OpenOptions, Resolver, ResolverOptions};

use crate::config::Config;

/// How long a background mount may take to answer before the parent gives up.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// What is mounted.
enum Source {
    File(Arc<File>),
    Dir(Arc<Resolver>),
}

/// What the process learned before mounting.
struct Prepared {
    source: Source,
    fs_opts: FsOptions,
    mount_dev: u64,
    /// The file's state before it was opened (what a refresh compares against).
    stamp: Stamp,
}

/// Whether `dir` is the mountpoint of a mount of this process's namespace, other than an
/// automount point (a line of `/proc/self/mountinfo`, whose fifth field is the mountpoint
/// with spaces, tabs, newlines and backslashes written as octal escapes).
fn is_mountpoint(dir: &Path) -> bool {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return false;
    };
    let Ok(table) = std::fs::read("/proc/self/mountinfo") else {
        return false;
    };
    let want = dir.as_os_str().as_encoded_bytes();
    table.split(|&b| b == b'\n').any(|line| {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        // The filesystem type follows the "-" separator. An automount point (autofs, as
        // a systemd .automount unit makes) is where the real mount is meant to go.
        let fstype = fields
            .iter()
            .position(|f| *f == b"-")
            .and_then(|i| fields.get(i + 1));
        fields.get(4).is_some_and(|f| unescape_mountinfo(f) == want)
            && fstype != Some(&&b"autofs"[..])
    })
}

/// A mountinfo field with its octal escapes (`\040`) decoded.
fn unescape_mountinfo(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).and_then(|d| {
            d.iter()
                .all(|c| (b'0'..=b'7').contains(c))
                .then(|| d.iter().fold(0u32, |a, c| a * 8 + u32::from(c - b'0')))
        });
        match (field[i], octal) {
            (b'\\', Some(v)) if v < 256 => {
                out.push(v as u8);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Open the file and check the mountpoint; the message is the one line to print.
fn prepare(cfg: &Config) -> Result<Prepared, String> {
    let mp = &cfg.mountpoint;
    let mp_meta = std::fs::metadata(mp).map_err(|e| format!("{}: {e}", mp.display()))?;
    if !mp_meta.is_dir() {
        return Err(format!("{}: not a directory", mp.display()));
    }
    if is_mountpoint(mp) {
        return Err(format!(
            "{}: already a mountpoint; unmount it first (a second mount would hide the first)",
            mp.display()
        ));
    }
    let f = &cfg.file;
    #[cfg(feature = "remote")]
    if let Some(url) = f.to_str().filter(|u| h5mount::io::remote::is_remote(u)) {
        return prepare_remote(cfg, url, mp_meta.dev());
    }
    let meta = std::fs::metadata(f).map_err(|e| format!("{}: {e}", f.display()))?;
    let fs_opts = FsOptions {
        uid: cfg.uid.unwrap_or(meta.uid()),
        gid: cfg.gid.unwrap_or(meta.gid()),
        file_mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        file_size: meta.len(),
        views: cfg.views(),
        refresh: cfg.refresh,
        zarr: cfg.zarr(),
    };
    let max_open_files = open_file_bound(cfg.max_open_files, cfg.threads);
    if meta.is_dir() {
        std::fs::read_dir(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let resolver = Resolver::new(ResolverOptions {
            root: f.clone(),
            allow_outside_paths: cfg.allow_external_paths,
            max_open_files,
            cache_bytes: cfg.cache_size,
            origin: None,
        });
        return Ok(Prepared {
            source: Source::Dir(resolver),
            fs_opts,
            mount_dev: mp_meta.dev(),
            stamp: Stamp::of_meta(&meta),
        });
    }
    if !meta.is_file() {
        return Err(format!(
            "{}: neither a regular file nor a directory",
            f.display()
        ));
    }
    let opts = OpenOptions {
        cache_bytes: cfg.cache_size,
        allow_outside_paths: cfg.allow_external_paths,
        max_open_files,
        root: None,
    };
    let file = File::open(f, &opts).map_err(|e| format!("{}: {e}", f.display()))?;
    // Parse the root object now so a file whose root is broken is refused before mounting.
    match file.kind(file.root()) {
        Ok(ObjectKind::Group) => {}
        Ok(k) => {
            return Err(format!(
                "{}: root object is a {k:?}, not a group",
                f.display()
            ))
        }
        Err(e) => return Err(format!("{}: root group: {e}", f.display())),
    }
    Ok(Prepared {
        source: Source::File(file),
        fs_opts,
        mount_dev: mp_meta.dev(),
        stamp: Stamp::of_meta(&meta),
    })
}

/// Open a remote object (one HEAD, one GET of its head) and parse its root group, or (for
/// an `s3://bucket/prefix/`) list the prefix once.
#[cfg(feature = "remote")]
fn prepare_remote(cfg: &Config, url: &str, mount_dev: u64) -> Result<Prepared, String> {
    use h5mount::io::remote::{is_prefix, RemoteOrigin};
    let shown = display_url(url);
    let ropts = cfg.remote.options()?;
    let fs_opts = FsOptions {
        uid: cfg.uid.unwrap_or_else(|| nix::unistd::geteuid().as_raw()),
        gid: cfg.gid.unwrap_or_else(|| nix::unistd::getegid().as_raw()),
        file_mtime: SystemTime::now(),
        file_size: 0,
        views: cfg.views(),
        refresh: cfg.refresh,
        zarr: cfg.zarr(),
    };
    if is_prefix(url) {
        let (origin, path) = RemoteOrigin::of(url, &ropts).map_err(|e| e.to_string())?;
        // One LIST now: a missing bucket or refused access is an error before mounting.
        h5mount::io::Opener::list(&*origin, &path).map_err(|e| e.to_string())?;
        let resolver = Resolver::new(ResolverOptions {
            root: std::path::PathBuf::from(match path.trim_end_matches('/') {
                "" => "/",
                p => p,
            }),
            allow_outside_paths: cfg.allow_external_paths,
            max_open_files: cfg.max_open_files,
            cache_bytes: cfg.cache_size,
            origin: Some(origin),
        });
        return Ok(Prepared {
            source: Source::Dir(resolver),
            fs_opts,
            mount_dev,
            stamp: Stamp::unknown(),
        });
    }
    let opts = OpenOptions {
        cache_bytes: cfg.cache_size,
        allow_outside_paths: cfg.allow_external_paths,
        max_open_files: cfg.max_open_files,
        root: None,
    };
    let file = File::open_url(url, &opts, &ropts).map_err(|e| match e {
        h5mount::Error::Io { source, .. } | h5mount::Error::Open { source, .. } => {
            source.to_string()
        }
        e => format!("{shown}: {e}"),
    })?;
    match file.kind(file.root()) {
        Ok(ObjectKind::Group) => {}
        Ok(k) => return Err(format!("{shown}: root object is a {k:?}, not a group")),
        Err(e) => return Err(format!("{shown}: root group: {e}")),
    }
    let size = file.storage().source().len();
    Ok(Prepared {
        source: Source::File(file),
        fs_opts: FsOptions {
            file_size: size,
            ..fs_opts
        },
        mount_dev,
        stamp: Stamp::unknown(),
    })
}

/// `url` without any `user:password@` part, for messages and `/proc/mounts`.
pub fn display_url(url: &str) -> String {
    crate::config::remote::without_userinfo(url, "")
}

/// Mount per `cfg`; returns the process exit status.
pub fn run(cfg: Config) -> i32 {
    // A remote source costs requests to open: the background parent leaves that to the
    // child, which reports a failure on the pipe and exits 2 (passed on by the parent).
    if !cfg.foreground && is_remote_source(&cfg) {
        // Opening may retry for the whole retry bound: wait that long, and a little more.
        let bound = cfg.remote.request_timeout + cfg.remote.retry_timeout + Duration::from_secs(5);
        return spawn_background(READY_TIMEOUT.max(bound));
    }
    let prepared = match prepare(&cfg) {
        Ok(p) => p,
        Err(msg) => {
            if cfg.daemon_child {
                report(&format!("error: {msg}"));
            }
            eprintln!("h5mount: {msg}");
            return 2;
        }
    };
    if !cfg.foreground {
        drop(prepared);
        return spawn_background(READY_TIMEOUT);
    }
    serve(&cfg, prepared)
}

/// Whether the source is a remote object (`s3://`, `http(s)://`).
fn is_remote_source(cfg: &Config) -> bool {
    cfg.file.to_str().is_some_and(crate::config::is_remote)
}

/// Write one line to the parent of a background mount (our stdout is its pipe).
fn report(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// After `ready`, detach stdout from the parent's pipe (it is gone once the parent exits).
fn detach_stdout() {
    if let Ok(null) = FsOpen::new().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
    }
}

/// Parent side of background mode.
fn spawn_background(ready_timeout: Duration) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("h5mount: cannot find own executable: {e}");
            return 1;
        }
    };
    let mut child = match Command::new(exe)
        .arg("--daemon-child")
        .arg("--foreground")
        .args(std::env::args_os().skip(1))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("h5mount: cannot start the mount process: {e}");
            return 1;
        }
    };
    let Some(out) = child.stdout.take() else {
        eprintln!("h5mount: no pipe to the mount process");
        return 1;
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let got = BufReader::new(out).read_line(&mut line).map(|_| line);
        let _ = tx.send(got);
    });
    match rx.recv_timeout(ready_timeout) {
        Ok(Ok(line)) if line.trim() == "ready" => 0,
        Ok(Ok(line)) if line.starts_with("error: ") => {
            eprintln!("h5mount: {}", line.trim_end().trim_start_matches("error: "));
            // A source that could not be opened is a usage error (2), as in the foreground.
            match child.wait().map(|s| s.code()) {
                Ok(Some(2)) => 2,
                _ => 1,
            }
        }
        Ok(_) => {
            let status = child.wait().map(|s| s.to_string());
            eprintln!(
                "h5mount: the mount process ended before the mount was ready ({})",
                status.unwrap_or_else(|e| e.to_string())
            );
            1
        }
        Err(_) => {
            eprintln!(
                "h5mount: the mount did not answer within {} s; stopping it",
                ready_timeout.as_secs()
            );
            if let Ok(pid) = i32::try_from(child.id()) {
                let pid = nix::unistd::Pid::from_raw(pid);
                let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            }
            1
        }
    }
}

enum Event {
    Ready,
    NotReady(String),
    Signal(Signal),
    Ended(io::Result<()>),
}

/// Mount and serve until unmounted; returns the exit status.
fn serve(cfg: &Config, prepared: Prepared) -> i32 {
    let fail = |msg: String| {
        if cfg.daemon_child {
            report(&format!("error: {msg}"));
        }
        log::error!("{msg}");
        eprintln!("h5mount: {msg}");
        1
    };
    if cfg.daemon_child {
        // Already a child (not a group leader), so this cannot fail in practice; if it does
        // the mount still works, only attached to the parent's session.
        let _ = nix::unistd::setsid();
    }
    raise_open_file_limit();
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    // Blocked before any thread starts, so every thread inherits the mask and only sigwait
    // below ever sees these signals.
    if let Err(e) = signals.thread_block() {
        return fail(format!("cannot block signals: {e}"));
    }
    let mountpoint = cfg.mountpoint.clone();
    // A remote file (not a prefix or a directory) lists its root in the background once
    // ready: see `H5Fs::warm_up`.
    let warm_up =
        cfg.warm_up && is_remote_source(cfg) && matches!(prepared.source, Source::File(_));
    let fs = match prepared.source {
        Source::File(file) => H5Fs::new(file, prepared.fs_opts),
        Source::Dir(resolver) => H5Fs::for_directory(resolver, prepared.fs_opts),
    };
    let mopts = MountOptions {
        fsname: cfg
            .fsname
            .clone()
            .unwrap_or_else(|| display_url(&cfg.file.display().to_string())),
        subtype: cfg.subtype.clone().unwrap_or_else(|| "h5mount".into()),
        allow_other: cfg.allow_other,
        allow_root: cfg.allow_root,
        default_permissions: cfg.default_permissions,
        auto_unmount: cfg.auto_unmount,
        threads: cfg.threads_for(is_remote_source(cfg)),
        max_request: grant_request(cfg.max_request_kb),
    };
    let mut mounted = match fuse::mount(fs, &mountpoint, &mopts) {
        Ok(m) => m,
        Err(e) => return fail(format!("mount on {}: {e}", mountpoint.display())),
    };
    let mut unmounter = mounted.unmounter();
    let core = mounted.fs();
    if let Some(period) = cfg.refresh {
        let fs = mounted.fs();
        let notifier = mounted.notifier();
        let watcher = Watcher::new(&cfg.file, Some(prepared.stamp));
        let started = std::thread::Builder::new()
            .name("refresh".into())
            .spawn(move || refresh_loop(period, watcher, &fs, &notifier));
        if let Err(e) = started {
            let _ = unmounter.unmount();
            return fail(format!("cannot start threads: {e}"));
        }
    }
    let (tx, rx) = mpsc::channel();
    let spawned = [
        {
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("session".into())
                .spawn(move || {
                    let _ = tx.send(Event::Ended(mounted.run()));
                })
        },
        {
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("signals".into())
                .spawn(move || {
                    while let Ok(sig) = signals.wait() {
                        if tx.send(Event::Signal(sig)).is_err() {
                            break;
                        }
                    }
                })
        },
        {
            let tx = tx.clone();
            let mp = mountpoint.clone();
            let dev = prepared.mount_dev;
            std::thread::Builder::new()
                .name("ready".into())
                .spawn(move || {
                    let _ = tx.send(wait_ready(&mp, dev));
                })
        },
    ];
    for s in spawned {
        if let Err(e) = s {
            // Without its threads the mount cannot be served: take it down again.
            let _ = unmounter.unmount();
            return fail(format!("cannot start threads: {e}"));
        }
    }
    drop(tx);
    let mut ready = false;
    let mut stopping = false;
    for ev in rx {
        match ev {
            Event::Ready => {
                ready = true;
                let kb = raise_readahead(&mountpoint, cfg.readahead_kb);
                core.stats().set_readahead_kb(kb);
                if warm_up {
                    let core = core.clone();
                    let started = std::thread::Builder::new()
                        .name("warm-up".into())
                        .spawn(move || core.warm_up());
                    if let Err(e) = started {
                        log::warn!("no warm-up of the root listing: {e}");
                    }
                }
                log::info!("{} mounted on {}", cfg.file.display(), mountpoint.display());
                if cfg.daemon_child {
                    report("ready");
                    detach_stdout();
                }
            }
            Event::NotReady(msg) => {
                log::error!("{msg}");
                if cfg.daemon_child {
                    report(&format!("error: {msg}"));
                    detach_stdout();
                }
            }
            Event::Signal(sig) => {
                log::info!("{sig}: unmounting {}", mountpoint.display());
                if stopping {
                    continue;
                }
                stopping = true;
                if let Err(e) = unmounter.unmount() {
                    log::warn!("unmount failed ({e}); detaching lazily");
                    lazy_unmount(&mountpoint);
                }
            }
            Event::Ended(result) => {
                return match result {
                    Ok(()) => {
                        log::info!("unmounted {}", mountpoint.display());
                        0
                    }
                    Err(e) if ready => {
                        log::error!("session ended: {e}");
                        1
                    }
                    Err(e) => fail(format!("session ended before the mount was ready: {e}")),
                };
            }
        }
    }
    1
}

/// Check the file every `period` (or when a failed read asks) for the life of the process,
/// re-reading it when it changed.
fn refresh_loop(period: Duration, mut watcher: Watcher, fs: &H5Fs, notifier: &Notifier) {
    let mut kept = false;
    loop {
        // Woken early by a read that failed (it waits for this check).
        fs.wakeup().wait_turn(period);
        let start = std::time::Instant::now();
        let outcome = watcher.check(fs);
        fs.wakeup().checked();
        match outcome {
            Outcome::Unchanged => {}
            Outcome::Kept(why) => {
                // Logged once per run of failures: a non-SWMR writer may take a while.
                if !kept {
                    log::debug!("file changed but not re-read yet ({why}); serving the old state");
                }
                kept = true;
            }
            Outcome::Refreshed(invs) => {
                kept = false;
                let refused = notifier.send(&invs);
                log::debug!(
                    "file re-read in {:.3} s: {} invalidations sent, {refused} refused",
                    start.elapsed().as_secs_f64(),
                    invs.len()
                );
            }
        }
    }
}

/// Wait until `stat(mountpoint)` answers from the live session: a different device than the
/// directory had before mounting, and the FUSE root inode.
fn wait_ready(mountpoint: &Path, old_dev: u64) -> Event {
    let start = std::time::Instant::now();
    loop {
        match std::fs::metadata(mountpoint) {
            Ok(m) if m.dev() != old_dev && m.ino() == h5mount::fs::ROOT_INO => return Event::Ready,
            Ok(_) => {}
            Err(e) if start.elapsed() > READY_TIMEOUT => {
                return Event::NotReady(format!("stat {}: {e}", mountpoint.display()))
            }
            Err(_) => {}
        }
        if start.elapsed() > READY_TIMEOUT {
            return Event::NotReady(format!(
                "{} does not show the mounted file",
                mountpoint.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Raise the soft limit on open files to the hard one, so `--max-open-files` can be set
/// above the usual soft limit of 1024 (kept low only for programs that use `select`, which
/// the daemon does not). Running out still fails only the reads that need another file.
fn raise_open_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                Ok(()) => log::debug!("open file limit raised from {soft} to {hard}"),
                Err(e) => log::debug!("cannot raise the open file limit from {soft}: {e}"),
            }
        }
    }
}

/// Descriptors the daemon needs besides the files it keeps open: stdio, /dev/fuse, logs,
/// and one file per worker thread that a read holds while the bound closes it.
const RESERVED_FDS: u64 = 64;

/// The bound on open files to use: `wanted`, lowered (with a warning) to what the open-file
/// limit leaves once raised to its hard value.
fn open_file_bound(wanted: usize, threads: usize) -> usize {
    use nix::sys::resource::{getrlimit, Resource};
    raise_open_file_limit();
    let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return wanted;
    };
    let room = soft.saturating_sub(RESERVED_FDS + threads as u64);
    if (wanted as u64) <= room {
        return wanted;
    }
    let bound = usize::try_from(room).unwrap_or(usize::MAX).max(2);
    log::warn!(
        "--max-open-files {wanted} lowered to {bound}: the open-file limit is {soft} \
         (raise it with ulimit -n or LimitNOFILE=)"
    );
    bound
}

/// Set the readahead of the mount's backing device to `kb` KiB (needs root; otherwise left
/// as is; 0: left as is). Returns the value set, or 0 (shown as `readahead_kb` in the
/// mount's statistics).
///
/// The kernel offers FUSE only 128 KiB, so sequential reads arrive in 128 KiB requests; at
/// 1 MiB (the default) they match the largest request we accept and decode whole chunks in
/// fewer, larger calls.
fn raise_readahead(mountpoint: &Path, kb: u64) -> u64 {
    if kb == 0 {
        return 0;
    }
    let Ok(meta) = std::fs::metadata(mountpoint) else {
        return 0;
    };
    let dev = meta.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let knob = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    match std::fs::write(&knob, kb.to_string()) {
        Ok(()) => {
            log::debug!("{knob} = {kb}");
            kb
        }
        Err(e) => {
            let now = std::fs::read_to_string(&knob)
                .map(|v| format!("{} KiB", v.trim()))
                .unwrap_or_else(|_| "the kernel's default".into());
            log::info!(
                "readahead stays at {now} for this mount: raising it to {kb} KiB needs root \
                 ({e}); sequential reads come in requests of that size. An administrator can \
                 raise it after mounting: echo {kb} > {knob}"
            );
            0
        }
    }
}

/// The largest FUSE request to ask for, in bytes, for `--max-request KB`: `kb`, where the
/// kernel grants it or can be made to (as root, raising [`fuse::MAX_PAGES_LIMIT`], with a
/// log line); otherwise what it grants, with a warning. The kernel's limit is raised only
/// when asked for more than every kernel grants.
fn grant_request(kb: u64) -> u32 {
    let want = kb.saturating_mul(1024);
    let default = u64::from(fuse::DEFAULT_MAX_REQUEST);
    if want <= default {
        return fuse::DEFAULT_MAX_REQUEST;
    }
    let page = fuse::page_size();
    let limit = std::fs::read_to_string(fuse::MAX_PAGES_LIMIT).ok();
    let granted = fuse::granted_request(limit.as_deref(), page);
    let to_u32 = |b: u64| u32::try_from(b).unwrap_or(fuse::DEFAULT_MAX_REQUEST);
    if granted >= want {
        return to_u32(want);
    }
    let Some(old) = limit else {
        log::warn!(
            "--max-request {kb}: this kernel grants requests of 1024 KiB at most (Linux 6.13 \
             and later can be asked for more, through {})",
            fuse::MAX_PAGES_LIMIT
        );
        return fuse::DEFAULT_MAX_REQUEST;
    };
    let pages = want.div_ceil(page);
    match std::fs::write(fuse::MAX_PAGES_LIMIT, pages.to_string()) {
        Ok(()) => {
            log::info!(
                "--max-request {kb}: raised {} from {} to {pages} pages (for every FUSE mount \
                 of this machine)",
                fuse::MAX_PAGES_LIMIT,
                old.trim()
            );
            to_u32(want)
        }
        Err(e) => {
            log::warn!(
                "--max-request {kb}: the kernel grants {} KiB ({} = {}); raising it needs \
                 root ({e})",
                granted >> 10,
                fuse::MAX_PAGES_LIMIT,
                old.trim()
            );
            to_u32(granted.min(want))
        }
    }
}

/// Detach a busy mount: it disappears from the tree now and is freed when the last user goes.
fn lazy_unmount(mountpoint: &Path) {
    let status = Command::new("fusermount3")
        .args(["-u", "-z", "--"])
        .arg(mountpoint)
        .stdin(Stdio::null())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        log::error!("lazy unmount of {} failed", mountpoint.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(br"/mnt/a\040b\011c"), b"/mnt/a b\tc");
        assert_eq!(unescape_mountinfo(br"/x\134y\9"), br"/x\y\9");
        assert!(is_mountpoint(Path::new("/proc")));
        let fresh = tempfile::tempdir().unwrap();
        assert!(!is_mountpoint(fresh.path()));
    }

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(display_url("https://u:p@host/f.h5"), "https://host/f.h5");
        assert_eq!(display_url("s3://bucket/a@b.h5"), "s3://bucket/a@b.h5");
        assert_eq!(display_url("/data/f.h5"), "/data/f.h5");
    }

    #[test]
    fn the_open_file_bound_fits_the_limit() {
        assert_eq!(open_file_bound(8, 4), 8);
        let huge = open_file_bound(1 << 40, 4);
        assert!((2..1 << 40).contains(&huge), "{huge}");
        let (soft, _) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        assert!(huge as u64 + RESERVED_FDS <= soft.max(RESERVED_FDS + 2));
    }
}
