//! The shared test module of `mount-tests/`: an RAII [`Mount`] that runs the real `h5mount`
//! binary and always unmounts and reaps it, even when the test panics, and the helpers the
//! test binaries share, each concern in a file of `common/` re-exported here: counted skips
//! and `H5MOUNT_REQUIRE_*` (`skip.rs`), fixture paths, manifests and hashes (`data.rs`),
//! memory mappings (`mapping.rs`) and Python availability (`python.rs`). A binary includes
//! it with `mod harness;` and uses what it needs, hence `allow(dead_code)`.

#![allow(dead_code)]

// `servers.rs` includes these two as well (see there).
#[allow(clippy::duplicate_mod)]
#[path = "common/data.rs"]
mod data;
#[path = "common/mapping.rs"]
mod mapping;
#[path = "common/python.rs"]
mod python;
#[allow(clippy::duplicate_mod)]
#[path = "common/skip.rs"]
mod skip;

// Each binary uses some of these.
#[allow(unused_imports)]
pub use data::{data_dir, expected_json, fixture, hex, manifest, read_json, sha256};
#[allow(unused_imports)]
pub use mapping::Mapping;
#[allow(unused_imports)]
pub use python::{python_can, python_or_skip, GDAL_PYTHON, PYTHON};
#[allow(unused_imports)]
pub use skip::{require_or_skip, required, skip, test_name, SKIP_LOG};

use std::ffi::CString;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_h5mount");

/// How long a mount or an unmount may take in a test.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A valid HDF5 file with an empty root group (h5py, `libver='latest'`: superblock v3), for
/// tests of the daemon that need no content.
pub const EMPTY_H5_HEX: &str =
    "894844460d0a1a0a030808000000000000000000ffffffffffffffffb300000000000000300000000000000095\
    55568b4f484452020078021200000000ffffffffffffffffffffffffffffffff0a020001000000580000000000\
    000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
    00000000000000000000000000000000000000000000000000000000000000000000000000000000c5b9c8ac";

/// The binary, run with an environment that cannot reach a credential of the caller's or
/// an address outside loopback: no `AWS_*` variable of the caller, HOME at `home` (no
/// `~/.aws`), the instance metadata off and its endpoint a closed loopback port, no
/// `RUST_LOG`, no standard input.
pub fn isolated(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AWS_") {
            c.env_remove(k);
        }
    }
    c.env("HOME", home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null());
    c
}

/// Wait for `child` to end, at most `bound`: its status, or `None` when it had to be killed.
pub fn wait_child(
    child: &mut std::process::Child,
    bound: Duration,
) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Bytes from a hex string (`"0a1b"` → `[0x0a, 0x1b]`).
pub fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Write the empty HDF5 file into `dir` and return its path.
pub fn empty_h5(dir: &Path) -> PathBuf {
    let bytes = unhex(EMPTY_H5_HEX);
    assert_eq!(bytes.len(), 179);
    let p = dir.join("empty.h5");
    std::fs::write(&p, bytes).unwrap();
    p
}

/// True if `dir` is a mount point (per /proc/self/mountinfo).
pub fn is_mounted(dir: &Path) -> bool {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let want = dir.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// The filesystem type of the mount at `dir` (from /proc/self/mounts).
pub fn mount_line(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let want = dir.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mounts")
        .ok()?
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(want.as_str()))
        .map(String::from)
}

/// Run the binary to completion.
pub fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run h5mount")
}

/// Wait until `cond` holds or [`TIMEOUT`] passes.
pub fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < TIMEOUT {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// Pid of the background daemon serving `mountpoint` (found by its command line).
pub fn daemon_pid(mountpoint: &Path) -> Option<i32> {
    daemon_pids(mountpoint).into_iter().next()
}

/// Pids of every background daemon started for `mountpoint` (found by their command lines).
#[allow(dead_code)]
pub fn daemon_pids(mountpoint: &Path) -> Vec<i32> {
    let mp = mountpoint.as_os_str().as_encoded_bytes().to_vec();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        if args.contains(&b"--daemon-child".as_slice()) && args.contains(&mp.as_slice()) {
            pids.push(pid);
        }
    }
    pids
}

/// True if `pid` has exited (gone, or a zombie nobody reaps).
pub fn pid_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
    }
}

/// A mounted HDF5 file, unmounted and reaped on drop.
pub struct Mount {
    _dir: tempfile::TempDir,
    mountpoint: PathBuf,
    /// The foreground process, when mounted with `-f`.
    child: Option<Child>,
}

