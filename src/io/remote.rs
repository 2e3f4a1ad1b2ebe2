//! Remote byte sources: an object on an S3-compatible store (`s3://bucket/key`) or a file
//! behind an HTTP(S) server that answers range requests (`https://host/path`), read through
//! the `object_store` crate (Apache Arrow's: one client for S3 and HTTP with request signing,
//! credentials from the standard AWS sources, timeouts and retries).
//!
//! `object_store` is asynchronous; one small Tokio runtime per process runs its requests, and
//! the FUSE worker threads block on them ([`Remote::read_at`] is a plain blocking call).
//!
//! Requests are costly on a store (tens of milliseconds each), so reads go through a page
//! cache ([`pages`](super::pages)): aligned pages, bounded in bytes, each fetched once
//! however many readers miss it at the same time, runs of missing pages fetched with one
//! ranged GET. The first read of an object takes its first 1 MiB, where the superblock and
//! (in most files) the root group's metadata live, so a mount is ready after one HEAD and one
//! GET. Large reads (decoded chunks are cached above, in the chunk cache) bypass the pages.
//!
//! Every GET carries `If-Match` with the ETag seen when the object was opened: an object
//! replaced while mounted fails the reads (`EIO`), never mixing old and new bytes.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::pages::{PageCache, PAGE};
use super::source::{ByteSource, RequestCounts};

/// Bytes the first GET of an object takes.
pub const FIRST_GET: u64 = 1 << 20;
/// Reads at least this long skip the page cache (one GET for exactly the range).
pub const DIRECT_READ: usize = 256 << 10;

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
    /// Longest one request may take (`--request-timeout`).
    pub request_timeout: Duration,
    /// Longest a read may spend retrying (5xx, throttling, timeouts) before it fails.
    pub retry_total: Duration,
    /// Bytes of the page cache of each object.
    pub page_cache_bytes: u64,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            endpoint: None,
            region: None,
            no_sign: false,
            virtual_hosted: false,
            request_timeout: Duration::from_secs(10),
            retry_total: Duration::from_secs(30),
            page_cache_bytes: 64 << 20,
        }
    }
}

/// Whether `source` names a remote object rather than a local path.
pub fn is_remote(source: &str) -> bool {
    ["s3://", "http://", "https://"]
        .iter()
        .any(|p| source.starts_with(p))
}

/// Request counters of one remote object.
#[derive(Debug, Default)]
pub struct RemoteStats {
    pub heads: AtomicU64,
    pub gets: AtomicU64,
    pub bytes: AtomicU64,
    pub failures: AtomicU64,
    pub changed: AtomicU64,
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

/// A remote object (see the module docs).
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    url: String,
    len: u64,
    etag: Option<String>,
    pages: PageCache,
    pub stats: RemoteStats,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("len", &self.len)
            .finish()
    }
}

fn io_err(url: &str, what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{url}: {what}: {e}"))
}

/// The store and object path `url` names.
fn store_for(
    url: &str,
    opts: &RemoteOptions,
) -> std::io::Result<(Arc<dyn ObjectStore>, StorePath)> {
    let bad =
        |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{url}: {why}"));
    let retry = object_store::RetryConfig {
        retry_timeout: opts.retry_total,
        ..Default::default()
    };
    let client = object_store::ClientOptions::new()
        .with_timeout(opts.request_timeout)
        .with_connect_timeout(opts.request_timeout)
        .with_allow_http(true);
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, key) = rest
            .split_once('/')
            .ok_or_else(|| bad("no key after the bucket"))?;
        if bucket.is_empty() || key.is_empty() {
            return Err(bad("expected s3://BUCKET/KEY"));
        }
        let mut b = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_client_options(client)
            .with_retry(retry)
            .with_virtual_hosted_style_request(opts.virtual_hosted)
            .with_skip_signature(opts.no_sign);
        if let Some(e) = &opts.endpoint {
            b = b.with_endpoint(e.clone());
        }
        if let Some(r) = &opts.region {
            b = b.with_region(r.clone());
        }
        let store = b.build().map_err(|e| bad(&e.to_string()))?;
        return Ok((Arc::new(store), StorePath::from(key)));
    }
    let after_scheme = url
        .find("://")
        .map(|i| i + 3)
        .ok_or_else(|| bad("not a URL"))?;
    let path_at = url[after_scheme..]
        .find('/')
        .map(|i| i + after_scheme)
        .ok_or_else(|| bad("no path in the URL"))?;
    let (base, path) = url.split_at(path_at);
    let store = object_store::http::HttpBuilder::new()
        .with_url(base)
        .with_client_options(client)
        .with_retry(retry)
        .build()
        .map_err(|e| bad(&e.to_string()))?;
    Ok((
        Arc::new(store),
        StorePath::from(path.trim_start_matches('/')),
    ))
}

