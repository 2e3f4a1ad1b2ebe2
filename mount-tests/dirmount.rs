//! Directory mounts and the one resolver, through real mounts: a directory of 1,000 files, a
//! NeXus-style master over 1,000 source files and a `%b` virtual dataset over 10,000, the
//! outside-paths policy for every kind of reference, readers cycling through 100 files under
//! `--max-open-files 8`, and `--refresh` on a directory.
//!
//! Fixtures come from `mount-tests/fixtures/dirmount/make_dirmount.py` (run by
//! `mount-tests/run`; about 12,000 small files, so not committed), with what h5py reads in its
//! `expected.json`. Without them these tests say so and pass, unless
//! `H5MOUNT_REQUIRE_FIXTURES` is set (as `mount-tests/run` sets it once it made them), when
//! they fail.

mod harness;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use harness::{read_three_ways, sha256, FdWatch, Mount};
use serde_json::Value;

/// Descriptors the daemon holds besides its files: stdio, /dev/fuse, the log, one file per
/// worker thread in use (a file being read stays open until the read ends), and margin.
const FD_SLACK: usize = 24;

fn out_dir() -> Option<PathBuf> {
    let d = harness::fixture("dirmount/out");
    if d.join("expected.json").exists() {
        return Some(d);
    }
    harness::require_or_skip(
        "H5MOUNT_REQUIRE_FIXTURES",
        &format!(
            "{} is missing (made by mount-tests/fixtures/dirmount/make_dirmount.py, which \
             mount-tests/run runs when h5py is installed)",
            d.display()
        ),
    );
    None
}

fn expected(out: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(out.join("expected.json")).unwrap()).unwrap()
}

/// Check every dataset `file` (path below `out`) holds, read through `mounted` (the file's
/// place in the mount); failures appended to `bad`.
fn check_datasets(mounted: &Path, want: &Value, label: &str, bad: &mut Vec<String>) {
    for (ds, d) in want["datasets"].as_object().unwrap() {
        let p = mounted.join(ds.trim_start_matches('/'));
        let len = d["nbytes"].as_u64().unwrap();
        match fs::metadata(&p) {
            Ok(m) if m.len() == len => {}
            Ok(m) => {
                bad.push(format!("{label}{ds}: size {} != {len}", m.len()));
                continue;
            }
            Err(e) => {
                bad.push(format!("{label}{ds}: {e}"));
                continue;
            }
        }
        match read_three_ways(&p, len as usize) {
            Ok(h) if h == d["sha256"].as_str().unwrap() => {}
            Ok(_) => bad.push(format!("{label}{ds}: bytes differ from h5py's")),
            Err(e) => bad.push(format!("{label}{ds}: {e}")),
        }
    }
}

