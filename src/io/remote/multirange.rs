//! GETs of several ranges at once from an HTTP server, answered as `multipart/byteranges`
//! ([`byteranges`](super::super::byteranges)), with a retry loop of their own.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::client::{HttpClient, HttpRequestBody};

use super::super::byteranges;
use super::super::pages::Claim;
use super::error::{chain, io_err, out_of_time, remote_err, RemoteKind};
use super::object::Inner;

/// GETs of several ranges at once, for an object behind an HTTP server (S3 does not serve
/// them: it answers with the whole object): see [`byteranges`](super::byteranges).
pub(super) struct Multi {
    /// The client `object_store` uses (same options, counted the same way).
    pub(super) client: HttpClient,
    /// The object's URL, encoded as `object_store` encodes it.
    pub(super) url: String,
    /// Whether the origin's server answers them (shared by its objects).
    pub(super) state: Arc<MultiState>,
    pub(super) retry_total: Duration,
}

/// Whether an HTTP server answers GETs of several ranges with parts of them.
#[derive(Debug)]
pub(super) struct MultiState {
    /// Cleared when the server answered one with anything but parts: one GET per run from
    /// then on.
    pub(super) on: AtomicBool,
    /// Set once it answered one with parts. Until then one is sent at a time, the others
    /// waiting for its answer: a server that refuses them is sent one, not one per batch
    /// that happened to go out before its refusal came back.
    pub(super) proven: AtomicBool,
    pub(super) probe: tokio::sync::Mutex<()>,
}

impl MultiState {
    pub(super) fn new() -> Arc<MultiState> {
        Arc::new(MultiState {
            on: AtomicBool::new(true),
            proven: AtomicBool::new(false),
            probe: tokio::sync::Mutex::new(()),
        })
    }
}

/// The answer to a GET of several ranges: its body, and where each part's bytes lie in it
/// (their first byte in the object, their range in the body).
pub(super) struct Answer {
    pub(super) body: Vec<u8>,
    pub(super) parts: Vec<(u64, Range<usize>)>,
}

impl Answer {
    /// The bytes of `r` if one part holds all of them.
    pub(super) fn cover(&self, r: &Range<u64>) -> Option<&[u8]> {
        self.parts.iter().find_map(|(start, at)| {
            byteranges::Part {
                start: *start,
                at: at.start,
                bytes: &self.body[at.clone()],
            }
            .cover(r)
        })
    }
}

/// What the status of an answer to a GET of several ranges means.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum MultiStatus {
    /// 206: parts (or one part) follow.
    Parts,
    /// Worth another try: throttling, a server error.
    Again,
    /// An answer about the object itself, which one GET per range would get too: it
    /// changed (412), is gone (404, 410) or is refused (401, 403).
    Final,
    /// Anything else (200 with the whole object, 416, 400, 501, ...): the server does not
    /// serve several ranges this way.
    Unsupported,
}

pub(super) fn multi_status(status: u16) -> MultiStatus {
    match status {
        206 => MultiStatus::Parts,
        429 | 500 | 502 | 503 | 504 => MultiStatus::Again,
        401 | 403 | 404 | 410 | 412 => MultiStatus::Final,
        _ => MultiStatus::Unsupported,
    }
}

/// Why a GET of several ranges brought no parts.
pub(super) enum MultiFail {
    /// Worth another try (no answer, 5xx, 429, an answer cut short).
    Again(String),
    /// The server does not serve several ranges this way: fetch the runs one by one.
    Unsupported(String),
    /// The answer is final (412, 404, ...).
    Final(std::io::Error),
}

impl Inner {
    /// Whether GETs of several ranges are worth sending.
    pub(super) fn multi_on(&self) -> bool {
        self.multi
            .as_ref()
            .is_some_and(|m| m.state.on.load(Ordering::Relaxed))
    }

