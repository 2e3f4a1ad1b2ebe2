//! Many small pieces of a file read as few source reads.
//!
//! A read of unfiltered chunks copies row runs of the chunks as stored in the file to their
//! places in the reader's buffer. Chunks of a few bytes each (a dataset written with tiny
//! chunks, in order, so that they lie back to back in the file) would cost one source read
//! per run, four million for a `cat` of four million chunks. Instead each run is handed to
//! a [`Gather`] as a piece (file address, place in the buffer, length), and the gather reads
//! pieces that lie together in the file as one run:
//!
//! * pieces that follow each other both in the file and in the buffer (a 1-D dataset's
//!   chunks, or whole-row chunks, stored in order) are read as one read straight into the
//!   buffer, however many;
//! * small pieces (under [`SMALL_PIECE`] bytes) that lie near each other in the file (gaps of
//!   at most [`MAX_GAP`]: other chunks' bytes, or an index node between two runs of chunks)
//!   but not in order in the buffer (a 2-D chunk's rows go to different rows of the image)
//!   are read as one span of at most [`MAX_SPAN`] bytes into a scratch buffer and copied
//!   out from there, every piece from its own address: the bytes in the gaps are dropped.
//!
//! Pieces join the run being gathered in the order they come (no sort: a read's chunks come
//! in grid order, mostly file order too); one that does not fit the run reads the run first.
//! Memory is bounded: the scratch buffer (at most [`MAX_SPAN`]) and the pieces of one run (at
//! most [`MAX_PIECES`]). The caller calls [`Gather::finish`] before using the buffer: until
//! then pieces may be unread.

use crate::error::{Error, Result};
use crate::io::Storage;

/// Pieces at least this long are read on their own (or as part of a run in order in the
/// buffer): copying them through the scratch buffer would cost more than the read saved.
pub(super) const SMALL_PIECE: usize = 4 << 10;

/// The largest gap in the file between two small pieces read as one span (one page: reading
/// it costs less than another system call, or another request).
pub(super) const MAX_GAP: u64 = 4 << 10;

/// The largest span read into the scratch buffer.
pub(super) const MAX_SPAN: u64 = 256 << 10;

/// The most pieces in one run (pieces of one byte, each apart from the one before in the
/// file or the buffer: a span of [`MAX_SPAN`] would otherwise list a quarter of a million).
const MAX_PIECES: usize = 16 << 10;

/// `len` bytes at file address `addr`, for `buf[dst..dst + len]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    addr: u64,
    dst: usize,
    len: usize,
}

/// The pieces of one read waiting to be read, as one run (see the module docs).
pub(super) struct Gather<'a> {
    st: &'a Storage,
    pieces: Vec<Piece>,
    /// The run's file span: `start..end` covers every piece.
    start: u64,
    end: u64,
    /// Every piece follows the one before in the file and in the buffer: the run reads
    /// straight into the buffer.
    in_order: bool,
    scratch: Vec<u8>,
    /// Source reads made, for tests.
    reads: usize,
}

