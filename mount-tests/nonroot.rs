//! Mounts by an ordinary user (issue 17): the whole mount works without root, and a FUSE
//! device the user cannot open fails with a message that says what to do.
//!
//! The tests run as root (as CI does) and act as a system user made for them (`USER`, made
//! with `useradd` when missing) through `runuser`. The user's processes cannot read the
//! checkout (it may sit in root's home), so each test copies the binary, the fixture and this
//! test binary into a world-readable temporary directory. Root cannot look inside the user's
//! mount either (no `allow_other`): what the user sees is read by this test binary run again
//! as the user (the ignored test [`user_side`]), and compared with a root mount of the same
//! file.
//!
//! `/dev/fuse` is set to mode 0666 or 0600 for a test and put back after it; the tests that
//! change it hold one lock. Root passes the device's permission checks either way, so other
//! tests are not affected.

mod harness;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

use harness::{daemon_pid, is_mounted, mount_line, pid_gone, wait_for, walk, Mount, BIN};

/// The ordinary user the tests mount as.
const USER: &str = "h5mount-test";
/// The variable that turns [`user_side`] on: the mountpoint to walk.
const WALK_ENV: &str = "H5MOUNT_NONROOT_WALK";
/// The FUSE device.
const DEV: &str = "/dev/fuse";

/// Held while a test has changed the mode of `/dev/fuse`.
static DEV_MODE: Mutex<()> = Mutex::new(());

