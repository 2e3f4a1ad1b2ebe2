//! Unit tests of the views on hand-built datatypes and buffers.

use super::byte_order::{served_type, ByteOrderMode, Converter};
use super::{envi, npy, text, tiff, ByteSource};
use crate::format::messages::datatype::{
    ByteOrder, CharSet, CompoundMember, Datatype, StringPad, TypeClass, VarLenKind,
};

use ByteOrder::{Big, Little};

fn int(order: ByteOrder, size: u32, signed: bool) -> Datatype {
    Datatype::test_int(size, signed, order)
}

fn float(order: ByteOrder, size: u32) -> Datatype {
    Datatype::test_float(size, order)
}

fn string(size: u32) -> Datatype {
    Datatype {
        version: 1,
        size,
        class: TypeClass::String {
            pad: StringPad::NullPad,
            charset: CharSet::Ascii,
        },
    }
}

fn compound(size: u32, members: &[(&str, u32, Datatype)]) -> Datatype {
    let members = members
        .iter()
        .map(|(n, o, t)| CompoundMember {
            name: n.to_string(),
            offset: *o,
            dtype: t.clone(),
        })
        .collect();
    Datatype {
        version: 1,
        size,
        class: TypeClass::Compound { members },
    }
}

fn array(dims: &[u32], base: Datatype) -> Datatype {
    Datatype {
        version: 2,
        size: base.size * dims.iter().product::<u32>(),
        class: TypeClass::Array {
            dims: dims.to_vec(),
            base: Box::new(base),
        },
    }
}

fn convert_all(t: &Datatype, mode: ByteOrderMode, data: &[u8]) -> Vec<u8> {
    let c = Converter::new(t, mode).unwrap();
    let mut out = data.to_vec();
    c.apply(0, &mut out);
    out
}

#[test]
fn swaps_big_endian_ints_to_little_and_leaves_little_alone() {
    let t = int(Big, 4, true);
    let data: Vec<u8> = [1i32, -2, 300]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let want: Vec<u8> = [1i32, -2, 300]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(convert_all(&t, ByteOrderMode::Little, &data), want);
    assert!(Converter::new(&t, ByteOrderMode::Big).unwrap().is_noop());
    assert!(Converter::new(&t, ByteOrderMode::AsStored)
        .unwrap()
        .is_noop());
    assert!(Converter::new(&int(Little, 1, false), ByteOrderMode::Big)
        .unwrap()
        .is_noop());
    assert!(Converter::new(&string(7), ByteOrderMode::Big)
        .unwrap()
        .is_noop());
}

#[test]
fn compound_members_each_follow_their_own_order() {
    // {x: <i2 @0, s: |S3 @2, y: >f8 @8}, 16 bytes.
    let t = compound(
        16,
        &[
            ("x", 0, int(Little, 2, true)),
            ("s", 2, string(3)),
            ("y", 8, float(Big, 8)),
        ],
    );
    let mut el = vec![0u8; 16];
    el[0..2].copy_from_slice(&7i16.to_le_bytes());
    el[2..5].copy_from_slice(b"abc");
    el[8..16].copy_from_slice(&1.5f64.to_be_bytes());
    let big = convert_all(&t, ByteOrderMode::Big, &el);
    assert_eq!(&big[0..2], &7i16.to_be_bytes());
    assert_eq!(&big[2..5], b"abc");
    assert_eq!(&big[8..16], &1.5f64.to_be_bytes());
    let little = convert_all(&t, ByteOrderMode::Little, &el);
    assert_eq!(&little[0..2], &7i16.to_le_bytes());
    assert_eq!(&little[8..16], &1.5f64.to_le_bytes());
    let served = served_type(&t, ByteOrderMode::Big);
    assert_eq!(served.numpy_str(), "{x:>i2@0,s:|S3@2,y:>f8@8}");
}

