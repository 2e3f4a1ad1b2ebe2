//! Decoder of datatype messages (spec "IV.A.2.d"), one function per class.
//!
//! Every function reads from a [`Cursor`] positioned on its part of the message and leaves it
//! just past that part, so composite classes simply call [`decode`] again for their members.
//! Counts stored in the class bits (compound and enum members) are checked against the bytes
//! left before anything is allocated: each member costs a known minimum number of bytes.

use super::{
    ByteOrder, CharSet, CompoundMember, Datatype, ReferenceKind, StringPad, TypeClass, VarLenKind,
};
use crate::error::{Error, Result};
use crate::format::limits::{MAX_RANK, MAX_TYPE_DEPTH};
use crate::io::cursor::bytes_for;
use crate::io::Cursor;

/// Bytes of the fixed header of every datatype message: class+version, 3 bytes of class bits,
/// 4 bytes of size. Also the smallest possible encoded datatype.
const HEADER_LEN: usize = 8;

/// Class numbers (spec "Class and Version" field).
mod class {
    pub const FIXED_POINT: u8 = 0;
    pub const FLOATING_POINT: u8 = 1;
    pub const TIME: u8 = 2;
    pub const STRING: u8 = 3;
    pub const BITFIELD: u8 = 4;
    pub const OPAQUE: u8 = 5;
    pub const COMPOUND: u8 = 6;
    pub const REFERENCE: u8 = 7;
    pub const ENUM: u8 = 8;
    pub const VARLEN: u8 = 9;
    pub const ARRAY: u8 = 10;
    pub const COMPLEX: u8 = 11;
}

/// Decode one datatype at `depth` levels of nesting (0 for the message itself).
pub(super) fn decode(c: &mut Cursor<'_>, depth: usize) -> Result<Datatype> {
    if depth > MAX_TYPE_DEPTH {
        return Err(Error::limit(
            c.what(),
            c.start_addr(),
            format!("datatype nested deeper than {MAX_TYPE_DEPTH} levels"),
        ));
    }
    let class_version = c.u8()?;
    let version = class_version >> 4;
    let class = class_version & 0x0f;
    // The 24 class bits are stored little-endian like every other integer.
    let bits = c.uint(3)? as u32;
    let size = c.u32()?;
    match version {
        0 => return Err(c.corrupt("datatype version 0")),
        1..=5 => {}
        v => {
            return Err(Error::unsupported(
                "datatype",
                format!("message version {v} at {:#x}", c.start_addr()),
            ))
        }
    }
    let class = match class {
        class::FIXED_POINT => {
            let (bit_offset, precision) = (c.u16()?, c.u16()?);
            TypeClass::FixedPoint {
                order: int_order(bits),
                signed: bits & 0x08 != 0,
                bit_offset,
                precision,
            }
        }
        class::FLOATING_POINT => float(c, bits)?,
        class::TIME => TypeClass::Time {
            order: int_order(bits),
            precision: c.u16()?,
        },
        class::STRING => TypeClass::String {
            pad: string_pad(c, bits & 0x0f)?,
            charset: charset(c, (bits >> 4) & 0x0f)?,
        },
        class::BITFIELD => {
            let (bit_offset, precision) = (c.u16()?, c.u16()?);
            TypeClass::Bitfield {
                order: int_order(bits),
                bit_offset,
                precision,
            }
        }
        class::OPAQUE => {
            // The tag length in the class bits already includes the NUL padding to 8 bytes.
            let tag = c.bytes((bits & 0xff) as usize)?;
            TypeClass::Opaque {
                tag: until_nul(tag),
            }
        }
        class::COMPOUND => compound(c, version, bits, size, depth)?,
        class::REFERENCE => TypeClass::Reference {
            kind: match bits & 0x0f {
                0 => ReferenceKind::Object,
                1 => ReferenceKind::Region,
                t @ 2..=4 => ReferenceKind::V4 { ref_type: t as u8 },
                t => return Err(c.corrupt(format!("reference type {t}"))),
            },
        },
        class::ENUM => enumeration(c, version, bits, depth)?,
        class::VARLEN => {
            let kind = match bits & 0x0f {
                0 => VarLenKind::Sequence,
                1 => VarLenKind::String {
                    pad: string_pad(c, (bits >> 4) & 0x0f)?,
                    charset: charset(c, (bits >> 8) & 0x0f)?,
                },
                t => return Err(c.corrupt(format!("variable-length type {t}"))),
            };
            let base = Box::new(decode(c, depth + 1)?);
            TypeClass::VarLen { kind, base }
        }
        class::ARRAY => array(c, version, depth)?,
        class::COMPLEX => {
            if bits & 0x01 == 0 {
                return Err(Error::unsupported(
                    "datatype",
                    "heterogeneous complex number type",
                ));
            }
            let form = (bits >> 1) & 0x03;
            if form != 0 {
                return Err(Error::unsupported(
                    "datatype",
                    format!("complex number form {form} (only rectangular is defined)"),
                ));
            }
            let base = Box::new(decode(c, depth + 1)?);
            TypeClass::Complex { base }
        }
        other => {
            return Err(Error::unsupported(
                "datatype",
                format!("class {other} at {:#x}", c.start_addr()),
            ))
        }
    };
    Ok(Datatype {
        version,
        size,
        class,
    })
}

