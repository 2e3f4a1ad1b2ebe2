//! Readahead: data reads that follow each other through an object form a stream, fetched
//! ahead (see the parent module's docs for the rules).
//!
//! [`Readahead`] is the whole decision, as a pure state machine: it is told of each data
//! read ([`DataRead`]: where, which dataset, for which reader) and answers the byte range to
//! fetch ahead, if any; it sends nothing itself. The object ([`Inner::readahead`]) holds one
//! behind a lock and sends what it answers. The tests below drive it with generated read
//! sequences and check its promises: it never fetches past the object, past a dataset's
//! block while a stream stays in that dataset, or anything at all for small reads scattered
//! at random; what it fetches for one stream moves forward without overlap; a reader that
//! goes through a block from its start finds the rest of it fetched ahead.

use std::collections::VecDeque;
use std::sync::Arc;

use super::super::pages::PAGE;
use super::super::source::{DataHint, ReadCtx};
use super::object::Inner;
use super::{DIRECT_READ, RA_FIRST, RA_MIN, RA_STREAK};

/// How far before a stream's position a read may start and still continue it (reads of one
/// stream arrive slightly out of order from several FUSE threads), at least; reads may also
/// start two of their own lengths before it.
const RA_BACK: u64 = 256 << 10;
/// How far past a stream's position (or what was fetched ahead of it) a read may start and
/// still continue it, at most: the metadata between two datasets' chunks.
const RA_GAP: u64 = 256 << 10;
/// Readahead across datasets reaches this many times the span of the dataset read last
/// (at least [`RA_CROSS_MIN`], at most the largest window).
const RA_CROSS: u64 = 8;
const RA_CROSS_MIN: u64 = 1 << 20;
/// Streams remembered per object.
const RA_STREAMS: usize = 16;

/// One data read, as readahead sees it: bytes `offset..end` of the object, of the dataset
/// `hint` names, made for `reader` (0: not known).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DataRead {
    pub(super) offset: u64,
    pub(super) end: u64,
    pub(super) hint: DataHint,
    pub(super) reader: u32,
}

/// One reader's progress through an object (see the module docs).
#[derive(Clone, Copy, Debug)]
struct Stream {
    /// Where the next read is expected.
    next: u64,
    /// How far pages have been fetched (or claimed) ahead.
    ahead: u64,
    window: u64,
    streak: u32,
    /// The dataset read last ([`DataHint::object`]).
    object: u64,
    /// Whether the stream went on from one dataset into another.
    crossed: bool,
    /// Where the stream's reads of the current dataset began.
    object_start: u64,
    /// How much of the file the stream's previous dataset spanned: readahead across
    /// datasets reaches [`RA_CROSS`] of such spans ahead.
    span: u64,
    /// The reader whose reads began the stream ([`ReadCtx::reader`]): only its own reads
    /// carry the stream into another dataset.
    reader: u32,
}

/// The streams of one object and the bounds they read ahead within.
#[derive(Debug)]
pub(super) struct Readahead {
    streams: VecDeque<Stream>,
    /// The object's length.
    len: u64,
    /// Largest window.
    max: u64,
    /// What a large read at the start of a dataset's block fetches at once.
    first: u64,
}

impl Inner {
    /// Follow the stream that a read of `offset..end` belongs to, and fetch ahead of it. A
    /// prefetch worker's reads are not a reader's progress and move no stream.
    pub(super) fn readahead(
        self: &Arc<Self>,
        offset: u64,
        end: u64,
        hint: &DataHint,
        ctx: ReadCtx,
    ) {
        if ctx.prefetch {
            return;
        }
        let read = DataRead {
            offset,
            end,
            hint: *hint,
            reader: ctx.reader,
        };
        let todo = crate::sync::lock(&self.readahead).advance(&read);
        if let Some((from, to)) = todo {
            let sent = self.fetch_behind(&[(from / PAGE, to.div_ceil(PAGE))], 0);
            self.count(|s| &s.readahead, sent);
        }
    }
}

impl Readahead {
    /// No streams yet, for an object of `len` bytes: windows up to `max`, a block's start
    /// fetching `first` ahead.
    pub(super) fn new(len: u64, max: u64, first: u64) -> Readahead {
        Readahead {
            streams: VecDeque::new(),
            len,
            max,
            first,
        }
    }

