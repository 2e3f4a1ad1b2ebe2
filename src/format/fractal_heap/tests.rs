//! Hand-built fractal heaps: root direct block with each heap-ID type, and a root indirect
//! block with a nested indirect block.

use super::*;
use crate::format::btree_v2::tests::seal;
use crate::io::testutil::memory_storage;

struct Geometry {
    id_len: u16,
    flags: u8,
    max_man: u32,
    width: u16,
    start: u64,
    max_direct: u64,
    bits: u16,
    root: u64,
    rows: u16,
}

fn header(g: &Geometry) -> Vec<u8> {
    let mut b = b"FRHP\0".to_vec();
    b.extend_from_slice(&g.id_len.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.push(g.flags);
    b.extend_from_slice(&g.max_man.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes()); // next huge ID
    b.extend_from_slice(&u64::MAX.to_le_bytes()); // huge B-tree
    b.extend_from_slice(&0u64.to_le_bytes()); // free space
    b.extend_from_slice(&u64::MAX.to_le_bytes()); // free-space manager
    for _ in 0..8 {
        b.extend_from_slice(&0u64.to_le_bytes()); // space and object statistics
    }
    b.extend_from_slice(&g.width.to_le_bytes());
    b.extend_from_slice(&g.start.to_le_bytes());
    b.extend_from_slice(&g.max_direct.to_le_bytes());
    b.extend_from_slice(&g.bits.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&g.root.to_le_bytes());
    b.extend_from_slice(&g.rows.to_le_bytes());
    seal(b)
}

/// A direct block of `size` bytes at heap offset `off` (2-byte offsets) holding `objs`.
fn direct(size: usize, off: u16, checksum: bool, objs: &[(usize, &[u8])]) -> Vec<u8> {
    let mut b = b"FHDB\0".to_vec();
    b.extend_from_slice(&0u64.to_le_bytes()); // heap header address
    b.extend_from_slice(&off.to_le_bytes());
    let sum_at = b.len();
    if checksum {
        b.extend_from_slice(&[0; 4]);
    }
    b.resize(size, 0);
    for (at, data) in objs {
        b[*at..*at + data.len()].copy_from_slice(data);
    }
    if checksum {
        let s = lookup3(&b, 0);
        b[sum_at..sum_at + 4].copy_from_slice(&s.to_le_bytes());
    }
    b
}

fn indirect(off: u16, entries: &[u64]) -> Vec<u8> {
    let mut b = b"FHIB\0".to_vec();
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&off.to_le_bytes());
    entries
        .iter()
        .for_each(|e| b.extend_from_slice(&e.to_le_bytes()));
    seal(b)
}

fn root_direct_heap(id_len: u16) -> (Vec<u8>, Geometry) {
    let g = Geometry {
        id_len,
        flags: 2,
        max_man: 200,
        width: 4,
        start: 256,
        max_direct: 1024,
        bits: 16,
        root: 0x100,
        rows: 0,
    };
    let mut img = header(&g);
    img.resize(0x100, 0);
    img.extend(direct(256, 0, true, &[(40, b"hello")]));
    img.resize(0x300, 0);
    img.extend_from_slice(b"a huge object");
    (img, g)
}

#[test]
fn geometry_from_header() {
    let (img, _) = root_direct_heap(17);
    let s = memory_storage(&img);
    let h = FractalHeap::open(&s, 0, Sizes::DEFAULT).unwrap();
    // ceil(16 / 8) offset bytes; min(ceil(log2 1024 / 8), bytes for 200) length bytes.
    assert_eq!((h.offset_width, h.length_width), (2, 1));
    // Rows 0..=3 hold 256, 256, 512, 1024-byte blocks.
    assert_eq!(h.max_direct_rows, 4);
}

