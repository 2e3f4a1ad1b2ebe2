//! One remote object: its reads through the shared page cache, its GETs, and the hints the
//! layers above give it.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::super::pages::{Claim, Class, PageCache, PAGE};
use super::super::source::{ByteSource, DataHint, ReadCtx, RemoteSource, RequestCounts};
use super::context::{counts_of, RemoteContext, RemoteStats};
use super::error::{bad_url, classify, io_err, out_of_time, remote_err, RemoteKind};
use super::multirange::Multi;
use super::origin::RemoteOrigin;
use super::readahead::Readahead;
use super::{
    is_prefix, RemoteOptions, DIRECT_READ, FIRST_GET, MERGE_SPAN, META_UNIT, MULTI_RANGES,
    MULTI_RUN, PART, RA_MAX,
};

pub(super) struct Inner {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) path: StorePath,
    pub(super) url: String,
    pub(super) multi: Option<Multi>,
    pub(super) len: u64,
    pub(super) etag: Option<String>,
    /// Its number in the shared page cache.
    pub(super) obj: u64,
    pub(super) pages: Arc<PageCache>,
    /// What the objects opened with the same options share (the page cache above is its).
    pub(super) shared: RemoteContext,
    /// The file's own page size, when larger than [`PAGE`] (0: none): metadata misses fetch
    /// whole pages of it.
    pub(super) meta_unit: AtomicU64,
    /// The readers' streams through the object (windows up to half the data budget).
    pub(super) readahead: Mutex<Readahead>,
    pub(super) stats: RemoteStats,
    /// The longest a request may take, retries included: the retry bound and one request's
    /// timeout.
    pub(super) bound: Duration,
    /// Metadata ranges at most this many pages apart are merged into one GET when the
    /// server answers one range per GET ([`RemoteOptions::merge_gap`]).
    pub(super) merge_gap: u64,
}

/// A remote object (see the module docs).
pub struct Remote {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.inner.url)
            .field("len", &self.inner.len)
            .finish()
    }
}

impl Inner {
    /// Add `n` to one counter of this object and of the process.
    pub(super) fn count(&self, pick: fn(&RemoteStats) -> &AtomicU64, n: u64) {
        pick(&self.stats).fetch_add(n, Ordering::Relaxed);
        pick(self.shared.stats()).fetch_add(n, Ordering::Relaxed);
    }

    /// The time a request may take, retries included: the retry bound and one request's
    /// timeout. A read never waits longer for its bytes (see [`Inner::get_each`]).
    pub(super) fn deadline(&self) -> Instant {
        Instant::now() + self.bound
    }

    /// One ranged GET (with `If-Match`), once a request slot is free: the answer's bytes go to
    /// `each` as they arrive (which may refuse them: the answer is then in error). Fails at
    /// `deadline` wherever it is then: waiting for a slot, retrying, or reading the body.
    pub(super) async fn get_each(
        &self,
        range: Range<u64>,
        deadline: Instant,
        each: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> std::io::Result<()> {
        let shown = format!("GET bytes {}-{}", range.start, range.end.saturating_sub(1));
        let got =
            tokio::time::timeout_at(deadline.into(), self.get_each_now(range, &shown, each)).await;
        match got {
            Ok(r) => r,
            Err(_) => {
                self.count(|s| &s.failures, 1);
                Err(out_of_time(&self.url, &shown, self.bound))
            }
        }
    }

    async fn get_each_now(
        &self,
        range: Range<u64>,
        shown: &str,
        mut each: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> std::io::Result<()> {
        use futures_util::StreamExt;
        let _slot = self
            .shared
            .requests()
            .acquire()
            .await
            .map_err(|e| io_err(&self.url, "GET", e))?;
        let want = range.end - range.start;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: self.etag.clone(),
            ..Default::default()
        };
        self.count(|s| &s.gets, 1);
        log::debug!("{}: {shown}", self.url);
        let refuse = |why: String| {
            self.count(|s| &s.failures, 1);
            remote_err(RemoteKind::Refused, &self.url, shown, why)
        };
        let failed = |e: object_store::Error| {
            self.count(|s| &s.failures, 1);
            if matches!(e, object_store::Error::Precondition { .. }) {
                self.count(|s| &s.changed, 1);
            }
            classify(&self.url, shown, e)
        };
        let mut stream = match self.store.get_opts(&self.path, opts).await {
            Ok(r) => r.into_stream(),
            Err(e) => return Err(failed(e)),
        };
        let mut got = 0u64;
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(failed)?;
            got += piece.len() as u64;
            if got > want {
                return Err(refuse(format!(
                    "more than the {want} bytes asked for in the answer"
                )));
            }
            each(&piece).map_err(refuse)?;
        }
        if got != want {
            return Err(refuse(format!("{got} bytes in the answer")));
        }
        self.count(|s| &s.bytes, want);
        Ok(())
    }