fn errno_of(r: std::io::Result<impl Sized>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn a_directory_of_a_thousand_files_is_one_tree() {
    let Some(out) = out_dir() else { return };
    let exp = expected(&out);
    let files = exp["files"].as_object().unwrap();
    let m = Mount::background(&out.join("tree"), &["--max-open-files", "32"]);
    let pid = m.pid().expect("daemon pid");
    // Listing everything parses nothing: every HDF5 file is a directory already.
    let mut seen_hdf5 = 0;
    let mut bad = Vec::new();
    for (rel, f) in files {
        let Some(rel) = rel.strip_prefix("tree/") else {
            continue;
        };
        let p = m.path().join(rel);
        match f["kind"].as_str().unwrap() {
            "hdf5" | "corrupt" => match fs::symlink_metadata(&p) {
                Ok(md) if md.is_dir() => seen_hdf5 += 1,
                other => bad.push(format!("{rel}: not a directory: {other:?}")),
            },
            "plain" => match fs::read(&p) {
                Ok(b) if sha256(&b) == f["sha256"].as_str().unwrap() => {}
                other => bad.push(format!("{rel}: plain file differs: {:?}", other.err())),
            },
            "symlink" => {
                let inside = !f["resolves_to"].as_str().unwrap().starts_with("outside");
                match (inside, fs::symlink_metadata(&p)) {
                    (true, Ok(md)) if md.file_type().is_symlink() => {
                        let target = fs::canonicalize(&p).unwrap();
                        let want = m.path().join(
                            f["resolves_to"]
                                .as_str()
                                .unwrap()
                                .trim_start_matches("tree/"),
                        );
                        if target != fs::canonicalize(&want).unwrap() {
                            bad.push(format!("{rel}: leads to {}", target.display()));
                        }
                    }
                    (false, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                    (_, other) => bad.push(format!("{rel}: symlink shown wrong: {other:?}")),
                }
            }
            k => panic!("unknown kind {k}"),
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
    assert_eq!(seen_hdf5, 991);
    for d in exp["tree_dirs"].as_array().unwrap() {
        let d = d.as_str().unwrap().trim_start_matches("tree/");
        assert!(m.path().join(d).is_dir(), "{d}");
    }
    // Every dataset of every file, read three ways, under a bound of 32 open files.
    let watch = FdWatch::start(pid);
    for (rel, f) in files {
        if let (Some(rel), Some("hdf5")) = (rel.strip_prefix("tree/"), f["kind"].as_str()) {
            check_datasets(&m.path().join(rel), f, rel, &mut bad);
        }
    }
    let most = watch.most();
    assert!(
        bad.is_empty(),
        "{} failures: {:#?}",
        bad.len(),
        &bad[..bad.len().min(20)]
    );
    assert!(most <= 32 + FD_SLACK, "{most} descriptors open at once");
    // The corrupt file fails its own directory only: at its open, or at its first read
    // where the kernel opens directories without asking.
    let corrupt = m.path().join("run_01/corrupt.h5");
    let listed = fs::read_dir(&corrupt).and_then(|d| d.collect::<Result<Vec<_>, _>>());
    assert_eq!(errno_of(listed), Some(libc::EIO));
    assert!(m.path().join("run_01/scan_000.h5").is_dir() || m.path().join("run_01").is_dir());
    // A symlink inside the tree reaches the same inodes as the path it names.
    let via = fs::metadata(m.path().join("run_05/inside_link.h5/data")).unwrap();
    let direct = fs::metadata(m.path().join("run_06/scan_000.h5/data")).unwrap();
    assert_eq!(via.ino(), direct.ino());
    // `find -type f` sees every dataset and plain file.
    let datasets: usize = files
        .iter()
        .filter(|(k, f)| k.starts_with("tree/") && f["kind"] == "hdf5")
        .map(|(_, f)| f["datasets"].as_object().unwrap().len())
        .sum();
    let plain = files
        .iter()
        .filter(|(k, f)| k.starts_with("tree/") && f["kind"] == "plain")
        .count();
    let found = std::process::Command::new("find")
        .arg(m.path())
        .args(["-type", "f"])
        .output()
        .unwrap();
    let n = String::from_utf8_lossy(&found.stdout).lines().count();
    assert_eq!(n, datasets + plain);
    assert!(harness::fd_count(pid) <= 32 + FD_SLACK);
}

#[test]
fn virtual_datasets_over_thousands_of_files_hold_at_most_the_bound() {
    let Some(out) = out_dir() else { return };
    let exp = expected(&out);
    let files = exp["files"].as_object().unwrap();
    let bound = 16usize;
    let m = Mount::background(
        &out.join("vds"),
        &["--max-open-files", "16", "--cache-size", "32M"],
    );
    let pid = m.pid().expect("daemon pid");
    let watch = FdWatch::start(pid);
    let mut bad = Vec::new();
    for name in ["master.nxs", "printf.h5"] {
        check_datasets(
            &m.path().join(name),
            &files[&format!("vds/{name}")],
            name,
            &mut bad,
        );
    }
    // A few sources browsed directly are the files the VDS read.
    for k in ["vds/pb/src_0.h5", "vds/pb/src_9999.h5"] {
        check_datasets(&m.path().join(&k[4..]), &files[k], k, &mut bad);
    }
    let most = watch.most();
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(
        most <= bound + FD_SLACK,
        "{most} descriptors open at once (bound {bound})"
    );
    // libhdf5 keeps every source open (10,000 descriptors, 5.5 GB); the daemon stays within
    // its cache and a small margin.
    let hwm = harness::status_kib(pid, "VmHWM:").unwrap();
    assert!(hwm < (32 + 96) * 1024, "peak RSS {hwm} KiB");
}

/// The policy fixture's datasets: (name, whether it reaches outside the mount root).
const REFS: [(&str, bool); 9] = [
    ("/ext_symlink/d", true),
    ("/ext_dotdot/d", true),
    ("/ext_ok/d", false),
    ("/vds_symlink", true),
    ("/vds_dotdot", true),
    ("/vds_ok", false),
    ("/raw_symlink", true),
    ("/raw_dotdot", true),
    ("/raw_ok", false),
];

#[test]
fn every_reference_outside_is_refused_the_same_way_unless_allowed() {
    let Some(out) = out_dir() else { return };
    let exp = expected(&out);
    let want = &exp["files"]["policy/root/refs.h5"]["datasets"];
    let root = out.join("policy/root");
    // The same file mounted alone and inside a directory mount: one policy.
    for (source, at) in [(root.join("refs.h5"), ""), (root.clone(), "refs.h5")] {
        for allow in [false, true] {
            let extra: &[&str] = if allow {
                &["-o", "allow_external_paths"]
            } else {
                &[]
            };
            let m = Mount::background(&source, extra);
            let base = m.path().join(at);
            for (name, outside) in REFS {
                let p = base.join(name.trim_start_matches('/'));
                let w = &want[name];
                let label = format!("{} {name} allow={allow}", source.display());
                if outside && !allow {
                    let r = fs::read(&p);
                    let e = errno_of(r);
                    if name.starts_with("/ext") {
                        // The link is a dangling symlink.
                        let link =
                            base.join(name.trim_start_matches('/').split('/').next().unwrap());
                        let md = fs::symlink_metadata(&link).unwrap();
                        assert!(md.file_type().is_symlink(), "{label}");
                        assert_eq!(e, Some(libc::ENOENT), "{label}");
                    } else {
                        assert_eq!(e, Some(libc::EOPNOTSUPP), "{label}");
                    }
                    continue;
                }
                let len = w["nbytes"].as_u64().unwrap() as usize;
                let h = read_three_ways(&p, len).unwrap_or_else(|e| panic!("{label}: {e}"));
                assert_eq!(h, w["sha256"].as_str().unwrap(), "{label}");
            }
            if at == "refs.h5" {
                // The symlinks pointing out of the mounted directory are shown only if allowed.
                for s in ["link_out.h5", "vds_out.h5", "raw_out.bin"] {
                    let shown = fs::symlink_metadata(m.path().join(s)).is_ok();
                    assert_eq!(shown, allow, "{s} allow={allow}");
                }
            }
        }
    }
}

#[test]
fn readers_cycling_through_a_hundred_files_under_eight_open() {
    let Some(out) = out_dir() else { return };
    let exp = expected(&out);
    let files: BTreeMap<String, String> = (0..100)
        .map(|k| {
            let rel = format!("f_{k:03}.h5");
            let h = exp["files"][format!("cycle/{rel}")]["datasets"]["/d"]["sha256"]
                .as_str()
                .unwrap()
                .to_string();
            (rel, h)
        })
        .collect();
    let m = Mount::background(&out.join("cycle"), &["--max-open-files", "8"]);
    let pid = m.pid().expect("daemon pid");
    let watch = FdWatch::start(pid);
    let readers = 6;
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..readers)
            .map(|r| {
                let files = &files;
                let mnt = m.path();
                s.spawn(move || {
                    let mut bad = Vec::new();
                    let mut rng = harness::Rng(0x9e37_79b9 + r as u64);
                    let names: Vec<&String> = files.keys().collect();
                    for _ in 0..200 {
                        let name = names[rng.below(names.len() as u64) as usize];
                        let p = mnt.join(name).join("d");
                        match read_three_ways(&p, 65536) {
                            Ok(h) if &h == files.get(name).unwrap() => {}
                            Ok(_) => bad.push(format!("{name}: bytes differ")),
                            Err(e) => bad.push(format!("{name}: {e}")),
                        }
                    }
                    bad
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let most = watch.most();
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(most <= 8 + FD_SLACK, "{most} descriptors open at once");
    let stats = harness::stats(&m);
    let evictions = *stats
        .get("files_evicted")
        .expect("files_evicted in the statistics");
    assert!(evictions > 0, "{stats:?}");
}

#[test]
fn refresh_shows_files_added_removed_and_changed() {
    let Some(out) = out_dir() else { return };
    let exp = expected(&out);
    let sha = |k: u32| {
        exp["files"][format!("cycle/f_{k:03}.h5")]["datasets"]["/d"]["sha256"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    fs::create_dir(&dir).unwrap();
    let src = |k: u32| out.join(format!("cycle/f_{k:03}.h5"));
    fs::copy(src(0), dir.join("a.h5")).unwrap();
    let m = Mount::background(&dir, &["--refresh", "0.2"]);
    let read_a = || read_three_ways(&m.path().join("a.h5/d"), 65536);
    assert_eq!(read_a().unwrap(), sha(0));
    // Added.
    fs::copy(src(1), dir.join(".b.tmp")).unwrap();
    fs::rename(dir.join(".b.tmp"), dir.join("b.h5")).unwrap();
    assert!(harness::wait_for(|| m.path().join("b.h5/d").is_file()));
    assert_eq!(
        read_three_ways(&m.path().join("b.h5/d"), 65536).unwrap(),
        sha(1)
    );
    // Changed: replaced by another file's content.
    fs::copy(src(2), dir.join(".a.tmp")).unwrap();
    fs::rename(dir.join(".a.tmp"), dir.join("a.h5")).unwrap();
    assert!(
        harness::wait_for(|| read_a().is_ok_and(|h| h == sha(2))),
        "a.h5 not read afresh"
    );
    // Removed.
    fs::remove_file(dir.join("b.h5")).unwrap();
    assert!(harness::wait_for(|| !m.path().join("b.h5").exists()));
}

#[test]
fn a_directory_mounts_through_mount_t_fuse_with_options() {
    // What an fstab line of type fuse.h5mount with a directory as source does.
    let root = nix::unistd::geteuid().is_root();
    if !root
        || std::process::Command::new("mount.fuse3")
            .arg("-h")
            .output()
            .is_err()
    {
        harness::skip("needs root and mount.fuse3");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("campaign");
    fs::create_dir_all(dir.join("day1")).unwrap();
    let file = harness::empty_h5(&dir.join("day1"));
    fs::write(dir.join("README"), b"campaign notes").unwrap();
    let source = format!("{}#{}", harness::BIN, dir.display());
    let m = Mount::by_command(|mp| {
        let mut c = std::process::Command::new("mount");
        c.args(["-t", "fuse", &source])
            .arg(mp)
            .args(["-o", "ro,max_open_files=4,allow_external_paths"]);
        c
    });
    let line = harness::mount_line(m.path()).unwrap();
    assert!(line.contains(" fuse.h5mount ro,"), "{line}");
    assert!(
        m.path().join("day1/empty.h5").is_dir(),
        "{}",
        file.display()
    );
    assert_eq!(
        fs::read(m.path().join("README")).unwrap(),
        b"campaign notes"
    );
    assert_eq!(
        errno_of(fs::write(m.path().join("README"), b"x")),
        Some(libc::EROFS)
    );
}

#[test]
fn a_missing_or_unreadable_source_is_one_line_and_status_2() {
    let tmp = tempfile::tempdir().unwrap();
    let mp = tmp.path().join("mnt");
    fs::create_dir(&mp).unwrap();
    let missing = tmp.path().join("no_such_dir");
    let out = harness::run(&[missing.as_os_str(), mp.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no_such_dir"), "{err}");
    assert!(!harness::is_mounted(&mp));
    let bad = harness::run(&[
        tmp.path().as_os_str(),
        mp.as_os_str(),
        std::ffi::OsStr::new("--max-open-files"),
        std::ffi::OsStr::new("1"),
    ]);
    assert_eq!(bad.status.code(), Some(2));
}
