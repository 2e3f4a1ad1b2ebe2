//! A page cache for slow byte sources: aligned [`PAGE`]-byte pages, bounded in bytes, least
//! recently used evicted, each page fetched once however many readers miss it at the same
//! time (single flight), and a run of missing pages fetched with one call.
//!
//! Pages live in one of two classes, each with its own byte budget, so that streaming data
//! cannot push out the metadata a listing needs: [`Class::Meta`] (small reads: object
//! headers, heaps, B-tree nodes) and [`Class::Data`] (large reads, prefetch and readahead).
//! A lookup finds a page in either class.
//!
//! Besides the blocking [`PageCache::read`], a background fetcher can [`PageCache::claim`]
//! runs of missing pages (marking them in flight, so readers wait for them instead of fetching
//! them again) and [`PageCache::complete`] them later, or land them page by page as the
//! answer streams in ([`PageCache::filling`]). Claims are bounded: the bytes of all
//! fetches in flight count against the data budget, and a claim that would exceed it is cut
//! short (prefetch is only a hint).
//!
//! Each page being fetched is a flight of `crate::sync::flight`. A fetch that fails hands
//! its error, kind and message, to every reader that waited for its pages, and the pages
//! stay failed for [`FAIL_HOLD`]: a reader asking for them again in that while (the kernel
//! asks again at once for a read that failed) gets the same error at once, rather than
//! waiting out another fetch's time bound. A fetch that never ends its pages (a reader's
//! fetch that panics, a claim or a filling dropped unfinished) fails them in the same way,
//! so no reader waits for ever.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lru::LruCache;

use crate::sync::flight::{on_panic, Flight, Flights, SharedIo};
use crate::sync::lock;

/// Page size: small, so scattered pieces cost little more than their bytes; callers fetch
/// more around a miss where more is likely to be read (see `remote`).
pub const PAGE: u64 = 16 << 10;

/// How long the pages of a failed fetch fail again at once (see the module docs).
pub const FAIL_HOLD: Duration = Duration::from_secs(3);
/// Failed pages remembered at most (past that, the oldest are forgotten first).
const FAILED_MAX: usize = 1 << 16;

/// A fetch's error as the readers of its pages get it: its kind and message (see
/// [`crate::sync::flight`]).
fn kept(e: std::io::Error) -> SharedIo {
    // Never `Interrupted`: readers retry that kind at once, and a held page would answer
    // them with it again and again.
    match e.kind() {
        std::io::ErrorKind::Interrupted => SharedIo::with_kind(std::io::ErrorKind::Other, e),
        _ => SharedIo::new(e),
    }
}

/// The error of an answer of `got` bytes for pages `first..end` (too few).
fn short_answer(got: usize, first: u64, end: u64) -> SharedIo {
    SharedIo::new(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{got} bytes answered for pages {first}..{end}"),
    ))
}

/// A page: the number of its object (sources sharing one cache) and its index.
type Key = (u64, u64);

/// Which budget a page counts against (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Meta,
    Data,
}

/// The pages of one class, each its own buffer of [`PAGE`] bytes (less for the last page of
/// a source).
struct Lru {
    pages: LruCache<Key, Vec<u8>>,
    bytes: u64,
    budget: u64,
}

impl Lru {
    fn new(budget: u64) -> Lru {
        Lru {
            pages: LruCache::unbounded(),
            bytes: 0,
            budget,
        }
    }

    fn put(&mut self, p: Key, page: Vec<u8>) {
        self.bytes += page.len() as u64;
        if let Some(old) = self.pages.put(p, page) {
            self.bytes -= old.len() as u64;
        }
        while self.bytes > self.budget {
            match self.pages.pop_lru() {
                Some((_, page)) => self.bytes -= page.len() as u64,
                None => break,
            }
        }
    }
}

struct State {
    meta: Lru,
    data: Lru,
    /// Pages being fetched: readers that need them wait for their flights.
    flying: Flights<Key, (), SharedIo>,
    /// Bytes of fetches in flight.
    inflight: u64,
    /// Pages whose fetch failed, when, and why (see [`FAIL_HOLD`]).
    failed: HashMap<Key, (Instant, SharedIo)>,
    /// How long they stay failed ([`FAIL_HOLD`]; tests change it).
    hold: Duration,
}

impl State {
    fn contains(&self, p: Key) -> bool {
        self.meta.pages.contains(&p) || self.data.pages.contains(&p)
    }

    /// Keep `page` as page `p` in `class`, unless it is cached already.
    fn keep(&mut self, p: Key, page: Vec<u8>, class: Class) {
        if self.contains(p) {
            return;
        }
        match class {
            Class::Meta => self.meta.put(p, page),
            Class::Data => self.data.put(p, page),
        }
    }

