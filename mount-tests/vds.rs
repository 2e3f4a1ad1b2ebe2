//! Virtual datasets against h5py: the fixtures of `fixtures/vds/make_vds.py` (concatenation of
//! files, strided interleaving, tiles with strided source selections, explicit blocks,
//! unlimited and `%b` mappings whose extent comes from the sources, missing sources, sources in
//! the same file, sources behind external and soft links, sources of other types converted
//! as libhdf5 converts them), each in earliest and latest form. Every virtual dataset must
//! report h5py's shape, hash to `ds[()].tobytes()`, and give the same bytes for any sub-range
//! as for the whole, through the library and through a mount.

mod harness;

use std::path::PathBuf;

use h5mount::model::{File, OpenOptions};
use serde_json::Value;

fn dir() -> PathBuf {
    harness::fixture("vds")
}

fn expected() -> serde_json::Map<String, Value> {
    harness::expected_json("vds")
        .as_object()
        .expect("an object")
        .clone()
}

fn read(d: &h5mount::model::Dataset, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let n = d
        .read_at(offset, &mut buf)
        .unwrap_or_else(|e| panic!("read_at({offset}, {len}): {e}"));
    buf.truncate(n);
    buf
}

#[test]
fn virtual_datasets_match_h5py() {
    let exp = expected();
    assert!(
        exp.len() >= 20,
        "expected.json lists {} datasets",
        exp.len()
    );
    let mut failures = Vec::new();
    for (key, want) in &exp {
        let (file, path) = key.split_once(':').unwrap();
        let f = File::open(&dir().join(file), &OpenOptions::default()).unwrap();
        let d = f.dataset(f.resolve(path).unwrap()).unwrap();
        assert_eq!(d.info.layout, h5mount::model::LayoutKind::Virtual, "{key}");
        let shape: Vec<u64> = want["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        if d.info.shape != shape {
            failures.push(format!("{key}: shape {:?} != {shape:?}", d.info.shape));
            continue;
        }
        let nbytes = want["nbytes"].as_u64().unwrap();
        if d.len() != nbytes {
            failures.push(format!("{key}: len {} != {nbytes}", d.len()));
            continue;
        }
        let all = read(&d, 0, nbytes as usize + 16);
        if all.len() as u64 != nbytes || harness::sha256(&all) != want["sha256"].as_str().unwrap() {
            failures.push(format!("{key}: bytes differ from h5py"));
            continue;
        }
        // Every sub-range, including ones that split elements, agrees with the whole.
        let n = all.len();
        let step = (n / 40).max(1);
        for a in (0..n).step_by(step).chain([1, 3, n.saturating_sub(5)]) {
            for len in [1, 3, 7, 13, n / 3 + 1, n] {
                let got = read(&d, a as u64, len);
                let end = (a + len).min(n);
                if got != all[a..end] {
                    failures.push(format!("{key}: range [{a}, +{len}) differs"));
                }
            }
        }
        assert!(read(&d, n as u64, 8).is_empty(), "{key}: read past the end");
    }
    for f in &failures {
        eprintln!("MISMATCH {f}");
    }
    assert!(failures.is_empty(), "{} mismatches", failures.len());
}

/// The same through a mount: every virtual dataset's size, and its bytes read, pread and
/// mapped.
#[test]
fn virtual_datasets_match_h5py_through_the_mount() {
    let exp = expected();
    for form in ["earliest", "latest"] {
        let file = format!("vds_{form}.h5");
        let m = harness::Mount::background(&dir().join(&file), &[]);
        let mut seen = 0;
        for (key, want) in exp
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{file}:")))
        {
            let path = key.split_once(':').unwrap().1;
            let p = m.at(path);
            let nbytes = want["nbytes"].as_u64().unwrap();
            let len = std::fs::metadata(&p)
                .unwrap_or_else(|e| panic!("{key}: {e}"))
                .len();
            assert_eq!(len, nbytes, "{key}");
            let digest =
                harness::read_three_ways(&p, len as usize).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(digest, want["sha256"].as_str().unwrap(), "{key}");
            seen += 1;
        }
        assert!(seen >= 130, "{file}: {seen} virtual datasets");
    }
}

