//! Data types and fill values: an HDF5 datatype as a Zarr v2 `dtype` and a v3 `data_type`
//! with its array→bytes codec, and the dataset's fill value in each version's JSON.
//!
//! | HDF5                          | v2 `dtype`        | v3 `data_type`                        |
//! |-------------------------------|-------------------|---------------------------------------|
//! | integers, time, bitfields     | `<i4`, `>u2`, ... | `int32`, `uint16`, ... (`bytes` codec `endian` little or big) |
//! | IEEE floats (half/single/double) | `<f2`, `>f8`   | `float16`, `float64`                  |
//! | complex (HDF5 2.0 class, h5py's `r`/`i` compound) | `<c8`, `>c16` | `complex64`, `complex128` |
//! | h5py's boolean enum           | `\|b1`            | `bool`                                |
//! | other enums                   | their base type   | their base type                       |
//! | fixed-size strings            | `\|S10`           | `null_terminated_bytes` (zarr-python's name; no v3 spec yet) |
//! | opaque, references            | `\|V8`            | `raw_bytes`                           |
//! | compounds                     | numpy's list form `[["a", "<i2"], ["", "\|V2"], ...]` (padding as unnamed fields) | `structured` when every member is little-endian or one byte, packed, with unique names; else `raw_bytes` |
//! | array types                   | the base type; the array's dimensions are appended to the shape (one chunk along them), as numpy does | same |
//! | variable-length strings       | `\|O` with filter `vlen-utf8` | `string` with codec `vlen-utf8` |
//!
//! Space-padded strings are served with their padding as NULs, as libhdf5 converts them
//! for every reader (so chunks of such arrays are served decoded).
//!
//! zarr-python 3 reads the `bytes` codec's `endian` for numbers but not for the fields of a
//! `structured` type, and takes no subarray fields in a v2 structured `dtype`: such compounds
//! fall back to whole raw bytes (v2 `|V<size>`, v3 `raw_bytes`), which keep every byte.
//! Variable-length sequences other than strings have no mapping.
//!
//! Fill values are the dataset's own (its fill value message; none: zero bytes, as HDF5
//! reads unwritten chunks, and in v2 `null`, which zarr-python reads as zeros too and
//! xarray takes as "no missing value", where it would take `0` as one), one element: numbers as JSON numbers, NaN and infinities as the
//! strings `"NaN"`, `"Infinity"`, `"-Infinity"`, complex numbers as `[re, im]`, booleans as
//! `true`/`false`, byte types (strings, opaque, compounds) as base64 of their bytes, and
//! variable-length strings as `""`.

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::format::messages::datatype::{Datatype, StringPad, TypeClass, VarLenKind};

/// The mapping of one dataset's datatype.
#[derive(Clone, Debug, PartialEq)]
pub struct ZType {
    pub v2: Value,
    pub v3: Value,
    /// The v3 array→bytes codec (`bytes`, or `vlen-utf8`).
    pub array_codec: Value,
    /// The v2 filter an object `dtype` needs (`vlen-utf8`).
    pub v2_object_filter: Option<Value>,
    pub fill_v2: Value,
    pub fill_v3: Value,
    /// Dimensions an array datatype appends to the dataset's.
    pub sub: Vec<u64>,
    /// Variable-length strings (served as vlen-utf8), with their padding.
    pub vlen_strings: Option<StringPad>,
    /// Space-padded fixed-size strings of this many bytes: served with the padding as
    /// NULs, as libhdf5 reads them (see [`unpad_spaces`]).
    pub space_padded: Option<usize>,
}

fn refuse(detail: impl std::fmt::Display) -> Error {
    Error::unsupported("Zarr data type", detail)
}

/// What kind of JSON a fill value of an element takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bool,
    Int {
        signed: bool,
    },
    Float,
    Complex,
    /// Base64 of the element's bytes.
    Bytes,
}

/// One element type.
#[derive(Clone, Debug)]
struct Elem {
    v2: Value,
    v3: Value,
    kind: Kind,
    size: usize,
    /// Multi-byte numbers stored big-endian.
    big: bool,
    /// v3 names its byte order in the `bytes` codec (multi-byte numbers).
    ordered: bool,
}

