//! Datatype decoder tests: hand-built messages for each class and version, and message bodies
//! cut from files written by h5py 3.16 / HDF5 2.0 (`libver='earliest'` and `'latest'`), whose
//! expected strings are what the fixture manifest's canonicaliser printed for them.

use super::*;
use crate::error::Error;
use crate::format::limits::MAX_TYPE_DEPTH;

use crate::io::testutil::hex;

fn parse(b: &[u8]) -> Result<Datatype> {
    Datatype::parse(b, 0x100, Sizes::DEFAULT)
}

/// The 8-byte header of a datatype message.
fn hdr(version: u8, class: u8, bits: u32, size: u32) -> Vec<u8> {
    let mut v = vec![version << 4 | class];
    v.extend_from_slice(&bits.to_le_bytes()[..3]);
    v.extend_from_slice(&size.to_le_bytes());
    v
}

/// A fixed-point type of `size` bytes.
fn int(version: u8, size: u32, signed: bool, big: bool) -> Vec<u8> {
    let bits = (signed as u32) << 3 | big as u32;
    let mut v = hdr(version, 0, bits, size);
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&(size as u16 * 8).to_le_bytes());
    v
}

/// IEEE double, little-endian.
fn f64le(version: u8) -> Vec<u8> {
    let mut v = hdr(version, 1, 0x20 | 63 << 8, 8);
    v.extend_from_slice(&[0, 0, 64, 0, 52, 11, 0, 52]);
    v.extend_from_slice(&1023u32.to_le_bytes());
    v
}

#[test]
fn real_types_earliest() {
    // (message body, canonical string from h5py's dtype), libver='earliest'.
    let cases = [
        ("10080000010000000000080000000000", "|i1"),
        ("10010000080000000000400000000000", ">u8"),
        ("11200f0002000000000010000a05000a0f00000000000000", "<f2"),
        ("11213f000800000000004000340b0034ff03000000000000", ">f8"),
        ("130100000a000000", "|S10"),
        ("1500000008000000", "|V8"),
        ("1700000008000000", "ref(object)"),
        ("170100000c000000", "ref(region)"),
        ("14010000020000000000100000000000", ">u2"),
        (
            "190101001000000010000000010000000000080000000000",
            "vlen-str",
        ),
        (
            "190000001000000010080000040000000000200000000000",
            "vlen(<i4)",
        ),
        (
            "180200000100000010080000010000000000080046414c5345000000545255450000000000010000",
            "enum(|i1)",
        ),
        (
            "2a00000030000000020000000300000004000000000000000100000011201f00040000000000\
             2000170800177f000000",
            "array(3x4,<f4)",
        ),
        (
            "260400001d000000610000000000000000000000100800000200000000001000620000000000\
             000002000000260200000700000078000000000000000000000011211f0004000000000020001708\
             00177f0000007900000000000000040000001301000003000000630000000000000009000000\
             2a0000000400000001000000020000000000000010000000020000000000100064000000000000\
             000d000000190101001000000010000000010000000000080000000000",
            "{a:<i2@0,b:{x:>f4@0,y:|S3@4}@2,c:array(2,<u2)@9,d:vlen-str@13}",
        ),
    ];
    for (h, want) in cases {
        let t = parse(&hex(h)).unwrap_or_else(|e| panic!("{want}: {e}"));
        assert_eq!(t.numpy_str(), want);
    }
}

#[test]
fn real_types_latest() {
    let cases = [
        ("100900000200000000001000", ">i2"),
        ("11211f000400000000002000170800177f000000", ">f4"),
        (
            "5803000002000000100900000200000000001000424c554500475245454e0052454400002a00010000",
            "enum(>i2)",
        ),
        (
            "5602000034010000706164000000150000002c01000076002c01100800000800000000004000",
            "{pad:|V300@0,v:<i8@300}",
        ),
        (
            "5b0100001000000011203f000800000000004000340b0034ff030000",
            "<c16",
        ),
        (
            "5b0100000800000011211f000400000000002000170800177f000000",
            ">c8",
        ),
        (
            "560400001d000000610000100800000200000000001000620002560200000700000078000011\
             211f000400000000002000170800177f00000079000413010000030000006300095a000000040000\
             00010200000010000000020000000000100064000d190101001000000010000000010000000000\
             0800",
            "{a:<i2@0,b:{x:>f4@0,y:|S3@4}@2,c:array(2,<u2)@9,d:vlen-str@13}",
        ),
        // numpy complex64 as h5py writes it: a compound of r and i, which h5py reads back as
        // complex (the fixture manifest says `<c8`).
        (
            "560200000800000072000011201f000400000000002000170800177f00000069000411201f00\
             0400000000002000170800177f000000",
            "<c8",
        ),
    ];
    for (h, want) in cases {
        let t = parse(&hex(h)).unwrap_or_else(|e| panic!("{want}: {e}"));
        assert_eq!(t.numpy_str(), want);
    }
}

