//! `inspect` output is golden-tested: the listing of a few fixtures must equal the checked-in
//! text under `mount-tests/golden/`. After an intended change, regenerate with
//! `H5MOUNT_BLESS=1 cargo test --test inspect` and review the diff.

use std::path::Path;

const CASES: &[(&str, &str)] = &[
    ("examples/sample.h5", "sample.txt"),
    (
        "mount-tests/fixtures/data/links_latest.h5",
        "links_latest.txt",
    ),
    (
        "mount-tests/fixtures/data/layouts_earliest.h5",
        "layouts_earliest.txt",
    ),
    (
        "mount-tests/fixtures/data/dtypes_latest.h5",
        "dtypes_latest.txt",
    ),
    (
        "mount-tests/fixtures/data/filters_gzip_v114.h5",
        "filters_gzip_v114.txt",
    ),
    (
        "mount-tests/fixtures/data/attrs_earliest.h5",
        "attrs_earliest.txt",
    ),
];

#[test]
fn inspect_matches_golden_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("H5MOUNT_BLESS").is_some();
    let mut failed = Vec::new();
    for (file, golden) in CASES {
        let mut out = Vec::new();
        h5mount::inspect::inspect(&root.join(file), None, &mut out)
            .unwrap_or_else(|e| panic!("inspect {file}: {e}"));
        let out = String::from_utf8(out).expect("inspect writes UTF-8");
        let gpath = root.join("mount-tests/golden").join(golden);
        if bless {
            std::fs::write(&gpath, &out).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&gpath).unwrap_or_default();
        if out != want {
            let line = out.lines().zip(want.lines()).position(|(a, b)| a != b);
            eprintln!("{file}: differs from {golden} (first differing line: {line:?})");
            failed.push(*file);
        }
    }
    assert!(failed.is_empty(), "inspect output changed for {failed:?}");
}

#[test]
fn inspect_of_a_non_hdf5_file_is_an_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let err = h5mount::inspect::inspect(&root.join("Cargo.toml"), None, &mut out).unwrap_err();
    assert!(
        err.to_string().contains("superblock") || err.to_string().contains("signature"),
        "{err}"
    );
}
