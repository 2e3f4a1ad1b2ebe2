//! The answers of the [`HostileServer`](super::HostileServer): what a well-behaved server
//! answers ([`Store::answer`]: objects with ranges, ETags, `If-Match`, ListObjectsV2 pages),
//! and the pieces a fault builds other answers from ([`Response`], [`Body`], [`ListPage`]).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::Request;

/// The modification time every object has.
pub const LAST_MODIFIED_HTTP: &str = "Wed, 01 Jan 2025 00:00:00 GMT";
pub const LAST_MODIFIED_XML: &str = "2025-01-01T00:00:00.000Z";

/// A body: bytes, or pieces produced on demand (a huge answer is never held whole).
pub enum Body {
    Bytes(Vec<u8>),
    /// The next piece, until `None`; `len` is announced as `Content-Length`.
    Gen {
        len: u64,
        next: Box<dyn FnMut() -> Option<Vec<u8>> + Send>,
    },
}

/// One answer. `Content-Length` is added from the body unless the headers give one.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// Send the status line and headers one byte per this.
    pub trickle_head: Option<Duration>,
    /// Send the body one byte per this.
    pub trickle_body: Option<Duration>,
    /// Close the connection once this many body bytes are sent.
    pub cut_after: Option<u64>,
}

impl Response {
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Body::Bytes(Vec::new()),
            trickle_head: None,
            trickle_body: None,
            cut_after: None,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Response {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
        self.headers.push((k.to_string(), v.to_string()));
        self
    }

    pub fn get_header(&self, k: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.as_str())
    }

    pub fn body(mut self, b: Vec<u8>) -> Response {
        self.body = Body::Bytes(b);
        self
    }

    /// The body's bytes, when it is not generated.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.body {
            Body::Bytes(b) => Some(b),
            Body::Gen { .. } => None,
        }
    }

    /// A redirect to `location`.
    pub fn redirect(status: u16, location: &str) -> Response {
        Response::new(status).header("Location", location)
    }

    /// An S3 error answer with its XML body.
    pub fn s3_error(status: u16, code: &str, message: &str) -> Response {
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message>\
             <RequestId>4442587FB7D0A2F9</RequestId></Error>",
            xml_escape(code),
            xml_escape(message)
        );
        Response::new(status)
            .header("Content-Type", "application/xml")
            .body(xml.into_bytes())
    }
}

/// What the server does with one request.
pub enum Reply {
    Send(Response),
    /// Read the request and keep the connection open, answering nothing.
    Hold,
    /// Close the connection without an answer.
    Close,
}

/// An object held in memory.
#[derive(Clone)]
pub struct Object {
    pub bytes: Arc<Vec<u8>>,
    /// Quoted, as sent in `ETag`.
    pub etag: String,
}

/// One key of a ListObjectsV2 answer.
#[derive(Clone, Debug)]
pub struct ListEntry {
    pub key: String,
    pub size: u64,
    /// Quoted.
    pub etag: String,
}

/// One page of a ListObjectsV2 answer.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    pub bucket: String,
    pub prefix: String,
    pub contents: Vec<ListEntry>,
    pub prefixes: Vec<String>,
    pub next_token: Option<String>,
}

impl ListPage {
    /// The ListBucketResult XML.
    pub fn xml(&self) -> String {
        let mut s = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult \
             xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>{}</Name><Prefix>{}</Prefix>\
             <KeyCount>{}</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>\
             <IsTruncated>{}</IsTruncated>",
            xml_escape(&self.bucket),
            xml_escape(&self.prefix),
            self.contents.len() + self.prefixes.len(),
            self.next_token.is_some()
        );
        if let Some(t) = &self.next_token {
            s += &format!(
                "<NextContinuationToken>{}</NextContinuationToken>",
                xml_escape(t)
            );
        }
        for e in &self.contents {
            s += &contents_xml(e);
        }
        for p in &self.prefixes {
            s += &format!(
                "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
                xml_escape(p)
            );
        }
        s += "</ListBucketResult>";
        s
    }

    pub fn response(&self) -> Response {
        Response::new(200)
            .header("Content-Type", "application/xml")
            .body(self.xml().into_bytes())
    }
}

/// One `<Contents>` element.
pub fn contents_xml(e: &ListEntry) -> String {
    format!(
        "<Contents><Key>{}</Key><LastModified>{LAST_MODIFIED_XML}</LastModified><ETag>{}</ETag>\
         <Size>{}</Size><StorageClass>STANDARD</StorageClass></Contents>",
        xml_escape(&e.key),
        xml_escape(&e.etag),
        e.size
    )
}

pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The objects a server holds, and its normal answers.
#[derive(Default)]
pub struct Store {
    objects: RwLock<BTreeMap<String, Object>>,
}