/// Byte order bit 0 of fixed-point, time and bitfield classes.
fn int_order(bits: u32) -> ByteOrder {
    if bits & 0x01 != 0 {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    }
}

/// Floating point (class 1): byte order in bits 0 and 6, sign location in bits 8-15.
fn float(c: &mut Cursor<'_>, bits: u32) -> Result<TypeClass> {
    let order = match (bits >> 6 & 1, bits & 1) {
        (0, 0) => ByteOrder::Little,
        (0, _) => ByteOrder::Big,
        (_, 1) => ByteOrder::Vax,
        _ => return Err(c.corrupt("reserved floating-point byte order (bit 6 without bit 0)")),
    };
    Ok(TypeClass::FloatingPoint {
        order,
        sign_location: (bits >> 8) as u8,
        bit_offset: c.u16()?,
        precision: c.u16()?,
        exponent_location: c.u8()?,
        exponent_size: c.u8()?,
        mantissa_location: c.u8()?,
        mantissa_size: c.u8()?,
        exponent_bias: c.u32()?,
    })
}

fn string_pad(c: &Cursor<'_>, v: u32) -> Result<StringPad> {
    match v {
        0 => Ok(StringPad::NullTerminate),
        1 => Ok(StringPad::NullPad),
        2 => Ok(StringPad::SpacePad),
        v => Err(c.corrupt(format!("string padding type {v}"))),
    }
}

fn charset(c: &Cursor<'_>, v: u32) -> Result<CharSet> {
    match v {
        0 => Ok(CharSet::Ascii),
        1 => Ok(CharSet::Utf8),
        v => Err(c.corrupt(format!("character set {v}"))),
    }
}

/// Bytes up to the first NUL (all of them if there is none), as text.
fn until_nul(b: &[u8]) -> String {
    let n = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..n]).into_owned()
}

/// A NUL-terminated name; with `padded`, followed by NULs up to a multiple of 8 bytes counted
/// from the start of the name (datatype versions 1 and 2).
fn name(c: &mut Cursor<'_>, padded: bool) -> Result<String> {
    let s = c.cstring()?;
    if padded {
        // cstring consumed len+1 bytes; skip the rest of the 8-byte multiple.
        let used = s.len() + 1;
        c.skip(used.next_multiple_of(8) - used)?;
    }
    Ok(String::from_utf8_lossy(s).into_owned())
}

/// Refuse a member count that the bytes left cannot hold at `min_each` bytes per member.
fn check_count(c: &Cursor<'_>, what: &str, n: usize, min_each: usize) -> Result<()> {
    if n.saturating_mul(min_each) > c.remaining() {
        return Err(c.corrupt(format!(
            "{n} {what} cannot fit in the {} bytes left",
            c.remaining()
        )));
    }
    Ok(())
}

/// Compound (class 6). Version 1 members carry an optional array shape of up to 4 dimensions
/// (turned into an array type here), versions 1 and 2 pad names to 8 bytes, version 3 stores
/// offsets in as few bytes as the compound size needs.
fn compound(
    c: &mut Cursor<'_>,
    version: u8,
    bits: u32,
    size: u32,
    depth: usize,
) -> Result<TypeClass> {
    let n = (bits & 0xffff) as usize;
    // Smallest member: name + offset (+ v1 array fields) + a datatype header.
    let min_each = match version {
        1 => 8 + 4 + 28 + HEADER_LEN,
        2 => 8 + 4 + HEADER_LEN,
        _ => 1 + 1 + HEADER_LEN,
    };
    check_count(c, "compound members", n, min_each)?;
    let offset_width = bytes_for(size as u64);
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let name = name(c, version < 3)?;
        let offset = if version >= 3 {
            c.uint(offset_width)? as u32
        } else {
            c.u32()?
        };
        let mut dims = Vec::new();
        if version == 1 {
            let ndims = c.u8()? as usize;
            c.skip(3 + 4 + 4)?; // reserved, dimension permutation (never used), reserved
            let all = [c.u32()?, c.u32()?, c.u32()?, c.u32()?];
            if ndims > all.len() {
                return Err(c.corrupt(format!("compound member {name:?} with {ndims} dims")));
            }
            dims.extend_from_slice(&all[..ndims]);
        }
        let mut dtype = decode(c, depth + 1)?;
        if !dims.is_empty() {
            dtype = array_of(c, dims, dtype, 1)?;
        }
        let end = (offset as u64).checked_add(dtype.size as u64);
        if end.is_none_or(|e| e > size as u64) {
            return Err(c.corrupt(format!(
                "compound member {name:?} at offset {offset} (size {}) overflows the {size}-byte compound",
                dtype.size
            )));
        }
        members.push(CompoundMember {
            name,
            offset,
            dtype,
        });
    }
    Ok(TypeClass::Compound { members })
}

