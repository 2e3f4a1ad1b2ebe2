//! External links through a real mount: the linked object appears at the link's place (bytes
//! compared with what h5py reads through the same links), chains, soft links inside the other
//! file, links back into the mounted file, dangling links, and the outside-paths policy.
//!
//! Fixtures are `mount-tests/fixtures/extlinks/` (made by `make_extlinks.py` there, with the
//! expected results in `expected.json`); each test copies them into a temp directory so the
//! "outside" file can sit beside the mounted file's directory.

mod harness;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use harness::{read_three_ways, Mount};
use serde_json::Value;

const FORMS: [&str; 2] = ["earliest", "latest"];

fn fixtures() -> PathBuf {
    harness::fixture("extlinks")
}

fn expected() -> Value {
    harness::expected_json("extlinks")
}

/// `tmp/d/main_F.h5`, `tmp/d/sub/{a,b}_F.h5` and `tmp/outside_F.h5`; returns the main file.
fn lay_out(tmp: &Path, form: &str) -> PathBuf {
    let d = tmp.join("d");
    fs::create_dir_all(d.join("sub")).unwrap();
    let src = fixtures();
    let main = format!("main_{form}.h5");
    fs::copy(src.join(&main), d.join(&main)).unwrap();
    for name in [format!("a_{form}.h5"), format!("b_{form}.h5")] {
        fs::copy(src.join("sub").join(&name), d.join("sub").join(&name)).unwrap();
    }
    let outside = format!("outside_{form}.h5");
    fs::copy(src.join(&outside), tmp.join(&outside)).unwrap();
    d.join(format!("main_{form}.h5"))
}

fn check_entry(m: &Mount, path: &str, want: &Value) -> Option<String> {
    let p = m.at(path);
    if let Some(d) = want.get("dataset") {
        let meta = match fs::metadata(&p) {
            Ok(md) if md.is_file() => md,
            Ok(_) => return Some("not a regular file".into()),
            Err(e) => return Some(format!("stat: {e}")),
        };
        let len = d["nbytes"].as_u64().unwrap();
        if meta.len() != len {
            return Some(format!("size {} != {len}", meta.len()));
        }
        return match read_three_ways(&p, len as usize) {
            Ok(h) if h == d["sha256"].as_str().unwrap() => None,
            Ok(h) => Some(format!("sha256 {h} differs from h5py's")),
            Err(e) => Some(e),
        };
    }
    if let Some(names) = want.get("dir") {
        let mut got: Vec<String> = match fs::read_dir(&p) {
            Ok(rd) => rd
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect(),
            Err(e) => return Some(format!("read_dir: {e}")),
        };
        got.sort();
        let want_names: Vec<String> = names
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        if got != want_names {
            return Some(format!("entries {got:?} != {want_names:?}"));
        }
        if let Some(xattrs) = want.get("xattr").and_then(Value::as_object) {
            for (name, value) in xattrs {
                match harness::getxattr(&p, name) {
                    Ok(v) if v == value.as_str().unwrap().as_bytes() => {}
                    other => return Some(format!("xattr {name}: {other:?}")),
                }
            }
        }
        return None;
    }
    if let Some(text) = want.get("symlink") {
        return match fs::read_link(&p) {
            Ok(t) if t == Path::new(text.as_str().unwrap()) => None,
            Ok(t) => Some(format!("symlink text {t:?} != {text}")),
            Err(e) => Some(format!("readlink: {e}")),
        };
    }
    None
}

