//! Load and memory at the mount.
//!
//! `soak`: 16 threads read random ranges of the datasets of `fixtures/big/soak.h5` (compressed
//! and not, every chunk index; about 57 MiB decoded) through a real mount with a 32 MiB chunk
//! cache, for `H5MOUNT_SOAK_SECS` seconds (default 20), checking every byte against reference
//! images read once through the library and checked against `soak.json` (h5py's sha256).
//! Half the reads first drop the file's page cache (`POSIX_FADV_DONTNEED`) so they reach the
//! daemon. It reports reads, bytes, errors (must be 0) and the daemon's peak RSS (`VmHWM`),
//! which must stay within the cache budget plus a fixed overhead: [`OVERHEAD_MIB`] over the
//! RSS of a mount of an empty file. Readers still blocked 30 s after the end fail the test
//! (a deadlock) rather than hang it.
//!
//! `hundred_thousand_datasets`: `fixtures/big/big.h5` (100 groups of 1,000 datasets, made by
//! `make_big.py`, not committed) mounts and lists one group with RSS close to an empty
//! file's, then lists everything; skipped (a counted skip) when the file has not been made, a
//! failure then under `H5MOUNT_REQUIRE_FIXTURES` (`mount-tests/run` makes it and sets that).

mod harness;

use std::collections::BTreeMap;
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use h5mount::model::{File, OpenOptions};
use harness::{Mount, Rng};

/// Chunk cache of the soak mount.
const CACHE_MIB: u64 = 32;
/// Allowed peak RSS above cache budget + empty-mount RSS: issue 5's bound (cache budget +
/// 32 MiB). Each of the daemon's worker threads (4 by default) and prefetch workers (one per
/// core) can hold at once a reused 1 MiB request/reply buffer, up to 2 MiB of per-thread decode
/// scratch, and a chunk being decoded outside the cache (here up to 4 MiB decoded plus its
/// compressed bytes). Measured: 9 MiB before prefetch and buffer reuse, 8-24 MiB after.
const OVERHEAD_MIB: u64 = 32;
const THREADS: usize = 16;

fn big_dir() -> PathBuf {
    harness::fixture("big")
}

/// `VmHWM` and `VmRSS` of `pid`, in KiB.
fn mem_kib(pid: i32) -> (u64, u64) {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Extra environment for the daemon: none. glibc's malloc raises its mmap threshold each
/// time a large block is freed, after which chunk-sized buffers fragment per-thread heaps
/// (this soak's peak RSS grew from 65 to 81 MiB over a minute); the daemon therefore
/// re-executes itself with `MALLOC_MMAP_THRESHOLD_` fixed (src/main.rs), and this test checks
/// that the bound holds without help.
fn daemon_env() -> Vec<(&'static str, &'static str)> {
    // The daemon fixes glibc's mmap threshold itself (src/main.rs); nothing to add here.
    Vec::new()
}

/// Background mount of `file` with `extra` arguments and [`daemon_env`].
fn mount(file: &Path, extra: &[&str]) -> Mount {
    Mount::by_command(|mp| {
        let mut c = std::process::Command::new(harness::BIN);
        c.arg(file).arg(mp).args(extra).envs(daemon_env());
        c
    })
}

/// RSS (KiB) of a daemon serving an empty file with the same options, after a listing.
fn empty_mount_rss(extra: &[&str]) -> u64 {
    let tmp = tempfile::tempdir().unwrap();
    let m = mount(&harness::empty_h5(tmp.path()), extra);
    let _ = fs::read_dir(m.path()).unwrap().count();
    mem_kib(m.pid().expect("daemon")).0
}

/// Whole-dataset images through the library, each checked against `soak.json`.
fn references(file: &Path) -> BTreeMap<String, Vec<u8>> {
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(big_dir().join("soak.json")).unwrap()).unwrap();
    let f = File::open(file, &OpenOptions::default()).unwrap();
    let mut out = BTreeMap::new();
    for (path, want) in json.as_object().unwrap() {
        let ds = f.dataset(f.resolve(path).unwrap()).unwrap();
        let mut img = vec![0u8; ds.len() as usize];
        let mut done = 0;
        while done < img.len() {
            let n = ds.read_at(done as u64, &mut img[done..]).unwrap();
            assert!(n > 0, "{path}: short read at {done}");
            done += n;
        }
        assert_eq!(img.len() as u64, want["nbytes"].as_u64().unwrap(), "{path}");
        let sha = harness::sha256(&img);
        assert_eq!(sha, want["sha256"].as_str().unwrap(), "{path}");
        out.insert(path.clone(), img);
    }
    out
}

