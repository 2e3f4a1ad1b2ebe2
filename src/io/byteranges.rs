//! Several byte ranges of one HTTP object in one request: the `Range` header that asks for
//! them and a parser for the `multipart/byteranges` answer (RFC 9110, section 14.6).
//!
//! A server that honours a request for several ranges answers `206 Partial Content` with a
//! body of parts, each with its own `Content-Range`:
//!
//! ```text
//! --SEPARATOR
//! Content-Type: application/octet-stream
//! Content-Range: bytes 0-9/98408239
//!
//! <10 bytes>
//! --SEPARATOR
//! ...
//! --SEPARATOR--
//! ```
//!
//! The parser trusts nothing in the answer: a part's length comes from its `Content-Range`
//! and must fit in the body that arrived (the body is read up to a bound the caller set from
//! the ranges it asked for); the whole length a part names must be the object's; the
//! separator must follow each part's bytes. Anything else is an error, and the caller falls
//! back to one request per range. A server may also merge ranges it was asked for, or answer
//! a single part without the multipart wrapping: [`Part`]s cover ranges, and the caller looks
//! for the part that covers each range it asked for.

use std::ops::Range;

/// The bytes of one part of an answer, starting at `start` in the object and at `at` in the
/// answer's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'a> {
    pub start: u64,
    pub at: usize,
    pub bytes: &'a [u8],
}

impl<'a> Part<'a> {
    /// The bytes of `r` if this part holds all of them.
    pub fn cover(&self, r: &Range<u64>) -> Option<&'a [u8]> {
        let end = self.start.checked_add(self.bytes.len() as u64)?;
        if r.start < self.start || r.end > end || r.start > r.end {
            return None;
        }
        let from = (r.start - self.start) as usize;
        Some(&self.bytes[from..from + (r.end - r.start) as usize])
    }
}

/// The value of a `Range` header asking for `ranges` (half-open, non-empty).
pub fn header(ranges: &[Range<u64>]) -> String {
    let mut s = String::from("bytes=");
    for (i, r) in ranges.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{}-{}", r.start, r.end - 1));
    }
    s
}