/// The mapping of datatype `t` with fill value `fill` (one element; `None`: zero bytes).
pub fn map(t: &Datatype, fill: Option<&[u8]>) -> Result<ZType> {
    if let TypeClass::VarLen { kind, .. } = &t.class {
        return match kind {
            VarLenKind::String { pad, .. } => Ok(ZType {
                v2: json!("|O"),
                v3: json!("string"),
                array_codec: json!({"name": "vlen-utf8", "configuration": {}}),
                v2_object_filter: Some(json!({"id": "vlen-utf8"})),
                fill_v2: json!(""),
                fill_v3: json!(""),
                sub: Vec::new(),
                vlen_strings: Some(*pad),
                space_padded: None,
            }),
            VarLenKind::Sequence => Err(refuse(format!(
                "variable-length sequences ({}) have no Zarr type",
                t.numpy_str()
            ))),
        };
    }
    let size = t.size as usize;
    let zero = vec![0u8; size];
    let defined = fill.is_some_and(|f| f.len() == size);
    let mut fill = fill.filter(|f| f.len() == size).unwrap_or(&zero).to_vec();
    let space_padded = match &t.class {
        TypeClass::Array { base, .. } => spaces(base),
        _ => spaces(t),
    };
    if let Some(n) = space_padded {
        unpad_spaces(&mut fill, n);
    }
    let fill = &fill[..];
    let (e, sub, fill) = match &t.class {
        TypeClass::Array { dims, base } => {
            let sub: Vec<u64> = dims.iter().map(|&d| u64::from(d)).collect();
            let bs = base.size as usize;
            // One fill value stands for every element of the array: only when they agree.
            let same = bs > 0 && fill.chunks(bs).all(|c| c == &fill[..bs]);
            match elem(base) {
                Ok(e) if same && !matches!(base.class, TypeClass::Array { .. }) => {
                    (e, sub, &fill[..bs])
                }
                _ => (raw(size), Vec::new(), fill),
            }
        }
        _ => (elem(t)?, Vec::new(), fill),
    };
    let array_codec = if e.ordered {
        json!({"name": "bytes", "configuration": {"endian": if e.big { "big" } else { "little" }}})
    } else if matches!(e.v3, Value::Object(ref o) if o.get("name") == Some(&json!("structured"))) {
        json!({"name": "bytes", "configuration": {"endian": "little"}})
    } else {
        json!({"name": "bytes"})
    };
    Ok(ZType {
        // v2 `null`: no fill value defined (read as zeros; xarray masks no value with it).
        fill_v2: if defined {
            fill_json(&e, fill)
        } else {
            Value::Null
        },
        fill_v3: fill_json(&e, fill),
        v2: e.v2,
        v3: e.v3,
        array_codec,
        v2_object_filter: None,
        sub,
        vlen_strings: None,
        space_padded,
    })
}

/// The size of `t` if it is a space-padded fixed-size string.
fn spaces(t: &Datatype) -> Option<usize> {
    matches!(
        t.class,
        TypeClass::String {
            pad: StringPad::SpacePad,
            ..
        }
    )
    .then_some(t.size as usize)
}

/// Space-padded strings of `size` bytes in `data` with their trailing spaces turned into
/// NULs: what libhdf5 gives a reader (h5py reads them into null-padded strings), and what a
/// Zarr byte-string type means.
pub fn unpad_spaces(data: &mut [u8], size: usize) {
    for s in data.chunks_mut(size.max(1)) {
        for b in s.iter_mut().rev() {
            if *b != b' ' {
                break;
            }
            *b = 0;
        }
    }
}

/// Raw bytes of `size`: v2 `|V<size>`, v3 `raw_bytes`.
fn raw(size: usize) -> Elem {
    Elem {
        v2: json!(format!("|V{size}")),
        v3: json!({"name": "raw_bytes", "configuration": {"length_bytes": size}}),
        kind: Kind::Bytes,
        size,
        big: false,
        ordered: false,
    }
}

/// The mapping of a fixed-size element type (not an array type).
fn elem(t: &Datatype) -> Result<Elem> {
    let size = t.size as usize;
    match &t.class {
        TypeClass::VarLen { .. } | TypeClass::Array { .. } => {
            return Err(refuse(format!("{} inside another type", t.numpy_str())))
        }
        TypeClass::Compound { members } => {
            if let Ok((d, _)) = crate::views::npy::descr(t) {
                // h5py's complex compound: numpy's complex type.
                if d.starts_with("'<c") || d.starts_with("'>c") {
                    return number(d.trim_matches('\''), size);
                }
            }
            return Ok(compound(t, members));
        }
        _ => {}
    }
    let (d, sub) = crate::views::npy::descr(t).map_err(|e| refuse(e.to_string()))?;
    if !sub.is_empty() {
        return Err(refuse("array type inside another type"));
    }
    let d = d.trim_matches('\'');
    if let Some(n) = d.strip_prefix("|S") {
        return Ok(Elem {
            v2: json!(d),
            v3: json!({"name": "null_terminated_bytes", "configuration": {"length_bytes":
                n.parse::<u64>().unwrap_or(0)}}),
            kind: Kind::Bytes,
            size,
            big: false,
            ordered: false,
        });
    }
    if d.starts_with("|V") {
        return Ok(raw(size));
    }
    number(d, size)
}

