//! What the tests of `remote_hostile.rs` share: the fixture they serve (`stream.h5` of
//! `fixtures/remote`, rebuilt in memory with its known bytes), mounts with a clean
//! environment (AWS_* cleared, a temp HOME, instance metadata disabled and pointed at a
//! closed loopback port; fake credentials with a recognisable session token when asked),
//! mounts expected to fail (status, stderr, time; unmounted if they mounted after all), and a
//! guard on the daemon's memory that aborts the server's connections past the bound.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{self, Mount};
use crate::hostile_server::{Aborter, HostileServer, Logged, Request};

pub const KEY_ID: &str = "AKIAHOSTILETEST00000";
pub const SECRET: &str = "hostile-secret-key-never-shown-0000000000";
/// Recognisable, so a test can tell where it went.
pub const TOKEN: &str = "FAKE-SESSION-TOKEN-h5mount-hostile-test";
/// What the first GET of a remote object takes (src/io/remote.rs): faults hit only past it.
pub const FIRST_GET: u64 = 1 << 20;
pub const MIB: u64 = 1 << 20;
/// The daemon's memory bound in the listing and body tests (KiB).
pub const MEMORY_LIMIT_KIB: u64 = 200 << 10;
/// How long a failing mount command may take before it is killed (it should take seconds).
pub const COMMAND_LIMIT: Duration = Duration::from_secs(60);

pub fn fixtures() -> PathBuf {
    crate::harness::fixture("remote")
}

pub fn layout_json() -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(fixtures().join("layout.json")).unwrap()).unwrap()
}

/// `stream.h5` (see `make_remote.py`): its bytes and what is known of them.
pub struct StreamFile {
    pub bytes: Vec<u8>,
    /// Where /stream's elements begin.
    pub data_offset: u64,
    pub sha_a: String,
    pub sha_b: String,
}

impl StreamFile {
    pub fn load() -> StreamFile {
        let fx = layout_json();
        let s = &fx["stream"];
        let num = |v: &serde_json::Value| v.as_u64().unwrap();
        let mut bytes = fs::read(fixtures().join(s["head"].as_str().unwrap())).unwrap();
        let data_offset = num(&s["data_offset"]);
        assert_eq!(bytes.len() as u64, data_offset);
        let mult = num(&s["multiplier"]) as u32;
        for i in 0..num(&s["elements"]) as u32 {
            bytes.extend_from_slice(&i.wrapping_mul(mult).to_le_bytes());
        }
        assert_eq!(bytes.len() as u64 - data_offset, num(&s["nbytes"]));
        let sha = |d: &str| s["chunked"][d]["sha256"].as_str().unwrap().to_string();
        StreamFile {
            bytes,
            data_offset,
            sha_a: sha("/a"),
            sha_b: sha("/b"),
        }
    }

    /// /stream's bytes at `off..off + len` (offsets within the dataset).
    pub fn data(&self, off: u64, len: usize) -> &[u8] {
        let at = (self.data_offset + off) as usize;
        &self.bytes[at..at + len]
    }
}

