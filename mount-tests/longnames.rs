//! Groups holding link names longer than the 64 KiB a name may have, beside ordinary links
//! (`mount-tests/fixtures/longnames/`, from `make_longnames.py`, after libhdf5's own
//! `tlonglinks.h5`; what h5py lists and reads in `expected.json`). The over-long links are
//! left out, each logged once per listing; every other link of those groups is listed and
//! read, in old-style (local heap), dense (fractal heap) and compact groups.

mod harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use h5mount::error::Error;
use h5mount::model::{File, OpenOptions};
use harness::Mount;
use serde_json::Value;

/// The longest name the library lists.
const MAX_NAME: usize = 64 << 10;

fn dir() -> PathBuf {
    harness::fixture("longnames")
}

fn expected() -> Value {
    harness::expected_json("longnames")
}

/// A long name as `make_longnames.py` spells it: `first`, then the alphabet from the letter
/// after it, `len` bytes in all.
fn long_name(first: char, len: usize) -> String {
    let mut b: Vec<u8> = (0..len).map(|u| b'a' + (u % 26) as u8).collect();
    b[0] = first as u8;
    String::from_utf8(b).unwrap()
}

/// One form's groups: path → (names h5py lists that the library lists too, count of links
/// left out: those whose names, or soft-link values, are longer than `MAX_NAME` bytes).
fn groups(e: &Value) -> BTreeMap<String, (Vec<String>, usize)> {
    e["groups"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(g, v)| {
            let links = v["links"].as_array().unwrap();
            let long_values: Vec<&str> = v["long_soft_values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap())
                .collect();
            let listed = links
                .iter()
                .filter_map(|l| l.as_str())
                .filter(|n| !long_values.contains(n))
                .map(String::from);
            let long = links.iter().filter(|l| l.is_object()).count() + long_values.len();
            (g.clone(), (listed.collect(), long))
        })
        .collect()
}

/// One form's datasets: path → bytes h5py reads.
fn datasets(e: &Value) -> BTreeMap<String, Vec<u8>> {
    e["datasets"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, hex)| (p.clone(), harness::unhex(hex.as_str().unwrap())))
        .collect()
}

/// The fixture covers what it says: both forms, each with long names in its root and `grp1`,
/// old-style groups in one, dense and compact in the other, and a dense name whose record is
/// larger than any link with a name of 64 KiB. This checks the fixture (its `expected.json`),
/// not the code: the tests below check the code on it. The compact group holds no long name
/// and cannot (a link message's size has 16 bits); it is there to be listed whole.
#[test]
fn the_fixture_has_long_names_in_every_link_storage() {
    let all = expected();
    let storage = |form: &str, g: &str| all[form]["groups"][g]["storage"].as_str().unwrap();
    assert_eq!(storage("earliest", "/"), "symbol-table");
    assert_eq!(storage("earliest", "/grp1"), "symbol-table");
    assert_eq!(storage("latest", "/"), "dense");
    assert_eq!(storage("latest", "/grp1"), "dense");
    assert_eq!(storage("latest", "/small"), "compact");
    for form in ["earliest", "latest"] {
        let g = groups(&all[form]);
        assert!(g["/"].1 >= 2 && g["/grp1"].1 == 3, "{form}: {g:?}");
        let lens: Vec<u64> = all[form]["groups"]["/grp1"]["links"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["len"].as_u64())
            .collect();
        assert!(lens.contains(&140_000), "{form}: {lens:?}");
    }
}

