//! Listing a bucket's "directory": ListObjectsV2 with a `/` delimiter, sent and read here
//! rather than by `object_store`, because a listing is an answer the server writes and we
//! must bound and filter it:
//! - **Bounded.** At most `list_max_keys` entries per directory (objects and prefixes
//!   together); past that the listing stops, with one log line saying how to raise the
//!   bound. Each page's body is read up to [`PAGE_BODY`] bytes, no more. A continuation
//!   token seen before (a server that would list forever) ends the listing, logged.
//! - **Nothing outside the prefix.** An entry whose key is not under the directory asked
//!   for is dropped (one log line per listing, with the count). An entry whose name is not
//!   one a directory can hold (empty, `.`, `..`, or with a `/`: keys such as `a/../b.h5` or
//!   `a//b.h5`, legal in S3) is left out with one log line each, and the rest is served.
//!
//! Requests are signed with `object_store`'s own SigV4 signer and credentials (the same
//! provider as the store's, refreshed as it refreshes them), and sent through the same
//! connector as every other request ([`super::net`]): no redirect, counted as LISTs.
//!
//! The answer is read with `quick-xml`'s event reader: `ListBucketResult` holds `Contents`
//! (`Key`, `Size`, `ETag`, `LastModified`), `CommonPrefixes` (`Prefix`), `IsTruncated` and
//! `NextContinuationToken`; an `Error` document (`Code`, `Message`) is a refusal.

use std::collections::HashSet;
use std::time::Duration;

use object_store::aws::{AmazonS3, AwsAuthorizer};
use object_store::client::{HttpClient, HttpRequestBody};

use super::super::source::OriginEntry;
use super::error::{chain, one_line, remote_err, RemoteKind};

/// Bytes of one page of a listing, at most (a page of 1,000 keys is some 300 KB).
pub const PAGE_BODY: usize = 8 << 20;
/// Keys asked for per page.
const PAGE_KEYS: usize = 1000;
/// Pages of one listing, at most, whatever the server says (a bound on its own).
const MAX_PAGES: usize = 10_000;

/// How to list one bucket.
pub(super) struct Lister {
    pub client: HttpClient,
    /// The bucket's URL (`http://host:port/bucket`, or the virtual host), no trailing `/`.
    pub bucket_url: String,
    /// `s3://bucket`, for messages.
    pub base: String,
    /// `None`: unsigned requests.
    pub store: Option<std::sync::Arc<AmazonS3>>,
    pub region: String,
    pub max_keys: usize,
    pub bound: Duration,
}

/// An object of a listing, as the server wrote it.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Listed {
    pub key: String,
    pub size: u64,
    pub etag: Option<String>,
    /// Seconds since 1970 (0: not given or not read).
    pub modified: i64,
}

/// One page of a listing, as the server wrote it.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Page {
    pub objects: Vec<Listed>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    pub next: Option<String>,
}

impl Lister {
    /// What the directory `dir` (no slashes around; empty for the root) holds, sorted by
    /// name, within the bounds (see the module docs). `limit`: stop after this many entries
    /// (below the bound; the trailing-slash probe asks for one).
    pub async fn list(&self, dir: &str, limit: usize) -> std::io::Result<Vec<OriginEntry>> {
        let prefix = match dir {
            "" => String::new(),
            d => format!("{d}/"),
        };
        let shown = format!("{}/{prefix}", self.base);
        let limit = limit.min(self.max_keys);
        let mut out: Vec<OriginEntry> = Vec::new();
        let mut tokens: HashSet<String> = HashSet::new();
        let mut token: Option<String> = None;
        let mut outside = 0u64;
        for _ in 0..MAX_PAGES {
            let page = self.page(&prefix, token.as_deref(), limit, &shown).await?;
            // Objects, then prefixes (a prefix's name ends in `/`): each kept if it lies
            // under the directory and its name is one a directory can hold.
            let prefixes = page.prefixes.into_iter().map(|key| Listed {
                key,
                ..Listed::default()
            });
            for l in page.objects.into_iter().chain(prefixes) {
                let Some(rest) = l.key.strip_prefix(&prefix) else {
                    outside += 1;
                    continue;
                };
                let (name, dir) = match rest.strip_suffix('/') {
                    Some(name) => (name, true),
                    None => (rest, false),
                };
                let Some(name) = fit(name) else {
                    log::warn!(
                        "{shown}: key {:?} is not a name a directory can hold (empty, `.`, \
                         `..` or `//` in it): left out",
                        one_line(&l.key)
                    );
                    continue;
                };
                out.push(OriginEntry {
                    name: name.to_string(),
                    dir,
                    size: l.size,
                    modified: l.modified,
                    etag: l.etag,
                });
            }
            if out.len() >= limit {
                if limit == self.max_keys {
                    log::warn!(
                        "{shown}: listing stopped at {} entries (-o list_max_keys=N lists more)",
                        self.max_keys
                    );
                }
                out.truncate(limit);
                break;
            }
            match (page.truncated, page.next) {
                (true, Some(next)) => {
                    if !tokens.insert(next.clone()) {
                        log::warn!(
                            "{shown}: the server repeated a continuation token; listing stopped \
                             at {} entries",
                            out.len()
                        );
                        break;
                    }
                    token = Some(next);
                }
                _ => break,
            }
        }
        if outside > 0 {
            log::warn!(
                "{shown}: {outside} entries outside the prefix in the server's listing: left out"
            );
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| a.name == b.name);
        Ok(out)
    }

