//! What the remote sources of one mount share: the runtime that runs `object_store`'s
//! requests, the page cache, the numbers of object states in that cache, the bound on GETs in
//! flight, and the request counters. One [`RemoteContext`] value holds them; the daemon
//! makes it (with the options, [`RemoteOptions::context`](super::RemoteOptions)) and every
//! origin and object opened with those options shares it, so nothing of it is a process
//! global: a second mount in the same process (a test, a library user) has its own cache
//! sized by its own options, its own counters, and its own runtime, shut down when the last
//! object using it goes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::super::pages::PageCache;
use super::super::source::RequestCounts;
use super::net::{Net, NetStats};
use super::{FIRST_GET, MAX_REQUESTS, PART};

/// Object states whose page-cache numbers are remembered ([`RemoteContext::object_number`]):
/// an object reopened after more states than this were opened gets a new number, and
/// fetches its pages again.
const NUMBERS: usize = 65_536;

/// Request counters of one remote object (and of a whole context: [`RemoteContext::totals`]).
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

/// The shared state of the remote sources of one mount (see the module docs). Cloning it
/// is cheap, and the clones share everything.
#[derive(Clone)]
pub struct RemoteContext {
    shared: Arc<Shared>,
}

struct Shared {
    /// Made on first use: a context whose sources never send a request costs no threads.
    runtime: OnceLock<Result<tokio::runtime::Runtime, String>>,
    pages: Arc<PageCache>,
    /// Page-cache numbers of object states, the most recently opened kept.
    numbers: Mutex<lru::LruCache<String, u64>>,
    next_number: AtomicU64,
    /// Bounds the GETs in flight.
    requests: tokio::sync::Semaphore,
    totals: RemoteStats,
    net: Arc<Net>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last holder may be a task on this very runtime (a background fetch that
        // held the last object): shutting down without waiting is allowed there, where a
        // plain drop, which waits for the workers, would panic.
        if let Some(Ok(rt)) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for RemoteContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteContext")
            .field("pages", &self.shared.pages.stats())
            .finish_non_exhaustive()
    }
}

impl Default for RemoteContext {
    /// A context with the default cache sizes (32 MiB of metadata pages, 64 MiB of data).
    fn default() -> Self {
        RemoteContext::new(32 << 20, 64 << 20)
    }
}

impl RemoteContext {
    /// A context whose page cache holds `meta_bytes` of metadata pages and `data_bytes` of
    /// data pages (readahead, prefetch, large reads), for all its objects together.
    pub fn new(meta_bytes: u64, data_bytes: u64) -> RemoteContext {
        RemoteContext {
            shared: Arc::new(Shared {
                runtime: OnceLock::new(),
                pages: Arc::new(PageCache::new(
                    meta_bytes.max(2 * FIRST_GET),
                    data_bytes.max(4 * PART),
                )),
                numbers: Mutex::new(lru::LruCache::new(
                    std::num::NonZeroUsize::new(NUMBERS).unwrap_or(std::num::NonZeroUsize::MIN),
                )),
                next_number: AtomicU64::new(1),
                requests: tokio::sync::Semaphore::new(MAX_REQUESTS),
                totals: RemoteStats::default(),
                net: Arc::default(),
            }),
        }
    }