    /// One ranged GET (with `If-Match`), once a request slot is free, its answer written
    /// into `dst` (as long as the range: [`Inner::get_each`] refuses an answer of more bytes
    /// than the range, or of fewer).
    pub(super) async fn get_into(
        &self,
        range: Range<u64>,
        deadline: Instant,
        dst: &mut [u8],
    ) -> std::io::Result<()> {
        let mut at = 0usize;
        let want = dst.len();
        self.get_each(range, deadline, |b| {
            let to = at
                .checked_add(b.len())
                .and_then(|end| dst.get_mut(at..end))
                .ok_or_else(|| format!("more than the {want} bytes asked for"))?;
            to.copy_from_slice(b);
            at += b.len();
            Ok(())
        })
        .await
    }

    /// The bytes of `range`: one GET, or parallel GETs of [`PART`] bytes for a long range,
    /// each answer written where its bytes go in the one buffer returned.
    pub(super) async fn get(
        &self,
        range: Range<u64>,
        deadline: Instant,
    ) -> std::io::Result<Vec<u8>> {
        let n =
            usize::try_from(range.end - range.start).map_err(|e| io_err(&self.url, "GET", e))?;
        if n as u64 <= PART {
            // Room for the whole answer at once ([`Inner::get_each`] refuses more).
            let mut out = Vec::with_capacity(n);
            self.get_each(range, deadline, |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .await?;
            return Ok(out);
        }
        let mut out = vec![0u8; n];
        let parts = out
            .chunks_mut(PART as usize)
            .zip((range.start..range.end).step_by(PART as usize))
            .map(|(dst, at)| self.get_into(at..at + dst.len() as u64, deadline, dst));
        futures_util::future::try_join_all(parts).await?;
        Ok(out)
    }

    /// Fetch the page runs `wanted` (page ranges) in the background, merged across gaps of
    /// `gap` pages into GETs of at most [`MERGE_SPAN`] gaps (or [`PART`], if longer);
    /// returns the GETs sent. Behind an HTTP server that answers several ranges at once,
    /// short runs go [`MULTI_RANGES`] to a GET.
    pub(super) fn fetch_behind(self: &Arc<Self>, wanted: &[(u64, u64)], gap: u64) -> u64 {
        let longest = (PART / PAGE).max(gap.saturating_mul(MERGE_SPAN));
        let claims = self.pages.claim(self.obj, wanted, gap, longest);
        let Ok(rt) = self.shared.runtime() else {
            for c in &claims {
                self.pages
                    .complete(c, self.len, Err(std::io::Error::other("no runtime")));
            }
            return 0;
        };
        let mut sent = 0;
        let mut batch: Vec<Claim> = Vec::new();
        let mut batch_bytes = 0;
        let flush = |batch: &mut Vec<Claim>, sent: &mut u64| {
            if batch.is_empty() {
                return;
            }
            *sent += 1;
            let me = self.clone();
            let mut b = std::mem::take(batch);
            if b.len() == 1 {
                // One run: an ordinary GET, through object_store.
                rt.spawn(me.fetch_one(b.remove(0), self.deadline()));
            } else {
                rt.spawn(me.fetch_batch(b));
            }
        };
        for c in claims {
            let n = c.range(self.len).end - c.range(self.len).start;
            if self.multi_on() && n <= MULTI_RUN {
                if batch.len() == MULTI_RANGES || batch_bytes + n > PART {
                    flush(&mut batch, &mut sent);
                    batch_bytes = 0;
                }
                batch_bytes += n;
                batch.push(c);
                continue;
            }
            sent += 1;
            rt.spawn(self.clone().fetch_one(c, self.deadline()));
        }
        flush(&mut batch, &mut sent);
        sent
    }

    /// Fetch the pages of claim `c` with one GET of one range, each page kept (and its
    /// readers woken) as its bytes arrive.
    pub(super) async fn fetch_one(self: Arc<Self>, c: Claim, deadline: Instant) {
        let range = c.range(self.len);
        let mut fill = self.pages.filling(c, self.len);
        let got = self.get_each(range, deadline, |b| fill.push(b)).await;
        fill.finish(got);
    }
}

impl Remote {
    /// Open the object at `url` with one HEAD (its length and ETag).
    pub fn open(url: &str, opts: &RemoteOptions) -> std::io::Result<Remote> {
        if is_prefix(url) {
            return Err(bad_url(url, "names a prefix, not an object"));
        }
        let (origin, path) = RemoteOrigin::of(url, opts)?;
        origin.object(&path)
    }

