//! The server's own checks: ranges parsed, and a plain client's requests (HEAD, ranges,
//! `If-Match`, several ranges, a paged listing) answered as a well-behaved server does, on one
//! connection; a held connection and a trickled body do not keep Drop waiting.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use super::*;

#[test]
fn ranges_parse() {
    assert_eq!(parse_ranges("bytes=0-9", 100), Some(vec![(0, 9)]));
    assert_eq!(parse_ranges("bytes=90-200", 100), Some(vec![(90, 99)]));
    assert_eq!(parse_ranges("bytes=-10", 100), Some(vec![(90, 99)]));
    assert_eq!(
        parse_ranges("bytes=5-,7-8", 100),
        Some(vec![(5, 99), (7, 8)])
    );
    assert_eq!(parse_ranges("bytes=100-", 100), None);
    assert_eq!(parse_ranges("bytes=9-3", 100), None);
}

#[test]
fn it_answers_like_a_plain_server_and_stops_at_once() {
    let s = HostileServer::start("127.0.0.1");
    s.put("bucket/d/x.h5", b"0123456789".to_vec());
    for k in ["a", "b/1", "b/2", "c", "d/y"] {
        s.put(&format!("bucket/{k}"), vec![1]);
    }
    let mut conn = std::net::TcpStream::connect(s.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // One connection, several requests (keep-alive): head and body of each answer.
    let mut ask = |req: String| -> (String, Vec<u8>) {
        conn.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            assert_eq!(
                conn.read(&mut b).unwrap(),
                1,
                "{}",
                String::from_utf8_lossy(&got)
            );
            got.push(b[0]);
        }
        let head = String::from_utf8(got).unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = vec![0u8; if req.starts_with("HEAD") { 0 } else { len }];
        conn.read_exact(&mut body).unwrap();
        (head, body)
    };
    let (h, _) = ask("HEAD /bucket/d/x.h5 HTTP/1.1\r\nHost: x\r\n\r\n".into());
    assert!(
        h.starts_with("HTTP/1.1 200") && h.contains("Content-Length: 10"),
        "{h}"
    );
    let etag = h
        .lines()
        .find_map(|l| l.strip_prefix("ETag: "))
        .unwrap()
        .to_string();
    let (h, b) = ask("GET /bucket/d/x.h5 HTTP/1.1\r\nRange: bytes=2-4\r\n\r\n".into());
    assert!(
        h.starts_with("HTTP/1.1 206") && h.contains("Content-Range: bytes 2-4/10"),
        "{h}"
    );
    assert_eq!(b, b"234");
    let (h, b) = ask(format!(
        "GET /bucket/d/x.h5 HTTP/1.1\r\nRange: bytes=8-\r\nIf-Match: {etag}\r\n\r\n"
    ));
    assert!(h.starts_with("HTTP/1.1 206"), "{h}");
    assert_eq!(b, b"89");
    let (h, _) = ask("GET /bucket/d/x.h5 HTTP/1.1\r\nIf-Match: \"other\"\r\n\r\n".into());
    assert!(h.starts_with("HTTP/1.1 412"), "{h}");
    let (h, b) = ask("GET /bucket/d/x.h5 HTTP/1.1\r\nRange: bytes=0-1,5-6\r\n\r\n".into());
    assert!(h.contains("multipart/byteranges"), "{h}");
    let b = String::from_utf8(b).unwrap();
    assert!(b.contains("Content-Range: bytes 5-6/10\r\n\r\n56"), "{b}");
    // Listing in pages of two: a, b/ (prefix), c, d/ (prefix).
    let mut token = String::new();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let (h, b) = ask(format!(
            "GET /bucket?list-type=2&delimiter=%2F&max-keys=2{token} HTTP/1.1\r\n\r\n"
        ));
        assert!(h.starts_with("HTTP/1.1 200"), "{h}");
        let b = String::from_utf8(b).unwrap();
        for part in b.split("<Key>").skip(1).chain(b.split("<Prefix>").skip(2)) {
            seen.push(part.split('<').next().unwrap().to_string());
        }
        match b.split("<NextContinuationToken>").nth(1) {
            Some(t) => token = format!("&continuation-token={}", t.split('<').next().unwrap()),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, ["a", "b/", "c", "d/"]);
    assert_eq!(s.connections(), 1, "keep-alive");
    let log = s.requests();
    assert_eq!(log.len(), 7);
    assert_eq!(log[1].req.header("range"), Some("bytes=2-4"));
    assert_eq!((log[1].status, log[1].body_bytes), (206, 3));

    // A held connection and a trickled body end when the server is dropped.
    s.set_fault(|r, st| {
        if r.path == "hold" {
            return Reply::Hold;
        }
        let mut resp = st.answer(r);
        resp.trickle_body = Some(Duration::from_secs(1));
        Reply::Send(resp)
    });
    let mut held = std::net::TcpStream::connect(s.addr()).unwrap();
    held.write_all(b"GET /hold HTTP/1.1\r\n\r\n").unwrap();
    let mut slow = std::net::TcpStream::connect(s.addr()).unwrap();
    slow.write_all(b"GET /bucket/d/x.h5 HTTP/1.1\r\n\r\n")
        .unwrap();
    let start = Instant::now();
    while s.request_count() < 9 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.request_count(), 9);
    let start = Instant::now();
    drop(s);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}
