//! Issue 5's mechanisms through a real mount, observed in the mount's statistics (the xattr
//! `user.h5mount.stats` on the root, see `src/fs/stats.rs`), not timed: speed itself is
//! measured by `mount-tests/bench/run`.
//!
//! Fixture: `/gz_shuf_fixed` of `fixtures/big/soak.h5` (made by `make_soak.py`, digests in
//! `soak.json`): 16 MiB of int32, gzip + shuffle, 64 chunks of 256 KiB, fixed-array index.
//! Each test mounts afresh, so the page cache and the chunk cache start empty.
//!
//! - sequential `read()` (as `cat` does, 128 KiB at a time): bytes equal h5py's; the kernel's
//!   requests reach 1 MiB (the daemon raised the bdi's readahead); each chunk is decoded
//!   once; prefetch workers went through every piece they queued (waited for: a worker
//!   counts its piece when its job ends, which may be after the reader is done);
//! - a re-read through a new descriptor comes from the page cache (`FOPEN_KEEP_CACHE`): the
//!   daemon sees no request at all. The pages are held in memory by a locked mapping, so
//!   reclaim under memory pressure cannot drop them first;
//! - 4 KiB `pread`s 1 MiB apart under `POSIX_FADV_RANDOM`: no prefetch job queued;
//! - the bdi's `read_ahead_kb` is what the statistics say the daemon set, `-o readahead=0`
//!   leaves the kernel's 128 KiB and `--readahead 512` sets 512 (as root);
//! - `--max-request 4096` (as root, Linux 6.13 and later): requests of 4 MiB;
//! - `mmap` read in order: bytes equal, requests larger than the default 128 KiB;
//! - a compressed dataset of another file reached through an external link is decoded into
//!   the mount's one chunk cache (its misses are counted there);
//! - a root-group HDF5 attribute named `h5mount.stats` (`fixtures/perf/`, `make_rootattr.py`)
//!   is listed, but `getxattr` of that name answers the statistics.

mod harness;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use harness::{sha256, stats, Mapping, Mount, Rng, STATS_XATTR as STATS};
use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
use nix::sys::mman::{madvise, mlock, MmapAdvise};

const DATASET: &str = "/gz_shuf_fixed";
/// Its chunks (16 MiB / 256 KiB).
const CHUNKS: u64 = 64;
/// Image bytes of one of its chunks: one prefetch piece.
const CHUNK_BYTES: u64 = 256 << 10;
const MIB: u64 = 1 << 20;
/// The kernel's default FUSE readahead and request size.
const DEFAULT_REQUEST: u64 = 128 << 10;

fn soak() -> PathBuf {
    harness::fixture("big/soak.h5")
}

/// `(nbytes, sha256)` of `DATASET` per `soak.json`.
fn reference() -> (u64, String) {
    let path = soak().with_file_name("soak.json");
    let json: serde_json::Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    let e = &json[DATASET];
    (
        e["nbytes"].as_u64().unwrap(),
        e["sha256"].as_str().unwrap().to_string(),
    )
}

/// `after[key] - before[key]`.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, key: &str) -> u64 {
    after[key] - before[key]
}

