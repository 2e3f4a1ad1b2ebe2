//! A little-endian reader over a byte slice that knows where the slice lives in the file.
//!
//! All HDF5 integers are little-endian. Addresses ("offsets") and lengths have per-file widths
//! given by the superblock; they travel as one small `Copy` struct, [`Sizes`]. Every read is
//! bounds-checked and returns [`Error::Truncated`] naming the structure being decoded.

use crate::error::{Error, Result};

/// The undefined address: all bits set, whatever the width of offsets. Readers normalise it to
/// `u64::MAX` so callers compare with one constant.
pub const UNDEFINED_ADDR: u64 = u64::MAX;

/// Widths of addresses and lengths, from the superblock ("Size of Offsets", "Size of Lengths").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Bytes in an address: 2, 4 or 8.
    pub offset: u8,
    /// Bytes in a length: 2, 4 or 8.
    pub length: u8,
}

impl Sizes {
    /// The widths every file written by libhdf5 on a 64-bit machine uses.
    pub const DEFAULT: Sizes = Sizes {
        offset: 8,
        length: 8,
    };
}

/// Bounds-checked little-endian reader.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    addr: u64,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    /// A cursor over `data`, which was read from file address `addr` and holds a `what`.
    pub fn new(data: &'a [u8], addr: u64, what: &'static str) -> Self {
        Cursor {
            data,
            pos: 0,
            addr,
            what,
        }
    }

    /// Name of the structure being decoded, for error messages.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// Current position within the slice.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// File address of the current position.
    pub fn addr(&self) -> u64 {
        self.addr.wrapping_add(self.pos as u64)
    }

    /// File address of the start of the slice.
    pub fn start_addr(&self) -> u64 {
        self.addr
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The whole underlying slice.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The bytes not yet consumed.
    pub fn rest(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    /// Move to an absolute position within the slice.
    pub fn seek(&mut self, pos: usize) -> Result<()> {
        if pos > self.data.len() {
            return Err(self.truncated_at(pos, 0));
        }
        self.pos = pos;
        Ok(())
    }

    /// Skip `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(|_| ())
    }

    /// Advance to the next multiple of `align` bytes, counted from the start of the slice.
    pub fn align(&mut self, align: usize) -> Result<()> {
        let rem = self.pos % align;
        if rem != 0 {
            self.skip(align - rem)?;
        }
        Ok(())
    }

    /// An error naming this structure, the current position and the bytes left there.
    pub fn truncated(&self) -> Error {
        self.truncated_at(self.pos, 1)
    }

    /// An error for `need` bytes wanted at `pos` of this structure.
    fn truncated_at(&self, pos: usize, need: usize) -> Error {
        Error::Truncated {
            what: self.what,
            addr: self.addr,
            offset: pos as u64,
            need: need as u64,
            have: self.data.len().saturating_sub(pos) as u64,
        }
    }

    /// A corruption error naming this structure.
    pub fn corrupt(&self, detail: impl std::fmt::Display) -> Error {
        Error::corrupt(self.what, self.addr, detail)
    }

    /// Take the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or_else(|| self.truncated_at(self.pos, n))?;
        if end > self.data.len() {
            return Err(self.truncated_at(self.pos, n));
        }
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// A sub-cursor over the next `n` bytes (consumed from this one).
    pub fn sub(&mut self, n: usize) -> Result<Cursor<'a>> {
        let addr = self.addr();
        let data = self.bytes(n)?;
        Ok(Cursor::new(data, addr, self.what))
    }

    /// Expect a 4-byte signature such as `b"OHDR"`.
    pub fn signature(&mut self, sig: &[u8; 4]) -> Result<()> {
        let got = self.bytes(4)?;
        if got != sig {
            return Err(self.corrupt(format!(
                "bad signature {:?}, expected {:?}",
                String::from_utf8_lossy(got),
                String::from_utf8_lossy(sig)
            )));
        }
        Ok(())
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.bytes(2)?.try_into().unwrap()))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().unwrap()))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().unwrap()))
    }

    /// A little-endian unsigned integer of `width` bytes (0 to 8; 0 reads as 0).
    pub fn uint(&mut self, width: usize) -> Result<u64> {
        if width > 8 {
            return Err(self.corrupt(format!("integer width {width} exceeds 8 bytes")));
        }
        let b = self.bytes(width)?;
        Ok(b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    }

    /// An address of `sizes.offset` bytes; all-ones becomes [`UNDEFINED_ADDR`].
    pub fn offset(&mut self, sizes: Sizes) -> Result<u64> {
        let w = sizes.offset as usize;
        let v = self.uint(w)?;
        if w < 8 && v == (1u64 << (8 * w)) - 1 {
            Ok(UNDEFINED_ADDR)
        } else {
            Ok(v)
        }
    }

    /// A length of `sizes.length` bytes.
    pub fn length(&mut self, sizes: Sizes) -> Result<u64> {
        self.uint(sizes.length as usize)
    }

    /// Bytes up to (not including) the next NUL; the NUL is consumed.
    pub fn cstring(&mut self) -> Result<&'a [u8]> {
        let rest = self.rest();
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.corrupt("string without NUL terminator"))?;
        let s = &rest[..n];
        self.pos += n + 1;
        Ok(s)
    }
}

/// Number of bytes needed to store values up to and including `max` (at least 1).
pub fn bytes_for(max: u64) -> usize {
    ((64 - max.leading_zeros()) as usize).div_ceil(8).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_undefined() {
        let d = [0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 2, 0];
        let mut c = Cursor::new(&d, 0x10, "test");
        let s4 = Sizes {
            offset: 4,
            length: 2,
        };
        assert_eq!(c.offset(s4).unwrap(), UNDEFINED_ADDR);
        assert_eq!(c.offset(s4).unwrap(), 1);
        assert_eq!(c.length(s4).unwrap(), 2);
        assert!(matches!(c.u8(), Err(Error::Truncated { addr: 0x10, .. })));
    }

    #[test]
    fn truncation_says_where_and_how_much() {
        let d = [1u8, 2, 3, 4, 5, 6];
        let mut c = Cursor::new(&d, 0x40, "thing");
        c.skip(4).unwrap();
        let e = c.u32().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Truncated {
                    what: "thing",
                    addr: 0x40,
                    offset: 4,
                    need: 4,
                    have: 2
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "thing at 0x40 is truncated: 4 bytes needed at offset 4, 2 there"
        );
        assert!(matches!(
            c.seek(9),
            Err(Error::Truncated {
                offset: 9,
                have: 0,
                ..
            })
        ));
    }

    #[test]
    fn bytes_for_values() {
        assert_eq!(bytes_for(0), 1);
        assert_eq!(bytes_for(255), 1);
        assert_eq!(bytes_for(256), 2);
        assert_eq!(bytes_for(u64::MAX), 8);
    }
}