fn fixture() -> PathBuf {
    harness::fixture("data/layouts_earliest.h5")
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The test user's uid and gid, made first if missing.
fn test_user() -> (u32, u32) {
    let id = |flag: &str| {
        Command::new("id")
            .args([flag, USER])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
    };
    if id("-u").is_none() {
        let st = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status()
            .expect("useradd");
        // Another test may have made it meanwhile.
        assert!(st.success() || id("-u").is_some(), "useradd {USER}: {st}");
    }
    (id("-u").unwrap(), id("-g").unwrap())
}

/// `/dev/fuse` with another mode for the life of the guard.
struct DevMode {
    old: u32,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl DevMode {
    fn set(mode: u32) -> DevMode {
        let lock = DEV_MODE.lock().unwrap_or_else(|e| e.into_inner());
        let old = std::fs::metadata(DEV).unwrap().permissions().mode() & 0o7777;
        std::fs::set_permissions(DEV, std::fs::Permissions::from_mode(mode)).unwrap();
        DevMode { old, _lock: lock }
    }
}

impl Drop for DevMode {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(DEV, std::fs::Permissions::from_mode(self.old));
    }
}

/// A world-readable directory holding copies of the binary, this test binary and the
/// fixture, and a mountpoint owned by the test user; unmounted on drop.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let (uid, gid) = test_user();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(BIN, p.join("h5mount")).unwrap();
        std::fs::copy(std::env::current_exe().unwrap(), p.join("tests")).unwrap();
        std::fs::copy(fixture(), p.join("f.h5")).unwrap();
        std::fs::set_permissions(p.join("f.h5"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::create_dir(p.join("mnt")).unwrap();
        std::os::unix::fs::chown(p.join("mnt"), Some(uid), Some(gid)).unwrap();
        // The log file is the user's to write.
        std::fs::write(p.join("log"), b"").unwrap();
        std::os::unix::fs::chown(p.join("log"), Some(uid), Some(gid)).unwrap();
        Sandbox { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Run `args` as the test user.
    fn as_user(&self, args: &[&std::ffi::OsStr]) -> Output {
        Command::new("runuser")
            .args(["-u", USER, "--"])
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("runuser")
    }

    /// Mount the fixture as the test user, in the background.
    fn mount(&self) -> Output {
        let (bin, log, file, mnt) = (
            self.path("h5mount"),
            self.path("log"),
            self.path("f.h5"),
            self.path("mnt"),
        );
        self.as_user(&[
            bin.as_os_str(),
            "-v".as_ref(),
            "--log-file".as_ref(),
            log.as_os_str(),
            file.as_os_str(),
            mnt.as_os_str(),
        ])
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let mnt = self.path("mnt");
        if is_mounted(&mnt) {
            let pid = daemon_pid(&mnt);
            let _ = Command::new("fusermount3").arg("-uz").arg(&mnt).status();
            if let Some(pid) = pid {
                if !wait_for(|| pid_gone(pid)) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}

/// Run as the test user by the tests below (not on its own): print what the mount at
/// `$H5MOUNT_NONROOT_WALK` shows, as JSON lines between markers.
#[test]
#[ignore = "run as another user by the tests of this file"]
fn user_side() {
    let root = PathBuf::from(std::env::var_os(WALK_ENV).expect("H5MOUNT_NONROOT_WALK"));
    let tree = walk(&root);
    let names = harness::listxattr(&root.join("contiguous_f4")).unwrap_or_default();
    let shape = harness::getxattr(&root.join("contiguous_f4"), "user.h5.shape")
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_else(|e| format!("errno {e}"));
    let out = serde_json::json!({"tree": tree, "xattrs": names, "shape": shape});
    println!("@@{out}@@");
}

/// What [`user_side`] printed.
fn user_view(sb: &Sandbox) -> serde_json::Value {
    let mnt = sb.path("mnt");
    let tests = sb.path("tests");
    let env = format!("{WALK_ENV}={}", mnt.display());
    let out = sb.as_user(&[
        "env".as_ref(),
        env.as_ref(),
        tests.as_os_str(),
        "--exact".as_ref(),
        "user_side".as_ref(),
        "--ignored".as_ref(),
        "--nocapture".as_ref(),
        "--test-threads=1".as_ref(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = text
        .split("@@")
        .nth(1)
        .unwrap_or_else(|| panic!("no output: {text}"));
    serde_json::from_str(json).unwrap()
}

/// What root sees of the same file through its own mount.
fn root_view() -> serde_json::Value {
    let m = Mount::background(&fixture(), &[]);
    let tree = walk(m.path());
    let names = harness::listxattr(&m.at("/contiguous_f4")).unwrap();
    let shape =
        String::from_utf8(harness::getxattr(&m.at("/contiguous_f4"), "user.h5.shape").unwrap())
            .unwrap();
    serde_json::json!({"tree": tree, "xattrs": names, "shape": shape})
}

#[test]
fn an_ordinary_user_mounts_reads_and_unmounts() {
    if !is_root() {
        harness::skip("the test acts as another user and needs root to do so");
        return;
    }
    let want = root_view();
    assert!(want["tree"].as_object().unwrap().len() > 5, "{want}");
    let _mode = DevMode::set(0o666);
    let sb = Sandbox::new();
    let mnt = sb.path("mnt");
    let out = sb.mount();
    assert!(
        out.status.success(),
        "mount as {USER}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Background mode: mounted when the command returns, by the user.
    let line = mount_line(&mnt).expect("mounted");
    let (uid, _) = test_user();
    assert!(line.contains(&format!("user_id={uid}")), "{line}");
    let pid = daemon_pid(&mnt).expect("daemon");
    // Reads with read(), pread() and mmap, listings, symlinks and xattrs: as root sees them.
    let got = user_view(&sb);
    assert_eq!(got, want);
    // Readahead cannot be raised without root: the log says so at info level, and how.
    let log = std::fs::read_to_string(sb.path("log")).unwrap();
    assert!(
        log.contains("INFO") && log.contains("readahead stays at") && log.contains("read_ahead_kb"),
        "{log}"
    );
    // The user unmounts with fusermount3; the daemon ends.
    let out = sb.as_user(&["fusermount3".as_ref(), "-u".as_ref(), mnt.as_os_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(wait_for(|| !is_mounted(&mnt)));
    assert!(wait_for(|| pid_gone(pid)), "daemon {pid} still running");
}

#[test]
fn a_fuse_device_the_user_cannot_open_fails_with_what_to_do() {
    if !is_root() {
        harness::skip("the test acts as another user and needs root to do so");
        return;
    }
    let _mode = DevMode::set(0o600);
    let sb = Sandbox::new();
    let mnt = sb.path("mnt");
    let out = sb.mount();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "mounted with /dev/fuse 0600: {err}");
    // Tried the setuid helper, as libfuse does, and says what the administrator can do.
    assert!(
        err.contains("/dev/fuse cannot be opened by this user"),
        "{err}"
    );
    assert!(err.contains("fusermount3"), "{err}");
    assert!(err.contains("0666"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!is_mounted(&mnt));
    assert!(daemon_pid(&mnt).is_none(), "a daemon is left");
}

/// The helper path itself (the descriptor passed back by fusermount3, a session on it,
/// unmounting through the helper on SIGTERM), forced for root, whose device always opens.
#[test]
fn a_mount_through_fusermount3_serves_and_unmounts() {
    let file = fixture();
    let want = {
        let m = Mount::background(&file, &[]);
        walk(m.path())
    };
    let log = tempfile::NamedTempFile::new().unwrap();
    let m = Mount::by_command(|mnt| {
        let mut c = Command::new(BIN);
        c.env("H5MOUNT_TEST_VIA_FUSERMOUNT", "1")
            .arg("-v")
            .arg("--log-file")
            .arg(log.path())
            .arg(&file)
            .arg(mnt);
        c
    });
    assert_eq!(walk(m.path()), want);
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert!(text.contains("mounted through fusermount3"), "{text}");
    let pid = m.pid().expect("daemon");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(wait_for(|| !is_mounted(m.path())), "still mounted");
    assert!(wait_for(|| pid_gone(pid)), "daemon {pid} still running");
}
