//! The options of a remote source as plain data, shared by mounting and `inspect`, and the
//! checks of their values and of remote SOURCE URLs.
//!
//! The object-store client takes an endpoint, a region or a bucket as it is given, and some
//! malformed ones make it panic at the first request (an endpoint without a scheme is one)
//! or address another host than meant. So every value is checked here, on the command line,
//! before anything is built from it; a check returns the reason it failed, and the caller
//! names the option and shows the value through [`shown`] (one line, user-info hidden).
//!
//! The rules:
//! - endpoint: an absolute `http://` or `https://` URL with a host and an optional port and
//!   path (object_store puts `/BUCKET/KEY` after it, or only `/KEY` with
//!   `--virtual-hosted`), no user-info, query or fragment. It is passed on as the `url`
//!   crate writes it back (percent-encoded, default port dropped, no trailing `/`).
//! - region: 1 to 63 of `a-z`, `0-9` and `-`, not beginning or ending with `-` (it becomes a
//!   label of `s3.REGION.amazonaws.com` when there is no endpoint).
//! - profile: 1 to 128 characters, no control characters, no `/`, no surrounding spaces.
//! - timeouts: seconds from 0.1 to 3600 (see [`parse_seconds`]).
//! - `s3://BUCKET/...`: BUCKET of 3 to 63 characters of `a-z`, `0-9`, `.`, `-` and `_`,
//!   beginning and ending with a letter or digit, without `..`. This is AWS's rule plus the
//!   underscore, which some S3-compatible stores (Ceph with relaxed names, AWS's legacy
//!   buckets) accept; with `--virtual-hosted` the bucket is a host name label, so `_` is
//!   refused there.
//! - `http(s)://HOST/PATH`: a URL with a host and a path naming an object, no query or
//!   fragment (the path is taken as an object name, so `?...` would name another object),
//!   no user-info: credentials in a URL are refused, never silently dropped.
//! - the environment the S3 client reads (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`,
//!   `AWS_ENDPOINT`, `AWS_REGION`, `AWS_DEFAULT_REGION`) is held to the same rules for an
//!   `s3://` source, and a profile's `endpoint_url` and `region` likewise.

use std::time::Duration;

/// Default bound on one request to a remote source.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on the retries of one read of a remote source.
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(30);
/// Shortest and longest request and retry timeouts accepted.
pub const TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(3600));
/// Longest profile name accepted.
const MAX_PROFILE_LEN: usize = 128;
/// Longest region accepted: one DNS label.
const MAX_REGION_LEN: usize = 63;
/// Shortest and longest bucket name accepted (S3's rule).
const BUCKET_LEN: (usize, usize) = (3, 63);
/// Environment variables the S3 client takes an endpoint from (the first even over an
/// endpoint given as an option).
const ENDPOINT_VARS: [&str; 3] = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"];
/// Environment variables the S3 client takes a region from.
const REGION_VARS: [&str; 2] = ["AWS_REGION", "AWS_DEFAULT_REGION"];

/// How to reach a remote source: every option checked (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteConfig {
    /// S3 endpoint of an S3-compatible store (`--endpoint`, `-o endpoint=`).
    pub endpoint: Option<String>,
    /// S3 region (`--region`, `-o region=`).
    pub region: Option<String>,
    /// Named AWS profile for credentials (`--profile`, `-o profile=`).
    pub profile: Option<String>,
    /// Unsigned requests, for public buckets (`--no-sign-request`, `-o no_sign_request`).
    pub no_sign_request: bool,
    /// Virtual-hosted S3 addressing (`--virtual-hosted`, `-o virtual_hosted`).
    pub virtual_hosted: bool,
    /// Follow redirects to other origins (`--allow-redirects`, `-o allow_redirects`).
    pub allow_redirects: bool,
    /// Entries of one bucket directory listed at most (`--list-max-keys`).
    pub list_max_keys: usize,
    /// Longest one request may take (`--request-timeout`, `-o request_timeout=`).
    pub request_timeout: Duration,
    /// Longest a read may retry before failing (`--retry-timeout`, `-o retry_timeout=`).
    pub retry_timeout: Duration,
    /// Metadata ranges at most this many bytes apart go in one GET on a server that answers
    /// one range per GET (`--merge-gap`, `-o merge_gap=`).
    pub merge_gap: u64,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            endpoint: None,
            region: None,
            profile: None,
            no_sign_request: false,
            virtual_hosted: false,
            allow_redirects: false,
            list_max_keys: DEFAULT_LIST_MAX_KEYS,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            retry_timeout: DEFAULT_RETRY_TIMEOUT,
            merge_gap: DEFAULT_MERGE_GAP,
        }
    }
}

