//! Remote byte sources: an object on an S3-compatible store (`s3://bucket/key`) or a file
//! behind an HTTP(S) server that answers range requests (`https://host/path`), read through
//! the `object_store` crate (Apache Arrow's: one client for S3 and HTTP with request signing,
//! credentials from the standard AWS sources, timeouts and retries with backoff). A prefix
//! of a bucket (`s3://bucket/prefix/`) is listed through [`RemoteOrigin`].
//!
//! `object_store` is asynchronous; one small Tokio runtime per process runs its requests, and
//! the FUSE worker threads block on them ([`Remote::read_at`] is a plain blocking call).
//!
//! ## Few requests, many in flight
//! Requests are costly on a store (tens of milliseconds each), so reads go through a page
//! cache ([`pages`](super::pages)): aligned pages, bounded in bytes, each fetched once
//! however many readers miss it at the same time, runs of missing pages fetched with one
//! ranged GET. The pages are small ([`PAGE`], 16 KiB), so what is fetched for scattered
//! pieces (the headers of a group's children, each a few hundred bytes and often far
//! apart) is not much more than the pieces; a metadata read that misses fetches the
//! aligned [`META_UNIT`] (64 KiB) around it, since the next metadata read is most often
//! near the last. The first read of an object takes its first 1 MiB, where the superblock and
//! (in most files) the root group's metadata live, so a mount is ready after one HEAD and one
//! GET. Small reads (metadata) and large ones (data) count against separate budgets, so
//! streaming data never pushes out the metadata a listing needs.
//!
//! Three things keep a reader from waiting one round trip per piece:
//! - [`ByteSource::prefetch`]: the layers above name the ranges they will read next (the
//!   object headers of a group's children, the chunks of one read); their pages are fetched
//!   in the background, ranges with small gaps merged into one GET of at most [`PART`] bytes,
//!   and the GETs sent in parallel. Behind an HTTP server, short runs (at most
//!   [`MULTI_RUN`]) go [`MULTI_RANGES`] to a GET of several ranges, answered as
//!   `multipart/byteranges` ([`super::byteranges`]), with no gap fetched between
//!   them; a server that answers such a GET otherwise (the whole object, most often) is not
//!   sent another, and its answer is not read. Until the server has answered one with
//!   parts, they go one at a time; the warm-up of a mount asks it one of single bytes
//!   ([`ByteSource::warm_up`]) if nothing else has yet. S3 serves one range per GET.
//! - Readahead: data reads that follow each other through the object form a stream. Each
//!   read says which dataset it belongs to ([`DataHint`]), and a stream reads ahead only
//!   where the reader is known to go:
//!   - within a contiguous dataset, up to the end of its block; a read of at least
//!     [`RA_FIRST`] bytes at the block's start, or within two of its lengths of it (`cat`,
//!     `cp`, `dd`, whose first reads reach the FUSE threads in either order), fetches the
//!     block ahead at once, up to half the data budget;
//!   - within a chunked dataset, nothing: its chunks are fetched by each read's own hints
//!     and by the chunk prefetch of the filesystem layer, which asks for the chunks ahead;
//!   - once the stream has gone on from one dataset into another (their data in file order:
//!     a `cat` of a file's datasets one after another; the same thread reading both, not
//!     two readers each reading its own dataset), across datasets, from its
//!     [`RA_STREAK`]th read on, in a window that doubles up to [`RA_MAX`] but reaches at
//!     most `RA_CROSS` times the span of the dataset read last: the reader's next
//!     datasets, not much of what follows the last one it reads. A reader going through a
//!     group's datasets in listing order is also read ahead by the filesystem layer
//!     (`fs::siblings`), which knows where it goes next, so this window can stay short
//!     (8 spans: a `cat` of 100 datasets of 650 KB each fetches 1 % past them, against 8
//!     % at 16 spans, for 5 % less speed at 30 ms a request).
//!
//!   So reading one dataset moves about its own bytes, never the data that follows it.
//! - A missing run longer than [`PART`] is fetched as parallel GETs of [`PART`] bytes.
//! - The pages of a background GET of one range are kept, and their readers woken, as its
//!   answer arrives ([`PageCache::filling`]), not when the whole of it is in; the answer is
//!   copied once, into the pages.
//!
//! At most [`MAX_REQUESTS`] GETs are in flight in the process, and the bytes of background
//! fetches in flight count against the data budget (a hint that does not fit is dropped).
//!
//! ## Faults
//! Every request has a timeout; `object_store` retries 5xx answers, throttling and timeouts
//! with backoff, for at most the retry bound in total, then the read fails (`EIO`, with the
//! URL, range and cause in the message). Every GET carries `If-Match` with the ETag seen when
//! the object was opened: an object replaced while mounted fails the reads (a 412), never
//! mixing old and new bytes; [`ByteSource::current_identity`] asks for the ETag afresh (a
//! HEAD), which is what `--refresh` compares.
//!
//! Every HTTP request, retries included, passes through a counting connector: requests by
//! kind, retries, and latency percentiles for the whole process ([`net_stats`]).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpRequestBody, HttpResponse, HttpService,
    ReqwestConnector,
};
use object_store::path::Path as StorePath;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::byteranges;
use super::pages::{Claim, Class, PageCache, PAGE};
use super::source::{ByteSource, DataHint, Opener, OriginEntry, RequestCounts};