impl Mount {
    /// Mount `file` in background mode (the default); the command must return 0 with the
    /// mount already answering.
    pub fn background(file: &Path, extra: &[&str]) -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let mountpoint = dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).unwrap();
        let mut args: Vec<&std::ffi::OsStr> = vec![file.as_os_str(), mountpoint.as_os_str()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let out = run(&args);
        let m = Mount {
            _dir: dir,
            mountpoint,
            child: None,
        };
        assert!(
            out.status.success(),
            "h5mount {}: {:?} {}",
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        // Background mode promises the mount answers when the command returns: no waiting.
        let meta = std::fs::metadata(&m.mountpoint).unwrap();
        assert_eq!(
            meta.ino(),
            1,
            "mountpoint is not the FUSE root right after return"
        );
        assert!(is_mounted(&m.mountpoint));
        m
    }

    /// Mount with an arbitrary command built for the mountpoint (e.g. `mount -t ...`); the
    /// command must succeed with the mount answering. Cleaned up like a background mount.
    pub fn by_command(build: impl FnOnce(&Path) -> Command) -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let mountpoint = dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).unwrap();
        let out = build(&mountpoint).stdin(Stdio::null()).output().unwrap();
        let m = Mount {
            _dir: dir,
            mountpoint,
            child: None,
        };
        assert!(
            out.status.success(),
            "{:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::metadata(&m.mountpoint).unwrap().ino(), 1);
        m
    }

    /// Mount `file` with `-f`; returns once the mount answers.
    pub fn foreground(file: &Path, extra: &[&str]) -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let mountpoint = dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).unwrap();
        let before = std::fs::metadata(&mountpoint).unwrap().dev();
        let child = Command::new(BIN)
            .arg("-f")
            .arg(file)
            .arg(&mountpoint)
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut m = Mount {
            _dir: dir,
            mountpoint,
            child: Some(child),
        };
        let mp = m.mountpoint.clone();
        let ok =
            wait_for(|| std::fs::metadata(&mp).is_ok_and(|md| md.dev() != before && md.ino() == 1));
        if !ok {
            let status = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            panic!(
                "foreground mount of {} not ready: {status:?}",
                file.display()
            );
        }
        m
    }

    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// The path of HDF5 object `obj` (`/a/b`) inside the mount.
    pub fn at(&self, obj: &str) -> PathBuf {
        let rel = obj.trim_start_matches('/');
        if rel.is_empty() {
            self.mountpoint.clone()
        } else {
            self.mountpoint.join(rel)
        }
    }

    /// Pid of the process serving this mount.
    pub fn pid(&self) -> Option<i32> {
        match &self.child {
            Some(c) => i32::try_from(c.id()).ok(),
            None => daemon_pid(&self.mountpoint),
        }
    }

    /// Send `sig` to the serving process.
    pub fn signal(&self, sig: Signal) {
        let pid = self.pid().expect("daemon pid");
        kill(Pid::from_raw(pid), sig).unwrap();
    }

    /// Wait for the foreground process to exit; its status code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let child = self.child.as_mut()?;
        let start = Instant::now();
        while start.elapsed() < TIMEOUT {
            if let Ok(Some(st)) = child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn fusermount(&self, lazy: bool) -> bool {
        let flag = if lazy { "-uz" } else { "-u" };
        Command::new("fusermount3")
            .arg(flag)
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let pid = self.pid();
        if is_mounted(&self.mountpoint) && !self.fusermount(false) {
            std::thread::sleep(Duration::from_millis(200));
            if is_mounted(&self.mountpoint) && !self.fusermount(false) {
                self.fusermount(true);
            }
        }
        if self.child.is_some() {
            if self.wait_exit().is_none() {
                if let Some(c) = self.child.as_mut() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            return;
        }
        if let Some(pid) = pid {
            if !wait_for(|| pid_gone(pid)) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// `getxattr` of `name` on `path`: `Ok(value)` or `Err(errno)`.
pub fn getxattr(path: &Path, name: &str) -> Result<Vec<u8>, i32> {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: both strings are NUL-terminated and live across the calls; the buffer pointer
    // and length describe a live, writable allocation (or are null/0 for the size query).
    unsafe {
        let size = libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0);
        if size < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let mut buf = vec![0u8; size as usize];
        let got = libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len());
        if got < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        buf.truncate(got as usize);
        Ok(buf)
    }
}

/// `listxattr` of `path`: the names.
pub fn listxattr(path: &Path) -> Result<Vec<String>, i32> {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: as in `getxattr`.
    unsafe {
        let size = libc::listxattr(p.as_ptr(), std::ptr::null_mut(), 0);
        if size < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let mut buf = vec![0u8; size as usize];
        let got = libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len());
        if got < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        buf.truncate(got as usize);
        Ok(buf
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect())
    }
}

/// `setxattr`: the errno it fails with, or 0.
pub fn setxattr(path: &Path, name: &str, value: &[u8]) -> i32 {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: NUL-terminated strings and a live buffer of the given length.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    } else {
        0
    }
}

