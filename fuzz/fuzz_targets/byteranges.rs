//! Arbitrary answers to a GET of several ranges, as a hostile server may send them: the input
//! is a `Content-Type` line, then a `Content-Range` line, then the object's length (8 bytes,
//! little-endian), then the body. Each line ends at the first `\n` (a missing one leaves the
//! rest as that line). What runs: `byteranges::boundary` of the content type,
//! `content_range` of the range line, `parse` of the body with the boundary found (or a fixed
//! one), and `Part::cover` of a few ranges of each part.
//!
//! Besides a panic, a finding is a part whose bytes are not in the body where it says, or
//! that claims bytes past the object's length: `parse` must refuse those.
#![no_main]

use h5mount::io::byteranges;
use libfuzzer_sys::fuzz_target;

/// The next line of `rest` (without its `\n`), and what follows it.
fn line(rest: &[u8]) -> (&[u8], &[u8]) {
    match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[]),
    }
}

fuzz_target!(|data: &[u8]| {
    let (content_type, rest) = line(data);
    let (range, rest) = line(rest);
    let (len, body) = rest.split_at(rest.len().min(8));
    let mut le = [0u8; 8];
    le[..len.len()].copy_from_slice(len);
    let len = u64::from_le_bytes(le);
    let _ = byteranges::content_range(&String::from_utf8_lossy(range));
    let sep = byteranges::boundary(&String::from_utf8_lossy(content_type))
        .unwrap_or_else(|| "B".to_string());
    let Ok(parts) = byteranges::parse(body, &sep, len) else {
        return;
    };
    for p in &parts {
        let n = p.bytes.len() as u64;
        let end = p.start.checked_add(n).expect("a part's end overflows");
        assert!(end <= len, "a part past the object's end");
        assert_eq!(&body[p.at..p.at + p.bytes.len()], p.bytes, "a part not where it says");
        for r in [p.start..end, p.start..p.start, end.saturating_sub(1)..end, 0..len] {
            if let Some(b) = p.cover(&r) {
                assert_eq!(b.len() as u64, r.end - r.start);
            }
        }
    }
});
