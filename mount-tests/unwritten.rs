//! Chunked datasets whose chunk index was never written (created, never written to: the
//! layout message holds the undefined address for the index, whatever its type) read as
//! their fill value, through the library and through the mount, byte for byte as h5py reads
//! them (`mount-tests/fixtures/unwritten/expected.json`, from `make_unwritten.py`).

mod harness;

use std::path::PathBuf;

use h5mount::model::{File, LinkTarget, OpenOptions};
use harness::{read_three_ways, sha256, Mount};

fn dir() -> PathBuf {
    harness::fixture("unwritten")
}

fn expected() -> Vec<(String, String, u64, String)> {
    let v = harness::expected_json("unwritten");
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, e)| {
            let (file, ds) = k.split_once('/').unwrap();
            (
                file.to_string(),
                ds.to_string(),
                e["len"].as_u64().unwrap(),
                e["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn never_written_datasets_read_as_their_fill_value_in_the_library() {
    let all = expected();
    assert!(all.len() >= 28, "{}", all.len());
    for (file, ds, len, digest) in &all {
        let f = File::open(&dir().join(file), &OpenOptions::default()).unwrap();
        let link = f.lookup(f.root(), ds).unwrap().expect(ds);
        let LinkTarget::Hard(id) = link.target else {
            panic!("{ds}: not a hard link")
        };
        let d = f.dataset(id).unwrap_or_else(|e| panic!("{file}/{ds}: {e}"));
        let bytes = d.read_all().unwrap_or_else(|e| panic!("{file}/{ds}: {e}"));
        assert_eq!(bytes.len() as u64, *len, "{file}/{ds}");
        assert_eq!(&sha256(&bytes), digest, "{file}/{ds}");
    }
}

#[test]
fn never_written_datasets_read_as_their_fill_value_through_the_mount() {
    for form in ["earliest", "latest"] {
        let file = format!("unwritten_{form}.h5");
        let m = Mount::background(&dir().join(&file), &[]);
        for (_, ds, len, digest) in expected().iter().filter(|e| e.0 == file) {
            let p = m.path().join(ds);
            assert_eq!(std::fs::metadata(&p).unwrap().len(), *len, "{file}/{ds}");
            assert_eq!(
                &read_three_ways(&p, *len as usize).unwrap(),
                digest,
                "{file}/{ds}"
            );
        }
    }
}
