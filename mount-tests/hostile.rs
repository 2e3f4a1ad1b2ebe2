//! Hostile input at the mount: a corrupt dataset fails alone, a panicking request is
//! contained, the file truncated or replaced while mounted, and the security rules (symlinks
//! and external files never lead outside, no writable modes, `default_permissions`).
//!
//! Fixtures are the small files of `mount-tests/fixtures/hostile/`, made by `make_hostile.py`
//! there; each test copies what it damages into a temp directory.

mod harness;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use harness::Mount;

/// The 16-byte pattern that fills the chunk of `victims.h5:/bad` 64 times.
const PATTERN: &[u8] = b"HOSTILE-CHUNK-0!";

fn fixture(name: &str) -> PathBuf {
    harness::fixture("hostile").join(name)
}

/// Copy fixture `name` into `dir`.
fn copy_to(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    fs::copy(fixture(name), &p).unwrap();
    p
}

/// The errno a whole-file read of `p` fails with, or `None` if it succeeds.
fn read_errno(p: &Path) -> Option<i32> {
    fs::read(p).err().map(|e| e.raw_os_error().unwrap_or(-1))
}

fn le_i4(n: i32) -> Vec<u8> {
    (0..n).flat_map(|i| i.to_le_bytes()).collect()
}

fn le_i8(n: i64) -> Vec<u8> {
    (0..n).flat_map(|i| i.to_le_bytes()).collect()
}

/// The datasets of `victims.h5` that must keep reading correctly.
fn check_good(m: &Mount) {
    assert_eq!(fs::read(m.at("/good_i4")).unwrap(), le_i4(1000));
    assert_eq!(fs::read(m.at("/good_gz")).unwrap(), le_i8(20000));
}

/// Run `f` on another thread; fail if it takes longer than 10 s (a hung read).
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("operation hung")
}

#[test]
fn a_corrupt_dataset_fails_with_eio_and_the_rest_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let file = copy_to(tmp.path(), "victims.h5");
    let mut bytes = fs::read(&file).unwrap();
    let at = bytes
        .windows(PATTERN.len())
        .position(|w| w == PATTERN)
        .expect("pattern chunk in victims.h5");
    bytes[at + 5] ^= 0x40;
    fs::write(&file, &bytes).unwrap();
    let m = Mount::background(&file, &[]);
    let pid = m.pid().expect("daemon");
    for _ in 0..3 {
        assert_eq!(read_errno(&m.at("/bad")), Some(libc::EIO));
        check_good(&m);
    }
    assert!(!harness::pid_gone(pid), "daemon died");
}

#[test]
fn a_panic_in_a_request_is_contained_and_logged() {
    if !cfg!(debug_assertions) {
        harness::skip("the panic trigger exists in debug builds only");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = copy_to(tmp.path(), "victims.h5");
    let log = tmp.path().join("h5mount.log");
    let m = Mount::by_command(|mp| {
        let mut c = Command::new(harness::BIN);
        c.arg(&file)
            .arg(mp)
            .arg("--log-file")
            .arg(&log)
            .env("H5MOUNT_TEST_PANIC_PATH", "/panic_here");
        c
    });
    let pid = m.pid().expect("daemon");
    for _ in 0..3 {
        assert_eq!(read_errno(&m.at("/panic_here")), Some(libc::EIO));
        check_good(&m);
    }
    assert!(!harness::pid_gone(pid), "daemon died");
    let text = fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("panic in read"), "log: {text}");
}

#[test]
fn a_file_truncated_while_mounted_gives_eio() {
    let tmp = tempfile::tempdir().unwrap();
    let file = copy_to(tmp.path(), "victims.h5");
    let m = Mount::background(&file, &[]);
    check_good(&m);
    // `tail` (256 KiB, last in the file) was never read: its bytes are gone.
    fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(40_000)
        .unwrap();
    let tail = m.at("/tail");
    assert_eq!(within_10s(move || read_errno(&tail)), Some(libc::EIO));
    // Everything already cached still reads; the daemon is alive and unmounts cleanly.
    assert!(!harness::pid_gone(m.pid().expect("daemon")));
    assert!(fs::read_dir(m.path()).unwrap().count() >= 5);
}

#[test]
fn a_file_replaced_while_mounted_keeps_serving_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let file = copy_to(tmp.path(), "victims.h5");
    let m = Mount::background(&file, &[]);
    let other = copy_to(tmp.path(), "links.h5");
    fs::rename(&other, &file).unwrap();
    check_good(&m);
    assert_eq!(fs::read(m.at("/tail")).unwrap(), le_i4(1 << 16));
    let names: Vec<String> = fs::read_dir(m.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"good_i4".to_string()), "{names:?}");
    assert!(!names.contains(&"up3".to_string()), "{names:?}");
}