#[test]
fn arrays_and_complex_swap_every_part() {
    let t = array(&[3], int(Big, 2, false));
    let data = [0, 1, 0, 2, 0, 3];
    assert_eq!(
        convert_all(&t, ByteOrderMode::Little, &data),
        [1, 0, 2, 0, 3, 0]
    );
    let c = Datatype {
        version: 5,
        size: 8,
        class: TypeClass::Complex {
            base: Box::new(float(Big, 4)),
        },
    };
    let data: Vec<u8> = [1.0f32, -2.0]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let want: Vec<u8> = [1.0f32, -2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(convert_all(&c, ByteOrderMode::Little, &data), want);
    // An array of compounds expands into one run per member per array element.
    let inner = compound(
        6,
        &[("a", 0, int(Big, 2, true)), ("b", 2, int(Big, 4, true))],
    );
    let t = array(&[2], inner);
    assert_eq!(
        Converter::new(&t, ByteOrderMode::Little)
            .unwrap()
            .runs()
            .len(),
        4
    );
}

#[test]
fn member_past_the_element_is_refused() {
    let t = compound(4, &[("x", 2, int(Big, 4, true))]);
    assert!(Converter::new(&t, ByteOrderMode::Little).is_err());
}

#[test]
fn reads_at_any_offset_equal_slices_of_the_whole_conversion() {
    let t = compound(
        14,
        &[
            ("x", 0, int(Big, 2, true)),
            ("y", 2, float(Big, 8)),
            ("z", 10, int(Little, 4, false)),
        ],
    );
    let data: Vec<u8> = (0..14 * 5).map(|i| (i * 37 % 251) as u8).collect();
    let whole = convert_all(&t, ByteOrderMode::Little, &data);
    let conv = Converter::new(&t, ByteOrderMode::Little).unwrap();
    for off in 0..data.len() as u64 + 2 {
        for len in [0usize, 1, 3, 7, 14, 30, 100] {
            let mut buf = vec![0u8; len];
            let n = conv.read_at(&data, off, &mut buf).unwrap();
            let lo = (off as usize).min(whole.len());
            let hi = (lo + len).min(whole.len());
            assert_eq!(&buf[..n], &whole[lo..hi], "offset {off} len {len}");
        }
    }
}

fn header_text(h: &[u8]) -> &str {
    let skip = if h[6] == 1 { 10 } else { 12 };
    std::str::from_utf8(&h[skip..]).unwrap()
}

#[test]
fn npy_header_for_numbers_is_numpys() {
    let h = npy::header(&float(Little, 4), &[3, 4]).unwrap();
    assert_eq!(h.len() % 64, 0);
    assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
    assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
    let text = header_text(&h);
    assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"));
    assert!(text.ends_with(" \n"));
    let scalar = npy::header(&int(Big, 2, true), &[]).unwrap();
    assert!(
        header_text(&scalar).contains("'descr': '>i2'")
            && header_text(&scalar).contains("'shape': ()")
    );
    let one = npy::header(&int(Big, 1, false), &[5]).unwrap();
    assert!(header_text(&one).contains("'descr': '|u1', 'fortran_order': False, 'shape': (5,)"));
}

#[test]
fn npy_descr_of_compounds_arrays_and_strings() {
    let packed = compound(
        12,
        &[
            ("a", 0, int(Little, 4, true)),
            ("b", 4, array(&[2], float(Big, 4))),
        ],
    );
    assert_eq!(
        npy::descr(&packed).unwrap().0,
        "[('a', '<i4'), ('b', '>f4', (2,)), ]"
    );
    let padded = compound(
        16,
        &[("x", 0, int(Little, 2, true)), ("y", 8, float(Big, 8))],
    );
    assert_eq!(
        npy::descr(&padded).unwrap().0,
        "[('x', '<i2'), ('', '|V6'), ('y', '>f8'), ]"
    );
    let cplx = compound(
        16,
        &[("r", 0, float(Little, 8)), ("i", 8, float(Little, 8))],
    );
    assert_eq!(npy::descr(&cplx).unwrap().0, "'<c16'");
    let arr = array(&[3, 4], float(Little, 4));
    assert_eq!(npy::descr(&arr).unwrap(), ("'<f4'".to_string(), vec![3, 4]));
    assert!(header_text(&npy::header(&arr, &[2]).unwrap()).contains("'shape': (2, 3, 4)"));
    assert_eq!(npy::descr(&string(10)).unwrap().0, "'|S10'");
    let quote = compound(2, &[("it's\n", 0, int(Little, 2, true))]);
    assert_eq!(npy::descr(&quote).unwrap().0, "[('it\\'s\\n', '<i2'), ]");
}

#[test]
fn npy_uses_version_3_for_non_ascii_names_and_refuses_vlen() {
    let t = compound(4, &[("température", 0, float(Little, 4))]);
    let h = npy::header(&t, &[1]).unwrap();
    assert_eq!(&h[6..8], &[3, 0]);
    assert_eq!(
        u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize,
        h.len() - 12
    );
    assert_eq!(h.len() % 64, 0);
    assert!(header_text(&h).contains("température"));
    let vlen = Datatype {
        version: 1,
        size: 16,
        class: TypeClass::VarLen {
            kind: VarLenKind::String {
                pad: StringPad::NullTerminate,
                charset: CharSet::Utf8,
            },
            base: Box::new(int(Little, 1, false)),
        },
    };
    assert!(npy::header(&vlen, &[2]).is_err());
    // bfloat16: a 2-byte float that is not IEEE half.
    let mut bf = float(Little, 2);
    if let TypeClass::FloatingPoint {
        exponent_size,
        mantissa_size,
        ..
    } = &mut bf.class
    {
        *exponent_size = 8;
        *mantissa_size = 7;
    }
    assert!(npy::descr(&bf).is_err());
}

#[test]
fn partial_precision_integers_are_refused_where_they_would_misread() {
    let mut shifted = int(Little, 4, true);
    let mut short_unsigned = int(Little, 2, false);
    if let TypeClass::FixedPoint {
        bit_offset,
        precision,
        ..
    } = &mut shifted.class
    {
        (*bit_offset, *precision) = (4, 20);
    }
    if let TypeClass::FixedPoint { precision, .. } = &mut short_unsigned.class {
        *precision = 12;
    }
    assert!(npy::descr(&shifted).is_err() && envi::data_type(&shifted).is_err());
    assert_eq!(npy::descr(&short_unsigned).unwrap().0, "'<u2'");
    assert_eq!(envi::data_type(&short_unsigned).unwrap().0, 12);
}

#[test]
fn envi_codes_mapping_and_refusals() {
    assert_eq!(envi::data_type(&int(Little, 1, false)).unwrap().0, 1);
    assert_eq!(envi::data_type(&int(Big, 2, true)).unwrap(), (2, Big));
    assert_eq!(envi::data_type(&int(Little, 8, false)).unwrap().0, 15);
    assert_eq!(envi::data_type(&float(Little, 8)).unwrap().0, 5);
    let cplx = compound(8, &[("r", 0, float(Big, 4)), ("i", 4, float(Big, 4))]);
    assert_eq!(envi::data_type(&cplx).unwrap(), (6, Big));
    assert!(envi::data_type(&int(Little, 1, true))
        .unwrap_err()
        .to_string()
        .contains("signed 8-bit"));
    assert!(envi::data_type(&float(Little, 2)).is_err());
    assert_eq!(envi::extents(&[7]).unwrap(), (7, 1, 1));
    assert_eq!(envi::extents(&[2, 3]).unwrap(), (3, 2, 1));
    assert_eq!(envi::extents(&[4, 2, 3]).unwrap(), (3, 2, 4));
    assert!(envi::extents(&[]).is_err() && envi::extents(&[1, 1, 1, 1]).is_err());
    assert!(envi::extents(&[0, 3]).is_err());
    let h = envi::header(&int(Big, 4, true), &[4, 2, 3]).unwrap();
    assert!(h.starts_with("ENVI\n"));
    for line in [
        "samples = 3",
        "lines = 2",
        "bands = 4",
        "data type = 3",
        "byte order = 1",
        "interleave = bsq",
    ] {
        assert!(h.contains(line), "{line} in {h}");
    }
}

#[test]
fn text_escapes_keep_one_line_per_element() {
    let mut out = Vec::new();
    text::escape("a\\b\nc\rdé", &mut out);
    assert_eq!(out, "a\\\\b\\nc\\rdé".as_bytes());
}

#[test]
fn vec_source_reads_short_at_the_end() {
    let v = vec![1u8, 2, 3];
    let mut buf = [0u8; 5];
    assert_eq!(v.read_at(1, &mut buf).unwrap(), 2);
    assert_eq!(&buf[..2], &[2, 3]);
    assert_eq!(v.read_at(9, &mut buf).unwrap(), 0);
}

/// One IFD of a TIFF as a test reader sees it: tag -> (type, count, value), and the offset
/// of the next IFD.
#[derive(Debug)]
struct Ifd {
    entries: std::collections::BTreeMap<u16, (u16, u64, u64)>,
    next: u64,
}

/// A tiny TIFF reader: (big-endian, BigTIFF, every IFD) of `bytes` (the header region, or
/// more), following the chain of IFDs from the header.
fn parse_tiff(bytes: &[u8]) -> (bool, bool, Vec<Ifd>) {
    let big = match &bytes[..2] {
        b"II" => false,
        b"MM" => true,
        other => panic!("byte order mark {other:?}"),
    };
    let num = |at: usize, n: usize| -> u64 {
        let b = &bytes[at..at + n];
        let mut v = 0u64;
        for i in 0..n {
            let byte = if big { b[i] } else { b[n - 1 - i] };
            v = (v << 8) | u64::from(byte);
        }
        v
    };
    let bigtiff = match num(2, 2) {
        42 => false,
        43 => {
            assert_eq!((num(4, 2), num(6, 2)), (8, 0), "BigTIFF offset size");
            true
        }
        v => panic!("magic {v}"),
    };
    let (mut at, count_len, entry_len, off_len) = if bigtiff {
        (num(8, 8), 8, 20, 8)
    } else {
        (num(4, 4), 2, 12, 4)
    };
    let mut ifds = Vec::new();
    while at != 0 {
        let a = at as usize;
        assert_eq!(a % 2, 0, "IFD at a word boundary");
        let n = num(a, count_len) as usize;
        let mut entries = std::collections::BTreeMap::new();
        let mut last = 0;
        for i in 0..n {
            let e = a + count_len + i * entry_len;
            let (tag, kind) = (num(e, 2) as u16, num(e + 2, 2) as u16);
            assert!(tag > last, "tags ascending");
            last = tag;
            let count = num(e + 4, off_len);
            let width = match kind {
                3 => 2,
                4 => 4,
                16 => 8,
                k => panic!("type {k}"),
            };
            assert_eq!(count, 1);
            assert!(width <= off_len, "value inline");
            let v = num(e + 4 + off_len, width);
            // The rest of the value field is zero (left-justified value).
            let rest = e + 4 + off_len + width;
            assert!(bytes[rest..e + 4 + 2 * off_len].iter().all(|&b| b == 0));
            entries.insert(tag, (kind, count, v));
        }
        let next = num(a + count_len + n * entry_len, off_len);
        ifds.push(Ifd { entries, next });
        at = next;
    }
    (big, bigtiff, ifds)
}

fn tag(ifd: &Ifd, t: u16) -> u64 {
    ifd.entries[&t].2
}

fn bool_enum() -> Datatype {
    Datatype {
        version: 1,
        size: 1,
        class: TypeClass::Enum {
            base: Box::new(int(Little, 1, true)),
            members: vec![("FALSE".into(), vec![0]), ("TRUE".into(), vec![1])],
        },
    }
}

#[test]
fn tiff_type_table() {
    use tiff::SampleFormat::{Float, Signed, Unsigned};
    for size in [1u32, 2, 4, 8] {
        for order in [Little, Big] {
            let be = order == Big && size > 1;
            let bits = (size * 8) as u16;
            assert_eq!(
                tiff::sample_type(&int(order, size, false)).unwrap(),
                (Unsigned, bits, be)
            );
            assert_eq!(
                tiff::sample_type(&int(order, size, true)).unwrap(),
                (Signed, bits, be)
            );
        }
    }
    for size in [2u32, 4, 8] {
        let bits = (size * 8) as u16;
        assert_eq!(
            tiff::sample_type(&float(Little, size)).unwrap(),
            (Float, bits, false)
        );
        assert_eq!(
            tiff::sample_type(&float(Big, size)).unwrap(),
            (Float, bits, true)
        );
    }
    // Enums are their base integer (as in the npy view); h5py's booleans are not integers.
    let colour = Datatype {
        version: 1,
        size: 2,
        class: TypeClass::Enum {
            base: Box::new(int(Big, 2, false)),
            members: vec![("RED".into(), vec![0, 0]), ("GREEN".into(), vec![0, 1])],
        },
    };
    assert_eq!(tiff::sample_type(&colour).unwrap(), (Unsigned, 16, true));
    assert_eq!(npy::descr(&colour).unwrap().0, "'>u2'");
    assert!(tiff::sample_type(&bool_enum()).is_err());
    let cplx = compound(8, &[("r", 0, float(Little, 4)), ("i", 4, float(Little, 4))]);
    let mut bf16 = float(Little, 2);
    if let TypeClass::FloatingPoint {
        exponent_size,
        mantissa_size,
        ..
    } = &mut bf16.class
    {
        (*exponent_size, *mantissa_size) = (8, 7);
    }
    let mut shifted = int(Little, 4, true);
    if let TypeClass::FixedPoint {
        bit_offset,
        precision,
        ..
    } = &mut shifted.class
    {
        (*bit_offset, *precision) = (4, 20);
    }
    let mut vax = float(Little, 4);
    if let TypeClass::FloatingPoint { order, .. } = &mut vax.class {
        *order = ByteOrder::Vax;
    }
    let complex = Datatype {
        version: 5,
        size: 8,
        class: TypeClass::Complex {
            base: Box::new(float(Little, 4)),
        },
    };
    for (what, t) in [
        ("h5py complex", cplx),
        ("complex", complex),
        ("string", string(4)),
        ("array", array(&[3], int(Little, 2, false))),
        ("bfloat16", bf16),
        ("shifted int", shifted),
        ("3-byte int", int(Little, 3, false)),
        ("vax", vax),
    ] {
        assert!(tiff::sample_type(&t).is_err(), "{what}");
        assert!(
            tiff::Layout::new(&t, &[2, 2], tiff::CLASSIC_MAX).is_err(),
            "{what}"
        );
    }
    // Shapes: 2-D and 3-D with every extent >= 1 only.
    let t = int(Little, 2, false);
    for bad in [
        &[][..],
        &[5],
        &[2, 2, 2, 2],
        &[0, 2],
        &[3, 0],
        &[0, 2, 2],
        &[2, 2, 0],
    ] {
        assert!(
            tiff::Layout::new(&t, bad, tiff::CLASSIC_MAX).is_err(),
            "{bad:?}"
        );
    }
    assert!(tiff::Layout::new(&t, &[1, 1 << 32], u64::MAX).is_err());
    assert!(tiff::Layout::new(&t, &[1, 1], u64::MAX).is_ok());
}

#[test]
fn tiff_header_parses_back_little_endian_2d() {
    let l = tiff::Layout::new(&float(Little, 4), &[3, 4], tiff::CLASSIC_MAX).unwrap();
    assert!(!l.is_bigtiff() && !l.is_big_endian());
    assert_eq!((l.pages(), l.page_bytes(), l.header_len()), (1, 48, 4096));
    assert_eq!(l.len(), 4096 + 48);
    let h = l.header();
    assert_eq!(h.len(), 4096);
    assert_eq!(&h[..8], &[b'I', b'I', 42, 0, 8, 0, 0, 0]);
    let (big, bigtiff, ifds) = parse_tiff(&h);
    assert!(!big && !bigtiff);
    assert_eq!(ifds.len(), 1);
    let ifd = &ifds[0];
    let want = [
        (256, 4, 4),    // ImageWidth LONG
        (257, 4, 3),    // ImageLength LONG
        (258, 3, 32),   // BitsPerSample SHORT
        (259, 3, 1),    // Compression: none
        (262, 3, 1),    // Photometric: BlackIsZero
        (273, 4, 4096), // StripOffsets LONG
        (277, 3, 1),    // SamplesPerPixel
        (278, 4, 3),    // RowsPerStrip
        (279, 4, 48),   // StripByteCounts
        (284, 3, 1),    // PlanarConfiguration: contiguous
        (339, 3, 3),    // SampleFormat: IEEE float
    ];
    assert_eq!(ifd.entries.len(), want.len());
    for (t, kind, v) in want {
        assert_eq!(ifd.entries[&t], (kind, 1, v), "tag {t}");
    }
    assert_eq!(ifd.next, 0);
    // The padding after the IFD is zeros.
    assert!(h[8 + 138..].iter().all(|&b| b == 0));
}

#[test]
fn tiff_big_endian_stack_is_mm_with_one_ifd_per_page() {
    let l = tiff::Layout::new(&int(Big, 2, true), &[5, 2, 3], tiff::CLASSIC_MAX).unwrap();
    assert!(l.is_big_endian() && !l.is_bigtiff());
    let h = l.header();
    assert_eq!(&h[..8], &[b'M', b'M', 0, 42, 0, 0, 0, 8]);
    let (big, bigtiff, ifds) = parse_tiff(&h);
    assert!(big && !bigtiff);
    assert_eq!(ifds.len(), 5);
    for (k, ifd) in ifds.iter().enumerate() {
        let k = k as u64;
        assert_eq!((tag(ifd, 256), tag(ifd, 257)), (3, 2));
        assert_eq!((tag(ifd, 258), tag(ifd, 339)), (16, 2));
        assert_eq!(tag(ifd, 273), l.page_offset(k));
        assert_eq!(tag(ifd, 273), 4096 + 12 * k);
        assert_eq!(tag(ifd, 279), 12);
        let next = if k < 4 { l.ifd_offset(k + 1) } else { 0 };
        assert_eq!(ifd.next, next);
        assert_eq!(l.ifd_offset(k), 8 + 138 * k);
    }
    // One-byte samples: II whatever the stored order.
    let u8l = tiff::Layout::new(&int(Big, 1, false), &[2, 2], tiff::CLASSIC_MAX).unwrap();
    assert!(!u8l.is_big_endian());
    assert_eq!(&u8l.header()[..4], b"II*\0");
}

#[test]
fn tiff_bigtiff_form_when_forced_or_past_4_gib() {
    // Forced (the test hook's threshold of 0): BigTIFF header, LONG8 strips.
    for order in [Little, Big] {
        let l = tiff::Layout::new(&float(order, 8), &[3, 2, 5], 0).unwrap();
        assert!(l.is_bigtiff());
        let h = l.header();
        let head: [u8; 8] = if order == Big {
            [b'M', b'M', 0, 43, 0, 8, 0, 0]
        } else {
            [b'I', b'I', 43, 0, 8, 0, 0, 0]
        };
        assert_eq!(&h[..8], &head);
        let (big, bigtiff, ifds) = parse_tiff(&h);
        assert!(bigtiff && big == (order == Big));
        assert_eq!(ifds.len(), 3);
        for (k, ifd) in ifds.iter().enumerate() {
            assert_eq!(ifd.entries[&273], (16, 1, l.page_offset(k as u64)));
            assert_eq!(ifd.entries[&279], (16, 1, 80));
            assert_eq!(ifd.entries[&256], (4, 1, 5));
            assert_eq!(l.ifd_offset(k as u64), 16 + 236 * k as u64);
        }
        assert_eq!(l.header_len(), 4096);
    }
    // The real threshold: a classic file of exactly 4 GiB - 1 bytes stays classic, one byte
    // more is BigTIFF.
    let u8t = int(Little, 1, false);
    let cols = tiff::CLASSIC_MAX - 4096;
    let at = tiff::Layout::new(&u8t, &[1, cols], tiff::CLASSIC_MAX).unwrap();
    assert!(!at.is_bigtiff());
    assert_eq!(at.len(), u32::MAX as u64);
    let past = tiff::Layout::new(&u8t, &[1, cols + 1], tiff::CLASSIC_MAX).unwrap();
    assert!(past.is_bigtiff());
    assert_eq!(past.len(), u32::MAX as u64 + 1);
    let (_, _, ifds) = parse_tiff(&past.header());
    assert_eq!(tag(&ifds[0], 279), cols + 1);
    // A threshold above the classic limit is ignored.
    assert!(tiff::Layout::new(&u8t, &[1, cols + 1], u64::MAX)
        .unwrap()
        .is_bigtiff());
    // Many small pages past 4 GiB in total: BigTIFF, the last strip beyond 2^32.
    let stack = tiff::Layout::new(&int(Little, 2, false), &[70_000, 256, 128], u64::MAX).unwrap();
    assert!(stack.is_bigtiff());
    assert!(stack.page_offset(69_999) > 1 << 32);
}

#[test]
fn tiff_header_range_reads_equal_the_whole_header() {
    for (t, shape, above) in [
        (
            int(Little, 2, false),
            vec![1000u64, 7, 9],
            tiff::CLASSIC_MAX,
        ),
        (float(Big, 4), vec![1000, 3, 5], tiff::CLASSIC_MAX),
        (float(Big, 2), vec![777, 3, 5], 0),
        (int(Little, 8, true), vec![4, 4], 0),
    ] {
        let l = tiff::Layout::new(&t, &shape, above).unwrap();
        let whole = l.header();
        assert_eq!(whole.len() as u64, l.header_len());
        assert_eq!(parse_tiff(&whole).2.len() as u64, l.pages());
        let n = whole.len() as u64;
        let mut offsets: Vec<u64> = vec![0, 1, 7, 8, 9, 15, 16, 17, n - 1, n, n + 5];
        for k in [0u64, 1, 2, l.pages() / 2, l.pages() - 1] {
            let at = l.ifd_offset(k);
            offsets.extend([at.saturating_sub(1), at, at + 1, at + 100]);
        }
        let mut rng = 0x1234_5678u64;
        for _ in 0..200 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            offsets.push((rng >> 33) % (n + 10));
        }
        for off in offsets {
            for len in [
                0usize, 1, 2, 3, 13, 137, 138, 139, 236, 237, 1000, 5000, 400_000,
            ] {
                let mut buf = vec![0xAAu8; len];
                let got = l.read_header(off, &mut buf);
                let lo = off.min(n) as usize;
                let hi = (off as usize + len).min(n as usize).max(lo);
                assert_eq!(got, hi - lo, "off {off} len {len}");
                assert!(buf[..got] == whole[lo..hi], "off {off} len {len}");
            }
        }
    }
}

