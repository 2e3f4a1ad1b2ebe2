//! The corruption suite: damaged copies of the fixture files and the hand-made hostile files in
//! `fixtures/nasty/` must fail cleanly. No mount is involved; the library API is driven the way
//! a mount would drive it.
//!
//! For each fixture (all of them, small ones first), the suite makes deterministic variants:
//! * truncations inside the superblock, at and just after every object header, data and chunk
//!   address the manifest records, and at regular steps through the file;
//! * byte flips at positions drawn from a seeded xorshift generator (one to four bytes each);
//! * whole structures zeroed: every occurrence of a structure signature (OHDR, TREE, HEAP,
//!   SNOD, FRHP, ... SMTB) is cleared up to the next signature or a bounded length.
//!
//! Each variant is opened, walked (links, kinds, attributes rendered, dataset descriptions), has
//! every dataset read at a few ranges, and is listed by `inspect`, inside a worker thread under
//! `catch_unwind` and a wall-clock bound. The suite fails on a panic, on a case that outlives
//! its bound, on an error whose text names nothing (empty, or a structural error without an
//! address), and when the peak resident size (`VmHWM`) of the work grows past a bound. That
//! size is measured in a child process: the test binary runs itself again with only that
//! test selected (see [`peak_rss_of`]), so the other tests running meanwhile in this process
//! do not count.

mod harness;

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use h5mount::model::{File, LinkTarget, ObjectId, ObjectKind, OpenOptions};
use h5mount::Error;
use serde_json::Value;

/// Wall-clock bound of one case (open + walk + reads + inspect) in a debug build, in seconds;
/// `H5MOUNT_CASE_TIMEOUT` overrides it (for slow machines or for profiling one case).
const CASE_TIMEOUT_S: u64 = 5;
/// Objects visited per case at most (the 1,000-deep nasty needs a little over 1,000).
const MAX_OBJECTS: usize = 3_000;
/// Bytes read per range of a dataset: small, because a range of a dataset of one-byte chunks
/// (`chunked_huge_latest.h5`) costs one chunk lookup per byte, slow in a debug build.
const READ_LEN: usize = 4 << 10;
/// Peak resident size allowed for a child process running one part of the mutation runs.
const PART_HWM_KB: u64 = 256 << 10;
/// Peak resident size allowed for a child process reading the deflate bomb: well under the
/// 64 MiB the bomb inflates to.
const BOMB_HWM_KB: u64 = 48 << 10;
/// Fixtures left out of the mutation runs, with the reason. Listing the 5,000-link dense
/// group of `biggroups_latest.h5` takes seconds in a debug build (the fractal heap re-reads and
/// re-checksums its direct block for every link), so each variant would take as long; the
/// dense-link structures are covered by the smaller `groups`, `links` and `names` files.
const NOT_MUTATED: [&str; 1] = ["biggroups_latest.h5"];
/// Fixtures whose intact walk is slow (over 60 ms in a debug build: thousands of chunks or
/// links, large attributes, the szip sweep): each gets every third of its variants only, so
/// that they do not dominate the suite's time. A fixed list, so every run covers the same
/// variants (`slow_fixtures_exist` checks the names).
const SLOW_FIXTURES: [&str; 9] = [
    "attrs_earliest.h5",
    "attrs_latest.h5",
    "biggroups_earliest.h5",
    "chunked_huge_latest.h5",
    "chunked_many_earliest.h5",
    "chunked_many_latest.h5",
    "chunked_many_v114.h5",
    "filters_szip_sweep_earliest.h5",
    "filters_szip_sweep_latest.h5",
];
/// Pristine fixtures allowed a longer bound than [`CASE_TIMEOUT_S`] (same reason).
const SLOW_PRISTINE: [(&str, u64); 1] = [("biggroups_latest.h5", 60)];

/// Structure signatures whose occurrences are zeroed.
const SIGNATURES: [&[u8; 4]; 18] = [
    b"OHDR", b"TREE", b"HEAP", b"SNOD", b"FRHP", b"FHDB", b"FHIB", b"BTHD", b"BTIN", b"BTLF",
    b"FAHD", b"FADB", b"EAHD", b"EAIB", b"EASB", b"EADB", b"GCOL", b"SMTB",
];