    /// An object whose length and ETag are known already (from a listing): no request.
    pub(super) fn with_meta(
        store: Arc<dyn ObjectStore>,
        multi: Option<Multi>,
        path: StorePath,
        url: &str,
        len: u64,
        etag: Option<String>,
        opts: &RemoteOptions,
    ) -> Remote {
        let shared = opts.context.clone();
        let pages = shared.pages().clone();
        let data = pages.data_budget();
        let obj = shared.object_number(&identity_of(url, len, etag.as_deref()));
        Remote {
            inner: Arc::new(Inner {
                store,
                multi,
                path,
                url: url.to_string(),
                len,
                etag,
                obj,
                pages,
                shared,
                meta_unit: AtomicU64::new(0),
                readahead: Mutex::new(Readahead::new(len, RA_MAX.min(data / 2), data / 2)),
                stats: RemoteStats::default(),
                bound: opts.bound(),
                merge_gap: opts.merge_gap / PAGE,
            }),
        }
    }

    /// Read at `offset`, as data (readahead, data pages) or as metadata.
    pub(super) fn read(
        &self,
        offset: u64,
        buf: &mut [u8],
        data: Option<(&DataHint, ReadCtx)>,
    ) -> std::io::Result<usize> {
        let len = self.inner.len;
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(len - offset) as usize;
        let buf = &mut buf[..n];
        let class = if let Some((hint, ctx)) = data {
            self.inner.readahead(offset, offset + n as u64, hint, ctx);
            Class::Data
        } else if n >= DIRECT_READ {
            Class::Data
        } else {
            Class::Meta
        };
        self.inner
            .pages
            .read(self.inner.obj, offset, buf, len, class, |first, count| {
                self.fetch_pages(first, count, class)
            })?;
        Ok(n)
    }

    /// Fetch `first..first + count` pages now (the first fetch of an object takes its head;
    /// a metadata miss takes the aligned unit around it, the file's own page size when
    /// larger): the first page fetched, and the bytes from it on.
    pub(super) fn fetch_pages(
        &self,
        first: u64,
        count: u64,
        class: Class,
    ) -> std::io::Result<(u64, Vec<u8>)> {
        let len = self.inner.len;
        let start = first * PAGE;
        let mut end = (first + count) * PAGE;
        if start == 0 {
            end = end.max(FIRST_GET);
        }
        let unit = self.inner.meta_unit.load(Ordering::Relaxed).max(META_UNIT);
        let mut from = start;
        if class == Class::Meta && unit > PAGE {
            from = start / unit * unit;
            end = end.div_ceil(unit).saturating_mul(unit);
        }
        let end = end.min(len);
        let deadline = self.inner.deadline();
        let got = self
            .inner
            .shared
            .runtime()?
            .block_on(self.inner.get(from..end, deadline))?;
        Ok((from / PAGE, got))
    }
}

impl ByteSource for Remote {
    fn len(&self) -> u64 {
        self.inner.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.read(offset, buf, None)
    }

    fn identity(&self) -> String {
        identity_of(&self.inner.url, self.inner.len, self.inner.etag.as_deref())
    }

    fn name(&self) -> String {
        self.inner.url.clone()
    }

    fn remote(&self) -> Option<&dyn RemoteSource> {
        Some(self)
    }
}

impl RemoteSource for Remote {
    fn read_data_at(
        &self,
        offset: u64,
        buf: &mut [u8],
        hint: &DataHint,
        ctx: ReadCtx,
    ) -> std::io::Result<usize> {
        self.read(offset, buf, Some((hint, ctx)))
    }

