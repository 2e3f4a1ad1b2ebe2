//! A page cache for slow byte sources: aligned [`PAGE`]-byte pages, bounded in bytes, least
//! recently used evicted, each page fetched once however many readers miss it at the same
//! time (single flight), and a run of missing pages fetched with one call.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use lru::LruCache;

/// Page size.
pub const PAGE: u64 = 64 << 10;

/// A page being fetched: readers that need it wait here.
#[derive(Default)]
struct Flight {
    done: Mutex<Option<Result<(), String>>>,
    cv: Condvar,
}

struct State {
    pages: LruCache<u64, Arc<[u8]>>,
    bytes: u64,
    flying: HashMap<u64, Arc<Flight>>,
}

/// The cache (see the module docs).
pub struct PageCache {
    budget: u64,
    state: Mutex<State>,
}

impl PageCache {
    /// A cache of at most `budget` bytes of pages.
    pub fn new(budget: u64) -> PageCache {
        PageCache {
            budget,
            state: Mutex::new(State {
                pages: LruCache::unbounded(),
                bytes: 0,
                flying: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fill `buf` with the bytes at `offset` of a source of `len` bytes (the caller keeps
    /// the range inside it). Missing pages are fetched with `fetch(first_page, count)`, which
    /// returns the bytes from `first_page * PAGE` on: at least `count` pages' worth (or up to
    /// the end of the source), possibly more (kept too).
    pub fn read(
        &self,
        offset: u64,
        buf: &mut [u8],
        len: u64,
        fetch: impl Fn(u64, u64) -> std::io::Result<Vec<u8>>,
    ) -> std::io::Result<()> {
        let end = offset + buf.len() as u64;
        let (p0, p1) = (offset / PAGE, (end - 1) / PAGE);
        loop {
            // Copy what is cached; claim the missing pages that no one is fetching.
            let mut missing = Vec::new();
            let mut waits = Vec::new();
            {
                let mut st = self.lock();
                for p in p0..=p1 {
                    if st.pages.contains(&p) {
                        continue;
                    }
                    if let Some(f) = st.flying.get(&p) {
                        waits.push(f.clone());
                    } else {
                        missing.push(p);
                    }
                }
                if missing.is_empty() && waits.is_empty() {
                    for p in p0..=p1 {
                        let page = st.pages.get(&p).expect("present").clone();
                        copy_page(p, &page, offset, buf);
                    }
                    return Ok(());
                }
                for &p in &missing {
                    st.flying.insert(p, Arc::new(Flight::default()));
                }
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
                let got = fetch(first, count);
                let run = &missing[i..j];
                match got {
                    Ok(bytes) if self.insert(first, &bytes, len, run) => {}
                    Ok(bytes) => {
                        let e = std::io::Error::other(format!(
                            "{} bytes answered for pages {first}..{}",
                            bytes.len(),
                            first + count
                        ));
                        self.land(run, Err(e.to_string()));
                        result = Err(e);
                    }
                    Err(e) => {
                        self.land(run, Err(e.to_string()));
                        result = Err(e);
                    }
                }
                i = j;
            }
            result?;
            for f in waits {
                let mut done = f.done.lock().unwrap_or_else(|e| e.into_inner());
                while done.is_none() {
                    done = f.cv.wait(done).unwrap_or_else(|e| e.into_inner());
                }
                if let Some(Err(e)) = done.as_ref() {
                    return Err(std::io::Error::other(e.clone()));
                }
            }
            // Pages may have been evicted meanwhile: go round again (they are then missing).
        }
    }

    /// Keep the pages of `bytes` (from page `first` on) and wake those waiting for `run`;
    /// false (nobody woken) if `bytes` does not hold every page of `run`.
    fn insert(&self, first: u64, bytes: &[u8], len: u64, run: &[u64]) -> bool {
        let last = run.last().copied().unwrap_or(first);
        let needed = ((last + 1) * PAGE).min(len).saturating_sub(first * PAGE);
        if (bytes.len() as u64) < needed {
            return false;
        }
        {
            let mut st = self.lock();
            for (k, chunk) in bytes.chunks(PAGE as usize).enumerate() {
                let p = first + k as u64;
                // A page is whole unless it is the last of the source.
                let whole = chunk.len() as u64 == PAGE || p * PAGE + chunk.len() as u64 == len;
                if !whole || st.pages.contains(&p) {
                    continue;
                }
                st.bytes += chunk.len() as u64;
                st.pages.put(p, Arc::from(chunk));
            }
            while st.bytes > self.budget {
                match st.pages.pop_lru() {
                    Some((_, page)) => st.bytes -= page.len() as u64,
                    None => break,
                }
            }
        }
        self.land(run, Ok(()));
        true
    }

    /// End the flights of `run` with `result`.
    fn land(&self, run: &[u64], result: Result<(), String>) {
        let flights: Vec<Arc<Flight>> = {
            let mut st = self.lock();
            run.iter().filter_map(|p| st.flying.remove(p)).collect()
        };
        for f in flights {
            *f.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(result.clone());
            f.cv.notify_all();
        }
    }
}

/// Copy the part of page `p` that falls in `buf` (the bytes at `offset`).
fn copy_page(p: u64, page: &[u8], offset: u64, buf: &mut [u8]) {
    let start = p * PAGE;
    let lo = offset.max(start);
    let hi = (offset + buf.len() as u64).min(start + page.len() as u64);
    if lo < hi {
        buf[(lo - offset) as usize..(hi - offset) as usize]
            .copy_from_slice(&page[(lo - start) as usize..(hi - start) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn pages_are_fetched_once_and_bounded() {
        let data: Vec<u8> = (0..(5 * PAGE + 100)).map(|i| (i % 251) as u8).collect();
        let len = data.len() as u64;
        let calls = AtomicU64::new(0);
        let fetch = |first: u64, count: u64| {
            calls.fetch_add(1, Ordering::Relaxed);
            let s = (first * PAGE) as usize;
            let e = (((first + count) * PAGE) as usize).min(data.len());
            Ok(data[s..e].to_vec())
        };
        let cache = PageCache::new(3 * PAGE);
        let check = |off: u64, n: usize| {
            let mut b = vec![0u8; n];
            cache.read(off, &mut b, len, fetch).unwrap();
            assert_eq!(&b[..], &data[off as usize..off as usize + n]);
        };
        check(10, 100);
        check(PAGE - 5, 10);
        assert_eq!(calls.load(Ordering::Relaxed), 2, "one call per missing run");
        check(20, 30);
        assert_eq!(calls.load(Ordering::Relaxed), 2, "a hit");
        check(len - 50, 50);
        check(0, (2 * PAGE) as usize);
        assert!(cache.lock().bytes <= 3 * PAGE);
        // Many readers of one missing page: one fetch.
        let cache = PageCache::new(8 * PAGE);
        let n = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let mut b = vec![0u8; 64];
                    cache
                        .read(3 * PAGE, &mut b, len, |f, c| {
                            n.fetch_add(1, Ordering::Relaxed);
                            fetch(f, c)
                        })
                        .unwrap();
                });
            }
        });
        assert_eq!(n.load(Ordering::Relaxed), 1);
        // A failed fetch fails every reader waiting for it, and is retried by the next.
        let cache = PageCache::new(8 * PAGE);
        let mut b = vec![0u8; 8];
        let e = cache.read(0, &mut b, len, |_, _| Err(std::io::Error::other("503")));
        assert!(e.is_err());
        cache.read(0, &mut b, len, fetch).unwrap();
        assert_eq!(&b[..], &data[..8]);
    }
}