    /// Take the flights of pages `run` of `obj` out of the table, to land once the lock is
    /// released.
    fn take_flights(&mut self, obj: u64, run: &[u64]) -> Vec<Arc<Flight<(), SharedIo>>> {
        run.iter()
            .filter_map(|&p| self.flying.take((obj, p)))
            .collect()
    }

    /// A fetch of the pages of `claim` is over: its bytes no longer count as in flight.
    fn release(&mut self, claim: &Claim) {
        self.inflight = self
            .inflight
            .saturating_sub((claim.end - claim.first) * PAGE);
    }

    /// The error of page `p`'s fetch if it failed less than [`FAIL_HOLD`] ago.
    fn held(&mut self, p: Key) -> Option<std::io::Error> {
        let (when, e) = self.failed.get(&p)?;
        if when.elapsed() < self.hold {
            return Some(e.to_io());
        }
        self.failed.remove(&p);
        None
    }

    /// Hold the pages `run` of `obj` failed with `e` (see [`FAIL_HOLD`]).
    fn hold_failed(&mut self, obj: u64, run: &[u64], e: &SharedIo) {
        if self.failed.len() + run.len() > FAILED_MAX {
            let hold = self.hold;
            self.failed.retain(|_, (when, _)| when.elapsed() < hold);
        }
        let now = Instant::now();
        for &p in run
            .iter()
            .take(FAILED_MAX.saturating_sub(self.failed.len()))
        {
            self.failed.insert((obj, p), (now, e.clone()));
        }
    }

    /// The bytes of page `p`, now the most recently used.
    fn get(&mut self, p: Key) -> Option<&[u8]> {
        if self.meta.pages.contains(&p) {
            return self.meta.pages.get(&p).map(Vec::as_slice);
        }
        self.data.pages.get(&p).map(Vec::as_slice)
    }
}

/// A run of pages claimed for a background fetch: fetch pages `first..end` (bytes from
/// `first * PAGE`), then hand the result to [`PageCache::complete`] or land it through
/// [`PageCache::filling`]. Dropped before that (its task panicked or was cancelled), it fails
/// its pages' readers rather than leave them waiting.
pub struct Claim {
    obj: u64,
    pub first: u64,
    pub end: u64,
    /// The pages of the run this claim is the flight of (others were cached or in flight).
    owned: Vec<u64>,
    /// The cache's state, for the drop of a claim never completed.
    state: Arc<Mutex<State>>,
    /// Set once [`PageCache::complete`] ended it.
    completed: AtomicBool,
}

impl Claim {
    /// The byte range to fetch, clipped to a source of `len` bytes.
    pub fn range(&self, len: u64) -> std::ops::Range<u64> {
        (self.first * PAGE).min(len)..(self.end * PAGE).min(len)
    }
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("obj", &self.obj)
            .field("first", &self.first)
            .field("end", &self.end)
            .field("owned", &self.owned)
            .finish()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // A filling that ended its claim empties it (`end == first`).
        if self.end > self.first && !self.completed.load(Ordering::Relaxed) {
            lock(&self.state).release(self);
            let e = std::io::Error::other("the fetch was dropped");
            land(&self.state, self.obj, &self.owned, Err(SharedIo::new(e)));
        }
    }
}

/// Counters of a page cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageStats {
    pub meta_bytes: u64,
    pub data_bytes: u64,
    pub inflight: u64,
}

/// The cache (see the module docs).
pub struct PageCache {
    state: Arc<Mutex<State>>,
}