impl RemoteConfig {
    /// The options of the remote reader, with the credentials (and region and endpoint,
    /// unless given) of `--profile`, whose values are held to the same rules.
    #[cfg(feature = "remote")]
    pub fn options(&self) -> Result<h5mount::io::remote::RemoteOptions, String> {
        use h5mount::io::remote::RemoteOptions;
        let mut ropts = RemoteOptions {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            no_sign: self.no_sign_request,
            virtual_hosted: self.virtual_hosted,
            allow_redirects: self.allow_redirects,
            list_max_keys: self.list_max_keys,
            request_timeout: self.request_timeout,
            retry_total: self.retry_timeout,
            merge_gap: self.merge_gap,
            ..RemoteOptions::default()
        };
        if let Some(name) = &self.profile {
            let p = h5mount::io::aws_profile::load(name).map_err(|e| format!("--profile: {e}"))?;
            let provider = h5mount::io::aws_credentials::ProfileCredentials::from_profile(name, &p)
                .map_err(|e| format!("--profile: {e}"))?;
            if let Some(c) = provider {
                ropts.credential_provider = Some(std::sync::Arc::new(c));
            }
            let bad = |key: &str, v: &str, why: String| {
                format!("profile {name:?}: {key} {}: {why}", shown(v))
            };
            if ropts.region.is_none() {
                if let Some(r) = p.region {
                    ropts.region = Some(parse_region(&r).map_err(|why| bad("region", &r, why))?);
                }
            }
            if ropts.endpoint.is_none() {
                if let Some(e) = p.endpoint_url {
                    let e = parse_endpoint(&e).map_err(|why| bad("endpoint_url", &e, why))?;
                    ropts.endpoint = Some(e);
                }
            }
        }
        Ok(ropts)
    }
}

/// `v` as a message shows it: quoted and escaped (so it stays on one line), with the
/// user-info of a URL (`user:password@`) replaced by `***`.
pub fn shown(v: &str) -> String {
    format!("{:?}", without_userinfo(v, "***"))
}

/// `v` with the user-info of a URL (`user:password@`) replaced by `mask` (none at all, `@`
/// included, when `mask` is empty). When `v` does not parse as a URL, a password might hold
/// a `/` or `?`, so everything from `://` to the last `@` is hidden.
pub fn without_userinfo(v: &str, mask: &str) -> String {
    let Some(i) = v.find("://") else {
        return v.to_string();
    };
    let (head, rest) = v.split_at(i + 3);
    let authority_end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    let at = match rest[..authority_end].rfind('@') {
        Some(at) => Some(at),
        None if !parses(v) => rest.rfind('@'),
        None => None,
    };
    match (at, mask) {
        (Some(at), "") => format!("{head}{}", &rest[at + 1..]),
        (Some(at), mask) => format!("{head}{mask}{}", &rest[at..]),
        (None, _) => v.to_string(),
    }
}

#[cfg(feature = "remote")]
fn parses(v: &str) -> bool {
    url::Url::parse(v).is_ok()
}

#[cfg(not(feature = "remote"))]
fn parses(_: &str) -> bool {
    false
}

/// The reason a string holding control characters is refused.
fn no_controls(v: &str) -> Result<(), String> {
    match v.chars().any(char::is_control) {
        true => Err("holds a control character".into()),
        false => Ok(()),
    }
}

const CREDENTIALS_IN_URL: &str = "credentials in a URL are not supported: http(s) sources are \
    read without authentication, and S3 credentials come from the AWS environment variables or \
    --profile";

/// Why `v` does not parse as a URL; when it holds an `@` after the scheme, a password with a
/// `/`, `?` or `#` in it may be why.
#[cfg(feature = "remote")]
fn not_a_url(v: &str, e: url::ParseError) -> String {
    match v
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('@'))
    {
        true => format!("not a URL ({e}); if it holds credentials: {CREDENTIALS_IN_URL}"),
        false => format!("not a URL ({e})"),
    }
}

