//! The ENVI view: a `NAME.hdr` text header next to the dataset file `NAME`, so that ENVI, GDAL
//! and other remote-sensing tools open the dataset's bytes as a raster in place.
//!
//! The header says: `samples`, `lines`, `bands`, `header offset = 0` (the data file is the raw
//! dataset file), `file type = ENVI Standard`, the `data type` code, `interleave = bsq` and
//! `byte order` (0 little, 1 big), describing the bytes actually served, after any byte-order
//! conversion.
//!
//! Dimension mapping (C order, so the last dimension varies fastest, like ENVI samples):
//! - 1-D `(n)`: samples n, lines 1, bands 1;
//! - 2-D `(rows, cols)`: lines rows, samples cols, bands 1;
//! - 3-D `(a, b, c)`: bands a, lines b, samples c, band-sequential (`bsq`).
//!
//! Data type codes (bitfields count as unsigned integers): 1 u8, 2 i16, 3 i32, 4 f32, 5 f64, 6 complex of two f32, 9 complex of two
//! f64, 12 u16, 13 u32, 14 i64, 15 u64. Types without a code get no header, with the reason:
//! signed 8-bit integers (ENVI has none; serving them as code 1 would turn -1 into 255), half
//! floats, integers that do not read as whole machine integers (value above bit 0, signed in
//! fewer bits than stored), strings, compounds other than h5py's `r`/`i` complex pairs, enums, and so on. So do
//! scalars, datasets of 4 or more dimensions and empty ones (ENVI needs every extent >= 1).

use crate::error::{Error, Result};
use crate::format::messages::datatype::{ByteOrder, CompoundMember, Datatype, TypeClass};

fn refuse(detail: impl std::fmt::Display) -> Error {
    Error::unsupported("envi view", detail)
}

/// ENVI's data type code and byte order of elements of `t` (as served).
pub fn data_type(t: &Datatype) -> Result<(u8, ByteOrder)> {
    let float_order = |t: &Datatype| match t.class {
        TypeClass::FloatingPoint { order, .. } if matches!(t.size, 4 | 8) => Some(order),
        _ => None,
    };
    if !super::npy::integer_as_is(t) {
        return Err(refuse(
            "integer at a bit offset or signed in fewer bits than stored",
        ));
    }
    let found = match &t.class {
        // Bitfields are unsigned integers to every reader (h5py reads them as such).
        TypeClass::FixedPoint { order, .. } | TypeClass::Bitfield { order, .. } => {
            let signed = match t.class {
                TypeClass::FixedPoint { signed, .. } => signed,
                _ => false,
            };
            let code = match (signed, t.size) {
                (false, 1) => Some(1),
                (true, 2) => Some(2),
                (true, 4) => Some(3),
                (false, 2) => Some(12),
                (false, 4) => Some(13),
                (true, 8) => Some(14),
                (false, 8) => Some(15),
                (true, 1) => return Err(refuse("ENVI has no signed 8-bit data type")),
                _ => None,
            };
            code.map(|c| (c, *order))
        }
        TypeClass::FloatingPoint { order, .. } => match t.size {
            4 => Some((4, *order)),
            8 => Some((5, *order)),
            _ => None,
        },
        TypeClass::Complex { base } => {
            float_order(base).map(|o| (if base.size == 4 { 6 } else { 9 }, o))
        }
        TypeClass::Compound { members } => complex_pair(t, members, float_order),
        _ => None,
    };
    match found {
        Some((_, ByteOrder::Vax)) => Err(refuse("VAX-ordered floats")),
        Some(x) => Ok(x),
        None => Err(refuse(format!("no ENVI data type for {}", t.numpy_str()))),
    }
}

/// h5py's `r`/`i` compound of two packed floats of one order: ENVI complex.
fn complex_pair(
    t: &Datatype,
    members: &[CompoundMember],
    float_order: impl Fn(&Datatype) -> Option<ByteOrder>,
) -> Option<(u8, ByteOrder)> {
    let [re, im] = members else { return None };
    let order = float_order(&re.dtype)?;
    let part = re.dtype.size;
    let ok = re.name == "r"
        && im.name == "i"
        && float_order(&im.dtype) == Some(order)
        && im.dtype.size == part
        && re.offset == 0
        && im.offset == part
        && t.size == 2 * part;
    ok.then_some((if part == 4 { 6 } else { 9 }, order))
}

/// (samples, lines, bands) of a dataset of `shape`, per the mapping in the module docs.
pub fn extents(shape: &[u64]) -> Result<(u64, u64, u64)> {
    let e = match *shape {
        [n] => (n, 1, 1),
        [rows, cols] => (cols, rows, 1),
        [a, b, c] => (c, b, a),
        [] => return Err(refuse("scalar dataset")),
        _ => {
            return Err(refuse(format!(
                "{}-D dataset (ENVI takes 1 to 3)",
                shape.len()
            )))
        }
    };
    if e.0 == 0 || e.1 == 0 || e.2 == 0 {
        return Err(refuse("empty dataset"));
    }
    Ok(e)
}

/// The header text for a dataset of `shape` with elements of `t` (as served).
pub fn header(t: &Datatype, shape: &[u64]) -> Result<String> {
    let (samples, lines, bands) = extents(shape)?;
    let (code, order) = data_type(t)?;
    let order = match order {
        ByteOrder::Big if t.size > 1 => 1,
        _ => 0,
    };
    Ok(format!(
        "ENVI\ndescription = {{h5mount dataset view}}\nsamples = {samples}\nlines = {lines}\n\
         bands = {bands}\nheader offset = 0\nfile type = ENVI Standard\ndata type = {code}\n\
         interleave = bsq\nbyte order = {order}\n"
    ))
}