impl<'a> Gather<'a> {
    /// A gather reading through `st`.
    pub(super) fn new(st: &'a Storage) -> Gather<'a> {
        Gather {
            st,
            pieces: Vec::new(),
            start: 0,
            end: 0,
            in_order: true,
            scratch: Vec::new(),
            reads: 0,
        }
    }

    /// Have `buf[dst..dst + len]` filled from file address `addr` (now, or by a later call);
    /// the caller has checked that the bytes lie inside the file and the buffer.
    pub(super) fn add(&mut self, buf: &mut [u8], addr: u64, dst: usize, len: usize) -> Result<()> {
        let p = Piece { addr, dst, len };
        let p_end = addr.saturating_add(len as u64);
        if let Some(last) = self.pieces.last_mut() {
            // Next in the file and in the buffer: one piece with the last. An in-order run
            // is one piece, however long; in the scratch buffer its span stays bounded.
            let follows = addr == last.addr.saturating_add(last.len as u64)
                && last.dst.checked_add(last.len) == Some(dst);
            if follows && (self.in_order || p_end - self.start <= MAX_SPAN) {
                last.len += len;
                self.end = self.end.max(p_end);
                return Ok(());
            }
            // Through the scratch buffer: a small piece near the run, which holds small
            // pieces only (or is short enough to copy).
            let small_run = !self.in_order || self.end - self.start <= SMALL_PIECE as u64;
            let span_end = self.end.max(p_end);
            let near = len < SMALL_PIECE
                && small_run
                && addr >= self.start
                && addr <= self.end.saturating_add(MAX_GAP)
                && span_end - self.start <= MAX_SPAN
                && self.pieces.len() < MAX_PIECES;
            if near {
                self.pieces.push(p);
                self.end = span_end;
                self.in_order = false;
                return Ok(());
            }
            self.flush(buf)?;
        }
        self.pieces.push(p);
        self.start = addr;
        self.end = p_end;
        self.in_order = true;
        Ok(())
    }

    /// Read every piece not read yet.
    pub(super) fn finish(&mut self, buf: &mut [u8]) -> Result<()> {
        self.flush(buf)
    }

    /// Source reads made so far.
    #[cfg(test)]
    pub(super) fn reads(&self) -> usize {
        self.reads
    }

    /// Read the run: straight into the buffer when in order, else its span into the scratch
    /// buffer and each piece out from there.
    fn flush(&mut self, buf: &mut [u8]) -> Result<()> {
        let Some(first) = self.pieces.first().copied() else {
            return Ok(());
        };
        self.reads += 1;
        let outside = || Error::corrupt("chunk", first.addr, "piece outside the read's buffer");
        let n = usize::try_from(self.end - self.start).map_err(|_| outside())?;
        if self.in_order {
            // In order: the pieces fill `first.dst..` back to back.
            let dst = first
                .dst
                .checked_add(n)
                .and_then(|e| buf.get_mut(first.dst..e))
                .ok_or_else(outside)?;
            self.st.read_data(self.start, dst, "chunk")?;
        } else {
            // At most MAX_SPAN bytes.
            self.scratch.resize(n, 0);
            self.st.read_data(self.start, &mut self.scratch, "chunk")?;
            for p in &self.pieces {
                let from = (p.addr - self.start) as usize;
                let src = self.scratch.get(from..from + p.len).ok_or_else(outside)?;
                let dst = p
                    .dst
                    .checked_add(p.len)
                    .and_then(|e| buf.get_mut(p.dst..e))
                    .ok_or_else(outside)?;
                dst.copy_from_slice(src);
            }
        }
        self.pieces.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Memory;
    use std::sync::Arc;

    fn file(n: usize) -> Vec<u8> {
        (0..n as u64).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// Gather `pieces` (addr, dst, len) of `bytes` into a buffer of `out` bytes: the buffer
    /// (zero where no piece goes) and the source reads made.
    fn gather(bytes: &[u8], out: usize, pieces: &[(u64, usize, usize)]) -> (Vec<u8>, usize) {
        let st = Storage::from_source(Arc::new(Memory::new(bytes.to_vec(), "test")));
        let mut buf = vec![0u8; out];
        let mut g = Gather::new(&st);
        for &(a, d, n) in pieces {
            g.add(&mut buf, a, d, n).unwrap();
        }
        g.finish(&mut buf).unwrap();
        (buf, g.reads())
    }

    fn expect(bytes: &[u8], out: usize, pieces: &[(u64, usize, usize)]) -> Vec<u8> {
        let mut want = vec![0u8; out];
        for &(a, d, n) in pieces {
            want[d..d + n].copy_from_slice(&bytes[a as usize..a as usize + n]);
        }
        want
    }

    #[test]
    fn pieces_in_order_are_one_read_however_long() {
        let bytes = file(1 << 20);
        let pieces: Vec<_> = (0..50_000)
            .map(|i| (100 + 16 * i, 16 * i as usize, 16))
            .collect();
        let (got, reads) = gather(&bytes, 800_000, &pieces);
        assert_eq!(got, expect(&bytes, 800_000, &pieces));
        assert_eq!(reads, 1);
    }

    #[test]
    fn near_small_pieces_share_a_span_and_gaps_are_dropped() {
        let bytes = file(1 << 20);
        // Two rows of 8 bytes per 16-byte chunk, to rows 1000 bytes apart in the buffer,
        // and a 2 KiB gap (an index node) after every 64 chunks.
        let mut pieces = Vec::new();
        let mut addr = 0u64;
        for c in 0..1000usize {
            if c % 64 == 0 {
                addr += 2048;
            }
            pieces.push((addr, 8 * c, 8));
            pieces.push((addr + 8, 8000 + 8 * c, 8));
            addr += 16;
        }
        let (got, reads) = gather(&bytes, 16_000, &pieces);
        assert_eq!(got, expect(&bytes, 16_000, &pieces));
        // 16 KiB of chunks and 16 gaps of 2 KiB: 48 KiB, one span.
        assert_eq!(reads, 1);
    }

    #[test]
    fn far_large_and_backward_pieces_are_read_apart() {
        let bytes = file(4 << 20);
        let span = MAX_SPAN as usize;
        let k = SMALL_PIECE;
        let pieces = [
            (0, 0, 16),
            // Beyond the gap.
            (16 + MAX_GAP + 1, 16, 16),
            // A large piece next in the file, but not in the buffer: read on its own.
            (16 + MAX_GAP + 17, 40, k),
            // Before the run's start.
            (8, 40 + k, 8),
            // Beyond the span.
            (8 + span as u64, 48 + k, 8),
            // Overlapping bytes already read by other pieces: still each its own.
            (20, 56 + k, 100),
        ];
        let (got, reads) = gather(&bytes, 200 + k, &pieces);
        assert_eq!(got, expect(&bytes, 200 + k, &pieces));
        assert_eq!(reads, 6);
    }

    #[test]
    fn a_long_run_in_order_is_not_copied_through_the_scratch() {
        let bytes = file(1 << 20);
        // 64 KiB in order, then a small piece near it out of order in the buffer: read apart.
        let mut pieces: Vec<_> = (0..4096).map(|i| (16 * i, 16 * i as usize, 16)).collect();
        pieces.push((65_536 + 100, 70_000, 16));
        let (got, reads) = gather(&bytes, 80_000, &pieces);
        assert_eq!(got, expect(&bytes, 80_000, &pieces));
        assert_eq!(reads, 2);
    }

    #[test]
    fn a_truncated_source_fails_the_read() {
        let bytes = file(1000);
        let st = Storage::from_source(Arc::new(Memory::new(bytes, "test")));
        let mut buf = vec![0u8; 64];
        let mut g = Gather::new(&st);
        g.add(&mut buf, 990, 0, 16).unwrap();
        assert!(g.finish(&mut buf).is_err());
    }
}