/// Deterministic pseudo-random numbers (xorshift64).
struct Rng(u64);
impl Rng {
    fn new(seed: &str) -> Rng {
        // FNV-1a of the name: a stable, non-zero seed per file.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        Rng(h | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// What one case did: objects visited, bytes read, and every error text met.
#[derive(Debug, Default)]
pub struct Outcome {
    pub objects: usize,
    pub datasets: usize,
    pub bytes_read: u64,
    pub errors: Vec<String>,
    /// Errors whose text names nothing.
    pub anonymous: Vec<String>,
    /// Maximum path depth met while walking.
    pub max_depth: usize,
}

impl Outcome {
    fn note(&mut self, e: &Error) {
        let text = e.to_string();
        if !names_something(e) {
            self.anonymous.push(format!("{text:?} ({e:?})"));
        }
        if self.errors.len() < 64 {
            self.errors.push(text);
        }
    }
}

/// An error names something: non-empty text, and structural errors carry an address (and a
/// non-empty structure name).
fn names_something(e: &Error) -> bool {
    let text = e.to_string();
    if text.trim().is_empty() {
        return false;
    }
    match e {
        Error::InObject { path, source } => !path.is_empty() && names_something(source),
        Error::Io { what, .. }
        | Error::Truncated { what, .. }
        | Error::Corrupt { what, .. }
        | Error::Checksum { what, .. }
        | Error::Limit { what, .. } => !what.is_empty() && text.contains("0x"),
        Error::Unsupported { what, detail } => !what.is_empty() && !detail.is_empty(),
        Error::Filter { name, .. } => !name.is_empty(),
        Error::UnknownFilter { .. } => true,
        Error::ShortImage { what, .. } | Error::Open { what, .. } => !what.is_empty(),
        Error::NotFound(s) | Error::Invalid(s) => !s.is_empty(),
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Open `path`, walk everything reachable, read every dataset at a few ranges, run `inspect`.
pub fn exercise(path: &Path) -> Outcome {
    let mut out = Outcome::default();
    let file = match File::open(
        path,
        &OpenOptions {
            cache_bytes: 8 << 20,
            ..OpenOptions::default()
        },
    ) {
        Ok(f) => f,
        Err(e) => {
            out.note(&e);
            return out;
        }
    };
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut todo: Vec<(String, usize, ObjectId)> = vec![("/".into(), 0, file.root())];
    while let Some((p, depth, id)) = todo.pop() {
        if seen.len() >= MAX_OBJECTS || !seen.insert(id) {
            continue;
        }
        out.objects += 1;
        out.max_depth = out.max_depth.max(depth);
        for e in [
            file.mtime(id).err(),
            file.refcount(id).err(),
            file.comment(id).err(),
        ]
        .into_iter()
        .flatten()
        {
            out.note(&e);
        }
        match file.attributes(id) {
            Ok(attrs) => attrs.iter().for_each(|a| drop(a.render())),
            Err(e) => out.note(&e),
        }
        match file.kind(id) {
            Ok(ObjectKind::Group) => match file.links(id) {
                Ok(links) => {
                    for l in links.iter() {
                        let child = join(&p, l.name);
                        match &l.target {
                            LinkTarget::Hard(c) => todo.push((child, depth + 1, *c)),
                            LinkTarget::Soft(_) => match file.resolve(&child) {
                                Ok(c) => todo.push((child, depth + 1, c)),
                                Err(e) => out.note(&e),
                            },
                            _ => {}
                        }
                    }
                }
                Err(e) => out.note(&e),
            },
            Ok(ObjectKind::Dataset) => match file.dataset(id) {
                Ok(d) => {
                    out.datasets += 1;
                    let _ = d.info.dtype.numpy_str();
                    let len = d.len();
                    let mut buf = vec![0u8; READ_LEN];
                    for s in [0, len / 2, len.saturating_sub(READ_LEN as u64)] {
                        match d.read_at(s, &mut buf) {
                            Ok(n) => out.bytes_read += n as u64,
                            Err(e) => out.note(&e),
                        }
                    }
                }
                Err(e) => out.note(&e),
            },
            Ok(_) => {}
            Err(e) => out.note(&e),
        }
    }
    if let Err(e) = h5mount::inspect::inspect(path, None, &mut std::io::sink()) {
        out.note(&e);
    }
    out
}

/// Run `exercise` on `path` in a worker thread under `catch_unwind`, bounded by
/// [`CASE_TIMEOUT_S`]. `Err` describes a panic or a hang.
pub fn run_case(path: &Path) -> Result<Outcome, String> {
    let secs = std::env::var("H5MOUNT_CASE_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(CASE_TIMEOUT_S);
    run_case_within(path, secs)
}

/// [`run_case`] with an explicit bound in seconds.
pub fn run_case_within(path: &Path, secs: u64) -> Result<Outcome, String> {
    let p = path.to_path_buf();
    bounded(secs, move || exercise(&p))
}

/// Run `f` in a worker thread under `catch_unwind`; `Err` describes a panic, or a result
/// that did not come within `secs` seconds (the thread is then abandoned).
pub fn bounded<T: Send + 'static>(
    secs: u64,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::Builder::new()
        .name("corruption-case".into())
        .stack_size(8 << 20)
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(r.map_err(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "non-string panic".into())
            }));
        })
        .map_err(|e| format!("spawn: {e}"))?;
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(o)) => Ok(o),
        Ok(Err(msg)) => Err(format!("panic: {msg}")),
        Err(_) => Err(format!("no result after {:?} (hang?)", started.elapsed())),
    }
}