#[test]
fn real_types_low_level() {
    // Written through the C API (ctypes / h5py low level), both libvers.
    let cases = [
        // H5T_STD_REF (HDF5 1.12+): class version 4, type 2 (object), encoding version 1.
        ("4712000012000000", "ref(object)"),
        // H5T_UNIX_D32LE: time class.
        ("12000000040000002000", "time(<i4)"),
        // H5T_VAX_F64: floating point with bits 0 and 6 set (datatype version 3).
        ("31613f000800000000004000340b003401040000", "<f8"),
        // 80-bit long double in 16 bytes.
        ("11004f001000000000005000400f0040ff3f0000", "<f16"),
        // Space-padded UTF-8 fixed string; opaque with a tag.
        ("1312000006000000", "|S6"),
        ("15080000050000006d79207461670000", "|V5"),
        // Enum of >u2 with v1 names padded to 8 (one name 9 bytes long).
        (
            "18020000020000001001000002000000000010004100000000000000424242424242424242000000\
             000000000000012c",
            "enum(>u2)",
        ),
        // Array of array (v5) and vlen of compound (v5).
        (
            "5a0000001800000001020000005a0000000c000000010300000011201f000400000000002000170800\
             177f000000",
            "array(2,array(3,<f4))",
        ),
        (
            "5900000010000000560200000a00000061000010080000020000000000100062000211213f00080000\
             0000004000340b0034ff030000",
            "vlen({a:<i2@0,b:>f8@2})",
        ),
    ];
    for (h, want) in cases {
        let t = parse(&hex(h)).unwrap_or_else(|e| panic!("{want}: {e}"));
        assert_eq!(t.numpy_str(), want);
    }
    let t = parse(&hex("31613f000800000000004000340b003401040000")).unwrap();
    assert_eq!(t.byte_order(), Some(ByteOrder::Vax));
    let t = parse(&hex("15080000050000006d79207461670000")).unwrap();
    assert_eq!(
        t.class,
        TypeClass::Opaque {
            tag: "my tag".into()
        }
    );
}

#[test]
fn nested_compound_details() {
    let t = parse(&hex(
        "560400001d000000610000100800000200000000001000620002560200000700000078000011\
         211f000400000000002000170800177f00000079000413010000030000006300095a000000040000\
         00010200000010000000020000000000100064000d190101001000000010000000010000000000\
         0800",
    ))
    .unwrap();
    assert_eq!(t.version, 5);
    assert_eq!(t.size, 29);
    assert!(!t.is_fixed_size());
    let TypeClass::Compound { members } = &t.class else {
        panic!("not a compound")
    };
    assert_eq!(members[1].name, "b");
    assert_eq!(members[1].dtype.byte_order(), None); // big-endian float + string
    let TypeClass::Compound { members: inner } = &members[1].dtype.class else {
        panic!("member b is not a compound")
    };
    assert_eq!(inner[0].dtype.byte_order(), Some(ByteOrder::Big));
    assert_eq!(members[2].dtype.byte_order(), Some(ByteOrder::Little));
    let TypeClass::VarLen { kind, base } = &members[3].dtype.class else {
        panic!("member d is not vlen")
    };
    assert_eq!(
        *kind,
        VarLenKind::String {
            pad: StringPad::NullTerminate,
            charset: CharSet::Utf8
        }
    );
    assert_eq!(base.size, 1);
}