#[test]
fn tiff_million_page_header_is_generated_not_stored() {
    let l = tiff::Layout::new(&int(Little, 1, false), &[1_000_000, 64, 64], u64::MAX).unwrap();
    assert!(!l.is_bigtiff()); // 138 MB of IFDs + 4 GB of data: below 4 GiB - 1 in total.
    assert_eq!(
        l.header_len(),
        (8 + 138 * 1_000_000u64).next_multiple_of(4096)
    );
    // The layout is a few numbers, whatever the page count.
    assert!(std::mem::size_of_val(&l) <= 64);
    for k in [0u64, 1, 499_999, 999_998, 999_999] {
        let at = l.ifd_offset(k);
        // IFD k alone, read through a range read; a fake header in front so it parses.
        let mut ifd = vec![0u8; 138];
        assert_eq!(l.read_header(at, &mut ifd), 138);
        let mut fake = vec![b'I', b'I', 42, 0, 8, 0, 0, 0];
        fake.extend_from_slice(&ifd);
        // Cut the chain after this IFD for the parser.
        let end = fake.len();
        fake[end - 4..].fill(0);
        let (_, _, ifds) = parse_tiff(&fake);
        assert_eq!(tag(&ifds[0], 273), l.page_offset(k));
        assert_eq!(tag(&ifds[0], 279), 4096);
        let next = u32::from_le_bytes(ifd[134..138].try_into().unwrap()) as u64;
        let want = if k == 999_999 { 0 } else { l.ifd_offset(k + 1) };
        assert_eq!(next, want);
    }
    let big = tiff::Layout::new(&int(Big, 2, false), &[1_000_000, 64, 64], u64::MAX).unwrap();
    assert!(big.is_bigtiff()); // 8 GB of data.
    assert_eq!(big.page_offset(999_999), big.header_len() + 999_999 * 8192);
}