/// Peak resident set size of this process in KiB (`VmHWM`), if the kernel reports it.
fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Set, to the name of a test, in a child process started by [`peak_rss_of`].
const CHILD_ENV: &str = "H5MOUNT_CORRUPTION_CHILD";
/// Marks the line on which such a child reports its peak resident size.
const HWM_MARK: &str = "corruption-child-peak-rss-kib=";

/// The peak resident size, in KiB, of `work` (the body of test `test`) run alone: in a child
/// process, this test binary started again with `test` as its only test and [`CHILD_ENV`]
/// naming it. The child runs `work`, then prints its own `VmHWM` (of its own process,
/// which ran nothing else) and exits; a failure of `work` fails the child, and this test with
/// the child's output. Inside that child, runs `work` and answers `None`.
fn peak_rss_of(test: &str, work: impl FnOnce()) -> Option<u64> {
    if std::env::var(CHILD_ENV).as_deref() == Ok(test) {
        work();
        let kib = peak_rss_kb().expect("VmHWM in /proc/self/status");
        println!("\n{HWM_MARK}{kib}");
        return None;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test)
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprint!("{stderr}");
    assert!(
        out.status.success(),
        "child process running {test}: {}\n{stdout}\n{stderr}",
        out.status
    );
    let kib = stdout
        .lines()
        .find_map(|l| l.strip_prefix(HWM_MARK))
        .and_then(|v| v.trim().parse().ok());
    Some(kib.unwrap_or_else(|| panic!("child running {test} reported no peak RSS:\n{stdout}")))
}

/// Every address the manifest records for a file: object headers, data, chunks.
fn manifest_addrs(entry: &Value) -> Vec<u64> {
    let mut v = Vec::new();
    let Some(objects) = entry["objects"].as_object() else {
        return v;
    };
    for o in objects.values() {
        for k in ["addr", "data_offset"] {
            v.extend(o[k].as_u64());
        }
        if let Some(chunks) = o["chunk_info"].as_array() {
            for c in chunks.iter().take(8) {
                for k in ["addr", "byte_offset", "offset"] {
                    v.extend(c[k].as_u64());
                }
            }
        }
    }
    v
}