/// A small deterministic random generator (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Sha256 of the whole file read three ways: read(), pread() in odd pieces, mmap.
pub fn read_three_ways(p: &Path, len: usize) -> Result<String, String> {
    let whole = std::fs::read(p).map_err(|e| format!("read: {e}"))?;
    let h = sha256(&whole);
    let f = std::fs::File::open(p).map_err(|e| format!("open: {e}"))?;
    let mut pieces = vec![0u8; len];
    let mut off = 0;
    while off < len {
        let end = (off + 777).min(len);
        f.read_exact_at(&mut pieces[off..end], off as u64)
            .map_err(|e| format!("pread at {off}: {e}"))?;
        off = end;
    }
    if sha256(&pieces) != h {
        return Err("pread differs from read".into());
    }
    if len > 0 {
        let map = Mapping::new(&f, 0, len, false).map_err(|e| format!("mmap: {e}"))?;
        if sha256(map.bytes()) != h {
            return Err("mmap differs from read".into());
        }
    }
    Ok(h)
}

/// Open file descriptors of process `pid` (entries of `/proc/PID/fd`).
pub fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A `/proc/PID/status` size field (`VmHWM:`, `VmRSS:`) in KiB.
pub fn status_kib(pid: i32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples a process's open descriptors from a thread until dropped; the most seen.
pub struct FdWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl FdWatch {
    pub fn start(pid: i32) -> FdWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut most = 0;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(fd_count(pid));
                std::thread::sleep(Duration::from_millis(2));
            }
            most.max(fd_count(pid))
        });
        FdWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// Stop sampling; the most descriptors seen open at once.
    pub fn most(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

/// What a walk of a mounted tree sees at each path below `root`: kind, size, symlink text,
/// and the bytes' digest read three ways (or the errno reading them failed with).
pub fn walk(root: &Path) -> std::collections::BTreeMap<String, String> {
    let rel = |p: &Path| p.strip_prefix(root).unwrap().display().to_string();
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let mut names: Vec<_> = match std::fs::read_dir(&dir) {
            Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
            Err(e) => {
                out.insert(rel(&dir), format!("readdir: {:?}", e.raw_os_error()));
                continue;
            }
        };
        names.sort();
        for p in names {
            let md = std::fs::symlink_metadata(&p).unwrap();
            let what = if md.file_type().is_symlink() {
                format!("symlink {}", std::fs::read_link(&p).unwrap().display())
            } else if md.is_dir() {
                todo.push(p.clone());
                "dir".to_string()
            } else {
                let bytes = match read_three_ways(&p, md.len() as usize) {
                    Ok(h) => h,
                    Err(_) => format!(
                        "error {:?}",
                        std::fs::read(&p).err().and_then(|e| e.raw_os_error())
                    ),
                };
                format!("file {} {bytes}", md.len())
            };
            out.insert(rel(&p), what);
        }
    }
    out
}

/// The xattr on a mount's root whose value is its statistics.
pub use h5mount::fs::stats::STATS_XATTR;

/// The mount's statistics ([`STATS_XATTR`]: `key value` lines) as numbers; panics on a line
/// of another form.
pub fn stats(m: &Mount) -> std::collections::BTreeMap<String, u64> {
    let raw = getxattr(m.path(), STATS_XATTR)
        .unwrap_or_else(|e| panic!("{STATS_XATTR} on {}: errno {e}", m.path().display()));
    let text = String::from_utf8(raw).expect("statistics are text");
    text.lines()
        .map(|l| {
            let (k, v) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("statistics line {l:?}"));
            let v = v
                .parse()
                .unwrap_or_else(|_| panic!("statistics line {l:?}"));
            (k.to_string(), v)
        })
        .collect()
}

/// The symlink text h5mount gives an HDF5 soft link to `target` in the group at `parent`:
/// absolute targets climb to the mount root with one `..` per component of the parent.
pub fn soft_text(parent: &str, target: &str) -> String {
    if !target.starts_with('/') {
        return target.to_string();
    }
    let depth = parent.split('/').filter(|c| !c.is_empty()).count();
    let mut parts = vec![".."; depth];
    parts.extend(target.split('/').filter(|c| !c.is_empty() && *c != "."));
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// Python's rendering of a shape from a JSON array (`(3,)`, `(2, 5)`; `None` for no array,
/// as for a null dataspace), as `user.h5.shape` shows it.
pub fn py_tuple(v: &serde_json::Value) -> String {
    match v.as_array() {
        None => "None".into(),
        Some(a) => {
            let parts: Vec<String> = a
                .iter()
                .map(|d| d.as_u64().map_or("None".into(), |n| n.to_string()))
                .collect();
            if parts.len() == 1 {
                format!("({},)", parts[0])
            } else {
                format!("({})", parts.join(", "))
            }
        }
    }
}

/// The command mounting `url` (an S3 object or prefix) on `mountpoint` anonymously, through
/// the S3-compatible `endpoint`, with no AWS credentials in its environment.
pub fn anonymous_s3(url: &str, mountpoint: &Path, endpoint: &str) -> Command {
    let mut c = Command::new(BIN);
    c.arg(url)
        .arg(mountpoint)
        .args([
            "-o",
            &format!("endpoint={endpoint},no_sign_request,region=us-east-1"),
        ])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY");
    c
}
