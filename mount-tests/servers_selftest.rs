//! Self-test of the test servers (mount-tests/servers.rs): nginx serves byte ranges with the
//! validators h5mount relies on and adds the requested latency; SeaweedFS's S3 gateway takes
//! signed writes, serves anonymous ranged reads and refuses anonymous writes. Skips (and says
//! so) when the servers are not installed, unless H5MOUNT_REQUIRE_SERVERS is set.

mod servers;

use std::time::{Duration, Instant};

use servers::{http_request, HttpResponse, Nginx, Seaweed};

/// 1 MiB of deterministic, position-dependent bytes.
fn mib() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    http_request(port, "GET", path, headers, b"").unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

#[test]
fn hmac_and_sigv4_known_answers() {
    // RFC 4231, test case 2.
    let mac = servers::hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    assert_eq!(
        mac.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    // A key longer than the block is hashed first (RFC 4231, test case 6).
    let mac = servers::hmac_sha256(
        &[0xaa; 131],
        b"Test Using Larger Than Block-Size Key - Hash Key First",
    );
    assert_eq!(
        mac.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
    // The GET-object example of AWS's SigV4 documentation for S3 (header-based auth).
    let auth = servers::SigV4 {
        access_key: "AKIAIOSFODNN7EXAMPLE",
        secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region: "us-east-1",
        amz_date: "20130524T000000Z",
        method: "GET",
        host: "examplebucket.s3.amazonaws.com",
        path: "/test.txt",
        query: "",
        headers: &[("Range", "bytes=0-9")],
        payload_hash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    }
    .authorization();
    assert_eq!(
        auth,
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
         SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
         Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    );
    assert_eq!(
        servers::amz_date(std::time::UNIX_EPOCH + Duration::from_secs(1_369_353_600)),
        "20130524T000000Z"
    );
    assert_eq!(
        servers::amz_date(std::time::UNIX_EPOCH + Duration::from_secs(951_782_400 + 86_399)),
        "20000229T235959Z"
    );
}

#[test]
fn free_ports_are_distinct() {
    let p = servers::free_ports(8);
    let mut q = p.clone();
    q.sort_unstable();
    q.dedup();
    assert_eq!(q.len(), 8, "{p:?}");
    assert_ne!(servers::free_port(), 0);
}

/// Ranged GET, validators and If-Match on one nginx; the time of the fastest request.
fn check_nginx(n: &Nginx, data: &[u8]) -> Duration {
    let port = n.port();
    assert_eq!(
        n.url("/big.bin"),
        format!("http://127.0.0.1:{port}/big.bin")
    );
    let mut fastest = Duration::MAX;
    let mut timed = |headers: &[(&str, &str)]| {
        let t = Instant::now();
        let r = get(port, "/big.bin", headers);
        fastest = fastest.min(t.elapsed());
        r
    };

    let full = timed(&[]);
    assert_eq!(full.status, 200);
    assert_eq!(full.body, data);
    assert_eq!(full.header("accept-ranges"), Some("bytes"));
    let etag = full.header("etag").expect("ETag").to_string();
    assert!(etag.starts_with('"'), "strong ETag expected: {etag}");
    assert!(full.header("last-modified").is_some());

    let r = timed(&[("Range", "bytes=1000-1999")]);
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes 1000-1999/1048576"));
    assert_eq!(r.body, &data[1000..2000]);
    assert_eq!(r.header("etag"), Some(etag.as_str()));

    // The last bytes, by suffix range.
    let r = timed(&[("Range", "bytes=-10")]);
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some("bytes 1048566-1048575/1048576")
    );
    assert_eq!(r.body, &data[data.len() - 10..]);

    let r = timed(&[("Range", "bytes=0-3"), ("If-Match", etag.as_str())]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[..4]);
    let r = timed(&[("Range", "bytes=0-3"), ("If-Match", "\"not-the-etag\"")]);
    assert_eq!(r.status, 412, "{r:?}");

    let r = timed(&[]);
    assert_eq!(r.status, 200);
    let missing = get(port, "/missing.bin", &[]);
    assert_eq!(missing.status, 404);

    // Read-only.
    let put = http_request(port, "PUT", "/big.bin", &[], b"x").unwrap();
    assert_eq!(put.status, 403, "{put:?}");

    // The access log has every request answered so far, in order, and nothing else.
    let statuses: Vec<String> = n
        .access_log()
        .lines()
        .map(|l| {
            let request = l.split('"').nth(1).unwrap();
            let status = l
                .split('"')
                .nth(2)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            format!("{} {status}", request.split(' ').next().unwrap())
        })
        .collect();
    let want = [
        "GET 200", "GET 206", "GET 206", "GET 206", "GET 412", "GET 200", "GET 404", "PUT 403",
    ];
    assert_eq!(statuses, want);
    assert_eq!(n.logs(), n.access_log());
    fastest
}

#[test]
fn nginx_serves_ranges_with_optional_latency() {
    let root = tempfile::tempdir().unwrap();
    let data = mib();
    std::fs::write(root.path().join("big.bin"), &data).unwrap();

    let Some(fast) = Nginx::start(root.path(), 0) else {
        return;
    };
    check_nginx(&fast, &data);

    let Some(slow) = Nginx::start(root.path(), 30) else {
        return;
    };
    // Every request of the slow server waits 30 ms first (a lower bound: no flakiness).
    let fastest = check_nginx(&slow, &data);
    assert!(fastest >= Duration::from_millis(30), "{fastest:?}");

    let pids = [fast.pid(), slow.pid()];
    let ports = [fast.port(), slow.port()];
    drop(fast);
    drop(slow);
    for (pid, port) in pids.into_iter().zip(ports) {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "nginx {pid} left"
        );
        assert!(!servers::port_open(port), "port {port} still open");
    }
}

