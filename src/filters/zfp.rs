//! ZFP filter (id 32013, LLNL H5Z-ZFP as built into hdf5plugin): lossy or reversible
//! compression of 1-3 dimensional float32/float64 chunks, decoded here in pure Rust.
//!
//! The client data are `cd[0]` (version word: ZFP library version `>> 16`, codec
//! `>> 12 & 15`) followed by a ZFP *header* written as a bit stream into the remaining
//! 32-bit words: the magic `"zfp"` and codec version (8 bits each), 52 bits of field
//! metadata (scalar type - 1 in bits 0-1, dimensions - 1 in bits 2-3, then the sizes minus
//! one: 48 bits for 1-D, 24 per axis for 2-D, 16 for 3-D, 12 for 4-D, x first) and a
//! 12-bit mode (fixed rate below 2048, fixed precision to 2175, 2176 reversible, fixed
//! accuracy above, 4095 meaning 52 more bits with explicit min/max bits, max precision and
//! min exponent). Bit streams are read least significant bit first from little-endian
//! words. The chunk itself is the bare compressed stream.
//!
//! The array (x fastest, i.e. the HDF5 chunk in C order) is cut into blocks of 4^d values,
//! visited x fastest; edge blocks are decoded whole and only their in-range values kept.
//! A lossy block is: one bit "nonzero"; an 8 (float) or 11 (double) bit biased common
//! exponent; the integer coefficients, coded by bit plane from the most significant down
//! (each plane: the bits of the coefficients already significant verbatim, then a unary
//! run-length code for the rest) and limited by the bit budget and by a precision derived
//! from the exponent; the coefficients are reordered by sequency, mapped from negabinary
//! and put through the inverse decorrelating lifting transform along each axis, last axis
//! first, then scaled by `2^(emax - (bits - 2))`. Fixed-rate blocks are padded to their
//! exact size. A reversible block is: a "nonzero" bit, then 1 when the integers are the
//! floats' own bits (two's complement of the sign-magnitude pattern) or 0 followed by the
//! common exponent; the precision in 5 or 6 bits; the coefficients; and a Lorenzo (Pascal
//! matrix) lifting in wrapping unsigned arithmetic. Rounding mode is ZFP's default (no
//! rounding bias).
//!
//! Integer fields and 4-D fields are reported as errors (hdf5plugin writes them rarely).

use super::Stage;

/// `ZFP_MIN_EXP`: the smallest exponent of a double; one less means "reversible".
const MIN_EXP: i32 = -1074;
/// `ZFP_MAX_BITS`: most bits a block may take (a 4-D block of doubles).
const MAX_BITS: u32 = 16658;
/// Largest short mode value; 4095 announces a 64-bit mode.
const MODE_SHORT_MAX: u64 = 4094;

/// Bit reader over a byte slice; reads past the end give zero bits, like a stream padded
/// with zeros (fixed-rate streams end in padding; a truncated stream decodes to garbage but
/// never reads out of bounds).
struct Bits<'a> {
    buf: &'a [u8],
    pos: u64,
}

impl Bits<'_> {
    fn bit(&mut self) -> u64 {
        let byte = usize::try_from(self.pos / 8)
            .ok()
            .and_then(|i| self.buf.get(i))
            .copied()
            .unwrap_or(0);
        let b = u64::from(byte >> (self.pos % 8)) & 1;
        self.pos += 1;
        b
    }

    fn bits(&mut self, n: u32) -> u64 {
        (0..n).fold(0, |acc, i| acc | (self.bit() << i))
    }

    fn past_end(&self) -> bool {
        self.pos > self.buf.len() as u64 * 8
    }
}

/// Stream parameters (`zfp_stream` fields).
#[derive(Debug, Clone, Copy)]
struct Mode {
    minbits: u32,
    maxbits: u32,
    maxprec: u32,
    minexp: i32,
}

impl Mode {
    fn from_code(mode: u64) -> Mode {
        let (full, max) = (MAX_BITS, 64);
        if mode < 2048 {
            let b = mode as u32 + 1;
            Mode {
                minbits: b,
                maxbits: b,
                maxprec: max,
                minexp: MIN_EXP,
            }
        } else if mode < 2048 + 128 {
            Mode {
                minbits: 1,
                maxbits: full,
                maxprec: mode as u32 + 1 - 2048,
                minexp: MIN_EXP,
            }
        } else if mode == 2048 + 128 {
            Mode {
                minbits: 1,
                maxbits: full,
                maxprec: max,
                minexp: MIN_EXP - 1,
            }
        } else if mode <= MODE_SHORT_MAX {
            let minexp = mode as i32 + MIN_EXP - (2048 + 128 + 1);
            Mode {
                minbits: 1,
                maxbits: full,
                maxprec: max,
                minexp,
            }
        } else {
            let m = mode >> 12;
            Mode {
                minbits: (m & 0x7fff) as u32 + 1,
                maxbits: ((m >> 15) & 0x7fff) as u32 + 1,
                maxprec: ((m >> 30) & 0x7f) as u32 + 1,
                minexp: ((m >> 37) & 0x7fff) as i32 - 16495,
            }
        }
    }