fn drop_page_cache(f: &fs::File) {
    // SAFETY: a plain syscall on a live descriptor; no memory is passed.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

#[test]
fn soak() {
    let file = big_dir().join("soak.h5");
    let secs: u64 = std::env::var("H5MOUNT_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let refs = Arc::new(references(&file));
    let cache = format!("{CACHE_MIB}M");
    let opts = ["--cache-size", cache.as_str()];
    let base_kib = empty_mount_rss(&opts);
    let m = mount(&file, &opts);
    let pid = m.pid().expect("daemon");
    let names: Vec<String> = refs.keys().cloned().collect();
    let reads = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let (refs, names) = (refs.clone(), names.clone());
        let (reads, bytes, errors, stop) =
            (reads.clone(), bytes.clone(), errors.clone(), stop.clone());
        let files: Vec<fs::File> = names
            .iter()
            .map(|n| fs::File::open(m.at(n)).unwrap())
            .collect();
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1));
            let mut buf = vec![0u8; 2 << 20];
            while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                let i = rng.below(names.len() as u64) as usize;
                let want = &refs[&names[i]];
                if want.is_empty() {
                    continue;
                }
                let off = rng.below(want.len() as u64);
                // Mostly small reads, some up to 2 MiB.
                let max = if rng.below(8) == 0 { 2 << 20 } else { 64 << 10 };
                let len = 1 + rng.below(max) as usize;
                let end = (off as usize + len).min(want.len());
                if rng.below(2) == 0 {
                    drop_page_cache(&files[i]);
                }
                let got = files[i].read_at(&mut buf[..len], off);
                reads.fetch_add(1, Ordering::Relaxed);
                match got {
                    Ok(n) if buf[..n] == want[off as usize..end] => {
                        bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    other => {
                        let e = errors.fetch_add(1, Ordering::Relaxed);
                        if e < 5 {
                            eprintln!("{} at {off}+{len}: {:?}", names[i], other.map(|_| ()));
                        }
                    }
                }
            }
        }));
    }
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        if harness::pid_gone(pid) {
            stop.store(true, Ordering::Relaxed);
            break;
        }
    }
    // No deadlock: every reader returns soon after the deadline (a read takes milliseconds).
    let grace = Instant::now() + Duration::from_secs(30);
    while handles.iter().any(|h| !h.is_finished()) {
        let stuck = handles.iter().filter(|h| !h.is_finished()).count();
        assert!(Instant::now() < grace, "{stuck} reader threads stuck");
        std::thread::sleep(Duration::from_millis(50));
    }
    for h in handles {
        h.join().expect("reader thread");
    }
    let (hwm, _) = mem_kib(pid);
    let (reads, bytes, errors) = (
        reads.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
    );
    let budget_kib = (CACHE_MIB + OVERHEAD_MIB) * 1024 + base_kib;
    eprintln!(
        "soak: {secs} s, {THREADS} threads, {reads} reads, {} MiB, {errors} errors; daemon \
         peak RSS {} MiB (empty-file mount {} MiB, cache {CACHE_MIB} MiB, peak over \
         cache+empty {} MiB; allowed {OVERHEAD_MIB} MiB)",
        bytes >> 20,
        hwm / 1024,
        base_kib / 1024,
        (hwm as i64 - (CACHE_MIB * 1024 + base_kib) as i64) / 1024,
    );
    assert!(!harness::pid_gone(pid), "daemon died");
    assert_eq!(errors, 0);
    assert!(reads > 100, "only {reads} reads");
    assert!(
        hwm <= budget_kib,
        "peak RSS {hwm} KiB over {budget_kib} KiB"
    );
}

#[test]
fn hundred_thousand_datasets() {
    let file = big_dir().join("big.h5");
    if !file.exists() {
        harness::require_or_skip(
            "H5MOUNT_REQUIRE_FIXTURES",
            &format!(
                "{} not made (python3 mount-tests/fixtures/big/make_big.py)",
                file.display()
            ),
        );
        return;
    }
    let base_kib = empty_mount_rss(&[]);
    let m = mount(&file, &[]);
    let pid = m.pid().expect("daemon");
    let groups = fs::read_dir(m.path()).unwrap().count();
    assert_eq!(groups, 100);
    let one: Vec<_> = fs::read_dir(m.at("/g42")).unwrap().collect();
    assert_eq!(one.len(), 1000);
    let two: Vec<u8> = [42i32, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(fs::read(m.at("/g42/d007")).unwrap(), two);
    let (hwm_one, _) = mem_kib(pid);
    let t = Instant::now();
    let mut n = 0;
    for g in fs::read_dir(m.path()).unwrap() {
        for d in fs::read_dir(g.unwrap().path()).unwrap() {
            let _ = d.unwrap().metadata().unwrap().len();
            n += 1;
        }
    }
    assert_eq!(n, 100_000);
    let (hwm_all, _) = mem_kib(pid);
    eprintln!(
        "100,000 datasets: empty-file mount {} KiB; after listing one group of 1,000 {} KiB; \
         after listing and stat of all 100,000 {} KiB ({:.1} s)",
        base_kib,
        hwm_one,
        hwm_all,
        t.elapsed().as_secs_f64()
    );
    // Objects never visited cost nothing: one group listed stays near the empty mount.
    assert!(
        hwm_one <= base_kib + 8 * 1024,
        "{hwm_one} KiB after one group vs {base_kib} KiB empty"
    );
}