/// A number (or boolean) of numpy type `d` (`<f4`).
fn number(d: &str, size: usize) -> Result<Elem> {
    let (order, rest) = d.split_at(1.min(d.len()));
    let name = match rest {
        "b1" => "bool",
        "i1" => "int8",
        "i2" => "int16",
        "i4" => "int32",
        "i8" => "int64",
        "u1" => "uint8",
        "u2" => "uint16",
        "u4" => "uint32",
        "u8" => "uint64",
        "f2" => "float16",
        "f4" => "float32",
        "f8" => "float64",
        "c8" => "complex64",
        "c16" => "complex128",
        _ => return Err(refuse(format!("numpy type {d}"))),
    };
    let kind = match rest.as_bytes().first() {
        Some(b'b') => Kind::Bool,
        Some(b'i') => Kind::Int { signed: true },
        Some(b'u') => Kind::Int { signed: false },
        Some(b'f') => Kind::Float,
        _ => Kind::Complex,
    };
    Ok(Elem {
        v2: json!(d),
        v3: json!(name),
        kind,
        size,
        big: order == ">",
        ordered: size > 1,
    })
}

/// A compound: numpy's list form in v2 and `structured` in v3 where they hold it, else raw
/// bytes (see the module docs).
fn compound(t: &Datatype, members: &[crate::format::messages::datatype::CompoundMember]) -> Elem {
    let size = t.size as usize;
    let mut v2 = Vec::new();
    let mut v3 = Vec::new();
    let mut v2_ok = !members.is_empty();
    let mut v3_ok = v2_ok;
    let mut next = 0usize;
    let mut names = std::collections::HashSet::new();
    for m in members {
        let start = m.offset as usize;
        let e = elem(&m.dtype);
        let Ok(e) = e else {
            v2_ok = false;
            v3_ok = false;
            break;
        };
        if start < next || m.name.is_empty() || !names.insert(m.name.as_str()) {
            v2_ok = false;
            v3_ok = false;
            break;
        }
        if start > next {
            v2.push(json!(["", format!("|V{}", start - next)]));
            v3_ok = false;
        }
        v2.push(json!([m.name, e.v2]));
        v3_ok &= !e.big;
        v3.push(json!([m.name, e.v3]));
        next = start.saturating_add(e.size);
    }
    if next > size {
        v2_ok = false;
        v3_ok = false;
    } else if next < size {
        v2.push(json!(["", format!("|V{}", size - next)]));
        v3_ok = false;
    }
    let r = raw(size);
    Elem {
        v2: if v2_ok { Value::Array(v2) } else { r.v2 },
        v3: if v3_ok {
            json!({"name": "structured", "configuration": {"fields": v3}})
        } else {
            r.v3
        },
        kind: Kind::Bytes,
        size,
        big: false,
        ordered: false,
    }
}

/// The fill value `b` (one element of `e`) as JSON.
fn fill_json(e: &Elem, b: &[u8]) -> Value {
    let mut le = b.to_vec();
    if e.big {
        le.reverse();
    }
    let word = |s: &[u8]| -> u64 {
        let mut a = [0u8; 8];
        let n = s.len().min(8);
        a[..n].copy_from_slice(&s[..n]);
        u64::from_le_bytes(a)
    };
    let float = |s: &[u8]| -> Value {
        let bits = word(s);
        float_json(match s.len() {
            2 => half_to_f64(bits as u16),
            4 => f64::from(f32::from_bits(bits as u32)),
            _ => f64::from_bits(bits),
        })
    };
    match e.kind {
        Kind::Bool => json!(le.iter().any(|&x| x != 0)),
        Kind::Int { signed: false } => json!(word(&le)),
        Kind::Int { signed: true } => {
            let shift = 64u32.saturating_sub(8 * le.len() as u32).min(63);
            json!(((word(&le) << shift) as i64) >> shift)
        }
        Kind::Float => float(&le),
        Kind::Complex => {
            let h = le.len() / 2;
            // Reversed whole for big-endian: the imaginary part came first.
            let (re, im) = if e.big {
                (&le[h..], &le[..h])
            } else {
                (&le[..h], &le[h..])
            };
            json!([float(re), float(im)])
        }
        Kind::Bytes => json!(base64(b)),
    }
}

