//! Unit tests of the views on hand-built datatypes and buffers.

use super::byte_order::{served_type, ByteOrderMode, Converter};
use super::{envi, npy, text, ByteSource};
use crate::format::messages::datatype::{
    ByteOrder, CharSet, CompoundMember, Datatype, StringPad, TypeClass, VarLenKind,
};

use ByteOrder::{Big, Little};

fn int(order: ByteOrder, size: u32, signed: bool) -> Datatype {
    Datatype {
        version: 1,
        size,
        class: TypeClass::FixedPoint {
            order,
            signed,
            bit_offset: 0,
            precision: (size * 8) as u16,
        },
    }
}

fn float(order: ByteOrder, size: u32) -> Datatype {
    let (e, m) = match size {
        2 => (5, 10),
        4 => (8, 23),
        _ => (11, 52),
    };
    Datatype {
        version: 1,
        size,
        class: TypeClass::FloatingPoint {
            order,
            sign_location: (size * 8 - 1) as u8,
            bit_offset: 0,
            precision: (size * 8) as u16,
            exponent_location: m,
            exponent_size: e,
            mantissa_location: 0,
            mantissa_size: m,
            exponent_bias: (1 << (e - 1)) - 1,
        },
    }
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
