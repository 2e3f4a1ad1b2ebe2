//! The views (src/views) through a real mount: every fixture file of the corpus mounted with
//! `--npy --envi`, the big-endian ones also with `--byte-order native`. For every dataset of
//! the manifest, the sidecars the library offers are listed and looked up with the view's size
//! and bytes (the `.npy` data part hashes to the manifest's sha256 as stored), the ones it does
//! not offer are absent, the dataset file serves the primary view (converted numbers, or the
//! text of vlen data, whose lines are the manifest's strings), and a sidecar name taken by a
//! real link shows the real object.
//!
//! Real consumers: `views_mount_check.py` runs on each mount when `python3 -c 'import numpy,
//! h5py'` works (numpy.load with mmap, numpy.fromfile in native order, GDAL on ENVI pairs);
//! otherwise that part is skipped (a counted skip), or fails under `H5MOUNT_REQUIRE_PYTHON`.

mod harness;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use h5mount::model::{File, OpenOptions};
use h5mount::views::{ByteOrderMode, View, ViewKind, ViewOptions, ViewSet};
use harness::Mount;
use serde_json::Value;

/// First sidecar inode (src/fs/views.rs).
const SIDECAR_BASE: u64 = 3 << 62;

/// Whether python3 has numpy and h5py for the real-consumer checks; without them those
/// checks are skipped, or fail under `H5MOUNT_REQUIRE_PYTHON` (which `mount-tests/run` sets
/// once it installed them).
fn python_ok() -> bool {
    harness::python_or_skip(
        harness::PYTHON,
        "import numpy, h5py",
        "H5MOUNT_REQUIRE_PYTHON",
    )
}

/// Run views_mount_check.py on a mount; panics on failure.
fn python_check(m: &Mount, file: &Path, tree: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/views_mount_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(m.path())
        .arg(file)
        .arg(tree)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "views_mount_check {} {tree}: {text} {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Parts the script could not run here (GDAL absent): counted skips.
    let report: Value = serde_json::from_str(text.trim().lines().last().unwrap_or(""))
        .expect("views_mount_check prints a JSON line last");
    for part in report["skipped"].as_array().into_iter().flatten() {
        harness::skip(&format!(
            "views_mount_check {}: {}",
            file.display(),
            part.as_str().unwrap_or("?")
        ));
    }
}