/// An array type of `dims` over `base`, its size computed with overflow checks.
fn array_of(c: &Cursor<'_>, dims: Vec<u32>, base: Datatype, version: u8) -> Result<Datatype> {
    let size = dims
        .iter()
        .try_fold(base.size, |a, &d| a.checked_mul(d))
        .ok_or_else(|| c.corrupt("array size overflows 32 bits"))?;
    Ok(Datatype {
        version,
        size,
        class: TypeClass::Array {
            dims,
            base: Box::new(base),
        },
    })
}

/// Enumeration (class 8): base type, names (padded to 8 bytes before version 3), then the
/// values packed in the base type's size.
fn enumeration(c: &mut Cursor<'_>, version: u8, bits: u32, depth: usize) -> Result<TypeClass> {
    let n = (bits & 0xffff) as usize;
    let base = decode(c, depth + 1)?;
    let name_min = if version < 3 { 8 } else { 1 };
    check_count(c, "enum members", n, name_min + base.size as usize)?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        names.push(name(c, version < 3)?);
    }
    let vsize = base.size as usize;
    let mut members = Vec::with_capacity(n);
    for name in names {
        members.push((name, c.bytes(vsize)?.to_vec()));
    }
    Ok(TypeClass::Enum {
        base: Box::new(base),
        members,
    })
}

/// Array (class 10): rank, dimensions, base type; before version 3 also three reserved bytes
/// after the rank and one permutation index per dimension after the dimensions.
///
/// The specification introduces the array class with version 2, yet version-1 array types
/// exist: libhdf5 before 1.8 gave version 2 only to compounds with array members and wrote
/// every other type (the array itself, a vlen of arrays) as version 1, so PyTables files of
/// that time are full of them. Their fields are those of version 2, and libhdf5 reads them
/// that way, taking them as version 2 (a build with strict format checks refuses them
/// instead). The permutation indices were never used by any writer; libhdf5 skips them
/// unread, and so does this.
fn array(c: &mut Cursor<'_>, version: u8, depth: usize) -> Result<TypeClass> {
    let rank = c.u8()? as usize;
    if rank == 0 || rank > MAX_RANK {
        return Err(c.corrupt(format!("array datatype of rank {rank}")));
    }
    let old_fields = version < 3;
    if old_fields {
        c.skip(3)?; // reserved
    }
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        dims.push(c.u32()?);
    }
    if old_fields {
        c.skip(rank * 4)?; // permutation indices
    }
    let base = Box::new(decode(c, depth + 1)?);
    Ok(TypeClass::Array { dims, base })
}

#[cfg(test)]
mod tests {
    //! Version-1 array types (see [`array`]), hand-built in the forms old files hold them.

    use super::super::{Datatype, TypeClass};
    use crate::error::{Error, Result};
    use crate::io::Cursor;

    /// The 8-byte header of a datatype: version, class, class bits, size.
    fn hdr(version: u8, class: u8, bits: u32, size: u32) -> Vec<u8> {
        let mut v = vec![version << 4 | class];
        v.extend_from_slice(&bits.to_le_bytes()[..3]);
        v.extend_from_slice(&size.to_le_bytes());
        v
    }