/// `v` as a URL with a host, no user-info, and no query or fragment (`query` says why
/// those are refused): what an endpoint and an http(s) source have in common.
#[cfg(feature = "remote")]
fn plain_url(v: &str, query: &str) -> Result<url::Url, String> {
    no_controls(v)?;
    let u = url::Url::parse(v).map_err(|e| not_a_url(v, e))?;
    if !u.username().is_empty() || u.password().is_some() {
        return Err(CREDENTIALS_IN_URL.into());
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("no host".into());
    }
    if u.query().is_some() || u.fragment().is_some() {
        return Err(format!("a query (?...) or fragment (#...) {query}"));
    }
    Ok(u)
}

/// `--endpoint`/`endpoint=`: the endpoint as passed to the S3 client (see the module docs).
#[cfg(feature = "remote")]
pub fn parse_endpoint(v: &str) -> Result<String, String> {
    no_controls(v)?;
    if v.contains(char::is_whitespace) {
        return Err("holds a space".into());
    }
    if !v.contains("://") {
        return Err("not a URL: give its scheme, as in http://HOST:PORT".into());
    }
    let scheme = url::Url::parse(v).map_err(|e| not_a_url(v, e))?;
    if !matches!(scheme.scheme(), "http" | "https") {
        return Err(format!(
            "the scheme must be http or https, not {}",
            scheme.scheme()
        ));
    }
    let u = plain_url(v, "is not allowed")?;
    Ok(u.as_str().trim_end_matches('/').to_string())
}

#[cfg(not(feature = "remote"))]
pub fn parse_endpoint(_: &str) -> Result<String, String> {
    Err("this h5mount was built without remote sources".into())
}

/// Whether `v` is one DNS label of `a-z`, `0-9` and `-` of at most `max` characters.
fn is_label(v: &str, max: usize) -> bool {
    !v.is_empty()
        && v.len() <= max
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-')
}

/// `--region`/`region=` (see the module docs).
pub fn parse_region(v: &str) -> Result<String, String> {
    match is_label(v, MAX_REGION_LEN) {
        true => Ok(v.to_string()),
        false => Err(format!(
            "expected 1 to {MAX_REGION_LEN} of a-z, 0-9 and '-', as in us-east-1"
        )),
    }
}

/// `--profile`/`profile=` (see the module docs).
pub fn parse_profile(v: &str) -> Result<String, String> {
    no_controls(v)?;
    if v.is_empty() || v.len() > MAX_PROFILE_LEN {
        return Err(format!(
            "expected a name of 1 to {MAX_PROFILE_LEN} characters"
        ));
    }
    if v.contains('/') {
        return Err("a profile name holds no '/'".into());
    }
    if v.trim() != v {
        return Err("begins or ends with a space".into());
    }
    Ok(v.to_string())
}

/// `--request-timeout`, `--retry-timeout` and their `-o` forms: seconds, decimals allowed,
/// within [`TIMEOUT_RANGE`].
pub fn parse_seconds(v: &str) -> Result<Duration, String> {
    let (lo, hi) = TIMEOUT_RANGE;
    let err = || {
        format!(
            "expected seconds from {} to {}",
            lo.as_secs_f64(),
            hi.as_secs()
        )
    };
    let secs: f64 = v.trim().parse().map_err(|_| err())?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if (lo..=hi).contains(&d) => Ok(d),
        _ => Err(err()),
    }
}

/// Entries of one bucket directory listed at most unless `--list-max-keys` says (the
/// remote reader's own default, repeated here so that a build without it parses the same).
pub const DEFAULT_LIST_MAX_KEYS: usize = 50_000;
/// The values `--list-max-keys` accepts.
const LIST_MAX_KEYS_RANGE: (usize, usize) = (1, 10_000_000);

/// `--list-max-keys N`: a whole number in [`LIST_MAX_KEYS_RANGE`].
pub fn parse_list_max_keys(v: &str) -> Result<usize, String> {
    super::parse_count(v, LIST_MAX_KEYS_RANGE)
}

/// Default of `--merge-gap` (the remote reader's own default, repeated here so that a build
/// without it parses the same).
pub const DEFAULT_MERGE_GAP: u64 = 128 << 10;
/// Largest `--merge-gap`: a merged GET is at most 16 gaps long, and its bytes must fit the
/// page cache's data budget to be sent at all.
pub const MAX_MERGE_GAP: u64 = 64 << 20;

