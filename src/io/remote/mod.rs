//! Remote byte sources: an object on an S3-compatible store (`s3://bucket/key`) or a file
//! behind an HTTP(S) server that answers range requests (`https://host/path`), read through
//! the `object_store` crate (Apache Arrow's: one client for S3 and HTTP with request signing,
//! credentials from the standard AWS sources, timeouts and retries with backoff). A prefix
//! of a bucket (`s3://bucket/prefix/`) is listed through [`RemoteOrigin`].
//!
//! `object_store` is asynchronous; one small Tokio runtime runs its requests, and the FUSE
//! worker threads block on them ([`Remote`]'s `read_at` is a plain blocking call). The
//! runtime, the page cache, the bound on requests in flight and the counters belong to one
//! [`RemoteContext`], made with the options of a mount and shared by everything opened with
//! them (module `context`).
//!
//! ## Few requests, many in flight
//! Requests are costly on a store (tens of milliseconds each), so reads go through a page
//! cache ([`pages`](super::pages)): aligned pages, bounded in bytes, each fetched once
//! however many readers miss it at the same time, runs of missing pages fetched with one
//! ranged GET. The pages are small ([`PAGE`](super::pages::PAGE), 16 KiB), so what is fetched for scattered
//! pieces (the headers of a group's children, each a few hundred bytes and often far
//! apart) is not much more than the pieces; a metadata read that misses fetches the
//! aligned [`META_UNIT`] (64 KiB) around it, since the next metadata read is most often
//! near the last. The first read of an object takes its first 1 MiB, where the superblock and
//! (in most files) the root group's metadata live, so a mount is ready after one HEAD and one
//! GET. Small reads (metadata) and large ones (data) count against separate budgets, so
//! streaming data never pushes out the metadata a listing needs.
//!
//! Three things keep a reader from waiting one round trip per piece:
//! - [`RemoteSource::prefetch`](super::RemoteSource::prefetch): the layers above name the ranges they will read next (the
//!   object headers of a group's children, the chunks of one read); their pages are fetched
//!   in the background, ranges with small gaps merged into one GET of at most [`PART`] bytes,
//!   and the GETs sent in parallel. Behind an HTTP server, short runs (at most
//!   [`MULTI_RUN`]) go [`MULTI_RANGES`] to a GET of several ranges, answered as
//!   `multipart/byteranges` ([`super::byteranges`]), with no gap fetched between
//!   them; a server that answers such a GET otherwise (the whole object, most often) is not
//!   sent another, and its answer is not read. Until the server has answered one with
//!   parts, they go one at a time; the warm-up of a mount asks it one of single bytes
//!   ([`RemoteSource::warm_up`](super::RemoteSource::warm_up)) if nothing else has yet. S3 serves one range per GET.
//! - Readahead: data reads that follow each other through the object form a stream. Each
//!   read says which dataset it belongs to ([`DataHint`](super::DataHint)) and for whom it
//!   is made ([`ReadCtx`](super::ReadCtx): a prefetch worker's reads are no reader's
//!   progress and move no stream), and a stream reads ahead only where the reader is known
//!   to go (the rules are one pure state machine, `readahead::Readahead`, property-tested):
//!   - within a contiguous dataset, up to the end of its block; a read of at least
//!     [`RA_FIRST`] bytes at the block's start, or within two of its lengths of it (`cat`,
//!     `cp`, `dd`, whose first reads reach the FUSE threads in either order), fetches the
//!     block ahead at once, up to half the data budget;
//!   - within a chunked dataset, nothing: its chunks are fetched by each read's own hints
//!     and by the chunk prefetch of the filesystem layer, which asks for the chunks ahead
//!     (of a handle's image, or of a Zarr array's chunk keys read in grid order);
//!   - once the stream has gone on from one dataset into another (their data in file order:
//!     a `cat` of a file's datasets one after another; the same reader reading both, not
//!     two readers each reading its own dataset), across datasets, from its
//!     [`RA_STREAK`]th read on, in a window that doubles up to [`RA_MAX`] but reaches at
//!     most `RA_CROSS` times the span of the dataset read last: the reader's next
//!     datasets, not much of what follows the last one it reads. A reader going through a
//!     group's datasets in listing order is also read ahead by the filesystem layer
//!     (`fs::siblings`), which knows where it goes next, so this window can stay short
//!     (8 spans: little is fetched past the last dataset read, for a small loss of speed
//!     against 16; figures in `docs/performance.md`).
//!
//!   So reading one dataset moves about its own bytes, never the data that follows it.
//! - A missing run longer than [`PART`] is fetched as parallel GETs of [`PART`] bytes.
//! - The pages of a background GET of one range are kept, and their readers woken, as its
//!   answer arrives ([`PageCache::filling`](super::pages::PageCache::filling)), not when the whole of it is in; the answer is
//!   copied once, into the pages.
//!
//! At most [`MAX_REQUESTS`] GETs are in flight in a context, and the bytes of background
//! fetches in flight count against the data budget (a hint that does not fit is dropped).
//!
//! ## Faults
//! Every request has a timeout that covers its body too; `object_store` retries 5xx
//! answers, throttling and timeouts with backoff, and whatever it does, a request (a GET, a
//! GET of several ranges, a HEAD, a LIST) fails at [`RemoteOptions::bound`] (the retry
//! bound and one request's timeout) wherever it is then: waiting for a slot, retrying, or
//! reading the body. The read then fails (`EIO`, with the URL, range and cause in the
//! message, and a [`RemoteKind`]), and the pages it wanted fail again at once for a short
//! while ([`FAIL_HOLD`](super::pages::FAIL_HOLD)). Answers a hostile or broken server could
//! abuse (redirects, content encodings, bodies that are not the range asked for) are
//! refused by the client itself (module `net`), and listings are bounded (module `list`).
//!
//! Every GET carries `If-Match` with the ETag seen when the object was opened: an object
//! replaced while mounted fails the reads (a 412), never mixing old and new bytes;
//! [`RemoteSource::current_identity`](super::RemoteSource::current_identity) asks for the ETag
//! afresh (a HEAD), which is what `--refresh` compares.
//!
//! Every HTTP request, retries included, passes through a counting connector: requests by
//! kind, retries, and latency percentiles for the context
//! ([`RemoteContext::net_stats`]).

