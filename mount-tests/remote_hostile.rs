//! Remote mounts against a server that misbehaves on purpose ([`hostile_server`], ours, on
//! loopback): what a broken or hostile HTTP/S3 server must never obtain from a mount, and the
//! bounds a mount keeps whatever it is answered.
//!
//! - Credentials never cross hosts: an S3 mount answered `307` to another loopback host
//!   (127.0.0.2), at mount or on a data read, fails (status 2, or EIO) and that host gets
//!   nothing; an HTTP redirect within the origin is followed (logged once at info), one to
//!   another origin only with `-o allow_redirects` / `--allow-redirects`.
//! - Wrong bytes never served: a range answered with `Content-Encoding: gzip` (also padded to
//!   the asked length) fails the read, and every GET asks for `Accept-Encoding: identity`; a
//!   206 naming another range than asked fails it too.
//! - Nothing outside the prefix: keys a LIST names outside the mounted prefix, or with `..`
//!   or `//` in them, are left out (logged) and the rest is served.
//! - Bounded listings: a continuation token that repeats, 1,000,000 keys (the bound of
//!   `--list-max-keys`, default 50,000), one LIST answer of 300 MB: few LISTs, a daemon
//!   below 200 MiB.
//! - A server that ignores `Range` with a 2 GiB answer (to a data read over HTTP and S3, a
//!   `cat`, GETs of several ranges, the mount's first GET): dropped within 16 MiB.
//! - Time bounds with `--request-timeout 3 --retry-timeout 6`: bodies and headers trickled a
//!   byte a second, no answer, connections cut mid-body, `503` with `Retry-After: 3600`; a
//!   pread and a `cat` fail within the bound, the same pread asked again fails at once (as
//!   the kernel's re-asks must), the daemon lives on.
//! - Messages a user can act on (S3): no credentials, no such bucket, connection refused, a
//!   prefix named without its trailing slash.
//!
//! Data reads use `stream.h5` of `fixtures/remote` (committed head plus generated elements:
//! a contiguous dataset `/stream` whose bytes past the first MiB are known, and two chunked
//! ones, `/a` and `/b`, in the first MiB); faults hit only what lies past the first GET (the
//! first MiB), so every mount is ready before a fault. Every mount runs with AWS_* cleared, a
//! temp HOME, instance metadata disabled and pointed at a closed loopback port. Memory tests
//! watch the daemon and abort the server's connections (failing the test) before it grows
//! far past the bound. Nothing waits a fixed time. The shared helpers are in
//! `hostile_env.rs`.

mod harness;
mod hostile_env;
mod hostile_server;

use std::fs;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::Mount;
use hostile_env::*;
use hostile_server::{
    contents_xml, Body, HostileServer, ListEntry, ListPage, Logged, Reply, Request, Response,
};

/// Dataset offset of the data reads: 4 MiB into /stream (past the first GET).
const DATA_AT: u64 = 4 * MIB;

// ---------------------------------------------------------------------------------------------
// 1. Credentials never cross hosts.

#[test]
fn an_s3_redirect_at_mount_never_reaches_another_host() {
    let fx = StreamFile::load();
    let (s, other) = (stream_server(&fx), other_host(&fx));
    let away = other.url("bucket/f.h5");
    s.set_fault(move |r, st| match r.method.as_str() {
        "HEAD" => Reply::Send(Response::redirect(307, &away)),
        _ => Reply::Send(st.answer(r)),
    });
    let env = Env::new();
    let f = env.mount_fails("s3://bucket/f.h5", Some(&s), true, &[]);
    let there = other.requests();
    assert!(
        there.is_empty(),
        "127.0.0.2 was sent: {:#?} (mount: {f:?})",
        shown(&there)
    );
    // The credentials were in use: the HEAD to the endpoint carried them.
    let here = s.requests();
    assert!(
        here.iter()
            .any(|l| l.req.header("x-amz-security-token") == Some(TOKEN)),
        "{:#?}",
        shown(&here)
    );
    f.assert_one_line("redirected HEAD");
}