#[test]
fn each_heap_id_type() {
    let (img, _) = root_direct_heap(17);
    let s = memory_storage(&img);
    let sz = Sizes::DEFAULT;
    let h = FractalHeap::open(&s, 0, sz).unwrap();
    // Managed: offset 40 (2 bytes), length 5 (1 byte).
    assert_eq!(h.get(&s, sz, &[0x00, 40, 0, 5]).unwrap(), b"hello");
    // Tiny, short form: length - 1 in the low nibble.
    assert_eq!(h.get(&s, sz, b"\x24world\0\0").unwrap(), b"world");
    // Huge, stored directly: 17-byte IDs hold address + length.
    let mut id = vec![0x10];
    id.extend_from_slice(&0x300u64.to_le_bytes());
    id.extend_from_slice(&13u64.to_le_bytes());
    assert_eq!(h.get(&s, sz, &id).unwrap(), b"a huge object");
    // Version bits, type 3, out-of-block offsets, overlong tiny.
    assert!(h.get(&s, sz, &[0x40, 40, 0, 5]).is_err());
    assert!(h.get(&s, sz, &[0x30, 40, 0, 5]).is_err());
    assert!(h.get(&s, sz, &[0x00, 250, 0, 20]).is_err());
    assert!(h.get(&s, sz, &[0x00, 0, 1, 5]).is_err());
    assert!(h.get(&s, sz, &[0x00, 4, 0, 5]).is_err()); // inside the block header
    assert!(h.get(&s, sz, b"\x2fab").is_err());
    assert!(h.get(&s, sz, &[]).is_err());
}

/// An object longer than a caller's bound is answered with its length, nothing of it read,
/// for each ID type; one within the bound is read as `get` reads it. A huge object of 1 TiB
/// (its length in the ID) is refused by length alone, though the file is far shorter.
#[test]
fn objects_longer_than_a_bound_are_refused_alone_and_unread() {
    let (img, _) = root_direct_heap(17);
    let s = memory_storage(&img);
    let sz = Sizes::DEFAULT;
    let h = FractalHeap::open(&s, 0, sz).unwrap();
    let huge = |addr: u64, len: u64| {
        let mut id = vec![0x10];
        id.extend_from_slice(&addr.to_le_bytes());
        id.extend_from_slice(&len.to_le_bytes());
        id
    };
    let managed = [0x00, 40, 0, 5];
    assert_eq!(
        h.get_at_most(&s, sz, &managed, 5).unwrap(),
        Ok(b"hello".to_vec())
    );
    assert_eq!(h.get_at_most(&s, sz, &managed, 4).unwrap(), Err(5));
    assert_eq!(h.get_at_most(&s, sz, b"\x24world\0\0", 4).unwrap(), Err(5));
    assert_eq!(
        h.get_at_most(&s, sz, &huge(0x300, 13), 13).unwrap(),
        Ok(b"a huge object".to_vec())
    );
    assert_eq!(
        h.get_at_most(&s, sz, &huge(0x300, 13), 12).unwrap(),
        Err(13)
    );
    assert_eq!(
        h.get_at_most(&s, sz, &huge(0x300, 1 << 40), 1 << 17)
            .unwrap(),
        Err(1 << 40)
    );
    assert!(h.get(&s, sz, &huge(0x300, 1 << 40)).is_err());
    // Corruption is still an error, not a length.
    assert!(h.get_at_most(&s, sz, &[0x00, 250, 0, 20], 100).is_err());
    assert!(h.get_at_most(&s, sz, &[0x00, 40, 0, 250], 4).is_err()); // over max_man
}

#[test]
fn tiny_extended_length() {
    let (img, _) = root_direct_heap(20);
    let s = memory_storage(&img);
    let h = FractalHeap::open(&s, 0, Sizes::DEFAULT).unwrap();
    // 20-byte IDs: 12-bit length - 1 over byte 0's low nibble and byte 1.
    let mut id = vec![0x20, 9];
    id.extend_from_slice(b"0123456789\0\0\0\0\0\0\0\0");
    assert_eq!(h.get(&s, Sizes::DEFAULT, &id).unwrap(), b"0123456789");
}

#[test]
fn direct_block_checksum() {
    let (mut img, _) = root_direct_heap(17);
    img[0x100 + 100] ^= 1;
    let s = memory_storage(&img);
    let h = FractalHeap::open(&s, 0, Sizes::DEFAULT).unwrap();
    assert!(matches!(
        h.get(&s, Sizes::DEFAULT, &[0x00, 40, 0, 5]),
        Err(Error::Checksum { addr: 0x100, .. })
    ));
    let (mut img, _) = root_direct_heap(17);
    img[20] ^= 1;
    let s = memory_storage(&img);
    assert!(matches!(
        FractalHeap::open(&s, 0, Sizes::DEFAULT),
        Err(Error::Checksum { .. })
    ));
}

