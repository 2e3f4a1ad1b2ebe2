//! Real-mount tests: the `h5mount` binary mounted on temp directories through /dev/fuse.
//!
//! The daemon tests (background/foreground, signals, unmount, bad input, read-only) use a
//! small HDF5 file embedded in the harness and always run. The content tests walk the fixture
//! corpus described by `mount-tests/fixtures/manifest.json` (h5py's view of each file) and
//! compare the tree, bytes (read, pread, dd, mmap) and xattrs. The corpus is part of the
//! tree: without it they fail, they do not pass having checked nothing.

mod harness;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::{getxattr, is_mounted, listxattr, py_tuple, setxattr, sha256, soft_text, Mount, Rng};
use nix::sys::signal::Signal;
use serde_json::Value;

// ---------------------------------------------------------------- daemon behaviour

#[test]
fn background_mode_returns_ready_and_sigterm_unmounts() {
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    let m = Mount::background(&file, &[]);
    let line = harness::mount_line(m.path()).expect("in /proc/mounts");
    assert!(line.contains(" fuse.h5mount "), "{line}");
    assert!(line.contains(" ro,"), "{line}");
    let pid = m.pid().expect("daemon process");
    m.signal(Signal::SIGTERM);
    assert!(harness::wait_for(|| !is_mounted(m.path())), "still mounted");
    assert!(
        harness::wait_for(|| harness::pid_gone(pid)),
        "daemon still running"
    );
}

/// A daemon that ends after its mount was unmounted from outside leaves alone whatever is
/// mounted on the same directory by then (fuser's own clean-up unmounted the path again,
/// taking down a new mount there). The first daemon is held stopped until the second
/// mount answers, so the order is certain.
#[test]
fn an_ending_daemon_leaves_a_new_mount_of_its_directory_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    let dir = tmp.path().join("mnt");
    fs::create_dir(&dir).unwrap();
    let mount = |other: Option<i32>| {
        let out = harness::run(&[file.as_os_str(), dir.as_os_str()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        harness::daemon_pids(&dir)
            .into_iter()
            .find(|&p| Some(p) != other)
            .expect("the daemon's pid")
    };
    let unmount_outside = || {
        let st = Command::new("fusermount3").arg("-u").arg(&dir).status();
        if !st.is_ok_and(|s| s.success()) {
            assert!(Command::new("umount").arg(&dir).status().unwrap().success());
        }
    };
    let first = mount(None);
    let first_pid = nix::unistd::Pid::from_raw(first);
    // Whatever happens below: the first daemon goes on, and the directory is unmounted.
    struct Cleanup<'a>(nix::unistd::Pid, &'a Path);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            let _ = nix::sys::signal::kill(self.0, Signal::SIGCONT);
            if is_mounted(self.1) {
                let _ = Command::new("fusermount3").arg("-uz").arg(self.1).status();
            }
        }
    }
    let _cleanup = Cleanup(first_pid, &dir);
    nix::sys::signal::kill(first_pid, Signal::SIGSTOP).unwrap();
    // Unmounted from outside while its daemon cannot act.
    unmount_outside();
    assert!(harness::wait_for(|| !is_mounted(&dir)));
    let second = mount(Some(first));
    nix::sys::signal::kill(first_pid, Signal::SIGCONT).unwrap();
    assert!(
        harness::wait_for(|| harness::pid_gone(first)),
        "the first daemon ended"
    );
    assert!(
        is_mounted(&dir),
        "the new mount was taken down by the old daemon"
    );
    assert_eq!(fs::metadata(&dir).unwrap().ino(), 1);
    unmount_outside();
    assert!(harness::wait_for(|| harness::pid_gone(second)));
}

#[test]
fn foreground_sigterm_and_sigint_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        let mut m = Mount::foreground(&file, &[]);
        m.signal(sig);
        assert_eq!(m.wait_exit(), Some(0), "{sig}");
        assert!(!is_mounted(m.path()));
    }
}