/// The variants of one file: (label, bytes). About forty per file keeps the whole suite
/// under a minute in a debug build on two cores.
fn variants(name: &str, bytes: &[u8], addrs: &[u64]) -> Vec<(String, Vec<u8>)> {
    let len = bytes.len() as u64;
    let mut out = Vec::new();
    // Truncations: inside the superblock (signature, version fields, addresses), at and
    // inside recorded object headers, data and chunks, and at regular steps.
    let base = h5_base(bytes);
    let mut cuts: Vec<u64> = [0, 9, 30, 60].iter().map(|c| base + c).collect();
    let mut rng = Rng::new(name);
    let mut picked: Vec<u64> = addrs.to_vec();
    picked.sort_unstable();
    picked.dedup();
    for _ in 0..5 {
        if picked.is_empty() {
            break;
        }
        let a = picked.swap_remove(rng.below(picked.len() as u64) as usize);
        cuts.extend([base + a, base + a + 12]);
    }
    cuts.extend((1..5).map(|i| len * i / 5));
    cuts.sort_unstable();
    cuts.dedup();
    for c in cuts.into_iter().filter(|&c| c < len) {
        out.push((format!("truncate@{c}"), bytes[..c as usize].to_vec()));
    }
    // Byte flips at seeded positions.
    for i in 0..12 {
        let mut b = bytes.to_vec();
        let n = 1 + rng.below(4);
        let mut label = format!("flip#{i}");
        for _ in 0..n {
            // Half the flips land in the first 4 KiB, where the metadata of small files is.
            let pos = if rng.next() & 1 == 0 {
                rng.below(len.min(4096))
            } else {
                rng.below(len)
            };
            let x = (rng.next() as u8) | 1;
            b[pos as usize] ^= x;
            label.push_str(&format!(" {pos}^{x:#x}"));
        }
        out.push((label, b));
    }
    // Structures zeroed: one seeded occurrence of each signature present, cleared up to the
    // next signature (or 4 KiB), and the superblock signature itself.
    let mut all_sigs: Vec<usize> = SIGNATURES
        .iter()
        .flat_map(|s| find_all(bytes, *s))
        .collect();
    all_sigs.sort_unstable();
    for sig in SIGNATURES {
        let found = find_all(bytes, sig);
        if found.is_empty() {
            continue;
        }
        let p = found[rng.below(found.len() as u64) as usize];
        let next = all_sigs
            .iter()
            .copied()
            .find(|&q| q > p)
            .unwrap_or(bytes.len());
        let end = next.min(p + 4096).min(bytes.len());
        let mut b = bytes.to_vec();
        b[p..end].iter_mut().for_each(|x| *x = 0);
        let sig = String::from_utf8_lossy(sig).into_owned();
        out.push((format!("zero {sig}@{p}..{end}"), b));
    }
    let mut b = bytes.to_vec();
    b[base as usize..(base as usize + 8).min(bytes.len())].fill(0);
    out.push(("zero superblock signature".into(), b));
    out
}

