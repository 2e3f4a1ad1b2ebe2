//! A remote object over a store in memory, with no server and no socket: `object_store`'s
//! `InMemory` behind its `ThrottledStore`, whose wait before each GET stands for a store's
//! latency. What the object does with the store's answers:
//! - reads of every kind (metadata, data, several ranges, after prefetch hints) give the
//!   object's bytes, whatever the order and sizes (proptest), through a cache small enough
//!   to evict;
//! - readers of one missing page at the same time cause one GET (single flight), and
//!   prefetch hints close to each other go in one GET;
//! - an object replaced in the store while open fails the reads of what is not cached
//!   (`If-Match`: `StaleNetworkFileHandle`), never answering with the new bytes;
//! - a store slower than the time bound fails a read with `TimedOut` once the bound is
//!   out, not when the store answers; the same range then fails again at once, with no
//!   request, while its pages are held failed;
//! - an object deleted from the store reads as `NotFound`.
//!
//! Each object gets a page cache of its own ([`own_pages`]): the process's shared cache
//! would mix the tests' pages, counts and fail holds.

use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use object_store::memory::InMemory;
use object_store::path::Path as StorePath;
use object_store::throttle::{ThrottleConfig, ThrottledStore};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use proptest::prelude::*;

use super::super::pages::PageCache;
use super::super::source::{read_exact_at, ByteSource, DataHint, ReadCtx, RemoteSource};
use super::object::Remote;
use super::{RemoteKind, RemoteOptions, FIRST_GET};

/// Bytes that differ from page to page and within pages, so that a misplaced piece shows.
pub(super) fn bytes_of(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// A runtime for the tests' own calls to the store (putting and deleting objects).
fn runtime() -> std::io::Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    Ok(RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }))
}

/// `r` with a page cache of its own (`meta` and `data` bytes), its failed pages held for
/// `hold`.
pub(super) fn own_pages(mut r: Remote, meta: u64, data: u64, hold: Duration) -> Remote {
    let pages = PageCache::new(meta, data);
    pages.set_fail_hold(hold);
    Arc::get_mut(&mut r.inner)
        .expect("a new object is not shared")
        .pages = Arc::new(pages);
    r
}

/// The kind a failed read carries.
pub(super) fn kind_of<T: std::fmt::Debug>(r: std::io::Result<T>) -> Option<RemoteKind> {
    RemoteKind::of(&r.expect_err("the read should fail"))
}

/// GETs the object has sent so far.
pub(super) fn gets(r: &Remote) -> u64 {
    r.requests().gets
}

/// One object in a throttled store in memory.
struct Fixture {
    store: Arc<ThrottledStore<InMemory>>,
    path: StorePath,
    data: Vec<u8>,
}

impl Fixture {
    /// An object of `data` named `name`, each GET (and HEAD) waiting `wait` first.
    fn new(name: &str, data: Vec<u8>, wait: Duration) -> Fixture {
        let config = ThrottleConfig {
            wait_get_per_call: wait,
            ..ThrottleConfig::default()
        };
        let f = Fixture {
            store: Arc::new(ThrottledStore::new(InMemory::new(), config)),
            path: StorePath::from(format!("mem/{name}.h5")),
            data,
        };
        f.put(f.data.clone());
        f
    }

    /// Put `data` as the object (a new ETag).
    fn put(&self, data: Vec<u8>) {
        let rt = runtime().expect("runtime");
        rt.block_on(self.store.put(&self.path, PutPayload::from(data)))
            .expect("put into memory");
    }

    /// The object as it is now (length and ETag from a HEAD), with `opts`.
    fn open(&self, opts: &RemoteOptions, hold: Duration) -> Remote {
        let rt = runtime().expect("runtime");
        let meta = rt
            .block_on(self.store.head(&self.path))
            .expect("head in memory");
        let url = format!("s3://store-tests/{}", self.path);
        let store: Arc<dyn ObjectStore> = self.store.clone();
        let r = Remote::with_meta(
            store,
            None,
            self.path.clone(),
            &url,
            meta.size,
            meta.e_tag,
            opts,
        );
        own_pages(r, 4 << 20, 32 << 20, hold)
    }

    fn at(&self, offset: u64, n: usize) -> &[u8] {
        let end = (offset as usize + n).min(self.data.len());
        &self.data[(offset as usize).min(end)..end]
    }
}