#[test]
fn float_properties() {
    let t = parse(&hex("11213f000800000000004000340b0034ff030000")).unwrap();
    assert_eq!(
        t.class,
        TypeClass::FloatingPoint {
            order: ByteOrder::Big,
            sign_location: 63,
            bit_offset: 0,
            precision: 64,
            exponent_location: 52,
            exponent_size: 11,
            mantissa_location: 0,
            mantissa_size: 52,
            exponent_bias: 1023,
        }
    );
    // VAX order: bits 0 and 6 both set (version 3).
    let mut vax = hdr(3, 1, 0x41 | 0x20 | 31 << 8, 4);
    vax.extend_from_slice(&[0, 0, 32, 0, 23, 8, 0, 23, 129, 0, 0, 0]);
    let t = parse(&vax).unwrap();
    assert_eq!(t.byte_order(), Some(ByteOrder::Vax));
    assert_eq!(t.numpy_str(), "<f4");
    // Bit 6 without bit 0 is reserved.
    let mut bad = hdr(3, 1, 0x40, 4);
    bad.extend_from_slice(&[0; 12]);
    assert!(matches!(parse(&bad), Err(Error::Corrupt { .. })));
    // A 16-bit layout that is not IEEE half (bfloat16) is reported, not refused.
    let mut bf16 = hdr(1, 1, 0x20 | 15 << 8, 2);
    bf16.extend_from_slice(&[0, 0, 16, 0, 7, 8, 0, 7, 127, 0, 0, 0]);
    let t = parse(&bf16).unwrap();
    assert!(matches!(
        t.class,
        TypeClass::FloatingPoint {
            exponent_size: 8,
            mantissa_size: 7,
            ..
        }
    ));
    assert_eq!(t.numpy_str(), "<f2");
}

#[test]
fn atomic_odds_and_ends() {
    let mut time = hdr(1, 2, 1, 8);
    time.extend_from_slice(&64u16.to_le_bytes());
    let t = parse(&time).unwrap();
    assert_eq!(
        t.class,
        TypeClass::Time {
            order: ByteOrder::Big,
            precision: 64
        }
    );
    assert_eq!(t.numpy_str(), "time(>i8)");

    let t = parse(&hdr(1, 3, 2 | 1 << 4, 7)).unwrap();
    assert_eq!(
        t.class,
        TypeClass::String {
            pad: StringPad::SpacePad,
            charset: CharSet::Utf8
        }
    );
    assert_eq!(t.numpy_str(), "|S7");
    assert!(matches!(
        parse(&hdr(1, 3, 3, 7)),
        Err(Error::Corrupt { .. })
    ));

    let mut opaque = hdr(1, 5, 8, 4);
    opaque.extend_from_slice(b"tag\0\0\0\0\0");
    let t = parse(&opaque).unwrap();
    assert_eq!(t.class, TypeClass::Opaque { tag: "tag".into() });
    assert_eq!(t.numpy_str(), "|V4");

    let t = parse(&int(1, 4, true, true)).unwrap();
    assert_eq!(t.numpy_str(), ">i4");
    assert_eq!(t.element_size(), 4);
    assert!(t.is_fixed_size());
    assert_eq!(parse(&int(1, 1, false, true)).unwrap().numpy_str(), "|u1");
}

#[test]
fn references_v1_and_v4() {
    let t = parse(&hdr(4, 7, 2 | 1 << 4, 18)).unwrap();
    assert_eq!(
        t.class,
        TypeClass::Reference {
            kind: ReferenceKind::V4 { ref_type: 2 }
        }
    );
    assert_eq!(t.numpy_str(), "ref(object)");
    assert_eq!(
        parse(&hdr(4, 7, 3 | 1 << 4, 18)).unwrap().numpy_str(),
        "ref(region)"
    );
    assert_eq!(parse(&hdr(1, 7, 1, 12)).unwrap().numpy_str(), "ref(region)");
    assert!(parse(&hdr(4, 7, 7, 18)).is_err());
}

#[test]
fn compound_v3_offset_widths() {
    // Offsets take 1 byte below 256, 2 bytes up to 65535, 3 bytes beyond (bytes needed for size).
    for (size, width) in [
        (255u32, 1usize),
        (256, 2),
        (65535, 2),
        (65536, 3),
        (1 << 24, 4),
    ] {
        let mut v = hdr(3, 6, 2, size);
        v.extend_from_slice(b"a\0");
        v.extend_from_slice(&0u32.to_le_bytes()[..width]);
        v.extend(int(3, 2, false, false));
        v.extend_from_slice(b"b\0");
        v.extend_from_slice(&(size - 4).to_le_bytes()[..width]);
        v.extend(int(3, 4, true, true));
        let t = parse(&v).unwrap();
        assert_eq!(
            t.numpy_str(),
            format!("{{a:<u2@0,b:>i4@{}}}", size - 4),
            "size {size}"
        );
    }
}

