//! Hand-built v2 B-tree images: geometry, walks, `find`, checksums and record decoders.

use super::records::*;
use super::*;
use crate::io::checksum::lookup3;
use crate::io::testutil::memory_storage;

/// Append the lookup3 checksum of `b` to it.
pub(crate) fn seal(mut b: Vec<u8>) -> Vec<u8> {
    let s = lookup3(&b, 0);
    b.extend_from_slice(&s.to_le_bytes());
    b
}

/// A v2 B-tree header image.
pub(crate) fn header(
    ty: u8,
    node: u32,
    rs: u16,
    depth: u16,
    root: u64,
    nroot: u16,
    total: u64,
) -> Vec<u8> {
    let mut b = b"BTHD\0".to_vec();
    b.push(ty);
    b.extend_from_slice(&node.to_le_bytes());
    b.extend_from_slice(&rs.to_le_bytes());
    b.extend_from_slice(&depth.to_le_bytes());
    b.extend_from_slice(&[100, 40]);
    b.extend_from_slice(&root.to_le_bytes());
    b.extend_from_slice(&nroot.to_le_bytes());
    b.extend_from_slice(&total.to_le_bytes());
    seal(b)
}

/// A leaf node image padded to `node` bytes.
pub(crate) fn leaf(ty: u8, node: usize, recs: &[Vec<u8>]) -> Vec<u8> {
    let mut b = b"BTLF\0".to_vec();
    b.push(ty);
    recs.iter().for_each(|r| b.extend_from_slice(r));
    let mut b = seal(b);
    b.resize(node, 0);
    b
}

/// An internal node image (depth 1: pointers are address + 1-byte count) padded to `node`.
pub(crate) fn internal(ty: u8, node: usize, recs: &[Vec<u8>], kids: &[(u64, u8)]) -> Vec<u8> {
    let mut b = b"BTIN\0".to_vec();
    b.push(ty);
    recs.iter().for_each(|r| b.extend_from_slice(r));
    for &(a, n) in kids {
        b.extend_from_slice(&a.to_le_bytes());
        b.push(n);
    }
    let mut b = seal(b);
    b.resize(node, 0);
    b
}

fn link_rec(hash: u32, id: u8) -> Vec<u8> {
    let mut r = hash.to_le_bytes().to_vec();
    r.extend_from_slice(&[0, id, 0, 0, 0, 0, 5]);
    r
}

/// Header at 0, root (internal, 1 record) at 0x100, leaves at 0x200 and 0x300.
/// Node size 64 holds 4 type-5 records per leaf and 2 per internal node.
fn two_level_tree() -> Vec<u8> {
    let mut img = header(5, 64, 11, 1, 0x100, 1, 5);
    img.resize(0x100, 0);
    img.extend(internal(
        5,
        64,
        &[link_rec(30, 3)],
        &[(0x200, 2), (0x300, 2)],
    ));
    img.resize(0x200, 0);
    img.extend(leaf(5, 64, &[link_rec(10, 1), link_rec(20, 2)]));
    img.resize(0x300, 0);
    img.extend(leaf(5, 64, &[link_rec(40, 4), link_rec(50, 5)]));
    img
}

#[test]
fn geometry_matches_real_files() {
    // Capacities observed in trees written by HDF5 2.0 (dense links, attributes, chunks).
    let caps = |ns, rs, d| -> Vec<u64> {
        geometry(ns, rs, d, Sizes::DEFAULT)
            .unwrap()
            .iter()
            .map(|g| g.max_records)
            .collect()
    };
    assert_eq!(caps(512, 11, 2), [45, 24, 22]);
    assert_eq!(caps(512, 15, 2), [33, 20, 18]);
    assert_eq!(caps(512, 17, 2), [29, 18, 17]);
    assert_eq!(caps(2048, 24, 1), [84, 61]);
    assert_eq!(caps(2048, 44, 1), [46, 38]);
    assert!(geometry(12, 11, 0, Sizes::DEFAULT).is_none());
    assert!(geometry(30, 11, 1, Sizes::DEFAULT).is_none());
}

#[test]
fn walk_in_key_order_and_find() {
    let s = memory_storage(&two_level_tree());
    let h = BtreeV2Header::read(&s, 0, Sizes::DEFAULT).unwrap();
    assert_eq!(
        h.geometry.iter().map(|g| g.max_records).collect::<Vec<_>>(),
        [4, 2]
    );
    let mut hashes = vec![];
    for_each_record(&s, &h, Sizes::DEFAULT, &mut |r| {
        hashes.push(LinkNameRecord::parse(r)?.hash);
        Ok(true)
    })
    .unwrap();
    assert_eq!(hashes, [10, 20, 30, 40, 50]);
    // Early stop.
    let mut n = 0;
    for_each_record(&s, &h, Sizes::DEFAULT, &mut |_| {
        n += 1;
        Ok(n < 2)
    })
    .unwrap();
    assert_eq!(n, 2);
    for (key, id) in [(10u32, 1u8), (30, 3), (50, 5)] {
        let r = find(&s, &h, Sizes::DEFAULT, &mut |r| {
            Ok(key.cmp(&LinkNameRecord::parse(r)?.hash))
        })
        .unwrap()
        .unwrap();
        assert_eq!(LinkNameRecord::parse(&r).unwrap().heap_id[1], id);
    }
    for key in [5u32, 25, 35, 60] {
        let r = find(&s, &h, Sizes::DEFAULT, &mut |r| {
            Ok(key.cmp(&LinkNameRecord::parse(r)?.hash))
        });
        assert!(r.unwrap().is_none());
    }
}

