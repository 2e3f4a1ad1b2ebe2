//! The `.npy` view: a NumPy array file (format 1.0, or 2.0/3.0 when needed) made of a header
//! generated from the datatype and shape, followed by the dataset's byte image.
//!
//! NPY layout (numpy `lib.format`): the magic `\x93NUMPY`, major and minor version bytes, the
//! header length (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), then the header: a
//! Python dict literal `{'descr': ..., 'fortran_order': False, 'shape': (...), }` padded with
//! spaces and ended by `\n` so that the data starts at a multiple of 64 bytes (numpy's
//! alignment for memory mapping). Version 3.0 is used when the header has non-ASCII text (field
//! names; 3.0 encodes the header as UTF-8, 1.0/2.0 as Latin-1), 2.0 when it is longer than
//! 65535 bytes, 1.0 otherwise.
//!
//! `descr` describes the bytes served (after any byte-order conversion): numbers as numpy's
//! type string (`<f4`, `>i2`, `|u1`), h5py's booleans `|b1`, enums as their base, fixed strings
//! `|S10`, opaque data and references as `|V8` (raw bytes; numpy has no reference type),
//! complex numbers (HDF5 2.0 class or h5py's `r`/`i` compounds) `<c8`/`<c16`. A top-level array
//! type adds its dimensions to the shape, as numpy itself does when reading it; a compound is a
//! list of `(name, descr[, shape])` with unnamed `('', '|Vn')` fields for padding (numpy's own
//! form; `numpy.load` does not accept the dict form with `offsets`). Types numpy cannot hold byte for byte
//! (variable-length data, non-IEEE floats, VAX order, odd integer widths) get no view, with the
//! reason.

use std::fmt::Write;

use crate::error::{Error, Result};
use crate::format::messages::datatype::{ByteOrder, CompoundMember, Datatype, TypeClass};
use crate::model::value::is_h5py_bool;

/// Alignment of the data start (numpy `ARRAY_ALIGN`).
const ALIGN: usize = 64;
/// The magic string of every NPY file.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

fn refuse(detail: impl std::fmt::Display) -> Error {
    Error::unsupported("npy view", detail)
}

/// The complete NPY header (magic to the `\n` before the data) for elements of `t` (as served)
/// and dataset `shape`. Its length is a multiple of 64.
pub fn header(t: &Datatype, shape: &[u64]) -> Result<Vec<u8>> {
    let (descr, sub) = descr(t)?;
    let mut dims = shape.to_vec();
    dims.extend(sub);
    let mut text = format!(
        "{{'descr': {descr}, 'fortran_order': False, 'shape': {}, }}",
        tuple(&dims)
    );
    let (major, len_bytes) = if !text.is_ascii() {
        (3u8, 4usize)
    } else if text.len() + 1 + 10 > u16::MAX as usize {
        (2, 4)
    } else {
        (1, 2)
    };
    let preamble = MAGIC.len() + 2 + len_bytes;
    let pad = (ALIGN - (preamble + text.len() + 1) % ALIGN) % ALIGN;
    text.extend(std::iter::repeat_n(' ', pad));
    text.push('\n');
    let hlen = u32::try_from(text.len()).map_err(|_| refuse("header longer than 4 GiB"))?;
    let mut out = Vec::with_capacity(preamble + text.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    if len_bytes == 2 {
        // Checked above: the 1.0 header is shorter than 65536 bytes.
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&hlen.to_le_bytes());
    }
    out.extend_from_slice(text.as_bytes());
    Ok(out)
}

