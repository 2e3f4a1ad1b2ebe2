//! Datatype message (0x0003), versions 1-5, every class (spec "IV.A.2.d").
//!
//! A datatype message starts with 8 bytes: class (low nibble) and version (high nibble) in one
//! byte, 24 class-specific bits, and the element size as a 4-byte integer. Class-specific
//! properties follow; the classes that are built from other types (compound, enum,
//! variable-length, array, complex) embed complete datatype messages of their members or base
//! type, recursively. The decoder ([`Datatype::decode`]) bounds that recursion with
//! [`limits::MAX_TYPE_DEPTH`](crate::format::limits::MAX_TYPE_DEPTH) and checks every count
//! against the bytes left in the message, so a hostile message costs at most linear work.
//!
//! Byte order is a property of each atomic type, never of the whole: a compound may mix little-
//! and big-endian members, and an array or enum takes the order of its base type.
//!
//! [`Datatype::numpy_str`] renders the type the way the fixture manifest writes numpy/h5py
//! dtypes (module `numpy`), so tests can compare the two strings directly.

mod decode;
mod numpy;
#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// Byte order of a numeric type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
    /// VAX mixed order (floats only; reported, data served as stored).
    Vax,
}

/// String padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StringPad {
    NullTerminate,
    NullPad,
    SpacePad,
}

/// Character set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CharSet {
    Ascii,
    Utf8,
}

/// Reference kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceKind {
    /// Object reference (an address), class version 1.
    Object,
    /// Dataset region reference (global heap ID), class version 1.
    Region,
    /// HDF5 1.12+ reference (class version 4): object, region or attribute, maybe external.
    V4 { ref_type: u8 },
}

/// `ref_type` of a [`ReferenceKind::V4`] object reference (`H5R_OBJECT2`).
pub const REF_V4_OBJECT: u8 = 2;
/// `ref_type` of a [`ReferenceKind::V4`] dataset region reference (`H5R_DATASET_REGION2`).
pub const REF_V4_REGION: u8 = 3;
/// `ref_type` of a [`ReferenceKind::V4`] attribute reference (`H5R_ATTR`).
pub const REF_V4_ATTRIBUTE: u8 = 4;

/// A compound member.
#[derive(Clone, Debug, PartialEq)]
pub struct CompoundMember {
    pub name: String,
    /// Byte offset of the member within the compound element.
    pub offset: u32,
    pub dtype: Datatype,
}

/// Kind of variable-length type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarLenKind {
    Sequence,
    String { pad: StringPad, charset: CharSet },
}

/// Datatype classes with their properties.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeClass {
    FixedPoint {
        order: ByteOrder,
        signed: bool,
        bit_offset: u16,
        precision: u16,
    },
    FloatingPoint {
        order: ByteOrder,
        /// Bit position of the sign bit.
        sign_location: u8,
        bit_offset: u16,
        precision: u16,
        exponent_location: u8,
        exponent_size: u8,
        mantissa_location: u8,
        mantissa_size: u8,
        exponent_bias: u32,
    },
    Time {
        order: ByteOrder,
        precision: u16,
    },
    String {
        pad: StringPad,
        charset: CharSet,
    },
    Bitfield {
        order: ByteOrder,
        bit_offset: u16,
        precision: u16,
    },
    Opaque {
        tag: String,
    },
    Compound {
        members: Vec<CompoundMember>,
    },
    Reference {
        kind: ReferenceKind,
    },
    Enum {
        base: Box<Datatype>,
        /// (name, raw value bytes in the base type's representation).
        members: Vec<(String, Vec<u8>)>,
    },
    VarLen {
        kind: VarLenKind,
        base: Box<Datatype>,
    },
    Array {
        dims: Vec<u32>,
        base: Box<Datatype>,
    },
    /// HDF5 2.0 complex class (11): two floats of `base`, real then imaginary.
    Complex {
        base: Box<Datatype>,
    },
}

/// A datatype (spec "IV.A.2.d"): class, properties and the size of one element in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Datatype {
    /// Datatype message version (1-5).
    pub version: u8,
    /// Size of one element in bytes.
    pub size: u32,
    pub class: TypeClass,
}

impl Datatype {
    /// An integer of `size` bytes using all its bits (for tests).
    #[cfg(test)]
    pub(crate) fn test_int(size: u32, signed: bool, order: ByteOrder) -> Datatype {
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

    /// An IEEE float of 2, 4 or 8 bytes (for tests).
    #[cfg(test)]
    pub(crate) fn test_float(size: u32, order: ByteOrder) -> Datatype {
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

    /// Decode a datatype message body. Trailing bytes (padding of v1 object headers) are
    /// ignored. `sizes` is unused: every width the message needs is stored in it.
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<Datatype> {
        let _ = sizes;
        let mut c = Cursor::new(data, addr, "datatype message");
        decode::decode(&mut c, 0)
    }

    /// Decode one datatype from `c`, consuming exactly its encoded bytes (for structures that
    /// embed a datatype without storing its length).
    pub fn decode(c: &mut Cursor<'_>) -> Result<Datatype> {
        decode::decode(c, 0)
    }

    /// The type written the way h5py/numpy show it (see the fixture manifest's `dtype`):
    /// numeric types as numpy's `dtype.str` (`<f4`, `>i2`, `|u1`, `<c16`), fixed strings
    /// `|S10`, variable-length strings `vlen-str`, other vlen `vlen(<i4)`, enums `enum(<i2)`
    /// (h5py's booleans too), references `ref(object)`/`ref(region)`, opaque `|V8`, bitfields
    /// as unsigned integers (`<u2`), arrays `array(3x4,<f4)`, compounds
    /// `{name:<i4@0,other:<f8@8}`.
    pub fn numpy_str(&self) -> String {
        let mut s = String::new();
        numpy::write(self, &mut s);
        s
    }

    /// True if elements have a fixed size and the raw bytes are the value (no vlen anywhere).
    pub fn is_fixed_size(&self) -> bool {
        match &self.class {
            TypeClass::VarLen { .. } => false,
            TypeClass::Compound { members } => members.iter().all(|m| m.dtype.is_fixed_size()),
            TypeClass::Enum { base, .. }
            | TypeClass::Array { base, .. }
            | TypeClass::Complex { base } => base.is_fixed_size(),
            _ => true,
        }
    }

    /// Size of one element in bytes as stored in the file (for variable-length types, the size
    /// of the heap reference, not of the data it points to).
    pub fn element_size(&self) -> u32 {
        self.size
    }

    /// Byte order of the numbers in this type: the type's own for numeric classes, the base
    /// type's for enums, arrays and complex numbers, `None` where it has no meaning (strings,
    /// opaque, references, variable-length) or differs between compound members.
    pub fn byte_order(&self) -> Option<ByteOrder> {
        match &self.class {
            TypeClass::FixedPoint { order, .. }
            | TypeClass::FloatingPoint { order, .. }
            | TypeClass::Time { order, .. }
            | TypeClass::Bitfield { order, .. } => Some(*order),
            TypeClass::Enum { base, .. }
            | TypeClass::Array { base, .. }
            | TypeClass::Complex { base } => base.byte_order(),
            TypeClass::Compound { members } => {
                let mut orders = members.iter().map(|m| m.dtype.byte_order());
                let first = orders.next().flatten()?;
                orders.all(|o| o == Some(first)).then_some(first)
            }
            TypeClass::String { .. }
            | TypeClass::Opaque { .. }
            | TypeClass::Reference { .. }
            | TypeClass::VarLen { .. } => None,
        }
    }
}
