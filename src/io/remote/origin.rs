//! One HTTP(S) server or one bucket: its store, its objects and (for a bucket) its listings.

use std::sync::{Arc, Mutex};

use object_store::client::{HttpClient, HttpConnector};
use object_store::path::Path as StorePath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt};

use super::super::source::{ByteSource, Opener, OriginEntry, RequestCounts};
use super::error::{bad_url, classify, remote_err, RemoteKind};
use super::list::Lister;
use super::multirange::{Multi, MultiState};
use super::net::{CountingConnector, Redirects};
use super::object::Remote;
use super::RemoteOptions;
use object_store::aws::AmazonS3ConfigKey;

/// `url` split into its origin (`https://host`, `s3://bucket`) and its path (`/dir/f.h5`; `/`
/// for a whole bucket). An HTTP URL must have a path.
pub(super) fn split_url(url: &str) -> std::io::Result<(&str, &str)> {
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
pub(super) fn client_options(opts: &RemoteOptions) -> ClientOptions {
    ClientOptions::new()
        .with_timeout(opts.request_timeout)
        .with_connect_timeout(opts.request_timeout)
        .with_allow_http(true)
}

/// The connector of the origin `base`: no redirect for a store, the same origin (or any,
/// when allowed) for an HTTP server.
pub(super) fn connector(base: &str, opts: &RemoteOptions) -> CountingConnector {
    let redirects = match (base.starts_with("s3://"), opts.allow_redirects) {
        (true, _) => Redirects::Never,
        (false, false) => Redirects::SameOrigin,
        (false, true) => Redirects::Any,
    };
    CountingConnector {
        timeout: opts.request_timeout,
        redirects,
        net: opts.context.net().clone(),
    }
}

/// Whether the standard AWS sources can hold no credentials: none given, none in the
/// environment, and the instance metadata turned off (`AWS_EC2_METADATA_DISABLED`).
fn surely_no_credentials(opts: &RemoteOptions) -> bool {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    opts.credential_provider.is_none()
        && !opts.no_sign
        && ![
            "AWS_ACCESS_KEY_ID",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        ]
        .iter()
        .any(|k| set(k))
        && std::env::var("AWS_EC2_METADATA_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The store of the origin `base` (`s3://bucket` or `http(s)://host`), and for a bucket how
/// to list it.
pub(super) fn store_for(
    base: &str,
    opts: &RemoteOptions,
) -> std::io::Result<(Arc<dyn ObjectStore>, Option<Lister>)> {
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
            .with_http_connector(connector(base, opts))
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
        if surely_no_credentials(opts) {
            return Err(remote_err(
                RemoteKind::Denied,
                base,
                "credentials",
                "no credentials found (no --profile, no AWS_ACCESS_KEY_ID, web identity or \
                 container credentials, and AWS_EC2_METADATA_DISABLED is set): give them, or \
                 --no-sign-request for a public bucket",
            ));
        }
        let get = |k| b.get_config_value(&k);
        let region = get(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into());
        let bucket_url = match (get(AmazonS3ConfigKey::Endpoint), opts.virtual_hosted) {
            (Some(e), true) => e.trim_end_matches('/').to_string(),
            (Some(e), false) => format!("{}/{bucket}", e.trim_end_matches('/')),
            (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
            (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
        };
        let store = Arc::new(b.build().map_err(|e| bad_url(base, &e.to_string()))?);
        let lister = Lister {
            client: connector(base, opts)
                .connect(&client_options(opts))
                .map_err(|e| bad_url(base, &e.to_string()))?,
            bucket_url,
            base: base.to_string(),
            store: (!opts.no_sign).then(|| store.clone()),
            region,
            max_keys: opts.list_max_keys.max(1),
            bound: opts.bound(),
        };
        return Ok((store, Some(lister)));
    }
    let store = object_store::http::HttpBuilder::new()
        .with_url(base)
        .with_client_options(client)
        .with_retry(retry)
        .with_http_connector(connector(base, opts))
        .build()
        .map_err(|e| bad_url(base, &e.to_string()))?;
    Ok((Arc::new(store), None))
}

// ---------------------------------------------------------------------------------------

/// The objects of one HTTP(S) server (`https://host`) or one bucket (`s3://bucket`): the
/// [`Opener`] of a remote mount. Paths are the part of a URL after the host or bucket
/// (`/dir/file.h5`). One client (and its connection pool) serves every object. Objects a
/// listing described are opened without a request (their size and ETag are known).
pub struct RemoteOrigin {
    store: Arc<dyn ObjectStore>,
    /// For a bucket: how to list it ([`super::list`]).
    lister: Option<Lister>,
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
                let client = connector(base, opts)
                    .connect(&client_options(opts))
                    .map_err(|e| bad_url(base, &e.to_string()))?;
                let url = url::Url::parse(base).map_err(|e| bad_url(base, &e.to_string()))?;
                Some((client, url, MultiState::new()))
            }
        };
        let (store, lister) = store_for(base, opts)?;
        Ok((
            Arc::new(RemoteOrigin {
                store,
                lister,
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

    pub(super) fn key(path: &str) -> StorePath {
        StorePath::from(path.trim_start_matches('/'))
    }

    /// GETs of several ranges of the object `key` (HTTP servers only).
    pub(super) fn multi(&self, key: &StorePath) -> Option<Multi> {
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
        let meta = self
            .opts
            .context
            .block_on_bounded(self.opts.bound(), &url, "HEAD", async {
                self.store
                    .head(&key)
                    .await
                    .map_err(|e| classify(&url, "HEAD", e))
            })
            .map_err(|e| self.why_missing(path, e))?;
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

    /// `e`, the error of a HEAD of `path`, said better where a listing can tell more: a
    /// missing bucket, or a key that is a prefix (`s3://bucket/run` for `run/`).
    fn why_missing(&self, path: &str, e: std::io::Error) -> std::io::Error {
        let (Some(lister), Some(RemoteKind::NotFound)) = (&self.lister, RemoteKind::of(&e)) else {
            return e;
        };
        let dir = path.trim_matches('/');
        let probe = self.opts.context.block_on_bounded(
            lister.bound,
            &self.url(path),
            "LIST",
            lister.list(dir, 1),
        );
        match probe {
            Ok(l) if !l.is_empty() => remote_err(
                RemoteKind::NotFound,
                &self.url(path),
                "HEAD",
                format!(
                    "no such object, but a prefix: mount {}/{dir}/ (with the trailing slash)",
                    self.base
                ),
            ),
            // A LIST of a prefix answers 404 only for a bucket that does not exist.
            Err(p) if RemoteKind::of(&p) == Some(RemoteKind::NotFound) => p,
            _ => e,
        }
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
        let Some(lister) = &self.lister else {
            return Err(bad_url(&self.url(path), "no listing for this store"));
        };
        let dir = path.trim_matches('/');
        let shown = format!("{}/{dir}", self.base);
        self.opts.context.block_on_bounded(
            lister.bound,
            &shown,
            "LIST",
            lister.list(dir, lister.max_keys),
        )
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
        let lock = || crate::sync::lock(&self.dirs);
        if let Some(l) = lock().get(&key) {
            return Ok(l.as_ref().clone());
        }
        let l = Arc::new(self.list_now(path)?);
        lock().insert(key, l.clone());
        Ok(l.as_ref().clone())
    }

    fn requests(&self) -> Option<RequestCounts> {
        Some(self.opts.context.totals())
    }

    fn listed(&self, path: &str) -> Option<OriginEntry> {
        let path = path.trim_matches('/');
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let dirs = crate::sync::lock(&self.dirs);
        let l = dirs.get(dir)?;
        let i = l.binary_search_by(|e| e.name.as_str().cmp(name)).ok()?;
        Some(l[i].clone()).filter(|e| !e.dir)
    }
}