#[test]
fn an_s3_redirect_of_a_data_read_never_reaches_another_host() {
    let fx = StreamFile::load();
    let (s, other) = (stream_server(&fx), other_host(&fx));
    let away = other.url("bucket/f.h5");
    s.set_fault(move |r, st| match past_first_get(r) {
        true => Reply::Send(Response::redirect(307, &away)),
        false => Reply::Send(st.answer(r)),
    });
    let env = Env::new();
    let m = env.mount("s3://bucket/f.h5", Some(&s), true, &[]);
    let got = pread(&m.at("/stream"), DATA_AT, 4096);
    let there = other.requests();
    assert!(there.is_empty(), "127.0.0.2 was sent: {:#?}", shown(&there));
    assert!(
        s.requests().iter().any(|l| l.status == 307),
        "no data GET was redirected: {:#?}",
        shown(&s.requests())
    );
    assert_eq!(got.map(|_| ()), Err(Some(libc::EIO)));
    // The daemon lives on: what the first GET brought still reads.
    assert!(fs::read_dir(m.path()).is_ok());
    let a = fs::read(m.at("/a")).unwrap();
    assert_eq!(harness::sha256(&a), fx.sha_a);
}

#[test]
fn an_http_redirect_within_the_origin_is_followed_and_logged_once() {
    let fx = StreamFile::load();
    let s = HostileServer::start("127.0.0.1");
    s.put("real/f.h5", fx.bytes.clone());
    let to = s.url("real/f.h5");
    s.set_fault(move |r, st| match r.path == "f.h5" {
        true => Reply::Send(Response::redirect(307, &to)),
        false => Reply::Send(st.answer(r)),
    });
    let env = Env::new();
    let m = env.mount(&s.url("f.h5"), None, false, &[]);
    assert_eq!(
        pread(&m.at("/stream"), DATA_AT, 65536).as_deref(),
        Ok(fx.data(DATA_AT, 65536))
    );
    assert_eq!(harness::sha256(&fs::read(m.at("/b")).unwrap()), fx.sha_b);
    assert!(s.requests().iter().any(|l| l.status == 307));
    let lines = env.log_lines(&["redirect"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("INFO"), "{lines:#?}");
}

#[test]
fn an_http_redirect_to_another_origin_needs_allow_redirects() {
    let fx = StreamFile::load();
    let (s, other) = (stream_server(&fx), other_host(&fx));
    let away = other.url("f.h5");
    s.set_fault(move |r, st| match r.path == "f.h5" {
        true => Reply::Send(Response::redirect(307, &away)),
        false => Reply::Send(st.answer(r)),
    });
    let env = Env::new();
    let f = env.mount_fails(&s.url("f.h5"), None, false, &[]);
    let there = other.requests();
    assert!(there.is_empty(), "127.0.0.2 was sent: {:#?}", shown(&there));
    f.assert_one_line("redirect to another origin");
    assert!(f.says("redirect"), "{f:?}");
    for allow in [&["-o", "allow_redirects"][..], &["--allow-redirects"]] {
        let m = env.mount(&s.url("f.h5"), None, false, allow);
        assert_eq!(
            pread(&m.at("/stream"), DATA_AT, 65536).as_deref(),
            Ok(fx.data(DATA_AT, 65536)),
            "{allow:?}"
        );
        assert_eq!(harness::sha256(&fs::read(m.at("/a")).unwrap()), fx.sha_a);
    }
    assert!(!other.requests().is_empty());
}

// ---------------------------------------------------------------------------------------------
// 2. Wrong bytes never served.

/// gzip of `bytes`.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Every data GET (past the first GET) answered by `fault` over HTTP and over S3: a pread of
/// /stream fails with EIO, never giving other bytes; each mount's log.
fn data_answers_fail_the_read(
    what: &str,
    fault: impl Fn(&Request, Response) -> Response + Send + Sync + 'static,
) -> Vec<(String, Env, Vec<Logged>)> {
    let fx = StreamFile::load();
    let s = stream_server(&fx);
    s.set_fault(move |r, st| {
        let normal = st.answer(r);
        match past_first_get(r) {
            true => Reply::Send(fault(r, normal)),
            false => Reply::Send(normal),
        }
    });
    let mut out = Vec::new();
    for (url, s3, creds) in [
        (s.url("f.h5"), None, false),
        ("s3://bucket/f.h5".to_string(), Some(&s), true),
    ] {
        let env = Env::new();
        let skip = s.requests().len();
        let m = env.mount(&url, s3, creds, &[]);
        let got = pread(&m.at("/stream"), DATA_AT, 4096);
        match &got {
            Ok(b) if b.as_slice() == fx.data(DATA_AT, 4096) => {
                panic!("{what}, {url}: the read succeeded (right bytes)")
            }
            Ok(_) => panic!("{what}, {url}: the read returned bytes that are not the file's"),
            Err(e) => assert_eq!(*e, Some(libc::EIO), "{what}, {url}"),
        }
        assert!(fs::read_dir(m.path()).is_ok(), "{what}, {url}: daemon gone");
        let log: Vec<Logged> = s.requests().into_iter().skip(skip).collect();
        assert!(
            log.iter().any(|l| past_first_get(&l.req)),
            "{what}, {url}: no data GET: {:#?}",
            shown(&log)
        );
        out.push((url, env, log));
    }
    out
}

#[test]
fn a_gzip_encoded_range_answer_is_never_served() {
    // The compressed body decodes to bytes of the asked length that are not the file's;
    // then the same compressed, padded with zeros to the asked length (lengths match).
    // The padded form needs the compressed bytes to be shorter than the range (checked here:
    // an assertion in the server's thread would only cut its connection).
    assert!(gzip(&[0x5a; 4096]).len() < 4096);
    let mut runs = Vec::new();
    for padded in [false, true] {
        let got = data_answers_fail_the_read("gzip", move |_, normal| {
            let len = normal.bytes().map_or(0, <[u8]>::len);
            let mut body = gzip(&vec![0x5a; len]);
            if padded {
                body.resize(len, 0);
            }
            normal
                .header("Content-Encoding", "gzip")
                .header("Content-Length", &body.len().to_string())
                .body(body)
        });
        runs.extend(got.into_iter().map(|r| (padded, r)));
    }
    for (padded, (url, env, log)) in runs {
        for g in with_method(&log, "GET") {
            assert_eq!(
                g.req.header("accept-encoding"),
                Some("identity"),
                "{url}: {}",
                g.req.target
            );
        }
        let lines = env.log_lines(&["encoding"]);
        assert!(
            !lines.is_empty(),
            "{url} (padded {padded}): no log line: {}",
            env.log()
        );
    }
}

#[test]
fn a_range_answer_naming_another_range_fails_the_read() {
    // The bytes of the range 4 KiB further on, and a Content-Range that says so (same
    // length as asked).
    let fx = Arc::new(StreamFile::load());
    let len = fx.bytes.len() as u64;
    let f = fx.clone();
    data_answers_fail_the_read("shifted Content-Range", move |r, normal| {
        let Some(&[(a, b)]) = r.ranges(len).as_deref() else {
            return normal;
        };
        let (a, b) = ((a + 4096).min(len - 1 - (b - a)), (b + 4096).min(len - 1));
        normal
            .header("Content-Range", &format!("bytes {a}-{b}/{len}"))
            .body(f.bytes[a as usize..=b as usize].to_vec())
    });
}

// ---------------------------------------------------------------------------------------------
// 3. Nothing outside the prefix.

#[test]
fn a_prefix_mount_shows_only_the_keys_under_it() {
    let layout = fs::read(fixtures().join("layout.h5")).unwrap();
    let s = HostileServer::start("127.0.0.1");
    let keys = [
        "run/a.h5",
        "run/good.h5",
        "run/sub/x.h5",
        "other/x.h5",
        "runaway.h5",
    ];
    let bad = ["run/a/../b.h5", "run//c.h5", "run/../up.h5"];
    for k in keys.iter().chain(&bad) {
        s.put(&format!("bucket/{k}"), layout.clone());
    }
    s.set_fault(|r, st| {
        if !(r.is_list() && r.query("prefix") == Some("run/")) {
            return Reply::Send(st.answer(r));
        }
        // Every key of the bucket as if under the prefix, and prefixes outside it.
        let all = ["run/a.h5", "run/good.h5", "other/x.h5", "runaway.h5"];
        let bad = ["run/a/../b.h5", "run//c.h5", "run/../up.h5"];
        let page = ListPage {
            bucket: "bucket".into(),
            prefix: "run/".into(),
            contents: all
                .iter()
                .chain(&bad)
                .filter_map(|k| st.entry("bucket", k))
                .collect(),
            prefixes: vec!["run/sub/".into(), "other/".into(), "run//".into()],
            next_token: None,
        };
        Reply::Send(page.response())
    });
    let env = Env::new();
    let m = env.mount("s3://bucket/run/", Some(&s), true, &[]);
    let mut names: Vec<String> = fs::read_dir(m.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.h5", "good.h5", "sub"], "{}", env.log());
    // The rest is served.
    let want = layout_json()["sha256"]["/rand"]
        .as_str()
        .unwrap()
        .to_string();
    for f in ["a.h5", "good.h5"] {
        let got = fs::read(m.path().join(f).join("rand")).unwrap();
        assert_eq!(harness::sha256(&got), want, "{f}");
    }
    for k in bad {
        let lines = env.log_lines(&[k]);
        assert_eq!(lines.len(), 1, "{k}: {lines:#?}");
    }
    assert!(
        !env.log_lines(&["entries outside the prefix"]).is_empty(),
        "keys outside the prefix (other/x.h5, runaway.h5) not logged: {}",
        env.log()
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Bounded listings.

/// LISTs a server answered.
fn lists(s: &HostileServer) -> usize {
    s.requests().iter().filter(|l| l.req.is_list()).count()
}

/// The names in the mount's root, sorted.
fn root_names(m: &Mount) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(m.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_continuation_token_that_repeats_ends_the_listing() {
    let layout = fs::read(fixtures().join("layout.h5")).unwrap();
    let s = HostileServer::start("127.0.0.1");
    s.put("bucket/run/a.h5", layout);
    let sent = Arc::new(AtomicUsize::new(0));
    let n = sent.clone();
    s.set_fault(move |r, st| {
        if !r.is_list() {
            return Reply::Send(st.answer(r));
        }
        // Always "more", with the same token (50 times at most, so that a client that does
        // not notice still ends).
        let more = n.fetch_add(1, Ordering::Relaxed) < 50;
        let page = ListPage {
            bucket: "bucket".into(),
            prefix: "run/".into(),
            contents: st.entry("bucket", "run/a.h5").into_iter().collect(),
            prefixes: vec![],
            next_token: more.then(|| "the-same-token".to_string()),
        };
        Reply::Send(page.response())
    });
    let env = Env::new();
    let m = env.mount("s3://bucket/run/", Some(&s), true, &[]);
    assert_eq!(root_names(&m), ["a.h5"]);
    assert!(m.path().join("a.h5/rand").is_file());
    assert!(lists(&s) <= 3, "{} LISTs", lists(&s));
    assert!(!env.log_lines(&["token"]).is_empty(), "{}", env.log());
}

/// Keys `run/k0000000.h5`... of a listing of 1,000,000, served in pages of at most 1,000
/// generated on demand; at most 60 pages (then the listing ends, so that a client that does
/// not stop still ends).
fn million_keys(s: &HostileServer) {
    const KEYS: usize = 1_000_000;
    let pages = Arc::new(AtomicUsize::new(0));
    s.set_fault(move |r, st| {
        if !r.is_list() {
            return Reply::Send(st.answer(r));
        }
        let from: usize = r
            .query("continuation-token")
            .and_then(|t| t.strip_prefix('p')?.parse().ok())
            .unwrap_or(0);
        let max: usize = r
            .query("max-keys")
            .and_then(|m| m.parse().ok())
            .unwrap_or(1000)
            .clamp(1, 1000);
        let end = (from + max).min(KEYS);
        let last_allowed = pages.fetch_add(1, Ordering::Relaxed) >= 60;
        let page = ListPage {
            bucket: "bucket".into(),
            prefix: "run/".into(),
            contents: (from..end)
                .map(|i| ListEntry {
                    key: format!("run/k{i:07}.h5"),
                    size: 4096,
                    etag: format!("\"e{i}\""),
                })
                .collect(),
            prefixes: vec![],
            next_token: (end < KEYS && !last_allowed).then(|| format!("p{end}")),
        };
        Reply::Send(page.response())
    });
}

fn first_keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k{i:07}.h5")).collect()
}

#[test]
fn a_listing_stops_at_list_max_keys() {
    let s = HostileServer::start("127.0.0.1");
    million_keys(&s);
    for opt in [
        &["--list-max-keys", "2500"][..],
        &["-o", "list_max_keys=2500"],
    ] {
        let env = Env::new();
        let before = lists(&s);
        let m = env.mount("s3://bucket/run/", Some(&s), true, opt);
        let names = root_names(&m);
        assert!(names == first_keys(2500), "{opt:?}: {} names", names.len());
        assert!(
            lists(&s) - before <= 3,
            "{opt:?}: {} LISTs",
            lists(&s) - before
        );
        let lines = env.log_lines(&["list-max-keys", "list_max_keys"]);
        assert_eq!(lines.len(), 1, "{opt:?}: {}", env.log());
    }
}

#[test]
fn a_listing_stops_at_the_default_bound_within_memory() {
    let s = HostileServer::start("127.0.0.1");
    million_keys(&s);
    let env = Env::new();
    let mut guard = None;
    let m = Mount::by_command(|mp| {
        guard = Some(MemoryGuard::start(mp, vec![s.aborter()]));
        env.command("s3://bucket/run/", mp, Some(&s), true, &[])
    });
    let names = root_names(&m);
    guard
        .as_ref()
        .unwrap()
        .assert_within(m.pid(), "default bound");
    assert!(lists(&s) <= 51, "{} LISTs", lists(&s));
    assert!(names == first_keys(50_000), "{} names", names.len());
    let lines = env.log_lines(&["list-max-keys", "list_max_keys"]);
    assert_eq!(lines.len(), 1, "{}", env.log());
}

#[test]
fn a_huge_list_answer_is_refused_within_memory() {
    let layout = fs::read(fixtures().join("layout.h5")).unwrap();
    let s = HostileServer::start("127.0.0.1");
    s.put("bucket/run/a.h5", layout);
    s.put("bucket/run/sub/x.h5", vec![0; 16]);
    s.set_fault(|r, st| {
        if !(r.is_list() && r.query("prefix") == Some("run/sub/")) {
            return Reply::Send(st.answer(r));
        }
        // One page of about 300 MB, generated as it is sent.
        let head = ListPage {
            bucket: "bucket".into(),
            prefix: "run/sub/".into(),
            ..Default::default()
        }
        .xml();
        let head = head.trim_end_matches("</ListBucketResult>").to_string();
        let mut i: u64 = 0;
        let mut sent: u64 = 0;
        let mut state = 0;
        let next = move || -> Option<Vec<u8>> {
            match state {
                0 => {
                    state = 1;
                    Some(head.clone().into_bytes())
                }
                1 if sent < 300 * MIB => {
                    let mut piece = String::with_capacity(70_000);
                    while piece.len() < 64_000 {
                        piece += &contents_xml(&ListEntry {
                            key: format!("run/sub/k{i:09}.h5"),
                            size: 4096,
                            etag: "\"e\"".into(),
                        });
                        i += 1;
                    }
                    sent += piece.len() as u64;
                    Some(piece.into_bytes())
                }
                1 => {
                    state = 2;
                    Some(b"</ListBucketResult>".to_vec())
                }
                _ => None,
            }
        };
        let mut resp = Response::new(200).header("Content-Type", "application/xml");
        resp.body = Body::Gen {
            len: 2 << 30,
            next: Box::new(next),
        };
        Reply::Send(resp)
    });
    let env = Env::new();
    let mut guard = None;
    let m = Mount::by_command(|mp| {
        guard = Some(MemoryGuard::start(mp, vec![s.aborter()]));
        env.command("s3://bucket/run/", mp, Some(&s), true, &[])
    });
    let pid = m.pid();
    let listed = fs::read_dir(m.path().join("sub")).and_then(|d| d.collect::<Result<Vec<_>, _>>());
    let guard = guard.unwrap();
    guard.assert_within(pid, "a LIST answer of 300 MB");
    assert_eq!(
        listed.map(|v| v.len()).map_err(|e| e.raw_os_error()),
        Err(Some(libc::EIO))
    );
    assert_eq!(root_names(&m), ["a.h5", "sub"], "the daemon lives on");
    assert!(!env.log_lines(&["sub"]).is_empty(), "{}", env.log());
}

// ---------------------------------------------------------------------------------------------
// 5. A body far larger than asked.

/// A 200 answer announcing 2 GiB, of which 256 MiB at most are generated (then the
/// connection is cut, so that a client that reads on still ends).
fn two_gib(r: &Request, st: &hostile_server::Store) -> Response {
    const PIECE: u64 = 1 << 20;
    let mut left: u64 = 256 * MIB;
    let etag = st.object(&r.path).map(|o| o.etag).unwrap_or_default();
    let mut resp = Response::new(200).header("ETag", &etag);
    resp.body = Body::Gen {
        len: 2 << 30,
        next: Box::new(move || {
            let n = left.min(PIECE);
            left -= n;
            (n > 0).then(|| vec![0x42; n as usize])
        }),
    };
    resp
}

/// Body bytes the server wrote for each GET answered 200, once it is done with all of them.
fn written_200(s: &HostileServer) -> Vec<u64> {
    assert!(harness::wait_for(|| s
        .requests()
        .iter()
        .all(|l| l.finished)));
    s.requests()
        .iter()
        .filter(|l| l.status == 200 && l.req.method == "GET")
        .map(|l| l.body_bytes)
        .collect()
}

#[test]
fn a_server_ignoring_range_with_a_huge_body_is_dropped_at_once() {
    let fx = StreamFile::load();
    let layout = fs::read(fixtures().join("layout.h5")).unwrap();
    let mut seen = Vec::new();
    // A data read over HTTP and over S3: EIO.
    for s3 in [false, true] {
        let s = stream_server(&fx);
        s.set_fault(|r, st| match past_first_get(r) {
            true => Reply::Send(two_gib(r, st)),
            false => Reply::Send(st.answer(r)),
        });
        let env = Env::new();
        let m = match s3 {
            false => env.mount(&s.url("f.h5"), None, false, &[]),
            true => env.mount("s3://bucket/f.h5", Some(&s), true, &[]),
        };
        let got = pread(&m.at("/stream"), DATA_AT, 4096);
        assert_eq!(got.map(|_| ()), Err(Some(libc::EIO)), "s3 {s3}");
        assert!(fs::read_dir(m.path()).is_ok());
        // And a `cat` (large reads, read ahead).
        let cat = Command::new("cat")
            .arg(m.at("/stream"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(!cat.success(), "s3 {s3}");
        seen.push((format!("pread and cat, s3 {s3}"), written_200(&s)));
    }
    // The headers of a group's children, fetched with GETs of several ranges (HTTP).
    {
        let s = HostileServer::start("127.0.0.1");
        s.put("l.h5", layout);
        s.set_fault(|r, st| match past_first_get(r) {
            true => Reply::Send(two_gib(r, st)),
            false => Reply::Send(st.answer(r)),
        });
        let env = Env::new();
        let m = env.mount(&s.url("l.h5"), None, false, &[]);
        let _ = Command::new("ls").arg("-l").arg(m.at("/g")).output();
        assert!(fs::read_dir(m.path()).is_ok());
        seen.push(("listing /g".into(), written_200(&s)));
    }
    // The mount's own first GET: the mount fails.
    {
        let s = stream_server(&fx);
        s.set_fault(|r, st| match r.method == "GET" {
            true => Reply::Send(two_gib(r, st)),
            false => Reply::Send(st.answer(r)),
        });
        let env = Env::new();
        let f = env.mount_fails(&s.url("f.h5"), None, false, &[]);
        f.assert_one_line("the first GET answered with 2 GiB");
        seen.push(("the first GET".into(), written_200(&s)));
    }
    eprintln!("body bytes written per 200 answer: {seen:?}");
    for (what, bytes) in &seen {
        assert!(!bytes.is_empty(), "{what}: no GET answered: {seen:?}");
        assert!(
            bytes.iter().all(|&b| b <= 16 * MIB),
            "{what}: body bytes written per answer: {seen:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Time bounds.

/// `--retry-timeout` + `--request-timeout` (9 s), with slack for a loaded 2-core machine;
/// far below what the faults would cost unbounded (hours for a trickle or a Retry-After of
/// an hour, 12-18 s before the fix).
const READ_BOUND: Duration = Duration::from_secs(20);
/// A `cat` of the whole dataset: the same, and the kernel asking again.
const CAT_BOUND: Duration = Duration::from_secs(25);
/// The same bytes asked again right after they failed (as the kernel asks again): at once,
/// well under one retry bound (6 s).
const AGAIN_BOUND: Duration = Duration::from_secs(3);

/// With every data GET answered by `fault`, a pread of bytes never fetched, then a `cat` of
/// the whole of /stream, each fail with EIO within the bound, and the pread asked again
/// right after fails at once; the daemon lives on.
fn reads_fail_within_the_bound(
    what: &str,
    fault: impl Fn(&Request, Response) -> Reply + Send + Sync + 'static,
) {
    let fx = StreamFile::load();
    let s = stream_server(&fx);
    s.set_fault(move |r, st| match past_first_get(r) {
        true => fault(r, st.answer(r)),
        false => Reply::Send(st.answer(r)),
    });
    let env = Env::new();
    let m = env.mount(
        &s.url("f.h5"),
        None,
        false,
        &["--request-timeout", "3", "--retry-timeout", "6"],
    );
    let pid = m.pid();
    let path = m.at("/stream");
    let again = path.clone();
    let (pread_got, pread_took) = within(2 * READ_BOUND, move || pread(&path, DATA_AT, 4096));
    let (again_got, again_took) = within(2 * READ_BOUND, move || pread(&again, DATA_AT, 4096));

    let start = Instant::now();
    let mut cat = Command::new("cat")
        .arg(m.at("/stream"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cat_status = loop {
        if let Ok(Some(st)) = cat.try_wait() {
            break Some(st);
        }
        if start.elapsed() > 2 * CAT_BOUND {
            let _ = cat.kill();
            let _ = cat.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let cat_took = start.elapsed();
    let shown = format!(
        "{what}: pread {pread_got:?} after {pread_took:?} (bound {READ_BOUND:?}), again \
         {again_got:?} after {again_took:?} (bound {AGAIN_BOUND:?}), cat {cat_status:?} after \
         {cat_took:?} (bound {CAT_BOUND:?})"
    );
    eprintln!("{shown}");
    let pread_got = pread_got.unwrap_or_else(|| panic!("pread unfinished: {shown}"));
    assert_eq!(pread_got.map(|_| ()), Err(Some(libc::EIO)), "{shown}");
    assert!(pread_took <= READ_BOUND, "{shown}");
    let again_got = again_got.unwrap_or_else(|| panic!("pread again unfinished: {shown}"));
    assert_eq!(again_got.map(|_| ()), Err(Some(libc::EIO)), "{shown}");
    assert!(again_took <= AGAIN_BOUND, "{shown}");
    let cat_status = cat_status.unwrap_or_else(|| panic!("cat unfinished: {shown}"));
    assert!(!cat_status.success(), "{shown}");
    assert!(cat_took <= CAT_BOUND, "{shown}");
    assert!(
        pid.is_some_and(|p| !harness::pid_gone(p)),
        "daemon gone: {shown}"
    );
    assert!(fs::read_dir(m.path()).is_ok(), "{shown}");
}

#[test]
fn a_body_trickled_a_byte_a_second_fails_reads_within_the_bound() {
    reads_fail_within_the_bound("body trickled", |_, mut normal| {
        normal.trickle_body = Some(Duration::from_secs(1));
        Reply::Send(normal)
    });
}

#[test]
fn headers_trickled_a_byte_a_second_fail_reads_within_the_bound() {
    reads_fail_within_the_bound("headers trickled", |_, mut normal| {
        normal.trickle_head = Some(Duration::from_secs(1));
        Reply::Send(normal)
    });
}

#[test]
fn a_server_that_never_answers_fails_reads_within_the_bound() {
    reads_fail_within_the_bound("never answers", |_, _| Reply::Hold);
}

#[test]
fn connections_closed_mid_body_fail_reads_within_the_bound() {
    reads_fail_within_the_bound("closed mid-body", |_, mut normal| {
        let len = normal.bytes().map_or(0, |b| b.len() as u64);
        normal.cut_after = Some(len / 2);
        Reply::Send(normal)
    });
}

#[test]
fn a_503_asking_to_retry_in_an_hour_fails_reads_within_the_bound() {
    reads_fail_within_the_bound("503 Retry-After 3600", |_, _| {
        Reply::Send(Response::new(503).header("Retry-After", "3600"))
    });
}

// ---------------------------------------------------------------------------------------------
// 7. Messages a user can act on (S3).

/// Bound of a mount that fails for a reason the first answer gives: below the default
/// retry bound (30 s) that ten retries would reach.
const MESSAGE_BOUND: Duration = Duration::from_secs(20);

#[test]
fn no_credentials_says_so_and_suggests_no_sign_request() {
    let fx = StreamFile::load();
    let s = stream_server(&fx);
    // As S3 answers a request without a signature for a bucket that is not public.
    s.set_fault(|r, st| match r.has_credentials() {
        true => Reply::Send(st.answer(r)),
        false if r.method == "HEAD" => Reply::Send(Response::new(403)),
        false => Reply::Send(Response::s3_error(403, "AccessDenied", "Access Denied")),
    });
    let env = Env::new();
    let f = env.mount_fails("s3://bucket/f.h5", Some(&s), false, &[]);
    f.assert_one_line("no credentials");
    assert!(
        f.says("no credentials found") && f.says("--no-sign-request"),
        "{f:?}"
    );
    assert!(f.took < MESSAGE_BOUND, "{f:?}");
}

#[test]
fn a_missing_bucket_says_so() {
    let s = HostileServer::start("127.0.0.1");
    s.set_fault(|r, _| match r.method.as_str() {
        // S3 answers a HEAD with no body.
        "HEAD" => Reply::Send(Response::new(404)),
        _ => Reply::Send(Response::s3_error(
            404,
            "NoSuchBucket",
            "The specified bucket does not exist",
        )),
    });
    let env = Env::new();
    let f = env.mount_fails("s3://nobucket/f.h5", Some(&s), true, &[]);
    f.assert_one_line("no such bucket");
    assert!(
        f.says("no such bucket") && !f.says("bucket or key"),
        "{f:?}"
    );
    assert!(f.took < MESSAGE_BOUND, "{f:?}");
}

#[test]
fn a_closed_endpoint_says_connection_refused() {
    let env = Env::new();
    // The port the whole suite takes for closed (the metadata endpoint's).
    let endpoint = "http://127.0.0.1:9";
    let f = env.mount_fails("s3://bucket/f.h5", None, true, &["--endpoint", endpoint]);
    f.assert_one_line("closed endpoint");
    assert!(f.says("connection refused"), "{f:?}");
    assert!(f.took < MESSAGE_BOUND, "{f:?}");
}

#[test]
fn a_prefix_named_without_its_slash_hints_the_slash() {
    let s = HostileServer::start("127.0.0.1");
    s.put(
        "bucket/run/a.h5",
        fs::read(fixtures().join("layout.h5")).unwrap(),
    );
    let env = Env::new();
    let f = env.mount_fails("s3://bucket/run", Some(&s), true, &[]);
    f.assert_one_line("prefix without slash");
    assert!(f.says("s3://bucket/run/"), "{f:?}");
    assert!(f.took < MESSAGE_BOUND, "{f:?}");
}