/// Bytes the first GET of an object takes.
pub const FIRST_GET: u64 = 1 << 20;
/// Metadata reads at least this long count as data (their pages against the data budget).
pub const DIRECT_READ: usize = 256 << 10;
/// Longest GET of merged ranges, and the part size of long fetches sent in parallel.
pub const PART: u64 = 4 << 20;
/// Gap between ranges that are still merged into one GET (its bytes are fetched too).
pub const MERGE_GAP: u64 = 128 << 10;
/// What a metadata miss fetches at least (aligned).
pub const META_UNIT: u64 = 64 << 10;
/// GETs in flight in the whole process.
pub const MAX_REQUESTS: usize = 32;
/// Ranges asked for in one GET of several ranges (an HTTP server's `multipart/byteranges`).
pub const MULTI_RANGES: usize = 32;
/// Runs at most this long are fetched by GETs of several ranges; longer ones by their own
/// GETs in parallel (one connection carries a multi-range answer).
pub const MULTI_RUN: u64 = 256 << 10;
/// Sequential reads in a row before readahead starts (one for reads of [`DIRECT_READ`] or
/// more).
pub const RA_STREAK: u32 = 2;
/// First readahead window.
pub const RA_MIN: u64 = 2 << 20;
/// Largest readahead window (also at most half the data budget).
pub const RA_MAX: u64 = 16 << 20;
/// Reads at least this long at (or near) the start of a dataset's block fetch the block ahead
/// at once (up to half the data budget).
pub const RA_FIRST: u64 = 128 << 10;
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

/// How to reach a remote object.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// S3 endpoint of an S3-compatible store (`--endpoint`); default: AWS.
    pub endpoint: Option<String>,
    /// S3 region (`--region`); default: from the environment, else `us-east-1`.
    pub region: Option<String>,
    /// Send unsigned requests (public buckets: `--no-sign-request`).
    pub no_sign: bool,
    /// Virtual-hosted addressing (`bucket.host`) rather than path-style (`--virtual-hosted`).
    pub virtual_hosted: bool,
    /// The credentials of `--profile` ([`super::aws_credentials`]); default: the standard
    /// AWS sources.
    pub credential_provider: Option<object_store::aws::AwsCredentialProvider>,
    /// Longest one request may take (`--request-timeout`).
    pub request_timeout: Duration,
    /// Longest a read may spend retrying (5xx, throttling, timeouts) before it fails.
    pub retry_total: Duration,
    /// Bytes of metadata pages, for all remote objects of the process together (the first
    /// object opened sets it).
    pub meta_cache_bytes: u64,
    /// Bytes of data pages (readahead, prefetch, large reads), likewise.
    pub data_cache_bytes: u64,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            endpoint: None,
            region: None,
            no_sign: false,
            virtual_hosted: false,
            credential_provider: None,
            request_timeout: Duration::from_secs(10),
            retry_total: Duration::from_secs(30),
            meta_cache_bytes: 32 << 20,
            data_cache_bytes: 64 << 20,
        }
    }
}

/// Whether `source` names a remote object rather than a local path.
pub fn is_remote(source: &str) -> bool {
    ["s3://", "http://", "https://"]
        .iter()
        .any(|p| source.starts_with(p))
}

/// Whether `url` names a prefix of a bucket (`s3://bucket/`, `s3://bucket/dir/`) rather than
/// one object.
pub fn is_prefix(url: &str) -> bool {
    url.strip_prefix("s3://")
        .is_some_and(|rest| !rest.contains('/') || rest.ends_with('/'))
}

/// Request counters of one remote object (and of the whole process: [`totals`]).
#[derive(Debug, Default)]
pub struct RemoteStats {
    pub heads: AtomicU64,
    pub gets: AtomicU64,
    pub bytes: AtomicU64,
    pub failures: AtomicU64,
    pub changed: AtomicU64,
    pub merged: AtomicU64,
    pub readahead: AtomicU64,
}

static TOTALS: RemoteStats = RemoteStats {
    heads: AtomicU64::new(0),
    gets: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    failures: AtomicU64::new(0),
    changed: AtomicU64::new(0),
    merged: AtomicU64::new(0),
    readahead: AtomicU64::new(0),
};

fn counts_of(s: &RemoteStats) -> RequestCounts {
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    RequestCounts {
        heads: get(&s.heads),
        gets: get(&s.gets),
        bytes: get(&s.bytes),
        failures: get(&s.failures),
        changed: get(&s.changed),
        merged: get(&s.merged),
        readahead: get(&s.readahead),
        ..RequestCounts::default()
    }
}

/// What every remote object of the process has asked its server (HEADs and GETs as the
/// layers above asked for them, before retries: see [`net_stats`] for what was sent).
pub fn totals() -> RequestCounts {
    let net = net_stats();
    let mut c = counts_of(&TOTALS);
    c.lists = net.lists;
    c.sent = net.heads + net.gets + net.lists;
    c.retries = net.errors.saturating_sub(c.failures);
    c.p50_us = (net.p50_ms * 1000.0) as u64;
    c.p99_us = (net.p99_ms * 1000.0) as u64;
    c
}

/// The process's runtime for `object_store`'s requests.
fn runtime() -> std::io::Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("h5mount-io")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| std::io::Error::other(e.clone()))
}