    fn reversible(&self) -> bool {
        self.minexp < MIN_EXP
    }
}

/// What the header describes.
struct Field {
    double: bool,
    dims: Vec<usize>,
    mode: Mode,
}

fn read_header(cd: &[u32]) -> Result<Field, String> {
    let words = cd.get(1..).ok_or("client data missing")?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut s = Bits {
        buf: &bytes,
        pos: 0,
    };
    if s.bits(24) != u64::from_le_bytes([b'z', b'f', b'p', 0, 0, 0, 0, 0]) {
        return Err("client data do not hold a ZFP header".into());
    }
    let codec = s.bits(8);
    if codec != 5 {
        return Err(format!("ZFP codec version {codec}"));
    }
    let meta = s.bits(52);
    let ty = meta & 3;
    let ndims = ((meta >> 2) & 3) as usize + 1;
    let sizes = meta >> 4;
    let width = [48u32, 24, 16, 12][ndims - 1];
    let dims = (0..ndims)
        .map(|i| ((sizes >> (width * i as u32)) & ((1u64 << width) - 1)) as usize + 1)
        .collect();
    let mut mode = s.bits(12);
    if mode > MODE_SHORT_MAX {
        mode += s.bits(52) << 12;
    }
    if s.past_end() {
        return Err("ZFP header truncated".into());
    }
    let double = match ty {
        2 => false,
        3 => true,
        t => {
            return Err(format!(
                "ZFP scalar type {} (integers) is not supported",
                t + 1
            ))
        }
    };
    if ndims == 4 {
        return Err("4-D ZFP fields are not supported".into());
    }
    Ok(Field {
        double,
        dims,
        mode: Mode::from_code(mode),
    })
}

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let field = read_header(stage.cd)?;
    let elem = if field.double { 8 } else { 4 };
    let total = field
        .dims
        .iter()
        .try_fold(elem, |a: usize, &d| a.checked_mul(d))
        .filter(|&t| t <= stage.limit)
        .ok_or("ZFP field larger than the chunk")?;
    let mut out = vec![0u8; total];
    let mut s = Bits { buf: input, pos: 0 };
    let d = field.dims.len();
    let n = field.dims.clone();
    let (nx, ny, nz) = (n[0], *n.get(1).unwrap_or(&1), *n.get(2).unwrap_or(&1));
    let size = 1usize << (2 * d);
    let mut block = vec![0u64; size];
    for z in (0..nz).step_by(4) {
        for y in (0..ny).step_by(4) {
            for x in (0..nx).step_by(4) {
                if field.double {
                    decode_block64(&mut s, &field.mode, d, &mut block);
                } else {
                    decode_block32(&mut s, &field.mode, d, &mut block);
                }
                if s.past_end() {
                    return Err("ZFP stream truncated".into());
                }
                // Scatter the in-range values of the block (x fastest).
                for (k, value) in block.iter().enumerate() {
                    let (bx, by, bz) = (k & 3, (k >> 2) & 3, k >> 4);
                    let (px, py, pz) = (x + bx, y + by, z + bz);
                    if px >= nx || py >= ny || pz >= nz {
                        continue;
                    }
                    let at = ((pz * ny + py) * nx + px) * elem;
                    let v = value.to_le_bytes();
                    out[at..at + elem].copy_from_slice(&v[..elem]);
                }
            }
        }
    }
    Ok(out)
}

/// Blocks are coded in this order of coefficients: by sequency `i + j (+ k)`, then by
/// `i² + j² (+ k²)` (ZFP's `perm_1/2/3` tables, index `i + 4j + 16k`).
fn perm(d: usize) -> &'static [u8] {
    const P1: [u8; 4] = [0, 1, 2, 3];
    const P2: [u8; 16] = [0, 1, 4, 5, 2, 8, 6, 9, 3, 12, 10, 7, 13, 11, 14, 15];
    const P3: [u8; 64] = [
        0, 1, 4, 16, 20, 17, 5, 2, 8, 32, 21, 6, 18, 24, 9, 33, 36, 3, 12, 48, 22, 25, 37, 40, 34,
        10, 7, 19, 28, 13, 49, 52, 41, 38, 26, 23, 29, 53, 11, 35, 44, 14, 50, 56, 42, 27, 39, 45,
        30, 54, 57, 60, 51, 15, 43, 46, 58, 61, 55, 31, 62, 59, 47, 63,
    ];
    match d {
        1 => &P1,
        2 => &P2,
        _ => &P3,
    }
}

