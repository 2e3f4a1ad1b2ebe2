//! N-bit filter (id 5, `H5Pset_nbit`): stores only the significant bits of each value.
//!
//! Client data, as libhdf5's `set_local` writes it: `cd[0]` = number of values, `cd[1]` =
//! 1 when the data needs no packing (stored as is), `cd[2]` = number of elements in the
//! chunk, then a description of the datatype starting at `cd[3]`, by class code:
//! * 1 atomic (integer or float): size, byte order (0 LE, 1 BE), precision, bit offset;
//! * 2 array: total size, then the base type's description;
//! * 3 compound: total size, member count, then per member its byte offset and description;
//! * 4 no-op (a type nbit cannot shrink, such as a string): size.
//!
//! The packed stream is continuous and most significant bit first: an atomic value
//! contributes its `precision` bits, a no-op value all its bytes, array and compound values
//! their parts in order. Unpacked bits go back to `[offset, offset + precision)`; the other
//! (padding) bits are zero.

use super::bits::{unpack_atomic, BitReader};
use super::Stage;

/// Nesting limit for array/compound descriptions (libhdf5 types nest far less deeply).
const MAX_DEPTH: usize = 32;

#[derive(Debug)]
enum NType {
    Atomic {
        size: usize,
        big_endian: bool,
        precision: usize,
        offset: usize,
    },
    Array {
        size: usize,
        base: Box<NType>,
    },
    Compound {
        size: usize,
        members: Vec<(usize, NType)>,
    },
    NoOp {
        size: usize,
    },
}

impl NType {
    fn size(&self) -> usize {
        match self {
            NType::Atomic { size, .. }
            | NType::Array { size, .. }
            | NType::Compound { size, .. }
            | NType::NoOp { size } => *size,
        }
    }

    fn parse(cd: &[u32], at: &mut usize, depth: usize) -> Result<NType, String> {
        if depth > MAX_DEPTH {
            return Err("datatype description nests too deeply".into());
        }
        let mut next = || -> Result<usize, String> {
            let v = *cd
                .get(*at)
                .ok_or_else(|| format!("client data ends at value {}", *at))?;
            *at += 1;
            Ok(v as usize)
        };
        let class = next()?;
        let size = next()?;
        if size == 0 {
            return Err("datatype of size 0".into());
        }
        match class {
            1 => {
                let big_endian = next()? == 1;
                let precision = next()?;
                let offset = next()?;
                if precision == 0 || offset.checked_add(precision).is_none_or(|e| e > size * 8) {
                    return Err(format!(
                        "precision {precision} at offset {offset} does not fit {size} bytes"
                    ));
                }
                Ok(NType::Atomic {
                    size,
                    big_endian,
                    precision,
                    offset,
                })
            }
            2 => {
                let base = NType::parse(cd, at, depth + 1)?;
                if size % base.size() != 0 {
                    return Err(format!("array of {size} bytes is not whole base elements"));
                }
                Ok(NType::Array {
                    size,
                    base: Box::new(base),
                })
            }
            3 => {
                let n = next()?;
                // Each member takes at least 3 values: a count beyond the data is corrupt.
                if n > cd.len() {
                    return Err(format!("{n} compound members"));
                }
                let mut members = Vec::with_capacity(n);
                for _ in 0..n {
                    let off = cd.get(*at).copied().ok_or("member offset missing")? as usize;
                    *at += 1;
                    let t = NType::parse(cd, at, depth + 1)?;
                    if off.checked_add(t.size()).is_none_or(|e| e > size) {
                        return Err(format!("member at {off} overruns the {size}-byte compound"));
                    }
                    members.push((off, t));
                }
                Ok(NType::Compound { size, members })
            }
            4 => Ok(NType::NoOp { size }),
            c => Err(format!("unknown datatype class code {c}")),
        }
    }

    fn unpack(&self, bits: &mut BitReader, out: &mut [u8]) -> Option<()> {
        match self {
            NType::Atomic {
                big_endian,
                precision,
                offset,
                ..
            } => unpack_atomic(bits, out, *precision, *offset, *big_endian),
            NType::Array { base, .. } => {
                for part in out.chunks_exact_mut(base.size()) {
                    base.unpack(bits, part)?;
                }
                Some(())
            }
            NType::Compound { members, .. } => {
                for (off, t) in members {
                    t.unpack(bits, out.get_mut(*off..*off + t.size())?)?;
                }
                Some(())
            }
            NType::NoOp { .. } => {
                for b in out.iter_mut() {
                    *b = bits.read(8)?;
                }
                Some(())
            }
        }
    }
}

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let cd = stage.cd;
    if cd.len() < 5 {
        return Err(format!("{} client data values, need at least 5", cd.len()));
    }
    if cd[1] != 0 {
        return Ok(input.to_vec());
    }
    let mut at = 3;
    let ty = NType::parse(cd, &mut at, 0)?;
    let total = (cd[2] as usize)
        .checked_mul(ty.size())
        .filter(|&t| t <= stage.limit)
        .ok_or_else(|| format!("{} elements exceed the chunk size", cd[2]))?;
    let mut out = vec![0u8; total];
    let mut bits = BitReader::new(input);
    for elem in out.chunks_exact_mut(ty.size()) {
        ty.unpack(&mut bits, elem).ok_or("packed data truncated")?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compound_of_atomic_and_noop() {
        // Compound of 3 bytes: u16 with 4 bits at offset 4, then one no-op byte.
        let cd = [0, 0, 2, 3, 3, 2, 0, 1, 2, 0, 4, 4, 2, 4, 1];
        // Element 0: nibble 0xA, byte 0x5C; element 1: nibble 0x3, byte 0xFF.
        // Stream: 1010 01011100 0011 11111111 -> a5 c3 ff
        let stage = Stage { cd: &cd, limit: 64 };
        let out = decode(&[0xa5, 0xc3, 0xff], &stage).unwrap();
        assert_eq!(out, [0xa0, 0x00, 0x5c, 0x30, 0x00, 0xff]);
    }

    #[test]
    fn bad_descriptions_are_errors() {
        let stage = |cd: &'static [u32]| Stage { cd, limit: 64 };
        assert!(decode(&[0; 8], &stage(&[0, 0, 2, 1, 2, 0, 17, 0])).is_err());
        assert!(decode(&[0; 8], &stage(&[0, 0, 2, 9, 2])).is_err());
        assert!(decode(&[0; 8], &stage(&[0, 0, 99, 1, 2, 0, 12, 0])).is_err());
        assert!(decode(&[0; 1], &stage(&[0, 0, 4, 1, 2, 0, 12, 0])).is_err());
    }
}