/// `--merge-gap SIZE`: a byte count (`512K`, `8M`) from 0 to [`MAX_MERGE_GAP`].
pub fn parse_merge_gap(v: &str) -> Result<u64, String> {
    match super::parse_size(v) {
        Ok(n) if n <= MAX_MERGE_GAP => Ok(n),
        Ok(_) => Err(format!("at most {}M", MAX_MERGE_GAP >> 20)),
        Err(e) => Err(e),
    }
}

/// Check a remote SOURCE (`s3://...`, `http(s)://...`) and, for S3, the endpoint and region
/// the S3 client would take from the environment; the message is the whole line.
pub fn check_source(url: &str, remote: &RemoteConfig) -> Result<(), String> {
    let why = match url.strip_prefix("s3://") {
        Some(rest) => check_bucket(rest.split('/').next().unwrap_or(""), remote.virtual_hosted),
        None => check_http_url(url),
    };
    why.map_err(|why| format!("{}: {why}", shown(url)))?;
    if url.starts_with("s3://") {
        check_environment(remote, |k| std::env::var(k).ok())?;
    }
    Ok(())
}

/// The bucket of an `s3://` URL (see the module docs).
fn check_bucket(b: &str, virtual_hosted: bool) -> Result<(), String> {
    if b.contains('@') {
        return Err(CREDENTIALS_IN_URL.into());
    }
    let (lo, hi) = BUCKET_LEN;
    let chars_ok = b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'_'));
    let ends_ok = [b.bytes().next(), b.bytes().last()]
        .iter()
        .all(|c| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    if !(lo..=hi).contains(&b.len()) || !chars_ok || !ends_ok || b.contains("..") {
        return Err(format!(
            "not a bucket name: {lo} to {hi} of a-z, 0-9, '.', '-' and '_', beginning and \
             ending with a letter or digit"
        ));
    }
    if virtual_hosted && b.contains('_') {
        return Err("a bucket addressed as a host name (--virtual-hosted) holds no '_'".into());
    }
    Ok(())
}

/// An `http://` or `https://` SOURCE (see the module docs).
#[cfg(feature = "remote")]
fn check_http_url(v: &str) -> Result<(), String> {
    no_controls(v)?;
    let rest = v.split_once("://").map_or("", |(_, r)| r);
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return Err(CREDENTIALS_IN_URL.into());
    }
    if authority.contains('\\') {
        return Err("a '\\' in the host".into());
    }
    let u = plain_url(v, "is not supported: the path names the object")?;
    if !rest.contains('/') || u.path() == "/" {
        return Err("no path: the URL must name an object, as in https://HOST/DIR/FILE.h5".into());
    }
    Ok(())
}

#[cfg(not(feature = "remote"))]
fn check_http_url(_: &str) -> Result<(), String> {
    Ok(())
}