    /// Fetch the claims of `batch` with one GET of several ranges, falling back to one GET
    /// each for what that did not bring.
    pub(super) async fn fetch_batch(self: Arc<Self>, batch: Vec<Claim>) {
        let ranges: Vec<Range<u64>> = batch.iter().map(|c| c.range(self.len)).collect();
        let mut rest = Vec::new();
        let deadline = self.deadline();
        match self.get_multi(&ranges, deadline).await {
            Ok(answer) => {
                for (c, r) in batch.into_iter().zip(&ranges) {
                    match answer.cover(r) {
                        Some(b) => self.pages.complete(&c, self.len, Ok(b)),
                        None => rest.push(c),
                    }
                }
            }
            Err(None) => rest = batch,
            Err(Some(e)) => {
                for c in &batch {
                    let e = std::io::Error::new(e.kind(), e.to_string());
                    self.pages.complete(c, self.len, Err(e));
                }
            }
        }
        let left: Vec<_> = rest
            .into_iter()
            .map(|c| tokio::spawn(self.clone().fetch_one(c, deadline)))
            .collect();
        for l in left {
            let _ = l.await;
        }
    }

    /// One GET of several `ranges` (with `If-Match`), retried with backoff as
    /// `object_store` retries; the parts of the answer, `Err(None)` when the server does not
    /// answer such requests with parts (from then on none is sent to it).
    pub(super) async fn get_multi(
        &self,
        ranges: &[Range<u64>],
        deadline: Instant,
    ) -> Result<Answer, Option<std::io::Error>> {
        match tokio::time::timeout_at(deadline.into(), self.get_multi_now(ranges, deadline)).await {
            Ok(r) => r,
            Err(_) => {
                self.count(|s| &s.failures, 1);
                Err(Some(out_of_time(
                    &self.url,
                    "GET of several ranges",
                    self.bound,
                )))
            }
        }
    }