#[test]
fn the_daemon_raises_its_open_file_limit_to_the_hard_one() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if hard <= 1024 {
        harness::skip(&format!(
            "the hard limit on open files is {hard}, nothing to raise to"
        ));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    // The daemon inherits a soft limit below the hard one (other tests' daemons started
    // meanwhile inherit it too, and raise it as well).
    setrlimit(Resource::RLIMIT_NOFILE, 1024, hard).unwrap();
    let m = Mount::foreground(&file, &[]);
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
    let pid = m.pid().expect("daemon process");
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("open files line");
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums, vec![hard, hard], "{line}");
}

#[test]
fn fusermount_and_umount_end_the_daemon_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    for tool in [&["fusermount3", "-u"][..], &["umount"][..]] {
        let mut m = Mount::foreground(&file, &[]);
        let st = Command::new(tool[0])
            .args(&tool[1..])
            .arg(m.path())
            .status()
            .unwrap();
        assert!(st.success(), "{tool:?}");
        assert_eq!(m.wait_exit(), Some(0), "{tool:?}");
    }
}

#[test]
fn bad_inputs_exit_2_and_mount_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let good = harness::empty_h5(tmp.path());
    let not_h5 = tmp.path().join("not.h5");
    fs::write(
        &not_h5,
        b"this is not an HDF5 file at all, just some text\n",
    )
    .unwrap();
    let truncated = tmp.path().join("trunc.h5");
    fs::write(&truncated, &fs::read(&good).unwrap()[..40]).unwrap();
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let missing = tmp.path().join("missing");
    let o = OsStr::new;
    let cases: Vec<Vec<&OsStr>> = vec![
        vec![not_h5.as_os_str(), mnt.as_os_str()],
        vec![truncated.as_os_str(), mnt.as_os_str()],
        vec![missing.as_os_str(), mnt.as_os_str()],
        vec![good.as_os_str(), missing.as_os_str()],
        vec![good.as_os_str(), not_h5.as_os_str()],
        vec![
            good.as_os_str(),
            mnt.as_os_str(),
            o("-o"),
            o("bogus_option"),
        ],
        vec![
            good.as_os_str(),
            mnt.as_os_str(),
            o("-o"),
            o("allow_other,allow_root"),
        ],
    ];
    for args in cases {
        let out = harness::run(&args);
        let leaked = is_mounted(&mnt);
        if leaked {
            // Do not leave a mount (and its daemon) behind when this test fails.
            let _ = Command::new("fusermount3").arg("-u").arg(&mnt).status();
        }
        assert!(!leaked, "{args:?} mounted something");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?}: no message");
    }
    let out = harness::run(&[o("inspect"), not_h5.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn mount_fuse3_style_invocation_and_options() {
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    // What mount.fuse3 runs for `mount -t fuse.h5mount FILE DIR -o ro,...` as root.
    let m = Mount::background(
        &file,
        &[
            "-o",
            "ro,dev,suid,nofail,_netdev,x-systemd.automount",
            "-o",
            "fsname=h5test",
        ],
    );
    let line = harness::mount_line(m.path()).unwrap();
    assert!(line.starts_with("h5test "), "{line}");
    assert!(line.contains("nosuid") && line.contains("nodev"), "{line}");
    assert!(line.contains("default_permissions"), "{line}");
    drop(m);
    let m = Mount::background(
        &file,
        &["-o", "nodefault_permissions,threads=2,cache_size=8M"],
    );
    let line = harness::mount_line(m.path()).unwrap();
    assert!(!line.contains("default_permissions"), "{line}");
    drop(m);
    // An fstab line without `ro` gets `rw` from mount(8): accepted, and still read-only.
    let m = Mount::background(&file, &["-o", "rw,nofail"]);
    let line = harness::mount_line(m.path()).unwrap();
    assert!(line.split([' ', ',']).any(|w| w == "ro"), "{line}");
    assert!(erofs(fs::File::create(m.at("/new"))));
}

#[test]
fn mount_t_fuse_through_the_mount_fuse3_helper() {
    // `mount -t fuse "PROGRAM#SOURCE"` makes mount.fuse3 run `PROGRAM SOURCE DIR -o OPTS`:
    // the fstab/`mount -t fuse.h5mount` path, without installing the binary in PATH.
    let root = nix::unistd::geteuid().is_root();
    if !root || Command::new("mount.fuse3").arg("-h").output().is_err() {
        harness::skip("needs root and mount.fuse3");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    let source = format!("{}#{}", harness::BIN, file.display());
    let m = Mount::by_command(|mp| {
        let mut c = Command::new("mount");
        c.args(["-t", "fuse", &source])
            .arg(mp)
            .args(["-o", "ro,nofail,allow_other,x-test=1"]);
        c
    });
    let line = harness::mount_line(m.path()).unwrap();
    assert!(line.contains(" fuse.h5mount ro,"), "{line}");
    assert!(line.contains("allow_other"), "{line}");
    drop(m);
    // Without `ro`, mount(8) passes `rw`: accepted, and the mount is read-only anyway.
    let m = Mount::by_command(|mp| {
        let mut c = Command::new("mount");
        c.args(["-t", "fuse", &source]).arg(mp);
        c
    });
    let line = harness::mount_line(m.path()).unwrap();
    assert!(line.contains(" fuse.h5mount ro,"), "{line}");
    assert!(erofs(fs::File::create(m.at("/new"))));
}

#[test]
fn root_is_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let file = harness::empty_h5(tmp.path());
    let m = Mount::background(&file, &[]);
    let root = m.path();
    let meta = fs::metadata(root).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o555);
    assert_eq!(meta.uid(), fs::metadata(&file).unwrap().uid());
    assert!(erofs(fs::create_dir(root.join("d"))));
    assert!(erofs(fs::write(root.join("new"), b"x")));
    assert_eq!(setxattr(root, "user.x", b"1"), libc::EROFS);
    let st = nix::sys::statvfs::statvfs(root).unwrap();
    assert!(st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY));
}