#[test]
fn nested_indirect_blocks() {
    // Width 2, 64-byte blocks, direct blocks only in rows 0 and 1; row 2 holds indirect
    // blocks of 128 bytes of heap space, each one row of two 64-byte direct blocks.
    let g = Geometry {
        id_len: 7,
        flags: 0,
        max_man: 50,
        width: 2,
        start: 64,
        max_direct: 64,
        bits: 16,
        root: 0x100,
        rows: 3,
    };
    let u = u64::MAX;
    let mut img = header(&g);
    img.resize(0x100, 0);
    img.extend(indirect(0, &[0x400, u, u, u, 0x200, u]));
    img.resize(0x200, 0);
    img.extend(indirect(256, &[u, 0x300]));
    img.resize(0x300, 0);
    img.extend(direct(64, 320, false, &[(20, b"nest")]));
    img.resize(0x400, 0);
    img.extend(direct(64, 0, false, &[(16, b"top")]));
    let s = memory_storage(&img);
    let sz = Sizes::DEFAULT;
    let h = FractalHeap::open(&s, 0, sz).unwrap();
    assert_eq!(h.max_direct_rows, 2);
    assert_eq!(h.get(&s, sz, &[0, 16, 0, 3, 0, 0, 0]).unwrap(), b"top");
    let off = 320u16 + 20;
    let [lo, hi] = off.to_le_bytes();
    assert_eq!(h.get(&s, sz, &[0, lo, hi, 4, 0, 0, 0]).unwrap(), b"nest");
    // Unallocated block, and an offset beyond the root's rows.
    assert!(h.get(&s, sz, &[0, 84, 0, 3, 0, 0, 0]).is_err());
    assert!(h.get(&s, sz, &[0, 0, 2, 3, 0, 0, 0]).is_err());
}

mod real_files {
    use super::*;
    use crate::format::btree_v2::records::{AttributeRecord, LinkNameRecord, LinkOrderRecord};
    use crate::format::btree_v2::{find, for_each_record};
    use std::collections::BTreeSet;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/format/testdata/heaps/");

    struct Fixture {
        storage: Storage,
        heap: FractalHeap,
        trees: Vec<BtreeV2Header>,
        want: BTreeSet<Vec<u8>>,
    }

    /// Open a fixture and find its (single) fractal heap and v2 B-trees by signature.
    fn fixture(name: &str, key: &str, sizes: Sizes) -> Fixture {
        let path = format!("{DIR}{name}");
        let bytes = std::fs::read(&path).unwrap();
        let storage = Storage::open(std::path::Path::new(&path)).unwrap();
        let at = |sig: &[u8]| -> Vec<u64> {
            (0..bytes.len() - 4)
                .filter(|&i| &bytes[i..i + 4] == sig)
                .map(|i| i as u64)
                .collect()
        };
        let heaps = at(b"FRHP");
        assert_eq!(heaps.len(), 1);
        let heap = FractalHeap::open(&storage, heaps[0], sizes).unwrap();
        let trees = at(b"BTHD")
            .into_iter()
            .map(|a| BtreeV2Header::read(&storage, a, sizes).unwrap())
            .collect();
        let exp: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{DIR}expected.json")).unwrap())
                .unwrap();
        let want = exp[name][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().as_bytes().to_vec())
            .collect();
        Fixture {
            storage,
            heap,
            trees,
            want,
        }
    }

    /// The name in a link message (spec "IV.A.2.g"): flags select optional fields and the
    /// width of the name length.
    fn link_name(m: &[u8]) -> Vec<u8> {
        let flags = m[1];
        let mut p = 2 + (flags & 8 != 0) as usize + 8 * (flags & 4 != 0) as usize;
        p += (flags & 16 != 0) as usize;
        let w = 1usize << (flags & 3);
        let n = m[p..p + w]
            .iter()
            .rev()
            .fold(0, |a, &b| a << 8 | b as usize);
        m[p + w..p + w + n].to_vec()
    }

    /// The name in a version-3 attribute message (spec "IV.A.2.m").
    fn attr_name(m: &[u8]) -> Vec<u8> {
        assert_eq!(m[0], 3);
        let n = u16::from_le_bytes([m[2], m[3]]) as usize;
        m[9..9 + n - 1].to_vec()
    }

    fn tree(f: &Fixture, ty: u8) -> &BtreeV2Header {
        f.trees.iter().find(|t| t.record_type == ty).unwrap()
    }