/// The page cache of every remote object of the process, sized by the first options asked.
fn shared_pages(opts: &RemoteOptions) -> Arc<PageCache> {
    static PAGES: OnceLock<Arc<PageCache>> = OnceLock::new();
    PAGES
        .get_or_init(|| {
            Arc::new(PageCache::new(
                opts.meta_cache_bytes.max(2 * FIRST_GET),
                opts.data_cache_bytes.max(4 * PART),
            ))
        })
        .clone()
}

/// The page-cache number of the object state `identity` (URL, length and ETag): the same
/// object reopened finds its pages again; a changed one has a new number.
fn object_number(identity: &str) -> u64 {
    static NUMBERS: OnceLock<Mutex<std::collections::HashMap<String, u64>>> = OnceLock::new();
    let mut m = NUMBERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let next = m.len() as u64 + 1;
    *m.entry(identity.to_string()).or_insert(next)
}

/// Bounds the GETs in flight in the process.
static REQUESTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_REQUESTS);

// ---------------------------------------------------------------------------------------
// Every HTTP request of the process, counted where it is sent.

/// Latency buckets: four per power of two of microseconds.
const BUCKETS: usize = 4 * 40;

/// Counters of every HTTP request the process sent (retries included).
struct Net {
    heads: AtomicU64,
    gets: AtomicU64,
    lists: AtomicU64,
    others: AtomicU64,
    /// Answers 429 and 5xx, and requests that got no answer (each then retried or failed).
    errors: AtomicU64,
    latency: [AtomicU64; BUCKETS],
}

static NET: Net = Net {
    heads: AtomicU64::new(0),
    gets: AtomicU64::new(0),
    lists: AtomicU64::new(0),
    others: AtomicU64::new(0),
    errors: AtomicU64::new(0),
    latency: [const { AtomicU64::new(0) }; BUCKETS],
};

fn bucket_of(d: Duration) -> usize {
    let us = d.as_micros().max(1) as f64;
    ((us.log2() * 4.0) as usize).min(BUCKETS - 1)
}

fn bucket_ms(b: usize) -> f64 {
    2f64.powf((b + 1) as f64 / 4.0) / 1000.0
}

/// What every HTTP request of the process amounted to.
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

/// Counters of every HTTP request the process has sent.
pub fn net_stats() -> NetStats {
    let counts: Vec<u64> = NET
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
        heads: NET.heads.load(Ordering::Relaxed),
        gets: NET.gets.load(Ordering::Relaxed),
        lists: NET.lists.load(Ordering::Relaxed),
        errors: NET.errors.load(Ordering::Relaxed),
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
    }
}

/// Sends requests through `object_store`'s own client, counting them.
#[derive(Debug)]
struct Counting(HttpClient);

#[async_trait::async_trait]
impl HttpService for Counting {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let counter = match req.method().as_str() {
            "HEAD" => &NET.heads,
            "GET" if req.uri().query().is_some_and(|q| q.contains("list-type")) => &NET.lists,
            "GET" => &NET.gets,
            _ => &NET.others,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let t = Instant::now();
        let r = self.0.execute(req).await;
        NET.latency[bucket_of(t.elapsed())].fetch_add(1, Ordering::Relaxed);
        let failed = match &r {
            Ok(a) => a.status().as_u16() == 429 || a.status().is_server_error(),
            Err(_) => true,
        };
        if failed {
            NET.errors.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

#[derive(Debug)]
struct CountingConnector;

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Counting(
            ReqwestConnector::default().connect(options)?,
        )))
    }
}

// ---------------------------------------------------------------------------------------

fn io_err(url: &str, what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{url}: {what}: {}", one_line(&e.to_string())))
}

/// `text` on one line and at most 300 characters (a server's answer may be a page of XML).
fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

fn bad_url(url: &str, why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{url}: {why}"))
}

/// The same error as `e` for a request about `url`, with NotFound and PermissionDenied kinds
/// for a missing object or bucket and for refused access.
fn classify(url: &str, what: &str, e: object_store::Error) -> std::io::Error {
    use std::io::ErrorKind;
    match e {
        object_store::Error::NotFound { .. } => {
            std::io::Error::new(ErrorKind::NotFound, format!("{url}: no such object"))
        }
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            std::io::Error::new(ErrorKind::PermissionDenied, format!("{url}: access denied"))
        }
        // A listing's refusal comes back as a generic error naming the status.
        e if [" 401 ", " 403 "].iter().any(|c| e.to_string().contains(c)) => {
            std::io::Error::new(ErrorKind::PermissionDenied, format!("{url}: access denied"))
        }
        e if e.to_string().contains(" 404 ") || e.to_string().contains("NoSuchBucket") => {
            std::io::Error::new(ErrorKind::NotFound, format!("{url}: no such bucket or key"))
        }
        e => io_err(url, what, e),
    }
}

/// `url` split into its origin (`https://host`, `s3://bucket`) and its path (`/dir/f.h5`; `/`
/// for a whole bucket). An HTTP URL must have a path.
fn split_url(url: &str) -> std::io::Result<(&str, &str)> {
    let scheme_end = url
        .find("://")
        .map(|i| i + 3)
        .ok_or_else(|| bad_url(url, "not a URL"))?;
    let host_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| i + scheme_end);
    let (base, path) = url.split_at(host_end);
    if base.len() == scheme_end {
        return Err(bad_url(url, "no host or bucket in the URL"));
    }
    if !url.starts_with("s3://") && path.is_empty() {
        return Err(bad_url(url, "no path in the URL"));
    }
    Ok((base, if path.is_empty() { "/" } else { path }))
}