/// A double as Zarr JSON: a number, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub fn float_json(x: f64) -> Value {
    if x.is_nan() {
        json!("NaN")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        json!(x)
    }
}

/// An IEEE half as a double.
pub fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let frac = f64::from(h & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(i32::from(e) - 15),
    }
}

/// Standard base64 (RFC 4648, with padding).
pub fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(c.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(c.get(2).copied().unwrap_or(0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::messages::datatype::{ByteOrder, CharSet, CompoundMember};

    fn int(size: u32, signed: bool, order: ByteOrder) -> Datatype {
        Datatype::test_int(size, signed, order)
    }

    fn float(size: u32, order: ByteOrder) -> Datatype {
        Datatype::test_float(size, order)
    }

    fn member(name: &str, offset: u32, dtype: Datatype) -> CompoundMember {
        CompoundMember {
            name: name.into(),
            offset,
            dtype,
        }
    }

    fn compound(size: u32, members: Vec<CompoundMember>) -> Datatype {
        Datatype {
            version: 1,
            size,
            class: TypeClass::Compound { members },
        }
    }

    /// The type table of the module docs, with both byte orders.
    #[test]
    fn numbers_in_both_byte_orders() {
        let z = map(&int(2, true, ByteOrder::Big), Some(&(-3i16).to_be_bytes())).unwrap();
        assert_eq!((z.v2, z.v3), (json!(">i2"), json!("int16")));
        assert_eq!(z.fill_v3, json!(-3));
        assert_eq!(
            z.array_codec,
            json!({"name": "bytes", "configuration": {"endian": "big"}})
        );
        let z = map(
            &int(8, false, ByteOrder::Little),
            Some(&u64::MAX.to_le_bytes()),
        )
        .unwrap();
        assert_eq!(
            (z.v2, z.v3, z.fill_v2),
            (json!("<u8"), json!("uint64"), json!(u64::MAX))
        );
        let z = map(&int(1, true, ByteOrder::Little), Some(&[0xff])).unwrap();
        assert_eq!((z.v2, z.fill_v3), (json!("|i1"), json!(-1)));
        assert_eq!(z.array_codec, json!({"name": "bytes"}));
        let z = map(&float(4, ByteOrder::Little), Some(&f32::NAN.to_le_bytes())).unwrap();
        assert_eq!((z.v3, z.fill_v3), (json!("float32"), json!("NaN")));
        let z = map(
            &float(8, ByteOrder::Big),
            Some(&f64::NEG_INFINITY.to_be_bytes()),
        )
        .unwrap();
        assert_eq!((z.v2, z.fill_v2), (json!(">f8"), json!("-Infinity")));
        let z = map(&float(2, ByteOrder::Little), Some(&0x3e00u16.to_le_bytes())).unwrap();
        assert_eq!((z.v3, z.fill_v3), (json!("float16"), json!(1.5)));
        let z = map(&float(4, ByteOrder::Little), None).unwrap();
        assert_eq!(z.fill_v3, json!(0.0));
    }

    #[test]
    fn complex_bool_enum_and_strings() {
        let c = Datatype {
            version: 5,
            size: 16,
            class: TypeClass::Complex {
                base: Box::new(float(8, ByteOrder::Big)),
            },
        };
        let mut fill = 1.5f64.to_be_bytes().to_vec();
        fill.extend(f64::NAN.to_be_bytes());
        let z = map(&c, Some(&fill)).unwrap();
        assert_eq!((z.v2, z.v3), (json!(">c16"), json!("complex128")));
        assert_eq!(z.fill_v3, json!([1.5, "NaN"]));
        // h5py's complex compound
        let h = compound(
            8,
            vec![
                member("r", 0, float(4, ByteOrder::Little)),
                member("i", 4, float(4, ByteOrder::Little)),
            ],
        );
        assert_eq!(map(&h, None).unwrap().v3, json!("complex64"));
        let base = int(1, true, ByteOrder::Little);
        let b = Datatype {
            version: 1,
            size: 1,
            class: TypeClass::Enum {
                base: Box::new(base),
                members: vec![("FALSE".into(), vec![0]), ("TRUE".into(), vec![1])],
            },
        };
        let z = map(&b, Some(&[1])).unwrap();
        assert_eq!(
            (z.v2, z.v3, z.fill_v3),
            (json!("|b1"), json!("bool"), json!(true))
        );
        let e = Datatype {
            version: 1,
            size: 4,
            class: TypeClass::Enum {
                base: Box::new(int(4, false, ByteOrder::Big)),
                members: vec![("ON".into(), vec![0, 0, 0, 7])],
            },
        };
        let z = map(&e, Some(&[0, 0, 0, 7])).unwrap();
        assert_eq!(
            (z.v2, z.v3, z.fill_v2),
            (json!(">u4"), json!("uint32"), json!(7))
        );
        let s = Datatype {
            version: 1,
            size: 5,
            class: TypeClass::String {
                pad: StringPad::NullPad,
                charset: CharSet::Ascii,
            },
        };
        let z = map(&s, Some(b"ab\0\0\0")).unwrap();
        assert_eq!(z.v2, json!("|S5"));
        assert_eq!(
            z.v3,
            json!({"name": "null_terminated_bytes", "configuration": {"length_bytes": 5}})
        );
        assert_eq!(z.fill_v3, json!("YWIAAAA="));
        let v = Datatype {
            version: 1,
            size: 16,
            class: TypeClass::VarLen {
                kind: VarLenKind::String {
                    pad: StringPad::NullTerminate,
                    charset: CharSet::Utf8,
                },
                base: Box::new(s),
            },
        };
        let z = map(&v, None).unwrap();
        assert_eq!(
            (z.v2, z.v3, z.fill_v3),
            (json!("|O"), json!("string"), json!(""))
        );
        assert_eq!(z.v2_object_filter, Some(json!({"id": "vlen-utf8"})));
    }

    #[test]
    fn compounds_structured_where_readable_else_raw() {
        let le = compound(
            6,
            vec![
                member("a", 0, int(2, true, ByteOrder::Little)),
                member("b", 2, float(4, ByteOrder::Little)),
            ],
        );
        let z = map(&le, None).unwrap();
        assert_eq!(z.v2, json!([["a", "<i2"], ["b", "<f4"]]));
        assert_eq!(
            z.v3,
            json!({"name": "structured", "configuration": {"fields": [["a", "int16"], ["b", "float32"]]}})
        );
        assert_eq!((z.fill_v3, z.fill_v2), (json!("AAAAAAAA"), Value::Null));
        // A big-endian member: v2 keeps it, v3 falls back to raw bytes.
        let be = compound(
            12,
            vec![
                member("x", 0, int(2, true, ByteOrder::Little)),
                member("y", 4, float(8, ByteOrder::Big)),
            ],
        );
        let z = map(&be, None).unwrap();
        assert_eq!(z.v2, json!([["x", "<i2"], ["", "|V2"], ["y", ">f8"]]));
        assert_eq!(
            z.v3,
            json!({"name": "raw_bytes", "configuration": {"length_bytes": 12}})
        );
        // An array member: raw in both.
        let arr = compound(
            12,
            vec![member(
                "v",
                0,
                Datatype {
                    version: 2,
                    size: 12,
                    class: TypeClass::Array {
                        dims: vec![3],
                        base: Box::new(float(4, ByteOrder::Little)),
                    },
                },
            )],
        );
        assert_eq!(map(&arr, None).unwrap().v2, json!("|V12"));
    }

    #[test]
    fn array_types_add_dimensions() {
        let a = Datatype {
            version: 2,
            size: 24,
            class: TypeClass::Array {
                dims: vec![2, 3],
                base: Box::new(int(4, true, ByteOrder::Little)),
            },
        };
        let z = map(&a, None).unwrap();
        assert_eq!(
            (z.v2, z.sub, z.fill_v3),
            (json!("<i4"), vec![2, 3], json!(0))
        );
        // Fills that differ between the array's elements: raw bytes keep them.
        let mut fill = vec![0u8; 24];
        fill[4] = 1;
        let z = map(&a, Some(&fill)).unwrap();
        assert_eq!((z.v2, z.sub.len()), (json!("|V24"), 0));
    }

    #[test]
    fn space_padding_reads_as_nuls() {
        let mut b = *b"ab   cd \0 ";
        unpad_spaces(&mut b, 5);
        assert_eq!(&b, b"ab\0\0\0cd \0\0");
        let s = Datatype {
            version: 1,
            size: 4,
            class: TypeClass::String {
                pad: StringPad::SpacePad,
                charset: CharSet::Ascii,
            },
        };
        let z = map(&s, Some(b"a   ")).unwrap();
        assert_eq!((z.space_padded, z.fill_v3), (Some(4), json!("YQAAAA==")));
    }

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(&[1, 2, 3, 4, 5, 6]), "AQIDBAUG");
    }
}
