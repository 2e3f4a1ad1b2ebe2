//! The HTTP client under every remote request, and what it lets through.
//!
//! `object_store` sends its requests through an [`HttpConnector`]; ours ([`CountingConnector`])
//! builds the `reqwest` client itself, so that it decides three things a hostile or broken
//! server could otherwise abuse:
//! - **Redirects.** A request to an S3 store carries credentials (the signature, and with
//!   temporary credentials an `x-amz-security-token` header that `reqwest` would carry to any
//!   host it is redirected to), so a store's redirect is never followed: the request fails,
//!   naming where it was sent. An HTTP(S) source's redirect is followed within the same
//!   origin (scheme, host and port) and, only with `allow_redirects`, to another one
//!   (`reqwest` drops `Authorization` and cookies when the host changes); each redirect
//!   followed is logged once at info level. At most [`MAX_REDIRECTS`] in a row.
//! - **Encodings.** Every request asks for `Accept-Encoding: identity`, and an answer in
//!   any other content encoding is a failed request, never data: its bytes are not those of
//!   the range asked for.
//! - **Bodies.** A GET of one range answered `200` (the whole object) fails at once, its
//!   body unread; an error answer's body (which `object_store` reads whole into its message)
//!   is cut at [`ERROR_BODY`] bytes. The bodies of ranged answers are checked against the
//!   range by their readers (`object`, `multirange`), and listings by `list`.
//!
//! Every request, retries included, is also counted here, in the counters of its context:
//! requests by kind, retries, and latency percentiles
//! ([`RemoteContext::net_stats`](super::RemoteContext::net_stats)).

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpResponseBody, HttpService,
};
use object_store::ClientOptions;

/// Redirects followed in a row, at most.
pub const MAX_REDIRECTS: usize = 5;
/// Bytes of an error answer's body kept (the rest is refused).
pub const ERROR_BODY: u64 = 64 << 10;

/// Which redirects a client follows (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirects {
    /// None: the requests carry credentials (an S3 store's, STS's).
    Never,
    /// Within the same scheme, host and port.
    SameOrigin,
    /// Anywhere (`allow_redirects`).
    Any,
}

// ---------------------------------------------------------------------------------------
// Every HTTP request of a context, counted where it is sent.

/// Latency buckets: four per power of two of microseconds.
pub(super) const BUCKETS: usize = 4 * 40;

/// Counters of every HTTP request sent through the connectors that share them (those of
/// one [`RemoteContext`](super::RemoteContext)), retries included.
#[derive(Debug)]
pub(crate) struct Net {
    heads: AtomicU64,
    gets: AtomicU64,
    lists: AtomicU64,
    others: AtomicU64,
    /// Answers 429 and 5xx, and requests that got no answer (each then retried or failed).
    errors: AtomicU64,
    latency: [AtomicU64; BUCKETS],
}

