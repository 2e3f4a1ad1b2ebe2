//! A remote HTTP object whose server is a table of canned answers ([`super::canned`]), with
//! no server process and no socket: each answer a correct or a hostile server might give,
//! through `object_store`'s HTTP store and our own GETs of several ranges, both under the
//! counting and vetting layer of the real client.
//! - A GET of several ranges answered with correct parts, in order or not, brings them in
//!   one request. Parts that do not parse (a `Content-Range` longer or shorter than the
//!   bytes that follow, past the object's end, of another length of object, a part cut
//!   short, no separator) switch such GETs off and the ranges are fetched one GET each; a
//!   missing part, or a part of a range not asked for, is fetched on its own. Never wrong
//!   bytes.
//! - A GET of several ranges answered 200 with the whole object switches them off, its body
//!   unread, and later reads are right.
//! - A GET of one range answered in another content encoding, with the whole object (200),
//!   with a body longer or shorter than the range, or with another range fails the read as
//!   refused, caches nothing, and fails again at once while held; once the hold is over a
//!   correct answer is served.
//! - A 503 asking to come back in an hour fails the read within the time bound.
//! - 404, 403 and 412 read as `NotFound`, `PermissionDenied` and `StaleNetworkFileHandle`,
//!   from one range or several.
//! - An error answer with a long body is cut after `ERROR_BODY` bytes.
//!
//! Not here: redirects, which `reqwest` follows or refuses by the policy the real connector
//! gives it, before any answer reaches this layer; they need a socket (the mount tests).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::canned::{
    content_range, honest, multi_reply, parts_of, quick, range_reply, remote, Canned, Reply, PIECE,
};
use super::net::ERROR_BODY;
use super::object::Remote;
use super::store_tests::{bytes_of, kind_of};
use super::{RemoteKind, RemoteOptions};
use crate::io::pages::PAGE;
use crate::io::source::{ByteSource, RemoteSource};

const ETAG: &str = "\"v1\"";
const LEN: usize = 3 << 20;
const HOUR: Duration = Duration::from_secs(3600);

/// Scattered pieces past the first GET, each in a page of its own, far apart.
fn pieces() -> Vec<(u64, u64)> {
    (0..6)
        .map(|k| ((1 << 20) + k * (200 << 10) + 123, 300))
        .collect()
}

/// Read each of `pieces` of `r` (whose bytes are `data`): the bytes read are the object's
/// when the read succeeds.
fn read_all(r: &Remote, data: &[u8], pieces: &[(u64, u64)]) -> std::io::Result<()> {
    for &(o, n) in pieces {
        let mut b = vec![0u8; n as usize];
        r.read_at(o, &mut b)?;
        assert_eq!(&b[..], &data[o as usize..(o + n) as usize], "at {o}");
    }
    Ok(())
}

/// An object behind `answer` (GETs of several ranges on), its pieces hinted and read.
fn hinted(
    name: &str,
    answer: impl Fn(&[u8], &super::canned::Seen) -> Reply + Send + Sync + 'static,
) -> (Remote, Canned, Arc<Vec<u8>>) {
    let data = Arc::new(bytes_of(LEN, 11));
    let d = data.clone();
    let canned = Canned::new(move |req| answer(&d, req));
    let r = remote(
        &canned,
        name,
        LEN as u64,
        ETAG,
        true,
        &RemoteOptions::default(),
        HOUR,
    );
    r.prefetch(&pieces());
    (r, canned, data)
}

/// Whether `r` still sends GETs of several ranges.
fn multi_on(r: &Remote) -> bool {
    r.inner.multi_on()
}

#[test]
fn several_ranges_come_in_one_get_of_parts_in_any_order() {
    for reversed in [false, true] {
        let (r, canned, data) = hinted(&format!("parts-{reversed}"), move |data, req| {
            if !req.is_multi() {
                return honest(data, ETAG, req);
            }
            let mut parts = parts_of(data, &req.ranges());
            if reversed {
                parts.reverse();
            }
            multi_reply(&parts)
        });
        read_all(&r, &data, &pieces()).expect("read");
        assert_eq!(canned.gets(), (0, 1), "reversed: {reversed}");
        // Sent where object_store sends the object's GETs.
        let path = format!("/canned/parts-{reversed}.h5");
        assert!(canned.seen().iter().all(|s| s.path == path));
        assert!(multi_on(&r));
    }
}

type Edit = fn(&mut Vec<(String, Vec<u8>)>, &[std::ops::Range<u64>]);