/// The separator of a `multipart/byteranges` content type (`None` for any other type).
pub fn boundary(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let kind = params.next()?.trim();
    if !kind.eq_ignore_ascii_case("multipart/byteranges") {
        return None;
    }
    for p in params {
        let Some((k, v)) = p.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case("boundary") {
            let v = v.trim().trim_matches('"');
            // RFC 2046: 1 to 70 characters.
            if !v.is_empty() && v.len() <= 70 && !v.contains(['\r', '\n']) {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// A `Content-Range` value of a satisfied range, `bytes FIRST-LAST/LENGTH` (or `/*`): the
/// range and the whole length if given.
pub fn content_range(value: &str) -> Result<(Range<u64>, Option<u64>), String> {
    let bad = || format!("Content-Range {value:?} is not of the form bytes FIRST-LAST/LENGTH");
    let rest = value.trim().strip_prefix("bytes ").ok_or_else(bad)?;
    let (span, total) = rest.split_once('/').ok_or_else(bad)?;
    let (a, b) = span.split_once('-').ok_or_else(bad)?;
    let num = |s: &str| -> Result<u64, String> {
        let s = s.trim();
        if s.is_empty() || s.len() > 20 || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (a, b) = (num(a)?, num(b)?);
    if b < a || b == u64::MAX {
        return Err(bad());
    }
    let total = match total.trim() {
        "*" => None,
        t => Some(num(t)?),
    };
    if total.is_some_and(|t| b >= t) {
        return Err(bad());
    }
    Ok((a..b + 1, total))
}

/// Check a part's range against the object: within it, and the object's length as known.
fn check(range: &Range<u64>, total: Option<u64>, len: u64) -> Result<(), String> {
    if let Some(t) = total {
        if t != len {
            return Err(format!(
                "a part gives the object's length as {t}, not {len} (the object changed?)"
            ));
        }
    }
    if range.end > len {
        return Err(format!(
            "a part ends at {}, past the object's {len} bytes",
            range.end
        ));
    }
    Ok(())
}

/// The parts of a `multipart/byteranges` body separated by `boundary`, of an object of
/// `len` bytes.
pub fn parse<'a>(body: &'a [u8], boundary: &str, len: u64) -> Result<Vec<Part<'a>>, String> {
    let dash = format!("--{boundary}");
    let dash = dash.as_bytes();
    // The preamble (usually empty, nginx sends one line break) ends at the first separator
    // that starts a line.
    let mut at = find_line_start(body, dash, 0).ok_or("no separator in the answer")?;
    let mut parts = Vec::new();
    loop {
        at += dash.len();
        if body[at..].starts_with(b"--") {
            return if parts.is_empty() {
                Err("an answer without parts".into())
            } else {
                Ok(parts)
            };
        }
        at = skip_line_end(body, at).ok_or("a separator not followed by a line break")?;
        // Headers, up to an empty line.
        let mut range = None;
        loop {
            let end = line_end(body, at).ok_or("the answer ends inside a part's headers")?;
            let line = &body[at..end];
            at = skip_line_end(body, end).ok_or("the answer ends inside a part's headers")?;
            if line.is_empty() {
                break;
            }
            let line = std::str::from_utf8(line).map_err(|_| "a part header is not text")?;
            if let Some((k, v)) = line.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-range") {
                    range = Some(content_range(v)?);
                }
            }
        }
        let (range, total) = range.ok_or("a part without Content-Range")?;
        check(&range, total, len)?;
        let n = range.end - range.start;
        let stop = (at as u64)
            .checked_add(n)
            .filter(|&s| s <= body.len() as u64)
            .ok_or("a part is longer than what arrived of the answer")? as usize;
        parts.push(Part {
            start: range.start,
            at,
            bytes: &body[at..stop],
        });
        at = skip_line_end(body, stop).ok_or("a part's bytes not followed by a line break")?;
        if !body[at..].starts_with(dash) {
            return Err("a part's bytes not followed by the separator".into());
        }
    }
}

/// The first `pat` at `from` or later that starts a line (at `from` itself, or after `\n`).
fn find_line_start(body: &[u8], pat: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + pat.len() <= body.len() {
        if (i == from || body[i - 1] == b'\n') && body[i..].starts_with(pat) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Where the line starting at `at` ends (its `\r\n` or `\n`).
fn line_end(body: &[u8], at: usize) -> Option<usize> {
    let n = body
        .get(at..)?
        .iter()
        .take(8192)
        .position(|&c| c == b'\n')?;
    let end = at + n;
    Some(if end > at && body[end - 1] == b'\r' {
        end - 1
    } else {
        end
    })
}

/// Past the line break at `at` (`\r\n` or `\n`).
fn skip_line_end(body: &[u8], at: usize) -> Option<usize> {
    let rest = body.get(at..)?;
    if rest.starts_with(b"\r\n") {
        Some(at + 2)
    } else if rest.starts_with(b"\n") {
        Some(at + 1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(sep: &str, parts: &[(u64, &[u8])], len: u64) -> Vec<u8> {
        let mut b = b"\r\n".to_vec();
        for (start, bytes) in parts {
            b.extend_from_slice(
                format!("--{sep}\r\nContent-Type: application/octet-stream\r\n").as_bytes(),
            );
            let last = start + bytes.len() as u64 - 1;
            b.extend_from_slice(
                format!("Content-Range: bytes {start}-{last}/{len}\r\n\r\n").as_bytes(),
            );
            b.extend_from_slice(bytes);
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(format!("--{sep}--\r\n").as_bytes());
        b
    }

    #[test]
    fn header_lists_inclusive_ranges() {
        assert_eq!(header(&[0..10, 100..101]), "bytes=0-9,100-100");
    }

    #[test]
    fn boundary_from_content_type() {
        assert_eq!(
            boundary("multipart/byteranges; boundary=00000000000000000002").as_deref(),
            Some("00000000000000000002")
        );
        assert_eq!(
            boundary("Multipart/ByteRanges;charset=x; boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(boundary("application/octet-stream"), None);
        assert_eq!(boundary("multipart/byteranges"), None);
        assert_eq!(boundary("multipart/byteranges; boundary="), None);
    }

    #[test]
    fn content_range_values() {
        assert_eq!(content_range("bytes 0-9/100"), Ok((0..10, Some(100))));
        assert_eq!(content_range(" bytes 5-5/*"), Ok((5..6, None)));
        for bad in [
            "bytes 9-0/100",
            "bytes 0-100/100",
            "bytes -1-3/100",
            "bytes 0-9",
            "items 0-9/100",
            "bytes 0-18446744073709551615/*",
            "bytes 0-99999999999999999999999/*",
            "bytes +1-3/100",
        ] {
            assert!(content_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_an_nginx_answer() {
        let body = answer(
            "00000000000000000002",
            &[(0, b"0123456789"), (100, b"ab\r\n--00")],
            1000,
        );
        let parts = parse(&body, "00000000000000000002", 1000).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].start, 0);
        assert_eq!(parts[0].bytes, b"0123456789");
        assert_eq!(&body[parts[1].at..parts[1].at + 8], parts[1].bytes);
        assert_eq!(parts[1].start, 100);
        assert_eq!(parts[1].bytes, b"ab\r\n--00");
        assert_eq!(parts[0].cover(&(2..5)), Some(&b"234"[..]));
        assert_eq!(parts[0].cover(&(8..11)), None);
        assert_eq!(parts[1].cover(&(99..101)), None);
    }

    #[test]
    fn refuses_what_does_not_add_up() {
        let good = answer("S", &[(0, b"0123456789"), (20, b"abc")], 1000);
        assert!(parse(&good, "S", 1000).is_ok());
        // The object's length changed.
        assert!(parse(&good, "S", 999).is_err());
        // Every truncation is an error, never a short part.
        for cut in 0..good.len() - 4 {
            assert!(parse(&good[..cut], "S", 1000).is_err(), "cut at {cut}");
        }
        // A part longer or shorter than its bytes: the separator is not where it must be.
        for other in ["bytes 20-21", "bytes 20-24", "bytes 20-30"] {
            let text = String::from_utf8(good.clone()).unwrap();
            let wrong = text.replace("bytes 20-22", other);
            assert!(parse(wrong.as_bytes(), "S", 1000).is_err(), "{other}");
        }
        // A part past the object.
        let past = answer("S", &[(998, b"abc")], 1001);
        assert!(parse(&past, "S", 1000).is_err());
        // No Content-Range.
        assert!(parse(b"--S\r\nContent-Type: x\r\n\r\nabc\r\n--S--\r\n", "S", 10).is_err());
        // No parts at all.
        assert!(parse(b"--S--\r\n", "S", 10).is_err());
        // Another separator.
        assert!(parse(&good, "T", 1000).is_err());
    }

    #[test]
    fn tolerates_bare_line_feeds() {
        let body = b"--S\nContent-Range: bytes 3-5/10\n\nabc\n--S--";
        let parts = parse(body, "S", 10).unwrap();
        assert_eq!(
            parts,
            vec![Part {
                start: 3,
                at: 33,
                bytes: b"abc"
            }]
        );
    }

    #[test]
    fn any_bytes_give_an_answer_not_a_panic() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let good = answer("S", &[(0, b"0123456789"), (20, b"abc")], 1000);
        for _ in 0..20_000 {
            let mut b = good.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % b.len();
                b[i] = (x >> 32) as u8;
            }
            if let Ok(parts) = parse(&b, "S", 1000) {
                for p in parts {
                    assert!(p.start + p.bytes.len() as u64 <= 1000);
                }
            }
        }
    }
}