/// Decode the bit planes of `data.len()` unsigned coefficients of `intprec` bits, at most
/// `maxbits` bits and `maxprec` planes; returns the bits read.
fn decode_ints(s: &mut Bits, maxbits: u32, maxprec: u32, intprec: u32, data: &mut [u64]) -> u32 {
    let size = data.len();
    data.fill(0);
    let kmin = intprec.saturating_sub(maxprec);
    let mut bits = maxbits;
    let mut n = 0usize;
    let mut k = intprec;
    while bits > 0 && k > kmin {
        k -= 1;
        // Coefficients already significant: one verbatim bit each.
        let m = n.min(bits as usize);
        bits -= m as u32;
        for v in data.iter_mut().take(m) {
            *v += s.bit() << k;
        }
        // The rest: group tests, then the position of the next one bit.
        while bits > 0 && n < size {
            bits -= 1;
            if s.bit() == 0 {
                break;
            }
            while bits > 0 && n < size - 1 {
                bits -= 1;
                if s.bit() != 0 {
                    break;
                }
                n += 1;
            }
            data[n] += 1 << k;
            n += 1;
        }
    }
    maxbits - bits
}

macro_rules! block_decoder {
    ($name:ident, $int:ty, $uint:ty, $float:ty, $ebits:expr, $pbits:expr) => {
        /// Decode one block into `out` (the values' bit patterns, x fastest).
        fn $name(s: &mut Bits, mode: &Mode, d: usize, out: &mut [u64]) {
            const INTPREC: u32 = <$uint>::BITS;
            const EBIAS: i32 = (1 << ($ebits - 1)) - 1;
            const NBMASK: $uint = <$uint>::MAX / 3 * 2;
            let size = out.len();
            let mut ublock = [0u64; 64];
            let mut iblock = [0 as $int; 64];
            let start = s.pos;
            let skip_to = |s: &mut Bits, minbits: u32| {
                let used = s.pos - start;
                if used < u64::from(minbits) {
                    s.pos = start + u64::from(minbits);
                }
            };
            if s.bit() == 0 {
                // An all-zero block.
                out.fill(0);
                skip_to(s, mode.minbits);
                return;
            }
            let emax = if !mode.reversible() || s.bit() == 0 {
                Some(s.bits($ebits) as i32 - EBIAS)
            } else {
                // Reversible, second bit 1: the integers are the floats' own bits.
                None
            };
            let used = (s.pos - start) as u32;
            let budget = mode.maxbits.saturating_sub(used);
            if mode.reversible() {
                let prec = s.bits($pbits) as u32 + 1;
                decode_ints(
                    s,
                    budget.saturating_sub($pbits),
                    prec,
                    INTPREC,
                    &mut ublock[..size],
                );
            } else {
                // Bit planes worth coding for this exponent (`precision()` in ZFP).
                let e = emax.unwrap_or(0);
                let p = (e - mode.minexp + 2 * d as i32 + 2).max(0) as u32;
                decode_ints(s, budget, mode.maxprec.min(p), INTPREC, &mut ublock[..size]);
            }
            skip_to(s, mode.minbits);
            for (i, &p) in perm(d).iter().take(size).enumerate() {
                let u = ublock[i] as $uint;
                iblock[p as usize] = (u ^ NBMASK).wrapping_sub(NBMASK) as $int;
            }
            let lift: fn(&mut [$int], usize, usize) = if mode.reversible() {
                |p, at, st| {
                    let (x, mut y, mut z, mut w) = (
                        p[at] as $uint,
                        p[at + st] as $uint,
                        p[at + 2 * st] as $uint,
                        p[at + 3 * st] as $uint,
                    );
                    w = w.wrapping_add(z);
                    z = z.wrapping_add(y);
                    w = w.wrapping_add(z);
                    y = y.wrapping_add(x);
                    z = z.wrapping_add(y);
                    w = w.wrapping_add(z);
                    p[at + st] = y as $int;
                    p[at + 2 * st] = z as $int;
                    p[at + 3 * st] = w as $int;
                }
            } else {
                |p, at, st| {
                    let (mut x, mut y, mut z, mut w) =
                        (p[at], p[at + st], p[at + 2 * st], p[at + 3 * st]);
                    y = y.wrapping_add(w >> 1);
                    w = w.wrapping_sub(y >> 1);
                    y = y.wrapping_add(w);
                    w = w.wrapping_shl(1).wrapping_sub(y);
                    z = z.wrapping_add(x);
                    x = x.wrapping_shl(1).wrapping_sub(z);
                    y = y.wrapping_add(z);
                    z = z.wrapping_shl(1).wrapping_sub(y);
                    w = w.wrapping_add(x);
                    x = x.wrapping_shl(1).wrapping_sub(w);
                    p[at] = x;
                    p[at + st] = y;
                    p[at + 2 * st] = z;
                    p[at + 3 * st] = w;
                }
            };
            // Inverse transform along the last axis first.
            let blk = &mut iblock[..size];
            for axis in (0..d).rev() {
                let st = 1usize << (2 * axis);
                for base in 0..size {
                    if (base / st) % 4 == 0 {
                        lift(blk, base, st);
                    }
                }
            }
            match emax {
                Some(e) if !(mode.reversible() && e == -EBIAS) => {
                    let scale = pow2(e - (INTPREC as i32 - 2)) as $float;
                    for (o, &v) in out.iter_mut().zip(blk.iter()) {
                        *o = u64::from((v as $float * scale).to_bits());
                    }
                }
                Some(_) => out.fill(0),
                None => {
                    for (o, &v) in out.iter_mut().zip(blk.iter()) {
                        let v = if v < 0 {
                            (v as $uint ^ (<$int>::MAX as $uint)) as $int
                        } else {
                            v
                        };
                        *o = u64::from(v as $uint);
                    }
                }
            }
        }
    };
}