fn read_view(v: &View) -> Result<Vec<u8>, String> {
    v.read_all().map_err(|e| e.to_string())
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// Check one mounted fixture file against the library's views under `opts`; returns the
/// number of views checked.
fn check_file(m: &Mount, f: &Arc<File>, objects: &Value, opts: &ViewOptions) -> usize {
    let mut checked = 0;
    let objects = objects.as_object().unwrap();
    for (p, o) in objects {
        if o["kind"] != "dataset" {
            continue;
        }
        let Ok(d) = f.resolve(p).and_then(|id| f.dataset(id)) else {
            continue;
        };
        let set = ViewSet::for_dataset(f, &d, opts);
        let at = m.at(p);
        let parent = at.parent().unwrap().to_path_buf();
        let listing: Vec<String> = std::fs::read_dir(&parent)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        for kind in [ViewKind::Npy, ViewKind::EnviHeader] {
            let name = format!("{p}{}", kind.name_suffix());
            let path = m.at(&name);
            let base = path.file_name().unwrap().to_string_lossy().into_owned();
            if objects.contains_key(&name) {
                // A real link of that name wins.
                let ino = std::fs::symlink_metadata(&path).unwrap().ino();
                assert!(ino < SIDECAR_BASE, "{name}: real link shadowed");
                continue;
            }
            if base.len() > 255 {
                // Longer than a directory entry can be: not shown.
                assert!(!listing.contains(&base), "{name}: overlong name listed");
                continue;
            }
            let Some(v) = set.sidecar(kind.name_suffix()) else {
                assert!(!path.exists(), "{name} shown but not offered");
                assert!(!listing.contains(&base), "{name} listed but not offered");
                continue;
            };
            assert!(listing.contains(&base), "{name} not listed");
            let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(meta.is_file() && meta.ino() >= SIDECAR_BASE, "{name}");
            assert_eq!(meta.mode() & 0o777, 0o444, "{name}");
            assert_eq!(meta.len(), v.len().unwrap(), "{name}: size");
            let want = match read_view(v) {
                Ok(w) => w,
                Err(e) => {
                    // An unreadable dataset (unsupported filter) fails through the mount too.
                    assert!(std::fs::read(&path).is_err(), "{name}: library fails ({e})");
                    continue;
                }
            };
            let got = std::fs::read(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(got == want, "{name}: bytes differ from the library view");
            if kind == ViewKind::Npy && opts.byte_order == ByteOrderMode::AsStored {
                let data = &got[got.len() - d.len() as usize..];
                if let Some(sha) = o["raw_sha256"].as_str().or(o["sha256"].as_str()) {
                    assert_eq!(
                        harness::sha256(data),
                        sha,
                        "{name}: npy data is the raw image"
                    );
                }
            }
            checked += 1;
        }
        let Some(v) = &set.primary else { continue };
        let meta = std::fs::metadata(&at).unwrap();
        let Ok(want) = read_view(v) else {
            assert!(std::fs::read(&at).is_err(), "{p}: library fails");
            continue;
        };
        assert_eq!(meta.len(), want.len() as u64, "{p}: size is the view's");
        let got = std::fs::read(&at).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(
            got == want,
            "{p}: bytes differ from the library's primary view"
        );
        if v.kind() == ViewKind::Text && o["dtype"] == "vlen-str" {
            let values: Vec<&Value> = match &o["values"] {
                Value::Array(a) => a.iter().collect(),
                Value::Null => Vec::new(),
                scalar => vec![scalar],
            };
            let text: String = values
                .iter()
                .map(|s| format!("{}\n", escape(s.as_str().unwrap_or(""))))
                .collect();
            assert_eq!(String::from_utf8(got).unwrap(), text, "{p}: text");
        }
        checked += 1;
    }
    checked
}

fn opts(byte_order: ByteOrderMode) -> ViewOptions {
    ViewOptions {
        npy: true,
        envi: true,
        text: true,
        byte_order,
        ..Default::default()
    }
}

#[test]
fn sidecars_and_text_through_the_mount() {
    let m = harness::manifest();
    let py = python_ok();
    let mut checked = 0;
    for (fname, fv) in m["files"].as_object().unwrap() {
        let path = harness::data_dir().join(fname);
        let Ok(f) = File::open(&path, &OpenOptions::default()) else {
            continue;
        };
        let mnt = Mount::background(&path, &["--npy", "-o", "envi"]);
        checked += check_file(&mnt, &f, &fv["objects"], &opts(ByteOrderMode::AsStored));
        if py {
            python_check(&mnt, &path, "as_stored");
        }
    }
    assert!(checked > 100, "{checked} views checked");
}

#[test]
fn native_byte_order_through_the_mount() {
    let m = harness::manifest();
    let py = python_ok();
    let mut checked = 0;
    for (fname, fv) in m["files"].as_object().unwrap() {
        let big = fv["objects"]
            .as_object()
            .unwrap()
            .values()
            .any(|o| o["dtype"].as_str().is_some_and(|t| t.contains('>')));
        if !big {
            continue;
        }
        let path = harness::data_dir().join(fname);
        let Ok(f) = File::open(&path, &OpenOptions::default()) else {
            continue;
        };
        let mnt = Mount::background(&path, &["--npy", "--envi", "--byte-order", "native"]);
        checked += check_file(&mnt, &f, &fv["objects"], &opts(ByteOrderMode::Native));
        if py {
            python_check(&mnt, &path, "native");
        }
    }
    assert!(checked > 20, "{checked} views checked");
}

#[test]
fn views_are_off_by_default_but_vlen_text_is_not() {
    let path = harness::fixture("data/dtypes_latest.h5");
    let mnt = Mount::background(&path, &[]);
    let names: Vec<String> = std::fs::read_dir(mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names
        .iter()
        .all(|n| !n.ends_with(".npy") && !n.ends_with(".hdr")));
    assert!(!mnt.at("/lef4.npy").exists());
    let text = std::fs::read_to_string(mnt.at("/vlen_str_ascii")).unwrap();
    assert_eq!(text, "abc\n\nde\n");
    assert_eq!(
        std::fs::metadata(mnt.at("/vlen_str_ascii")).unwrap().len(),
        8
    );
}

/// A file with a dataset `x`, a dataset `x.npy` and a group `y.hdr` beside a dataset `y`.
const COLLIDE_PY: &str = r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = np.arange(4, dtype="<i4")
    f["x.npy"] = np.arange(3, dtype="<f8")
    f["y"] = np.arange(6, dtype="<u2").reshape(2, 3)
    f.create_group("y.hdr")
"#;

#[test]
fn sidecar_names_never_shadow_real_links() {
    if !python_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("collide.h5");
    let st = Command::new("python3")
        .args(["-c", COLLIDE_PY])
        .arg(&file)
        .status()
        .unwrap();
    assert!(st.success());
    for list_first in [true, false] {
        let mnt = Mount::background(&file, &["-o", "npy,envi"]);
        if list_first {
            let mut names: Vec<String> = std::fs::read_dir(mnt.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            assert_eq!(
                names,
                [
                    "x",
                    "x.hdr",
                    "x.npy",
                    "x.npy.hdr",
                    "x.npy.npy",
                    "y",
                    "y.hdr",
                    "y.npy"
                ]
            );
        }
        // The real dataset x.npy (3 doubles), not x's sidecar; the real group y.hdr.
        let meta = std::fs::metadata(mnt.at("/x.npy")).unwrap();
        assert_eq!(meta.len(), 24);
        assert!(meta.ino() < SIDECAR_BASE);
        assert!(std::fs::metadata(mnt.at("/y.hdr")).unwrap().is_dir());
        let npy = std::fs::read(mnt.at("/y.npy")).unwrap();
        assert!(npy.starts_with(b"\x93NUMPY"));
        assert!(std::fs::metadata(mnt.at("/x.hdr")).unwrap().ino() >= SIDECAR_BASE);
    }
}
