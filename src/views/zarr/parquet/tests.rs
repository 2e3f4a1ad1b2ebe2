//! The layout of the Parquet manifest: which files, which rows, what is refused. (The files'
//! contents are read back by pyarrow and fsspec in `mount-tests/refs_parquet_check.py`.)

use super::*;
use crate::views::zarr::refs::{Entry, Manifest};
use serde_json::json;

fn text(v: Value) -> Entry {
    Entry::Text(v.to_string())
}

fn zarray(shape: &[u64], chunks: &[u64]) -> Entry {
    text(
        json!({"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": "<i4",
                "compressor": null, "filters": null, "fill_value": 0, "order": "C",
                "dimension_separator": "."}),
    )
}

fn manifest(refs: Vec<(&str, Entry)>) -> Manifest {
    Manifest {
        refs: refs.into_iter().map(|(k, e)| (k.to_string(), e)).collect(),
        url: "s3://b/f.h5".into(),
        left_out: vec![("/gone".into(), "why".into())],
        arrays: 0,
        referenced: 0,
        inlined: 0,
    }
}

fn r(offset: u64) -> Entry {
    Entry::Ref { offset, len: 8 }
}

/// The files under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let p = e.path();
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// A Parquet file: the magic at both ends, and a footer length that fits.
fn assert_parquet(bytes: &[u8]) {
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
    let n = bytes.len();
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    assert!(footer > 0 && footer + 12 <= n);
}

#[test]
fn records_split_at_their_size_and_all_missing_records_are_not_written() {
    // 7 chunks in records of 3: rows 0-2, 3-5 (all missing), 6.
    let m = manifest(vec![
        (".zgroup", text(json!({"zarr_format": 2}))),
        ("g/.zgroup", text(json!({"zarr_format": 2}))),
        ("g/a/.zarray", zarray(&[7, 2], &[1, 2])),
        ("g/a/.zattrs", text(json!({"units": "m"}))),
        ("g/a/0.0", r(100)),
        ("g/a/1.0", Entry::Bytes(b"base64:oops".to_vec())),
        ("g/a/2.0", r(300)),
        ("g/a/6.0", Entry::Bytes(vec![0, 1, 2, 3])),
        ("e/.zarray", zarray(&[0], &[5])),
        (".zmetadata", text(json!({"ignored": true}))),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m.parq");
    write(&m, &dir, 3).unwrap();
    assert_eq!(
        files(&dir),
        [".zmetadata", "g/a/refs.0.parq", "g/a/refs.2.parq"],
        "no file for the missing record nor for the empty array"
    );
    for f in ["g/a/refs.0.parq", "g/a/refs.2.parq"] {
        assert_parquet(&std::fs::read(dir.join(f)).unwrap());
    }
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join(".zmetadata")).unwrap()).unwrap();
    assert_eq!(meta["record_size"], 3);
    assert_eq!(meta["zarr_consolidated_format"], 1);
    assert_eq!(meta["h5mount"]["left_out"]["/gone"], "why");
    let docs = meta["metadata"].as_object().unwrap();
    let mut keys: Vec<&str> = docs.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            ".zgroup",
            "e/.zarray",
            "g/.zgroup",
            "g/a/.zarray",
            "g/a/.zattrs"
        ]
    );
    assert_eq!(docs["g/a/.zattrs"]["units"], "m");

    // Written again at another record size: the previous files are replaced, not mixed in.
    write(&m, &dir, 5).unwrap();
    assert_eq!(
        files(&dir),
        [".zmetadata", "g/a/refs.0.parq", "g/a/refs.1.parq"]
    );
    write(&m, &dir, 7).unwrap();
    assert_eq!(files(&dir), [".zmetadata", "g/a/refs.0.parq"]);
}

#[test]
fn inline_bytes_that_look_encoded_are_encoded() {
    assert_eq!(&*raw_value(b"\x00abc"), b"\x00abc");
    assert_eq!(&*raw_value(b"base64:x"), b"base64:YmFzZTY0Ong=");
}

#[test]
fn rows_are_numbered_in_c_order_over_the_grid() {
    assert_eq!(row_number("0.0", &[3, 4]), Some(0));
    assert_eq!(row_number("1.2", &[3, 4]), Some(6));
    assert_eq!(row_number("2.3", &[3, 4]), Some(11));
    assert_eq!(row_number("3.0", &[3, 4]), None);
    assert_eq!(row_number("1", &[3, 4]), None);
    assert_eq!(row_number("0", &[1]), Some(0), "a scalar");
    assert_eq!(row_number("x.0", &[3, 4]), None);
    let docs: Map<String, Value> = [("s/.zarray".to_string(), json!({"shape": [], "chunks": []}))]
        .into_iter()
        .collect();
    assert_eq!(grid(&docs, "s").unwrap(), [1]);
    let docs: Map<String, Value> = [(
        "a/.zarray".to_string(),
        json!({"shape": [10, 0], "chunks": [3, 4]}),
    )]
    .into_iter()
    .collect();
    assert_eq!(grid(&docs, "a").unwrap(), [4, 0]);
}

#[test]
fn refusals() {
    let tmp = tempfile::tempdir().unwrap();
    let ok = manifest(vec![("a/.zarray", zarray(&[1], &[1])), ("a/0", r(0))]);
    let dir = tmp.path().join("m.parq");
    for bad in [0, MAX_RECORD_SIZE + 1] {
        let e = write(&ok, &dir, bad).unwrap_err();
        assert!(e.contains("record size"), "{e}");
    }
    // An array at the root has no directory for its chunks.
    let root = manifest(vec![(".zarray", zarray(&[1], &[1])), ("0", r(0))]);
    let e = write(&root, &dir, 10).unwrap_err();
    assert!(e.contains("at the root"), "{e}");
    // A chunk key outside the grid, or of no array.
    let outside = manifest(vec![("a/.zarray", zarray(&[1], &[1])), ("a/1", r(0))]);
    assert!(write(&outside, &dir, 10).unwrap_err().contains("a/1"));
    let orphan = manifest(vec![("b/0", r(0))]);
    assert!(write(&orphan, &dir, 10).unwrap_err().contains(".zarray"));
    // A directory that holds anything else is not replaced.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(other.join("a")).unwrap();
    std::fs::write(other.join(".zmetadata"), "{}").unwrap();
    std::fs::write(other.join("a/notes.txt"), "mine").unwrap();
    let e = write(&ok, &other, 10).unwrap_err();
    assert!(e.contains("not replaced"), "{e}");
    assert!(other.join("a/notes.txt").exists());
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    assert!(write(&ok, &file, 10)
        .unwrap_err()
        .contains("not a directory"));
}