    /// A new stream for a read that continues none: a large read at the start of a
    /// dataset's block is a reader going through it from the start (cat, cp, dd), whose
    /// block is fetched ahead at once; the range to fetch. "At the start" allows two of the
    /// read's own lengths: the kernel sends a reader's first reads together, and they reach
    /// the FUSE threads in either order.
    fn new_stream(&self, r: &DataRead) -> (Stream, Option<(u64, u64)>) {
        let (offset, end) = (r.offset, r.end);
        let mut s = Stream {
            next: end,
            ahead: end,
            window: RA_MIN,
            streak: 0,
            object: r.hint.object,
            crossed: false,
            object_start: offset,
            span: 0,
            reader: r.reader,
        };
        let todo = match r.hint.extent {
            Some((start, stop))
                if offset >= start
                    && offset - start <= 2 * (end - offset)
                    && end - offset >= RA_FIRST
                    && stop.min(self.len) > end =>
            {
                let target = end.saturating_add(self.first).min(stop).min(self.len);
                s.streak = 1;
                s.window = self.max;
                s.ahead = target;
                Some((end, target))
            }
            _ => None,
        };
        (s, todo)
    }

    /// Update the streams for the read `r`; the range to fetch ahead, if any.
    pub(super) fn advance(&mut self, r: &DataRead) -> Option<(u64, u64)> {
        let (offset, end, hint) = (r.offset, r.end.min(self.len), &r.hint);
        if offset >= end {
            return None;
        }
        let r = &DataRead { end, ..*r };
        // Reads of one stream arrive somewhat out of order (several FUSE threads, the
        // kernel's readahead): a read may start before the stream's position by a little,
        // and by a few of its own lengths.
        // A reader may also skip a little (the metadata between two datasets' chunks),
        // by at most two of its own lengths: small reads landing near each other at
        // random do not make a stream.
        // A read of another dataset continues a stream only when the stream's own reader
        // makes it: datasets next to each other in the file, read by two programs at the
        // same time, are two readers, neither of which goes on into the other's dataset.
        let back = RA_BACK.max(2 * (end - offset));
        let gap = RA_GAP.min(2 * (end - offset));
        let hit = self.streams.iter().position(|s| {
            offset.saturating_add(back) >= s.next
                && offset <= s.next.max(s.ahead).saturating_add(gap)
                && (hint.object == s.object || r.reader == s.reader)
        });
        let Some(mut s) = hit.and_then(|i| self.streams.remove(i)) else {
            let (s, todo) = self.new_stream(r);
            self.streams.push_front(s);
            self.streams.truncate(RA_STREAMS);
            return todo;
        };
        // A stream that goes on from one dataset into another (their data in file
        // order: a cat of the datasets one after the other) reads ahead across them.
        if hint.object != s.object {
            s.crossed = true;
            s.object = hint.object;
            s.span = s.next.saturating_sub(s.object_start);
            s.object_start = offset;
        }
        let mut todo = None;
        // Only reads that move the stream forward count: a late request, or a reader
        // stepping backwards, keeps the stream but fetches nothing ahead.
        let forward = end > s.next;
        if forward {
            s.next = end;
            s.streak = s.streak.saturating_add(1);
        }
        // Large reads one after the other are a stream at once (random reads are small),
        // with a window of a few of them.
        let large = end - offset >= DIRECT_READ as u64;
        if forward && large && s.streak == 1 {
            s.window = s.window.max(8 * (end - offset)).min(self.max);
        }
        // Within one dataset, readahead stays inside its block; a chunked dataset's
        // chunks are fetched by the reads' own hints, the decoders' prefetch and the Zarr
        // view's readahead across chunk keys.
        let limit = match (s.crossed, hint.extent) {
            (true, _) => self.len,
            (false, Some((_, stop))) => stop.min(self.len),
            (false, None) => 0,
        };
        // Across datasets, a few datasets ahead rather than the whole window: at the end of
        // the datasets read (what follows may be data no one reads) it fetches at most that
        // much past them.
        let window = match s.crossed {
            true => s.window.min(
                RA_CROSS
                    .saturating_mul(s.span)
                    .max(RA_CROSS_MIN)
                    .min(self.max),
            ),
            false => s.window,
        };
        if forward && (s.streak >= RA_STREAK || large) {
            let from = s.ahead.max(s.next);
            let target = s.next.saturating_add(window).min(limit);
            // Send in batches of at least a quarter of a window, not one page per read (and
            // the rest, whatever its size, once the window reaches the limit). A quarter
            // rather than a half: the next batch goes out while three quarters of the
            // window are still ahead of the reader, so a reader as fast as the round trip
            // lets it be rarely finds the window empty.
            if target > from && (target - from >= window / 4 || target == limit) {
                todo = Some((from, target));
                s.ahead = target;
                s.window = s.window.saturating_mul(2).min(self.max);
            }
        }
        self.streams.push_front(s);
        todo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;
    const LEN: u64 = 64 * MIB;

    fn machine() -> Readahead {
        Readahead::new(LEN, 16 * MIB, 32 * MIB)
    }

    fn read(
        offset: u64,
        len: u64,
        object: u64,
        extent: Option<(u64, u64)>,
        reader: u32,
    ) -> DataRead {
        DataRead {
            offset,
            end: offset + len,
            hint: DataHint { object, extent },
            reader,
        }
    }

    #[test]
    fn only_the_same_reader_carries_a_stream_into_the_next_dataset() {
        // Two chunked datasets, A's chunks right before B's, read one chunk at a time.
        let chunk = 160 << 10;
        let a_chunks = [MIB, MIB + chunk, MIB + 2 * chunk];
        let b_start = MIB + 3 * chunk;
        let read_a = |ra: &mut Readahead, reader| {
            for &at in &a_chunks {
                // Within one chunked dataset nothing is fetched ahead.
                assert_eq!(ra.advance(&read(at, chunk, 1, None, reader)), None);
            }
        };
        let read_b = |ra: &mut Readahead, reader| {
            (0..3)
                .map(|i| ra.advance(&read(b_start + i * chunk, chunk, 2, None, reader)))
                .collect::<Vec<_>>()
        };
        // One reader reads A, then B: a reader going through the file, read ahead.
        let mut ra = machine();
        read_a(&mut ra, 7);
        let ahead = read_b(&mut ra, 7);
        assert!(ahead.iter().any(|t| t.is_some()), "{ahead:?}");
        // Another reader reads B while (or after) the first reads A: two readers, each of
        // one dataset; nothing fetched past B.
        let mut ra = machine();
        read_a(&mut ra, 7);
        let ahead = read_b(&mut ra, 8);
        assert!(ahead.iter().all(|t| t.is_none()), "{ahead:?}");
    }

    #[test]
    fn a_large_first_read_at_a_block_start_fetches_the_block() {
        let mut ra = machine();
        let block = Some((4 * MIB, 12 * MIB));
        assert_eq!(
            ra.advance(&read(4 * MIB, MIB, 1, block, 1)),
            Some((5 * MIB, 12 * MIB))
        );
        // The same read in the middle of the block is no reader going through it.
        let mut ra = machine();
        assert_eq!(ra.advance(&read(8 * MIB, 4096, 1, block, 1)), None);
    }

    /// A block `(start, stop)` inside the object, at least 64 KiB long.
    fn block() -> impl Strategy<Value = (u64, u64)> {
        (0..LEN / 4096 - 16, 16u64..4096).prop_map(|(a, n)| {
            let start = a * 4096;
            (start, (start + n * 4096).min(LEN))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the reads: what is fetched lies ahead of the read that caused it and
        /// inside the object, and a stream that stays in its dataset stays in its block.
        #[test]
        fn fetches_lie_ahead_and_inside(
            reads in prop::collection::vec(
                (0..LEN, 1u64..4 * MIB, 0u64..3, any::<bool>(), 1u32..3), 1..60),
        ) {
            let extents = [(0, 8 * MIB), (8 * MIB, 20 * MIB), (20 * MIB, LEN + MIB)];
            let mut ra = machine();
            for (offset, n, object, with_extent, reader) in reads {
                let ext = extents[object as usize];
                let r = read(offset, n.min(LEN - offset).max(1), object,
                             with_extent.then_some(ext), reader);
                if let Some((from, to)) = ra.advance(&r) {
                    prop_assert!(from < to && to <= LEN, "{r:?} -> {from}..{to}");
                    prop_assert!(from >= r.end.min(LEN), "{r:?} -> {from}..{to}");
                }
                prop_assert!(ra.streams.len() <= RA_STREAMS);
            }
        }

        /// One reader going through one block in reads of one size, neighbours sometimes
        /// swapped (two FUSE threads): what is fetched never overlaps, never leaves the
        /// block, and with the reads covers all of it.
        #[test]
        fn a_sequential_reader_has_its_block_fetched_once(
            (start, stop) in block(),
            size in prop::sample::select(vec![4096u64, 16 << 10, 128 << 10, MIB]),
            swaps in prop::collection::vec(any::<bool>(), 0..4096),
        ) {
            let mut offsets: Vec<u64> = (start..stop).step_by(size as usize).collect();
            for (i, swap) in swaps.iter().enumerate() {
                if *swap && i + 1 < offsets.len() && i % 2 == 0 {
                    offsets.swap(i, i + 1);
                }
            }
            let mut ra = machine();
            let mut got: Vec<(u64, u64)> = Vec::new();
            for &o in &offsets {
                let r = read(o, size.min(stop - o), 1, Some((start, stop)), 1);
                got.extend(ra.advance(&r));
                got.push((r.offset, r.end));
            }
            got.sort_unstable();
            let mut covered = start;
            let mut fetched = 0;
            for &(a, b) in &got {
                prop_assert!(a >= start && b <= stop, "{a}..{b} outside {start}..{stop}");
                prop_assert!(a <= covered, "gap {covered}..{a}");
                covered = covered.max(b);
                fetched += b - a;
            }
            prop_assert_eq!(covered, stop);
            // Reads and fetches together: each byte once, but for reads that came after
            // their bytes were fetched (at most every read's bytes twice).
            prop_assert!(fetched <= 2 * (stop - start), "{fetched}");
        }

        /// One reader going through a block in order finds, from its fourth read on, every
        /// read's bytes fetched ahead of it, up to the block's end.
        #[test]
        fn a_reader_in_order_finds_its_reads_fetched_ahead(
            (start, stop) in block(),
            size in prop::sample::select(vec![4096u64, 16 << 10, 128 << 10, MIB]),
        ) {
            let mut ra = machine();
            let mut ahead = 0;
            for (i, o) in (start..stop).step_by(size as usize).enumerate() {
                let r = read(o, size.min(stop - o), 1, Some((start, stop)), 1);
                if i >= 3 {
                    prop_assert!(r.end <= ahead, "read {i} {r:?} past {ahead}");
                }
                if let Some((from, to)) = ra.advance(&r) {
                    prop_assert!(from <= ahead.max(r.end), "gap before {from}");
                    ahead = ahead.max(to);
                }
            }
        }

        /// Small reads scattered at random (far apart) never start a stream.
        #[test]
        fn scattered_small_reads_fetch_nothing(
            slots in prop::collection::btree_set(0..LEN / MIB, 1..40),
            order in any::<u64>(),
            n in 1u64..=4096,
        ) {
            let mut slots: Vec<u64> = slots.into_iter().collect();
            let k = slots.len();
            slots.rotate_left((order % k as u64) as usize);
            let mut ra = machine();
            for s in slots {
                let r = read(s * MIB + 100, n, 1, Some((0, LEN)), 1);
                prop_assert_eq!(ra.advance(&r), None);
            }
        }

        /// Two readers, each going through its own dataset (the blocks next to each other,
        /// the reads interleaved): what a read of one fetches stays in its own block.
        #[test]
        fn two_readers_stay_in_their_own_blocks(
            split in 1u64..63,
            size in prop::sample::select(vec![4096u64, 64 << 10, MIB]),
            first_b in any::<bool>(),
        ) {
            let (a, b) = ((0, split * MIB), (split * MIB, LEN));
            let mut ra = machine();
            let mut at = [a.0, b.0];
            let mut turn = usize::from(first_b);
            while at[0] < a.1 || at[1] < b.1 {
                let (ext, who) = if turn == 0 { (a, 0) } else { (b, 1) };
                turn ^= 1;
                if at[who] >= ext.1 {
                    continue;
                }
                let r = read(at[who], size.min(ext.1 - at[who]), who as u64 + 1, Some(ext),
                             who as u32 + 1);
                at[who] = r.end;
                if let Some((from, to)) = ra.advance(&r) {
                    prop_assert!(from >= ext.0 && to <= ext.1, "{r:?} -> {from}..{to}");
                }
            }
        }
    }
}
