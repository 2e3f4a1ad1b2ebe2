//! Readahead across chunk keys: a reader going through an array's chunk keys in grid order
//! (C order, last coordinate fastest), up or down, has the stored bytes of the next chunks
//! named to a remote source before it asks for them, so that they go out as few merged
//! requests instead of one request per key.
//!
//! Why here. A chunk key's read fetches exactly its chunk on a miss; the source's own
//! readahead does nothing inside a chunked dataset (its chunks are not in file order in
//! general, and it cannot know the next ones), and the plain tree's prefetcher
//! ([`crate::fs::prefetch`]) follows a handle's offsets through one image, while a Zarr
//! reader opens one file per chunk. So the order is seen per array, over all its keys.
//!
//! Mechanism. [`KeyStream`] is the whole decision, a pure state machine told of each key
//! read by its number in the grid (C order) and answering which keys' chunks to name, if
//! any; it sends nothing itself. One per array directory, kept for the mount's life, and
//! used only on a remote source (locally the kernel's page cache and `pread` serve the
//! chunks at no round trip). The rules:
//! - One stream per array, whoever reads: FUSE gives each thread of a reader its own
//!   pid, and a threaded reader (dask) takes the keys in order, each thread a few, so
//!   its reads arrive a few keys apart and slightly out of order. A read up to
//!   [`BACK_KEYS`] keys before the stream's position (one past the furthest key read) or
//!   [`FWD_KEYS`] keys past it continues the stream; a read before the position counts for
//!   nothing (the same key read again in several requests, another thread's key arriving
//!   late), one past it moves the stream on. Any other read starts the stream again there.
//! - Nothing is named until [`STREAK`] reads in a row moved the stream on after its first:
//!   a reader of a few keys at random fetches nothing more than its keys.
//! - Then the keys from the stream's position on are named, a window of [`FIRST_WINDOW`]
//!   keys at first, doubling with each batch up to the number of keys whose stored bytes
//!   make [`MAX_WINDOW_BYTES`] (estimated from a chunk's stored size, at least
//!   [`FIRST_WINDOW`], at most [`MAX_WINDOW_KEYS`]). A batch is named only once the reader
//!   is within half a window of what was named before, so each batch is at least half a
//!   window of keys, which the source merges into few GETs, not one key at a time.
//! - The chunk index of the keys ahead is named further on ([`INDEX_WINDOWS`] largest
//!   windows past the data named), each part once per stream, so that naming a batch's
//!   data does not wait a round trip for the index nodes that find its chunks.
//! - Never past the grid's end.
//! - Up or down: [`Sweep`] runs one such stream over the key numbers and one over them
//!   mirrored, for readers going down the grid (dask, whose order of an array's chunks is
//!   mostly from the last key down, see [`Sweep`]).
//!
//! Memory: nothing is held here but a few numbers; what is named is fetched into the
//! source's page cache, which bounds it (a hint that does not fit is dropped there).

use std::sync::Mutex;

use crate::sync::lock;
use crate::views::zarr::ZarrArray;

/// Keys before the stream's position a read may be and still continue the stream.
pub const BACK_KEYS: u64 = 32;
/// Keys past the stream's position a read may be and still continue the stream (the
/// threads of one reader each a key or two ahead of the others).
pub const FWD_KEYS: u64 = 8;
/// Reads moving the stream on, after its first, before anything is named.
pub const STREAK: u32 = 2;
/// Keys of the first batch named.
pub const FIRST_WINDOW: u64 = 4;
/// Stored bytes of the largest window.
pub const MAX_WINDOW_BYTES: u64 = 16 << 20;
/// Keys of the largest window, whatever their size (chunks of a few KiB).
pub const MAX_WINDOW_KEYS: u64 = 4096;
/// Largest windows of keys past the data named whose chunk index is named.
pub const INDEX_WINDOWS: u64 = 4;

/// Keys to name, as half-open ranges of key numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ahead {
    /// Keys whose chunks' stored bytes to name.
    pub data: Option<(u64, u64)>,
    /// Keys whose chunk index nodes to name.
    pub index: Option<(u64, u64)>,
}

/// A reader's progress through the keys of one array (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyStream {
    /// Keys in the grid.
    keys: u64,
    /// Whether a read began the stream yet.
    started: bool,
    /// One past the furthest key read in the stream.
    next: u64,
    /// Reads in a row that moved the stream on.
    streak: u32,
    /// Every key of the stream from its first up to here (exclusive) has been read.
    done: u64,
    /// Which of the keys from `done` on have been read (bit `i`: key `done + i`).
    seen: u64,
    /// Keys named up to here (exclusive).
    named: u64,
    /// Keys whose index is named up to here (exclusive).
    indexed: u64,
    /// Keys of the next batch's window.
    window: u64,
    /// Keys of the largest window.
    max_window: u64,
}