/// Read `path` start to end in 128 KiB `read()` calls, as `cat` does.
fn cat(path: &Path) -> Vec<u8> {
    let mut f = fs::File::open(path).unwrap();
    let mut buf = vec![0u8; DEFAULT_REQUEST as usize];
    let mut out = Vec::new();
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn stats_xattr_is_served_on_the_root_only_and_not_listed() {
    let m = Mount::background(&soak(), &[]);
    let s = stats(&m);
    // Every key the daemon defines, and no other.
    let keys = h5mount::fs::stats::KEYS;
    for k in keys {
        assert!(s.contains_key(k), "missing {k}: {s:?}");
    }
    assert_eq!(s.len(), keys.len(), "{s:?}");
    // Default cache: 256 MiB.
    assert_eq!(s["cache_capacity"], 256 * MIB);
    assert_eq!(s["read_requests"], 0);
    assert!(!harness::listxattr(m.path())
        .unwrap()
        .iter()
        .any(|n| n == STATS));
    assert_eq!(
        harness::getxattr(&m.at(DATASET), STATS),
        Err(libc::ENODATA),
        "only the root serves the statistics"
    );
}

#[test]
fn sequential_read_is_large_decodes_each_chunk_once_and_prefetches() {
    let (len, sha) = reference();
    let m = Mount::background(&soak(), &[]);
    let bytes = cat(&m.at(DATASET));
    assert_eq!(bytes.len() as u64, len);
    assert_eq!(sha256(&bytes), sha);
    let s = stats(&m);
    eprintln!("after a sequential read of {len} bytes: {s:?}");
    if s["readahead_kb"] == 0 {
        harness::skip("request size check: the daemon could not raise read_ahead_kb");
        assert!(s["read_max_request"] >= DEFAULT_REQUEST);
    } else {
        // The kernel sends what the readahead allows, up to the 1 MiB asked for at init.
        assert_eq!(s["read_max_request"], MIB, "{s:?}");
        assert!(s["read_requests"] <= 2 * len / MIB, "{s:?}");
    }
    // Every byte reached the daemon; a few pages reclaimed before they were read may be
    // asked again.
    assert!(
        s["read_bytes"] >= len && s["read_bytes"] < len + len / 4,
        "{s:?}"
    );
    // Each chunk decoded exactly once: by the reader or by a prefetch worker, whichever came
    // first (the other waits for that decode or finds it cached).
    assert_eq!(s["cache_misses"], CHUNKS, "{s:?}");
    assert_eq!(s["cache_evictions"], 0, "{s:?}");
    // Pieces were queued ahead of the reader (all queued by now: a read queues its pieces
    // before it is answered), none dropped, each one chunk's worth of at least 256 KiB: here
    // one chunk, aligned, inside the 16 MiB. A worker adds its piece's bytes when its job ends,
    // which may come after the reader got the chunks it waited for: wait for every piece.
    let jobs = s["prefetch_jobs"];
    assert!(jobs > 0, "{s:?}");
    assert_eq!(s["prefetch_dropped"], 0, "{s:?}");
    assert!(
        harness::wait_for(|| stats(&m)["prefetch_bytes"] == jobs * CHUNK_BYTES),
        "prefetch workers did not go through the {jobs} pieces queued: {:?}",
        stats(&m)
    );
    let end = stats(&m);
    assert_eq!(end["prefetch_jobs"], jobs, "{end:?}");
    assert_eq!(end["cache_misses"], CHUNKS, "{end:?}");
}

/// Bytes of the dataset held in the page cache by [`reread_comes_from_the_page_cache`]:
/// within the 8 MiB an unprivileged process may lock by default.
const PINNED: usize = 4 << 20;

/// The first `len` bytes of a file mapped and locked in memory (`mlock`), unlocked and
/// unmapped on drop: the kernel cannot reclaim those page-cache pages meanwhile.
struct Pinned(Mapping);

impl Pinned {
    fn new(f: &fs::File, len: usize) -> Pinned {
        let map = Mapping::new(f, 0, len, true).expect("mmap");
        // Pages faulted in here (any reclaimed since they were read) come one by one, without
        // readahead: none is marked to start readahead when it is read later.
        // SAFETY: advice and lock on the mapping just made, of exactly its length; unmapping
        // it on drop also unlocks it.
        unsafe { madvise(map.addr(), len, MmapAdvise::MADV_RANDOM) }.expect("madvise");
        // SAFETY: as above.
        unsafe { mlock(map.addr(), len) }.unwrap_or_else(|e| {
            panic!("mlock of {len} bytes: {e} (the test needs RLIMIT_MEMLOCK of 4 MiB or more)")
        });
        Pinned(map)
    }

    fn bytes(&self) -> &[u8] {
        self.0.bytes()
    }
}

#[test]
fn reread_comes_from_the_page_cache() {
    let (_, sha) = reference();
    let m = Mount::background(&soak(), &[]);
    let path = m.at(DATASET);
    // The first bytes read into the page cache, without readahead (so no page is marked to
    // start more when read again), then locked there.
    let first = fs::File::open(&path).unwrap();
    posix_fadvise(&first, 0, 0, PosixFadviseAdvice::POSIX_FADV_RANDOM).unwrap();
    let mut want = vec![0u8; PINNED];
    first.read_exact_at(&mut want, 0).unwrap();
    let pinned = Pinned::new(&first, PINNED);
    assert!(pinned.bytes() == want, "the mapping differs from read()");
    let before = stats(&m);
    // A new open keeps the file's cached pages (without `FOPEN_KEEP_CACHE` the kernel drops
    // them here, locked or not), and the re-read is served from them.
    let again = fs::File::open(&path).unwrap();
    posix_fadvise(&again, 0, 0, PosixFadviseAdvice::POSIX_FADV_RANDOM).unwrap();
    let mut got = vec![0u8; PINNED];
    again.read_exact_at(&mut got, 0).unwrap();
    let after = stats(&m);
    eprintln!(
        "re-read of {PINNED} cached bytes: {} requests for {} bytes reached the daemon",
        delta(&before, &after, "read_requests"),
        delta(&before, &after, "read_bytes")
    );
    assert!(got == want, "the re-read differs");
    assert_eq!(
        delta(&before, &after, "read_requests"),
        0,
        "{before:?} -> {after:?}"
    );
    drop(pinned);
    assert_eq!(sha256(&cat(&path)), sha);
}

#[test]
fn random_reads_queue_no_prefetch() {
    let (len, sha) = reference();
    let m = Mount::background(&soak(), &[]);
    let path = m.at(DATASET);
    let f = fs::File::open(&path).unwrap();
    posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_RANDOM).unwrap();
    // One 4 KiB read in the middle of each MiB, in a shuffled order: 1 MiB apart or more.
    let mut slots: Vec<u64> = (0..len / MIB).collect();
    let mut rng = Rng(0x5eed_1234);
    for i in (1..slots.len()).rev() {
        slots.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut got = Vec::new();
    for &slot in &slots {
        let off = slot * MIB + MIB / 2;
        let mut buf = vec![0u8; 4096];
        f.read_exact_at(&mut buf, off).unwrap();
        got.push((off, buf));
    }
    let s = stats(&m);
    eprintln!("after {} random 4 KiB reads: {s:?}", slots.len());
    assert_eq!(s["prefetch_jobs"], 0, "{s:?}");
    assert_eq!(s["prefetch_bytes"], 0, "{s:?}");
    // No kernel readahead either: each read is one small request.
    assert_eq!(s["read_requests"], slots.len() as u64, "{s:?}");
    assert!(s["read_max_request"] <= 16 << 10, "{s:?}");
    // One chunk decoded per read, nothing else.
    assert_eq!(s["cache_misses"], slots.len() as u64, "{s:?}");
    drop(f);
    // The bytes are right.
    let all = cat(&path);
    assert_eq!(sha256(&all), sha);
    for (off, buf) in got {
        let o = off as usize;
        assert_eq!(&all[o..o + buf.len()], &buf[..], "at {off}");
    }
}

#[test]
fn bdi_readahead_is_what_the_daemon_reports() {
    let m = Mount::background(&soak(), &[]);
    let s = stats(&m);
    let dev = fs::metadata(m.path()).unwrap().dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let knob = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    let actual: u64 = fs::read_to_string(&knob).unwrap().trim().parse().unwrap();
    eprintln!(
        "{knob} = {actual}; stats readahead_kb = {}",
        s["readahead_kb"]
    );
    if s["readahead_kb"] == 0 {
        // Not root: the knob is not writable and keeps the kernel's default.
        assert!(
            !nix::unistd::geteuid().is_root(),
            "root, yet readahead not set"
        );
        harness::skip(&format!("{knob} not writable here; left at {actual} KiB"));
        return;
    }
    assert_eq!(s["readahead_kb"], 1024);
    assert_eq!(actual, s["readahead_kb"]);
}

/// The bdi `read_ahead_kb` of mount `m`.
fn bdi_readahead(m: &Mount) -> u64 {
    let dev = fs::metadata(m.path()).unwrap().dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let knob = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    fs::read_to_string(&knob).unwrap().trim().parse().unwrap()
}

#[test]
fn readahead_option_sets_or_leaves_the_bdi() {
    // 0: the kernel's default is left, and the statistics say nothing was set.
    let m = Mount::background(&soak(), &["-o", "readahead=0"]);
    let s = stats(&m);
    assert_eq!(s["readahead_kb"], 0, "{s:?}");
    assert_eq!(bdi_readahead(&m), DEFAULT_REQUEST >> 10);
    drop(m);
    let m = Mount::background(&soak(), &["--readahead", "512"]);
    let s = stats(&m);
    if !nix::unistd::geteuid().is_root() {
        assert_eq!(s["readahead_kb"], 0, "{s:?}");
        harness::skip("not root, the bdi's readahead cannot be set");
        return;
    }
    assert_eq!(s["readahead_kb"], 512, "{s:?}");
    assert_eq!(bdi_readahead(&m), 512);
}

/// `--max-request 4096` on a kernel that lets root raise its limit (Linux 6.13 and later):
/// the daemon raises `/proc/sys/fs/fuse/max_pages_limit` (put back afterwards), the readahead
/// follows, and a sequential read arrives in 4 MiB requests with the same bytes. Elsewhere a
/// skip, saying why.
#[test]
fn max_request_asks_for_4_mib_where_the_kernel_allows_it() {
    const LIMIT: &str = "/proc/sys/fs/fuse/max_pages_limit";
    let Ok(old) = fs::read_to_string(LIMIT) else {
        harness::skip(&format!("{LIMIT} does not exist (a kernel before 6.13)"));
        return;
    };
    if !nix::unistd::geteuid().is_root() {
        harness::skip(&format!("not root, {LIMIT} cannot be raised"));
        return;
    }
    /// Puts the machine's limit back, however the test ends.
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = fs::write(LIMIT, self.0.trim());
        }
    }
    let _restore = Restore(old.clone());
    // From the default limit, so that the daemon must raise it.
    fs::write(LIMIT, "256").unwrap();
    let (len, sha) = reference();
    let m = Mount::background(&soak(), &["--max-request", "4096"]);
    let pages: u64 = fs::read_to_string(LIMIT).unwrap().trim().parse().unwrap();
    assert!(pages * 4096 >= 4 * MIB, "limit not raised: {pages} pages");
    let bytes = cat(&m.at(DATASET));
    assert_eq!(sha256(&bytes), sha);
    assert_eq!(bytes.len() as u64, len);
    let s = stats(&m);
    assert_eq!(s["readahead_kb"], 4096, "{s:?}");
    assert_eq!(s["read_max_request"], 4 * MIB, "{s:?}");
}