#[test]
fn compound_v1_member_dims_become_arrays() {
    let mut v = hdr(1, 6, 1, 24);
    v.extend_from_slice(b"arr\0\0\0\0\0");
    v.extend_from_slice(&0u32.to_le_bytes());
    v.push(2); // dimensionality
    v.extend_from_slice(&[0; 3 + 4 + 4]);
    for d in [2u32, 3, 0, 0] {
        v.extend_from_slice(&d.to_le_bytes());
    }
    v.extend(int(1, 4, false, false));
    let t = parse(&v).unwrap();
    assert_eq!(t.numpy_str(), "{arr:array(2x3,<u4)@0}");
    let TypeClass::Compound { members } = &t.class else {
        panic!()
    };
    assert_eq!(members[0].dtype.size, 24);
}

#[test]
fn compound_member_outside_the_compound_is_corrupt() {
    let mut v = hdr(3, 6, 1, 4);
    v.extend_from_slice(b"a\0");
    v.push(2); // offset 2 + 4 bytes > 4
    v.extend(int(3, 4, true, false));
    assert!(matches!(parse(&v), Err(Error::Corrupt { .. })));
}

#[test]
fn enum_v3_unpadded_names() {
    let mut v = hdr(3, 8, 3, 2);
    v.extend(int(3, 2, true, false));
    v.extend_from_slice(b"LOW\0MID\0HIGH\0");
    for x in [0i16, 5, -1] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    let t = parse(&v).unwrap();
    let TypeClass::Enum { base, members } = &t.class else {
        panic!()
    };
    assert_eq!(base.size, 2);
    assert_eq!(members[2], ("HIGH".to_string(), vec![0xff, 0xff]));
    assert_eq!(t.numpy_str(), "enum(<i2)");
    assert_eq!(t.byte_order(), Some(ByteOrder::Little));
}

#[test]
fn array_v2_with_permutation_and_v3() {
    let mut v2 = hdr(2, 10, 0, 4 * 6 * 8);
    v2.extend_from_slice(&[2, 0, 0, 0]);
    for x in [4u32, 6, 0, 1] {
        v2.extend_from_slice(&x.to_le_bytes()); // dims then permutation
    }
    v2.extend(f64le(1));
    let t = parse(&v2).unwrap();
    assert_eq!(t.numpy_str(), "array(4x6,<f8)");
    let mut v3 = hdr(3, 10, 0, 4 * 6 * 8);
    v3.push(2);
    for x in [4u32, 6] {
        v3.extend_from_slice(&x.to_le_bytes());
    }
    v3.extend(f64le(1));
    assert_eq!(parse(&v3).unwrap().class, t.class);
    // An array of arrays stays nested, like the subarray of a subarray h5py returns.
    let mut outer = hdr(3, 10, 0, 2 * 4 * 6 * 8);
    outer.push(1);
    outer.extend_from_slice(&2u32.to_le_bytes());
    outer.extend(v3);
    assert_eq!(
        parse(&outer).unwrap().numpy_str(),
        "array(2,array(4x6,<f8))"
    );
}

#[test]
fn complex_v5() {
    let mut v = hdr(5, 11, 1, 16);
    v.extend(f64le(1));
    let t = parse(&v).unwrap();
    assert_eq!(t.numpy_str(), "<c16");
    assert_eq!(t.byte_order(), Some(ByteOrder::Little));
    let mut polar = hdr(5, 11, 1 | 1 << 1, 16);
    polar.extend(f64le(1));
    assert!(matches!(parse(&polar), Err(Error::Unsupported { .. })));
}

#[test]
fn hostile_messages() {
    // Truncated header and properties.
    assert!(matches!(parse(&[0x10, 0, 0]), Err(Error::Truncated { .. })));
    assert!(matches!(
        parse(&hdr(1, 0, 0, 4)),
        Err(Error::Truncated { .. })
    ));
    // Bad version and unknown class.
    assert!(matches!(
        parse(&hdr(0, 0, 0, 4)),
        Err(Error::Corrupt { .. })
    ));
    assert!(matches!(
        parse(&hdr(1, 12, 0, 4)),
        Err(Error::Unsupported { .. })
    ));
    // 65535 compound members claimed in a few bytes.
    let mut v = hdr(3, 6, 0xffff, 8);
    v.extend_from_slice(&[0; 32]);
    assert!(matches!(parse(&v), Err(Error::Corrupt { .. })));
    // Nesting deeper than the limit: vlen of vlen of ... of u8.
    let mut v = Vec::new();
    for _ in 0..=MAX_TYPE_DEPTH {
        v.extend(hdr(1, 9, 0, 16));
    }
    v.extend(int(1, 1, false, false));
    assert!(matches!(parse(&v), Err(Error::Limit { .. })));
    // Exactly at the limit is fine.
    let ok = &v[8..];
    assert!(parse(ok).is_ok());
    // Array size overflow in a v1 compound member.
    let mut v = hdr(1, 6, 1, 8);
    v.extend_from_slice(b"a\0\0\0\0\0\0\0");
    v.extend_from_slice(&0u32.to_le_bytes());
    v.push(2);
    v.extend_from_slice(&[0; 11]);
    for d in [0xffff_ffffu32, 0xffff_ffff, 0, 0] {
        v.extend_from_slice(&d.to_le_bytes());
    }
    v.extend(int(1, 4, false, false));
    assert!(matches!(parse(&v), Err(Error::Corrupt { .. })));
}