    /// Walk the by-name index: every name h5py lists comes out of the heap with its hash,
    /// and `find` locates each by hash then name.
    fn check_names(f: &Fixture, sz: Sizes) {
        let by_name = tree(f, 5);
        let mut got = BTreeSet::new();
        let mut last = 0;
        for_each_record(&f.storage, by_name, sz, &mut |r| {
            let rec = LinkNameRecord::parse(r)?;
            let name = link_name(&f.heap.get(&f.storage, sz, &rec.heap_id)?);
            assert_eq!(lookup3(&name, 0), rec.hash);
            assert!(rec.hash >= last);
            last = rec.hash;
            got.insert(name);
            Ok(true)
        })
        .unwrap();
        assert_eq!(got, f.want);
        for name in &f.want {
            let hash = lookup3(name, 0);
            let rec = find(&f.storage, by_name, sz, &mut |r| {
                let rec = LinkNameRecord::parse(r)?;
                Ok(hash.cmp(&rec.hash).then_with(|| {
                    let m = f.heap.get(&f.storage, sz, &rec.heap_id).unwrap();
                    name.as_slice().cmp(&link_name(&m))
                }))
            })
            .unwrap()
            .unwrap();
            let m = f.heap.get(
                &f.storage,
                sz,
                &LinkNameRecord::parse(&rec).unwrap().heap_id,
            );
            assert_eq!(&link_name(&m.unwrap()), name);
        }
    }

    #[test]
    fn four_byte_sizes() {
        let sz = Sizes {
            offset: 4,
            length: 4,
        };
        let f = fixture("small_sizes.h5", "links", sz);
        assert_eq!(f.heap.huge_objects, 1);
        check_names(&f, sz);
    }

    #[test]
    fn dense_links_by_name_and_order() {
        let sz = Sizes::DEFAULT;
        let f = fixture("dense_links.h5", "links", sz);
        assert!(f.heap.huge_objects == 2 && f.heap.huge_btree_addr != UNDEFINED_ADDR);
        check_names(&f, sz);
        // Creation order: h5py lists a track_order group in creation order.
        let mut ordered = vec![];
        for_each_record(&f.storage, tree(&f, 6), sz, &mut |r| {
            let rec = LinkOrderRecord::parse(r)?;
            ordered.push(link_name(&f.heap.get(&f.storage, sz, &rec.heap_id)?));
            Ok(true)
        })
        .unwrap();
        assert_eq!(ordered.len(), f.want.len());
        assert!(ordered[0].starts_with(b"link_000_") && ordered[61][0] == b'I');
    }

    #[test]
    fn dense_attributes_with_a_huge_one() {
        let sz = Sizes::DEFAULT;
        let f = fixture("dense_attrs.h5", "attrs", sz);
        for ty in [8, 9] {
            let mut got = BTreeSet::new();
            for_each_record(&f.storage, tree(&f, ty), sz, &mut |r| {
                let rec = AttributeRecord::parse(ty, r)?;
                let m = f.heap.get(&f.storage, sz, &rec.heap_id)?;
                let name = attr_name(&m);
                if name == b"big" {
                    // 6000 bytes of value 7 at the end of the message, through the huge tree.
                    assert!(m.len() > 6000 && m[m.len() - 6000..].iter().all(|&b| b == 7));
                }
                got.insert(name);
                Ok(true)
            })
            .unwrap();
            assert_eq!(got, f.want);
        }
    }

    #[test]
    fn filtered_heap_header_parses_and_refuses_cleanly() {
        let path = format!("{DIR}filtered_heap.h5");
        let bytes = std::fs::read(&path).unwrap();
        let storage = Storage::open(std::path::Path::new(&path)).unwrap();
        let find_sig = |sig: &[u8]| bytes.windows(4).position(|w| w == sig).unwrap() as u64;
        let sz = Sizes::DEFAULT;
        let heap = FractalHeap::open(&storage, find_sig(b"FRHP"), sz).unwrap();
        // Filter pipeline message v2: one filter, deflate (1), one client value, level 6.
        assert_eq!(heap.filter_info, [2, 1, 1, 0, 1, 0, 1, 0, 6, 0, 0, 0]);
        let tree = BtreeV2Header::read(&storage, find_sig(b"BTHD"), sz).unwrap();
        let mut n = 0;
        for_each_record(&storage, &tree, sz, &mut |r| {
            let rec = LinkNameRecord::parse(r)?;
            let e = heap.get(&storage, sz, &rec.heap_id).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
            n += 1;
            Ok(true)
        })
        .unwrap();
        assert_eq!(n, 50);
    }
}
