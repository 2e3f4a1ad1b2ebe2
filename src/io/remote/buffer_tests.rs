//! How answers land in memory, with a canned server ([`super::canned`]): a read longer than
//! [`PART`] is fetched as parallel GETs whose answers are written straight into their places
//! in one buffer, and each answer must still be exactly its range: one longer or shorter
//! fails the whole read as refused, keeps nothing of it, and is not read past its range.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::canned::{honest, range_reply, remote, Canned, Reply, PIECE};
use super::store_tests::{bytes_of, kind_of};
use super::{RemoteKind, RemoteOptions, PART};
use crate::io::source::ByteSource;

const ETAG: &str = "\"v1\"";
const LEN: usize = 12 << 20;
const HOUR: Duration = Duration::from_secs(3600);
/// A read of two whole parts and a piece of a third, away from the object's head.
const AT: u64 = (1 << 20) + 777;
const N: usize = (2 * PART as usize) + 300_000;

/// A hostile answer to a GET of one range of the object's bytes.
type Bad = fn(&[u8], &std::ops::Range<u64>) -> Reply;

/// An object whose GET of the range starting at `hostile_at` gets `bad`'s answer while the
/// flag is set (honest answers otherwise).
fn object(
    name: &str,
    hostile_at: u64,
    bad: Bad,
) -> (super::object::Remote, Canned, Arc<Vec<u8>>, Arc<AtomicBool>) {
    let data = Arc::new(bytes_of(LEN, 21));
    let hostile = Arc::new(AtomicBool::new(true));
    let (d, h) = (data.clone(), hostile.clone());
    let canned = Canned::new(move |req| match req.ranges().as_slice() {
        [one] if req.method == "GET" && one.start == hostile_at && h.load(Ordering::Relaxed) => {
            bad(&d, one)
        }
        _ => honest(&d, ETAG, req),
    });
    let opts = RemoteOptions::default();
    let r = remote(&canned, name, LEN as u64, ETAG, false, &opts, HOUR);
    (r, canned, data, hostile)
}

#[test]
fn a_long_read_comes_in_parts_each_in_its_place() {
    let (r, canned, data, _) = object("parts", u64::MAX, |_, _| unreachable!());
    let mut b = vec![0u8; N];
    r.read_at(AT, &mut b).expect("read");
    assert!(
        b == data[AT as usize..AT as usize + N],
        "the object's bytes"
    );
    // Three GETs of at most PART bytes, which together are the pages of the read.
    let mut got: Vec<_> = canned.seen().iter().flat_map(|s| s.ranges()).collect();
    got.sort_by_key(|r| r.start);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.iter().all(|r| r.end - r.start <= PART));
    assert!(got.windows(2).all(|w| w[0].end == w[1].start));
    assert!(got[0].start <= AT && got[2].end >= AT + N as u64);
}

#[test]
fn a_part_that_is_not_its_range_fails_the_whole_read_and_keeps_nothing() {
    // The pages of the read start at AT's page; its second part is the hostile one.
    let second = AT / crate::io::pages::PAGE * crate::io::pages::PAGE + PART;
    let cases: [(&str, Bad); 3] = [
        ("longer", |d, r| {
            let mut a = range_reply(d, r);
            a.body.extend_from_slice(b"0123456789");
            a
        }),
        ("shorter", |d, r| {
            let mut a = range_reply(d, r);
            a.body.truncate(a.body.len() - 10);
            a
        }),
        ("far-longer", |d, r| {
            let mut a = range_reply(d, r);
            a.tail = 64 << 20;
            a
        }),
    ];
    for (name, bad) in cases {
        let (r, canned, data, hostile) = object(name, second, bad);
        let mut b = vec![0u8; N];
        assert_eq!(
            kind_of(r.read_at(AT, &mut b)),
            Some(RemoteKind::Refused),
            "{name}"
        );
        let seen = canned.seen();
        let bad_get = seen
            .iter()
            .find(|s| s.ranges().first().is_some_and(|g| g.start == second))
            .expect("the second part was asked for");
        let asked = bad_get.ranges()[0].end - second;
        let handed = bad_get.handed.load(Ordering::Relaxed);
        assert!(
            handed <= asked + PIECE as u64,
            "{name}: {handed} bytes read of {asked}"
        );
        assert!(
            !r.inner.pages.has(r.inner.obj, AT, 1) && !r.inner.pages.has(r.inner.obj, second, 1),
            "{name}: nothing of the read kept"
        );
        // Held, then served right once the server is honest.
        hostile.store(false, Ordering::Relaxed);
        r.inner.pages.set_fail_hold(Duration::ZERO);
        r.read_at(AT, &mut b).expect("served after the hold");
        assert!(b == data[AT as usize..AT as usize + N], "{name}");
    }
}
