//! The canonical dtype string of the fixture manifest, written from a decoded [`Datatype`].
//!
//! The manifest renders what h5py returns for each HDF5 type: numeric types as numpy's
//! `dtype.str` (byte order character, kind, item size; numpy writes `|` instead of `<`/`>` for
//! one-byte items), and the types numpy cannot express natively through h5py's check functions
//! (`enum(...)`, `vlen-str`, `vlen(...)`, `ref(...)`). Compounds list `name:type@offset` in
//! member order, except the two-float `r`/`i` compounds that h5py reads as numpy complex
//! numbers (that is how numpy complex values are stored before HDF5 2.0): those are `<c8`,
//! `>c16`, like the complex class 11 of HDF5 2.0. An array of arrays stays nested (`array(2,array(3,<f4))`), as h5py's dtype
//! for it is a subarray of a subarray. Time types have no numpy equivalent through h5py; they
//! are written `time(<i8)` (order and size of the stored integer).

use std::fmt::Write;

use super::{
    ByteOrder, CompoundMember, Datatype, ReferenceKind, TypeClass, VarLenKind, REF_V4_ATTRIBUTE,
    REF_V4_OBJECT, REF_V4_REGION,
};

/// Append the canonical string of `t` to `out`.
pub(super) fn write(t: &Datatype, out: &mut String) {
    let size = t.size;
    match &t.class {
        TypeClass::FixedPoint { order, signed, .. } => {
            let kind = if *signed { 'i' } else { 'u' };
            numeric(out, *order, kind, size);
        }
        TypeClass::FloatingPoint { order, .. } => numeric(out, *order, 'f', size),
        TypeClass::Time { order, .. } => {
            out.push_str("time(");
            numeric(out, *order, 'i', size);
            out.push(')');
        }
        // h5py maps bitfields to unsigned integers of the same size and order.
        TypeClass::Bitfield { order, .. } => numeric(out, *order, 'u', size),
        TypeClass::String { .. } => {
            let _ = write!(out, "|S{size}");
        }
        TypeClass::Opaque { .. } => {
            let _ = write!(out, "|V{size}");
        }
        TypeClass::Compound { members } if h5py_complex(members).is_some() => {
            if let Some((order, part)) = h5py_complex(members) {
                numeric(out, order, 'c', 2 * part);
            }
        }
        TypeClass::Compound { members } => {
            out.push('{');
            for (i, m) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&m.name);
                out.push(':');
                write(&m.dtype, out);
                let _ = write!(out, "@{}", m.offset);
            }
            out.push('}');
        }
        TypeClass::Reference { kind } => out.push_str(match kind {
            ReferenceKind::Object
            | ReferenceKind::V4 {
                ref_type: REF_V4_OBJECT,
            } => "ref(object)",
            ReferenceKind::Region
            | ReferenceKind::V4 {
                ref_type: REF_V4_REGION,
            } => "ref(region)",
            ReferenceKind::V4 {
                ref_type: REF_V4_ATTRIBUTE,
            } => "ref(attribute)",
            ReferenceKind::V4 { .. } => "ref(unknown)",
        }),
        TypeClass::Enum { base, .. } => {
            out.push_str("enum(");
            write(base, out);
            out.push(')');
        }
        TypeClass::VarLen { kind, base } => match kind {
            VarLenKind::String { .. } => out.push_str("vlen-str"),
            VarLenKind::Sequence => {
                out.push_str("vlen(");
                write(base, out);
                out.push(')');
            }
        },
        TypeClass::Array { dims, base } => {
            out.push_str("array(");
            for (i, d) in dims.iter().enumerate() {
                if i > 0 {
                    out.push('x');
                }
                let _ = write!(out, "{d}");
            }
            out.push(',');
            write(base, out);
            out.push(')');
        }
        TypeClass::Complex { base } => {
            let order = base.byte_order().unwrap_or(ByteOrder::Little);
            numeric(out, order, 'c', size);
        }
    }
}

/// h5py's reading of a compound as a numpy complex number: exactly two members named `r` and
/// `i` (its default `complex_names`), in that order, both floats of the same byte order and of
/// 4, 8 or 16 bytes (numpy has no complex of two halves). Returns the order and the part size.
fn h5py_complex(members: &[CompoundMember]) -> Option<(ByteOrder, u32)> {
    let [re, im] = members else { return None };
    let float = |m: &CompoundMember| match m.dtype.class {
        TypeClass::FloatingPoint { order, .. } => Some((order, m.dtype.size)),
        _ => None,
    };
    let (order, size) = float(re)?;
    let same = float(im)? == (order, size);
    (re.name == "r" && im.name == "i" && same && matches!(size, 4 | 8 | 16))
        .then_some((order, size))
}

/// numpy's `dtype.str` of a number: order character, kind, size in bytes.
fn numeric(out: &mut String, order: ByteOrder, kind: char, size: u32) {
    let order = match order {
        _ if size == 1 => '|',
        ByteOrder::Big => '>',
        // numpy has no VAX order; the bytes are served as stored, the string says little.
        ByteOrder::Little | ByteOrder::Vax => '<',
    };
    let _ = write!(out, "{order}{kind}{size}");
}