const HOUR: Duration = Duration::from_secs(3600);

/// An object longer than the first GET and than one part (`PART`), not a whole number of
/// pages.
const LEN: usize = (6 << 20) + 777;

fn shared_data() -> &'static Vec<u8> {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| bytes_of(LEN, 1))
}

#[derive(Clone, Debug)]
enum Op {
    /// A metadata read at an offset, of a length (past the end: short).
    Meta(u64, usize),
    /// A data read, in a dataset whose block is the whole object or with no block.
    Data(u64, usize, bool),
    /// Several ranges at once, inside the object.
    Ranges(Vec<(u64, usize)>),
    /// Prefetch hints.
    Hint(Vec<(u64, u64)>),
}

fn op() -> impl Strategy<Value = Op> {
    let len = LEN as u64;
    prop_oneof![
        (0..len + 4096, 1usize..=(96 << 10)).prop_map(|(o, n)| Op::Meta(o, n)),
        (0..len + 4096, 1usize..=(5 << 20), any::<bool>()).prop_map(|(o, n, b)| Op::Data(o, n, b)),
        prop::collection::vec((0..len - 70_000, 1usize..70_000), 1..6).prop_map(Op::Ranges),
        prop::collection::vec((0..len, 1u64..300_000), 1..12).prop_map(Op::Hint),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Reads of every kind, in any order, through a cache small enough to evict, give the
    /// object's bytes (the store waits a little before each GET, so that background
    /// fetches and readers overlap).
    #[test]
    fn reads_give_the_objects_bytes(ops in prop::collection::vec(op(), 1..8)) {
        let f = Fixture::new("random", shared_data().clone(), Duration::from_millis(1));
        let opts = RemoteOptions::default();
        let r = own_pages(f.open(&opts, HOUR), 1 << 20, 4 << 20, HOUR);
        let hint = |whole: bool| DataHint { object: 7, extent: whole.then_some((0, LEN as u64)) };
        for op in ops {
            match op {
                Op::Meta(o, n) => {
                    let mut b = vec![0u8; n];
                    let got = r.read_at(o, &mut b).expect("metadata read");
                    prop_assert_eq!(&b[..got], f.at(o, n));
                }
                Op::Data(o, n, whole) => {
                    let mut b = vec![0u8; n];
                    let got = r.read_data_at(o, &mut b, &hint(whole), ReadCtx::default()).expect("data read");
                    prop_assert_eq!(&b[..got], f.at(o, n));
                }
                Op::Ranges(rs) => {
                    let mut bufs: Vec<Vec<u8>> = rs.iter().map(|&(_, n)| vec![0u8; n]).collect();
                    let mut ranges: Vec<(u64, &mut [u8])> = rs
                        .iter()
                        .zip(bufs.iter_mut())
                        .map(|(&(o, _), b)| (o, &mut b[..]))
                        .collect();
                    for (o, b) in ranges.iter_mut() {
                        read_exact_at(&r, *o, b).expect("read of a range");
                    }
                    for (&(o, n), b) in rs.iter().zip(&bufs) {
                        prop_assert_eq!(&b[..], f.at(o, n));
                    }
                }
                Op::Hint(h) => r.prefetch(&h),
            }
        }
    }
}

#[test]
fn readers_of_one_missing_page_share_one_get() {
    // Each GET waits a little, so that the readers are most likely all waiting together
    // (and the count is one GET whether or not they are).
    let f = Fixture::new(
        "single-flight",
        bytes_of(4 << 20, 2),
        Duration::from_millis(50),
    );
    let r = f.open(&RemoteOptions::default(), HOUR);
    let at = 2 << 20;
    let readers = 8;
    let barrier = Barrier::new(readers);
    std::thread::scope(|s| {
        for i in 0..readers {
            let (r, f, barrier) = (&r, &f, &barrier);
            s.spawn(move || {
                barrier.wait();
                let o = at + 100 * i as u64;
                let mut b = [0u8; 64];
                assert_eq!(r.read_at(o, &mut b).expect("read"), 64);
                assert_eq!(&b[..], f.at(o, 64));
            });
        }
    });
    assert_eq!(gets(&r), 1, "one GET for the readers of one page");
}

/// Name `hints` to `r` in one prefetch, then read each: the bytes of `f`.
fn hint_and_read(f: &Fixture, r: &Remote, hints: &[(u64, u64)]) {
    r.prefetch(hints);
    for &(o, n) in hints {
        let mut b = vec![0u8; n as usize];
        assert_eq!(r.read_at(o, &mut b).expect("read"), n as usize);
        assert_eq!(&b[..], f.at(o, n as usize));
    }
}

#[test]
fn prefetch_hints_close_together_go_in_one_get() {
    let f = Fixture::new("merge", bytes_of(8 << 20, 3), Duration::from_millis(5));
    let r = f.open(&RemoteOptions::default(), HOUR);
    // Twelve pieces 40 KiB apart (gaps well under MERGE_GAP), and one far away.
    let mut hints: Vec<(u64, u64)> = (0..12).map(|k| ((2 << 20) + k * (40 << 10), 200)).collect();
    hints.push((6 << 20, 200));
    // The readers wait for the pages the hints claimed: no GET of their own.
    hint_and_read(&f, &r, &hints);
    let c = r.requests();
    assert_eq!(c.gets, 2, "{c:?}");
    assert_eq!(c.merged, 11, "{c:?}");
}

#[test]
fn a_wider_merge_gap_takes_hints_a_megabyte_apart_in_one_get_and_keeps_the_gaps() {
    // Headers between a file's data: hints 1 MiB apart. The default gap sends a GET each;
    // `--merge-gap 2M` one GET of the whole span (longer than PART: up to 16 gaps), whose
    // bytes between the hints are kept too.
    let hints: Vec<(u64, u64)> = (0..8).map(|k| ((2 << 20) + k * (1 << 20), 300)).collect();
    let data = bytes_of(12 << 20, 8);
    for (gap, want) in [(super::MERGE_GAP, 8), (2 << 20, 1)] {
        let f = Fixture::new("gap", data.clone(), Duration::from_millis(5));
        let opts = RemoteOptions {
            merge_gap: gap,
            ..RemoteOptions::default()
        };
        let r = f.open(&opts, HOUR);
        hint_and_read(&f, &r, &hints);
        let c = r.requests();
        assert_eq!(c.gets, want, "gap {gap}: {c:?}");
        // A read between two hints: cached with the wide gap, a GET of its own otherwise.
        let mut b = vec![0u8; 4096];
        assert_eq!(
            r.read_at((5 << 20) + (1 << 19), &mut b).expect("read"),
            4096
        );
        assert_eq!(&b[..], f.at((5 << 20) + (1 << 19), 4096));
        assert_eq!(
            r.requests().gets,
            want + u64::from(gap == super::MERGE_GAP),
            "gap {gap}"
        );
    }
}

#[test]
fn bytes_read_once_let_their_whole_pages_go_and_keep_the_rest() {
    let f = Fixture::new("once", bytes_of(8 << 20, 9), Duration::ZERO);
    let r = f.open(&RemoteOptions::default(), HOUR);
    // A chunk from 100 bytes into one page to 100 bytes into another, fetched with the
    // pages around it.
    let (at, n) = ((2 << 20) + 100, 200_000u64);
    let around = ((2 << 20) - 65536, 400_000usize);
    r.prefetch(&[(around.0, around.1 as u64)]);
    let mut all = vec![0u8; around.1];
    assert_eq!(r.read_at(around.0, &mut all).expect("read"), around.1);
    let mut b = vec![0u8; n as usize];
    let hint = DataHint::default();
    let got = r.read_data_once(at, &mut b, &hint, ReadCtx::default());
    assert_eq!(got.expect("read"), n as usize);
    assert_eq!(&b[..], f.at(at, n as usize));
    let gets = r.requests().gets;
    // The pages wholly inside it are gone; the two it shares with other bytes, and the
    // pages around it, are here.
    assert!(!r.cached(at + 16384, 16384));
    assert!(r.cached(at - 100, 200) && r.cached(at + n - 100, 200));
    assert!(r.cached((2 << 20) - 65536, 65536) && r.cached(at + n + 16384, 16384));
    // Read again, it is fetched again, equal.
    assert_eq!(r.read_at(at, &mut b).expect("read again"), n as usize);
    assert_eq!(&b[..], f.at(at, n as usize));
    assert!(r.requests().gets > gets);
}

#[test]
fn an_object_replaced_while_open_fails_its_reads_and_never_gives_new_bytes() {
    let f = Fixture::new("replaced", bytes_of(4 << 20, 4), Duration::ZERO);
    let r = f.open(&RemoteOptions::default(), HOUR);
    let mut b = vec![0u8; 4096];
    r.read_at(100, &mut b).expect("read of the head");
    assert_eq!(&b[..], f.at(100, 4096));
    f.put(bytes_of(4 << 20, 5));
    // What is not cached: a 412 from the store, as the object's own kind.
    let changed = Some(RemoteKind::Changed);
    assert_eq!(kind_of(r.read_at(3 << 20, &mut b)), changed);
    // A read that starts in cached pages and goes on into others fails whole.
    let mut across = vec![0u8; 8192];
    assert_eq!(kind_of(r.read_at(FIRST_GET - 4096, &mut across)), changed);
    // A background fetch fails its readers the same way.
    r.prefetch(&[(2 << 20, 100)]);
    assert_eq!(kind_of(r.read_at(2 << 20, &mut b[..100])), changed);
    let hint = DataHint::default();
    assert_eq!(
        kind_of(r.read_data_at(5 << 19, &mut b, &hint, ReadCtx::default())),
        changed
    );
    // What is cached is the old object's bytes, never the new one's.
    r.read_at(100, &mut b).expect("cached");
    assert_eq!(&b[..], f.at(100, 4096));
    assert!(r.requests().changed >= 3);
    // A refresh sees the change.
    let now = r.current_identity().expect("HEAD");
    assert_ne!(now, r.identity());
}

#[test]
fn a_store_slower_than_the_bound_fails_the_read_in_time_and_holds_the_failure() {
    let f = Fixture::new("slow", bytes_of(2 << 20, 6), Duration::ZERO);
    let opts = RemoteOptions {
        request_timeout: Duration::from_millis(200),
        retry_total: Duration::from_millis(300),
        ..RemoteOptions::default()
    };
    let bound = opts.bound();
    let r = f.open(&opts, HOUR);
    // Slow from now on (the HEAD that opened it waits too).
    f.store.config_mut(|c| c.wait_get_per_call = HOUR);
    let mut b = [0u8; 100];
    let t = Instant::now();
    let e = r
        .read_at(10, &mut b)
        .expect_err("the store never answers in time");
    let took = t.elapsed();
    assert_eq!(RemoteKind::of(&e), Some(RemoteKind::Exhausted), "{e}");
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert!(took >= bound, "failed before the bound: {took:?}");
    assert!(took < 20 * bound, "failed long after the bound: {took:?}");
    // Asked again while held: the same failure, with no GET.
    let sent = gets(&r);
    assert_eq!(kind_of(r.read_at(10, &mut b)), Some(RemoteKind::Exhausted));
    assert_eq!(gets(&r), sent, "a held page is not fetched again");
    // A background fetch fails its readers in time too.
    r.prefetch(&[(FIRST_GET + 5000, 100)]);
    let t = Instant::now();
    assert_eq!(
        kind_of(r.read_at(FIRST_GET + 5000, &mut b)),
        Some(RemoteKind::Exhausted)
    );
    assert!(t.elapsed() < 20 * bound, "{:?}", t.elapsed());
    // Once the hold is over and the store is quick again, the read is served.
    f.store.config_mut(|c| c.wait_get_per_call = Duration::ZERO);
    r.inner.pages.set_fail_hold(Duration::ZERO);
    assert_eq!(r.read_at(10, &mut b).expect("served"), 100);
    assert_eq!(&b[..], f.at(10, 100));
}

#[test]
fn an_object_gone_from_the_store_reads_as_not_found() {
    let f = Fixture::new("gone", bytes_of(1 << 20, 7), Duration::ZERO);
    let r = f.open(&RemoteOptions::default(), HOUR);
    runtime()
        .expect("runtime")
        .block_on(f.store.delete(&f.path))
        .expect("delete");
    let mut b = [0u8; 10];
    assert_eq!(kind_of(r.read_at(0, &mut b)), Some(RemoteKind::NotFound));
    let e = r.current_identity().expect_err("gone");
    assert_eq!(RemoteKind::of(&e), Some(RemoteKind::NotFound));
}