/// Bytes the first GET of an object takes.
pub const FIRST_GET: u64 = 1 << 20;
/// Metadata reads at least this long count as data (their pages against the data budget).
pub const DIRECT_READ: usize = 256 << 10;
/// Longest GET of merged ranges, and the part size of long fetches sent in parallel.
pub const PART: u64 = 4 << 20;
/// Default gap between metadata ranges that are still merged into one GET on a server that
/// answers one range per GET (the gap's bytes are fetched too): [`RemoteOptions::merge_gap`].
pub const MERGE_GAP: u64 = 128 << 10;
/// A GET of merged metadata ranges is at most this many merge gaps long (and at least
/// [`PART`]).
pub const MERGE_SPAN: u64 = 16;
/// What a metadata miss fetches at least (aligned).
pub const META_UNIT: u64 = 64 << 10;
/// GETs in flight in one context.
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

#[cfg(test)]
mod buffer_tests;
#[cfg(test)]
mod canned;
#[cfg(test)]
mod canned_tests;
mod context;
mod error;
mod list;
mod multirange;
mod net;
mod object;
mod origin;
mod readahead;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;

pub use context::{RemoteContext, RemoteStats};
pub(crate) use error::chain;
pub use error::RemoteKind;
pub use net::NetStats;
pub(crate) use net::{CountingConnector, Redirects};
pub use object::Remote;
pub use origin::RemoteOrigin;

use std::time::Duration;

/// Entries of one directory of a bucket listed at most, unless `--list-max-keys` says.
pub const DEFAULT_LIST_MAX_KEYS: usize = 50_000;

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
    /// Follow an HTTP(S) server's redirects to other origins too (`--allow-redirects`); a
    /// store's redirects are never followed.
    pub allow_redirects: bool,
    /// Entries of one directory of a bucket listed at most (`--list-max-keys`).
    pub list_max_keys: usize,
    /// The credentials of `--profile` ([`super::aws_credentials`]), kept fresh; default:
    /// the standard AWS sources.
    pub credential_provider: Option<object_store::aws::AwsCredentialProvider>,
    /// Longest one request may take (`--request-timeout`).
    pub request_timeout: Duration,
    /// Longest a read may spend retrying (5xx, throttling, timeouts) before it fails.
    pub retry_total: Duration,
    /// Metadata ranges at most this far apart go in one GET on a server that answers one
    /// range per GET (`--merge-gap`; default [`MERGE_GAP`]), the bytes between them too; one
    /// such GET is at most [`MERGE_SPAN`] gaps long, or [`PART`] if that is longer. Servers
    /// that answer several ranges in one GET are asked for the ranges alone.
    pub merge_gap: u64,
    /// What everything opened with these options shares (clones of the options share it
    /// too): the page cache, the runtime, the counters.
    pub context: RemoteContext,
}

impl RemoteOptions {
    /// The longest one request may take, retries included: the retry bound and one
    /// request's timeout.
    pub fn bound(&self) -> Duration {
        self.retry_total.saturating_add(self.request_timeout)
    }
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            endpoint: None,
            region: None,
            no_sign: false,
            virtual_hosted: false,
            allow_redirects: false,
            list_max_keys: DEFAULT_LIST_MAX_KEYS,
            credential_provider: None,
            request_timeout: Duration::from_secs(10),
            retry_total: Duration::from_secs(30),
            merge_gap: MERGE_GAP,
            context: RemoteContext::default(),
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