/// Absolute offset of the superblock signature (0 if not found at 0, 512, 1024, ...).
fn h5_base(bytes: &[u8]) -> u64 {
    let mut at = 0usize;
    while at + 8 <= bytes.len() {
        if &bytes[at..at + 8] == b"\x89HDF\r\n\x1a\n" {
            return at as u64;
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
    0
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// Run every variant of the files in `names`; return the failures.
fn run_files(names: &[String], tag: &str) -> (usize, Vec<String>) {
    let m = harness::manifest();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    let mut cases = 0;
    for name in names {
        let src = harness::fixture("data").join(name);
        let bytes = std::fs::read(&src).expect("fixture");
        let addrs = manifest_addrs(&m["files"][name.as_str()]);
        let step = if SLOW_FIXTURES.contains(&name.as_str()) {
            3
        } else {
            1
        };
        for (label, b) in variants(name, &bytes, &addrs).into_iter().step_by(step) {
            cases += 1;
            let p = dir.path().join(format!("{tag}-{name}"));
            std::fs::write(&p, &b).expect("write variant");
            match run_case(&p) {
                Ok(o) => failures.extend(
                    o.anonymous
                        .iter()
                        .map(|a| format!("{name} {label}: anonymous error {a}")),
                ),
                Err(e) => failures.push(format!("{name} {label}: {e}")),
            }
        }
    }
    (cases, failures)
}

/// Fixture names sorted by size; `part` of `parts` (split so the test harness runs them in
/// parallel). The `filters_*_v114` files differ from their `_latest` twins only in the layout
/// message version and are mutated through those.
fn mutated_part(part: usize, parts: usize) -> Vec<String> {
    fixture_part(part, parts)
        .into_iter()
        .filter(|n| !NOT_MUTATED.contains(&n.as_str()))
        .filter(|n| !(n.starts_with("filters_") && n.ends_with("_v114.h5")))
        .collect()
}

fn fixture_part(part: usize, parts: usize) -> Vec<String> {
    let mut v: Vec<(u64, String)> = std::fs::read_dir(harness::fixture("data"))
        .expect("fixtures")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "h5"))
        .map(|e| {
            (
                e.metadata().map(|m| m.len()).unwrap_or(0),
                e.file_name().to_string_lossy().into_owned(),
            )
        })
        .collect();
    v.sort();
    v.into_iter()
        .enumerate()
        .filter(|(i, _)| i % parts == part)
        .map(|(_, (_, n))| n)
        .collect()
}

/// Run the variants of part `part` (in the child process of test `test`, see
/// [`peak_rss_of`]); fail on any failed case or a peak resident size over [`PART_HWM_KB`].
fn check_part(test: &str, part: usize) {
    let work = || {
        let t = Instant::now();
        let names = mutated_part(part, 2);
        let (cases, failures) = run_files(&names, &format!("p{part}"));
        eprintln!(
            "corruption part {part}: {} files, {cases} cases in {:?}",
            names.len(),
            t.elapsed(),
        );
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
    };
    if let Some(kb) = peak_rss_of(test, work) {
        eprintln!("corruption part {part}: peak RSS {kb} KiB (child process)");
        assert!(kb < PART_HWM_KB, "peak RSS {kb} KiB over {PART_HWM_KB} KiB");
    }
}

#[test]
fn corrupted_fixtures_part0() {
    check_part("corrupted_fixtures_part0", 0);
}

#[test]
fn corrupted_fixtures_part1() {
    check_part("corrupted_fixtures_part1", 1);
}

#[test]
fn slow_fixtures_exist() {
    let all = fixture_part(0, 1);
    for name in SLOW_FIXTURES {
        assert!(all.iter().any(|n| n == name), "{name} is not a fixture");
        assert!(!NOT_MUTATED.contains(&name), "{name} is not mutated at all");
    }
}

#[test]
fn pristine_fixtures_walk_without_anonymous_errors() {
    let mut failures = Vec::new();
    for name in fixture_part(0, 1) {
        let p = harness::fixture("data").join(&name);
        let r = match SLOW_PRISTINE.iter().find(|(n, _)| *n == name) {
            Some(&(_, secs)) => run_case_within(&p, secs),
            None => run_case(&p),
        };
        match r {
            Ok(o) => failures.extend(o.anonymous.iter().map(|a| format!("{name}: {a}"))),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn error_naming_rule_is_strict_enough() {
    assert!(!names_something(&Error::corrupt("x", 0, "").in_object("")));
    assert!(names_something(&Error::corrupt(
        "object header",
        0x60,
        "bad"
    )));
    assert!(!names_something(&Error::Invalid(String::new())));
}

// ---- The hand-made nasties of fixtures/nasty (see make_nasty.py and nasty.json). ----

fn nasty_path(name: &str) -> PathBuf {
    harness::fixture("nasty").join(name)
}

/// Walk the nasty under the case bound (no panic, no hang, every error named), then run
/// `check` on the opened file under the same bound.
fn nasty(name: &str, check: impl FnOnce(&File) -> Result<(), String> + Send + 'static) {
    let path = nasty_path(name);
    let o = run_case(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    eprintln!(
        "{name}: {} objects, {} datasets, errors: {:#?}",
        o.objects,
        o.datasets,
        &o.errors[..o.errors.len().min(4)]
    );
    assert!(
        o.anonymous.is_empty(),
        "{name}: anonymous errors {:?}",
        o.anonymous
    );
    let r = bounded(CASE_TIMEOUT_S, move || {
        let f = File::open(&path, &OpenOptions::default()).map_err(|e| format!("open: {e}"))?;
        check(&f)
    });
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{name}: {e}"),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// Read the whole image of dataset `path` in 64 KiB pieces.
fn read_whole(f: &File, path: &str) -> h5mount::Result<Vec<u8>> {
    let d = f.dataset(f.resolve(path)?)?;
    if d.is_empty() {
        // An empty image still says whether it can be served.
        d.read_at(0, &mut [0u8; 1])?;
    }
    let mut out = vec![0u8; usize::try_from(d.len()).unwrap_or(usize::MAX).min(1 << 24)];
    let mut done = 0;
    while done < out.len() {
        let end = (done + READ_LEN).min(out.len());
        let n = d.read_at(done as u64, &mut out[done..end])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    out.truncate(done);
    Ok(out)
}

/// The operation must fail, with an error that names something.
fn must_fail<T: std::fmt::Debug>(what: &str, r: h5mount::Result<T>) -> Result<(), String> {
    match r {
        Ok(v) => Err(format!("{what}: expected an error, got {v:?}")),
        Err(e) if names_something(&e) => Ok(()),
        Err(e) => Err(format!("{what}: anonymous error {e:?}")),
    }
}

#[test]
fn nasty_group_btree_cycle() {
    nasty("btree_group_cycle.h5", |f| {
        must_fail("links(/g)", f.resolve("/g").and_then(|g| f.links(g)))
    });
}

#[test]
fn nasty_chunk_btree_cycle() {
    nasty("btree_chunk_cycle.h5", |f| {
        must_fail("read /d", read_whole(f, "/d"))
    });
}

#[test]
fn nasty_fractal_heap_indirect_self() {
    nasty("fheap_indirect_self.h5", |f| {
        must_fail(
            "attributes(/g)",
            f.resolve("/g").and_then(|g| f.attributes(g)),
        )
    });
}

#[test]
fn nasty_object_header_continuation_loop() {
    nasty("ohdr_continuation_loop.h5", |f| {
        must_fail(
            "attributes(/d)",
            f.resolve("/d").and_then(|d| f.attributes(d)),
        )
    });
}

#[test]
fn nasty_dimension_product_overflow() {
    nasty("dims_overflow.h5", |f| {
        must_fail("read /d", read_whole(f, "/d"))
    });
}

#[test]
fn nasty_chunk_size_past_eof() {
    nasty("chunk_size_huge.h5", |f| {
        must_fail("read /d", read_whole(f, "/d"))
    });
}

#[test]
fn nasty_chunk_dims_huge() {
    nasty("chunk_dims_huge.h5", |f| {
        let r = read_whole(f, "/d");
        // Refused before a 512 MiB decode buffer is allocated, not by the inflate that
        // would follow.
        match &r {
            Err(e) if e.to_string().contains("exceeds") => must_fail("read /d", r),
            other => Err(format!(
                "read /d: expected the chunk size limit, got {other:?}"
            )),
        }
    });
}

#[test]
fn nasty_contiguous_address_past_eof() {
    nasty("contiguous_past_eof.h5", |f| {
        must_fail("read /d", read_whole(f, "/d"))
    });
}

#[test]
fn nasty_link_address_past_eof() {
    nasty("link_past_eof.h5", |f| {
        must_fail("kind(/g)", f.resolve("/g").and_then(|g| f.kind(g)))
    });
}

#[test]
fn nasty_deflate_bomb() {
    // Either refused (output larger than the chunk) or, as libhdf5 does, the chunk's 64 KiB
    // of zeros; never 64 MiB in memory (the peak RSS bound of the child process doing it).
    let work = || {
        nasty("deflate_bomb.h5", |f| match read_whole(f, "/d") {
            Ok(b) if b.len() == 65536 && b.iter().all(|&x| x == 0) => Ok(()),
            Ok(b) => Err(format!("read /d: {} bytes, not 64 KiB of zeros", b.len())),
            Err(e) if e.errno_class() == h5mount::error::ErrorClass::Unsupported => Ok(()),
            Err(e) => must_fail::<()>("read /d", Err(e)),
        })
    };
    if let Some(kb) = peak_rss_of("nasty_deflate_bomb", work) {
        eprintln!("deflate bomb: peak RSS {kb} KiB (child process)");
        assert!(kb < BOMB_HWM_KB, "peak RSS {kb} KiB over {BOMB_HWM_KB} KiB");
    }
}

#[test]
fn nasty_deep_nesting_walks() {
    let o = run_case(&nasty_path("deep_1000.h5")).expect("deep_1000.h5");
    assert!(o.anonymous.is_empty(), "{:?}", o.anonymous);
    assert_eq!(
        o.objects, 1002,
        "root, 1,000 groups and the leaf: {:?}",
        o.errors
    );
    assert_eq!(o.max_depth, 1001);
    nasty("deep_1000.h5", |f| {
        let leaf = format!("{}/leaf", "/g".repeat(1000));
        match read_whole(f, &leaf) {
            Ok(b) => {
                let want: Vec<u8> = (0i16..5).flat_map(|v| v.to_le_bytes()).collect();
                if b == want {
                    Ok(())
                } else {
                    Err(format!("leaf reads {b:?}"))
                }
            }
            // Layouts not implemented yet are tolerated; nothing else.
            Err(e) if e.errno_class() == h5mount::error::ErrorClass::Unsupported => Ok(()),
            Err(e) => Err(format!("leaf: {e}")),
        }
    });
}
