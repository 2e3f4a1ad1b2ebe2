//! Readahead: data reads that follow each other through an object form a stream, fetched
//! ahead (see the parent module's docs for the rules).

use std::sync::Arc;

use super::super::pages::PAGE;
use super::super::source::DataHint;
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

/// One reader's progress through an object (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(super) struct Stream {
    /// Where the next read is expected.
    pub(super) next: u64,
    /// How far pages have been fetched (or claimed) ahead.
    pub(super) ahead: u64,
    pub(super) window: u64,
    pub(super) streak: u32,
    /// The dataset read last ([`DataHint::object`]).
    pub(super) object: u64,
    /// Whether the stream went on from one dataset into another.
    pub(super) crossed: bool,
    /// Where the stream's reads of the current dataset began.
    pub(super) object_start: u64,
    /// How much of the file the stream's previous dataset spanned: readahead across
    /// datasets reaches [`RA_CROSS`] of such spans ahead.
    pub(super) span: u64,
    /// The reader (thread) whose reads began the stream ([`super::super::source::reader`]): only
    /// its own reads carry the stream into another dataset.
    pub(super) reader: u32,
}

impl Inner {
    /// Follow the stream that a read of `offset..end` belongs to, and fetch ahead of it.
    pub(super) fn readahead(self: &Arc<Self>, offset: u64, end: u64, hint: &DataHint) {
        if let Some((from, to)) = self.advance(offset, end, hint) {
            let sent = self.fetch_behind(&[(from / PAGE, to.div_ceil(PAGE))], 0);
            self.count(|s| &s.readahead, sent);
        }
    }

    /// A new stream for a read of `offset..end` that continues none: a large read at the
    /// start of a dataset's block is a reader going through it from the start (cat, cp,
    /// dd), whose block is fetched ahead at once; the range to fetch. "At the start"
    /// allows two of the read's own lengths: the kernel sends a reader's first reads
    /// together, and they reach the FUSE threads in either order.
    pub(super) fn new_stream(
        &self,
        offset: u64,
        end: u64,
        hint: &DataHint,
    ) -> (Stream, Option<(u64, u64)>) {
        let mut s = Stream {
            next: end,
            ahead: end,
            window: RA_MIN,
            streak: 0,
            object: hint.object,
            crossed: false,
            object_start: offset,
            span: 0,
            reader: super::super::source::reader(),
        };
        let todo = match hint.extent {
            Some((start, stop))
                if offset >= start
                    && offset - start <= 2 * (end - offset)
                    && end - offset >= RA_FIRST
                    && stop > end =>
            {
                let target = (end + self.ra_first).min(stop);
                s.streak = 1;
                s.window = self.ra_max;
                s.ahead = target;
                Some((end, target))
            }
            _ => None,
        };
        (s, todo)
    }

    /// Update the streams for a read of `offset..end`; the range to fetch ahead, if any.
    pub(super) fn advance(&self, offset: u64, end: u64, hint: &DataHint) -> Option<(u64, u64)> {
        let mut streams = crate::sync::lock(&self.streams);
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
        let reader = super::super::source::reader();
        let hit = streams.iter().position(|s| {
            offset.saturating_add(back) >= s.next
                && offset <= s.next.max(s.ahead) + gap
                && (hint.object == s.object || reader == s.reader)
        });
        let Some(mut s) = hit.and_then(|i| streams.remove(i)) else {
            let (s, todo) = self.new_stream(offset, end, hint);
            streams.push_front(s);
            streams.truncate(RA_STREAMS);
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
            s.window = s.window.max(8 * (end - offset)).min(self.ra_max);
        }
        // Within one dataset, readahead stays inside its block; a chunked dataset's
        // chunks are fetched by the reads' own hints and the decoders' prefetch.
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
                    .min(self.ra_max),
            ),
            false => s.window,
        };
        if forward && (s.streak >= RA_STREAK || large) {
            let from = s.ahead.max(s.next);
            let target = (s.next + window).min(limit);
            // Send in batches of at least a quarter of a window, not one page per read (and
            // the rest, whatever its size, once the window reaches the limit). A quarter
            // rather than a half: the next batch goes out while three quarters of the
            // window are still ahead of the reader, so a reader as fast as the round trip
            // lets it be rarely finds the window empty.
            if target > from && (target - from >= window / 4 || target == limit) {
                todo = Some((from, target));
                s.ahead = target;
                s.window = (s.window * 2).min(self.ra_max);
            }
        }
        streams.push_front(s);
        todo
    }
}