#[test]
fn seaweed_s3_signed_writes_anonymous_reads() {
    let Some(s3) = Seaweed::start() else {
        return;
    };
    assert_eq!(s3.endpoint(), format!("http://127.0.0.1:{}", s3.port()));
    assert_eq!(
        (s3.access_key(), s3.secret_key()),
        ("h5mount-test", "h5mount-secret")
    );
    let data = mib();
    s3.create_bucket("h5data");
    let etag = s3.put_object("h5data", "dir/file one.h5", &data);
    assert!(!etag.is_empty());
    let path = Seaweed::object_path("h5data", "dir/file one.h5");
    assert_eq!(path, "/h5data/dir/file%20one.h5");
    assert_eq!(
        s3.object_url("h5data", "dir/file one.h5"),
        format!("{}{path}", s3.endpoint())
    );

    // Anonymous, unsigned, path-style ranged read.
    let r = get(s3.port(), &path, &[("Range", "bytes=4096-8191")]);
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes 4096-8191/1048576"));
    assert_eq!(r.body, &data[4096..8192]);
    let whole = get(s3.port(), &path, &[]);
    assert_eq!(whole.status, 200);
    assert_eq!(whole.body, data);
    assert_eq!(whole.header("etag"), Some(etag.as_str()));

    // Signed read too.
    let r = s3
        .signed("GET", &path, "", &[("Range", "bytes=0-99")], b"")
        .unwrap();
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[..100]);

    // Anonymous writes and deletes are refused; a wrong secret is refused.
    let put = http_request(s3.port(), "PUT", "/h5data/anon.bin", &[], b"nope").unwrap();
    assert_eq!(put.status, 403, "{put:?}");
    let del = http_request(s3.port(), "DELETE", &path, &[], b"").unwrap();
    assert_eq!(del.status, 403, "{del:?}");
    let sig = servers::sigv4_headers(
        "h5mount-test",
        "wrong-secret",
        "PUT",
        s3.port(),
        "/h5data/forged.bin",
        "",
        &[],
        b"x",
    );
    let hs: Vec<(&str, &str)> = sig.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let forged = http_request(s3.port(), "PUT", "/h5data/forged.bin", &hs, b"x").unwrap();
    assert_eq!(forged.status, 403, "{forged:?}");
    assert_eq!(get(s3.port(), "/h5data/anon.bin", &[]).status, 404);
    assert_eq!(get(s3.port(), "/h5data/forged.bin", &[]).status, 404);

    // Overwrite, then delete.
    let etag2 = s3.put_object("h5data", "dir/file one.h5", &data[..1000]);
    assert_ne!(etag, etag2);
    let r = get(s3.port(), &path, &[]);
    assert_eq!(r.body, &data[..1000]);
    s3.delete_object("h5data", "dir/file one.h5");
    assert_eq!(get(s3.port(), &path, &[]).status, 404);

    let (pid, port) = (s3.pid(), s3.port());
    drop(s3);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "weed {pid} left"
    );
    assert!(!servers::port_open(port), "S3 port {port} still open");
}