#[test]
fn external_links_show_their_targets() {
    let exp = expected();
    let mut failures = Vec::new();
    for form in FORMS {
        let tmp = tempfile::tempdir().unwrap();
        let main = lay_out(tmp.path(), form);
        let log = tmp.path().join("h5mount.log");
        let m = Mount::background(&main, &["--log-file", log.to_str().unwrap()]);
        let want = exp[form].as_object().unwrap();
        // The root first: which of two paths to one group is the directory depends on the
        // order they are met, and the expectations assume listing order.
        let mut paths: Vec<&String> = want.keys().filter(|k| k.starts_with('/')).collect();
        paths.sort_by_key(|p| (p.matches('/').count(), p.to_string()));
        for path in paths {
            if want[path].get("refused").is_some() {
                continue;
            }
            if let Some(msg) = check_entry(&m, path, &want[path]) {
                failures.push(format!("{form}:{path}: {msg}"));
            }
        }
        for pair in want["same_inode"].as_array().unwrap() {
            let inos: Vec<u64> = pair
                .as_array()
                .unwrap()
                .iter()
                .map(|p| fs::metadata(m.at(p.as_str().unwrap())).map_or(0, |md| md.ino()))
                .collect();
            if inos[0] == 0 || inos[0] != inos[1] {
                failures.push(format!("{form}: inodes of {pair} differ: {inos:?}"));
            }
        }
        // A followed group's `..` is the directory of the link; objects of the other file
        // have inodes of their own (not the mounted file's `address + 2`).
        let up = fs::metadata(m.at("/ext_grp/..")).unwrap().ino();
        if up != 1 {
            failures.push(format!("{form}: /ext_grp/.. is inode {up}"));
        }
        // The refused link dangles with a one-component text, and nothing outside is shown.
        let text = fs::read_link(m.at("/outside")).unwrap();
        let text = text.to_string_lossy();
        if !text.starts_with("h5mount-refused:") || text.contains('/') {
            failures.push(format!("{form}: /outside -> {text}"));
        }
        if fs::metadata(m.at("/outside")).is_ok() {
            failures.push(format!("{form}: /outside resolves"));
        }
        // Every unfollowed link is logged once, naming the link and the reason.
        let _ = fs::read_dir(m.at("/ext_root")).map(|rd| rd.count());
        drop(m);
        let text = fs::read_to_string(&log).unwrap_or_default();
        for (link, why) in [
            ("\"/missing_file\"", "nope.h5"),
            ("\"/missing_obj\"", "/nope"),
            ("\"/ext_grp/soft_missing\"", "/nope"),
            ("\"/outside\"", "outside the mount"),
        ] {
            let n = text
                .lines()
                .filter(|l| l.contains(link) && l.contains(why))
                .count();
            if n != 1 {
                failures.push(format!("{form}: {link} logged {n} times: {text}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn outside_files_are_followed_only_when_allowed() {
    for form in FORMS {
        let tmp = tempfile::tempdir().unwrap();
        let main = lay_out(tmp.path(), form);
        let m = Mount::background(&main, &["-o", "allow_external_paths"]);
        let bytes = fs::read(m.at("/outside")).unwrap();
        let want: Vec<u8> = [7i32, 8, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(bytes, want, "{form}");
    }
}

#[test]
fn a_symlink_on_disk_does_not_smuggle_an_outside_file_in() {
    let tmp = tempfile::tempdir().unwrap();
    let main = lay_out(tmp.path(), "latest");
    // sub/b_latest.h5 (the chain's end) becomes a symlink to the file outside.
    let b = tmp.path().join("d/sub/b_latest.h5");
    fs::remove_file(&b).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("outside_latest.h5"), &b).unwrap();
    let m = Mount::background(&main, &[]);
    let md = fs::symlink_metadata(m.at("/chain")).unwrap();
    assert!(md.file_type().is_symlink(), "/chain is shown: {md:?}");
    assert!(fs::metadata(m.at("/chain")).is_err());
    // The rest still works.
    assert_eq!(fs::read(m.at("/local")).unwrap().len(), 24);
}

#[test]
fn a_fifo_in_place_of_a_linked_file_does_not_hang_the_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let main = lay_out(tmp.path(), "earliest");
    let b = tmp.path().join("d/sub/b_earliest.h5");
    fs::remove_file(&b).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&b).status();
    assert!(made.unwrap().success());
    let m = Mount::background(&main, &[]);
    // Opening the FIFO would block until a writer came; it is refused instead.
    let md = fs::symlink_metadata(m.at("/chain")).unwrap();
    assert!(md.file_type().is_symlink(), "/chain: {md:?}");
    assert_eq!(fs::read(m.at("/local")).unwrap().len(), 24);
}