#[test]
fn corrupt_trees_are_refused() {
    // Flip a byte in a leaf: checksum error.
    let mut img = two_level_tree();
    img[0x300 + 7] ^= 1;
    let s = memory_storage(&img);
    let h = BtreeV2Header::read(&s, 0, Sizes::DEFAULT).unwrap();
    let r = for_each_record(&s, &h, Sizes::DEFAULT, &mut |_| Ok(true));
    assert!(matches!(r, Err(Error::Checksum { addr: 0x300, .. })));
    // Header checksum.
    let mut img = two_level_tree();
    img[6] ^= 1;
    let s = memory_storage(&img);
    assert!(matches!(
        BtreeV2Header::read(&s, 0, Sizes::DEFAULT),
        Err(Error::Checksum { .. })
    ));
    // A leaf claiming more records than fit, and a header announcing fewer records than the
    // tree holds.
    let mut img = header(5, 64, 11, 1, 0x100, 1, 3);
    img.resize(0x100, 0);
    img.extend_from_slice(&two_level_tree()[0x100..]);
    let s = memory_storage(&img);
    let h = BtreeV2Header::read(&s, 0, Sizes::DEFAULT).unwrap();
    assert!(matches!(
        for_each_record(&s, &h, Sizes::DEFAULT, &mut |_| Ok(true)),
        Err(Error::Limit { .. })
    ));
    let mut img = two_level_tree();
    img[0x100 + 6 + 11 + 8] = 9; // first child now claims 9 records
    let tail = img[0x100..0x100 + 6 + 11 + 18].to_vec();
    img.splice(0x100..0x100 + 64, {
        let mut n = seal(tail);
        n.resize(64, 0);
        n
    });
    let s = memory_storage(&img);
    let h = BtreeV2Header::read(&s, 0, Sizes::DEFAULT).unwrap();
    assert!(matches!(
        for_each_record(&s, &h, Sizes::DEFAULT, &mut |_| Ok(true)),
        Err(Error::Corrupt { .. })
    ));
    // Depth beyond the limit.
    let img = header(5, 512, 11, 200, 0x100, 1, 3);
    let s = memory_storage(&img);
    assert!(matches!(
        BtreeV2Header::read(&s, 0, Sizes::DEFAULT),
        Err(Error::Limit { .. })
    ));
}

#[test]
fn record_decoders() {
    let s = Sizes::DEFAULT;
    let mut r = vec![];
    r.extend_from_slice(&0x1000u64.to_le_bytes());
    r.extend_from_slice(&77u64.to_le_bytes());
    r.extend_from_slice(&3u64.to_le_bytes());
    let h = HugeObjectRecord::parse(1, &r, s).unwrap();
    assert_eq!(
        (h.addr, h.len, h.id, h.memory_size),
        (0x1000, 77, Some(3), None)
    );
    assert_eq!(HugeObjectRecord::parse(3, &r, s).unwrap().id, None);
    assert!(HugeObjectRecord::parse(2, &r, s).is_err()); // too short for type 2

    let mut r = 9u64.to_le_bytes().to_vec();
    r.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
    let l = LinkOrderRecord::parse(&r).unwrap();
    assert_eq!((l.creation_order, l.heap_id), (9, [1, 2, 3, 4, 5, 6, 7]));

    let mut r = [8u8; 8].to_vec();
    r.push(1);
    r.extend_from_slice(&5u32.to_le_bytes());
    r.extend_from_slice(&0xabcdu32.to_le_bytes());
    let a = AttributeRecord::parse(8, &r).unwrap();
    assert_eq!((a.flags, a.creation_order, a.hash), (1, 5, Some(0xabcd)));
    assert_eq!(AttributeRecord::parse(9, &r[..13]).unwrap().hash, None);

    let mut r = vec![1u8];
    r.extend_from_slice(&0x11u32.to_le_bytes());
    r.extend_from_slice(&[0, 12]);
    r.extend_from_slice(&2u16.to_le_bytes());
    r.extend_from_slice(&0x800u64.to_le_bytes());
    let m = SohmRecord::parse(&r, s).unwrap();
    assert_eq!(
        m,
        SohmRecord::ObjectHeader {
            hash: 0x11,
            message_type: 12,
            index: 2,
            header_addr: 0x800
        }
    );
    assert!(SohmRecord::parse(&[7, 0, 0, 0, 0], s).is_err());

    // Type 11 with a 3-byte size (layout v4 style), rank 2.
    let mut r = 0x4000u64.to_le_bytes().to_vec();
    r.extend_from_slice(&[0x10, 0x02, 0x00]);
    r.extend_from_slice(&1u32.to_le_bytes());
    r.extend_from_slice(&4u64.to_le_bytes());
    r.extend_from_slice(&7u64.to_le_bytes());
    let c = ChunkBtRecord::parse(11, &r, s, 2).unwrap();
    assert_eq!(
        (c.addr, c.size, c.filter_mask, c.scaled.as_slice()),
        (0x4000, Some(0x210), 1, &[4u64, 7][..])
    );
    use std::cmp::Ordering::*;
    assert_eq!(ChunkBtRecord::compare(11, &r, s, &[4, 7]).unwrap(), Equal);
    assert_eq!(ChunkBtRecord::compare(11, &r, s, &[4, 8]).unwrap(), Greater);
    assert_eq!(ChunkBtRecord::compare(11, &r, s, &[3, 9]).unwrap(), Less);
    assert!(ChunkBtRecord::parse(11, &r, s, 3).is_err());
}