    fn read_data_once(
        &self,
        offset: u64,
        buf: &mut [u8],
        hint: &DataHint,
        ctx: ReadCtx,
    ) -> std::io::Result<usize> {
        let n = self.read(offset, buf, Some((hint, ctx)))?;
        self.inner
            .pages
            .let_go(self.inner.obj, offset, n as u64, self.inner.len);
        Ok(n)
    }

    fn note_data(&self, offset: u64, end: u64, hint: &DataHint, ctx: ReadCtx) {
        let end = end.min(self.inner.len);
        if offset < end {
            self.inner.readahead(offset, end, hint, ctx);
        }
    }

    fn prefetch(&self, ranges: &[(u64, u64)]) {
        let len = self.inner.len;
        // In a file with its own larger pages, whole pages of it.
        let unit = self.inner.meta_unit.load(Ordering::Relaxed).max(PAGE);
        let mut pages: Vec<(u64, u64)> = ranges
            .iter()
            .filter(|(o, n)| *n > 0 && *o < len)
            .map(|&(o, n)| {
                let start = o / unit * unit;
                let end = o
                    .saturating_add(n)
                    .min(len)
                    .div_ceil(unit)
                    .saturating_mul(unit);
                (start / PAGE, end.min(len).div_ceil(PAGE))
            })
            .collect();
        if pages.is_empty() {
            return;
        }
        pages.sort_unstable();
        let asked = pages.len() as u64;
        // Runs with a gap between them cost no extra request when they go in one GET of
        // several ranges: the gap is not fetched then.
        let gap = if self.inner.multi_on() {
            0
        } else {
            self.inner.merge_gap
        };
        let sent = self.inner.fetch_behind(&pages, gap);
        if sent > 0 && asked > sent {
            self.inner.count(|s| &s.merged, asked - sent);
        }
    }

    fn cached(&self, offset: u64, len: u64) -> bool {
        let end = offset.saturating_add(len).min(self.inner.len);
        offset >= end || self.inner.pages.has(self.inner.obj, offset, end - offset)
    }

    fn warm_up(&self) {
        // A GET of as many ranges as a reader's GET may hold, single bytes spread over the
        // object (none a server would merge with another), unless the server has answered
        // one already or refused it: until one is answered with parts, such GETs go one at
        // a time (see `MultiState`), and a reader's first batch (a chunk index's nodes)
        // would wait a round trip for it. Nothing for an object the first GET holds whole.
        let (Some(m), len) = (&self.inner.multi, self.inner.len) else {
            return;
        };
        if len <= FIRST_GET
            || m.state.proven.load(Ordering::Relaxed)
            || !m.state.on.load(Ordering::Relaxed)
        {
            return;
        }
        let n = MULTI_RANGES as u64;
        let ranges: Vec<Range<u64>> = (0..n).map(|i| i * (len / n)).map(|a| a..a + 1).collect();
        if let Ok(rt) = self.inner.shared.runtime() {
            let _ = rt.block_on(self.inner.get_multi(&ranges, self.inner.deadline()));
        }
    }

    fn page_size_hint(&self, bytes: u64) {
        if bytes > PAGE && bytes <= PART && bytes.is_power_of_two() {
            self.inner.meta_unit.store(bytes, Ordering::Relaxed);
        }
    }

    fn current_identity(&self) -> std::io::Result<String> {
        let inner = &self.inner;
        let r = inner
            .shared
            .block_on_bounded(inner.bound, &inner.url, "HEAD", async {
                inner
                    .store
                    .head(&inner.path)
                    .await
                    .map_err(|e| classify(&inner.url, "HEAD", e))
            });
        self.inner.count(|s| &s.heads, 1);
        r.map(|m| identity_of(&self.inner.url, m.size, m.e_tag.as_deref()))
    }

    fn requests(&self) -> RequestCounts {
        counts_of(&self.inner.stats)
    }
}

pub(super) fn identity_of(url: &str, len: u64, etag: Option<&str>) -> String {
    match etag {
        Some(e) => format!("{url}:{len}:{e}"),
        None => format!("{url}:{len}"),
    }
}