impl KeyStream {
    /// A stream over a grid of `keys` keys whose chunks hold about `chunk_bytes` stored
    /// bytes each.
    pub fn new(keys: u64, chunk_bytes: u64) -> KeyStream {
        let max_window =
            (MAX_WINDOW_BYTES / chunk_bytes.max(1)).clamp(FIRST_WINDOW, MAX_WINDOW_KEYS);
        KeyStream {
            keys,
            started: false,
            next: 0,
            streak: 0,
            done: 0,
            seen: 0,
            named: 0,
            indexed: 0,
            window: FIRST_WINDOW,
            max_window,
        }
    }

    /// Record a read of key `key`; the keys to name now.
    pub fn on_read(&mut self, key: u64) -> Ahead {
        if key >= self.keys {
            return Ahead::default();
        }
        let continues = self.started
            && key.saturating_add(BACK_KEYS) >= self.next
            && key <= self.next.saturating_add(FWD_KEYS);
        if !continues {
            self.started = true;
            self.next = key + 1;
            self.streak = 0;
            self.done = key + 1;
            self.seen = 0;
            self.named = key + 1;
            self.indexed = key + 1;
            self.window = FIRST_WINDOW;
            return Ahead::default();
        }
        self.mark(key);
        if key < self.next {
            return Ahead::default();
        }
        self.next = key + 1;
        self.streak = self.streak.saturating_add(1);
        if self.streak < STREAK {
            return Ahead::default();
        }
        let mut ahead = Ahead::default();
        // The reader is within half a window of what is named: the next batch, from where
        // the last stopped, or from the first key not read yet (another thread's, which the
        // stream stepped over) before the first batch.
        let from = self.named.max(self.done);
        if from.saturating_sub(self.next) <= self.window / 2 {
            let to = self.next.saturating_add(self.window).min(self.keys);
            if to > from {
                ahead.data = Some((from, to));
                self.named = to;
                self.window = self.window.saturating_mul(2).min(self.max_window);
            }
        }
        let index_to = self
            .named
            .max(self.next)
            .saturating_add(INDEX_WINDOWS.saturating_mul(self.max_window))
            .min(self.keys);
        let index_from = self.indexed.max(self.done);
        if ahead.data.is_some() && index_to > index_from {
            ahead.index = Some((index_from, index_to));
            self.indexed = index_to;
        }
        ahead
    }

    /// Note that `key` was read (it continues the stream): moves `done` over the keys read
    /// without a gap. A key 64 or more past `done` moves it on regardless (the keys stepped
    /// over are taken as read).
    fn mark(&mut self, key: u64) {
        let Some(d) = key.checked_sub(self.done) else {
            return;
        };
        if d >= 64 {
            let skip = d - 63;
            self.seen = self.seen.checked_shr(skip.min(64) as u32).unwrap_or(0);
            self.done += skip;
        }
        self.seen |= 1 << (key - self.done);
        while self.seen & 1 == 1 {
            self.seen >>= 1;
            self.done += 1;
        }
    }
}

/// A reader's sweep through the keys of one array, up or down the grid: dask asks for an
/// array's chunks in the reverse of its task names' string order (row 9 before row 8, and
/// within a row 9 to 2, then 15 to 10, then 1 and 0), mostly from the last key down. Two
/// [`KeyStream`]s, one over the key numbers and one over them mirrored (`keys - 1 - n`):
/// a reader going up the grid moves the first on, one going down the second; each names
/// nothing for the other's reader (its reads fall behind it, or far from it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sweep {
    keys: u64,
    up: KeyStream,
    down: KeyStream,
}

impl Sweep {
    /// See [`KeyStream::new`].
    pub fn new(keys: u64, chunk_bytes: u64) -> Sweep {
        Sweep {
            keys,
            up: KeyStream::new(keys, chunk_bytes),
            down: KeyStream::new(keys, chunk_bytes),
        }
    }

    /// Record a read of key `key`; the keys to name now.
    pub fn on_read(&mut self, key: u64) -> Ahead {
        if key >= self.keys {
            return Ahead::default();
        }
        let up = self.up.on_read(key);
        let down = self.down.on_read(self.keys - 1 - key);
        let back = |r: Option<(u64, u64)>| r.map(|(a, b)| (self.keys - b, self.keys - a));
        Ahead {
            data: up.data.or(back(down.data)),
            index: up.index.or(back(down.index)),
        }
    }
}