#[test]
fn mutated_real_messages_never_panic() {
    // Every single-byte change to 0, 0xff or +1, and every truncation, of two real nested
    // messages: decoding may fail but must not panic, and what decodes must render.
    for h in [
        "560400001d000000610000100800000200000000001000620002560200000700000078000011\
         211f000400000000002000170800177f00000079000413010000030000006300095a000000040000\
         00010200000010000000020000000000100064000d190101001000000010000000010000000000\
         0800",
        "1602000002000000666c6167000000000000000000000000000000000000000000000000000000000000\
         000000000000180200000100000010080000010000000000080046414c53450000005452554500000000\
         000165000000000000000100000000000000000000000000000000000000000000000000000000000000\
         180200000100000010000000010000000000080041000000000000004200000000000000010200000000",
    ] {
        let orig = hex(h);
        // The earliest-format message carries padding: only truncations inside the encoded
        // type must fail.
        let mut c = Cursor::new(&orig, 0, "test");
        Datatype::decode(&mut c).unwrap();
        let used = c.pos();
        for pos in 0..orig.len() {
            for v in [0u8, 0xff, orig[pos].wrapping_add(1)] {
                let mut b = orig.clone();
                b[pos] = v;
                if let Ok(t) = parse(&b) {
                    let _ = (t.numpy_str(), t.is_fixed_size(), t.byte_order());
                }
            }
            assert_eq!(
                parse(&orig[..pos]).is_err(),
                pos < used,
                "truncated to {pos}"
            );
        }
    }
}

#[test]
fn compounds_that_h5py_reads_as_complex() {
    let member = |name: &str, t: Datatype, offset: u32| CompoundMember {
        name: name.into(),
        offset,
        dtype: t,
    };
    let f = |size: u32, order: ByteOrder| Datatype {
        version: 1,
        size,
        class: TypeClass::FloatingPoint {
            order,
            sign_location: 0,
            bit_offset: 0,
            precision: 8 * size as u16,
            exponent_location: 0,
            exponent_size: 0,
            mantissa_location: 0,
            mantissa_size: 0,
            exponent_bias: 0,
        },
    };
    let compound = |members: Vec<CompoundMember>| Datatype {
        version: 1,
        size: members.iter().map(|m| m.dtype.size).sum(),
        class: TypeClass::Compound { members },
    };
    let (le, be) = (ByteOrder::Little, ByteOrder::Big);
    let c = |a: &str, ta, b: &str, tb: Datatype| {
        compound(vec![member(a, ta, 0), member(b, tb, 8)]).numpy_str()
    };
    assert_eq!(c("r", f(8, be), "i", f(8, be)), ">c16");
    assert_eq!(c("r", f(16, le), "i", f(16, le)), "<c32");
    // Not complex for h5py: wrong names or order, mixed byte order, halves, integers.
    assert_eq!(c("i", f(4, le), "r", f(4, le)), "{i:<f4@0,r:<f4@8}");
    assert_eq!(c("R", f(4, le), "I", f(4, le)), "{R:<f4@0,I:<f4@8}");
    assert_eq!(c("r", f(4, le), "i", f(4, be)), "{r:<f4@0,i:>f4@8}");
    assert_eq!(c("r", f(2, le), "i", f(2, le)), "{r:<f2@0,i:<f2@8}");
    let i4 = parse(&int(1, 4, true, false)).unwrap();
    assert_eq!(c("r", i4.clone(), "i", i4), "{r:<i4@0,i:<i4@8}");
}
