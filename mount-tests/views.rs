//! The views layer against the fixture corpus, without mounting and without Python: for every
//! dataset the manifest lists, the `.npy` sidecar must have a well-formed header whose shape
//! is the dataset's and whose data bytes are the raw image (h5py's `tobytes()`, by hash), the
//! `.hdr` sidecar must map the shape as documented, big-endian datasets under native order
//! must equal their raw bytes with each number reversed, and vlen datasets must read as the
//! manifest's values, one per line. Reads at scattered offsets must agree with whole reads.
//!
//! `dump_views` (ignored by default) writes every view to `$H5MOUNT_VIEWS_DUMP` for
//! `mount-tests/views_check.py`, which checks them with numpy, h5py and GDAL.

mod harness;

use std::path::PathBuf;
use std::sync::Arc;

use h5mount::model::{Dataset, File, OpenOptions};
use h5mount::views::{npy, ByteOrderMode, View, ViewKind, ViewOptions, ViewSet};
use serde_json::{json, Value};

/// Fixture file name, open file, dataset path, manifest entry, dataset.
type Entry = (String, Arc<File>, String, Value, Arc<Dataset>);

/// Every dataset of the corpus.
fn datasets() -> Vec<Entry> {
    let m = harness::manifest();
    let mut out = Vec::new();
    for (fname, fv) in m["files"].as_object().unwrap() {
        let path = harness::data_dir().join(fname);
        let Ok(f) = File::open(&path, &OpenOptions::default()) else {
            continue;
        };
        for (p, o) in fv["objects"].as_object().unwrap() {
            if o["kind"] != "dataset" {
                continue;
            }
            let Ok(id) = f.resolve(p) else { continue };
            let Ok(d) = f.dataset(id) else { continue };
            out.push((fname.clone(), f.clone(), p.clone(), o.clone(), d));
        }
    }
    assert!(
        out.len() > 100,
        "fixture corpus found ({} datasets)",
        out.len()
    );
    out
}

fn read_view(v: &View) -> Result<Vec<u8>, String> {
    v.read_all().map_err(|e| e.to_string())
}

/// Reads at scattered offsets and lengths must equal slices of the whole.
fn check_ranges(v: &View, whole: &[u8], what: &str) {
    let mut x = 0x9e3779b97f4a7c15u64;
    for _ in 0..40 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = x % (whole.len() as u64 + 3);
        let len = (x >> 32) as usize % 200;
        let mut buf = vec![0u8; len];
        let n = v.read_at(off, &mut buf).unwrap();
        let lo = (off as usize).min(whole.len());
        let hi = (lo + len).min(whole.len());
        assert_eq!(&buf[..n], &whole[lo..hi], "{what}: read at {off}+{len}");
    }
}

fn raw_fails(d: &Dataset) -> bool {
    let mut buf = vec![0u8; d.len().min(1 << 20) as usize];
    let mut off = 0;
    while off < d.len() {
        match d.read_at(off, &mut buf) {
            Ok(0) | Err(_) => return true,
            Ok(n) => off += n as u64,
        }
    }
    false
}

fn all_on(byte_order: ByteOrderMode) -> ViewOptions {
    ViewOptions {
        npy: true,
        envi: true,
        text: true,
        byte_order,
        ..Default::default()
    }
}