block_decoder!(decode_block32, i32, u32, f32, 8, 5);
block_decoder!(decode_block64, i64, u64, f64, 11, 6);

/// Exact `2^e` as a double (zero below the subnormals, as `ldexp` gives).
fn pow2(e: i32) -> f64 {
    if e > 1023 {
        f64::INFINITY
    } else if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else if e >= -1074 {
        f64::from_bits(1u64 << (e + 1074))
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The H5Z-ZFP client data of a 16 x 16 float chunk in fixed-accuracy mode (2^-7).
    const ACCURACY_CD: [u32; 4] = [269504785, 91252346, 4026532086, 3401580544];

    #[test]
    fn header_and_modes() {
        let f = read_header(&ACCURACY_CD).unwrap();
        assert!(!f.double);
        assert_eq!(f.dims, [16, 16]);
        assert_eq!(f.mode.minexp, -7);
        assert!(!f.mode.reversible());
        let rate = Mode::from_code(159);
        assert_eq!((rate.minbits, rate.maxbits), (160, 160));
        assert_eq!(Mode::from_code(2048 + 19).maxprec, 20);
        assert!(Mode::from_code(2176).reversible());
        // Not a header, integers, and a header cut short.
        assert!(read_header(&[0, 1, 2, 3]).is_err());
        let mut ints = ACCURACY_CD;
        ints[2] &= !3; // scalar type 1: int32
        assert!(read_header(&ints).is_err());
        assert!(read_header(&ACCURACY_CD[..3]).is_err());
    }

    #[test]
    fn pow2_is_exact_ldexp() {
        assert_eq!(pow2(0), 1.0);
        assert_eq!(pow2(-1074), f64::from_bits(1));
        assert_eq!(pow2(-1075), 0.0);
        assert_eq!(pow2(-1022), f64::MIN_POSITIVE);
        assert_eq!(pow2(-157) as f32, 0.0);
    }

    #[test]
    fn bit_planes() {
        // Two coefficients of 4-bit integers, planes 3..0: plane 3 "1" (group test) + "1"
        // (coefficient 0 is the first one bit) -> c0 |= 8; plane 2: verbatim bit of c0 = 0,
        // group test 0. Then budget runs out.
        let stream = [0b0000_0011u8];
        let mut s = Bits {
            buf: &stream,
            pos: 0,
        };
        let mut data = [0u64; 2];
        let used = decode_ints(&mut s, 4, 4, 4, &mut data);
        assert_eq!(used, 4);
        assert_eq!(data, [8, 0]);
    }

    #[test]
    fn truncated_stream_and_oversized_field_fail() {
        let stage = Stage {
            cd: &ACCURACY_CD,
            limit: 1024,
        };
        assert!(decode(&[0xff; 8], &stage).is_err());
        let small = Stage {
            cd: &ACCURACY_CD,
            limit: 1000,
        };
        assert!(decode(&[0; 4096], &small).is_err());
        // An all-zero stream is 16 zero blocks.
        assert_eq!(decode(&[0; 2], &stage).unwrap(), vec![0u8; 1024]);
    }
}