#[test]
fn symlinks_never_lead_outside_the_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    fs::create_dir(&dir).unwrap();
    let file = copy_to(&dir, "links.h5");
    let log = tmp.path().join("h5mount.log");
    let log_arg = log.to_str().unwrap().to_string();
    let m = Mount::background(&file, &["--log-file", &log_arg]);
    let root = m.path().canonicalize().unwrap();
    let escapes = ["/up3", "/abs_up", "/g/h/mixed", "/ext_abs", "/ext_up"];
    for link in escapes {
        let p = m.at(link);
        let text = fs::read_link(&p).unwrap();
        let text = text.to_string_lossy();
        assert!(text.starts_with("h5mount-refused:"), "{link} -> {text}");
        assert!(!text.contains('/'), "{link} -> {text}");
        // Dangling: following it finds nothing.
        assert!(fs::metadata(&p).is_err(), "{link} resolves");
    }
    for (link, want) in [("/g/h/good_abs", "../../data"), ("/good_rel", "data")] {
        assert_eq!(fs::read_link(m.at(link)).unwrap(), Path::new(want));
        assert_eq!(fs::read(m.at(link)).unwrap(), le_i4(4), "{link}");
    }
    assert_eq!(
        fs::read_link(m.at("/ext_ok")).unwrap(),
        Path::new("sibling.h5::/x")
    );
    // Whatever resolves, resolves inside the mount.
    for link in [
        "/up3",
        "/abs_up",
        "/g/h/mixed",
        "/g/h/good_abs",
        "/good_rel",
        "/ext_ok",
    ] {
        if let Ok(real) = fs::canonicalize(m.at(link)) {
            assert!(real.starts_with(&root), "{link} -> {}", real.display());
        }
    }
    let text = fs::read_to_string(&log).unwrap_or_default();
    for link in escapes {
        let n = text
            .lines()
            .filter(|l| l.contains(&format!("{link:?} would lead outside")))
            .count();
        assert_eq!(n, 1, "{link} logged {n} times: {text}");
    }
}

#[test]
fn link_names_the_kernel_cannot_take_are_skipped_and_logged_once() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("h5mount.log");
    let log_arg = log.to_str().unwrap().to_string();
    let m = Mount::background(&fixture("links.h5"), &["--log-file", &log_arg]);
    for _ in 0..3 {
        let names: Vec<String> = fs::read_dir(m.at("/names"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["ok"]);
    }
    assert_eq!(fs::read(m.at("/names/ok")).unwrap(), le_i4(2));
    assert_eq!(
        fs::metadata(m.at("/names/Zz")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    // `..` is the kernel's: the parent directory, not the dataset named `..`.
    let up = fs::metadata(m.at("/names/..")).unwrap();
    assert!(up.is_dir());
    assert_eq!(up.ino(), 1);
    let text = fs::read_to_string(&log).unwrap_or_default();
    for bad in ["\"/names/Zz/Zz\"", "\"/names/..\""] {
        let n = text
            .lines()
            .filter(|l| l.contains(&format!("skipping link {bad}")))
            .count();
        assert_eq!(n, 1, "{bad} logged {n} times: {text}");
    }
}

#[test]
fn external_storage_outside_the_file_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    fs::create_dir(&dir).unwrap();
    let file = copy_to(&dir, "extstore.h5");
    let inside: Vec<u8> = (0..16).collect();
    let outside: Vec<u8> = (100..116).collect();
    fs::write(dir.join("inside.bin"), &inside).unwrap();
    fs::write(tmp.path().join("outside.bin"), &outside).unwrap();
    {
        let m = Mount::background(&file, &[]);
        assert_eq!(fs::read(m.at("/inside")).unwrap(), inside);
        // The vlen dataset's file is its text view, which reads the stored references
        // through the same refused storage.
        for name in ["/outside", "/absolute", "/vlen_outside"] {
            assert_eq!(
                read_errno(&m.at(name)),
                Some(libc::EOPNOTSUPP),
                "{name} read"
            );
        }
    }
    let m = Mount::background(&file, &["-o", "allow_external_paths"]);
    assert_eq!(fs::read(m.at("/inside")).unwrap(), inside);
    assert_eq!(fs::read(m.at("/outside")).unwrap(), outside);
}

#[test]
fn permissions_are_read_only_and_checked_by_the_kernel() {
    let m = Mount::background(&fixture("victims.h5"), &[]);
    let line = harness::mount_line(m.path()).expect("in /proc/mounts");
    assert!(line.contains("default_permissions"), "{line}");
    assert!(!line.contains("allow_other"), "{line}");
    let mut n = 0;
    let mut stack = vec![m.path().to_path_buf()];
    while let Some(p) = stack.pop() {
        let md = fs::symlink_metadata(&p).unwrap();
        if !md.file_type().is_symlink() {
            assert_eq!(md.permissions().mode() & 0o222, 0, "{}", p.display());
            n += 1;
        }
        if md.is_dir() {
            stack.extend(fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
        assert!(md.uid() == m.path().metadata().unwrap().uid());
    }
    assert!(n >= 6);
    let err = fs::OpenOptions::new()
        .write(true)
        .open(m.at("/good_i4"))
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    drop(m);
    let m = Mount::background(&fixture("victims.h5"), &["-o", "allow_other"]);
    let line = harness::mount_line(m.path()).expect("in /proc/mounts");
    assert!(line.contains("allow_other"), "{line}");
}