impl Default for Net {
    fn default() -> Self {
        Net {
            heads: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            lists: AtomicU64::new(0),
            others: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }
}

pub(super) fn bucket_of(d: Duration) -> usize {
    let us = d.as_micros().max(1) as f64;
    ((us.log2() * 4.0) as usize).min(BUCKETS - 1)
}

pub(super) fn bucket_ms(b: usize) -> f64 {
    2f64.powf((b + 1) as f64 / 4.0) / 1000.0
}

/// What the HTTP requests of a context amounted to.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NetStats {
    /// HTTP requests sent, by kind (retries included).
    pub heads: u64,
    pub gets: u64,
    pub lists: u64,
    /// Answers 429 or 5xx, and requests that got no answer.
    pub errors: u64,
    /// Latency until the answer's head, in milliseconds (upper bound of its bucket).
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Net {
    /// What the requests counted here amounted to.
    pub(super) fn stats(&self) -> NetStats {
        let counts: Vec<u64> = self
            .latency
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let pct = |q: f64| {
            if total == 0 {
                return 0.0;
            }
            let want = ((total as f64) * q).ceil() as u64;
            let mut seen = 0;
            for (b, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= want {
                    return bucket_ms(b);
                }
            }
            bucket_ms(BUCKETS - 1)
        };
        NetStats {
            heads: self.heads.load(Ordering::Relaxed),
            gets: self.gets.load(Ordering::Relaxed),
            lists: self.lists.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            p50_ms: pct(0.5),
            p99_ms: pct(0.99),
        }
    }
}

/// Sends requests through an inner service (our `reqwest` client; in tests, canned
/// answers), counting them (in the `Net` it holds) and vetting their answers.
#[derive(Debug)]
pub(super) struct Counting<S>(pub(super) S, pub(super) Arc<Net>);

#[async_trait::async_trait]
impl<S: HttpService> HttpService for Counting<S> {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let net = &self.1;
        let counter = match req.method().as_str() {
            "HEAD" => &net.heads,
            "GET" if req.uri().query().is_some_and(|q| q.contains("list-type")) => &net.lists,
            "GET" => &net.gets,
            _ => &net.others,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // A GET of one range (not of several: their answers are read by `multirange`,
        // which takes a 200 for a server that does not serve them).
        let one_range = req
            .headers()
            .get(http::header::RANGE)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.contains(','))
            .map(asked_range);
        let t = Instant::now();
        let r = HttpService::call(&self.0, req).await;
        net.latency[bucket_of(t.elapsed())].fetch_add(1, Ordering::Relaxed);
        let failed = match &r {
            Ok(a) => a.status().as_u16() == 429 || a.status().is_server_error(),
            Err(_) => true,
        };
        if failed {
            net.errors.fetch_add(1, Ordering::Relaxed);
        }
        vet(r?, one_range)
    }
}

/// A refused answer (see the module docs), as the cause of an [`HttpError`].
#[derive(Debug)]
pub(super) struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// An error that `object_store` does not retry: the answer itself is wrong.
fn refused(why: String) -> HttpError {
    HttpError::new(HttpErrorKind::Decode, Refused(why))
}

/// The range a `Range` header of one range asks for: its first byte and, when bounded, its
/// last (`None` for a header that is no `bytes=a-b` or `bytes=a-`).
pub(super) fn asked_range(header: &str) -> Option<(u64, Option<u64>)> {
    let spec = header.trim().strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let a = a.trim().parse().ok()?;
    let b = match b.trim() {
        "" => None,
        b => Some(b.parse().ok()?),
    };
    Some((a, b))
}

/// Why the `Content-Range` of a 206 answer does not answer the range asked for, if it does
/// not: it must start where asked and end where asked, or earlier only at the object's end.
pub(super) fn wrong_range(
    asked: (u64, Option<u64>),
    content_range: Option<&str>,
) -> Option<String> {
    let Some(cr) = content_range else {
        return Some("a partial answer without Content-Range".into());
    };
    let parsed = (|| {
        let rest = cr.trim().strip_prefix("bytes ")?;
        let (range, total) = rest.split_once('/')?;
        let (a, b) = range.split_once('-')?;
        let total: Option<u64> = match total.trim() {
            "*" => None,
            t => Some(t.parse().ok()?),
        };
        Some((
            a.trim().parse::<u64>().ok()?,
            b.trim().parse::<u64>().ok()?,
            total,
        ))
    })();
    let Some((a, b, total)) = parsed else {
        return Some(format!(
            "Content-Range {:?} is not a range",
            super::error::one_line(cr)
        ));
    };
    let ends_early_at_end = |want: u64| b < want && total == b.checked_add(1);
    let fits = a == asked.0 && b >= a && asked.1.is_none_or(|w| b == w || ends_early_at_end(w));
    (!fits).then(|| {
        format!(
            "the answer holds bytes {a}-{b}, not the range asked for ({}-{})",
            asked.0,
            asked.1.map_or(String::new(), |w| w.to_string())
        )
    })
}