/// Note a read of the key at `coords` of `array` in the array's stream `slot` (made at
/// the first read), and name to the source what the stream calls for: the index first,
/// then the data. Nothing on a local source.
pub fn on_key_read(slot: &Mutex<Option<Sweep>>, array: &ZarrArray, coords: &[u64]) {
    if !array.is_remote() {
        return;
    }
    let grid = array.grid_shape();
    let Some(key) = key_number(coords, &grid) else {
        return;
    };
    if lock(slot).is_none() {
        // Sized by this chunk's stored bytes, looked up outside the lock (the read needs
        // its index record anyway).
        let keys = grid.iter().try_fold(1u64, |a, &n| a.checked_mul(n));
        let Some(keys) = keys else {
            return;
        };
        // A chunk never written (its key does not exist) tells nothing: the next read's will.
        let bytes = array.stored_len(coords).unwrap_or(0);
        if bytes == 0 {
            return;
        }
        lock(slot).get_or_insert_with(|| Sweep::new(keys, bytes));
    }
    let ahead = match lock(slot).as_mut() {
        Some(s) => s.on_read(key),
        None => return,
    };
    if let Some((from, to)) = ahead.index {
        array.hint_keys(from, to, false);
    }
    if let Some((from, to)) = ahead.data {
        array.hint_keys(from, to, true);
    }
}