    /// The runtime for `object_store`'s requests.
    pub(super) fn runtime(&self) -> std::io::Result<&tokio::runtime::Runtime> {
        self.shared
            .runtime
            .get_or_init(|| {
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

    /// The page cache of every object of the context.
    pub(super) fn pages(&self) -> &Arc<PageCache> {
        &self.shared.pages
    }

    /// The page-cache number of the object state `identity` (URL, length and ETag): the same
    /// object reopened finds its pages again; a changed one has a new number.
    pub(super) fn object_number(&self, identity: &str) -> u64 {
        let mut m = crate::sync::lock(&self.shared.numbers);
        if let Some(&n) = m.get(identity) {
            return n;
        }
        let n = self.shared.next_number.fetch_add(1, Ordering::Relaxed);
        m.put(identity.to_string(), n);
        n
    }

    /// The bound on GETs in flight.
    pub(super) fn requests(&self) -> &tokio::sync::Semaphore {
        &self.shared.requests
    }

    /// The context's own counters, which every object adds to.
    pub(super) fn stats(&self) -> &RemoteStats {
        &self.shared.totals
    }

    /// The counters of every HTTP request of the context, given to its connectors.
    pub(super) fn net(&self) -> &Arc<Net> {
        &self.shared.net
    }

    /// What the HTTP requests of the context amounted to (retries included).
    pub fn net_stats(&self) -> NetStats {
        self.shared.net.stats()
    }

    /// What every remote object of the context has asked its server (HEADs and GETs as the
    /// layers above asked for them, before retries), with what was sent
    /// ([`RemoteContext::net_stats`]).
    pub fn totals(&self) -> RequestCounts {
        let net = self.net_stats();
        let mut c = counts_of(&self.shared.totals);
        c.lists = net.lists;
        c.sent = net.heads + net.gets + net.lists;
        c.retries = net.errors.saturating_sub(c.failures);
        c.p50_us = (net.p50_ms * 1000.0) as u64;
        c.p99_us = (net.p99_ms * 1000.0) as u64;
        c
    }

    /// Run `fut` (request `what` about `url`) on the runtime, failing it after `bound`.
    pub(super) fn block_on_bounded<T>(
        &self,
        bound: std::time::Duration,
        url: &str,
        what: &str,
        fut: impl std::future::Future<Output = std::io::Result<T>>,
    ) -> std::io::Result<T> {
        self.runtime()?
            .block_on(async { tokio::time::timeout(bound, fut).await })
            .unwrap_or_else(|_| Err(super::error::out_of_time(url, what, bound)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_stay_while_remembered_and_the_map_is_bounded() {
        let c = RemoteContext::new(0, 0);
        let a = c.object_number("s3://b/a:10:e1");
        assert_eq!(c.object_number("s3://b/a:10:e1"), a, "reopened: same pages");
        assert_ne!(c.object_number("s3://b/a:10:e2"), a, "changed: new pages");
        for i in 0..NUMBERS + 10 {
            c.object_number(&format!("s3://b/{i}"));
        }
        assert_eq!(crate::sync::lock(&c.shared.numbers).len(), NUMBERS);
        // Forgotten: a new number, never an old one reused.
        let again = c.object_number("s3://b/a:10:e1");
        assert!(again > a && again > NUMBERS as u64, "{again}");
    }

    #[test]
    fn contexts_share_nothing() {
        let (a, b) = (
            RemoteContext::new(4 << 20, 4 << 20),
            RemoteContext::default(),
        );
        assert!(!Arc::ptr_eq(a.pages(), b.pages()));
        a.stats().gets.fetch_add(3, Ordering::Relaxed);
        assert_eq!((a.totals().gets, b.totals().gets), (3, 0));
        let a2 = a.clone();
        assert!(Arc::ptr_eq(a.pages(), a2.pages()));
        assert_eq!(a2.totals().gets, 3);
    }

    #[test]
    fn the_last_holder_may_drop_it_on_its_own_runtime() {
        let c = RemoteContext::default();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let held = c.clone();
        let task = c.runtime().unwrap().spawn(async move {
            // Wait until the test has dropped its own handle, then drop the last one here,
            // on a worker of the runtime it holds.
            let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
            drop(held);
        });
        drop(c);
        tx.send(()).unwrap();
        // Waited for from another runtime: the task's own may be shut down by then.
        let waiter = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let r = waiter.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(60), task).await
        });
        match r {
            Ok(Err(e)) => assert!(!e.is_panic(), "dropping the context panicked: {e}"),
            Ok(Ok(())) => {}
            Err(_) => panic!("the task never ended"),
        }
    }
}
