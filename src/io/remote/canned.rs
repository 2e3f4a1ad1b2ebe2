//! A canned-answer HTTP service for tests, with no server and no socket: `object_store`'s
//! HTTP store and the GETs of several ranges send their requests to a [`Canned`] service,
//! which answers each from a function of the request (status, headers, body) and records
//! what it was asked and how much of each answer's body was read.
//!
//! The service sits under [`Counting`], as `reqwest`'s client does in the real connector,
//! so that its answers go through the same counting and vetting (content encodings, a 200
//! for one range, capped error bodies). What `reqwest` itself decides (redirects, the
//! `Accept-Encoding` header it adds) is not here.
//!
//! [`honest`] answers as a correct server would (one range, several ranges as
//! `multipart/byteranges`, `If-Match`); tests answer otherwise where they want a hostile
//! or broken server.

use std::collections::VecDeque;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpResponseBody, HttpService,
};
use object_store::path::Path as StorePath;
use object_store::ClientOptions;

use super::multirange::{Multi, MultiState};
use super::net::Counting;
use super::object::Remote;
use super::origin::client_options;
use super::store_tests::own_pages;
use super::RemoteOptions;

/// The origin of every canned object (never connected to).
pub(super) const BASE: &str = "http://127.0.0.1:9";
/// The separator of the `multipart/byteranges` answers built here.
pub(super) const SEPARATOR: &str = "CANNED-SEPARATOR";
/// Bytes of each piece an answer's body is handed out in (pieces cut pages anywhere).
pub(super) const PIECE: usize = 7000;

/// A request as the service saw it, and what became of its answer.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub method: String,
    pub path: String,
    pub range: Option<String>,
    pub if_match: Option<String>,
    /// Whether the answer's body was asked for anything, and the bytes handed out of it.
    pub polled: Arc<AtomicBool>,
    pub handed: Arc<AtomicU64>,
}

impl Seen {
    /// The ranges of its `Range` header (half-open), none without one.
    pub fn ranges(&self) -> Vec<Range<u64>> {
        let Some(spec) = self.range.as_deref().and_then(|r| r.strip_prefix("bytes=")) else {
            return Vec::new();
        };
        spec.split(',')
            .map(|r| {
                let (a, b) = r.trim().split_once('-').expect("FIRST-LAST");
                let a: u64 = a.parse().expect("FIRST");
                a..b.parse::<u64>().expect("LAST") + 1
            })
            .collect()
    }

    /// Whether it is a GET of several ranges.
    pub fn is_multi(&self) -> bool {
        self.method == "GET" && self.ranges().len() > 1
    }

    pub fn body_read(&self) -> bool {
        self.polled.load(Ordering::Relaxed)
    }
}

/// An answer: status, headers, body, and `tail` zeros after it (a body far longer than any
/// reader should take of it).
pub(super) struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub tail: u64,
}

impl Reply {
    pub fn new(status: u16, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: vec![("content-length", body.len().to_string())],
            body,
            tail: 0,
        }
    }

    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.into()));
        self
    }
}

type Answer = dyn Fn(&Seen) -> Reply + Send + Sync;

struct State {
    answer: Box<Answer>,
    seen: Mutex<Vec<Seen>>,
}

/// The service (see the module docs); clones share their answers and records.
#[derive(Clone)]
pub(super) struct Canned(Arc<State>);

impl std::fmt::Debug for Canned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Canned")
    }
}

impl Canned {
    pub fn new(answer: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Canned {
        Canned(Arc::new(State {
            answer: Box::new(answer),
            seen: Mutex::new(Vec::new()),
        }))
    }

    /// The requests so far, in the order they came.
    pub fn seen(&self) -> Vec<Seen> {
        crate::sync::lock(&self.0.seen).clone()
    }

    /// GETs of one range and GETs of several ranges so far.
    pub fn gets(&self) -> (usize, usize) {
        let seen = self.seen();
        let multi = seen.iter().filter(|s| s.is_multi()).count();
        let all = seen.iter().filter(|s| s.method == "GET").count();
        (all - multi, multi)
    }
}

#[async_trait::async_trait]
impl HttpService for Canned {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let header = |name: http::header::HeaderName| {
            req.headers()
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        let seen = Seen {
            method: req.method().to_string(),
            path: req.uri().path().to_string(),
            range: header(http::header::RANGE),
            if_match: header(http::header::IF_MATCH),
            polled: Arc::default(),
            handed: Arc::default(),
        };
        crate::sync::lock(&self.0.seen).push(seen.clone());
        let reply = (self.0.answer)(&seen);
        let mut a = http::Response::builder().status(reply.status);
        for (k, v) in &reply.headers {
            a = a.header(*k, v);
        }
        let pieces = reply
            .body
            .chunks(PIECE)
            .map(Bytes::copy_from_slice)
            .collect();
        let body = Pieces {
            pieces,
            tail: reply.tail,
            polled: seen.polled,
            handed: seen.handed,
        };
        Ok(a.body(HttpResponseBody::new(body))
            .expect("a canned answer"))
    }
}

impl HttpConnector for Canned {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Counting(self.clone(), Arc::default())))
    }
}