/// The number of the key at `coords` in a grid of `grid` keys per dimension, C order;
/// `None` outside the grid.
pub fn key_number(coords: &[u64], grid: &[u64]) -> Option<u64> {
    if coords.len() != grid.len() {
        return None;
    }
    coords.iter().zip(grid).try_fold(0u64, |n, (&c, &g)| {
        (c < g).then_some(())?;
        n.checked_mul(g)?.checked_add(c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Ranges of keys named.
    type Ranges = Vec<(u64, u64)>;

    /// Feed `keys` to `s`; every range named, data and index.
    fn feed(s: &mut KeyStream, keys: &[u64]) -> (Ranges, Ranges) {
        let (mut data, mut index) = (Vec::new(), Vec::new());
        for &k in keys {
            let a = s.on_read(k);
            data.extend(a.data);
            index.extend(a.index);
        }
        (data, index)
    }

    #[test]
    fn a_pass_in_order_names_growing_batches_ahead() {
        // Chunks of 1 MiB: the largest window is 16 keys.
        let mut s = KeyStream::new(1000, 1 << 20);
        assert_eq!(s.max_window, 16);
        // The first read and the next one name nothing; the third names 4 keys ahead.
        assert_eq!(s.on_read(0), Ahead::default());
        assert_eq!(s.on_read(1), Ahead::default());
        let a = s.on_read(2);
        assert_eq!(a.data, Some((3, 7)));
        assert_eq!(a.index, Some((3, 7 + 64)));
        // The window doubles with each read (8 keys past key 3, then 16 past key 4)...
        assert_eq!(s.on_read(3).data, Some((7, 12)));
        assert_eq!(s.on_read(4).data, Some((12, 21)));
        // ...up to the largest, 16 keys: then nothing until the reader is within half of
        // it of what is named (key 12, whose stream position 13 is 8 keys before 21).
        assert_eq!(s.on_read(5), Ahead::default());
        // Reading the same key again, or an earlier one, names nothing.
        assert_eq!(s.on_read(5), Ahead::default());
        assert_eq!(s.on_read(1), Ahead::default());
        let (data, _) = feed(&mut s, &(6..12).collect::<Vec<_>>());
        assert_eq!(data, vec![]);
        let (data, _) = feed(&mut s, &(12..100).collect::<Vec<_>>());
        assert_eq!(data.first(), Some(&(21, 29)));
        // Batches of half the largest window, one after the other.
        assert!(data.iter().all(|&(a, b)| b - a >= 8), "{data:?}");
        assert!(data.windows(2).all(|w| w[0].1 == w[1].0), "{data:?}");
    }

    #[test]
    fn random_keys_and_far_jumps_name_nothing() {
        let mut s = KeyStream::new(100_000, 300 << 10);
        let keys = [
            5_000u64, 77, 90_000, 40_000, 41_000, 12, 60_000, 99_999, 0, 500,
        ];
        let (data, index) = feed(&mut s, &keys);
        assert!(data.is_empty() && index.is_empty());
        // Two keys in order after a jump are not yet a pass either.
        assert_eq!(feed(&mut s, &[7_000, 7_001]), (vec![], vec![]));
        assert!(s.on_read(7_002).data.is_some());
        // Keys past the grid count for nothing.
        assert_eq!(s.on_read(100_000), Ahead::default());
        assert_eq!(s.next, 7_003);
    }

    #[test]
    fn nothing_is_named_past_the_grid() {
        let mut s = KeyStream::new(6, 1);
        let (data, index) = feed(&mut s, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(data, vec![(3, 6)]);
        assert_eq!(index, vec![(3, 6)]);
        assert_eq!(key_number(&[1, 2], &[3, 4]), Some(6));
        assert_eq!(key_number(&[3, 0], &[3, 4]), None);
        assert_eq!(key_number(&[], &[]), Some(0));
        assert_eq!(key_number(&[0], &[3, 4]), None);
    }

    /// Keys `0..n` read by `threads` threads each taking the next key when free; `order`
    /// says which thread's read arrives next (a thread's reads in its own order), no thread
    /// more than `lag` keys behind the furthest.
    fn interleaved(n: u64, threads: usize, order: &[usize], lag: u64) -> Vec<u64> {
        let mut own: Vec<Vec<u64>> = vec![Vec::new(); threads];
        for k in 0..n {
            own[k as usize % threads].push(k);
        }
        let mut at = vec![0usize; threads];
        let mut out = Vec::new();
        let mut i = 0;
        while out.len() < n as usize {
            let furthest = out.iter().copied().max().unwrap_or(0);
            // The thread furthest behind must go when it lags too far.
            let behind = (0..threads)
                .filter(|&t| at[t] < own[t].len())
                .min_by_key(|&t| own[t][at[t]])
                .unwrap_or(0);
            let t = if own[behind][at[behind]] + lag < furthest {
                behind
            } else {
                let t = order.get(i).copied().unwrap_or(0) % threads;
                i += 1;
                if at[t] < own[t].len() {
                    t
                } else {
                    behind
                }
            };
            out.push(own[t][at[t]]);
            at[t] += 1;
        }
        out
    }

    /// The keys of a grid of `rows` x `cols` in dask's order: its task names' tuples sorted
    /// as strings, last first.
    fn dask_order(rows: u64, cols: u64) -> Vec<u64> {
        let desc = |n: u64| {
            let mut v: Vec<u64> = (0..n).collect();
            v.sort_by_key(|i| std::cmp::Reverse(i.to_string()));
            v
        };
        let cs = desc(cols);
        desc(rows)
            .into_iter()
            .flat_map(|r| cs.iter().map(move |c| r * cols + c))
            .collect()
    }

    #[test]
    fn dasks_order_down_the_grid_is_named_ahead() {
        // The bench's arrays: 16 x 16 and 64 x 16 chunks of 340 KB stored.
        for rows in [16u64, 64] {
            let n = rows * 16;
            let order = dask_order(rows, 16);
            assert_eq!(&order[..3], &[9 * 16 + 9, 9 * 16 + 8, 9 * 16 + 7]);
            let mut s = Sweep::new(n, 340 << 10);
            let mut named = vec![false; n as usize];
            let mut missed = 0;
            let mut batches = 0;
            for &k in &order {
                missed += u64::from(!named[k as usize]);
                if let Some((a, b)) = s.on_read(k).data {
                    batches += 1;
                    named[a as usize..b as usize]
                        .iter_mut()
                        .for_each(|x| *x = true);
                }
            }
            // A few keys after each jump between rows (to row 9, 8, 7, 63, 6, 59, ...).
            assert!(
                missed <= n / 8,
                "{rows} rows: {missed} keys not named ahead"
            );
            assert!(batches <= n / 8, "{rows} rows: {batches} batches");
        }
        // Going up the grid names nothing below (and the reverse).
        let mut s = Sweep::new(1000, 340 << 10);
        for k in 100..300 {
            if let Some((a, _)) = s.on_read(k).data {
                assert!(a > k, "{k}: {a}");
            }
        }
        let mut s = Sweep::new(1000, 340 << 10);
        for k in (100..300).rev() {
            if let Some((_, b)) = s.on_read(k).data {
                assert!(b <= k, "{k}: {b}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A pass down the grid by interleaved threads, and a few keys at random, through
        /// both streams: named ahead, below the key read; nothing for scattered keys.
        #[test]
        fn a_pass_down_is_named_ahead_and_random_keys_nothing(
            n in 50u64..3_000,
            threads in 1usize..5,
            order in prop::collection::vec(0usize..4, 0..3_000),
            random in prop::collection::vec(0u64..1_000_000, 0..20),
        ) {
            let keys = interleaved(n, threads, &order, FWD_KEYS / 2);
            let mut s = Sweep::new(n, 340 << 10);
            let mut named = vec![false; n as usize];
            for (i, k) in keys.iter().map(|k| n - 1 - k).enumerate() {
                if let Some((a, b)) = s.on_read(k).data {
                    // Below the key, but for keys of other threads stepped over.
                    prop_assert!(b <= k + 1 + FWD_KEYS && a < b, "{k}: {a}..{b}");
                    named[a as usize..b as usize].iter_mut().for_each(|x| *x = true);
                }
                if i > 2 + 2 * threads && k + 8 < n {
                    prop_assert!(named[k as usize], "key {k} (read {i}) not named");
                }
            }
            // Keys far apart (steps of at least 50,000 in a million).
            let mut s = Sweep::new(1_000_000, 340 << 10);
            let mut random = random;
            random.sort_unstable();
            random.dedup_by(|a, b| *a - *b < 50_000);
            // From both ends in turn: every step is long, up or down.
            let (mut lo, mut hi) = (0, random.len());
            while lo < hi {
                let k = if (lo + random.len() - hi) % 2 == 0 {
                    lo += 1;
                    random[lo - 1]
                } else {
                    hi -= 1;
                    random[hi]
                };
                prop_assert_eq!(s.on_read(k), Ahead::default());
            }
        }

        /// Whatever the reads: what is named is inside the grid, reaches past the key whose
        /// read named it, and is never empty.
        #[test]
        fn names_lie_ahead_and_inside_the_grid(
            keys in 1u64..5_000,
            chunk in 1u64..(64 << 20),
            reads in prop::collection::vec((0u64..6_000, 0u64..3), 1..300),
        ) {
            let mut s = KeyStream::new(keys, chunk);
            let mut last = 0;
            for (k, step) in reads {
                // Mostly short steps forward, sometimes a jump.
                let k = if step == 0 { k } else { last + step };
                last = k;
                let a = s.on_read(k);
                for (from, to) in a.data.into_iter().chain(a.index) {
                    prop_assert!(from < to && to <= keys, "{k}: {from}..{to}");
                    prop_assert!(to > k + 1 || to == keys, "{k}: {from}..{to}");
                }
            }
        }

        /// Reads of keys far apart (a reader picking keys at random) name nothing.
        #[test]
        fn scattered_reads_name_nothing(
            jumps in prop::collection::vec((BACK_KEYS + FWD_KEYS + 1..1_000_000, any::<bool>()), 1..200),
        ) {
            let mut s = KeyStream::new(u64::MAX, 300 << 10);
            let mut k = 1u64 << 40;
            for (jump, back) in jumps {
                k = if back { k - jump } else { k + jump };
                prop_assert_eq!(s.on_read(k), Ahead::default());
            }
        }

        /// One pass in order by one to four threads, their reads arriving interleaved: every
        /// key but the first few is named before it is read, each once, in batches growing
        /// to half the largest window (few of them), and the index is named ahead of the data.
        #[test]
        fn a_pass_by_interleaved_threads_is_named_ahead_once(
            n in 50u64..3_000,
            threads in 1usize..5,
            order in prop::collection::vec(0usize..4, 0..3_000),
            repeats in prop::collection::vec(any::<bool>(), 0..3_000),
        ) {
            let keys = interleaved(n, threads, &order, FWD_KEYS / 2);
            let mut s = KeyStream::new(n, 340 << 10);
            let mut named = vec![false; n as usize];
            let mut indexed = vec![false; n as usize];
            let mut batches = 0u64;
            for (i, &k) in keys.iter().enumerate() {
                // A key is read in several requests: the same key again names nothing.
                let mut asks = vec![k];
                if repeats.get(i).copied().unwrap_or(false) {
                    asks.push(k);
                }
                for k in asks {
                    // The caller names the index first, then the data.
                    let a = s.on_read(k);
                    if let Some((from, to)) = a.index {
                        for j in from..to {
                            indexed[j as usize] = true;
                        }
                    }
                    if let Some((from, to)) = a.data {
                        batches += 1;
                        for j in from..to {
                            prop_assert!(!named[j as usize], "{j} named twice");
                            prop_assert!(indexed[j as usize], "{j}: data before index");
                            named[j as usize] = true;
                        }
                    }
                }
                if i > 2 + 2 * threads && k >= 8 {
                    prop_assert!(named[k as usize], "key {k} (read {i}) not named: {keys:?}");
                }
            }
            // Few batches: half the largest window each, once grown.
            let max = s.max_window;
            prop_assert!(batches <= 6 + n / (max / 2), "{batches} batches of {n} keys");
        }
    }
}