/// The answer `a` as it may reach `object_store`, or why it may not (see the module docs).
/// `one_range`: the request was a GET of one range, and which (`None`: a header we do not
/// read, left to `object_store`).
fn vet(
    a: HttpResponse,
    one_range: Option<Option<(u64, Option<u64>)>>,
) -> Result<HttpResponse, HttpError> {
    if let Some(enc) = a.headers().get(http::header::CONTENT_ENCODING) {
        let enc = String::from_utf8_lossy(enc.as_bytes())
            .trim()
            .to_ascii_lowercase();
        if !enc.is_empty() && enc != "identity" {
            return Err(refused(format!(
                "the answer came with Content-Encoding: {}, not the bytes asked for",
                super::error::one_line(&enc)
            )));
        }
    }
    let status = a.status().as_u16();
    if one_range.is_some() && status == 200 {
        return Err(refused(
            "the server ignored the range asked for (it answered 200 with the whole object)"
                .to_string(),
        ));
    }
    if let (Some(Some(asked)), 206) = (one_range, status) {
        let cr = a
            .headers()
            .get(http::header::CONTENT_RANGE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if let Some(why) = wrong_range(asked, cr.as_deref()) {
            return Err(refused(why));
        }
    }
    if status < 300 {
        return Ok(a);
    }
    let (parts, body) = a.into_parts();
    let body = Capped {
        inner: body,
        left: ERROR_BODY,
    };
    Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
}

/// A body cut at `left` bytes: more is an error.
struct Capped {
    inner: HttpResponseBody,
    left: u64,
}

impl http_body::Body for Capped {
    type Data = bytes::Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, HttpError>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &frame {
            let n = f.data_ref().map_or(0, |d| d.len() as u64);
            if n > self.left {
                self.left = 0;
                return Poll::Ready(Some(Err(refused(format!(
                    "an error answer longer than {ERROR_BODY} bytes"
                )))));
            }
            self.left -= n;
        }
        frame
    }
}

/// The connector of every store and client of ours (see the module docs).
#[derive(Debug)]
pub(crate) struct CountingConnector {
    /// Longest one request may take, its body included (also to connect).
    pub timeout: Duration,
    pub redirects: Redirects,
    /// Where its requests are counted.
    pub net: Arc<Net>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        let client = reqwest::Client::builder()
            .user_agent(concat!("h5mount/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .no_gzip()
            .no_brotli()
            .no_zstd()
            .no_deflate()
            .redirect(policy(self.redirects))
            .build()
            .map_err(|e| object_store::Error::Generic {
                store: "HTTP",
                source: Box::new(e),
            })?;
        Ok(HttpClient::new(Counting(client, self.net.clone())))
    }
}

/// Whether `a` and `b` have the same scheme, host and port.
fn same_origin(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// `u` without user-info, query or fragment (what a log line may show of it).
fn shown(u: &url::Url) -> String {
    let mut u = u.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// The redirect policy for `r` (see the module docs).
fn policy(r: Redirects) -> reqwest::redirect::Policy {
    // Each redirect followed is logged once (per pair of origins), however often it recurs.
    let logged: Arc<Mutex<HashSet<String>>> = Arc::default();
    reqwest::redirect::Policy::custom(move |attempt| {
        let to = attempt.url().clone();
        let Some(from) = attempt.previous().last().cloned() else {
            return attempt.stop();
        };
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(Refused(format!(
                "more than {MAX_REDIRECTS} redirects in a row (the last to {})",
                shown(&to)
            )));
        }
        let follow = match r {
            Redirects::Never => {
                return attempt.error(Refused(format!(
                    "answered with a redirect to {}: a request with credentials is never sent \
                     elsewhere (check the endpoint and the region)",
                    shown(&to)
                )))
            }
            Redirects::SameOrigin => same_origin(&from, &to),
            Redirects::Any => true,
        };
        if !follow {
            return attempt.error(Refused(format!(
                "the server answered with a redirect to {}, another origin: not followed \
                 (-o allow_redirects follows it)",
                shown(&to)
            )));
        }
        let pair = format!("{} -> {}", from.origin().ascii_serialization(), shown(&to));
        let mut seen = crate::sync::lock(&logged);
        if seen.len() < 1024 && seen.insert(pair) {
            log::info!("{}: redirected to {}", shown(&from), shown(&to));
        }
        attempt.follow()
    })
}
