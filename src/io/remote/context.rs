//! Process-wide state of remote sources: the runtime that runs `object_store`'s requests, the
//! page cache every remote object shares, the numbers of object states in that cache, the
//! bound on GETs in flight, and the request counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::super::pages::PageCache;
use super::super::source::RequestCounts;
use super::net::net_stats;
use super::{RemoteOptions, FIRST_GET, MAX_REQUESTS, PART};

/// Request counters of one remote object (and of the whole process: [`totals`]).
#[derive(Debug, Default)]
pub struct RemoteStats {
    pub heads: AtomicU64,
    pub gets: AtomicU64,
    pub bytes: AtomicU64,
    pub failures: AtomicU64,
    pub changed: AtomicU64,
    pub merged: AtomicU64,
    pub readahead: AtomicU64,
}

pub(super) static TOTALS: RemoteStats = RemoteStats {
    heads: AtomicU64::new(0),
    gets: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    failures: AtomicU64::new(0),
    changed: AtomicU64::new(0),
    merged: AtomicU64::new(0),
    readahead: AtomicU64::new(0),
};

pub(super) fn counts_of(s: &RemoteStats) -> RequestCounts {
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    RequestCounts {
        heads: get(&s.heads),
        gets: get(&s.gets),
        bytes: get(&s.bytes),
        failures: get(&s.failures),
        changed: get(&s.changed),
        merged: get(&s.merged),
        readahead: get(&s.readahead),
        ..RequestCounts::default()
    }
}

/// What every remote object of the process has asked its server (HEADs and GETs as the
/// layers above asked for them, before retries: see [`net_stats`] for what was sent).
pub fn totals() -> RequestCounts {
    let net = net_stats();
    let mut c = counts_of(&TOTALS);
    c.lists = net.lists;
    c.sent = net.heads + net.gets + net.lists;
    c.retries = net.errors.saturating_sub(c.failures);
    c.p50_us = (net.p50_ms * 1000.0) as u64;
    c.p99_us = (net.p99_ms * 1000.0) as u64;
    c
}

/// The process's runtime for `object_store`'s requests.
pub(super) fn runtime() -> std::io::Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("h5mount-io")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| std::io::Error::other(e.clone()))
}

/// The page cache of every remote object of the process, sized by the first options asked.
pub(super) fn shared_pages(opts: &RemoteOptions) -> Arc<PageCache> {
    static PAGES: OnceLock<Arc<PageCache>> = OnceLock::new();
    PAGES
        .get_or_init(|| {
            Arc::new(PageCache::new(
                opts.meta_cache_bytes.max(2 * FIRST_GET),
                opts.data_cache_bytes.max(4 * PART),
            ))
        })
        .clone()
}

/// The page-cache number of the object state `identity` (URL, length and ETag): the same
/// object reopened finds its pages again; a changed one has a new number.
pub(super) fn object_number(identity: &str) -> u64 {
    static NUMBERS: OnceLock<Mutex<std::collections::HashMap<String, u64>>> = OnceLock::new();
    let mut m = NUMBERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let next = m.len() as u64 + 1;
    *m.entry(identity.to_string()).or_insert(next)
}

/// Bounds the GETs in flight in the process.
pub(super) static REQUESTS: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(MAX_REQUESTS);

/// Run `fut` (request `what` about `url`) on the runtime, failing it after `bound`.
pub(super) fn block_on_bounded<T>(
    bound: std::time::Duration,
    url: &str,
    what: &str,
    fut: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    runtime()?
        .block_on(async { tokio::time::timeout(bound, fut).await })
        .unwrap_or_else(|_| Err(super::error::out_of_time(url, what, bound)))
}
