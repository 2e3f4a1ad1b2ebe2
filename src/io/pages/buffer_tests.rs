//! The page cache's buffers: an answer landed in pieces that cut pages anywhere leaves each
//! page holding exactly its bytes, and a piece past the claim leaves nothing; a foreground
//! fetch may bring pages before those asked for, never after.

use super::*;

/// The bytes of page `p` of `obj` as cached, if it is (neither used nor moved by the look).
fn cached(cache: &PageCache, obj: u64, p: u64) -> Option<Vec<u8>> {
    let st = cache.lock();
    st.meta
        .pages
        .peek(&(obj, p))
        .or_else(|| st.data.pages.peek(&(obj, p)))
        .cloned()
}

/// Land `bytes` (the whole of pages `first..end` of an object of `len` bytes) as a
/// background fetch, in pieces of `piece` bytes.
fn fill(
    cache: &PageCache,
    obj: u64,
    (first, end): (u64, u64),
    bytes: &[u8],
    len: u64,
    piece: usize,
) {
    let claim = cache.claim(obj, &[(first, end)], 0, 64).remove(0);
    assert_eq!((claim.first, claim.end), (first, end));
    let mut f = cache.filling(claim, len);
    for p in bytes.chunks(piece) {
        f.push(p).expect("within the claim");
    }
    f.finish(Ok(()));
}

#[test]
fn pages_cut_across_pieces_hold_exactly_their_bytes() {
    // Four data pages at most: the second four pages evict the first four.
    let cache = PageCache::new(4 * PAGE, 4 * PAGE);
    let old = vec![0xAAu8; (8 * PAGE) as usize];
    let len1 = old.len() as u64;
    let page = PAGE as usize;
    fill(&cache, 1, (0, 4), &old[..4 * page], len1, 5000);
    fill(&cache, 1, (4, 8), &old[4 * page..], len1, 3 * page + 7);
    for p in 4..8 {
        assert_eq!(cached(&cache, 1, p).as_deref(), Some(&old[..page]));
    }
    // Another object, whose last page is short (300 bytes), landed in pieces that cut its
    // pages anywhere: each page holds its bytes, no more.
    let new: Vec<u8> = (0..PAGE + 300).map(|i| (i % 251) as u8).collect();
    let len2 = new.len() as u64;
    fill(&cache, 2, (0, 2), &new, len2, 1000);
    assert_eq!(cached(&cache, 2, 0).as_deref(), Some(&new[..page]));
    let last = cached(&cache, 2, 1).expect("cached");
    assert_eq!(last.len(), 300, "the short last page");
    assert_eq!(&last[..], &new[page..]);
    // Read back through the cache, with no fetch.
    let mut b = vec![0u8; new.len()];
    cache
        .read(
            2,
            0,
            &mut b,
            len2,
            Class::Data,
            |_, _| -> std::io::Result<(u64, Vec<u8>)> { panic!("cached: not fetched") },
        )
        .unwrap();
    assert_eq!(b, new);
    assert!(cache.stats().data_bytes <= 4 * PAGE);
    // A piece past the claim is refused whole: the page it would have completed is not
    // kept, and a later fetch of it holds only the later answer.
    let claim = cache.claim(3, &[(0, 1)], 0, 64).remove(0);
    let mut f = cache.filling(claim, len1);
    f.push(&old[..100]).unwrap();
    assert!(f.push(&old[..page]).is_err());
    f.finish(Err(std::io::Error::other("refused")));
    assert!(cached(&cache, 3, 0).is_none());
    let mut b = vec![0u8; 50];
    cache.set_fail_hold(Duration::ZERO);
    let fresh = vec![0x55u8; page];
    cache
        .read(3, 0, &mut b, len1, Class::Meta, |first, _| {
            Ok((first, fresh.clone()))
        })
        .unwrap();
    assert_eq!(b, vec![0x55u8; 50]);
    assert_eq!(cached(&cache, 3, 0).as_deref(), Some(&fresh[..]));
}

#[test]
fn a_fetch_may_bring_pages_before_those_asked_for_never_after() {
    let data: Vec<u8> = (0..8 * PAGE).map(|i| (i % 241) as u8).collect();
    let len = data.len() as u64;
    let page = PAGE as usize;
    let cache = PageCache::new(8 * PAGE, 8 * PAGE);
    // Page 5 asked for; the fetch brings pages 4 and 5 (the unit around it): both kept.
    let mut b = vec![0u8; 100];
    cache
        .read(
            1,
            5 * PAGE + 10,
            &mut b,
            len,
            Class::Meta,
            |first, count| {
                assert_eq!((first, count), (5, 1));
                Ok((4, data[4 * page..6 * page].to_vec()))
            },
        )
        .unwrap();
    assert_eq!(&b[..], &data[5 * page + 10..5 * page + 110]);
    assert!(cache.has(1, 4 * PAGE, 2 * PAGE));
    // Bytes from a page after the one asked for answer nothing: the read fails, nothing of
    // them is kept.
    let e = cache
        .read(1, 2 * PAGE, &mut b, len, Class::Meta, |_, _| {
            Ok((3, data[3 * page..4 * page].to_vec()))
        })
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
    assert!(!cache.has(1, 2 * PAGE, 1) && !cache.has(1, 3 * PAGE, 1));
    // Nor do bytes that stop before the end of the pages asked for.
    cache.set_fail_hold(Duration::ZERO);
    let e = cache
        .read(1, 2 * PAGE, &mut b, len, Class::Meta, |_, _| {
            Ok((1, data[page..3 * page - 1].to_vec()))
        })
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
    assert!(!cache.has(1, 2 * PAGE, 1));
    assert_eq!(cache.stats().inflight, 0);
}