fn shape_of(o: &Value) -> Vec<u64> {
    o["shape"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

#[test]
fn npy_headers_and_data_match_the_raw_image() {
    let mut checked = 0;
    for (fname, f, p, o, d) in datasets() {
        let what = format!("{fname}:{p}");
        let set = ViewSet::for_dataset(&f, &d, &all_on(ByteOrderMode::AsStored));
        assert!(
            set.primary.is_none() || !d.info.dtype.is_fixed_size(),
            "{what}: as stored"
        );
        if !d.info.dtype.is_fixed_size() || d.info.null {
            assert!(set.sidecar(".npy").is_none(), "{what}");
            continue;
        }
        let Some(v) = set.sidecar(".npy") else {
            // The one refusal the corpus exercises: an integer shifted within its bytes.
            assert!(
                !npy::integer_as_is(&d.info.dtype),
                "{what}: no npy view: {:?}",
                set.skipped
            );
            continue;
        };
        let whole = match read_view(v) {
            Ok(w) => w,
            // Datasets the library cannot read (an unsupported filter) fail the same way here.
            Err(e) if raw_fails(&d) => {
                eprintln!("{what}: unreadable, header only ({e})");
                continue;
            }
            Err(e) => panic!("{what}: {e}"),
        };
        assert_eq!(&whole[..6], b"\x93NUMPY", "{what}");
        let (hlen, skip) = match whole[6] {
            1 => (u16::from_le_bytes([whole[8], whole[9]]) as usize, 10),
            _ => (
                u32::from_le_bytes([whole[8], whole[9], whole[10], whole[11]]) as usize,
                12,
            ),
        };
        let start = skip + hlen;
        assert_eq!(start % 64, 0, "{what}: data aligned");
        let header = std::str::from_utf8(&whole[skip..start]).unwrap();
        assert!(
            header.ends_with('\n') && header.contains("'fortran_order': False"),
            "{what}: {header}"
        );
        let shape = shape_of(&o);
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        let prefix = match dims.len() {
            0 => "'shape': (".to_string(),
            _ => format!("'shape': ({}", dims.join(", ")),
        };
        assert!(header.contains(&prefix), "{what}: {header} lacks {prefix}");
        let data = &whole[start..];
        assert_eq!(data.len() as u64, d.len(), "{what}");
        // For types libhdf5 converts on read (space-padded strings), the manifest also records
        // the digest of the stored bytes, which is what is served.
        if let Some(sha) = o["raw_sha256"].as_str().or(o["sha256"].as_str()) {
            assert_eq!(
                harness::sha256(data),
                sha,
                "{what}: npy data is the raw image"
            );
        }
        check_ranges(v, &whole, &what);
        checked += 1;
    }
    assert!(checked > 50, "{checked} npy views checked");
}

#[test]
fn envi_headers_map_the_shape() {
    let mut checked = 0;
    for (fname, f, p, o, d) in datasets() {
        let set = ViewSet::for_dataset(&f, &d, &all_on(ByteOrderMode::AsStored));
        let dtype = o["dtype"].as_str().unwrap_or("");
        let shape = shape_of(&o);
        let numeric = [
            "u1", "i2", "i4", "i8", "u2", "u4", "u8", "f4", "f8", "c8", "c16",
        ]
        .iter()
        .any(|k| dtype.len() > 1 && &dtype[1..] == *k);
        let expect = numeric
            && (1..=3).contains(&shape.len())
            && shape.iter().all(|&n| n > 0)
            && !d.info.null
            && npy::integer_as_is(&d.info.dtype);
        let v = set.sidecar(".hdr");
        assert_eq!(
            v.is_some(),
            expect,
            "{fname}:{p} {dtype} {shape:?}: {:?}",
            set.skipped
        );
        let Some(v) = v else { continue };
        let text = String::from_utf8(read_view(v).unwrap()).unwrap();
        let (samples, lines, bands) = match shape[..] {
            [n] => (n, 1, 1),
            [r, c] => (c, r, 1),
            [a, b, c] => (c, b, a),
            _ => unreachable!(),
        };
        for line in [
            format!("samples = {samples}\n"),
            format!("lines = {lines}\n"),
            format!("bands = {bands}\n"),
            format!("byte order = {}\n", u8::from(dtype.starts_with('>'))),
        ] {
            assert!(text.contains(&line), "{fname}:{p}: {line:?} in {text}");
        }
        checked += 1;
    }
    assert!(checked > 30, "{checked} ENVI headers checked");
}

/// Raw bytes with every number reversed, for the simple numeric dtypes of the manifest.
fn swapped(dtype: &str, raw: &[u8]) -> Option<Vec<u8>> {
    let size: usize = dtype.get(2..)?.parse().ok()?;
    let part = if dtype.as_bytes().get(1) == Some(&b'c') {
        size / 2
    } else {
        size
    };
    Some(
        raw.chunks(part)
            .flat_map(|c| c.iter().rev().copied())
            .collect(),
    )
}

#[test]
fn big_endian_datasets_under_native_order_are_swapped() {
    let mut checked = 0;
    for (fname, f, p, o, d) in datasets() {
        let what = format!("{fname}:{p}");
        let dtype = o["dtype"].as_str().unwrap_or("");
        let set = ViewSet::for_dataset(&f, &d, &all_on(ByteOrderMode::Little));
        let big = dtype.starts_with('>') || dtype.contains(":>") || dtype.contains("(>");
        if !d.info.dtype.is_fixed_size() {
            continue;
        }
        assert_eq!(set.primary.is_some(), big, "{what} {dtype}");
        let (Some(v), Some(expect)) = (&set.primary, o["data_hex"].as_str()) else {
            continue;
        };
        assert_eq!(v.kind(), ViewKind::Data);
        let raw: Vec<u8> = (0..expect.len() / 2)
            .map(|i| u8::from_str_radix(&expect[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let Ok(got) = read_view(v) else { continue };
        if let Some(want) = swapped(dtype, &raw).filter(|_| dtype.starts_with('>')) {
            assert_eq!(got, want, "{what}");
            check_ranges(v, &got, &what);
            checked += 1;
        }
        let Some(npy) = set.sidecar(".npy") else {
            continue;
        };
        let npy = read_view(npy).unwrap();
        assert!(npy.ends_with(&got), "{what}: npy data converted too");
        assert!(
            !String::from_utf8_lossy(&npy[..128.min(npy.len())]).contains("'>"),
            "{what}"
        );
    }
    assert!(checked >= 10, "{checked} big-endian datasets checked");
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

#[test]
fn vlen_datasets_read_as_text_lines() {
    let mut checked = 0;
    for (fname, f, p, o, d) in datasets() {
        let what = format!("{fname}:{p}");
        if d.info.dtype.is_fixed_size() {
            continue;
        }
        let values = match &o["values"] {
            Value::Array(a) if !shape_of(&o).is_empty() => a.clone(),
            Value::Null => continue,
            scalar => vec![scalar.clone()],
        };
        let set = ViewSet::for_dataset(&f, &d, &all_on(ByteOrderMode::AsStored));
        let Some(v) = &set.primary else {
            panic!("{what}: no text view: {:?}", set.skipped);
        };
        assert_eq!(v.kind(), ViewKind::Text);
        let text = String::from_utf8(read_view(v).unwrap()).unwrap();
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        assert_eq!(lines.len(), values.len(), "{what}: {text:?}");
        for (line, val) in lines.iter().zip(&values) {
            match val {
                Value::String(s) => assert_eq!(*line, escape(s), "{what}"),
                Value::Array(nums) => {
                    let got: Vec<f64> = line
                        .split_whitespace()
                        .map(|t| t.parse().unwrap())
                        .collect();
                    let want: Vec<f64> = nums.iter().filter_map(Value::as_f64).collect();
                    assert_eq!(got, want, "{what}");
                }
                other => panic!("{what}: unexpected manifest value {other}"),
            }
        }
        check_ranges(v, text.as_bytes(), &what);
        checked += 1;
    }
    assert!(checked >= 4, "{checked} vlen datasets checked");
}

/// Write every view of every fixture dataset to `$H5MOUNT_VIEWS_DUMP/{as_stored,native}/dNNNNN`
/// (+ `.npy`, `.hdr`; numbered names without dots, as some fixture names are longer than a
/// file name may be and GDAL finds `NAME.hdr` by replacing an extension), with `index.json`
/// mapping numbers to fixture paths, for `views_check.py`.
#[test]
#[ignore = "writes files for mount-tests/views_check.py"]
fn dump_views() {
    let Some(dir) = std::env::var_os("H5MOUNT_VIEWS_DUMP") else {
        panic!("set H5MOUNT_VIEWS_DUMP to the output directory");
    };
    let dir = PathBuf::from(dir);
    let mut index = Vec::new();
    for (n, (fname, f, p, _o, d)) in datasets().into_iter().enumerate() {
        for (tree, mode) in [
            ("as_stored", ByteOrderMode::AsStored),
            ("native", ByteOrderMode::Native),
        ] {
            let set = ViewSet::for_dataset(&f, &d, &all_on(mode));
            std::fs::create_dir_all(dir.join(tree)).unwrap();
            let name = format!("d{n:05}");
            let mut files = Vec::new();
            let mut errors = Vec::new();
            let mut write = |suffix: &str, bytes: Result<Vec<u8>, String>| match bytes {
                Ok(b) => {
                    std::fs::write(dir.join(tree).join(format!("{name}{suffix}")), b).unwrap();
                    files.push(suffix.to_string());
                }
                Err(e) => errors.push(format!("{suffix}: {e}")),
            };
            let envi = set.sidecar(".hdr").is_some();
            match &set.primary {
                Some(v) => write("", read_view(v)),
                // The ENVI header describes `NAME`: write the raw bytes it points at.
                None if envi => {
                    let mut buf = vec![0u8; d.len() as usize];
                    let r = d.read_at(0, &mut buf).map(|_| buf);
                    write("", r.map_err(|e| e.to_string()))
                }
                None => {}
            }
            for v in &set.sidecars {
                write(v.name_suffix(), read_view(v));
            }
            let raw_readable = !d.info.dtype.is_fixed_size() || !raw_fails(&d);
            let skipped: Vec<String> = set
                .skipped
                .iter()
                .map(|(k, r)| format!("{k:?}: {r}"))
                .collect();
            index.push(json!({
                "tree": tree, "name": name, "file": fname, "path": p,
                "primary": set.primary.as_ref().map(|v| format!("{:?}", v.kind())),
                "files": files, "errors": errors, "skipped": skipped, "raw_readable": raw_readable,
            }));
        }
    }
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_string_pretty(&index).unwrap(),
    )
    .unwrap();
}