#[test]
fn long_names_are_left_out_and_their_neighbours_listed_and_read_in_the_library() {
    let all = expected();
    for form in ["earliest", "latest"] {
        let path = dir().join(format!("longnames_{form}.h5"));
        let f = File::open(&path, &OpenOptions::default()).unwrap();
        for (g, (names, _)) in groups(&all[form]) {
            let id = f.resolve(&g).unwrap_or_else(|e| panic!("{form} {g}: {e}"));
            let links = f.links(id).unwrap_or_else(|e| panic!("{form} {g}: {e}"));
            let listed: Vec<&str> = links.iter().map(|l| l.name).collect();
            assert_eq!(listed, names, "{form} {g}");
        }
        for (p, want) in datasets(&all[form]) {
            let id = f.resolve(&p).unwrap_or_else(|e| panic!("{form} {p}: {e}"));
            let d = f.dataset(id).unwrap_or_else(|e| panic!("{form} {p}: {e}"));
            assert_eq!(d.read_all().unwrap(), want, "{form} {p}");
        }
        // Looking an over-long name up is an error for that name; the group answers the rest.
        let grp1 = f.resolve("/grp1").unwrap();
        for name in [long_name('c', 66_560), long_name('f', 140_000)] {
            let e = f.lookup(grp1, &name).unwrap_err();
            assert!(matches!(e, Error::Limit { .. }), "{form}: {e:?}");
            assert!(e.to_string().contains("longer than the 65536 bytes"), "{e}");
        }
        let e = f
            .resolve(&format!("/grp1/{}/inner", long_name('d', 66_560)))
            .unwrap_err();
        assert!(matches!(e, Error::Limit { .. }), "{form}: {e:?}");
        assert!(f.lookup(grp1, "d1").unwrap().is_some(), "{form}");
        assert!(
            f.lookup(grp1, &"n".repeat(300)).unwrap().is_some(),
            "{form}"
        );
        assert!(f.lookup(grp1, "missing").unwrap().is_none(), "{form}");
        // A name of exactly the bound is a name like any other: absent here, not refused.
        assert!(f.lookup(grp1, &"x".repeat(MAX_NAME)).unwrap().is_none());
    }
}

/// Lines of the log that report a link left out of a listing.
fn left_out_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("left out of its listing"))
        .map(String::from)
        .collect()
}

#[test]
fn long_names_are_left_out_and_their_neighbours_listed_and_read_through_the_mount() {
    let all = expected();
    for form in ["earliest", "latest"] {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("h5mount.log");
        let m = Mount::background(
            &dir().join(format!("longnames_{form}.h5")),
            &["--log-file", log.to_str().unwrap()],
        );
        let groups = groups(&all[form]);
        let ls = |g: &str| {
            let out = Command::new("ls")
                .arg("-1A")
                .arg(m.at(g))
                .env("LC_ALL", "C")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{form}: ls {g}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        // Twice over, and every dataset read twice: the listings are built once.
        for _ in 0..2 {
            for (g, (names, _)) in &groups {
                // A directory entry holds at most 255 bytes: the 300-byte name is left out too.
                let want: Vec<&str> = names
                    .iter()
                    .map(String::as_str)
                    .filter(|n| n.len() <= 255)
                    .collect();
                let got = ls(g);
                assert_eq!(got.lines().collect::<Vec<_>>(), want, "{form} {g}");
            }
            for (p, want) in datasets(&all[form]) {
                let got = std::fs::read(m.at(&p)).unwrap_or_else(|e| panic!("{form} {p}: {e}"));
                assert_eq!(got, want, "{form} {p}");
            }
        }
        // A storm of lookups, of names there and not there: no more log lines.
        for i in 0..200 {
            assert!(m.at("/grp1/d2").exists(), "{form}");
            let missing = m.at(&format!("/grp1/missing{i}"));
            let e = std::fs::metadata(missing).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{form}");
        }
        // The kernel refuses a name longer than a directory entry before asking the mount;
        // the next lookup of a neighbour is answered as before.
        let e = std::fs::metadata(m.at(&format!("/grp1/{}", long_name('c', 66_560)))).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG), "{form}");
        assert_eq!(
            std::fs::read(m.at("/grp1/zz_last")).unwrap(),
            b"after the long names"
        );
        // One line for each link left out, naming its group and the bound.
        let lines = left_out_lines(&log);
        let long: usize = groups.values().map(|(_, n)| n).sum();
        assert_eq!(lines.len(), long, "{form}: {lines:#?}");
        for l in &lines {
            assert!(l.contains("group at 0x"), "{l}");
            assert!(l.contains(&MAX_NAME.to_string()), "{l}");
            assert!(l.len() < 600, "{l}");
        }
        let text = std::fs::read_to_string(&log).unwrap();
        let skipped300 = text.matches("name longer than 255 bytes").count();
        assert_eq!(skipped300, 1, "{form}: {text}");
    }
}
