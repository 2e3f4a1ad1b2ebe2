//! The decoded-chunk cache: an LRU bounded by bytes, shared by every dataset of a mount and
//! safe under concurrent readers. Concurrent misses on the same chunk decode it once.
//!
//! Mechanism. One mutex guards the LRU list (the `lru` crate, unbounded in entries; we evict
//! by summed chunk bytes) and the table of loads in flight (`crate::sync::flight`). A miss
//! either joins the load in flight for its key and waits for it, or starts one and runs the
//! loader *outside* the cache lock. The loader's outcome is handed to every waiter; a
//! success is inserted into the LRU if it fits, an error is handed to the waiters (errors
//! are `Clone`, the I/O error inside shared, so each waiter sees the loader's kind) and
//! never cached. A loader that panics lands its flight with an error as it unwinds, so
//! waiters never hang. Hits clone a [`ChunkBytes`]: the chunk bytes are never copied by the
//! cache.
//!
//! Memory. Each entry costs its bytes plus `ENTRY_OVERHEAD` (160 bytes) for its
//! bookkeeping, so a file of tiny chunks cannot hold more memory than the budget says. A loader holds a
//! [`Reservation`] while it decodes: its bytes (the result buffer
//! and the decoder's intermediate buffers) count against the capacity like cached chunks, so
//! cached plus in-flight bytes stay within the budget however many threads decode at once.
//! Making room evicts least recently used chunks; an evicted chunk nobody else holds is
//! handed to the reserving loader as its result buffer when the sizes match, so a streaming
//! reader recycles the same few buffers instead of mapping and faulting in fresh ones.

pub mod budget;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::error::{Error, Result};
use crate::sync::flight::{on_panic, Flights, Role};
use crate::sync::lock;
use budget::IndexBudget;

/// Cache key: (file id from [`ChunkCache::new_file_id`] in the high 64 bits and the
/// dataset's object header address in the low ones, linear chunk number).
pub type CacheKey = (u128, u64);

/// The first half of a [`CacheKey`]: dataset `id` of the file `file` of a shared cache.
pub fn dataset_key(file: u64, id: u64) -> u128 {
    (u128::from(file) << 64) | u128::from(id)
}

/// Chunks from this size on get a buffer of their own behind the shared handle (see
/// [`ChunkBytes`]); the allocator maps buffers this large afresh (the daemon sets glibc's
/// mmap threshold to 128 KiB), so their zeros are pages nobody wrote yet.
pub const LAZY_ZEROS_FROM: usize = 128 << 10;

/// A decoded chunk as the cache shares it: cloning is cheap and the bytes are never copied.
///
/// Two forms behind one interface. A chunk smaller than [`LAZY_ZEROS_FROM`] is one
/// allocation, counts and bytes together (an `Arc<[u8]>`): a file of tiny chunks fills the
/// cache with a hundred thousand of them, and a second allocation each would cost memory
/// the budget does not see. A larger one is an `Arc<Vec<u8>>` whose buffer starts as
/// `vec![0; n]`, fresh zero pages: a decode that fails early, or a chunk a corrupt file
/// declares far larger than what its stream produces, makes resident only what was written
/// (an `Arc<[u8]>` of zeros is written whole before the decode starts).
#[derive(Clone, Debug)]
pub struct ChunkBytes(Repr);

#[derive(Clone, Debug)]
enum Repr {
    Inline(Arc<[u8]>),
    Boxed(Arc<Vec<u8>>),
}

impl ChunkBytes {
    /// `n` zero bytes, to be written in place with [`ChunkBytes::get_mut`].
    pub fn zeroed(n: usize) -> ChunkBytes {
        if n >= LAZY_ZEROS_FROM {
            ChunkBytes(Repr::Boxed(Arc::new(vec![0; n])))
        } else {
            ChunkBytes(Repr::Inline(std::iter::repeat_n(0, n).collect()))
        }
    }