impl PageCache {
    /// A cache of at most `meta` bytes of metadata pages and `data` bytes of data pages
    /// (fetches in flight included).
    pub fn new(meta: u64, data: u64) -> PageCache {
        PageCache {
            state: Arc::new(Mutex::new(State {
                meta: Lru::new(meta),
                data: Lru::new(data),
                flying: Flights::new(),
                inflight: 0,
                failed: HashMap::new(),
                hold: FAIL_HOLD,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Hold the pages of a failed fetch failed for `hold` rather than [`FAIL_HOLD`].
    pub fn set_fail_hold(&self, hold: Duration) {
        self.lock().hold = hold;
    }

    /// The data budget.
    pub fn data_budget(&self) -> u64 {
        self.lock().data.budget
    }

    /// Bytes cached and in flight.
    pub fn stats(&self) -> PageStats {
        let st = self.lock();
        PageStats {
            meta_bytes: st.meta.bytes,
            data_bytes: st.data.bytes,
            inflight: st.inflight,
        }
    }

    /// Whether every page of `offset..offset + n` is cached.
    pub fn has(&self, obj: u64, offset: u64, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        let st = self.lock();
        (offset / PAGE..=(offset + n - 1) / PAGE).all(|p| st.contains((obj, p)))
    }

    /// Fill `buf` with the bytes at `offset` of a source of `len` bytes (the caller keeps
    /// the range inside it). Missing pages are fetched with `fetch(first_page, count)`, which
    /// returns `(from, bytes)`: the bytes from page `from` on (`from` at most `first_page`:
    /// a fetch may take pages before those asked for), up to at least the end of the `count`
    /// pages asked for (or of the source), possibly more; every whole page of them is kept
    /// in `class`.
    pub fn read(
        &self,
        obj: u64,
        offset: u64,
        buf: &mut [u8],
        len: u64,
        class: Class,
        fetch: impl Fn(u64, u64) -> std::io::Result<(u64, Vec<u8>)>,
    ) -> std::io::Result<()> {
        let end = offset + buf.len() as u64;
        let (p0, p1) = (offset / PAGE, (end - 1) / PAGE);
        // Pages copied into `buf` already: each round copies at least the pages it fetched
        // itself, straight from the answer, so a read larger than the budget (whose pages
        // evict each other) still ends.
        let mut copied = vec![false; (p1 - p0 + 1) as usize];
        loop {
            // Copy what is cached; claim the missing pages that no one is fetching.
            let mut missing = Vec::new();
            let mut waits = Vec::new();
            {
                let mut st = self.lock();
                for p in p0..=p1 {
                    let i = (p - p0) as usize;
                    if copied[i] {
                        continue;
                    }
                    if let Some(page) = st.get((obj, p)) {
                        copy_from(p * PAGE, page, offset, buf);
                        copied[i] = true;
                    } else if let Some(f) = st.flying.join((obj, p)) {
                        waits.push(f);
                    } else if let Some(e) = st.held((obj, p)) {
                        return Err(e);
                    } else {
                        missing.push(p);
                    }
                }
                if missing.is_empty() && waits.is_empty() {
                    return Ok(());
                }
                for &p in &missing {
                    st.flying.start((obj, p));
                }
                st.inflight += missing.len() as u64 * PAGE;
            }
            // Fetch each run of consecutive missing pages with one call.
            let mut result = Ok(());
            let mut i = 0;
            while i < missing.len() {
                let mut j = i + 1;
                while j < missing.len() && missing[j] == missing[j - 1] + 1 {
                    j += 1;
                }
                let (first, count) = (missing[i], (j - i) as u64);
                // Should the fetch panic, the pages of this run and of those after it are
                // never fetched: fail their readers rather than leave them waiting.
                let got = on_panic(
                    || fetch(first, count),
                    || {
                        let rest = &missing[i..];
                        {
                            let mut st = self.lock();
                            st.inflight = st.inflight.saturating_sub(rest.len() as u64 * PAGE);
                        }
                        let e = std::io::Error::other("the page fetch panicked");
                        self.land(obj, rest, Err(SharedIo::new(e)));
                    },
                );
                let run = &missing[i..j];
                {
                    let mut st = self.lock();
                    st.inflight = st.inflight.saturating_sub(count * PAGE);
                }
                match got {
                    Ok((from, bytes))
                        if from <= first && self.insert(obj, from, &bytes, len, run, class) =>
                    {
                        copy_from(from * PAGE, &bytes, offset, buf);
                        for &p in run {
                            copied[(p - p0) as usize] = true;
                        }
                    }
                    Ok((_, bytes)) => {
                        let e = short_answer(bytes.len(), first, first + count);
                        self.land(obj, run, Err(e.clone()));
                        result = Err(e.to_io());
                    }
                    Err(e) => {
                        let e = kept(e);
                        self.land(obj, run, Err(e.clone()));
                        result = Err(e.to_io());
                    }
                }
                i = j;
            }
            result?;
            for f in waits {
                f.wait().map_err(|e| e.to_io())?;
            }
            // Pages waited for may have been evicted meanwhile: go round again (they are
            // then missing, and fetched by this reader).
        }
    }

    /// Let go of the data pages of `obj` (a source of `len` bytes) wholly inside
    /// `offset..offset + n`: a reader has them in another form and reads them no more (see
    /// `RemoteSource::read_data_once`). Their memory goes back to the allocator at once, for
    /// the pages landing next, rather than when the data budget is full. Metadata pages and
    /// pages shared with bytes outside the range stay.
    pub fn let_go(&self, obj: u64, offset: u64, n: u64, len: u64) {
        let end = offset.saturating_add(n).min(len);
        let first = offset.div_ceil(PAGE);
        // The last page of the source is whole at `len`.
        let last = if end == len {
            end.div_ceil(PAGE)
        } else {
            end / PAGE
        };
        if first >= last {
            return;
        }
        let mut st = self.lock();
        for p in first..last {
            if let Some(page) = st.data.pages.pop(&(obj, p)) {
                st.data.bytes -= page.len() as u64;
            }
        }
    }

    /// Claim the missing pages of the page ranges `wanted` (sorted, `[a, b)` each) for
    /// background fetches: runs of missing pages, joined across gaps of at most `gap` pages
    /// (the gap's bytes are fetched too: one request instead of two), each at most
    /// `max_pages` long. Claiming stops where the bytes in flight would exceed the data
    /// budget. Pages cached or in flight are not claimed.
    pub fn claim(&self, obj: u64, wanted: &[(u64, u64)], gap: u64, max_pages: u64) -> Vec<Claim> {
        let mut st = self.lock();
        let mut claims: Vec<Claim> = Vec::new();
        let cap = st.data.budget;
        'wanted: for &(a, b) in wanted {
            for p in a..b {
                if st.contains((obj, p))
                    || st.flying.contains((obj, p))
                    || st.held((obj, p)).is_some()
                {
                    continue;
                }
                let joined = claims.last().is_some_and(|c| {
                    p >= c.end && p - c.end <= gap && p + 1 - c.first <= max_pages
                });
                let added = if joined {
                    p + 1 - claims.last().map_or(p, |c| c.end)
                } else {
                    1
                };
                if st.inflight + added * PAGE > cap {
                    break 'wanted;
                }
                st.inflight += added * PAGE;
                st.flying.start((obj, p));
                match claims.last_mut() {
                    Some(c) if joined => {
                        c.end = p + 1;
                        c.owned.push(p);
                    }
                    _ => claims.push(Claim {
                        obj,
                        first: p,
                        end: p + 1,
                        owned: vec![p],
                        state: self.state.clone(),
                        completed: AtomicBool::new(false),
                    }),
                }
            }
        }
        claims
    }

    /// Land the pages of `claim`, a background fetch from a source of `len` bytes, as its
    /// bytes arrive (in order): each whole page is kept (data pages) and its readers woken
    /// at once, not when the whole answer is in.
    pub fn filling(&self, claim: Claim, len: u64) -> Filling<'_> {
        Filling {
            cache: self,
            next: claim.first,
            claim,
            len,
            partial: Vec::new(),
            done: Vec::new(),
        }
    }

    /// End a background fetch: keep its bytes (data pages) and wake the readers waiting for
    /// its pages, or fail them with the error.
    pub fn complete(&self, claim: &Claim, len: u64, got: std::io::Result<&[u8]>) {
        if claim.completed.swap(true, Ordering::Relaxed) {
            return;
        }
        self.lock().release(claim);
        match got {
            Ok(bytes)
                if self.insert(
                    claim.obj,
                    claim.first,
                    bytes,
                    len,
                    &claim.owned,
                    Class::Data,
                ) => {}
            Ok(bytes) => self.land(
                claim.obj,
                &claim.owned,
                Err(short_answer(bytes.len(), claim.first, claim.end)),
            ),
            Err(e) => self.land(claim.obj, &claim.owned, Err(kept(e))),
        }
    }

    /// Keep the pages of `bytes` (from page `first` on) and wake those waiting for `run`;
    /// false (nobody woken) if `bytes` does not hold every page of `run`.
    fn insert(
        &self,
        obj: u64,
        first: u64,
        bytes: &[u8],
        len: u64,
        run: &[u64],
        class: Class,
    ) -> bool {
        let last = run.last().copied().unwrap_or(first);
        let needed = ((last + 1) * PAGE).min(len).saturating_sub(first * PAGE);
        if (bytes.len() as u64) < needed {
            return false;
        }
        // The whole pages not cached yet (a page is whole unless it is the last of the
        // source), copied into their buffers outside the lock.
        let wanted: Vec<(u64, &[u8])> = {
            let st = self.lock();
            bytes
                .chunks(PAGE as usize)
                .zip(first..)
                .filter(|&(chunk, p)| {
                    (chunk.len() as u64 == PAGE || p * PAGE + chunk.len() as u64 == len)
                        && !st.contains((obj, p))
                })
                .map(|(chunk, p)| (p, chunk))
                .collect()
        };
        let pages: Vec<(u64, Vec<u8>)> = wanted
            .into_iter()
            .map(|(p, chunk)| (p, chunk.to_vec()))
            .collect();
        let flights = {
            let mut st = self.lock();
            for (p, b) in pages {
                st.keep((obj, p), b, class);
            }
            st.take_flights(obj, run)
        };
        for f in flights {
            f.land(Ok(()));
        }
        true
    }

    /// End the flights of `run` with `result` (a failure holds its pages failed).
    fn land(&self, obj: u64, run: &[u64], result: Result<(), SharedIo>) {
        land(&self.state, obj, run, result);
    }
}

/// End the flights of pages `run` of `obj` with `result` (a failure holds its pages failed),
/// waking their readers once the lock of `state` is released.
fn land(state: &Mutex<State>, obj: u64, run: &[u64], result: Result<(), SharedIo>) {
    let flights: Vec<_> = {
        let mut st = lock(state);
        if let Err(e) = &result {
            st.hold_failed(obj, run, e);
        }
        st.take_flights(obj, run)
    };
    for f in flights {
        f.land(result.clone());
    }
}

/// A background fetch landing its pages as its bytes arrive ([`PageCache::filling`]).
/// [`Filling::finish`] ends it; dropped unfinished, its pages not yet landed fail their
/// readers.
pub struct Filling<'a> {
    cache: &'a PageCache,
    claim: Claim,
    len: u64,
    /// The page the next byte belongs to.
    next: u64,
    /// The buffer of page `next`: its bytes so far (none allocated before its first byte).
    partial: Vec<u8>,
    /// The pages one piece completed, on their way to the cache (kept for its room).
    done: Vec<(u64, Vec<u8>)>,
}

impl Filling<'_> {
    /// Bytes of page `p`: a whole page, or less as the last of the source.
    fn page_len(&self, p: u64) -> usize {
        (self.len.saturating_sub(p * PAGE)).min(PAGE) as usize
    }

    /// The next bytes of the answer; an error if they run past the claim (nothing of this
    /// piece is kept then: the pages it would complete fail with the rest at the end).
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        // What the claim still takes: the rest of page `next` and the pages after it.
        let room = ((self.claim.end * PAGE).min(self.len))
            .saturating_sub(self.next * PAGE + self.partial.len() as u64);
        if bytes.len() as u64 > room {
            return Err(format!(
                "more bytes than the {} pages asked for",
                self.claim.end - self.claim.first
            ));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        // Each byte is copied once, into the buffer of its page.
        while !bytes.is_empty() {
            let want = self.page_len(self.next);
            let k = want.saturating_sub(self.partial.len()).min(bytes.len());
            if k == 0 {
                // Not reached: the room above ends the bytes within the claim's pages.
                return Err(format!("bytes past page {} of the answer", self.next));
            }
            if self.partial.capacity() == 0 {
                self.partial = Vec::with_capacity(want);
            }
            self.partial.extend_from_slice(&bytes[..k]);
            bytes = &bytes[k..];
            if self.partial.len() == want {
                self.done
                    .push((self.next, std::mem::take(&mut self.partial)));
                self.next += 1;
            }
        }
        let owned = &self.claim.owned;
        let obj = self.claim.obj;
        let flights = {
            let mut st = self.cache.lock();
            let mut landed = Vec::with_capacity(self.done.len());
            for (p, page) in self.done.drain(..) {
                st.keep((obj, p), page, Class::Data);
                if owned.binary_search(&p).is_ok() {
                    landed.push(p);
                }
            }
            st.take_flights(obj, &landed)
        };
        for f in flights {
            f.land(Ok(()));
        }
        Ok(())
    }

    /// End the fetch: `result` is its outcome; an answer that stopped short of the claim
    /// fails the pages it did not bring.
    pub fn finish(mut self, result: std::io::Result<()>) {
        let short = self.next < self.claim.end && self.page_len(self.next) > 0;
        let outcome = match result {
            Err(e) => Err(kept(e)),
            Ok(()) if short => Err(SharedIo::new(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the answer stopped at page {} of {}..{}",
                    self.next, self.claim.first, self.claim.end
                ),
            ))),
            Ok(()) => Ok(()),
        };
        self.end(outcome);
    }

    fn end(&mut self, outcome: Result<(), SharedIo>) {
        self.cache.lock().release(&self.claim);
        let rest: Vec<u64> = std::mem::take(&mut self.claim.owned)
            .into_iter()
            .filter(|&p| p >= self.next)
            .collect();
        self.cache.land(self.claim.obj, &rest, outcome);
        self.claim.end = self.claim.first;
    }
}

