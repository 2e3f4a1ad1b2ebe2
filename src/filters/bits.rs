//! MSB-first bit reader shared by the nbit and scaleoffset filters, which both pack each
//! element's significant bits most significant first into a continuous bit stream.

/// Reads bits most significant first from a byte slice.
pub(crate) struct BitReader<'a> {
    data: &'a [u8],
    /// Index of the next byte to load into `acc`.
    pos: usize,
    /// Buffered bits, right-aligned.
    acc: u64,
    /// Number of valid bits in `acc`.
    nbits: u32,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        BitReader {
            data,
            pos: 0,
            acc: 0,
            nbits: 0,
        }
    }

    /// The next `n` bits (`n <= 8`) as an integer; `None` past the end of the data.
    #[inline]
    pub(crate) fn read(&mut self, n: u32) -> Option<u8> {
        debug_assert!(n <= 8);
        if self.nbits < n {
            // Refill whole bytes while they fit (keeps at most 56 + 8 bits).
            while self.nbits <= 56 {
                match self.data.get(self.pos) {
                    Some(&b) => {
                        self.acc = (self.acc << 8) | b as u64;
                        self.nbits += 8;
                        self.pos += 1;
                    }
                    None => break,
                }
            }
            if self.nbits < n {
                return None;
            }
        }
        self.nbits -= n;
        Some(((self.acc >> self.nbits) & ((1u64 << n) - 1)) as u8)
    }
}

/// Unpack one atomic element: bits `[offset, offset + precision)` of an element of
/// `elem.len()` bytes, read most significant byte first as libhdf5 writes them. `big_endian`
/// says where the most significant byte sits. Bits outside the range are left untouched.
pub(crate) fn unpack_atomic(
    bits: &mut BitReader,
    elem: &mut [u8],
    precision: usize,
    offset: usize,
    big_endian: bool,
) -> Option<()> {
    if precision == 0 {
        return Some(());
    }
    let end = offset + precision;
    let size = elem.len();
    let hi = (end - 1) / 8;
    let lo = offset / 8;
    for m in (lo..=hi).rev() {
        let top = (end - 8 * m).min(8);
        let bottom = offset.saturating_sub(8 * m);
        let v = bits.read((top - bottom) as u32)?;
        let at = if big_endian { size - 1 - m } else { m };
        *elem.get_mut(at)? |= v << bottom;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_msb_first_across_bytes() {
        let mut r = BitReader::new(&[0b1011_0011, 0b0101_0000]);
        assert_eq!(r.read(3), Some(0b101));
        assert_eq!(r.read(7), Some(0b1001101));
        assert_eq!(r.read(6), Some(0b010000));
        assert_eq!(r.read(1), None);
    }

    #[test]
    fn unpacks_12_bits_at_offset_2() {
        // Value 0xABC packed MSB first: 1010 1011 1100.
        let mut r = BitReader::new(&[0xab, 0xc0]);
        let mut e = [0u8; 2];
        unpack_atomic(&mut r, &mut e, 12, 2, false).unwrap();
        assert_eq!(u16::from_le_bytes(e), 0xabc << 2);
        let mut r = BitReader::new(&[0xab, 0xc0]);
        let mut e = [0u8; 2];
        unpack_atomic(&mut r, &mut e, 12, 2, true).unwrap();
        assert_eq!(u16::from_be_bytes(e), 0xabc << 2);
    }
}