    /// The bytes, writable if this is the only handle.
    pub fn get_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.0 {
            Repr::Inline(a) => Arc::get_mut(a),
            Repr::Boxed(a) => Arc::get_mut(a).map(|v| v.as_mut_slice()),
        }
    }

    /// Whether this is the only handle (no reader holds the bytes).
    pub fn is_unique(&self) -> bool {
        match &self.0 {
            Repr::Inline(a) => Arc::strong_count(a) == 1,
            Repr::Boxed(a) => Arc::strong_count(a) == 1,
        }
    }

    /// Whether both handles share the same bytes.
    #[cfg(test)]
    pub fn ptr_eq(a: &ChunkBytes, b: &ChunkBytes) -> bool {
        std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len()
    }
}

impl From<Vec<u8>> for ChunkBytes {
    /// A small chunk is copied into one allocation; a large one is shared as it is, without
    /// spare capacity (which the budget would not see).
    fn from(mut v: Vec<u8>) -> ChunkBytes {
        if v.len() >= LAZY_ZEROS_FROM {
            v.shrink_to_fit();
            ChunkBytes(Repr::Boxed(Arc::new(v)))
        } else {
            ChunkBytes(Repr::Inline(Arc::from(v)))
        }
    }
}

impl std::ops::Deref for ChunkBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(a) => a,
            Repr::Boxed(a) => a,
        }
    }
}

/// A snapshot of the cache counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache (including waiters served by another thread's load).
    pub hits: u64,
    /// Lookups that ran a loader.
    pub misses: u64,
    /// Entries dropped to respect the byte bound.
    pub evictions: u64,
    /// Bytes currently held: the chunks' bytes plus `ENTRY_OVERHEAD` each.
    pub bytes: u64,
    /// Entries currently held.
    pub entries: u64,
}

/// What a load produced: a chunk, or "nothing to cache" (e.g. a chunk never written).
type Outcome = Result<Option<ChunkBytes>>;

#[derive(Debug)]
struct State {
    lru: LruCache<CacheKey, ChunkBytes>,
    bytes: u64,
    /// Bytes held by live [`Reservation`]s.
    reserved: u64,
    inflight: Flights<CacheKey, Option<ChunkBytes>, Error>,
}

/// Byte-bounded, concurrent chunk cache.
#[derive(Debug)]
pub struct ChunkCache {
    capacity: u64,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    /// The last id handed out by [`ChunkCache::new_file_id`].
    files: AtomicU64,
    /// What an entry costs beyond its bytes ([`ENTRY_OVERHEAD`]; 0 in some tests).
    entry_overhead: u64,
    /// Held while a large chunk decodes (see [`ChunkCache::large_decode`]).
    large: Mutex<()>,
    /// What the chunk indexes of the datasets using this cache may keep.
    index_budget: Arc<IndexBudget>,
}

impl ChunkCache {
    /// A cache holding at most `capacity` bytes of decoded chunks and their bookkeeping.
    pub fn new(capacity: u64) -> ChunkCache {
        ChunkCache::with_overhead(capacity, ENTRY_OVERHEAD)
    }

    /// Tests of the eviction order: entries cost their bytes only.
    #[cfg(test)]
    fn exact(capacity: u64) -> ChunkCache {
        ChunkCache::with_overhead(capacity, 0)
    }