/// A test's private directory: the mounts' HOME, the daemon's log, failed commands' output.
pub struct Env {
    dir: tempfile::TempDir,
    runs: AtomicUsize,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            runs: AtomicUsize::new(0),
        }
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("h5mount.log")
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Log lines holding any of `words` (case-insensitive).
    pub fn log_lines(&self, words: &[&str]) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| {
                let l = l.to_lowercase();
                words.iter().any(|w| l.contains(&w.to_lowercase()))
            })
            .map(str::to_string)
            .collect()
    }

    /// `h5mount SOURCE MP --no-warm-up -v --log-file LOG [--endpoint S3] EXTRA`, its
    /// environment clean of the caller's AWS settings; with `creds`, fake credentials with a
    /// recognisable session token.
    pub fn command(
        &self,
        source: &str,
        mp: &Path,
        s3: Option<&HostileServer>,
        creds: bool,
        extra: &[&str],
    ) -> Command {
        let mut c = harness::isolated(self.dir.path());
        c.arg(source)
            .arg(mp)
            .args(["--no-warm-up", "-v", "--log-file"])
            .arg(self.log_path());
        if let Some(s) = s3 {
            c.args(["--endpoint", &s.endpoint()]);
        }
        if creds {
            c.env("AWS_ACCESS_KEY_ID", KEY_ID)
                .env("AWS_SECRET_ACCESS_KEY", SECRET)
                .env("AWS_SESSION_TOKEN", TOKEN)
                .env("AWS_REGION", "us-east-1");
        }
        c.args(extra);
        c
    }

    /// A mount that must succeed.
    pub fn mount(
        &self,
        source: &str,
        s3: Option<&HostileServer>,
        creds: bool,
        extra: &[&str],
    ) -> Mount {
        Mount::by_command(|mp| self.command(source, mp, s3, creds, extra))
    }

    /// A mount that should fail: how it ended (killed after [`COMMAND_LIMIT`]); unmounted
    /// again if it succeeded after all.
    pub fn mount_fails(
        &self,
        source: &str,
        s3: Option<&HostileServer>,
        creds: bool,
        extra: &[&str],
    ) -> Failed {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        let mp = self.dir.path().join(format!("mnt-{n}"));
        fs::create_dir(&mp).unwrap();
        let err_path = self.dir.path().join(format!("stderr-{n}"));
        let mut c = self.command(source, &mp, s3, creds, extra);
        c.stdout(Stdio::null())
            .stderr(fs::File::create(&err_path).unwrap());
        let start = Instant::now();
        let mut child = c.spawn().unwrap();
        let code = harness::wait_child(&mut child, COMMAND_LIMIT).and_then(|s| s.code());
        let took = start.elapsed();
        let mounted = harness::is_mounted(&mp);
        // Whatever it said: a mount that came up just before the check is undone too.
        unmount(&mp);
        Failed {
            code,
            stderr: fs::read_to_string(&err_path).unwrap_or_default(),
            took,
            mounted,
        }
    }
}

/// How a mount command that should fail ended.
#[derive(Debug)]
pub struct Failed {
    /// Exit status (`None`: killed after [`COMMAND_LIMIT`]).
    pub code: Option<i32>,
    pub stderr: String,
    pub took: Duration,
    /// Whether it mounted after all (then unmounted).
    pub mounted: bool,
}

impl Failed {
    /// Status 2 with exactly one line on stderr.
    pub fn assert_one_line(&self, what: &str) {
        assert!(!self.mounted, "{what}: mounted: {self:?}");
        assert_eq!(self.code, Some(2), "{what}: {self:?}");
        assert_eq!(self.stderr.lines().count(), 1, "{what}: {self:?}");
    }

    pub fn says(&self, words: &str) -> bool {
        self.stderr.to_lowercase().contains(&words.to_lowercase())
    }
}

/// Unmount a mount made outside [`Mount`] and wait for its daemon to end.
pub fn unmount(mp: &Path) {
    let pid = harness::daemon_pid(mp);
    for flag in ["-u", "-u", "-uz"] {
        if !harness::is_mounted(mp) {
            break;
        }
        let _ = Command::new("fusermount3").arg(flag).arg(mp).status();
    }
    if let Some(pid) = pid {
        if !harness::wait_for(|| harness::pid_gone(pid)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A GET (not a LIST) of bytes past the first GET of the object: a data read.
pub fn past_first_get(r: &Request) -> bool {
    if r.method != "GET" || r.is_list() {
        return false;
    }
    match r.header("range") {
        None => true,
        Some(h) => crate::hostile_server::parse_ranges(h, u64::MAX)
            .is_none_or(|rs| rs.iter().any(|&(_, last)| last >= FIRST_GET)),
    }
}

/// The requests of `log` whose method is `method`.
pub fn with_method<'a>(log: &'a [Logged], method: &str) -> Vec<&'a Logged> {
    log.iter().filter(|l| l.req.method == method).collect()
}

/// What reached a server, for messages: method, target, whether with credentials.
pub fn shown(log: &[Logged]) -> Vec<String> {
    log.iter()
        .map(|l| {
            format!(
                "{} {} -> {} (credentials: {}, token: {})",
                l.req.method,
                l.req.target,
                l.status,
                l.req.has_credentials(),
                l.req.header("x-amz-security-token") == Some(TOKEN)
            )
        })
        .collect()
}

/// `op` on its own thread: its result and time, or `None` if not done within `limit` (the
/// thread is left to end when the mount goes).
pub fn within<T: Send + 'static>(
    limit: Duration,
    op: impl FnOnce() -> T + Send + 'static,
) -> (Option<T>, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(op());
    });
    let got = rx.recv_timeout(limit).ok();
    (got, start.elapsed())
}

