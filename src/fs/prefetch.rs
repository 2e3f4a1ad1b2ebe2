//! Sequential prefetch: decoding the chunks a streaming reader will ask for next, ahead of it,
//! on a small pool of worker threads.
//!
//! Mechanism. Every `open` of a dataset gets its own file handle and a [`Stream`] record: the
//! offset where the next sequential read is expected, a streak of sequential reads, and how far
//! ahead work has been queued. A read counts as sequential when it starts near the expected
//! offset: up to [`BACK_SKIP`] before it (the kernel's readahead requests, served by several
//! FUSE threads, arrive slightly out of order) or [`FWD_SKIP`] after it (a reader that skips a
//! little keeps its stream, as mountpoint-s3's prefetcher does), both at most [`SKIP_READS`]
//! times the read's size, so that small random reads landing near each other by chance (4 KiB
//! preads over a region of a few chunks) do not count. Anything else resets the stream, so
//! random access never queues work beyond what it reads. While a stream lasts, its window
//! doubles from one piece up to a maximum, and the pieces between the last queued one and
//! `end + window` are queued, each to be read once by a worker.
//!
//! A read spanning several pieces, sequential or not, also queues its own pieces after the
//! first: the reader decodes the first while workers decode the others, and it then finds
//! them cached or waits for their decode. These jobs go to the front of the queue, ahead of
//! read-ahead. The kernel sends a `cat` of a small dataset as one 1 MiB request, whose
//! chunks would otherwise be decoded one after the other by one thread.
//!
//! On a remote source, where a worker's job would send its own request for its piece's
//! bytes, the read first names to the source the stored bytes of its own pieces and of its
//! read-ahead ([`Dataset::hint`]): they go out at once as few merged requests, which the
//! workers then wait for, rather than one request per piece, or a read-ahead request only
//! when a busy worker gets to its piece. The read's own chunks are noted to the source as
//! the reader's progress through the file (which its readahead across datasets follows),
//! the workers' reads are not. Read-ahead pieces there are larger ([`REMOTE_MIN_PIECE`]);
//! a read's own pieces stay one chunk each (at least [`MIN_PIECE`]), so that its chunks
//! decode in parallel. From a stream's second read on, the nodes of the chunk index are
//! named further on than its data, [`INDEX_AHEAD`] past the read-ahead
//! ([`Dataset::prepare_index`]): finding a chunk's place costs a read of the index node
//! above it, a round trip on a remote source, and naming a window's data would otherwise
//! wait for its index nodes first. Each part of the index is named once per stream. Not
//! on a stream's first read: a lone small read at the start of a dataset (a program
//! sniffing its first bytes) has the index of its own read-ahead named only, as its data
//! is; on a source that takes one range per GET (S3), the index nodes of 16 MiB of small
//! chunks are fetched with the data between them.
//!
//! A worker "reads" a piece through [`Dataset::read_in`] as a prefetch ([`ReadCtx::PREFETCH`]):
//! this decodes the piece's chunks into the shared [`crate::cache::ChunkCache`] without copying
//! them anywhere (the worker's buffer is never written, so its pages are never touched), whose
//! single-flight makes a reader that catches up wait for the decode in flight rather than run
//! it twice. A piece is one chunk's worth of image bytes (at least [`MIN_PIECE`]), aligned, so
//! for chunks spanning whole trailing dimensions each job decodes exactly one chunk and the
//! workers decode different chunks in parallel.
//!
//! Memory. Decoded chunks live only in the chunk cache, and a decode in flight holds a cache
//! reservation for its buffers, so prefetch never takes memory beyond the cache budget. The
//! window is capped at a quarter of
//! the cache's capacity (so read-ahead data is not evicted by its own successors before it is
//! read), and prefetch is off for a dataset whose piece does not fit twice in that quarter.
//! Only filtered chunked datasets are prefetched: unfiltered ones cost one `pread` of the HDF5
//! file, which the kernel's own readahead already serves; on a remote source, where each
//! read costs a request, unfiltered chunked datasets are prefetched too (their chunks
//! fetched into the source's page cache). The job queue is bounded; when it is
//! full, prefetch work is dropped (it is only a hint).
//!
//! The workers also decode the datasets that a reader walking a group's listing will open
//! next ([`super::siblings`], through [`Workers::decode_ahead`]), within the same budget
//! per walk as a stream's window.
//!
//! Counters ([`PrefetchStats`], relaxed atomics shown in the mount's statistics, see
//! [`super::stats`]): pieces queued, pieces dropped on a full queue, and image bytes the
//! workers went through (decoded, or found already in the cache).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::io::ReadCtx;
use crate::model::Dataset;
use crate::sync::{lock, wait};