    fn with_overhead(capacity: u64, entry_overhead: u64) -> ChunkCache {
        ChunkCache {
            capacity,
            entry_overhead,
            large: Mutex::new(()),
            index_budget: Arc::new(IndexBudget::for_cache(capacity)),
            state: Mutex::new(State {
                lru: LruCache::unbounded(),
                bytes: 0,
                reserved: 0,
                inflight: Flights::new(),
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            files: AtomicU64::new(0),
        }
    }

    /// A key prefix no other file using this cache has had: files sharing the cache (those
    /// reached through external links, and each re-read of the mounted file) never see each
    /// other's chunks, and a re-read's chunks never meet the stale ones of the view before.
    pub fn new_file_id(&self) -> u64 {
        self.files.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The budget of the chunk indexes of the datasets using this cache, a fraction of its
    /// capacity ([`IndexBudget::for_cache`]).
    pub fn index_budget(&self) -> Arc<IndexBudget> {
        self.index_budget.clone()
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// For a decode that holds `footprint` bytes at its peak (result, stored bytes and an
    /// intermediate stage): when that is more than an eighth of the capacity, a guard that
    /// lets one such decode run at a time. Reservations keep cached plus in-flight bytes
    /// within the budget only as far as evicting can: several threads each decoding a chunk
    /// near the cache's size would otherwise hold several times the budget at once (a
    /// mutation run reached 210 MiB under a 64 MiB cache). Large chunks are rare, and a
    /// decode never waits for another one while it holds this guard, so it cannot deadlock.
    pub fn large_decode(&self, footprint: u64) -> Option<std::sync::MutexGuard<'_, ()>> {
        (footprint > self.capacity / 8).then(|| lock(&self.large))
    }

    /// Whether `key` is cached or being loaded (no effect on recency).
    pub fn contains(&self, key: CacheKey) -> bool {
        let st = lock(&self.state);
        st.lru.contains(&key) || st.inflight.contains(key)
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let st = lock(&self.state);
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes: st.bytes,
            entries: st.lru.len() as u64,
        }
    }

    /// The cached chunk for `key`, or the result of `load` (run once even if several threads
    /// miss at the same time), inserted if it fits.
    pub fn get_or_load(
        &self,
        key: CacheKey,
        load: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<ChunkBytes> {
        match self.get_or_try_load(key, || load().map(Some))? {
            Some(v) => Ok(v),
            // Unreachable in practice: our loader never yields `None`, and a waiter only sees
            // the outcome of a loader for the same key, which is this kind of call or one that
            // found nothing to cache; report the latter as a missing value rather than panic.
            None => Err(Error::NotFound(format!("chunk cache entry {key:?}"))),
        }
    }

    /// Like [`ChunkCache::get_or_load`], but the loader may answer `None` ("nothing to cache",
    /// e.g. a chunk that was never written); `None` is handed to concurrent waiters and not
    /// stored.
    pub fn get_or_try_load(
        &self,
        key: CacheKey,
        load: impl FnOnce() -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<ChunkBytes>> {
        self.get_or_try_load_shared(key, || load().map(|o| o.map(ChunkBytes::from)))
    }

    /// Like [`ChunkCache::get_or_try_load`], for a loader that builds the shared buffer itself
    /// (to write into a recycled one, or into fresh zero pages).
    pub fn get_or_try_load_shared(
        &self,
        key: CacheKey,
        load: impl FnOnce() -> Result<Option<ChunkBytes>>,
    ) -> Result<Option<ChunkBytes>> {
        {
            let mut st = lock(&self.state);
            if let Some(v) = st.lru.get(&key) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(v.clone()));
            }
            if let Role::Waiter(flight) = st.inflight.join_or_start(key) {
                drop(st);
                self.hits.fetch_add(1, Ordering::Relaxed);
                return flight.wait();
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let outcome = on_panic(load, || {
            self.land(
                key,
                &Err(Error::Io {
                    what: "chunk cache load",
                    addr: key.1,
                    len: 0,
                    source: Arc::new(std::io::Error::other("the chunk loader panicked")),
                }),
            )
        });
        self.land(key, &outcome);
        outcome
    }

    /// End the load of `key` with `outcome`: a chunk is kept (if it fits), and the waiters
    /// get a copy of it.
    fn land(&self, key: CacheKey, outcome: &Outcome) {
        let (flight, evicted) = {
            let mut st = lock(&self.state);
            let flight = st.inflight.take(key);
            let evicted = match outcome {
                Ok(Some(v)) => self.insert(&mut st, key, v.clone()),
                _ => Vec::new(),
            };
            (flight, evicted)
        };
        drop(evicted);
        if let Some(flight) = flight {
            flight.land(outcome.clone());
        }
    }

    /// Hold `bytes` of the budget for a load in flight, evicting least recently used chunks
    /// to make room. The first evicted chunk of exactly `reuse_len` bytes that no reader
    /// holds any more is kept for [`Reservation::take_buffer`].
    pub fn reserve(&self, bytes: u64, reuse_len: usize) -> Reservation<'_> {
        let mut recycled = None;
        let mut dropped = Vec::new();
        {
            let mut st = lock(&self.state);
            st.reserved = st.reserved.saturating_add(bytes);
            while st.bytes.saturating_add(st.reserved) > self.capacity {
                let Some((_, v)) = st.lru.pop_lru() else {
                    break;
                };
                st.bytes -= self.charge(&v);
                self.evictions.fetch_add(1, Ordering::Relaxed);
                // Unique: the entry just left the LRU, under the lock, and we hand out no
                // weak references; readers that still use it hold strong ones.
                if recycled.is_none() && v.len() == reuse_len && v.is_unique() {
                    recycled = Some(v);
                } else {
                    dropped.push(v);
                }
            }
        }
        // Unmapping large buffers happens outside the lock.
        drop(dropped);
        Reservation {
            cache: self,
            bytes,
            recycled,
        }
    }

    /// What an entry costs the budget.
    fn charge(&self, v: &ChunkBytes) -> u64 {
        v.len() as u64 + self.entry_overhead
    }

    /// Insert a loaded chunk, evicting least recently used entries to stay within capacity
    /// (less the reserved bytes). Called with the state lock held; returns the evicted chunks,
    /// to be dropped after the lock is released.
    fn insert(&self, st: &mut State, key: CacheKey, value: ChunkBytes) -> Vec<ChunkBytes> {
        let mut evicted = Vec::new();
        let size = self.charge(&value);
        if size > self.capacity {
            return evicted;
        }
        if let Some(old) = st.lru.put(key, value) {
            st.bytes -= self.charge(&old);
            evicted.push(old);
        }
        st.bytes += size;
        while st.bytes.saturating_add(st.reserved) > self.capacity && st.lru.len() > 1 {
            match st.lru.pop_lru() {
                Some((_, v)) => {
                    st.bytes -= self.charge(&v);
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                    evicted.push(v);
                }
                None => break,
            }
        }
        evicted
    }
}

/// Memory an entry holds beyond its bytes: the buffer's reference counts, the LRU's node
/// and hash slot, and the allocator's rounding, about 150 bytes measured with a million
/// one-byte chunks (without it, a file of tiny chunks filled the budget with bookkeeping:
/// 1.1 MiB of data cost 163 MiB).
const ENTRY_OVERHEAD: u64 = 160;

/// Budget held by a load in flight (see [`ChunkCache::reserve`]); released on drop.
#[derive(Debug)]
pub struct Reservation<'a> {
    cache: &'a ChunkCache,
    bytes: u64,
    recycled: Option<ChunkBytes>,
}

impl Reservation<'_> {
    /// An evicted chunk buffer of the requested length that no one else holds, to be
    /// overwritten (its contents are stale).
    pub fn take_buffer(&mut self) -> Option<ChunkBytes> {
        self.recycled.take()
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.cache.state);
        st.reserved = st.reserved.saturating_sub(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::sync::Barrier;
    use std::time::Duration;

    /// How long a loader waits for the lookups that must join it: a bound only a broken
    /// single-flight (or a machine stalled for that long) reaches.
    const JOIN_WAIT: Duration = Duration::from_secs(30);

    fn chunk(n: usize, b: u8) -> Result<Vec<u8>> {
        Ok(vec![b; n])
    }

    /// The keys of the lookups of `c` that join a load in flight, as they join.
    fn watch_joins(c: &ChunkCache) -> mpsc::Receiver<CacheKey> {
        lock(&c.state).inflight.watch_joins()
    }

    /// Called by a loader: block until `n` lookups of `key` have joined its load, so that
    /// none of them can arrive after it finished, however the threads are scheduled.
    fn wait_for_joins(joins: &Mutex<mpsc::Receiver<CacheKey>>, key: CacheKey, n: usize) {
        let rx = lock(joins);
        for i in 0..n {
            match rx.recv_timeout(JOIN_WAIT) {
                Ok(k) => assert_eq!(k, key, "a lookup of another key joined"),
                Err(e) => panic!("{i} of {n} lookups joined the load of {key:?}: {e}"),
            }
        }
    }

    #[test]
    fn hit_returns_same_allocation() {
        let c = ChunkCache::exact(100);
        let a = c.get_or_load((1, 0), || chunk(10, 7)).unwrap();
        let b = c.get_or_load((1, 0), || panic!("must not reload")).unwrap();
        assert!(ChunkBytes::ptr_eq(&a, &b));
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.bytes, s.entries), (1, 1, 10, 1));
    }