impl Store {
    /// Serve `bytes` at `path`, with an ETag of their digest.
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        use sha2::{Digest, Sha256};
        let d = Sha256::digest(&bytes);
        let etag: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
        let obj = Object {
            bytes: Arc::new(bytes),
            etag: format!("\"{etag}\""),
        };
        self.objects
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_string(), obj);
    }

    pub fn object(&self, path: &str) -> Option<Object> {
        self.objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .cloned()
    }

    /// The listing entry of the object at `bucket/key`.
    pub fn entry(&self, bucket: &str, key: &str) -> Option<ListEntry> {
        let o = self.object(&format!("{bucket}/{key}"))?;
        Some(ListEntry {
            key: key.to_string(),
            size: o.bytes.len() as u64,
            etag: o.etag,
        })
    }

    /// What a well-behaved server answers.
    pub fn answer(&self, req: &Request) -> Response {
        if req.is_list() {
            return self.list(req).response();
        }
        if req.method != "GET" && req.method != "HEAD" {
            return Response::new(405);
        }
        let Some(obj) = self.object(&req.path) else {
            return match req.method.as_str() {
                "HEAD" => Response::new(404),
                _ => Response::s3_error(404, "NoSuchKey", "The specified key does not exist."),
            };
        };
        let len = obj.bytes.len() as u64;
        let base = |status| {
            Response::new(status)
                .header("ETag", &obj.etag)
                .header("Last-Modified", LAST_MODIFIED_HTTP)
                .header("Accept-Ranges", "bytes")
        };
        if let Some(m) = req.header("if-match") {
            if !etag_matches(m, &obj.etag) {
                return Response::s3_error(412, "PreconditionFailed", "If-Match failed");
            }
        }
        if req.method == "HEAD" {
            return base(200)
                .header("Content-Type", "application/octet-stream")
                .header("Content-Length", &len.to_string());
        }
        let Some(range) = req.header("range") else {
            return base(200)
                .header("Content-Type", "application/octet-stream")
                .body(obj.bytes.to_vec());
        };
        let Some(ranges) = parse_ranges(range, len) else {
            return base(416).header("Content-Range", &format!("bytes */{len}"));
        };
        let slice = |(a, b): (u64, u64)| obj.bytes[a as usize..=b as usize].to_vec();
        if let [one] = ranges[..] {
            return base(206)
                .header("Content-Type", "application/octet-stream")
                .header("Content-Range", &format!("bytes {}-{}/{len}", one.0, one.1))
                .body(slice(one));
        }
        let boundary = "HOSTILE0123456789";
        let mut body = Vec::new();
        for r in &ranges {
            body.extend_from_slice(
                format!(
                    "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\
                     Content-Range: bytes {}-{}/{len}\r\n\r\n",
                    r.0, r.1
                )
                .as_bytes(),
            );
            body.extend_from_slice(&slice(*r));
        }
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        base(206)
            .header(
                "Content-Type",
                &format!("multipart/byteranges; boundary={boundary}"),
            )
            .body(body)
    }

    /// The page of ListObjectsV2 a well-behaved server answers to `req` (prefix, `/`
    /// delimiter, continuation token, max-keys of at most 1,000).
    pub fn list(&self, req: &Request) -> ListPage {
        let bucket = req.path.clone();
        let prefix = req.query("prefix").unwrap_or("").to_string();
        let delimiter = req.query("delimiter").filter(|d| !d.is_empty());
        let max = req
            .query("max-keys")
            .and_then(|m| m.parse::<usize>().ok())
            .unwrap_or(1000)
            .clamp(1, 1000);
        let after = req
            .query("continuation-token")
            .map(unhex)
            .or_else(|| req.query("start-after").map(str::to_string));
        let objects = self.objects.read().unwrap_or_else(|e| e.into_inner());
        let mut page = ListPage {
            bucket: bucket.clone(),
            prefix: prefix.clone(),
            ..Default::default()
        };
        let in_bucket = format!("{bucket}/");
        let mut last = String::new();
        for (path, obj) in objects.range(format!("{in_bucket}{prefix}")..) {
            let Some(key) = path.strip_prefix(&in_bucket) else {
                break;
            };
            if !key.starts_with(&prefix) {
                break;
            }
            let rest = &key[prefix.len()..];
            let folded = delimiter.and_then(|d| rest.find(d).map(|i| (i, d)));
            let name = match folded {
                Some((i, d)) => format!("{prefix}{}{d}", &rest[..i]),
                None => key.to_string(),
            };
            if after.as_ref().is_some_and(|a| name.as_str() <= a.as_str()) || name == last {
                continue;
            }
            if page.contents.len() + page.prefixes.len() == max {
                page.next_token = Some(hex(&last));
                break;
            }
            if folded.is_some() {
                page.prefixes.push(name.clone());
            } else {
                page.contents.push(ListEntry {
                    key: key.to_string(),
                    size: obj.bytes.len() as u64,
                    etag: obj.etag.clone(),
                });
            }
            last = name;
        }
        page
    }
}

fn etag_matches(header: &str, etag: &str) -> bool {
    let norm = |s: &str| {
        s.trim()
            .trim_start_matches("W/")
            .trim_matches('"')
            .to_string()
    };
    header
        .split(',')
        .any(|h| h.trim() == "*" || norm(h) == norm(etag))
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> String {
    let bytes: Vec<u8> = (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `bytes=a-b[,c-d...]` (also `a-` and `-n`) for an object of `len` bytes; `None` when not
/// satisfiable or not understood.
pub fn parse_ranges(header: &str, len: u64) -> Option<Vec<(u64, u64)>> {
    let spec = header.trim().strip_prefix("bytes=")?;
    let mut out = Vec::new();
    for part in spec.split(',') {
        let (a, b) = part.trim().split_once('-')?;
        let (first, last) = match (a.trim(), b.trim()) {
            ("", n) => {
                let n: u64 = n.parse().ok()?;
                (len.checked_sub(n.min(len))?, len.checked_sub(1)?)
            }
            (a, "") => (a.parse().ok()?, len.checked_sub(1)?),
            (a, b) => (
                a.parse().ok()?,
                b.parse::<u64>().ok()?.min(len.checked_sub(1)?),
            ),
        };
        if first > last || first >= len {
            return None;
        }
        out.push((first, last));
    }
    (!out.is_empty()).then_some(out)
}