#[test]
fn mmap_read_in_order_uses_large_requests() {
    let (len, sha) = reference();
    let m = Mount::background(&soak(), &[]);
    let f = fs::File::open(m.at(DATASET)).unwrap();
    let map = Mapping::new(&f, 0, len as usize, false).expect("mmap");
    // Touch the pages in order (the hash reads them front to back).
    let digest = sha256(map.bytes());
    drop(map);
    assert_eq!(digest, sha);
    let s = stats(&m);
    eprintln!("after an mmap read of {len} bytes: {s:?}");
    if s["readahead_kb"] == 0 {
        harness::skip("request size check: the daemon could not raise read_ahead_kb");
        return;
    }
    assert!(s["read_max_request"] > DEFAULT_REQUEST, "{s:?}");
    assert_eq!(s["cache_misses"], CHUNKS, "{s:?}");
}

/// The first `len` bytes of `p`, read after dropping its pages from the kernel's cache, so
/// the daemon serves them again.
fn read_uncached(p: &Path, len: usize) -> Vec<u8> {
    let f = fs::File::open(p).unwrap();
    posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED).unwrap();
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, 0).unwrap();
    buf
}

fn extlinks() -> PathBuf {
    harness::fixture("extlinks")
}

/// `expected.json` of the external-link fixtures.
fn expected() -> serde_json::Value {
    let text = fs::read_to_string(extlinks().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn external_file_datasets_share_the_mount_cache() {
    let dir = extlinks();
    for form in ["earliest", "latest"] {
        let m = Mount::background(&dir.join(format!("main_{form}.h5")), &[]);
        let before = stats(&m);
        // 100 x 50 float32 in chunks of 10 rows, gzip + shuffle, in sub/a_F.h5.
        let bytes = cat(&m.at("/ext_ds"));
        let want = &expected()[form]["/ext_ds"]["dataset"];
        assert_eq!(bytes.len() as u64, want["nbytes"].as_u64().unwrap());
        assert_eq!(sha256(&bytes), want["sha256"].as_str().unwrap());
        let after = stats(&m);
        assert_eq!(
            delta(&before, &after, "cache_misses"),
            10,
            "{form}: {after:?}"
        );
        assert_eq!(after["cache_entries"], 10, "{form}: {after:?}");
        // Read again past the page cache: all hits in the same cache.
        assert_eq!(read_uncached(&m.at("/ext_ds"), bytes.len()), bytes);
        let last = stats(&m);
        assert_eq!(
            last["cache_misses"], after["cache_misses"],
            "{form}: {last:?}"
        );
        assert!(last["cache_hits"] > after["cache_hits"], "{form}: {last:?}");
    }
}

#[test]
fn after_a_refresh_one_cache_serves_the_new_state_and_the_external_files() {
    for form in ["earliest", "latest"] {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("sub")).unwrap();
        for name in [
            format!("main_{form}.h5"),
            format!("sub/a_{form}.h5"),
            format!("sub/b_{form}.h5"),
        ] {
            fs::copy(extlinks().join(&name), tmp.path().join(&name)).unwrap();
        }
        let main = tmp.path().join(format!("main_{form}.h5"));
        let m = Mount::background(&main, &["--refresh", "1"]);
        let bytes = cat(&m.at("/ext_ds"));
        let first = stats(&m);
        assert_eq!(first["cache_entries"], 10, "{form}: {first:?}");
        // A new modification time is a change: the file is read again and served anew.
        fs::File::options()
            .write(true)
            .open(&main)
            .unwrap()
            .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        assert!(
            harness::wait_for(|| stats(&m)["refreshes"] >= 1),
            "{form}: no refresh: {:?}",
            stats(&m)
        );
        // The external file's chunks are still in the one cache the new state uses (with
        // a cache of the new state's own, these hits would not show here).
        assert_eq!(read_uncached(&m.at("/ext_ds"), bytes.len()), bytes);
        let last = stats(&m);
        assert_eq!(last["cache_capacity"], first["cache_capacity"]);
        assert_eq!(
            last["cache_misses"], first["cache_misses"],
            "{form}: {first:?} -> {last:?}"
        );
        assert!(
            delta(&first, &last, "cache_hits") >= 10,
            "{form}: {first:?} -> {last:?}"
        );
    }
}

#[test]
fn virtual_dataset_sources_decode_into_the_mount_cache() {
    let dir = harness::fixture("vds");
    let text = fs::read_to_string(dir.join("expected.json")).unwrap();
    let want: serde_json::Value = serde_json::from_str(&text).unwrap();
    for form in ["earliest", "latest"] {
        let name = format!("vds_{form}.h5");
        let m = Mount::background(&dir.join(&name), &[]);
        let before = stats(&m);
        // Its source is `chunked` in src3_F.h5: 6 x 10 int32 in chunks of 4 x 4.
        let bytes = cat(&m.at("/blocks"));
        let w = &want[format!("{name}:/blocks")];
        assert_eq!(sha256(&bytes), w["sha256"].as_str().unwrap(), "{form}");
        let after = stats(&m);
        assert!(
            delta(&before, &after, "cache_misses") > 0,
            "{form}: source chunks decoded outside the mount's cache: {after:?}"
        );
    }
}

#[test]
fn stats_win_over_a_root_attribute_of_the_same_name() {
    let dir = harness::fixture("perf");
    for form in ["earliest", "latest"] {
        let m = Mount::background(&dir.join(format!("rootattr_{form}.h5")), &[]);
        let value = harness::getxattr(m.path(), STATS).unwrap();
        let text = String::from_utf8(value).unwrap();
        assert!(text.starts_with("read_requests "), "{form}: {text:?}");
        // The HDF5 attribute stays listed (its value is hidden), beside the others.
        let names = harness::listxattr(m.path()).unwrap();
        assert!(names.iter().any(|n| n == STATS), "{form}: {names:?}");
        assert!(names.iter().any(|n| n == "user.units"), "{form}: {names:?}");
        assert!(harness::getxattr(m.path(), "user.units").is_ok());
    }
}
