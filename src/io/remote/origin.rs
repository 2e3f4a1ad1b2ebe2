//! One HTTP(S) server or one bucket: its store, its objects and (for a bucket) its listings.

use std::sync::{Arc, Mutex};

use object_store::client::{HttpClient, HttpConnector};
use object_store::path::Path as StorePath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt};

use super::super::source::{ByteSource, Opener, OriginEntry};
use super::context::{block_on_bounded, runtime};
use super::error::{bad_url, classify};
use super::multirange::{Multi, MultiState};
use super::net::{CountingConnector, Redirects};
use super::object::Remote;
use super::RemoteOptions;

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
    }
}

/// The store of the origin `base` (`s3://bucket` or `http(s)://host`).
pub(super) fn store_for(base: &str, opts: &RemoteOptions) -> std::io::Result<Arc<dyn ObjectStore>> {
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
        if let Some(c) = &opts.credentials {
            b = b
                .with_access_key_id(c.key_id.clone())
                .with_secret_access_key(c.secret.clone());
            if let Some(t) = &c.token {
                b = b.with_token(t.clone());
            }
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
        .with_http_connector(connector(base, opts))
        .build()
        .map_err(|e| bad_url(base, &e.to_string()))?;
    Ok(Arc::new(store))
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
                let client = connector(base, opts)
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

    /// The longest one request may take, retries included.
    fn bound(&self) -> std::time::Duration {
        self.opts
            .retry_total
            .saturating_add(self.opts.request_timeout)
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
        let meta = block_on_bounded(self.bound(), &url, "HEAD", async {
            self.store
                .head(&key)
                .await
                .map_err(|e| classify(&url, "HEAD", e))
        })?;
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