/// The endpoint and region the S3 client would read from the environment (`var`), held to
/// the rules of the options: an endpoint from `AWS_ENDPOINT_URL_S3` is used even when
/// `--endpoint` is given, the others only when it is not.
fn check_environment(
    remote: &RemoteConfig,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let bad =
        |k: &str, v: &str, why: String| format!("environment variable {k}={}: {why}", shown(v));
    for k in ENDPOINT_VARS {
        if remote.endpoint.is_some() && k != "AWS_ENDPOINT_URL_S3" {
            continue;
        }
        if let Some(v) = var(k) {
            parse_endpoint(&v).map_err(|why| bad(k, &v, why))?;
        }
    }
    if remote.region.is_none() {
        for k in REGION_VARS {
            if let Some(v) = var(k) {
                parse_region(&v).map_err(|why| bad(k, &v, why))?;
            }
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "remote"))]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        for (v, want) in [
            ("http://127.0.0.1:8333", "http://127.0.0.1:8333"),
            ("https://s3.example.org/", "https://s3.example.org"),
            ("http://[::1]:9000", "http://[::1]:9000"),
            (
                "HTTP://Store.Example:80/minio/",
                "http://store.example/minio",
            ),
        ] {
            assert_eq!(parse_endpoint(v).as_deref(), Ok(want), "{v}");
        }
        for v in [
            "127.0.0.1:9000",
            "localhost",
            "",
            "ftp://host",
            "http://",
            "http://host:99999",
            "http://u:p@host",
            "http://u@host",
            "http://host/?x=1",
            "http://host/#f",
            "http://ho st",
            "http://host\n",
            "file:///tmp/x",
        ] {
            assert!(parse_endpoint(v).is_err(), "{v}");
        }
    }

    #[test]
    fn regions_and_profiles() {
        assert!(parse_region("us-east-1").is_ok());
        assert!(parse_region("garage").is_ok());
        for v in [
            "",
            "US-EAST-1",
            "us_east",
            "-x",
            "x-",
            "eu west",
            &"a".repeat(64),
        ] {
            assert!(parse_region(v).is_err(), "{v}");
        }
        assert!(parse_profile("lab-2 (ro)").is_ok());
        for v in ["", "a/b", " lab", "lab\n", &"p".repeat(129)] {
            assert!(parse_profile(v).is_err(), "{v:?}");
        }
    }

    #[test]
    fn timeouts() {
        assert_eq!(parse_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("3600"), Ok(Duration::from_secs(3600)));
        for v in ["0", "0.01", "-1", "3601", "NaN", "inf", "1e400", "x", ""] {
            assert!(parse_seconds(v).is_err(), "{v}");
        }
    }

    #[test]
    fn sources() {
        let c = RemoteConfig::default();
        let vh = RemoteConfig {
            virtual_hosted: true,
            ..RemoteConfig::default()
        };
        for ok in [
            "s3://data/runs/a.h5",
            "s3://my.bucket-1/",
            "s3://old_bucket/k",
            "s3://abc",
            "https://example.org/d/f.h5",
            "http://127.0.0.1:8080/a%20b.h5",
            "https://example.org/f@2.h5",
        ] {
            assert_eq!(check_source(ok, &c), Ok(()), "{ok}");
        }
        assert!(check_source("s3://old_bucket/k", &vh).is_err());
        for bad in [
            "s3://",
            "s3://ab/k",
            "s3://Data/k",
            "s3://-data/k",
            "s3://a..b/k",
            "s3://data-/k",
            "s3://da ta/k",
            "s3://key:secret@data/k",
            "https://",
            "https://example.org",
            "https://example.org/",
            "https://example.org/f.h5?x=1",
            "https://example.org/f.h5#g",
            "https://host:99999/f.h5",
            "https://ex\\ample.org/f.h5",
            "https://exa\tmple.org/f.h5",
        ] {
            let e = check_source(bad, &c).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn credentials_in_urls_are_refused_and_never_shown() {
        let c = RemoteConfig::default();
        for url in [
            "https://user:s3cret@example.org/f.h5",
            "https://user:s3cret@example.org",
            "http://user:s3c/ret@example.org/f.h5",
            "http://user:s3c?ret@example.org/f.h5",
        ] {
            let e = check_source(url, &c).unwrap_err();
            assert!(!e.contains("s3c"), "{e}");
            assert!(e.contains("***@") && e.contains("credentials"), "{e}");
        }
        let e = parse_endpoint("http://k:s3cret@host:9000").unwrap_err();
        assert!(e.contains("credentials"), "{e}");
        assert_eq!(
            shown("http://k:s3cret@host:9000"),
            "\"http://***@host:9000\""
        );
        assert_eq!(shown("https://h/f@2.h5"), "\"https://h/f@2.h5\"");
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
    }

    #[test]
    fn environment() {
        let c = RemoteConfig::default();
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(check_environment(&c, env(&[("AWS_ENDPOINT", "http://h:1")])).is_ok());
        let e = check_environment(&c, env(&[("AWS_ENDPOINT_URL", "h:1")])).unwrap_err();
        assert!(e.contains("AWS_ENDPOINT_URL="), "{e}");
        let e = check_environment(&c, env(&[("AWS_REGION", "Mars 1")])).unwrap_err();
        assert!(e.contains("AWS_REGION"), "{e}");
        let given = RemoteConfig {
            region: Some("us-east-1".into()),
            ..RemoteConfig::default()
        };
        assert!(check_environment(&given, env(&[("AWS_REGION", "Mars 1")])).is_ok());
        let given = RemoteConfig {
            endpoint: Some("http://h:1".into()),
            ..RemoteConfig::default()
        };
        assert!(check_environment(&given, env(&[("AWS_ENDPOINT", "h:1")])).is_ok());
        assert!(check_environment(&given, env(&[("AWS_ENDPOINT_URL_S3", "h:1")])).is_err());
    }
}