    /// One page of the listing of `prefix`, from `token`, of at most `keys` keys.
    async fn page(
        &self,
        prefix: &str,
        token: Option<&str>,
        keys: usize,
        shown: &str,
    ) -> std::io::Result<Page> {
        use futures_util::StreamExt;
        let mut url = url::Url::parse(&self.bucket_url)
            .map_err(|e| remote_err(RemoteKind::Invalid, shown, "LIST", e))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("list-type", "2");
            q.append_pair("delimiter", "/");
            q.append_pair("max-keys", &keys.clamp(1, PAGE_KEYS).to_string());
            q.append_pair("prefix", prefix);
            if let Some(t) = token {
                q.append_pair("continuation-token", t);
            }
        }
        let mut req = http::Request::builder()
            .method(http::Method::GET)
            .uri(url.as_str())
            .body(HttpRequestBody::empty())
            .map_err(|e| remote_err(RemoteKind::Invalid, shown, "LIST", e))?;
        if let Some(store) = &self.store {
            let cred =
                store.credentials().get_credential().await.map_err(|e| {
                    remote_err(RemoteKind::Denied, shown, "LIST", no_credentials(&e))
                })?;
            AwsAuthorizer::new(&cred, "s3", &self.region).authorize(&mut req, None);
        }
        let answer = self
            .client
            .execute(req)
            .await
            .map_err(|e| remote_err(RemoteKind::Transient, shown, "LIST", chain(&e)))?;
        let status = answer.status().as_u16();
        let mut body = Vec::new();
        let mut stream = answer.into_body().bytes_stream();
        while let Some(piece) = stream.next().await {
            let piece =
                piece.map_err(|e| remote_err(RemoteKind::Transient, shown, "LIST", chain(&e)))?;
            if body.len() + piece.len() > PAGE_BODY {
                return Err(remote_err(
                    RemoteKind::Refused,
                    shown,
                    "LIST",
                    format!("an answer longer than {PAGE_BODY} bytes"),
                ));
            }
            body.extend_from_slice(&piece);
        }
        if status != 200 {
            let code = error_code(&body);
            let kind = match (status, code.as_deref()) {
                (404, _) => RemoteKind::NotFound,
                (401 | 403, _) => RemoteKind::Denied,
                (500..=599, _) | (429, _) => RemoteKind::Exhausted,
                _ => RemoteKind::Refused,
            };
            let why = match code.as_deref() {
                Some("NoSuchBucket") => "no such bucket".to_string(),
                Some(c) if status == 401 || status == 403 => {
                    format!("access denied: status {status} ({c})")
                }
                Some(c) => format!("status {status} ({c})"),
                None => format!("status {status}"),
            };
            return Err(remote_err(kind, shown, "LIST", why));
        }
        parse(&body).map_err(|e| remote_err(RemoteKind::Refused, shown, "LIST", e))
    }
}

/// The message for credentials that could not be found.
pub(super) fn no_credentials(e: &dyn std::error::Error) -> String {
    format!(
        "no credentials found ({}); give --profile or AWS_ACCESS_KEY_ID, or --no-sign-request \
         for a public bucket",
        one_line(&e.to_string())
    )
}

/// `name` if a directory can hold it as an entry.
fn fit(name: &str) -> Option<&str> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\0');
    ok.then_some(name)
}

/// The `Code` of an S3 error document.
fn error_code(body: &[u8]) -> Option<String> {
    let mut r = quick_xml::Reader::from_reader(body);
    let mut path: Vec<Vec<u8>> = Vec::new();
    let mut buf = Vec::new();
    loop {
        match r.read_event_into(&mut buf).ok()? {
            quick_xml::events::Event::Start(e) => path.push(e.name().as_ref().to_vec()),
            quick_xml::events::Event::End(_) => {
                path.pop();
            }
            quick_xml::events::Event::Text(t) if path.last().is_some_and(|p| p == b"Code") => {
                return t.decode().ok().map(|s| s.trim().to_string());
            }
            quick_xml::events::Event::Eof => return None,
            _ => {}
        }
        buf.clear();
    }
}