/// The HTTP client's options: timeouts, and plain HTTP allowed.
fn client_options(opts: &RemoteOptions) -> ClientOptions {
    ClientOptions::new()
        .with_timeout(opts.request_timeout)
        .with_connect_timeout(opts.request_timeout)
        .with_allow_http(true)
}

/// The store of the origin `base` (`s3://bucket` or `http(s)://host`).
fn store_for(base: &str, opts: &RemoteOptions) -> std::io::Result<Arc<dyn ObjectStore>> {
    let retry = object_store::RetryConfig {
        retry_timeout: opts.retry_total,
        ..Default::default()
    };
    let client = client_options(opts);
    if let Some(bucket) = base.strip_prefix("s3://") {
        let mut b = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_client_options(client)
            .with_retry(retry)
            .with_http_connector(CountingConnector)
            .with_virtual_hosted_style_request(opts.virtual_hosted)
            .with_skip_signature(opts.no_sign);
        if let Some(c) = &opts.credential_provider {
            b = b.with_credentials(c.clone());
        }
        if let Some(e) = &opts.endpoint {
            b = b.with_endpoint(e.clone());
        }
        if let Some(r) = &opts.region {
            b = b.with_region(r.clone());
        }
        let store = b.build().map_err(|e| bad_url(base, &e.to_string()))?;
        return Ok(Arc::new(store));
    }
    let store = object_store::http::HttpBuilder::new()
        .with_url(base)
        .with_client_options(client)
        .with_retry(retry)
        .with_http_connector(CountingConnector)
        .build()
        .map_err(|e| bad_url(base, &e.to_string()))?;
    Ok(Arc::new(store))
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
    /// The reader (thread) whose reads began the stream ([`super::source::reader`]): only
    /// its own reads carry the stream into another dataset.
    reader: u32,
}

/// GETs of several ranges at once, for an object behind an HTTP server (S3 does not serve
/// them: it answers with the whole object): see [`byteranges`](super::byteranges).
struct Multi {
    /// The client `object_store` uses (same options, counted the same way).
    client: HttpClient,
    /// The object's URL, encoded as `object_store` encodes it.
    url: String,
    /// Whether the origin's server answers them (shared by its objects).
    state: Arc<MultiState>,
    retry_total: Duration,
}

/// Whether an HTTP server answers GETs of several ranges with parts of them.
#[derive(Debug)]
struct MultiState {
    /// Cleared when the server answered one with anything but parts: one GET per run from
    /// then on.
    on: AtomicBool,
    /// Set once it answered one with parts. Until then one is sent at a time, the others
    /// waiting for its answer: a server that refuses them is sent one, not one per batch
    /// that happened to go out before its refusal came back.
    proven: AtomicBool,
    probe: tokio::sync::Mutex<()>,
}

impl MultiState {
    fn new() -> Arc<MultiState> {
        Arc::new(MultiState {
            on: AtomicBool::new(true),
            proven: AtomicBool::new(false),
            probe: tokio::sync::Mutex::new(()),
        })
    }
}

/// The answer to a GET of several ranges: its body, and where each part's bytes lie in it
/// (their first byte in the object, their range in the body).
struct Answer {
    body: Vec<u8>,
    parts: Vec<(u64, Range<usize>)>,
}

