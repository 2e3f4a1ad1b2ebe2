//! ZFP (32013) datasets written on a big-endian host: H5Z-ZFP's header in the client data
//! comes with each word byte-swapped and the values are big-endian numbers. They, and the
//! little-endian datasets next to them (int32, int64 and 4-D fields among them), read byte
//! for byte as h5py with hdf5plugin reads them, through the library and through the mount
//! (`mount-tests/fixtures/zfp_be/expected.json`, from `make_zfp_be.py`).

mod harness;

use std::path::PathBuf;

use h5mount::model::{File, LinkTarget, OpenOptions};
use harness::{read_three_ways, sha256, Mount};

fn dir() -> PathBuf {
    harness::fixture("zfp_be")
}

struct Expected {
    file: String,
    dataset: String,
    len: u64,
    sha256: String,
    big_endian: bool,
}

fn expected() -> Vec<Expected> {
    let v = harness::expected_json("zfp_be");
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, e)| {
            let (file, ds) = k.split_once('/').unwrap();
            Expected {
                file: file.to_string(),
                dataset: ds.to_string(),
                len: e["len"].as_u64().unwrap(),
                sha256: e["sha256"].as_str().unwrap().to_string(),
                big_endian: e["writer"].as_str().unwrap() == "big-endian",
            }
        })
        .collect()
}

#[test]
fn zfp_from_both_byte_orders_reads_as_h5py_in_the_library() {
    let all = expected();
    // Ten big-endian and four little-endian datasets in each of two files.
    assert_eq!(all.iter().filter(|e| e.big_endian).count(), 20);
    assert_eq!(all.len(), 28);
    for e in &all {
        let (file, ds) = (&e.file, &e.dataset);
        let f = File::open(&dir().join(file), &OpenOptions::default()).unwrap();
        let link = f.lookup(f.root(), ds).unwrap().expect(ds);
        let LinkTarget::Hard(id) = link.target else {
            panic!("{ds}: not a hard link")
        };
        let d = f
            .dataset(id)
            .unwrap_or_else(|err| panic!("{file}/{ds}: {err}"));
        let bytes = d
            .read_all()
            .unwrap_or_else(|err| panic!("{file}/{ds}: {err}"));
        assert_eq!(bytes.len() as u64, e.len, "{file}/{ds}");
        assert_eq!(sha256(&bytes), e.sha256, "{file}/{ds}");
    }
}

#[test]
fn zfp_from_both_byte_orders_reads_as_h5py_through_the_mount() {
    let all = expected();
    for form in ["earliest", "latest"] {
        let file = format!("zfp_be_{form}.h5");
        let m = Mount::background(&dir().join(&file), &[]);
        let mut n = 0;
        for e in all.iter().filter(|e| e.file == file) {
            let p = m.path().join(&e.dataset);
            assert_eq!(
                std::fs::metadata(&p).unwrap().len(),
                e.len,
                "{file}/{}",
                e.dataset
            );
            assert_eq!(
                read_three_ways(&p, e.len as usize).unwrap(),
                e.sha256,
                "{file}/{}",
                e.dataset
            );
            n += 1;
        }
        assert_eq!(n, 14, "{file}");
    }
}