/// A page of ListObjectsV2's answer.
pub(super) fn parse(body: &[u8]) -> Result<Page, String> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_reader(body);
    let mut page = Page::default();
    let mut path: Vec<Vec<u8>> = Vec::new();
    let mut text = String::new();
    let mut obj = Listed::default();
    let mut buf = Vec::new();
    loop {
        let ev = r
            .read_event_into(&mut buf)
            .map_err(|e| format!("the listing is not XML: {}", one_line(&e.to_string())))?;
        match ev {
            Event::Start(e) => {
                if path.len() > 16 {
                    return Err("the listing nests too deep".into());
                }
                path.push(e.name().as_ref().to_vec());
                text.clear();
            }
            Event::Text(t) => {
                let s = t.decode().map_err(|e| format!("the listing: {e}"))?;
                text.push_str(&s);
            }
            Event::GeneralRef(g) => {
                let s = g.decode().map_err(|e| format!("the listing: {e}"))?;
                match quick_xml::escape::resolve_predefined_entity(&s) {
                    Some(c) => text.push_str(c),
                    None => match g.resolve_char_ref() {
                        Ok(Some(c)) => text.push(c),
                        _ => return Err(format!("the listing: unknown entity &{s};")),
                    },
                }
            }
            Event::End(_) => {
                let names: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
                match names.as_slice() {
                    [_, b"Contents", b"Key"] => obj.key = text.clone(),
                    [_, b"Contents", b"Size"] => {
                        obj.size = text
                            .trim()
                            .parse()
                            .map_err(|_| format!("the listing: size {:?}", one_line(&text)))?
                    }
                    [_, b"Contents", b"ETag"] => obj.etag = Some(text.trim().to_string()),
                    [_, b"Contents", b"LastModified"] => obj.modified = epoch(text.trim()),
                    [_, b"Contents"] => {
                        let o = std::mem::take(&mut obj);
                        if !o.key.is_empty() {
                            page.objects.push(o);
                        }
                    }
                    [_, b"CommonPrefixes", b"Prefix"] => page.prefixes.push(text.clone()),
                    [_, b"IsTruncated"] => page.truncated = text.trim() == "true",
                    [_, b"NextContinuationToken"] => page.next = Some(text.clone()),
                    _ => {}
                }
                if names.first().is_some_and(|n| *n == b"Error") && names.len() == 1 {
                    return Err("the listing is an error document".into());
                }
                path.pop();
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(page)
}

/// Seconds since 1970 of an RFC 3339 time (`2024-01-02T03:04:05.000Z`); 0 if it is not one.
fn epoch(t: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(t).map_or(0, |d| d.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_read_with_entities_and_odd_keys_kept_for_the_filter() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Name>b</Name><Prefix>run/</Prefix><KeyCount>3</KeyCount><IsTruncated>true</IsTruncated>
<NextContinuationToken>t&amp;1</NextContinuationToken>
<Contents><Key>run/a&amp;b.h5</Key><Size>42</Size><ETag>&quot;e1&quot;</ETag>
<LastModified>1970-01-02T00:00:01.000Z</LastModified></Contents>
<Contents><Key>run//c.h5</Key><Size>1</Size></Contents>
<CommonPrefixes><Prefix>run/sub/</Prefix></CommonPrefixes>
</ListBucketResult>"#;
        let p = parse(xml).unwrap();
        let listed = |key: &str, size, etag: Option<&str>, modified| Listed {
            key: key.into(),
            size,
            etag: etag.map(Into::into),
            modified,
        };
        assert_eq!(
            p.objects,
            vec![
                listed("run/a&b.h5", 42, Some("\"e1\""), 86_401),
                listed("run//c.h5", 1, None, 0)
            ]
        );
        assert_eq!(p.prefixes, vec!["run/sub/".to_string()]);
        assert!(p.truncated);
        assert_eq!(p.next.as_deref(), Some("t&1"));
        assert_eq!(fit("/c.h5"), None);
        assert_eq!(fit(".."), None);
        assert_eq!(fit("a.h5"), Some("a.h5"));
    }

    #[test]
    fn hostile_pages_are_errors_not_panics() {
        for bad in [
            &b"<ListBucketResult><Contents><Size>x</Size></Contents></ListBucketResult>"[..],
            b"<a><b>&bogus;</b></a>",
            b"<Error><Code>NoSuchBucket</Code></Error>",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(
            error_code(b"<Error><Code>NoSuchBucket</Code><Message>m</Message></Error>").as_deref(),
            Some("NoSuchBucket")
        );
        let deep = "<a>".repeat(100);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn times_are_seconds_since_1970() {
        assert_eq!(epoch("1970-01-01T00:00:00Z"), 0);
        assert_eq!(epoch("2024-02-29T12:00:00.000Z"), 1_709_208_000);
        assert_eq!(epoch("garbage"), 0);
    }
}