impl Answer {
    /// The bytes of `r` if one part holds all of them.
    fn cover(&self, r: &Range<u64>) -> Option<&[u8]> {
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
enum MultiStatus {
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

fn multi_status(status: u16) -> MultiStatus {
    match status {
        206 => MultiStatus::Parts,
        429 | 500 | 502 | 503 | 504 => MultiStatus::Again,
        401 | 403 | 404 | 410 | 412 => MultiStatus::Final,
        _ => MultiStatus::Unsupported,
    }
}

/// Why a GET of several ranges brought no parts.
enum MultiFail {
    /// Worth another try (no answer, 5xx, 429, an answer cut short).
    Again(String),
    /// The server does not serve several ranges this way: fetch the runs one by one.
    Unsupported(String),
    /// The answer is final (412, 404, ...).
    Final(std::io::Error),
}

struct Inner {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    url: String,
    multi: Option<Multi>,
    len: u64,
    etag: Option<String>,
    /// Its number in the shared page cache.
    obj: u64,
    pages: Arc<PageCache>,
    ra_max: u64,
    /// Readahead at the start of a dataset's block (at most half the data budget).
    ra_first: u64,
    /// The file's own page size, when larger than [`PAGE`] (0: none): metadata misses fetch
    /// whole pages of it.
    meta_unit: AtomicU64,
    streams: Mutex<VecDeque<Stream>>,
    stats: RemoteStats,
}

/// A remote object (see the module docs).
pub struct Remote {
    inner: Arc<Inner>,
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
    fn count(&self, pick: fn(&RemoteStats) -> &AtomicU64, n: u64) {
        pick(&self.stats).fetch_add(n, Ordering::Relaxed);
        pick(&TOTALS).fetch_add(n, Ordering::Relaxed);
    }

    /// One ranged GET (with `If-Match`), once a request slot is free: the answer's bytes go to
    /// `each` as they arrive (which may refuse them: the answer is then in error).
    async fn get_each(
        &self,
        range: Range<u64>,
        mut each: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> std::io::Result<()> {
        use futures_util::StreamExt;
        let _slot = REQUESTS
            .acquire()
            .await
            .map_err(|e| io_err(&self.url, "GET", e))?;
        let want = range.end - range.start;
        let shown = format!("GET bytes {}-{}", range.start, range.end.saturating_sub(1));
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: self.etag.clone(),
            ..Default::default()
        };
        self.count(|s| &s.gets, 1);
        log::debug!("{}: {shown}", self.url);
        let fail = |why: String| {
            self.count(|s| &s.failures, 1);
            io_err(&self.url, &shown, why)
        };
        let failed = |e: object_store::Error| {
            fail(match e {
                object_store::Error::Precondition { .. } => {
                    self.count(|s| &s.changed, 1);
                    "the object changed since it was mounted (ETag no longer matches)".to_string()
                }
                e => e.to_string(),
            })
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
                return Err(fail(format!(
                    "more than the {want} bytes asked for in the answer"
                )));
            }
            each(&piece).map_err(fail)?;
        }
        if got != want {
            return Err(fail(format!("{got} bytes in the answer")));
        }
        self.count(|s| &s.bytes, want);
        Ok(())
    }

    /// One ranged GET (with `If-Match`), once a request slot is free.
    async fn get_one(&self, range: Range<u64>) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        self.get_each(range, |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// The bytes of `range`: one GET, or parallel GETs of [`PART`] bytes for a long range.
    async fn get(self: Arc<Self>, range: Range<u64>) -> std::io::Result<Vec<u8>> {
        if range.end - range.start <= PART {
            return self.get_one(range).await;
        }
        let mut parts = Vec::new();
        let mut at = range.start;
        while at < range.end {
            let end = (at + PART).min(range.end);
            let me = self.clone();
            parts.push(tokio::spawn(async move { me.get_one(at..end).await }));
            at = end;
        }
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        let mut first_err = None;
        for p in parts {
            match p.await {
                Ok(Ok(b)) => out.extend_from_slice(&b),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    first_err.get_or_insert(io_err(&self.url, "GET", e));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Fetch the page runs `wanted` (page ranges) in the background, merged across gaps of
    /// `gap` pages; returns the GETs sent. Behind an HTTP server that answers several ranges
    /// at once, short runs go [`MULTI_RANGES`] to a GET.
    fn fetch_behind(self: &Arc<Self>, wanted: &[(u64, u64)], gap: u64) -> u64 {
        let claims = self.pages.claim(self.obj, wanted, gap, PART / PAGE);
        let Ok(rt) = runtime() else {
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
                rt.spawn(me.fetch_one(b.remove(0)));
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
            rt.spawn(self.clone().fetch_one(c));
        }
        flush(&mut batch, &mut sent);
        sent
    }

    /// Fetch the pages of claim `c` with one GET of one range, each page kept (and its
    /// readers woken) as its bytes arrive.
    async fn fetch_one(self: Arc<Self>, c: Claim) {
        let range = c.range(self.len);
        let mut fill = self.pages.filling(c, self.len);
        let got = self.get_each(range, |b| fill.push(b)).await;
        fill.finish(got);
    }

    /// Whether GETs of several ranges are worth sending.
    fn multi_on(&self) -> bool {
        self.multi
            .as_ref()
            .is_some_and(|m| m.state.on.load(Ordering::Relaxed))
    }

    /// Fetch the claims of `batch` with one GET of several ranges, falling back to one GET
    /// each for what that did not bring.
    async fn fetch_batch(self: Arc<Self>, batch: Vec<Claim>) {
        let ranges: Vec<Range<u64>> = batch.iter().map(|c| c.range(self.len)).collect();
        let mut rest = Vec::new();
        match self.get_multi(&ranges).await {
            Ok(answer) => {
                for (c, r) in batch.into_iter().zip(&ranges) {
                    match answer.cover(r) {
                        Some(b) => self.pages.complete(&c, self.len, Ok(b.to_vec())),
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
            .map(|c| tokio::spawn(self.clone().fetch_one(c)))
            .collect();
        for l in left {
            let _ = l.await;
        }
    }

    /// One GET of several `ranges` (with `If-Match`), retried with backoff as
    /// `object_store` retries; the parts of the answer, `Err(None)` when the server does not
    /// answer such requests with parts (from then on none is sent to it).
    async fn get_multi(&self, ranges: &[Range<u64>]) -> Result<Answer, Option<std::io::Error>> {
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
        let deadline = Instant::now() + m.retry_total;
        let mut wait = Duration::from_millis(100);
        // Counted once, as a GET of one range is (its retries show in `net_stats`).
        self.count(|s| &s.gets, 1);
        loop {
            let got = {
                let _slot = REQUESTS
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
                        return Err(Some(io_err(&self.url, &shown, why)));
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Send no more GETs of several ranges to this server (said once in the log).
    fn stop_multi(&self, m: &Multi, why: &str) {
        if m.state.on.swap(false, Ordering::Relaxed) {
            log::info!(
                "{}: the server does not serve GETs of several ranges as parts ({why}); one \
                 GET per range from now on",
                self.url
            );
        }
    }

    /// Send one GET of several ranges and read its answer.
    async fn try_multi(&self, m: &Multi, ranges: &[Range<u64>]) -> Result<Answer, MultiFail> {
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
        let answer = m
            .client
            .execute(req)
            .await
            .map_err(|e| MultiFail::Again(e.to_string()))?;
        let status = answer.status().as_u16();
        match multi_status(status) {
            MultiStatus::Parts => {}
            MultiStatus::Again => return Err(MultiFail::Again(format!("status {status}"))),
            MultiStatus::Unsupported => {
                return Err(MultiFail::Unsupported(format!("status {status}")))
            }
            MultiStatus::Final => {
                let why = match status {
                    412 => {
                        self.count(|s| &s.changed, 1);
                        "the object changed since it was mounted (ETag no longer matches)"
                            .to_string()
                    }
                    _ => format!("status {status}"),
                };
                return Err(MultiFail::Final(io_err(
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
        let mut body = Vec::new();
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

    /// Follow the stream that a read of `offset..end` belongs to, and fetch ahead of it.
    fn readahead(self: &Arc<Self>, offset: u64, end: u64, hint: &DataHint) {
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
    fn new_stream(&self, offset: u64, end: u64, hint: &DataHint) -> (Stream, Option<(u64, u64)>) {
        let mut s = Stream {
            next: end,
            ahead: end,
            window: RA_MIN,
            streak: 0,
            object: hint.object,
            crossed: false,
            object_start: offset,
            span: 0,
            reader: super::source::reader(),
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
    fn advance(&self, offset: u64, end: u64, hint: &DataHint) -> Option<(u64, u64)> {
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
        let reader = super::source::reader();
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
    fn with_meta(
        store: Arc<dyn ObjectStore>,
        multi: Option<Multi>,
        path: StorePath,
        url: &str,
        len: u64,
        etag: Option<String>,
        opts: &RemoteOptions,
    ) -> Remote {
        let pages = shared_pages(opts);
        let data = pages.data_budget();
        let obj = object_number(&identity_of(url, len, etag.as_deref()));
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
                ra_max: RA_MAX.min(data / 2),
                ra_first: data / 2,
                meta_unit: AtomicU64::new(0),
                streams: Mutex::new(VecDeque::new()),
                stats: RemoteStats::default(),
            }),
        }
    }

    /// Read at `offset`, as data (readahead, data pages) or as metadata.
    fn read(&self, offset: u64, buf: &mut [u8], data: Option<&DataHint>) -> std::io::Result<usize> {
        let len = self.inner.len;
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(len - offset) as usize;
        let buf = &mut buf[..n];
        let class = if let Some(hint) = data {
            if !super::source::is_background() {
                self.inner.readahead(offset, offset + n as u64, hint);
            }
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
    /// a metadata miss in a file with its own larger page size takes that whole page).
    fn fetch_pages(&self, first: u64, count: u64, class: Class) -> std::io::Result<Vec<u8>> {
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
        let mut got = runtime()?.block_on(self.inner.clone().get(from..end))?;
        if from < start {
            let head = (start - from) as usize;
            self.inner
                .pages
                .keep(self.inner.obj, from / PAGE, &got[..head], len, class);
            got.drain(..head);
        }
        Ok(got)
    }
}

impl ByteSource for Remote {
    fn len(&self) -> u64 {
        self.inner.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.read(offset, buf, None)
    }

    fn read_data_at(&self, offset: u64, buf: &mut [u8], hint: &DataHint) -> std::io::Result<usize> {
        self.read(offset, buf, Some(hint))
    }

    fn note_data(&self, offset: u64, end: u64, hint: &DataHint) {
        let end = end.min(self.inner.len);
        if offset < end {
            self.inner.readahead(offset, end, hint);
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
            MERGE_GAP / PAGE
        };
        let sent = self.inner.fetch_behind(&pages, gap);
        if sent > 0 && asked > sent {
            self.inner.count(|s| &s.merged, asked - sent);
        }
    }

    fn wants_hints(&self) -> bool {
        true
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
        if let Ok(rt) = runtime() {
            let _ = rt.block_on(self.inner.get_multi(&ranges));
        }
    }

    fn page_size_hint(&self, bytes: u64) {
        if bytes > PAGE && bytes <= PART && bytes.is_power_of_two() {
            self.inner.meta_unit.store(bytes, Ordering::Relaxed);
        }
    }

    fn current_identity(&self) -> Option<std::io::Result<String>> {
        let r = runtime().and_then(|rt| {
            rt.block_on(self.inner.store.head(&self.inner.path))
                .map_err(|e| classify(&self.inner.url, "HEAD", e))
        });
        self.inner.count(|s| &s.heads, 1);
        Some(r.map(|m| identity_of(&self.inner.url, m.size, m.e_tag.as_deref())))
    }

    fn identity(&self) -> String {
        identity_of(&self.inner.url, self.inner.len, self.inner.etag.as_deref())
    }

    fn name(&self) -> String {
        self.inner.url.clone()
    }

    fn requests(&self) -> Option<RequestCounts> {
        Some(counts_of(&self.inner.stats))
    }
}

fn identity_of(url: &str, len: u64, etag: Option<&str>) -> String {
    match etag {
        Some(e) => format!("{url}:{len}:{e}"),
        None => format!("{url}:{len}"),
    }
}

// ---------------------------------------------------------------------------------------

/// The objects of one HTTP(S) server (`https://host`) or one bucket (`s3://bucket`): the
/// [`Opener`] of a remote mount. Paths are the part of a URL after the host or bucket
/// (`/dir/file.h5`). One client (and its connection pool) serves every object. Objects a
/// listing described are opened without a request (their size and ETag are known).
pub struct RemoteOrigin {
    store: Arc<dyn ObjectStore>,
    /// For an HTTP server: a client of its own for GETs of several ranges, the base URL, and
    /// whether the server answers them with parts (see [`Multi`]).
    multi: Option<(HttpClient, url::Url, Arc<MultiState>)>,
    /// `https://host` or `s3://bucket` (no trailing `/`).
    base: String,
    opts: RemoteOptions,
    /// Listings by directory (`a/b`, no slashes around; kept for the life of the mount: one
    /// LIST per directory), sorted by name.
    dirs: Mutex<std::collections::HashMap<String, Arc<Vec<OriginEntry>>>>,
}

impl std::fmt::Debug for RemoteOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOrigin")
            .field("base", &self.base)
            .finish()
    }
}

impl RemoteOrigin {
    /// The origin of `url` and the path of `url` in it (`/` for a whole bucket). Sends no
    /// request.
    pub fn of(url: &str, opts: &RemoteOptions) -> std::io::Result<(Arc<RemoteOrigin>, String)> {
        let (base, path) = split_url(url)?;
        let multi = match base.starts_with("s3://") {
            true => None,
            false => {
                let client = CountingConnector
                    .connect(&client_options(opts))
                    .map_err(|e| bad_url(base, &e.to_string()))?;
                let url = url::Url::parse(base).map_err(|e| bad_url(base, &e.to_string()))?;
                Some((client, url, MultiState::new()))
            }
        };
        Ok((
            Arc::new(RemoteOrigin {
                store: store_for(base, opts)?,
                multi,
                base: base.to_string(),
                opts: opts.clone(),
                dirs: Mutex::new(Default::default()),
            }),
            path.to_string(),
        ))
    }

    /// `https://host` or `s3://bucket`.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn key(path: &str) -> StorePath {
        StorePath::from(path.trim_start_matches('/'))
    }

    /// GETs of several ranges of the object `key` (HTTP servers only).
    fn multi(&self, key: &StorePath) -> Option<Multi> {
        let (client, base, state) = self.multi.as_ref()?;
        // As object_store's HTTP store names the object.
        let mut url = base.clone();
        url.path_segments_mut().ok()?.extend(key.parts());
        Some(Multi {
            client: client.clone(),
            url: url.to_string(),
            state: state.clone(),
            retry_total: self.opts.retry_total,
        })
    }

    /// The object at `path`, opened with one HEAD (none if a listing described it).
    pub fn object(&self, path: &str) -> std::io::Result<Remote> {
        let url = self.url(path);
        let key = Self::key(path);
        if let Some(e) = self.listed(path) {
            return Ok(Remote::with_meta(
                self.store.clone(),
                self.multi(&key),
                key,
                &url,
                e.size,
                e.etag,
                &self.opts,
            ));
        }
        let meta = runtime()?
            .block_on(self.store.head(&key))
            .map_err(|e| classify(&url, "HEAD", e))?;
        let r = Remote::with_meta(
            self.store.clone(),
            self.multi(&key),
            key,
            &url,
            meta.size,
            meta.e_tag,
            &self.opts,
        );
        r.inner.count(|s| &s.heads, 1);
        Ok(r)
    }

    /// What the directory `path` of a bucket holds, sorted by name: ListObjectsV2 with a `/`
    /// delimiter (one request per 1,000 keys), sent now.
    pub fn list_now(&self, path: &str) -> std::io::Result<Vec<OriginEntry>> {
        if !self.base.starts_with("s3://") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("{}: only s3:// prefixes can be listed", self.url(path)),
            ));
        }
        let dir = path.trim_matches('/');
        let url = match dir {
            "" => format!("{}/", self.base),
            d => format!("{}/{d}/", self.base),
        };
        let prefix = (!dir.is_empty()).then(|| StorePath::from(dir));
        let got = runtime()?
            .block_on(self.store.list_with_delimiter(prefix.as_ref()))
            .map_err(|e| classify(&url, "LIST", e))?;
        let name = |p: &StorePath| p.filename().map(str::to_string);
        let dirs = got.common_prefixes.iter().filter_map(|p| {
            Some(OriginEntry {
                name: name(p)?,
                dir: true,
                size: 0,
                modified: 0,
                etag: None,
            })
        });
        let objects = got.objects.iter().filter_map(|o| {
            Some(OriginEntry {
                name: name(&o.location)?,
                dir: false,
                size: o.size,
                modified: o.last_modified.timestamp(),
                etag: o.e_tag.clone(),
            })
        });
        let mut out: Vec<OriginEntry> = dirs.chain(objects).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

impl Opener for RemoteOrigin {
    fn open(&self, path: &str) -> std::io::Result<Arc<dyn ByteSource>> {
        Ok(Arc::new(self.object(path)?))
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base, path.trim_start_matches('/'))
    }

    fn list(&self, path: &str) -> std::io::Result<Vec<OriginEntry>> {
        let key = path.trim_matches('/').to_string();
        let lock = || self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = lock().get(&key) {
            return Ok(l.as_ref().clone());
        }
        let l = Arc::new(self.list_now(path)?);
        lock().insert(key, l.clone());
        Ok(l.as_ref().clone())
    }

    fn listed(&self, path: &str) -> Option<OriginEntry> {
        let path = path.trim_matches('/');
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let l = dirs.get(dir)?;
        let i = l.binary_search_by(|e| e.name.as_str().cmp(name)).ok()?;
        Some(l[i].clone()).filter(|e| !e.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_that_are_remote() {
        assert!(is_remote("s3://b/k.h5"));
        assert!(is_remote("https://h/f.h5"));
        assert!(!is_remote("/data/f.h5"));
        assert!(!is_remote("s3:/b"));
        assert!(is_prefix("s3://b") && is_prefix("s3://b/") && is_prefix("s3://b/p/q/"));
        assert!(!is_prefix("s3://b/k.h5") && !is_prefix("https://h/d/"));
        let o = RemoteOptions::default();
        assert!(Remote::open("s3://bucket", &o).is_err());
        assert!(split_url("s3:///key").is_err());
        assert!(split_url("http://host").is_err());
        assert_eq!(
            split_url("http://127.0.0.1:1/a/b.h5").unwrap(),
            ("http://127.0.0.1:1", "/a/b.h5")
        );
        let (o, p) = RemoteOrigin::of("s3://b/x/y/", &o).unwrap();
        assert_eq!((o.base(), p.as_str()), ("s3://b", "/x/y/"));
        assert_eq!(o.url("/x/y/f.h5"), "s3://b/x/y/f.h5");
        let (o2, p2) = RemoteOrigin::of("s3://b", &RemoteOptions::default()).unwrap();
        assert_eq!((o2.base(), p2.as_str()), ("s3://b", "/"));
        let (h, hp) = RemoteOrigin::of("https://host:8/a/b.h5", &RemoteOptions::default()).unwrap();
        assert_eq!((h.base(), hp.as_str()), ("https://host:8", "/a/b.h5"));
        assert!(RemoteOrigin::of("https://host", &RemoteOptions::default()).is_err());
        assert!(h.list_now("/a").is_err(), "HTTP has no listing");
    }

    /// An object that is never asked for anything: the readahead bookkeeping only.
    fn unreached(len: u64) -> Remote {
        let opts = RemoteOptions::default();
        let url = "http://127.0.0.1:1/f.h5";
        let store = store_for("http://127.0.0.1:1", &opts).unwrap();
        Remote::with_meta(store, None, StorePath::from("f.h5"), url, len, None, &opts)
    }

    #[test]
    fn only_the_same_process_carries_a_stream_into_the_next_dataset() {
        // Two chunked datasets, A's chunks right before B's, read one chunk at a time.
        let chunk = 160 << 10;
        let (a, b) = (
            DataHint {
                object: 1,
                extent: None,
            },
            DataHint {
                object: 2,
                extent: None,
            },
        );
        let a_chunks = [1 << 20, (1 << 20) + chunk, (1 << 20) + 2 * chunk];
        let b_start = (1 << 20) + 3 * chunk;
        let read_a = |r: &Remote| {
            for &at in &a_chunks {
                // Within one chunked dataset nothing is fetched ahead.
                assert_eq!(r.inner.advance(at, at + chunk, &a), None);
            }
        };
        let read_b = |r: &Remote| {
            (0..3)
                .map(|i| {
                    r.inner
                        .advance(b_start + i * chunk, b_start + (i + 1) * chunk, &b)
                })
                .collect::<Vec<_>>()
        };
        // One process reads A, then B: a reader going through the file, read ahead.
        let r = unreached(64 << 20);
        let ahead = super::super::source::as_reader(7, || {
            read_a(&r);
            read_b(&r)
        });
        assert!(ahead.iter().any(|t| t.is_some()), "{ahead:?}");
        // Another process reads B while (or after) the first reads A: two readers, each
        // of one dataset; nothing fetched past B.
        let r = unreached(64 << 20);
        super::super::source::as_reader(7, || read_a(&r));
        let ahead = super::super::source::as_reader(8, || read_b(&r));
        assert!(ahead.iter().all(|t| t.is_none()), "{ahead:?}");
    }

    #[test]
    fn answers_to_several_ranges_are_classified() {
        assert_eq!(multi_status(206), MultiStatus::Parts);
        for s in [429, 500, 502, 503, 504] {
            assert_eq!(multi_status(s), MultiStatus::Again, "{s}");
        }
        for s in [401, 403, 404, 410, 412] {
            assert_eq!(multi_status(s), MultiStatus::Final, "{s}");
        }
        for s in [200, 204, 301, 400, 416, 501, 505] {
            assert_eq!(multi_status(s), MultiStatus::Unsupported, "{s}");
        }
    }

    #[test]
    fn latency_percentiles_come_from_buckets() {
        let b = bucket_of(Duration::from_millis(30));
        assert!(
            bucket_ms(b) >= 30.0 && bucket_ms(b) < 30.0 * 1.2,
            "{}",
            bucket_ms(b)
        );
        assert_eq!(bucket_of(Duration::ZERO), 0);
        assert_eq!(bucket_of(Duration::from_secs(1 << 30)), BUCKETS - 1);
    }
}