    #[test]
    fn byte_bound_and_lru_order() {
        let c = ChunkCache::exact(30);
        for i in 0..3 {
            c.get_or_load((0, i), || chunk(10, i as u8)).unwrap();
        }
        // Touch 0 so that 1 becomes least recently used.
        c.get_or_load((0, 0), || panic!("cached")).unwrap();
        c.get_or_load((0, 3), || chunk(10, 3)).unwrap();
        let s = c.stats();
        assert_eq!((s.bytes, s.entries, s.evictions), (30, 3, 1));
        let reloaded = AtomicUsize::new(0);
        c.get_or_load((0, 1), || {
            reloaded.fetch_add(1, Ordering::SeqCst);
            chunk(10, 1)
        })
        .unwrap();
        assert_eq!(reloaded.load(Ordering::SeqCst), 1, "1 was evicted");
        // Inserting 1 evicted 2 (the LRU after 0 and 3 were used more recently).
        c.get_or_load((0, 0), || panic!("0 still cached")).unwrap();
        c.get_or_load((0, 3), || panic!("3 still cached")).unwrap();
        assert!(c.stats().bytes <= 30);
    }

    #[test]
    fn reservations_count_against_the_budget_and_recycle_free_buffers() {
        let c = ChunkCache::exact(30);
        for i in 0..3 {
            c.get_or_load((0, i), || chunk(10, i as u8)).unwrap();
        }
        // Chunk 0 is still held by a reader: evicted but not recycled.
        let held = c.get_or_load((0, 0), || panic!("cached")).unwrap();
        c.get_or_load((0, 1), || panic!("cached")).unwrap();
        let mut r = c.reserve(15, 10);
        let s = c.stats();
        assert_eq!((s.entries, s.bytes, s.evictions), (1, 10, 2));
        let buf = r
            .take_buffer()
            .expect("chunk 2 was free and of the wanted size");
        assert_eq!(buf[0], 2);
        assert!(r.take_buffer().is_none());
        // While reserved, a new chunk evicts the last one instead of overrunning.
        c.get_or_load((0, 5), || chunk(10, 5)).unwrap();
        assert_eq!(c.stats().bytes, 10);
        drop(r);
        c.get_or_load((0, 6), || chunk(10, 6)).unwrap();
        c.get_or_load((0, 7), || chunk(10, 7)).unwrap();
        assert_eq!(c.stats().bytes, 30);
        drop(held);
    }