impl Drop for Filling<'_> {
    fn drop(&mut self) {
        if self.claim.end > self.claim.first {
            self.end(Err(SharedIo::new(std::io::Error::other(
                "the fetch was dropped",
            ))));
        }
    }
}

/// Copy the part of `src` (the bytes at `start`) that falls in `buf` (the bytes at
/// `offset`).
fn copy_from(start: u64, src: &[u8], offset: u64, buf: &mut [u8]) {
    let lo = offset.max(start);
    let hi = (offset + buf.len() as u64).min(start + src.len() as u64);
    if lo < hi {
        buf[(lo - offset) as usize..(hi - offset) as usize]
            .copy_from_slice(&src[(lo - start) as usize..(hi - start) as usize]);
    }
}

#[cfg(test)]
mod buffer_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;

    /// How long a fetch waits for the readers that must join it, and the test for a reader
    /// released: a bound only a broken flight (or a stalled machine) reaches.
    const BOUND: Duration = Duration::from_secs(30);

    /// Called by a fetch: block until a reader of page `p` of object 1 joined its flight.
    fn wait_for_join(joins: &Mutex<mpsc::Receiver<Key>>, p: u64) {
        match lock(joins).recv_timeout(BOUND) {
            Ok(k) => assert_eq!(k, (1, p), "a reader of another page joined"),
            Err(e) => panic!("no reader joined the fetch of page {p}: {e}"),
        }
    }

    /// A reader of the first bytes of page `p` of object 1 (a source of `len` bytes), in a
    /// thread of its own: its result arrives on the channel (none if it hangs).
    fn reader(cache: &Arc<PageCache>, p: u64, len: u64) -> mpsc::Receiver<std::io::Result<()>> {
        let (tx, rx) = mpsc::channel();
        let cache = cache.clone();
        std::thread::spawn(move || {
            let mut b = vec![0u8; 8];
            let r = cache.read(1, p * PAGE, &mut b, len, Class::Meta, |_, _| {
                panic!("the page is in flight: not fetched again")
            });
            let _ = tx.send(r);
        });
        rx
    }

    fn source(n: u64) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn pages_are_fetched_once_and_bounded() {
        let data = source(5 * PAGE + 100);
        let len = data.len() as u64;
        let calls = AtomicU64::new(0);
        let fetch = |first: u64, count: u64| {
            calls.fetch_add(1, Ordering::Relaxed);
            let s = (first * PAGE) as usize;
            let e = (((first + count) * PAGE) as usize).min(data.len());
            Ok((first, data[s..e].to_vec()))
        };
        let cache = PageCache::new(3 * PAGE, PAGE);
        let check = |off: u64, n: usize| {
            let mut b = vec![0u8; n];
            cache.read(1, off, &mut b, len, Class::Meta, fetch).unwrap();
            assert_eq!(&b[..], &data[off as usize..off as usize + n]);
        };
        check(10, 100);
        check(PAGE - 5, 10);
        assert_eq!(calls.load(Ordering::Relaxed), 2, "one call per missing run");
        check(20, 30);
        assert_eq!(calls.load(Ordering::Relaxed), 2, "a hit");
        check(len - 50, 50);
        check(0, (2 * PAGE) as usize);
        assert!(cache.stats().meta_bytes <= 3 * PAGE);
        assert_eq!(cache.stats().inflight, 0);
        // Many readers of one missing page: one fetch.
        let cache = PageCache::new(8 * PAGE, PAGE);
        let n = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let mut b = vec![0u8; 64];
                    cache
                        .read(1, 3 * PAGE, &mut b, len, Class::Meta, |f, c| {
                            n.fetch_add(1, Ordering::Relaxed);
                            fetch(f, c)
                        })
                        .unwrap();
                });
            }
        });
        assert_eq!(n.load(Ordering::Relaxed), 1);
        // A failed fetch fails every reader waiting for it; the next reader within the hold
        // gets its error, kind and message, at once, with no fetch; after it, it fetches.
        let cache = PageCache::new(8 * PAGE, PAGE);
        let mut b = vec![0u8; 8];
        let e = cache.read(1, 0, &mut b, len, Class::Meta, |_, _| {
            Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "503"))
        });
        assert!(e.is_err());
        let again = cache
            .read(
                1,
                0,
                &mut b,
                len,
                Class::Meta,
                |_, _| -> std::io::Result<(u64, Vec<u8>)> { panic!("a held page is not fetched") },
            )
            .unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::TimedOut);
        assert!(again.to_string().contains("503"), "{again}");
        // Nor is it claimed by a prefetch.
        assert!(cache.claim(1, &[(0, 1)], 0, 4).is_empty());
        cache.set_fail_hold(Duration::ZERO);
        cache.read(1, 0, &mut b, len, Class::Meta, fetch).unwrap();
        assert_eq!(&b[..], &data[..8]);
        // Another object's page 0 is another page.
        assert!(!cache.has(2, 0, 8));
    }

    #[test]
    fn data_pages_do_not_evict_metadata() {
        let data = source(40 * PAGE);
        let len = data.len() as u64;
        let fetch = |first: u64, count: u64| {
            let s = (first * PAGE) as usize;
            Ok((first, data[s..s + (count * PAGE) as usize].to_vec()))
        };
        let cache = PageCache::new(2 * PAGE, 4 * PAGE);
        let mut b = vec![0u8; 10];
        cache.read(1, 0, &mut b, len, Class::Meta, fetch).unwrap();
        let mut big = vec![0u8; (20 * PAGE) as usize];
        cache
            .read(1, PAGE * 10, &mut big, len, Class::Data, fetch)
            .unwrap();
        assert_eq!(&big[..], &data[(10 * PAGE) as usize..(30 * PAGE) as usize]);
        assert!(cache.has(1, 0, 10), "metadata page kept");
        assert!(cache.stats().data_bytes <= 4 * PAGE);
    }

    #[test]
    fn claims_join_small_gaps_wait_readers_and_respect_the_budget() {
        let data = source(64 * PAGE);
        let len = data.len() as u64;
        let cache = PageCache::new(4 * PAGE, 16 * PAGE);
        // Page 3 is cached already; 10 is far away.
        let mut b = vec![0u8; 4];
        cache
            .read(1, 3 * PAGE, &mut b, len, Class::Meta, |f, c| {
                Ok((
                    f,
                    data[(f * PAGE) as usize..((f + c) * PAGE) as usize].to_vec(),
                ))
            })
            .unwrap();
        let claims = cache.claim(1, &[(0, 2), (2, 5), (10, 11)], 1, 8);
        let runs: Vec<(u64, u64)> = claims.iter().map(|c| (c.first, c.end)).collect();
        assert_eq!(
            runs,
            vec![(0, 5), (10, 11)],
            "gap of one cached page joined"
        );
        assert_eq!(claims[0].owned, vec![0, 1, 2, 4]);
        // Claimed pages are not claimed twice.
        assert!(cache.claim(1, &[(0, 5)], 1, 8).is_empty());
        // A reader of a claimed page waits for its completion (no fetch of its own).
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut b = vec![0u8; 16];
                cache
                    .read(1, PAGE + 8, &mut b, len, Class::Meta, |_, _| {
                        panic!("claimed pages are not fetched again")
                    })
                    .unwrap();
                b
            });
            for c in &claims {
                let r = c.range(len);
                cache.complete(c, len, Ok(&data[r.start as usize..r.end as usize]));
            }
            let got = reader.join().unwrap();
            assert_eq!(&got[..], &data[(PAGE + 8) as usize..(PAGE + 24) as usize]);
        });
        assert_eq!(cache.stats().inflight, 0);
        // The data budget bounds what may be in flight.
        let claims = cache.claim(1, &[(20, 60)], 0, 4);
        let pages: u64 = claims.iter().map(|c| c.end - c.first).sum();
        assert_eq!(pages, 16);
        assert!(claims.iter().all(|c| c.end - c.first <= 4));
        for c in &claims {
            cache.complete(c, len, Err(std::io::Error::other("gone")));
        }
        assert_eq!(cache.stats().inflight, 0);
        assert!(!cache.has(1, 20 * PAGE, 1));
    }

    #[test]
    fn a_filling_lands_pages_as_their_bytes_arrive() {
        let data = source(10 * PAGE + 300);
        let len = data.len() as u64;
        let cache = PageCache::new(4 * PAGE, 64 * PAGE);
        // Page 2 is in flight elsewhere (a reader of its own): the claim joins across it
        // but is not its flight.
        let other = cache.claim(1, &[(2, 3)], 0, 16);
        let claim = cache.claim(1, &[(0, 2), (3, 11)], 1, 16).remove(0);
        assert_eq!((claim.first, claim.end), (0, 11));
        let mut fill = cache.filling(claim, len);
        // Pieces that cut pages anywhere: each page is kept once whole.
        fill.push(&data[..100]).unwrap();
        assert!(!cache.has(1, 0, 1));
        fill.push(&data[100..(PAGE + 7) as usize]).unwrap();
        assert!(cache.has(1, 0, PAGE) && !cache.has(1, PAGE, 1));
        // A reader of page 0 is answered now, before the rest arrives.
        let mut b = vec![0u8; 64];
        cache
            .read(1, 10, &mut b, len, Class::Meta, |_, _| {
                panic!("page 0 was landed")
            })
            .unwrap();
        assert_eq!(&b[..], &data[10..74]);
        fill.push(&data[(PAGE + 7) as usize..(6 * PAGE) as usize])
            .unwrap();
        assert!(cache.has(1, 0, 6 * PAGE));
        // Page 2's flight is the other claim's: still in flight.
        assert!(cache.lock().flying.contains((1, 2)));
        // The answer stops short: the pages it did not bring fail their readers.
        fill.finish(Ok(()));
        assert!(!cache.has(1, 6 * PAGE, 1));
        assert!(cache.lock().flying.keys().all(|&(_, p)| p == 2));
        for c in &other {
            cache.complete(c, len, Err(std::io::Error::other("gone")));
        }
        cache.set_fail_hold(Duration::ZERO);
        assert_eq!(cache.stats().inflight, 0);
        // The last page of the source is short; more bytes than claimed are refused.
        let claim = cache.claim(1, &[(9, 12)], 0, 16).remove(0);
        let mut fill = cache.filling(claim, len);
        fill.push(&data[(9 * PAGE) as usize..]).unwrap();
        assert!(fill.push(&[0u8]).is_err());
        fill.finish(Ok(()));
        assert!(cache.has(1, 9 * PAGE, PAGE + 300));
        // Extra bytes in the same piece as the last page: the piece is refused, and its
        // pages fail their readers rather than stay in flight.
        let cache = PageCache::new(4 * PAGE, 64 * PAGE);
        let claim = cache.claim(1, &[(0, 2)], 0, 16).remove(0);
        let mut fill = cache.filling(claim, len);
        assert!(fill.push(&data[..(2 * PAGE + 1) as usize]).is_err());
        fill.finish(Err(std::io::Error::other("refused")));
        assert!(cache.lock().flying.keys().next().is_none());
        assert!(!cache.has(1, 0, 1));
        assert_eq!(cache.stats().inflight, 0);
        // Dropped unfinished: its pages fail, nothing stays in flight.
        let claim = cache.claim(1, &[(6, 8)], 0, 16).remove(0);
        drop(cache.filling(claim, len));
        assert!(cache.lock().flying.keys().next().is_none());
        assert_eq!(cache.stats().inflight, 0);
    }

    #[test]
    fn readers_waiting_for_a_fetch_get_its_error_kind_and_message() {
        let len = 4 * PAGE;
        let cache = Arc::new(PageCache::new(4 * PAGE, 4 * PAGE));
        let joins = Mutex::new(cache.lock().flying.watch_joins());
        // A reader's fetch fails once another reader waits for it: the object changed.
        let stale = || std::io::Error::new(std::io::ErrorKind::StaleNetworkFileHandle, "changed");
        let (fetching_tx, fetching) = mpsc::channel();
        let c = cache.clone();
        let first = std::thread::spawn(move || {
            let mut b = vec![0u8; 8];
            c.read(1, 0, &mut b, len, Class::Meta, |_, _| {
                fetching_tx.send(()).unwrap();
                wait_for_join(&joins, 0);
                Err(stale())
            })
        });
        fetching
            .recv_timeout(BOUND)
            .expect("the fetch did not start");
        let waiter = reader(&cache, 0, len);
        let e = waiter.recv_timeout(BOUND).expect("released").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::StaleNetworkFileHandle, "{e}");
        assert_eq!(e.to_string(), "changed");
        let e = first.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::StaleNetworkFileHandle, "{e}");
        // The same through a background fetch's claim.
        let joins = Mutex::new(cache.lock().flying.watch_joins());
        let claim = cache.claim(1, &[(2, 3)], 0, 4).remove(0);
        let waiter = reader(&cache, 2, len);
        wait_for_join(&joins, 2);
        cache.complete(&claim, len, Err(stale()));
        let e = waiter.recv_timeout(BOUND).expect("released").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::StaleNetworkFileHandle, "{e}");
        assert_eq!(e.to_string(), "changed");
        assert_eq!(cache.stats().inflight, 0);
    }

    #[test]
    fn a_panicking_fetch_releases_its_readers() {
        let data = source(4 * PAGE);
        let len = data.len() as u64;
        let cache = Arc::new(PageCache::new(4 * PAGE, 4 * PAGE));
        let joins = Mutex::new(cache.lock().flying.watch_joins());
        let (fetching_tx, fetching) = mpsc::channel();
        let c = cache.clone();
        // A read of pages 0..3 whose first fetch (page 0; 1 is cached by then, 2 after it)
        // panics once a reader of page 2 waits for it.
        let mut b = vec![0u8; 8];
        c.read(1, PAGE, &mut b, len, Class::Meta, |f, n| {
            Ok((
                f,
                data[(f * PAGE) as usize..((f + n) * PAGE) as usize].to_vec(),
            ))
        })
        .unwrap();
        let panicking = std::thread::spawn(move || {
            let mut b = vec![0u8; (3 * PAGE) as usize];
            c.read(
                1,
                0,
                &mut b,
                len,
                Class::Meta,
                |_, _| -> std::io::Result<(u64, Vec<u8>)> {
                    fetching_tx.send(()).unwrap();
                    wait_for_join(&joins, 2);
                    panic!("fetch bug")
                },
            )
        });
        fetching
            .recv_timeout(BOUND)
            .expect("the fetch did not start");
        let waiter = reader(&cache, 2, len);
        let e = waiter
            .recv_timeout(BOUND)
            .expect("the reader was not released")
            .unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
        assert!(panicking.join().is_err(), "the fetch panicked");
        assert!(cache.lock().flying.keys().next().is_none());
        assert_eq!(cache.stats().inflight, 0);
    }

    #[test]
    fn a_claim_dropped_unfinished_fails_its_readers() {
        let len = 4 * PAGE;
        let cache = Arc::new(PageCache::new(4 * PAGE, 4 * PAGE));
        let joins = Mutex::new(cache.lock().flying.watch_joins());
        let claim = cache.claim(1, &[(1, 3)], 0, 4).remove(0);
        let waiter = reader(&cache, 2, len);
        wait_for_join(&joins, 2);
        // As when the task holding it panics or is cancelled.
        drop(claim);
        let e = waiter
            .recv_timeout(BOUND)
            .expect("the reader was not released")
            .unwrap_err();
        assert!(e.to_string().contains("dropped"), "{e}");
        assert!(cache.lock().flying.keys().next().is_none());
        assert_eq!(cache.stats().inflight, 0);
    }
}