/// pread of `len` bytes at `off` of `path` (kernel readahead off): the bytes or the errno.
pub fn pread(path: &Path, off: u64, len: usize) -> Result<Vec<u8>, Option<i32>> {
    use std::os::fd::AsRawFd;
    let f = fs::File::open(path).map_err(|e| e.raw_os_error())?;
    // SAFETY: a valid open descriptor; posix_fadvise only sets a flag on the open file.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, off)
        .map_err(|e| e.raw_os_error())?;
    Ok(buf)
}

/// Watches the daemon serving a mountpoint: the most resident memory seen; past the limit
/// it aborts the server's connections, so a test that fails does not take the machine's
/// memory with it.
pub struct MemoryGuard {
    stop: Arc<AtomicBool>,
    peak_kib: Arc<AtomicU64>,
    tripped: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MemoryGuard {
    pub fn start(mp: &Path, aborters: Vec<Aborter>) -> MemoryGuard {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_kib = Arc::new(AtomicU64::new(0));
        let tripped = Arc::new(AtomicBool::new(false));
        let (s, p, t) = (stop.clone(), peak_kib.clone(), tripped.clone());
        let mp = mp.to_path_buf();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut pid = None;
            while !s.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(300) {
                if pid.is_none() {
                    pid = harness::daemon_pid(&mp);
                }
                if let Some(kib) = pid.and_then(|pid| harness::status_kib(pid, "VmRSS:")) {
                    p.fetch_max(kib, Ordering::Relaxed);
                    if kib > MEMORY_LIMIT_KIB {
                        t.store(true, Ordering::Relaxed);
                        aborters.iter().for_each(Aborter::abort);
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        MemoryGuard {
            stop,
            peak_kib,
            tripped,
            thread: Some(thread),
        }
    }

    /// Most memory of the daemon `pid` so far (its own high-water mark, or what was seen).
    pub fn peak_kib(&self, pid: Option<i32>) -> u64 {
        let hwm = pid
            .and_then(|p| harness::status_kib(p, "VmHWM:"))
            .unwrap_or(0);
        hwm.max(self.peak_kib.load(Ordering::Relaxed))
    }

    pub fn assert_within(&self, pid: Option<i32>, what: &str) {
        let peak = self.peak_kib(pid);
        assert!(
            !self.tripped.load(Ordering::Relaxed) && peak < MEMORY_LIMIT_KIB,
            "{what}: the daemon reached {} MiB (bound {} MiB; connections aborted: {})",
            peak >> 10,
            MEMORY_LIMIT_KIB >> 10,
            self.tripped.load(Ordering::Relaxed)
        );
    }
}

impl Drop for MemoryGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A server on 127.0.0.1 holding `stream.h5` as `f.h5` (HTTP) and `bucket/f.h5` (S3).
pub fn stream_server(fx: &StreamFile) -> HostileServer {
    let s = HostileServer::start("127.0.0.1");
    s.put("f.h5", fx.bytes.clone());
    s.put("bucket/f.h5", fx.bytes.clone());
    s
}

/// The second host, 127.0.0.2, with the same objects (so a client that follows a redirect
/// there gets answers).
pub fn other_host(fx: &StreamFile) -> HostileServer {
    let s = HostileServer::start("127.0.0.2");
    s.put("f.h5", fx.bytes.clone());
    s.put("bucket/f.h5", fx.bytes.clone());
    s
}