impl Remote {
    /// Open the object at `url` with one HEAD (its length and ETag).
    pub fn open(url: &str, opts: &RemoteOptions) -> std::io::Result<Remote> {
        let (store, path) = store_for(url, opts)?;
        let rt = runtime()?;
        let meta = rt.block_on(store.head(&path)).map_err(|e| match e {
            object_store::Error::NotFound { .. } => std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{url}: no such object"),
            ),
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{url}: access denied"),
            ),
            e => io_err(url, "HEAD", e),
        })?;
        let r = Remote {
            store,
            path,
            url: url.to_string(),
            len: meta.size,
            etag: meta.e_tag.clone(),
            pages: PageCache::new(opts.page_cache_bytes.max(2 * FIRST_GET)),
            stats: RemoteStats::default(),
        };
        r.stats.heads.fetch_add(1, Ordering::Relaxed);
        Ok(r)
    }

    /// One ranged GET (with `If-Match`).
    fn get(&self, range: Range<u64>) -> std::io::Result<Vec<u8>> {
        let rt = runtime()?;
        let want = range.end - range.start;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: self.etag.clone(),
            ..Default::default()
        };
        self.stats.gets.fetch_add(1, Ordering::Relaxed);
        let got = rt.block_on(async {
            let r = self.store.get_opts(&self.path, opts).await?;
            r.bytes().await
        });
        let bytes = got.map_err(|e| {
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            let why = match e {
                object_store::Error::Precondition { .. } => {
                    self.stats.changed.fetch_add(1, Ordering::Relaxed);
                    "the object changed since it was mounted (ETag no longer matches)".to_string()
                }
                e => e.to_string(),
            };
            io_err(
                &self.url,
                &format!("GET bytes {}-{}", range.start, range.end - 1),
                why,
            )
        })?;
        if bytes.len() as u64 != want {
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            return Err(io_err(
                &self.url,
                &format!("GET bytes {}-{}", range.start, range.end - 1),
                format!("{} bytes in the answer", bytes.len()),
            ));
        }
        self.stats.bytes.fetch_add(want, Ordering::Relaxed);
        Ok(bytes.to_vec())
    }
}

impl ByteSource for Remote {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        if offset >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(self.len - offset) as usize;
        let buf = &mut buf[..n];
        if n >= DIRECT_READ {
            let bytes = self.get(offset..offset + n as u64)?;
            buf.copy_from_slice(&bytes);
            return Ok(n);
        }
        self.pages
            .read(offset, buf, self.len, |first_page, pages| {
                // The first fetch of the object takes its head at once.
                let start = first_page * PAGE;
                let mut end = (first_page + pages) * PAGE;
                if start == 0 {
                    end = end.max(FIRST_GET);
                }
                let end = end.min(self.len);
                self.get(start..end)
            })?;
        Ok(n)
    }

    fn identity(&self) -> String {
        self.etag
            .clone()
            .unwrap_or_else(|| format!("{}:{}", self.url, self.len))
    }

    fn name(&self) -> String {
        self.url.clone()
    }

    fn requests(&self) -> Option<RequestCounts> {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Some(RequestCounts {
            heads: get(&self.stats.heads),
            gets: get(&self.stats.gets),
            bytes: get(&self.stats.bytes),
            failures: get(&self.stats.failures),
            changed: get(&self.stats.changed),
        })
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
        let o = RemoteOptions::default();
        assert!(store_for("s3://bucket", &o).is_err());
        assert!(store_for("s3:///key", &o).is_err());
        assert!(store_for("http://host", &o).is_err());
        let (_, p) = store_for("http://127.0.0.1:1/a/b.h5", &o).unwrap();
        assert_eq!(p.as_ref(), "a/b.h5");
    }
}