    /// A little-endian integer type of `size` bytes (version 1, as old files write it).
    fn int(size: u32, signed: bool) -> Vec<u8> {
        let mut v = hdr(1, 0, (signed as u32) << 3, size);
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&(size as u16 * 8).to_le_bytes());
        v
    }

    /// An IEEE little-endian double (version 1).
    fn f64le() -> Vec<u8> {
        let mut v = hdr(1, 1, 0x20 | 63 << 8, 8);
        v.extend_from_slice(&[0, 0, 64, 0, 52, 11, 0, 52]);
        v.extend_from_slice(&1023u32.to_le_bytes());
        v
    }

    /// An array type of `version` with the fields of versions 1 and 2: rank, 3 reserved bytes,
    /// dimensions, permutation indices, base.
    fn array(version: u8, dims: &[u32], perm: &[u32], base: &[u8], base_size: u32) -> Vec<u8> {
        let size = dims.iter().product::<u32>() * base_size;
        let mut v = hdr(version, 10, 0, size);
        v.extend_from_slice(&[dims.len() as u8, 0, 0, 0]);
        for d in dims.iter().chain(perm) {
            v.extend_from_slice(&d.to_le_bytes());
        }
        v.extend_from_slice(base);
        v
    }

    /// Decode `b`, requiring every byte to be used.
    fn parse(b: &[u8]) -> Result<Datatype> {
        let mut c = Cursor::new(b, 0x100, "datatype message");
        let t = Datatype::decode(&mut c)?;
        assert_eq!(c.remaining(), 0, "{t:?}");
        Ok(t)
    }

    #[test]
    fn version_1_array_reads_like_version_2() {
        // Permutation indices are skipped whatever they hold.
        let v1 = array(1, &[2, 3], &[1, 0], &int(4, false), 4);
        let t = parse(&v1).unwrap();
        assert_eq!(t.version, 1);
        assert_eq!(t.size, 24);
        assert_eq!(t.numpy_str(), "array(2x3,<u4)");
        let mut v2 = v1.clone();
        v2[0] = 0x2a;
        assert_eq!(parse(&v2).unwrap().class, t.class);
    }

    #[test]
    fn version_1_arrays_inside_other_types() {
        // A PyTables VLArray of two-element float vectors: a version-1 vlen of a version-1
        // array.
        let mut vlen = hdr(1, 9, 0, 16);
        vlen.extend(array(1, &[2], &[0], &f64le(), 8));
        assert_eq!(parse(&vlen).unwrap().numpy_str(), "vlen(array(2,<f8))");
        // A PyTables table: a version-2 compound (no inline member dimensions) whose array
        // columns are version-1 arrays.
        let mut table = hdr(2, 6, 2, 2 + 24);
        table.extend_from_slice(b"id\0\0\0\0\0\0");
        table.extend_from_slice(&0u32.to_le_bytes());
        table.extend(int(2, true));
        table.extend_from_slice(b"pos\0\0\0\0\0");
        table.extend_from_slice(&2u32.to_le_bytes());
        table.extend(array(1, &[3], &[0], &f64le(), 8));
        let t = parse(&table).unwrap();
        assert_eq!(t.numpy_str(), "{id:<i2@0,pos:array(3,<f8)@2}");
        let TypeClass::Compound { members } = &t.class else {
            panic!("{t:?}")
        };
        assert_eq!(members[1].dtype.version, 1);
        // A version-1 compound, its members with the old inline dimension fields (none
        // here), one of them a version-1 array type.
        let mut old = hdr(1, 6, 1, 6);
        old.extend_from_slice(b"a\0\0\0\0\0\0\0");
        old.extend_from_slice(&0u32.to_le_bytes());
        old.extend_from_slice(&[0; 28]);
        old.extend(array(1, &[3], &[0], &int(2, false), 2));
        assert_eq!(parse(&old).unwrap().numpy_str(), "{a:array(3,<u2)@0}");
        // An array of a compound holding an array, both version 1.
        let mut inner = hdr(2, 6, 1, 8);
        inner.extend_from_slice(b"m\0\0\0\0\0\0\0");
        inner.extend_from_slice(&0u32.to_le_bytes());
        inner.extend(array(1, &[2], &[0], &int(4, true), 4));
        let outer = array(1, &[2], &[0], &inner, 8);
        assert_eq!(
            parse(&outer).unwrap().numpy_str(),
            "array(2,{m:array(2,<i4)@0})"
        );
    }

    #[test]
    fn version_1_arrays_are_checked_as_version_2() {
        // Rank 0 and ranks over the limit stay corrupt.
        for rank in [0u8, 33] {
            let mut v = array(1, &[2], &[0], &int(4, false), 4);
            v[8] = rank;
            assert!(
                matches!(parse(&v), Err(Error::Corrupt { .. })),
                "rank {rank}"
            );
        }
        // The permutation indices are part of the message: without them it is truncated.
        let v = array(1, &[2, 3], &[], &[], 4);
        assert!(matches!(parse(&v), Err(Error::Truncated { .. })));
    }
}