fn erofs<T>(r: std::io::Result<T>) -> bool {
    matches!(r, Err(e) if e.raw_os_error() == Some(libc::EROFS))
}

// ---------------------------------------------------------------- fixture corpus

/// The manifest of the fixture corpus (committed with the tests: missing is a failure).
fn manifest() -> &'static Value {
    let m = harness::manifest();
    assert!(
        m["files"].as_object().is_some_and(|f| !f.is_empty()),
        "mount-tests/fixtures/manifest.json: no files (see mount-tests/fixtures/README.md)"
    );
    m
}

/// (file name, objects) for each fixture file.
fn files(m: &Value) -> Vec<(String, BTreeMap<String, Value>)> {
    let files = m["files"].as_object().expect("files");
    files
        .iter()
        .map(|(name, f)| {
            let objs = f["objects"].as_object().expect("objects");
            let objs = objs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            (name.clone(), objs)
        })
        .collect()
}

fn data_file(name: &str) -> PathBuf {
    harness::data_dir().join(name)
}

/// Whether the kernel can show this name (h5mount skips the others).
fn showable(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && name.len() <= 255
}

fn path_showable(path: &str) -> bool {
    path.split('/')
        .skip(1)
        .filter(|c| !c.is_empty())
        .all(showable)
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Datasets whose bytes the manifest pins down (fixed-size types).
/// Datasets this build cannot serve: filters it does not decode. Their reads must fail with
/// EOPNOTSUPP (checked in `unsupported_datasets_fail_with_eopnotsupp`).
fn unsupported(o: &Value) -> bool {
    o["filters"].as_array().is_some_and(|fl| {
        fl.iter()
            .any(|f| !h5mount::filters::is_supported(f["id"].as_u64().unwrap_or(0) as u16))
    })
}

/// (path, nbytes, sha256 of the stored representation) of every dataset with a byte image.
/// Where libhdf5 converts on read (space-padded strings, n-bit offsets) the manifest also has
/// the digest of the stored bytes, which is what h5mount serves.
fn checked_datasets(objs: &BTreeMap<String, Value>) -> Vec<(String, u64, String)> {
    objs.iter()
        .filter(|(p, o)| o["kind"] == "dataset" && path_showable(p) && !unsupported(o))
        .filter_map(|(p, o)| {
            let sha = o["raw_sha256"].as_str().or(o["sha256"].as_str())?;
            Some((p.clone(), o["nbytes"].as_u64()?, sha.to_string()))
        })
        .collect()
}

#[test]
fn unsupported_datasets_fail_with_eopnotsupp() {
    let man = manifest();
    let mut failures = Vec::new();
    let mut seen = 0;
    for (name, objs) in files(man) {
        let sets: Vec<&String> = objs
            .iter()
            .filter(|(p, o)| o["kind"] == "dataset" && path_showable(p) && unsupported(o))
            .map(|(p, _)| p)
            .collect();
        if sets.is_empty() {
            continue;
        }
        let m = Mount::background(&data_file(&name), &[]);
        for path in sets {
            seen += 1;
            match fs::read(m.at(path)) {
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
                other => failures.push(format!("{name}:{path}: {:?}", other.map(|b| b.len()))),
            }
        }
        // The rest of the mount keeps working.
        if fs::read_dir(m.at("/")).is_err() {
            failures.push(format!("{name}: root unreadable after failed reads"));
        }
    }
    eprintln!("{seen} datasets with filters this build lacks");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn tree_matches_manifest() {
    let man = manifest();
    let mut failures = Vec::new();
    let all = files(man);
    for (name, objs) in all.clone() {
        let m = Mount::background(&data_file(&name), &[]);
        let root_addr = objs.get("/").and_then(|o| o["addr"].as_u64());
        for (path, o) in &objs {
            if !path_showable(path) {
                continue;
            }
            let p = m.at(path);
            let kind = o["kind"].as_str().unwrap_or("");
            // A group reachable by several hard links is a directory at one path and a
            // symlink to it at the others (Linux directories have one parent).
            let aliased = kind == "group"
                && objs.iter().any(|(q, other)| {
                    q != path && other["addr"] == o["addr"] && !o["addr"].is_null()
                });
            let lmeta = fs::symlink_metadata(&p);
            let follow = aliased && lmeta.as_ref().is_ok_and(|md| md.file_type().is_symlink());
            let meta = match if follow { fs::metadata(&p) } else { lmeta } {
                Ok(md) => md,
                Err(e) => {
                    failures.push(format!("{name}:{path}: stat: {e}"));
                    continue;
                }
            };
            if let (Some(addr), Some(root)) = (o["addr"].as_u64(), root_addr) {
                let want = if addr == root { 1 } else { addr + 2 };
                if meta.ino() != want {
                    failures.push(format!("{name}:{path}: ino {} != {want}", meta.ino()));
                }
            }
            let problem = match kind {
                "group" => check_group(&p, &meta, o),
                "dataset" => check_file(&meta, o, o["sha256"].as_str().and(o["nbytes"].as_u64())),
                "datatype" => check_file(&meta, o, Some(0)),
                "softlink" => check_link(
                    &p,
                    &meta,
                    &soft_text(parent_of(path), o["target"].as_str().unwrap_or("")),
                ),
                "extlink" => {
                    let (file, opath) = (
                        o["file"].as_str().unwrap_or(""),
                        o["path"].as_str().unwrap_or(""),
                    );
                    // Followed when the target file and object exist (the corpus's targets
                    // sit beside their links' files): the target object is shown here.
                    let target = all
                        .iter()
                        .find(|(n, _)| n == file)
                        .and_then(|(_, t)| t.get(opath));
                    match target {
                        Some(t) if t["kind"] == "group" => check_group(&p, &meta, t),
                        Some(t) if t["kind"] == "dataset" => {
                            check_file(&meta, t, t["sha256"].as_str().and(t["nbytes"].as_u64()))
                        }
                        _ => check_link(&p, &meta, &format!("{file}::{opath}")),
                    }
                }
                _ => None,
            };
            if let Some(msg) = problem {
                failures.push(format!("{name}:{path}: {msg}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn check_group(p: &Path, meta: &fs::Metadata, o: &Value) -> Option<String> {
    if !meta.is_dir() {
        return Some("not a directory".into());
    }
    if meta.permissions().mode() & 0o777 != 0o555 {
        return Some(format!("mode {:o}", meta.permissions().mode()));
    }
    let links = o["links"].as_array()?;
    let mut want: Vec<String> = links
        .iter()
        .filter_map(|l| l.as_str())
        .filter(|l| showable(l))
        .map(String::from)
        .collect();
    want.sort();
    let mut got: Vec<String> = match fs::read_dir(p) {
        Ok(rd) => rd
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()
            .ok()?,
        Err(e) => return Some(format!("readdir: {e}")),
    };
    got.sort();
    (got != want).then(|| format!("entries differ: got {} want {}", got.len(), want.len()))
}

fn check_file(meta: &fs::Metadata, _o: &Value, size: Option<u64>) -> Option<String> {
    if !meta.is_file() {
        return Some("not a regular file".into());
    }
    if meta.permissions().mode() & 0o777 != 0o444 {
        return Some(format!("mode {:o}", meta.permissions().mode()));
    }
    match size {
        Some(s) if s != meta.len() => Some(format!("size {} != {s}", meta.len())),
        _ => None,
    }
}

fn check_link(p: &Path, meta: &fs::Metadata, want: &str) -> Option<String> {
    if !meta.file_type().is_symlink() {
        return Some("not a symlink".into());
    }
    match fs::read_link(p) {
        Ok(t) if t.as_os_str() == OsStr::new(want) => None,
        Ok(t) => Some(format!("symlink text {t:?} != {want:?}")),
        Err(e) => Some(format!("readlink: {e}")),
    }
}

#[test]
fn bytes_match_manifest_through_read_pread_dd_and_mmap() {
    let man = manifest();
    let mut failures = Vec::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (name, objs) in files(man) {
        let sets = checked_datasets(&objs);
        if sets.is_empty() {
            continue;
        }
        let m = Mount::background(&data_file(&name), &[]);
        for (path, nbytes, sha) in sets {
            let p = m.at(&path);
            let whole = match fs::read(&p) {
                Ok(b) => b,
                Err(e) => {
                    failures.push(format!("{name}:{path}: read: {e}"));
                    continue;
                }
            };
            if whole.len() as u64 != nbytes || sha256(&whole) != sha {
                failures.push(format!(
                    "{name}:{path}: read() bytes differ ({} bytes)",
                    whole.len()
                ));
                continue;
            }
            // pread at random offsets and lengths, including past the end.
            let f = fs::File::open(&p).unwrap();
            for _ in 0..16 {
                let off = rng.below(nbytes + 8);
                let len = 1 + rng.below(1 << 17) as usize;
                let mut buf = vec![0u8; len];
                let n = read_full_at(&f, &mut buf, off);
                let start = (off as usize).min(whole.len());
                let end = (start + len).min(whole.len());
                if buf[..n] != whole[start..end] {
                    failures.push(format!("{name}:{path}: pread({off}, {len}) differs"));
                    break;
                }
            }
            if nbytes > 0 {
                for shared in [true, false] {
                    match mmap_sha(&p, nbytes as usize, shared) {
                        Ok(h) if h == sha => {}
                        Ok(_) => {
                            failures.push(format!("{name}:{path}: mmap(shared={shared}) differs"))
                        }
                        Err(e) => failures.push(format!("{name}:{path}: mmap: {e}")),
                    }
                }
            }
            if nbytes >= 1 << 16 {
                let out = Command::new("dd")
                    .arg(format!("if={}", p.display()))
                    .args(["bs=1M", "status=none"])
                    .output()
                    .unwrap();
                if !out.status.success() || sha256(&out.stdout) != sha {
                    failures.push(format!("{name}:{path}: dd bs=1M differs"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn read_full_at(f: &fs::File, buf: &mut [u8], off: u64) -> usize {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) => panic!("pread: {e}"),
        }
    }
    done
}

/// sha256 of the file's bytes seen through a read-only mmap.
fn mmap_sha(p: &Path, len: usize, shared: bool) -> nix::Result<String> {
    Ok(sha256(harness::Mapping::of(p, len, shared)?.bytes()))
}

/// A number as numpy prints it: real (`1.`, `2.5e-05`, `nan`) or complex (`1.+2.j`, `(1+2j)`).
fn parse_num(t: &str) -> Option<(f64, f64)> {
    if let Ok(x) = t.parse::<f64>() {
        return Some((x, 0.0));
    }
    let body = t.strip_suffix('j')?;
    // Split at the sign that starts the imaginary part (not one after an exponent 'e').
    let b = body.as_bytes();
    let cut = (1..b.len())
        .rev()
        .find(|&i| (b[i] == b'+' || b[i] == b'-') && b[i - 1] != b'e')?;
    let re = body[..cut].parse::<f64>().ok()?;
    let im = body[cut..].trim_start_matches('+').parse::<f64>().ok()?;
    Some((re, im))
}

/// Equal up to the digits numpy printed (it rounds to 8 significant digits, fewer for f2).
fn close(x: f64, y: f64, printed: &str) -> bool {
    if x == y || (x.is_nan() && y.is_nan()) {
        return true;
    }
    let mantissa = printed.split(['e', 'j']).next().unwrap_or("");
    let digits = mantissa
        .trim_start_matches(['-', '+', '0', '.'])
        .chars()
        .filter(char::is_ascii_digit)
        .count()
        .max(1) as i32;
    (x - y).abs() <= 0.5 * 10f64.powi(1 - digits) * x.abs().max(y.abs()) * 1.0001
}

/// Attribute text equal to numpy's `str()`: strings exactly; numbers compared as numbers, token
/// by token, since numpy pads array columns (`[1.  2.5]` is `[1.0 2.5]`) and rounds to 8 digits.
fn same_rendering(got: &str, want: &str) -> bool {
    if got == want {
        return true;
    }
    let toks = |s: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in s.replace(['[', ']', '(', ')', ','], " ").split_whitespace() {
            // numpy pads complex columns inside the number: "1. +2.j" is one value.
            let imag_part = (t.starts_with('+') || t.starts_with('-')) && t.ends_with('j');
            match out.last_mut() {
                Some(prev) if imag_part && !prev.ends_with('j') => prev.push_str(t),
                _ => out.push(t.to_string()),
            }
        }
        out
    };
    let (g, w) = (toks(got), toks(want));
    g.len() == w.len()
        && g.iter().zip(&w).all(|(a, b)| {
            a == b
                || match (parse_num(a), parse_num(b)) {
                    (Some((ar, ai)), Some((br, bi))) => close(ar, br, b) && close(ai, bi, b),
                    _ => false,
                }
        })
}

#[test]
fn xattrs_match_manifest() {
    let man = manifest();
    let mut failures = Vec::new();
    for (name, objs) in files(man) {
        let m = Mount::background(&data_file(&name), &[]);
        for (path, o) in &objs {
            if !path_showable(path)
                || !matches!(o["kind"].as_str(), Some("dataset" | "group" | "datatype"))
            {
                continue;
            }
            let p = m.at(path);
            let mut want: Vec<(String, Result<String, i32>)> = Vec::new();
            if o["kind"] == "datatype" {
                want.push((
                    "user.h5.dtype".into(),
                    Ok(o["dtype"].as_str().unwrap_or("").into()),
                ));
            }
            if o["kind"] == "dataset" {
                want.push((
                    "user.h5.dtype".into(),
                    Ok(o["dtype"].as_str().unwrap_or("").into()),
                ));
                want.push(("user.h5.shape".into(), Ok(py_tuple(&o["shape"]))));
                want.push((
                    "user.h5.layout".into(),
                    Ok(o["layout"].as_str().unwrap_or("").into()),
                ));
                if o["chunks"].is_array() {
                    want.push(("user.h5.chunks".into(), Ok(py_tuple(&o["chunks"]))));
                }
            }
            for (aname, a) in o["attrs"].as_object().into_iter().flatten() {
                let full = format!("user.{aname}");
                if full.len() > 255 || aname.starts_with("h5.") || a["shape"].is_null() {
                    continue;
                }
                let stringy = a["dtype"] == "vlen-str"
                    || a["dtype"].as_str().is_some_and(|d| d.starts_with("|S"));
                let text = match (&a["value"], stringy) {
                    (Value::String(s), true) => s.clone(),
                    _ => a["text"].as_str().unwrap_or("").to_string(),
                };
                // numpy summarises long arrays ("...") and prints vlen sequences as nested
                // array reprs: only presence is checked for those.
                let vlen_seq = a["dtype"].as_str().is_some_and(|d| d.starts_with("vlen("));
                if (!stringy && text.contains("...")) || vlen_seq {
                    want.push((full, Err(0)));
                    continue;
                }
                want.push((full, Ok(text)));
            }
            let listed = listxattr(&p).unwrap_or_default();
            for (k, v) in want {
                if !listed.contains(&k) {
                    failures.push(format!("{name}:{path}: {k} not listed"));
                }
                let got = getxattr(&p, &k).map(|b| String::from_utf8_lossy(&b).into_owned());
                let ok = match (&got, &v) {
                    // Values over the xattr size limit are refused with E2BIG.
                    (Err(e), Err(0)) => *e == libc::E2BIG,
                    (Ok(_), Err(0)) => true,
                    (Ok(g), Ok(w)) => same_rendering(g, w),
                    _ => false,
                };
                if !ok {
                    failures.push(format!("{name}:{path}: {k} = {got:?}, want {v:?}"));
                }
            }
            if getxattr(&p, "user.no.such.attribute") != Err(libc::ENODATA) {
                failures.push(format!("{name}:{path}: missing xattr is not ENODATA"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn mutations_are_erofs() {
    let man = manifest();
    let (name, objs) = files(man)
        .into_iter()
        .find(|(_, o)| !checked_datasets(o).is_empty())
        .expect("a fixture with a dataset");
    let (ds, _, _) = checked_datasets(&objs).remove(0);
    let m = Mount::background(&data_file(&name), &[]);
    let p = m.at(&ds);
    let dir = p.parent().unwrap().to_path_buf();
    let open_w = |flags: i32, write: bool| {
        fs::OpenOptions::new()
            .write(write)
            .read(!write)
            .custom_flags(flags)
            .open(&p)
    };
    assert!(erofs(open_w(0, true)), "open for writing");
    assert!(erofs(open_w(libc::O_TRUNC, true)), "open O_TRUNC");
    assert!(erofs(fs::write(dir.join("new-file"), b"x")), "create");
    assert!(erofs(fs::remove_file(&p)), "unlink");
    assert!(erofs(fs::rename(&p, dir.join("renamed"))), "rename");
    assert!(erofs(fs::create_dir(dir.join("newdir"))), "mkdir");
    assert!(
        erofs(fs::set_permissions(&p, fs::Permissions::from_mode(0o644))),
        "chmod"
    );
    assert!(
        erofs(std::os::unix::fs::symlink("x", dir.join("sym"))),
        "symlink"
    );
    assert!(erofs(fs::hard_link(&p, dir.join("hard"))), "link");
    assert_eq!(setxattr(&p, "user.new", b"v"), libc::EROFS, "setxattr");
    // Reading still works after all that.
    let mut f = fs::File::open(&p).unwrap();
    let mut v = Vec::new();
    f.read_to_end(&mut v).unwrap();
}

/// `ls -l` asks for every file's SELinux label and ACL; the mount answers that it has
/// neither (EOPNOTSUPP, not ENODATA), and `ls` then stops asking for the rest of the
/// directory: an `ls -l` costs a few getxattr round trips, not two or three per entry.
#[test]
fn ls_l_asks_for_labels_and_acls_once_not_per_file() {
    let (name, group, n) = files(manifest())
        .into_iter()
        .flat_map(|(name, objs)| {
            objs.into_iter()
                .filter(|(p, o)| o["kind"] == "group" && path_showable(p))
                .map(|(p, o)| {
                    let n = o["links"].as_array().map_or(0, |l| {
                        l.iter()
                            .filter(|x| x.as_str().is_some_and(showable))
                            .count()
                    });
                    (name.clone(), p, n)
                })
                .collect::<Vec<_>>()
        })
        .max_by_key(|(_, _, n)| *n)
        .expect("a group");
    assert!(n >= 8, "the corpus's largest group has {n} entries");
    let m = Mount::background(&data_file(&name), &[]);
    let dir = m.at(&group);
    assert_eq!(
        getxattr(&dir, "security.selinux"),
        Err(libc::EOPNOTSUPP),
        "no security labels"
    );
    let ls = || {
        let out = Command::new("ls").arg("-l").arg(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    assert_eq!(
        getxattr(&dir, "system.posix_acl_access"),
        Err(libc::EOPNOTSUPP),
        "no ACLs"
    );
    for round in ["first", "second"] {
        let before = harness::stats(&m)["op_getxattr"];
        ls();
        // The statistics read itself is one getxattr; then a label and an ACL or two.
        let asked = harness::stats(&m)["op_getxattr"] - before;
        assert!(
            asked <= 4,
            "{round} `ls -l` of {n} entries: {asked} getxattr requests"
        );
    }
}

#[test]
fn eight_threads_read_random_ranges_at_once() {
    let man = manifest();
    // The fixture file with the most checked bytes.
    let (name, objs) = files(man)
        .into_iter()
        .max_by_key(|(_, o)| checked_datasets(o).iter().map(|d| d.1).sum::<u64>())
        .expect("fixtures");
    let m = Mount::background(&data_file(&name), &["-o", "threads=4"]);
    let mut sets = checked_datasets(&objs);
    sets.sort_by_key(|d| std::cmp::Reverse(d.1));
    sets.truncate(6);
    let refs: Vec<(PathBuf, Vec<u8>)> = sets
        .iter()
        .map(|(path, _, sha)| {
            let p = m.at(path);
            let b = fs::read(&p).unwrap();
            assert_eq!(&sha256(&b), sha, "{path}");
            (p, b)
        })
        .collect();
    // Drop the page cache's copy of the files so the threads really go through the daemon.
    let _ = fs::write("/proc/sys/vm/drop_caches", b"1");
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let refs = &refs;
            s.spawn(move || {
                let mut rng = Rng(0x1234_5678 + t * 7919);
                for _ in 0..200 {
                    let (p, whole) = &refs[rng.below(refs.len() as u64) as usize];
                    if whole.is_empty() {
                        continue;
                    }
                    let f = fs::File::open(p).unwrap();
                    let off = rng.below(whole.len() as u64);
                    let len = 1 + rng.below(1 << 20) as usize;
                    let mut buf = vec![0u8; len];
                    let n = read_full_at(&f, &mut buf, off);
                    let start = off as usize;
                    let end = (start + len).min(whole.len());
                    assert_eq!(&buf[..n], &whole[start..end], "{p:?} at {off}+{len}");
                }
            });
        }
    });
}

#[test]
fn large_directories_list_completely_and_stably() {
    let man = manifest();
    let mut best: Option<(String, String, usize)> = None;
    for (name, objs) in files(man) {
        for (path, o) in &objs {
            let n = o["links"].as_array().map_or(0, |l| l.len());
            if path_showable(path) && n > best.as_ref().map_or(0, |b| b.2) {
                best = Some((name.clone(), path.clone(), n));
            }
        }
    }
    let (name, path, n) = best.expect("a group");
    let m = Mount::background(&data_file(&name), &[]);
    let start = std::time::Instant::now();
    let list = |p: &Path| -> Vec<String> {
        fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let first = list(&m.at(&path));
    let second = list(&m.at(&path));
    assert_eq!(first, second, "listing order changed");
    assert!(
        first.len() <= n && first.len() + 10 >= n,
        "{} of {n}",
        first.len()
    );
    assert!(
        start.elapsed().as_secs() < 30,
        "listing {n} entries took {:?}",
        start.elapsed()
    );
}