/// A body handed out in pieces, counting what is taken of it.
struct Pieces {
    pieces: VecDeque<Bytes>,
    tail: u64,
    polled: Arc<AtomicBool>,
    handed: Arc<AtomicU64>,
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, HttpError>>> {
        self.polled.store(true, Ordering::Relaxed);
        let piece = match self.pieces.pop_front() {
            Some(p) => p,
            None if self.tail > 0 => {
                let n = self.tail.min(PIECE as u64);
                self.tail -= n;
                Bytes::from(vec![0u8; n as usize])
            }
            None => return Poll::Ready(None),
        };
        self.handed.fetch_add(piece.len() as u64, Ordering::Relaxed);
        Poll::Ready(Some(Ok(http_body::Frame::data(piece))))
    }
}

/// The `Content-Range` value of `r` in an object of `len` bytes.
pub(super) fn content_range(r: &Range<u64>, len: u64) -> String {
    format!("bytes {}-{}/{len}", r.start, r.end - 1)
}

/// A `multipart/byteranges` body of `parts` (each its `Content-Range` value and bytes).
pub(super) fn multipart(parts: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"\r\n".to_vec();
    for (range, bytes) in parts {
        b.extend_from_slice(
            format!(
                "--{SEPARATOR}\r\nContent-Type: application/octet-stream\r\n\
                 Content-Range: {range}\r\n\r\n"
            )
            .as_bytes(),
        );
        b.extend_from_slice(bytes);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(format!("--{SEPARATOR}--\r\n").as_bytes());
    b
}

/// A 206 answer of `parts` as `multipart/byteranges`.
pub(super) fn multi_reply(parts: &[(String, Vec<u8>)]) -> Reply {
    Reply::new(206, multipart(parts)).with(
        "content-type",
        format!("multipart/byteranges; boundary={SEPARATOR}"),
    )
}

/// The parts a correct server answers `ranges` of `data` with.
pub(super) fn parts_of(data: &[u8], ranges: &[Range<u64>]) -> Vec<(String, Vec<u8>)> {
    ranges
        .iter()
        .map(|r| {
            let bytes = data[r.start as usize..r.end as usize].to_vec();
            (content_range(r, data.len() as u64), bytes)
        })
        .collect()
}

/// A 206 answer of one range `r` of `data`.
pub(super) fn range_reply(data: &[u8], r: &Range<u64>) -> Reply {
    Reply::new(206, data[r.start as usize..r.end as usize].to_vec())
        .with("content-range", content_range(r, data.len() as u64))
}

/// What a correct server holding `data` with ETag `etag` answers.
pub(super) fn honest(data: &[u8], etag: &str, req: &Seen) -> Reply {
    if req.if_match.as_deref().is_some_and(|m| m != etag) {
        return Reply::new(412, Vec::new());
    }
    let ranges = req.ranges();
    let r = match (req.method.as_str(), ranges.as_slice()) {
        ("HEAD", _) => Reply::new(200, Vec::new()).with("content-length", data.len().to_string()),
        (_, []) => Reply::new(200, data.to_vec()),
        (_, [one]) => range_reply(data, one),
        _ => multi_reply(&parts_of(data, &ranges)),
    };
    r.with("etag", etag)
}

/// `RemoteOptions` whose requests give up soon: `timeout` for one, `retry` for retries.
pub(super) fn quick(timeout: Duration, retry: Duration) -> RemoteOptions {
    RemoteOptions {
        request_timeout: timeout,
        retry_total: retry,
        ..RemoteOptions::default()
    }
}

/// An object `name` of `len` bytes (ETag `etag`) behind `canned`, through `object_store`'s
/// HTTP store, with GETs of several ranges when `multi` (as an HTTP origin has them), and a
/// page cache of its own holding failures for `hold`.
pub(super) fn remote(
    canned: &Canned,
    name: &str,
    len: u64,
    etag: &str,
    multi: bool,
    opts: &RemoteOptions,
    hold: Duration,
) -> Remote {
    let retry = object_store::RetryConfig {
        retry_timeout: opts.retry_total,
        ..Default::default()
    };
    let store = object_store::http::HttpBuilder::new()
        .with_url(BASE)
        .with_client_options(client_options(opts))
        .with_retry(retry)
        .with_http_connector(canned.clone())
        .build()
        .expect("an HTTP store");
    let path = StorePath::from(format!("canned/{name}.h5"));
    let url = format!("{BASE}/{path}");
    let multi = multi.then(|| Multi {
        client: HttpClient::new(Counting(canned.clone(), Arc::default())),
        url: url.clone(),
        state: MultiState::new(),
        retry_total: opts.retry_total,
    });
    let r = Remote::with_meta(
        Arc::new(store),
        multi,
        path,
        &url,
        len,
        Some(etag.to_string()),
        opts,
    );
    own_pages(r, 4 << 20, 32 << 20, hold)
}
