//! Datasets larger than a file size can hold (2^63 bytes and more) and datasets whose
//! element count overflows 64 bits (`mount-tests/fixtures/huge/`, from `make_huge.py`; what
//! h5py reads in `expected.json`). The first are shown with the largest size the kernel
//! accepts and read as their fill value at any offset a file can reach; the second fail
//! alone, with a clear error, while the rest of the file is served.

mod harness;

use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use h5mount::model::{File, LinkTarget, OpenOptions};
use harness::{getxattr, py_tuple, Mount};
use serde_json::Value;

const MAX_SIZE: u64 = i64::MAX as u64;

fn dir() -> PathBuf {
    harness::fixture("huge")
}

fn expected() -> Value {
    harness::expected_json("huge")
}

/// (byte offset, bytes) of the probes of one dataset.
fn probes(e: &Value) -> Vec<(u64, Vec<u8>)> {
    e["probes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(o, hex)| (o.parse().unwrap(), harness::unhex(hex.as_str().unwrap())))
        .collect()
}

#[test]
fn huge_datasets_read_as_their_fill_value_in_the_library() {
    let all = expected();
    for (form, sets) in all.as_object().unwrap() {
        let f = File::open(
            &dir().join(format!("huge_{form}.h5")),
            &OpenOptions::default(),
        )
        .unwrap();
        for (name, e) in sets.as_object().unwrap() {
            let link = f.lookup(f.root(), name).unwrap().expect(name);
            let LinkTarget::Hard(id) = link.target else {
                panic!("{name}: not a hard link")
            };
            let d = f
                .dataset(id)
                .unwrap_or_else(|e| panic!("{form} {name}: {e}"));
            match e["len"].as_u64() {
                Some(len) => {
                    assert_eq!(d.len(), len, "{form} {name}");
                    for (off, want) in probes(e) {
                        let mut buf = vec![0u8; want.len()];
                        let n = d
                            .read_at(off, &mut buf)
                            .unwrap_or_else(|e| panic!("{form} {name} at {off}: {e}"));
                        assert_eq!(n, want.len(), "{form} {name} at {off}");
                        assert_eq!(buf, want, "{form} {name} at {off}");
                    }
                }
                None => {
                    assert!(d.is_broken(), "{form} {name}");
                    let err = d.read_at(0, &mut [0u8; 4]).unwrap_err().to_string();
                    assert!(
                        err.contains("more than a 64-bit count"),
                        "{form} {name}: {err}"
                    );
                }
            }
        }
    }
}

#[test]
fn huge_datasets_through_the_mount() {
    let all = expected();
    for (form, sets) in all.as_object().unwrap() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("h5mount.log");
        let m = Mount::background(
            &dir().join(format!("huge_{form}.h5")),
            &["--log-file", log.to_str().unwrap()],
        );
        let mut listed: Vec<String> = std::fs::read_dir(m.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        listed.sort();
        let mut names: Vec<&String> = sets.as_object().unwrap().keys().collect();
        names.sort();
        assert_eq!(listed.iter().collect::<Vec<_>>(), names, "{form}");
        for (name, e) in sets.as_object().unwrap() {
            let p = m.path().join(name);
            let md = std::fs::metadata(&p).unwrap_or_else(|e| panic!("{form} {name}: {e}"));
            assert_eq!(
                getxattr(&p, "user.h5.shape").unwrap(),
                py_tuple(&e["shape"]).into_bytes(),
                "{form} {name}"
            );
            let Some(len) = e["len"].as_u64() else {
                // An element count over 64 bits: this dataset fails, with a log line.
                let err = std::fs::File::open(&p).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP), "{form} {name}");
                continue;
            };
            assert_eq!(md.len(), len.min(MAX_SIZE), "{form} {name}");
            let f = std::fs::File::open(&p).unwrap();
            for (off, want) in probes(e) {
                let mut buf = vec![0u8; want.len()];
                f.read_exact_at(&mut buf, off)
                    .unwrap_or_else(|e| panic!("{form} {name}: pread at {off}: {e}"));
                assert_eq!(buf, want, "{form} {name} at {off}");
            }
            // A page mapped far into the image holds the fill value too.
            if len > 1 << 62 {
                let want = &probes(e)
                    .into_iter()
                    .find(|(o, _)| *o >= 1 << 61 && *o < 1 << 62)
                    .unwrap()
                    .1[..4];
                let page = mapped_page(&f, 1 << 62);
                let es = e["dtype"].as_str().unwrap()[2..].parse::<usize>().unwrap();
                assert_eq!(&page[..es.min(4)], &want[..es.min(4)], "{form} {name}");
            }
        }
        let text = std::fs::read_to_string(&log).unwrap();
        for (name, e) in sets.as_object().unwrap() {
            let lines = text.lines().filter(|l| l.contains(&format!("/{name}:")));
            let n = lines.count();
            match e["len"].as_u64() {
                Some(len) if len > MAX_SIZE => assert_eq!(n, 1, "{form} {name}: {text}"),
                None => assert!(
                    text.contains(&format!("/{name}")) && text.contains("more than a 64-bit count"),
                    "{form} {name}: {text}"
                ),
                _ => {}
            }
        }
    }
}

/// The first bytes of the page of `f` at `offset`, through mmap.
fn mapped_page(f: &std::fs::File, offset: i64) -> Vec<u8> {
    let map = harness::Mapping::new(f, offset, 4096, false).unwrap();
    map.bytes()[..16].to_vec()
}
