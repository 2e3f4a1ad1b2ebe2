use super::multirange::{multi_status, MultiStatus};
use super::net::{bucket_ms, bucket_of, BUCKETS};
use super::origin::split_url;
use super::*;
use crate::io::source::Opener;
use std::time::Duration;

#[test]
fn sources_that_are_remote() {
    assert!(is_remote("s3://b/k.h5"));
    assert!(is_remote("https://h/f.h5"));
    assert!(!is_remote("/data/f.h5"));
    assert!(!is_remote("s3:/b"));
    assert!(is_prefix("s3://b") && is_prefix("s3://b/") && is_prefix("s3://b/p/q/"));
    assert!(!is_prefix("s3://b/k.h5") && !is_prefix("https://h/d/"));
    let o = RemoteOptions::default();
    assert!(Remote::open("s3://bucket", &o).is_err());
    assert!(split_url("s3:///key").is_err());
    assert!(split_url("http://host").is_err());
    assert_eq!(
        split_url("http://127.0.0.1:1/a/b.h5").unwrap(),
        ("http://127.0.0.1:1", "/a/b.h5")
    );
    let (o, p) = RemoteOrigin::of("s3://b/x/y/", &o).unwrap();
    assert_eq!((o.base(), p.as_str()), ("s3://b", "/x/y/"));
    assert_eq!(o.url("/x/y/f.h5"), "s3://b/x/y/f.h5");
    let (o2, p2) = RemoteOrigin::of("s3://b", &RemoteOptions::default()).unwrap();
    assert_eq!((o2.base(), p2.as_str()), ("s3://b", "/"));
    let (h, hp) = RemoteOrigin::of("https://host:8/a/b.h5", &RemoteOptions::default()).unwrap();
    assert_eq!((h.base(), hp.as_str()), ("https://host:8", "/a/b.h5"));
    assert!(RemoteOrigin::of("https://host", &RemoteOptions::default()).is_err());
    assert!(h.list_now("/a").is_err(), "HTTP has no listing");
}

#[test]
fn answers_to_several_ranges_are_classified() {
    assert_eq!(multi_status(206), MultiStatus::Parts);
    for s in [429, 500, 502, 503, 504] {
        assert_eq!(multi_status(s), MultiStatus::Again, "{s}");
    }
    for s in [401, 403, 404, 410, 412] {
        assert_eq!(multi_status(s), MultiStatus::Final, "{s}");
    }
    for s in [200, 204, 301, 400, 416, 501, 505] {
        assert_eq!(multi_status(s), MultiStatus::Unsupported, "{s}");
    }
}

#[test]
fn latency_percentiles_come_from_buckets() {
    let b = bucket_of(Duration::from_millis(30));
    assert!(
        bucket_ms(b) >= 30.0 && bucket_ms(b) < 30.0 * 1.2,
        "{}",
        bucket_ms(b)
    );
    assert_eq!(bucket_of(Duration::ZERO), 0);
    assert_eq!(bucket_of(Duration::from_secs(1 << 30)), BUCKETS - 1);
}

#[test]
fn a_partial_answer_must_hold_the_range_asked_for() {
    use super::net::{asked_range, wrong_range};
    assert_eq!(asked_range("bytes=10-19"), Some((10, Some(19))));
    assert_eq!(asked_range("bytes=10-"), Some((10, None)));
    assert_eq!(asked_range("bytes=-5"), None);
    assert_eq!(asked_range("items=1-2"), None);
    let asked = (10, Some(19));
    assert_eq!(wrong_range(asked, Some("bytes 10-19/100")), None);
    assert_eq!(wrong_range(asked, Some("bytes 10-19/*")), None);
    // Shorter only where the object ends.
    assert_eq!(wrong_range(asked, Some("bytes 10-14/15")), None);
    for bad in [
        "bytes 11-20/100",
        "bytes 10-18/100",
        "bytes 10-20/100",
        "bytes 10-14/*",
        "bytes 19-10/100",
        "bytes x-y/100",
        "10-19/100",
    ] {
        assert!(wrong_range(asked, Some(bad)).is_some(), "{bad}");
    }
    assert!(wrong_range(asked, None).is_some());
    assert_eq!(wrong_range((0, None), Some("bytes 0-99/100")), None);
}