/// How far before the expected offset a read may start and still continue its stream.
pub const BACK_SKIP: u64 = 4 << 20;
/// How far after the expected offset a read may start and still continue its stream.
pub const FWD_SKIP: u64 = 8 << 20;
/// The skips above, in units of the read's own size, for reads smaller than 1/16 of them.
pub const SKIP_READS: u64 = 16;
/// Smallest piece queued as one job: small chunks are batched so a job is worth its overhead.
pub const MIN_PIECE: u64 = 256 << 10;
/// Most read-ahead per stream, whatever the cache size.
pub const MAX_WINDOW: u64 = 64 << 20;
/// Bytes of a worker's read buffer (pieces are read through it in slices). It is allocated
/// zeroed and never written (see [`ReadCtx::prefetch`]), so it costs no memory.
const SINK_BYTES: usize = 1 << 20;
/// Smallest piece on a remote source, where each worker's job sends its own request for its
/// piece's bytes: larger pieces keep those requests few and long.
pub const REMOTE_MIN_PIECE: u64 = 1 << 20;
/// Image bytes beyond a stream's read-ahead whose chunk index is named on a remote source
/// (see [`Queued::index`]). Index nodes are small beside the data they index: a v1 B-tree
/// leaf of 32 to 64 chunks of 4 KiB indexes 128 to 256 KiB, and the remote bench's file of
/// 4,096 such chunks has the leaves of its whole index named at once. At most
/// [`crate::layout::chunk_index::MAX_PREPARED`] nodes are named a level (chunks of 1 KiB or
/// less reach it); the lookups of a window fetch the rest. Not more: the nodes are kept in
/// the data page cache, from which what is named too far ahead is evicted before use.
pub const INDEX_AHEAD: u64 = 16 << 20;
/// Most jobs waiting; more are dropped. Four windows of [`MAX_WINDOW`] in the smallest
/// pieces; a job waiting costs a boxed closure.
const MAX_QUEUED: usize = 1024;
/// Most streams remembered; beyond it, handles get no stream (reads still work).
const MAX_STREAMS: usize = 4096;

type Job = Box<dyn FnOnce() + Send>;

/// Sequential-read state of one open file handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Where the next sequential read is expected.
    next: u64,
    /// Sequential reads in a row.
    streak: u32,
    /// Image offset up to which pieces have been queued.
    ahead: u64,
    /// Image offset up to which the chunk index has been named (see [`Queued::index`]).
    indexed: u64,
    /// Current read-ahead window in bytes.
    window: u64,
    /// Bytes of one piece (one job) of read-ahead.
    piece: u64,
    /// Bytes of one of a read's own pieces (one job): [`Stream::piece`], or smaller on a
    /// remote source, whose read-ahead pieces are larger.
    own_piece: u64,
    /// Largest window.
    max_window: u64,
    /// Image length.
    len: u64,
}

/// What one read queues: its own pieces after its first (needed now) and read-ahead.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Queued {
    pub own: Vec<(u64, u64)>,
    pub ahead: Vec<(u64, u64)>,
    /// On a remote source, from a stream's second read on, the image range whose chunk
    /// index to name: from the read (the first time) or from where the last one stopped,
    /// to [`INDEX_AHEAD`] beyond the read-ahead, so that later windows' index nodes are
    /// fetched while this window's data is, and naming their data costs no round trip.
    pub index: Option<(u64, u64)>,
}

impl Stream {
    /// A stream over an image of `len` bytes, queued in pieces of `piece` bytes with at most
    /// `max_window` bytes ahead. Expects its first read at offset 0.
    pub fn new(len: u64, piece: u64, max_window: u64) -> Stream {
        let piece = piece.max(1);
        Stream {
            next: 0,
            streak: 0,
            ahead: 0,
            indexed: 0,
            window: piece,
            piece,
            own_piece: piece,
            max_window: max_window.max(piece),
            len,
        }
    }

    /// The same stream with a read's own pieces of `own_piece` bytes (at most a read-ahead
    /// piece): a remote source reads ahead in large pieces, so that its requests stay few
    /// and long, but decodes a read's own chunks one to a job.
    pub fn with_own_piece(mut self, own_piece: u64) -> Stream {
        self.own_piece = own_piece.clamp(1, self.piece);
        self
    }

