//! The canonical dtype string of the fixture manifest, written from a decoded [`Datatype`].
//!
//! The manifest renders what h5py returns for each HDF5 type: numeric types as numpy's
//! `dtype.str` (byte order character, kind, item size; numpy writes `|` instead of `<`/`>` for
//! one-byte items), and the types numpy cannot express natively through h5py's check functions
//! (`enum(...)`, `vlen-str`, `vlen(...)`, `ref(...)`). Compounds list `name:type@offset` in
//! member order. An array of arrays stays nested (`array(2,array(3,<f4))`), as h5py's dtype
//! for it is a subarray of a subarray. Time types have no numpy equivalent through h5py; they
//! are written `time(<i8)` (order and size of the stored integer).

use std::fmt::Write;

use super::{
    ByteOrder, Datatype, ReferenceKind, TypeClass, VarLenKind, REF_V4_ATTRIBUTE, REF_V4_OBJECT,
    REF_V4_REGION,
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