/// The fixtures of the main corpus (sources in the same file and in another file) too.
#[test]
fn corpus_virtual_fixtures() {
    let data = harness::fixture("data");
    for form in ["earliest", "latest"] {
        let f = File::open(
            &data.join(format!("virtual_{form}.h5")),
            &OpenOptions::default(),
        )
        .unwrap();
        let d = f.dataset(f.resolve("/vds_external").unwrap()).unwrap();
        let got = read(&d, 0, 64);
        assert_eq!(
            harness::hex(&got),
            "0700000008000000090000000a00000000000000000000000000000000000000",
            "{form}"
        );
        // Row 3 of /vds has no mapping: fill value -1.0f32.
        let d = f.dataset(f.resolve("/vds").unwrap()).unwrap();
        assert_eq!(
            read(&d, 120, 8),
            (-1.0f32).to_le_bytes().repeat(2),
            "{form}"
        );
    }
}

/// A VDS that names itself fails cleanly (bounded nesting), and a VDS of a VDS reads through.
#[test]
fn self_reference_and_nesting() {
    for form in ["earliest", "latest"] {
        let f = File::open(
            &dir().join(format!("loop_{form}.h5")),
            &OpenOptions::default(),
        )
        .unwrap();
        let lp = f.dataset(f.resolve("/loop").unwrap()).unwrap();
        assert!(lp.read_at(0, &mut [0u8; 40]).is_err(), "{form}");
        let nested = f.dataset(f.resolve("/nested").unwrap()).unwrap();
        let row0: Vec<u8> = (0..10i32).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(read(&nested, 0, 40), row0, "{form}");
        assert!(nested.read_at(40, &mut [0u8; 40]).is_err(), "{form}");
    }
}

/// Every byte of the mapping block mutated, with its checksum recomputed so the selection
/// parsers and the reader really see the damage: opening and reading must fail or succeed,
/// never panic or hang.
#[test]
fn mutated_mapping_blocks_fail_cleanly() {
    let src = std::fs::read(dir().join("vds_earliest.h5")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // Sources resolve relative to the mutated copy's directory: copy them along.
    for e in std::fs::read_dir(dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "h5") {
            std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    // Every global heap object in the file: (data start, size).
    let mut objects = Vec::new();
    let mut at = 0;
    while let Some(i) = src[at..].windows(4).position(|w| w == b"GCOL") {
        let g = at + i;
        let size = u64::from_le_bytes(src[g + 8..g + 16].try_into().unwrap()) as usize;
        let mut o = g + 16;
        while o + 16 <= (g + size).min(src.len()) {
            let index = u16::from_le_bytes([src[o], src[o + 1]]);
            let n = u64::from_le_bytes(src[o + 8..o + 16].try_into().unwrap()) as usize;
            if index == 0 || o + 16 + n > src.len() {
                break;
            }
            objects.push((o + 16, n));
            o += 16 + n.div_ceil(8) * 8;
        }
        at = g + 4;
    }
    assert!(!objects.is_empty());
    let path = tmp.path().join("mutant.h5");
    let mut tried = 0;
    for &(start, n) in &objects {
        for pos in (start..start + n - 4).step_by(5) {
            for flip in [0x01u8, 0xff] {
                let mut m = src.clone();
                m[pos] ^= flip;
                let sum = h5mount::io::checksum::lookup3(&m[start..start + n - 4], 0);
                m[start + n - 4..start + n].copy_from_slice(&sum.to_le_bytes());
                std::fs::write(&path, &m).unwrap();
                let Ok(f) = File::open(&path, &OpenOptions::default()) else {
                    continue;
                };
                for name in [
                    "/concat",
                    "/interleave",
                    "/tiles",
                    "/blocks",
                    "/unlimited",
                    "/printf",
                    "/samefile",
                ] {
                    let Ok(id) = f.resolve(name) else { continue };
                    if let Ok(d) = f.dataset(id) {
                        let mut buf = vec![0u8; (d.len() as usize).min(1 << 16)];
                        let _ = d.read_at(0, &mut buf);
                    }
                }
                tried += 1;
            }
        }
    }
    assert!(tried > 100, "only {tried} mutants");
}