    /// Record a read of `size` bytes at `offset`; the image ranges, piece-aligned, to queue.
    pub fn on_read(&mut self, offset: u64, size: u64) -> Queued {
        let end = offset.saturating_add(size).min(self.len);
        let reach = size.saturating_mul(SKIP_READS);
        let sequential = offset >= self.next.saturating_sub(BACK_SKIP.min(reach))
            && offset <= self.next.saturating_add(FWD_SKIP.min(reach));
        // The first own piece to queue: the one after the piece holding `offset` (the
        // reader decodes that one itself). The read's own pieces from there are needed now,
        // not guessed, so they are queued for any read; the workers decode them while the
        // reader decodes the first, and the reader then finds them cached or waits for their
        // decode.
        let first = (offset / self.own_piece)
            .saturating_add(1)
            .saturating_mul(self.own_piece);
        if !sequential {
            self.streak = 0;
            self.next = end;
            self.window = self.piece;
            let own = pieces(first, end, self.own_piece, self.len);
            self.ahead = own.last().map_or(0, |&(o, n)| o + n);
            self.indexed = end;
            return Queued {
                own,
                ahead: Vec::new(),
                index: None,
            };
        }
        if end <= self.next {
            // An earlier request arriving late (or a reader stepping back): the stream goes
            // on, but only reads that move it forward count towards its streak, so reads
            // walking backwards or landing near each other at random queue nothing. Nor are
            // the late read's own pieces queued: which of them the later read's queueing
            // covered is not known, and each piece is queued once.
            return Queued::default();
        }
        self.streak = self.streak.saturating_add(1);
        self.next = end;
        if self.streak > 1 {
            self.window = self.window.saturating_mul(2).min(self.max_window);
        }
        let target = self.next.saturating_add(self.window).min(self.len);
        // Own pieces (those starting before the read's end) not queued yet, then read-ahead
        // from where they stop.
        let from = self.ahead.max(first);
        let own = pieces(from, end, self.own_piece, self.len);
        let from = own.last().map_or(from, |&(o, n)| o + n);
        let ahead = pieces(from, target, self.piece, self.len);
        if let Some(&(o, n)) = ahead.last().or(own.last()) {
            self.ahead = self.ahead.max(o + n);
        }
        // The index INDEX_AHEAD beyond the read-ahead, once the stream has gone on.
        let mut index = None;
        if self.streak > 1 {
            let index_to = target.saturating_add(INDEX_AHEAD).min(self.len);
            let index_from = self.indexed.max(offset);
            index = (index_to > index_from).then_some((index_from, index_to));
            self.indexed = self.indexed.max(index_to);
        }
        Queued { own, ahead, index }
    }
}

/// The pieces of `piece` bytes (at least 1) of an image of `len` bytes, from `from` (aligned
/// on a piece of its size) on, that start before `to`; the last one ends the image.
fn pieces(from: u64, to: u64, piece: u64, len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut p = from;
    while p < to.min(len) {
        let n = piece.min(len - p);
        out.push((p, n));
        p += n;
    }
    out
}

/// A fixed set of worker threads running queued jobs.
#[derive(Debug)]
struct Pool {
    shared: Arc<PoolShared>,
}

#[derive(Debug, Default)]
struct PoolShared {
    queue: Mutex<VecDeque<JobBox>>,
    ready: Condvar,
}

/// `Job` with a `Debug` impl, so the structures holding it can derive `Debug`.
struct JobBox(Job);

impl std::fmt::Debug for JobBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobBox")
    }
}

impl Pool {
    fn new(workers: usize) -> Pool {
        let shared = Arc::new(PoolShared::default());
        for i in 0..workers {
            let s = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("h5-prefetch-{i}"))
                .spawn(move || loop {
                    let job = {
                        let mut q = lock(&s.queue);
                        loop {
                            if let Some(j) = q.pop_front() {
                                break j;
                            }
                            q = wait(&s.ready, q);
                        }
                    };
                    // A panicking job must not take the worker with it.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.0));
                });
            if spawned.is_err() {
                // Fewer workers (or none: jobs then wait forever and prefetch does nothing).
                break;
            }
        }
        Pool { shared }
    }

    /// Queue `job` unless the queue is full: at the front (a reader waits for it now) or at
    /// the back (read-ahead).
    fn submit(&self, job: Job, front: bool) -> bool {
        let mut q = lock(&self.shared.queue);
        if q.len() >= MAX_QUEUED {
            return false;
        }
        if front {
            q.push_front(JobBox(job));
        } else {
            q.push_back(JobBox(job));
        }
        drop(q);
        self.shared.ready.notify_one();
        true
    }
}