    #[test]
    fn tiny_chunks_pay_for_their_bookkeeping() {
        // A million one-byte chunks would hold ~160 MB for 1 MB of data if only bytes counted.
        let c = ChunkCache::new(1 << 20);
        for i in 0..100_000 {
            c.get_or_load((0, i), || chunk(1, 1)).unwrap();
        }
        let s = c.stats();
        assert!(s.bytes <= 1 << 20, "{s:?}");
        assert_eq!(s.entries, (1 << 20) / (1 + ENTRY_OVERHEAD), "{s:?}");
    }

    #[test]
    fn oversized_chunk_returned_not_stored() {
        let c = ChunkCache::exact(8);
        let v = c.get_or_load((0, 0), || chunk(9, 1)).unwrap();
        assert_eq!(v.len(), 9);
        assert_eq!(c.stats().entries, 0);
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn errors_and_none_not_cached() {
        let c = ChunkCache::exact(100);
        let e = c.get_or_load((0, 0), || Err(Error::corrupt("chunk", 5, "bad")));
        assert!(matches!(e, Err(Error::Corrupt { addr: 5, .. })));
        assert!(c.get_or_try_load((0, 1), || Ok(None)).unwrap().is_none());
        assert_eq!(c.stats().entries, 0);
        assert_eq!(c.get_or_load((0, 0), || chunk(3, 3)).unwrap().len(), 3);
    }

    #[test]
    fn single_flight_under_contention() {
        let c = Arc::new(ChunkCache::exact(1 << 20));
        let joins = Arc::new(Mutex::new(watch_joins(&c)));
        let calls = Arc::new(AtomicUsize::new(0));
        let n = 8;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (c, joins, calls, barrier) =
                    (c.clone(), joins.clone(), calls.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    c.get_or_load((9, 9), || {
                        let before = calls.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(before, 0, "a second load of the key ran");
                        // The load lasts until every other thread waits on it.
                        wait_for_joins(&joins, (9, 9), n - 1);
                        chunk(1000, 42)
                    })
                    .unwrap()
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(results.iter().all(|r| ChunkBytes::ptr_eq(r, &results[0])));
        assert_eq!(&results[0][..], &[42; 1000][..]);
        let s = c.stats();
        assert_eq!((s.misses, s.hits, s.entries), (1, n as u64 - 1, 1));
    }

    #[test]
    fn waiters_get_the_loaders_error_kind_and_it_is_not_cached() {
        let c = Arc::new(ChunkCache::exact(1 << 20));
        let joins = Arc::new(Mutex::new(watch_joins(&c)));
        let calls = Arc::new(AtomicUsize::new(0));
        let n = 4;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (c, joins, calls, barrier) =
                    (c.clone(), joins.clone(), calls.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    c.get_or_load((1, 1), || {
                        let before = calls.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(before, 0, "a second load of the key ran");
                        // Fail only once the three other threads wait on this load: the
                        // remote object changed, a kind the layers above tell apart.
                        wait_for_joins(&joins, (1, 1), n - 1);
                        Err(Error::Io {
                            what: "chunk",
                            addr: 7,
                            len: 1,
                            source: Arc::new(std::io::Error::new(
                                std::io::ErrorKind::StaleNetworkFileHandle,
                                "changed",
                            )),
                        })
                    })
                })
            })
            .collect();
        let mut sources = Vec::new();
        for h in handles {
            match h.join().unwrap() {
                Err(Error::Io {
                    what: "chunk",
                    addr: 7,
                    len: 1,
                    source,
                }) => {
                    assert_eq!(source.kind(), std::io::ErrorKind::StaleNetworkFileHandle);
                    assert_eq!(source.to_string(), "changed");
                    sources.push(source);
                }
                other => panic!("expected the loader's error, got {other:?}"),
            }
        }
        assert!(sources.iter().all(|s| Arc::ptr_eq(s, &sources[0])));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let s = c.stats();
        assert_eq!((s.misses, s.hits, s.entries), (1, n as u64 - 1, 0));
        // Not cached: the next lookup loads again.
        assert_eq!(c.get_or_load((1, 1), || chunk(1, 1)).unwrap().len(), 1);
        assert_eq!(c.stats().misses, 2);
    }

    #[test]
    fn panicking_loader_releases_waiters() {
        let c = Arc::new(ChunkCache::exact(100));
        let joins = Mutex::new(watch_joins(&c));
        let (started_tx, started) = mpsc::channel();
        let c2 = c.clone();
        let loader = std::thread::spawn(move || {
            c2.get_or_load((2, 2), move || {
                started_tx.send(()).unwrap();
                // Panic only once the other lookup waits on this load.
                wait_for_joins(&joins, (2, 2), 1);
                panic!("loader bug")
            })
        });
        started
            .recv_timeout(JOIN_WAIT)
            .expect("the loader did not start");
        // The waiter runs in a thread of its own, so that a waiter never released fails the
        // test instead of hanging it.
        let (done_tx, done) = mpsc::channel();
        let c3 = c.clone();
        std::thread::spawn(move || {
            let r = c3.get_or_load((2, 2), || chunk(1, 1));
            let _ = done_tx.send(r);
        });
        match done
            .recv_timeout(JOIN_WAIT)
            .expect("the waiter was not released")
        {
            Err(Error::Io {
                what: "chunk cache load",
                addr: 2,
                source,
                ..
            }) => assert!(source.to_string().contains("panicked"), "{source}"),
            other => panic!("expected the panicked load's error, got {other:?}"),
        }
        assert!(loader.join().is_err(), "the loader panicked");
        // Nothing cached: the next lookup loads.
        assert_eq!(c.get_or_load((2, 2), || chunk(2, 2)).unwrap().len(), 2);
        let s = c.stats();
        assert_eq!((s.misses, s.hits, s.entries), (2, 1, 1));
    }
}