    async fn get_multi_now(
        &self,
        ranges: &[Range<u64>],
        deadline: Instant,
    ) -> Result<Answer, Option<std::io::Error>> {
        let Some(m) = &self.multi else {
            return Err(None);
        };
        let shown = match ranges {
            [first, .., last] => format!(
                "GET {} ranges in bytes {}-{}",
                ranges.len(),
                first.start,
                last.end.saturating_sub(1)
            ),
            _ => "GET of no ranges".to_string(),
        };
        // Until the server has answered one with parts, one at a time (see `MultiState`):
        // the first attempt of each is its probe, its retries are not.
        let mut probe = None;
        if !m.state.proven.load(Ordering::Relaxed) {
            let guard = m.state.probe.lock().await;
            // The batch that held it may have proven the server meanwhile.
            if !m.state.proven.load(Ordering::Relaxed) {
                probe = Some(guard);
            }
        }
        if !m.state.on.load(Ordering::Relaxed) {
            return Err(None);
        }
        let deadline = deadline.min(Instant::now() + m.retry_total);
        let mut wait = Duration::from_millis(100);
        // Counted once, as a GET of one range is (its retries show in the context's `net_stats`).
        self.count(|s| &s.gets, 1);
        loop {
            let got = {
                let _slot = self
                    .shared
                    .requests()
                    .acquire()
                    .await
                    .map_err(|e| Some(io_err(&self.url, &shown, e)))?;
                log::debug!("{}: {shown}", self.url);
                let got = self.try_multi(m, ranges).await;
                drop(probe.take());
                got
            };
            match got {
                Ok(answer) => {
                    m.state.proven.store(true, Ordering::Relaxed);
                    self.count(|s| &s.bytes, answer.body.len() as u64);
                    return Ok(answer);
                }
                Err(MultiFail::Unsupported(why)) => {
                    self.stop_multi(m, &why);
                    return Err(None);
                }
                Err(MultiFail::Final(e)) => {
                    self.count(|s| &s.failures, 1);
                    return Err(Some(e));
                }
                Err(MultiFail::Again(why)) => {
                    if Instant::now() + wait > deadline {
                        self.count(|s| &s.failures, 1);
                        return Err(Some(remote_err(
                            RemoteKind::Exhausted,
                            &self.url,
                            &shown,
                            why,
                        )));
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Send no more GETs of several ranges to this server (said once in the log).
    pub(super) fn stop_multi(&self, m: &Multi, why: &str) {
        if m.state.on.swap(false, Ordering::Relaxed) {
            log::info!(
                "{}: the server does not serve GETs of several ranges as parts ({why}); one \
                 GET per range from now on",
                self.url
            );
        }
    }

    /// Send one GET of several ranges and read its answer.
    pub(super) async fn try_multi(
        &self,
        m: &Multi,
        ranges: &[Range<u64>],
    ) -> Result<Answer, MultiFail> {
        use futures_util::StreamExt;
        let mut req = http::Request::builder()
            .method(http::Method::GET)
            .uri(&m.url)
            .header(http::header::RANGE, byteranges::header(ranges));
        if let Some(e) = &self.etag {
            req = req.header(http::header::IF_MATCH, e);
        }
        let req = req
            .body(HttpRequestBody::empty())
            .map_err(|e| MultiFail::Unsupported(e.to_string()))?;
        // An answer our client refused (another content encoding, say) is no passing fault:
        // the server answers such GETs in a way we cannot use, so it is sent no more.
        let answer =
            m.client
                .execute(req)
                .await
                .map_err(|e| match super::error::cause_kind(&e) {
                    Some(RemoteKind::Refused) => MultiFail::Unsupported(chain(&e)),
                    _ => MultiFail::Again(e.to_string()),
                })?;
        let status = answer.status().as_u16();
        match multi_status(status) {
            MultiStatus::Parts => {}
            MultiStatus::Again => return Err(MultiFail::Again(format!("status {status}"))),
            MultiStatus::Unsupported => {
                return Err(MultiFail::Unsupported(format!("status {status}")))
            }
            MultiStatus::Final => {
                let (kind, why) = match status {
                    412 => {
                        self.count(|s| &s.changed, 1);
                        (
                            RemoteKind::Changed,
                            "the object changed since it was mounted (ETag no longer matches)"
                                .to_string(),
                        )
                    }
                    401 | 403 => (RemoteKind::Denied, format!("status {status}")),
                    _ => (RemoteKind::NotFound, format!("status {status}")),
                };
                return Err(MultiFail::Final(remote_err(
                    kind,
                    &self.url,
                    "GET of several ranges",
                    why,
                )));
            }
        }
        let header = |name: http::header::HeaderName| {
            answer
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let separator = header(http::header::CONTENT_TYPE).and_then(|t| byteranges::boundary(&t));
        let single = header(http::header::CONTENT_RANGE);
        // What may arrive: the bytes asked for, and room for each part's headers.
        let asked: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let limit = asked + 512 * ranges.len() as u64 + 4096;
        // Room for all of it at once (a bound of our own asking, never of the answer's
        // saying): no reallocation while it arrives.
        let mut body = Vec::with_capacity(usize::try_from(limit).unwrap_or(0));
        let mut stream = answer.into_body().bytes_stream();
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| MultiFail::Again(e.to_string()))?;
            if (body.len() + piece.len()) as u64 > limit {
                return Err(MultiFail::Unsupported(format!(
                    "an answer longer than the {limit} bytes expected"
                )));
            }
            body.extend_from_slice(&piece);
        }
        let moved = body.len() as u64;
        let one_range = separator.is_none();
        let parts = match (separator, single) {
            (Some(sep), _) => byteranges::parse(&body, &sep, self.len),
            (None, Some(range)) => byteranges::content_range(&range).and_then(|(r, total)| {
                if total.is_some_and(|t| t != self.len) || r.end - r.start != moved {
                    return Err(format!("Content-Range {range} for {moved} bytes"));
                }
                Ok(vec![byteranges::Part {
                    start: r.start,
                    at: 0,
                    bytes: &body[..],
                }])
            }),
            (None, None) => Err("206 without parts".to_string()),
        };
        // An answer cut short shows as an error of the body stream above (retried); one
        // that arrived whole and does not parse is a form this client does not read.
        let parts = parts.map_err(MultiFail::Unsupported)?;
        // Only parts that hold a range asked for are kept (a hostile answer of many tiny
        // parts costs nothing more); each as where its bytes lie in the body.
        let kept: Vec<(u64, Range<usize>)> = parts
            .iter()
            .filter(|p| ranges.iter().any(|r| p.cover(r).is_some()))
            .map(|p| (p.start, p.at..p.at + p.bytes.len()))
            .collect();
        // A server that answers a GET of several ranges with one range (the first, most
        // often) serves the rest one GET each after it: a round trip more for every batch,
        // so none is sent to it again.
        if one_range {
            self.stop_multi(m, "it answered one range");
        }
        Ok(Answer { body, parts: kept })
    }
}