thread_local! {
    /// The buffer a worker "reads" pieces into; never written.
    static SINK: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A snapshot of the prefetch counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefetchStats {
    /// Pieces queued for the workers.
    pub jobs: u64,
    /// Pieces not queued because the queue was full.
    pub dropped: u64,
    /// Image bytes the workers read (into the cache).
    pub bytes: u64,
    /// Steps of listing-order walks ([`super::siblings`]): sent to its naming thread, and
    /// handled there (equal when it is idle). Filled in by the filesystem, not here.
    pub walk_steps: u64,
    pub walk_done: u64,
}

#[derive(Debug, Default)]
struct Counters {
    jobs: AtomicU64,
    dropped: AtomicU64,
    bytes: AtomicU64,
}

/// Per-handle streams and the worker pool.
#[derive(Debug)]
pub struct Prefetcher {
    workers: Arc<Workers>,
    streams: Mutex<HashMap<u64, Stream>>,
    next_fh: AtomicU64,
}

/// The worker pool, its counters and the read-ahead budget: what queues decodes, shared
/// with the listing-order readahead ([`super::siblings`]) through [`Prefetcher::workers`].
#[derive(Debug)]
pub struct Workers {
    pool: Pool,
    counters: Arc<Counters>,
    /// Read-ahead budget per stream: a quarter of the chunk cache, at most [`MAX_WINDOW`].
    budget: u64,
}

impl Prefetcher {
    /// Workers sized to the cores; `cache_bytes` is the chunk cache capacity.
    pub fn new(cache_bytes: u64) -> Prefetcher {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
        Prefetcher {
            workers: Arc::new(Workers {
                pool: Pool::new(workers),
                counters: Arc::default(),
                budget: (cache_bytes / 4).min(MAX_WINDOW),
            }),
            streams: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    /// The workers, for others that queue decodes.
    pub fn workers(&self) -> Arc<Workers> {
        self.workers.clone()
    }

    /// A new file handle for `ds`, with a stream if the dataset is worth prefetching.
    pub fn open(&self, ds: &Dataset) -> u64 {
        let fh = self.new_handle();
        if let Some(stream) = self.stream_for(ds) {
            let mut map = lock(&self.streams);
            if map.len() < MAX_STREAMS {
                map.insert(fh, stream);
            }
        }
        fh
    }

    /// A new file handle number, with no stream kept here (the caller keeps its own, see
    /// [`Prefetcher::stream_for`]).
    pub fn new_handle(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    /// A stream for a new handle of `ds`, if the dataset is worth prefetching. On a remote
    /// source, larger read-ahead pieces (see the module documentation).
    pub fn stream_for(&self, ds: &Dataset) -> Option<Stream> {
        let chunk = chunk_image_bytes(ds)?;
        let own = chunk.max(MIN_PIECE);
        let piece = if ds.is_remote() {
            chunk.max(REMOTE_MIN_PIECE)
        } else {
            own
        };
        if piece.saturating_mul(2) > self.workers.budget {
            return None;
        }
        Some(Stream::new(ds.len(), piece, self.workers.budget).with_own_piece(own))
    }

    /// Note a read of `size` bytes at `offset` of `ds` on the caller's own `stream`, queueing
    /// any read-ahead it calls for.
    pub fn on_read_stream(
        &self,
        ctx: ReadCtx,
        stream: &Mutex<Stream>,
        ds: &Arc<Dataset>,
        offset: u64,
        size: u64,
    ) {
        let pieces = lock(stream).on_read(offset, size);
        self.workers.queue(ctx, ds, pieces, offset, size);
    }

    /// Forget handle `fh`.
    pub fn release(&self, fh: u64) {
        lock(&self.streams).remove(&fh);
    }

    /// The counters now.
    pub fn stats(&self) -> PrefetchStats {
        let c = &self.workers.counters;
        PrefetchStats {
            jobs: c.jobs.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            walk_steps: 0,
            walk_done: 0,
        }
    }

    /// Note a read of `size` bytes at `offset` through handle `fh` of `ds`, made for `ctx`,
    /// queueing any read-ahead it calls for.
    pub fn on_read(&self, ctx: ReadCtx, fh: u64, ds: &Arc<Dataset>, offset: u64, size: u64) {
        let pieces = match lock(&self.streams).get_mut(&fh) {
            Some(s) => s.on_read(offset, size),
            None => return,
        };
        self.workers.queue(ctx, ds, pieces, offset, size);
    }
}

impl Workers {
    /// The read-ahead budget: a quarter of the chunk cache, at most [`MAX_WINDOW`].
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Queue the decode of image bytes `from..to` of `ds` as read-ahead (at the back of the
    /// queue), one job per chunk's worth as for a read's own pieces, in whole pieces from
    /// the one `from` falls in. `None` when the dataset is not one to decode ahead (see
    /// [`Prefetcher::stream_for`]); else how far from its start it is now queued: the end of
    /// the last piece (or `from`, when `to` is not past it). Nothing is named to the source
    /// here: the caller has named those bytes already.
    pub fn decode_ahead(&self, ds: &Arc<Dataset>, from: u64, to: u64) -> Option<u64> {
        let chunk = chunk_image_bytes(ds)?;
        let piece = chunk.max(MIN_PIECE);
        if piece.saturating_mul(2) > self.budget {
            return None;
        }
        let len = ds.len();
        let to = to.min(len);
        if from >= to {
            return Some(from);
        }
        let queued = pieces(from / piece * piece, to, piece, len);
        self.submit(ds, queued.iter().map(|&p| (p, false)).collect());
        Some(to.div_ceil(piece).saturating_mul(piece).min(len))
    }

    /// Queue one decode job per piece `(offset, length)` of `ds`: the read's own pieces at
    /// the front of the queue, in order (a reader waits for them), read-ahead at the back.
    /// On a remote source, the stored bytes of the read of `size` bytes at `offset` and of
    /// the read-ahead are named first, so that they go out at once as few merged requests,
    /// before any worker asks for its piece's own (and not only when a busy worker gets to
    /// a read-ahead piece).
    fn queue(&self, ctx: ReadCtx, ds: &Arc<Dataset>, pieces: Queued, offset: u64, size: u64) {
        let Queued { own, ahead, index } = pieces;
        if ds.is_remote() {
            // Errors are the reader's to report when it reads. The read's own chunks first;
            // then the index ahead, with the nodes the read-ahead's lookups below need, so
            // that those go out together.
            if !own.is_empty() {
                let _ = ds.hint(offset, size, Some(ctx));
            }
            if let Some((a, b)) = index {
                let _ = ds.prepare_index(a, b - a);
            }
            if let (Some(&(a, _)), Some(&(b, n))) = (ahead.first(), ahead.last()) {
                let _ = ds.hint(a, (b + n).saturating_sub(a), None);
            }
        }
        let order = own
            .iter()
            .rev()
            .map(|&p| (p, true))
            .chain(ahead.iter().map(|&p| (p, false)));
        self.submit(ds, order.collect());
    }

    /// Queue one decode job per piece `((offset, length), front)` of `ds`, at the front of
    /// the queue or at its back; the rest are dropped (and counted) once it is full.
    fn submit(&self, ds: &Arc<Dataset>, pieces: Vec<((u64, u64), bool)>) {
        let total = pieces.len() as u64;
        for (queued, ((off, n), front)) in pieces.into_iter().enumerate() {
            let ds = ds.clone();
            let counters = self.counters.clone();
            let job: Job = Box::new(move || {
                SINK.with(|s| {
                    let mut s = s.borrow_mut();
                    if s.len() < SINK_BYTES {
                        *s = vec![0; SINK_BYTES];
                    }
                    // A piece larger than the sink is read in slices: the first decodes the
                    // chunk into the cache, the others are cache hits.
                    let mut done = 0u64;
                    while done < n {
                        let k = (n - done).min(SINK_BYTES as u64) as usize;
                        // Errors are the reader's to report when it gets there.
                        match ds.read_in(ReadCtx::PREFETCH, off + done, &mut s[..k]) {
                            Ok(got) if got > 0 => done += got as u64,
                            _ => break,
                        }
                    }
                    counters.bytes.fetch_add(done, Ordering::Relaxed);
                });
            });
            if !self.pool.submit(job, front) {
                let dropped = total - queued as u64;
                self.counters.dropped.fetch_add(dropped, Ordering::Relaxed);
                break;
            }
            self.counters.jobs.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Image bytes of one chunk of `ds`, or `None` if `ds` is not worth prefetching (not
/// chunked, or no filters and local: served by `pread` and the kernel's readahead).
fn chunk_image_bytes(ds: &Dataset) -> Option<u64> {
    let info = &ds.info;
    if info.layout != crate::model::LayoutKind::Chunked
        || (info.filters.is_empty() && !ds.is_remote())
        || ds.is_empty()
    {
        return None;
    }
    let npoints = info.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
    let es = ds.len().checked_div(npoints)?;
    let chunk = info
        .chunk_shape
        .as_ref()?
        .iter()
        .try_fold(es, |a, &d| a.checked_mul(d))?;
    Some(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    impl Queued {
        /// Everything queued, own pieces first.
        fn all(self) -> Vec<(u64, u64)> {
            self.own.into_iter().chain(self.ahead).collect()
        }
    }

    #[test]
    fn sequential_reads_open_a_growing_window() {
        let mut s = Stream::new(100 * M, M, 8 * M);
        // First read at 0: the next piece is queued.
        assert_eq!(s.on_read(0, M).all(), vec![(M, M)]);
        // The window doubles: 2 MiB past the read end, minus what is queued.
        assert_eq!(s.on_read(M, M).all(), vec![(2 * M, M), (3 * M, M)]);
        let q = s.on_read(2 * M, M).all();
        assert_eq!(q.first(), Some(&(4 * M, M)));
        assert_eq!(q.last(), Some(&(6 * M, M)));
        // Capped at the maximum window.
        for i in 3..20 {
            let q = s.on_read(i * M, M).all();
            assert!(q.iter().all(|&(o, _)| o + M <= (i + 1) * M + 8 * M));
        }
    }

    #[test]
    fn the_chunk_index_is_named_beyond_the_read_ahead_from_the_second_read_each_part_once() {
        let mut s = Stream::new(100 * M, M, 8 * M);
        // A first read alone names no index ahead.
        let q = s.on_read(0, M);
        assert_eq!(q.ahead, vec![(M, M)]);
        assert_eq!(q.index, None);
        // The second: from the read to INDEX_AHEAD past its read-ahead (to 4 MiB).
        let q = s.on_read(M, M);
        assert_eq!(q.ahead.last(), Some(&(3 * M, M)));
        assert_eq!(q.index, Some((M, 20 * M)));
        assert_eq!(INDEX_AHEAD, 16 * M);
        // A late read names nothing.
        assert_eq!(s.on_read(0, M).index, None);
        // The next ones: from where the last stopped to as far past their read-ahead
        // (7 MiB, then 12 MiB, as the window doubles).
        assert_eq!(s.on_read(2 * M, M).index, Some((20 * M, 23 * M)));
        assert_eq!(s.on_read(3 * M, M).index, Some((23 * M, 28 * M)));
        // Clipped to the image, after which nothing is left to name.
        let mut e = Stream::new(3 * M, M, 8 * M);
        assert_eq!(e.on_read(0, M).index, None);
        assert_eq!(e.on_read(M, M).index, Some((M, 3 * M)));
        assert_eq!(e.on_read(2 * M, M).index, None);
        // A jump resets the stream and names no index, nor does the new stream's first
        // read; its second names from itself.
        assert_eq!(s.on_read(60 * M, 4096).index, None);
        assert_eq!(s.on_read(60 * M + 4096, M).index, None);
        let q = s.on_read(61 * M + 4096, M);
        assert_eq!(q.index.map(|(a, _)| a), Some(61 * M + 4096));
    }

    #[test]
    fn small_skips_keep_the_stream_and_random_reads_queue_nothing() {
        let mut s = Stream::new(1000 * M, M, 8 * M);
        s.on_read(0, M);
        s.on_read(M, M);
        // Out-of-order arrival of a slightly earlier request keeps the stream (and queues
        // nothing, nor counts).
        assert!(s.on_read(0, M).all().is_empty());
        assert_eq!(s.streak, 2);
        // A forward skip within the limit continues it: the window doubles to 4 MiB past
        // the read's end, queued from there since the pieces before it were skipped.
        assert_eq!(
            s.on_read(5 * M, M).all(),
            vec![(6 * M, M), (7 * M, M), (8 * M, M), (9 * M, M)]
        );
        assert_eq!(s.streak, 3);
        assert_eq!(s.ahead, 10 * M);
        // Small reads stepping backwards never queue.
        let mut b = Stream::new(1000 * M, M, 8 * M);
        for k in (0..40u64).rev() {
            assert!(b.on_read(400 * M + k * 8192, 4096).all().is_empty(), "{k}");
        }
        // A far jump resets; the next far jumps never queue.
        for off in [500 * M, 100 * M, 900 * M, 300 * M] {
            assert!(s.on_read(off, 4096).all().is_empty());
        }
        // Two reads in a row after a jump start a new stream.
        assert!(!s.on_read(300 * M + 4096, M).all().is_empty());
        // Small reads near each other but not adjacent do not.
        s.on_read(600 * M, 4096);
        assert!(s.on_read(600 * M + 200_000, 4096).all().is_empty());
        assert_eq!(s.streak, 0);
        assert!(!s.on_read(600 * M + 204_096, 4096).all().is_empty());
    }

    #[test]
    fn a_read_spanning_pieces_queues_those_after_its_first_even_at_random() {
        const K: u64 = 256 << 10;
        let mut s = Stream::new(100 * M, K, 8 * M);
        // A first read of 1 MiB over four pieces of 256 KiB: the reader decodes the first,
        // workers the three others, and one piece of window beyond the read.
        assert_eq!(
            s.on_read(0, M).all(),
            vec![(K, K), (2 * K, K), (3 * K, K), (M, K)]
        );
        // A read elsewhere, breaking the stream: its own pieces after the first, no more.
        assert_eq!(
            s.on_read(50 * M + 100, M).all(),
            vec![
                (50 * M + K, K),
                (50 * M + 2 * K, K),
                (50 * M + 3 * K, K),
                (51 * M, K)
            ]
        );
        assert_eq!(s.streak, 0);
        // Reads inside one piece, at random, queue nothing.
        for off in [10 * M, 70 * M + 5, 30 * M + K - 4096] {
            assert!(s.on_read(off, 4096).all().is_empty(), "{off}");
        }
        // The read that continues the stream queues from the piece after its first, beyond
        // what was queued already.
        let mut t = Stream::new(100 * M, K, 8 * M);
        t.on_read(0, M);
        let q = t.on_read(M, M).all();
        assert_eq!(q.first(), Some(&(M + K, K)), "{q:?}");
    }

    #[test]
    fn own_pieces_come_apart_from_read_ahead_and_may_be_smaller() {
        const K: u64 = 256 << 10;
        let mut s = Stream::new(100 * M, K, 8 * M);
        let q = s.on_read(0, M);
        assert_eq!(q.own, vec![(K, K), (2 * K, K), (3 * K, K)]);
        assert_eq!(q.ahead, vec![(M, K)]);
        // A remote source: read-ahead in pieces of 1 MiB, a read's own in chunks of 256 KiB.
        let mut r = Stream::new(100 * M, M, 8 * M).with_own_piece(K);
        let q = r.on_read(0, M);
        assert_eq!(q.own, vec![(K, K), (2 * K, K), (3 * K, K)]);
        assert_eq!(q.ahead, vec![(M, M)]);
        // The next read: its own pieces were queued as read-ahead already; the window
        // doubles from the read's end.
        let q = r.on_read(M, M);
        assert!(q.own.is_empty(), "{q:?}");
        assert_eq!(q.ahead, vec![(2 * M, M), (3 * M, M)]);
        // A read elsewhere: only its own pieces after its first.
        let q = r.on_read(50 * M, 2 * K);
        assert_eq!(q.own, vec![(50 * M + K, K)]);
        assert!(q.ahead.is_empty());
        // Own pieces are never larger than read-ahead ones.
        let t = Stream::new(100 * M, K, 8 * M).with_own_piece(M);
        assert_eq!(t.own_piece, K);
    }

    #[test]
    fn pieces_stay_inside_the_image() {
        let mut s = Stream::new(3 * M + 5, M, 64 * M);
        let mut all = s.on_read(0, M).all();
        all.extend(s.on_read(M, M).all());
        all.extend(s.on_read(2 * M, M).all());
        assert_eq!(all, vec![(M, M), (2 * M, M), (3 * M, 5)]);
        assert!(s.on_read(3 * M, M).all().is_empty());
    }
}