/// A Python tuple of integers: `()`, `(5,)`, `(2, 3)`.
fn tuple(dims: &[u64]) -> String {
    match dims {
        [] => "()".into(),
        [d] => format!("({d},)"),
        _ => {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// A Python string literal of `s` (single quotes; controls escaped; other text as is).
fn py_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

fn order_char(order: ByteOrder, size: u32) -> Result<char> {
    match order {
        _ if size == 1 => Ok('|'),
        ByteOrder::Little => Ok('<'),
        ByteOrder::Big => Ok('>'),
        ByteOrder::Vax => Err(refuse("VAX-ordered floats have no numpy type")),
    }
}

/// numpy's string for a number of `kind` and `size` bytes, as a Python literal.
fn number(order: ByteOrder, kind: char, size: u32) -> Result<String> {
    Ok(format!("'{}{kind}{size}'", order_char(order, size)?))
}

/// Does an integer of type `t` read correctly as a whole machine integer of its size? Not when
/// its value starts above bit 0 (libhdf5 shifts it on read; numpy would not), nor when it is
/// signed with fewer bits than stored (the sign would not be extended). Unsigned values in the
/// low bits read as is: libhdf5 stores the padding bits as zeros by default.
pub fn integer_as_is(t: &Datatype) -> bool {
    match t.class {
        TypeClass::FixedPoint {
            bit_offset,
            precision,
            signed,
            ..
        } => bit_offset == 0 && (!signed || precision as u32 == t.size * 8),
        TypeClass::Bitfield { bit_offset, .. } => bit_offset == 0,
        _ => true,
    }
}

/// Is `t` an IEEE binary16/32/64 float (the only floats numpy reads byte for byte)?
fn ieee_float(t: &Datatype) -> Option<ByteOrder> {
    match t.class {
        TypeClass::FloatingPoint {
            order,
            exponent_size,
            mantissa_size,
            bit_offset: 0,
            ..
        } => {
            let ok = matches!(
                (t.size, exponent_size, mantissa_size),
                (2, 5, 10) | (4, 8, 23) | (8, 11, 52)
            );
            ok.then_some(order)
        }
        _ => None,
    }
}

/// The `descr` of `t` as a Python literal, and the subarray dimensions `t` adds.
pub fn descr(t: &Datatype) -> Result<(String, Vec<u64>)> {
    let size = t.size;
    let plain = |s: String| Ok((s, Vec::new()));
    match &t.class {
        TypeClass::FixedPoint { .. } | TypeClass::Bitfield { .. } if !integer_as_is(t) => {
            Err(refuse(format!(
                "{}-bit integer at bit offset > 0 or signed in fewer bits than stored",
                size * 8
            )))
        }
        TypeClass::FixedPoint { order, signed, .. } if matches!(size, 1 | 2 | 4 | 8) => {
            plain(number(*order, if *signed { 'i' } else { 'u' }, size)?)
        }
        TypeClass::Time { order, .. } | TypeClass::Bitfield { order, .. }
            if matches!(size, 1 | 2 | 4 | 8) =>
        {
            let kind = if matches!(t.class, TypeClass::Time { .. }) {
                'i'
            } else {
                'u'
            };
            plain(number(*order, kind, size)?)
        }
        TypeClass::FixedPoint { .. } | TypeClass::Time { .. } | TypeClass::Bitfield { .. } => {
            Err(refuse(format!("{size}-byte integers have no numpy type")))
        }
        TypeClass::FloatingPoint { .. } => match ieee_float(t) {
            Some(order) => plain(number(order, 'f', size)?),
            None => Err(refuse(format!(
                "{size}-byte float is not IEEE half/single/double"
            ))),
        },
        TypeClass::String { .. } | TypeClass::Opaque { .. } | TypeClass::Reference { .. }
            if size == 0 =>
        {
            Err(refuse("zero-size elements"))
        }
        TypeClass::String { .. } => plain(format!("'|S{size}'")),
        TypeClass::Opaque { .. } | TypeClass::Reference { .. } => plain(format!("'|V{size}'")),
        TypeClass::Enum { .. } if is_h5py_bool(t) => plain("'|b1'".into()),
        TypeClass::Enum { base, .. } => descr(base),
        TypeClass::Complex { base } => match ieee_float(base) {
            Some(order) if matches!(base.size, 4 | 8) => plain(number(order, 'c', size)?),
            _ => Err(refuse("complex numbers of non-IEEE single/double parts")),
        },
        TypeClass::Compound { members } => {
            if let Some(order) = h5py_complex(t, members) {
                return plain(number(order, 'c', size)?);
            }
            plain(compound(t, members)?)
        }
        TypeClass::Array { dims, base } => {
            let (inner, sub) = descr(base)?;
            let mut all: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
            all.extend(sub);
            Ok((inner, all))
        }
        TypeClass::VarLen { .. } => Err(refuse("variable-length data has no fixed-size image")),
    }
}

/// h5py's complex compound: members `r` then `i`, IEEE floats of 4 or 8 bytes, packed.
fn h5py_complex(t: &Datatype, members: &[CompoundMember]) -> Option<ByteOrder> {
    let [re, im] = members else { return None };
    let (ro, io) = (ieee_float(&re.dtype)?, ieee_float(&im.dtype)?);
    let part = re.dtype.size;
    let ok = re.name == "r"
        && im.name == "i"
        && ro == io
        && im.dtype.size == part
        && matches!(part, 4 | 8)
        && re.offset == 0
        && im.offset == part
        && t.size == 2 * part;
    ok.then_some(ro)
}

/// A compound's descr: numpy's list form, `[(name, descr[, shape]), ...]`, with an unnamed
/// `('', '|Vn')` field for each gap (what numpy itself writes for a padded structure, and the
/// only way `numpy.load` accepts explicit offsets: it rebuilds offsets by adding item sizes).
/// Members must therefore be in ascending, non-overlapping order, as every known writer
/// stores them; others are refused.
fn compound(t: &Datatype, members: &[CompoundMember]) -> Result<String> {
    if members.is_empty() {
        return Err(refuse("compound without members"));
    }
    let mut s = String::from("[");
    let mut next = 0u64;
    for m in members {
        let start = m.offset as u64;
        if start < next {
            return Err(refuse(format!(
                "member {:?} overlaps or is out of order",
                m.name
            )));
        }
        if start > next {
            let _ = write!(s, "('', '|V{}'), ", start - next);
        }
        let (f, sub) = descr(&m.dtype)?;
        let _ = match sub.as_slice() {
            [] => write!(s, "({}, {f}), ", py_str(&m.name)),
            _ => write!(s, "({}, {f}, {}), ", py_str(&m.name), tuple(&sub)),
        };
        next = start + m.dtype.size as u64;
    }
    let size = t.size as u64;
    if next > size {
        return Err(refuse("compound members end past the element"));
    }
    if size > next {
        let _ = write!(s, "('', '|V{}'), ", size - next);
    }
    s.push(']');
    Ok(s)
}