#[test]
fn parts_that_do_not_hold_what_they_say_never_give_wrong_bytes() {
    // What is done to a correct answer's parts; whether GETs of several ranges stay on; the
    // GETs of one range that follow.
    let cases: [(&str, Edit, bool, usize); 8] = [
        (
            "longer",
            |p, rs| p[1].0 = content_range(&(rs[1].start..rs[1].end + 10), LEN as u64),
            false,
            6,
        ),
        (
            "shorter",
            |p, rs| p[1].0 = content_range(&(rs[1].start..rs[1].end - 10), LEN as u64),
            false,
            6,
        ),
        (
            "past-end",
            |p, _| p[2].0 = format!("bytes {}-{}/{}", LEN - 10, LEN + 5, LEN),
            false,
            6,
        ),
        (
            "other-length",
            |p, rs| p[2].0 = content_range(&rs[2], LEN as u64 + 100),
            false,
            6,
        ),
        ("cut-short", |p, _| p[3].1.truncate(100), false, 6),
        ("no-separator", |p, _| p.clear(), false, 6),
        ("missing", |p, _| drop(p.remove(2)), true, 1),
        // A part naming the range one byte before the one asked for (its bytes those of
        // the range asked for): it covers no range asked for, so its bytes are not used.
        (
            "other-range",
            |p, rs| p[4].0 = content_range(&(rs[4].start - 1..rs[4].end - 1), LEN as u64),
            true,
            1,
        ),
    ];
    for (name, edit, stays_on, singles) in cases {
        let (r, canned, data) = hinted(&format!("hostile-{name}"), move |data, req| {
            if !req.is_multi() {
                return honest(data, ETAG, req);
            }
            let ranges = req.ranges();
            let mut parts = parts_of(data, &ranges);
            edit(&mut parts, &ranges);
            if parts.is_empty() {
                // A 206 of bytes that are neither parts nor one range.
                return Reply::new(206, data[..1000].to_vec());
            }
            multi_reply(&parts)
        });
        read_all(&r, &data, &pieces()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(multi_on(&r), stays_on, "{name}");
        assert_eq!(canned.gets(), (singles, 1), "{name}");
    }
}

#[test]
fn the_whole_object_for_several_ranges_turns_them_off_unread() {
    let (r, canned, data) = hinted("whole-for-several", |data, req| match req.is_multi() {
        true => Reply::new(200, data.to_vec()).with("etag", ETAG),
        false => honest(data, ETAG, req),
    });
    read_all(&r, &data, &pieces()).expect("read");
    assert!(!multi_on(&r));
    let seen = canned.seen();
    let multi: Vec<_> = seen.iter().filter(|s| s.is_multi()).collect();
    assert_eq!(multi.len(), 1);
    assert!(!multi[0].body_read(), "the whole object is not read");
    // Later hints go one GET each.
    let more: Vec<(u64, u64)> = pieces().iter().map(|&(o, n)| (o + 3 * PAGE, n)).collect();
    r.prefetch(&more);
    read_all(&r, &data, &more).expect("read");
    assert_eq!(canned.gets(), (12, 1));
}

/// An object whose GETs of one range get `bad` answers while `hostile` is set, and honest
/// ones after; the read of `at` fails as refused, is held, and is served after the hold.
fn refused_then_served(name: &str, bad: fn(&[u8], &std::ops::Range<u64>) -> Reply) {
    let data = Arc::new(bytes_of(LEN, 12));
    let hostile = Arc::new(AtomicBool::new(true));
    let (d, h) = (data.clone(), hostile.clone());
    let canned = Canned::new(move |req| match req.ranges().as_slice() {
        [one] if req.method == "GET" && h.load(Ordering::Relaxed) => bad(&d, one),
        _ => honest(&d, ETAG, req),
    });
    let r = remote(
        &canned,
        name,
        LEN as u64,
        ETAG,
        false,
        &RemoteOptions::default(),
        HOUR,
    );
    let at = (1 << 20) + 5000;
    let mut b = vec![0u8; 3000];
    assert_eq!(
        kind_of(r.read_at(at, &mut b)),
        Some(RemoteKind::Refused),
        "{name}"
    );
    assert_eq!(canned.gets(), (1, 0), "{name}: refused, not retried");
    // Not read further than the range asked for (and the piece that passed it).
    let first = &canned.seen()[0];
    let asked: u64 = first.ranges().iter().map(|r| r.end - r.start).sum();
    let handed = first.handed.load(Ordering::Relaxed);
    assert!(
        handed <= asked + PIECE as u64,
        "{name}: {handed} bytes read"
    );
    assert!(
        !r.inner.pages.has(r.inner.obj, at, 1),
        "{name}: nothing cached"
    );
    assert_eq!(
        kind_of(r.read_at(at, &mut b)),
        Some(RemoteKind::Refused),
        "{name}"
    );
    assert_eq!(canned.gets(), (1, 0), "{name}: held, not asked again");
    hostile.store(false, Ordering::Relaxed);
    r.inner.pages.set_fail_hold(Duration::ZERO);
    r.read_at(at, &mut b).expect("served after the hold");
    assert_eq!(&b[..], &data[at as usize..at as usize + 3000], "{name}");
}

#[test]
fn a_range_in_another_content_encoding_is_refused() {
    refused_then_served("gzip", |d, r| {
        range_reply(d, r).with("content-encoding", "gzip")
    });
    refused_then_served("br", |d, r| {
        range_reply(d, r).with("content-encoding", " BR ")
    });
}

#[test]
fn several_ranges_in_another_content_encoding_stop_them_at_once() {
    // A server that compresses its answers to GETs of several ranges (and only those):
    // such GETs are sent no more after the first, not retried until the bound, and the
    // ranges come one at a time, right.
    let (r, canned, data) = hinted("multi-gzip", |data, req| {
        if req.is_multi() {
            multi_reply(&parts_of(data, &req.ranges())).with("content-encoding", "gzip")
        } else {
            honest(data, ETAG, req)
        }
    });
    read_all(&r, &data, &pieces()).expect("read one range at a time");
    assert!(!multi_on(&r));
    assert_eq!(canned.gets().1, 1, "one GET of several ranges, not retried");
}

#[test]
fn the_whole_object_for_one_range_is_refused_unread() {
    refused_then_served("whole-for-one", |d, _| Reply::new(200, d.to_vec()));
    let data = bytes_of(LEN, 13);
    let canned = Canned::new(move |_| Reply::new(200, data.clone()));
    let r = remote(
        &canned,
        "whole-unread",
        LEN as u64,
        ETAG,
        false,
        &RemoteOptions::default(),
        HOUR,
    );
    let mut b = [0u8; 10];
    assert_eq!(kind_of(r.read_at(10, &mut b)), Some(RemoteKind::Refused));
    assert!(
        canned.seen().iter().all(|s| !s.body_read()),
        "the body is not read"
    );
}

#[test]
fn a_body_that_is_not_the_range_is_refused() {
    refused_then_served("longer", |d, r| {
        let mut a = range_reply(d, r);
        a.body.extend_from_slice(b"0123456789");
        a
    });
    refused_then_served("shorter", |d, r| {
        let mut a = range_reply(d, r);
        a.body.truncate(a.body.len() - 10);
        a
    });
    // One far longer is refused as soon as it passes the range's length.
    refused_then_served("far-longer", |d, r| {
        let mut a = range_reply(d, r);
        a.tail = 64 << 20;
        a
    });
}

#[test]
fn a_content_range_of_another_range_fails_the_read() {
    let data = Arc::new(bytes_of(LEN, 14));
    let d = data.clone();
    let canned = Canned::new(move |req| match req.ranges().as_slice() {
        [one] if req.method == "GET" => range_reply(&d, &(one.start + 1..one.end + 1)),
        _ => honest(&d, ETAG, req),
    });
    let r = remote(
        &canned,
        "other-range",
        LEN as u64,
        ETAG,
        false,
        &RemoteOptions::default(),
        HOUR,
    );
    let mut b = vec![0u8; 3000];
    let e = r
        .read_at((1 << 20) + 5000, &mut b)
        .expect_err("not the range asked for");
    assert_eq!(RemoteKind::of(&e), Some(RemoteKind::Refused), "{e}");
    assert_eq!(canned.gets().0, 1, "a wrong answer is not retried");
}

#[test]
fn a_server_asking_to_come_back_in_an_hour_fails_within_the_bound() {
    let canned = Canned::new(|_| Reply::new(503, b"busy".to_vec()).with("retry-after", "3600"));
    let opts = quick(Duration::from_secs(1), Duration::from_secs(2));
    let bound = opts.bound();
    for multi in [false, true] {
        let r = remote(
            &canned,
            &format!("busy-{multi}"),
            LEN as u64,
            ETAG,
            multi,
            &opts,
            HOUR,
        );
        let t = Instant::now();
        if multi {
            r.prefetch(&pieces());
        }
        let mut b = [0u8; 100];
        let kind = kind_of(r.read_at(pieces()[0].0, &mut b));
        assert!(
            matches!(kind, Some(RemoteKind::Exhausted | RemoteKind::Transient)),
            "{kind:?}"
        );
        assert!(t.elapsed() < 10 * bound, "{:?}", t.elapsed());
    }
}

#[test]
fn refusals_about_the_object_keep_their_kind() {
    for (status, kind) in [
        (404, RemoteKind::NotFound),
        (403, RemoteKind::Denied),
        (412, RemoteKind::Changed),
    ] {
        let canned = Canned::new(move |_| Reply::new(status, b"no".to_vec()));
        for multi in [false, true] {
            let name = format!("status-{status}-{multi}");
            let r = remote(
                &canned,
                &name,
                LEN as u64,
                ETAG,
                multi,
                &RemoteOptions::default(),
                HOUR,
            );
            if multi {
                r.prefetch(&pieces());
            }
            let mut b = [0u8; 100];
            assert_eq!(
                kind_of(r.read_at(pieces()[0].0, &mut b)),
                Some(kind),
                "{name}"
            );
        }
    }
}

#[test]
fn a_long_error_body_is_cut() {
    let canned = Canned::new(|_| {
        let mut a = Reply::new(404, Vec::new());
        a.headers.retain(|(n, _)| *n != "content-length");
        a.tail = 64 << 20;
        a
    });
    let opts = quick(Duration::from_secs(2), Duration::from_secs(1));
    let r = remote(&canned, "long-error", LEN as u64, ETAG, false, &opts, HOUR);
    let mut b = [0u8; 100];
    assert!(r.read_at(5000, &mut b).is_err());
    for s in canned.seen() {
        let handed = s.handed.load(Ordering::Relaxed);
        assert!(
            handed <= ERROR_BODY + 8192,
            "{handed} bytes of an error body read"
        );
    }
}
