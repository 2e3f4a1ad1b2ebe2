//! Converting source elements to the virtual dataset's type, as libhdf5 does when it reads a
//! virtual dataset whose source has another numeric type (h5py shows the result).
//!
//! Covered: integers of 1, 2, 4 and 8 bytes, signed or not, and IEEE floats of 4 and 8
//! bytes, in either byte order, to and from each other. Any other pair (strings, compounds,
//! enums, non-IEEE float layouts, bit offsets) is refused by [`Conversion::new`].
//!
//! libhdf5 has two ways to convert, and they round differently:
//! - *hardware* conversions, C casts, used when both types are the machine's own (here:
//!   little-endian): float narrowing rounds to nearest, ties to even; float to integer
//!   clips to the integer's range and truncates toward zero, and NaN becomes what the x86
//!   truncating conversion gives (the most negative value for 32- and 64-bit results, then
//!   cut to the destination's width);
//! - *software* conversions, bit by bit, used as soon as one side is big-endian: float
//!   narrowing rounds half away from zero (except where that would reach infinity: the
//!   largest finite value stays), a subnormal result rounds without carrying into the
//!   exponent, a NaN becomes the NaN with every mantissa bit set; float to integer clips and
//!   truncates, NaN gives 0, and a negative value below 1/4 in magnitude gives the most
//!   negative value of a signed destination.
//!
//! Both clip integers to the destination's range (a negative value to 0 for an unsigned
//! destination). Between types of the same width and class but other byte orders libhdf5
//! only swaps the bytes, also when the signedness differs (no clipping then).

use crate::format::messages::datatype::{ByteOrder, Datatype, TypeClass};

/// A numeric type this module converts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Num {
    float: bool,
    signed: bool,
    size: usize,
    big: bool,
}

impl Num {
    fn of(t: &Datatype) -> Option<Num> {
        let size = t.size as usize;
        match &t.class {
            TypeClass::FixedPoint {
                order,
                signed,
                bit_offset: 0,
                precision,
            } if matches!(size, 1 | 2 | 4 | 8) && *precision as usize == 8 * size => Some(Num {
                float: false,
                signed: *signed,
                size,
                big: *order == ByteOrder::Big,
            }),
            TypeClass::FloatingPoint {
                order,
                sign_location,
                bit_offset: 0,
                precision,
                exponent_location,
                exponent_size,
                mantissa_location: 0,
                mantissa_size,
                exponent_bias,
            } if *order != ByteOrder::Vax => {
                let ieee = match size {
                    4 => (31, 32, 23, 8, 23, 127),
                    8 => (63, 64, 52, 11, 52, 1023),
                    _ => return None,
                };
                let got = (
                    *sign_location,
                    *precision,
                    *exponent_location,
                    *exponent_size,
                    *mantissa_size,
                    *exponent_bias,
                );
                (got == ieee).then_some(Num {
                    float: true,
                    signed: true,
                    size,
                    big: *order == ByteOrder::Big,
                })
            }
            _ => None,
        }
    }

    /// The element's bytes as a little-endian integer of its width.
    fn load(&self, b: &[u8]) -> u64 {
        let mut v = [0u8; 8];
        v[..self.size].copy_from_slice(&b[..self.size]);
        if self.big {
            v[..self.size].reverse();
        }
        u64::from_le_bytes(v)
    }

    fn store(&self, bits: u64, out: &mut [u8]) {
        let v = bits.to_le_bytes();
        out[..self.size].copy_from_slice(&v[..self.size]);
        if self.big {
            out[..self.size].reverse();
        }
    }

    fn bits(&self) -> u32 {
        8 * self.size as u32
    }

    /// Range of an integer type.
    fn range(&self) -> (i128, i128) {
        let b = self.bits();
        if self.signed {
            (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
        } else {
            (0, (1i128 << b) - 1)
        }
    }

    /// An integer element's value.
    fn int_value(&self, raw: u64) -> i128 {
        let b = self.bits();
        if self.signed && b < 64 {
            let shift = 64 - b;
            (((raw << shift) as i64) >> shift) as i128
        } else if self.signed {
            raw as i64 as i128
        } else {
            raw as i128
        }
    }

    fn float_value(&self, raw: u64) -> f64 {
        if self.size == 4 {
            f32::from_bits(raw as u32) as f64
        } else {
            f64::from_bits(raw)
        }
    }
}

/// Layout of an IEEE float: (mantissa bits, exponent bits, bias).
fn ieee(size: usize) -> (u32, u32, i64) {
    if size == 4 {
        (23, 8, 127)
    } else {
        (52, 11, 1023)
    }
}

/// How source elements become elements of the virtual dataset's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Conversion {
    src: Num,
    dst: Num,
}

impl Conversion {
    /// The conversion from `src` to `dst`, or `None` when this module cannot convert them.
    pub(super) fn new(src: &Datatype, dst: &Datatype) -> Option<Conversion> {
        Some(Conversion {
            src: Num::of(src)?,
            dst: Num::of(dst)?,
        })
    }

    pub(super) fn src_size(&self) -> usize {
        self.src.size
    }

    /// Whether the two types hold the same values in the same bytes.
    pub(super) fn is_identity(&self) -> bool {
        self.src == self.dst
    }

    /// Convert the elements of `src` (whole source elements) into `dst` (as many
    /// destination elements).
    pub(super) fn run(&self, src: &[u8], dst: &mut [u8]) {
        for (s, d) in src
            .chunks_exact(self.src.size)
            .zip(dst.chunks_exact_mut(self.dst.size))
        {
            let bits = self.one(self.src.load(s));
            self.dst.store(bits, d);
        }
    }

    /// Both types the machine's own (little-endian): libhdf5's hardware conversions.
    fn hardware(&self) -> bool {
        !self.src.big && !self.dst.big
    }

    /// One element: source bits (little-endian integer) to destination bits.
    fn one(&self, raw: u64) -> u64 {
        let (s, d) = (self.src, self.dst);
        match (s.float, d.float) {
            // Same width, other byte order: libhdf5 only swaps the bytes (a signed value
            // read as unsigned or the reverse is not clipped).
            _ if s.float == d.float && s.size == d.size && s.big != d.big => raw,
            (false, false) => {
                let (lo, hi) = d.range();
                s.int_value(raw).clamp(lo, hi) as u64
            }
            (true, true) if s.size == d.size => raw,
            (true, true) if self.hardware() => {
                if d.size == 4 {
                    (f64::from_bits(raw) as f32).to_bits() as u64
                } else {
                    (f32::from_bits(raw as u32) as f64).to_bits()
                }
            }
            (true, true) => soft_float(raw, s.size, d.size),
            (false, true) => {
                let v = s.int_value(raw);
                if d.size == 4 {
                    (v as f32).to_bits() as u64
                } else {
                    (v as f64).to_bits()
                }
            }
            (true, false) => {
                let x = s.float_value(raw);
                let v = if self.hardware() {
                    hard_float_to_int(x, s.size == 4, d)
                } else {
                    soft_float_to_int(x, d)
                };
                v as u64
            }
        }
    }
}

/// Float to integer with C casts behind libhdf5's range checks (x86 truncation); `single`
/// when the source is a 4-byte float.
fn hard_float_to_int(x: f64, single: bool, d: Num) -> i128 {
    let (lo, hi) = d.range();
    // libhdf5 compares against the limits converted to the source's float type, where the
    // largest value of a 32- or 64-bit integer rounds up to the next power of two.
    let in_source = |v: i128| if single { v as f32 as f64 } else { v as f64 };
    if x > in_source(hi) {
        return hi;
    }
    if x < in_source(lo) {
        return lo;
    }
    // Where C leaves the result undefined, what the x86 truncating conversions give: their
    // "integer indefinite" (most negative) 32- or 64-bit value, cut to the destination's
    // width (32-bit unsigned results come from a 64-bit conversion).
    if x.is_nan() {
        return match (d.size, d.signed) {
            (4, true) => i32::MIN as i128,
            (8, true) => i64::MIN as i128,
            (8, false) => 1i128 << 63,
            _ => 0,
        };
    }
    let v = x.trunc() as i128;
    if v > hi {
        // The limit itself, rounded up: one past the integer's range.
        return if d.signed { lo } else { 0 };
    }
    v
}

/// Float to integer as libhdf5's bit-by-bit conversion does it.
fn soft_float_to_int(x: f64, d: Num) -> i128 {
    let (lo, hi) = d.range();
    if x.is_nan() || x == 0.0 {
        return 0;
    }
    if x.is_infinite() {
        return if x > 0.0 { hi } else { lo };
    }
    let neg = x < 0.0;
    let m = x.abs();
    // Position of the most significant bit of the truncated value (floor of log2; every
    // value here is a normal double, or far below 1).
    let biased = ((m.to_bits() >> 52) & 0x7ff) as i64;
    let msb = if biased == 0 { -1100 } else { biased - 1023 };
    if msb == -1 {
        return 0;
    }
    let prec = d.bits() as i64;
    let v = if msb >= 0 { m.trunc() as i128 } else { 0 };
    if !d.signed {
        if neg {
            return 0;
        }
        return if msb >= prec { hi } else { v };
    }
    if neg {
        if (0..prec - 1).contains(&msb) {
            -v
        } else {
            lo
        }
    } else if msb >= prec - 1 {
        hi
    } else {
        v
    }
}

/// Float to float of another width as libhdf5's bit-by-bit conversion does it (module docs).
fn soft_float(raw: u64, from: usize, to: usize) -> u64 {
    let (sm, se, sbias) = ieee(from);
    let (dm, de, dbias) = ieee(to);
    let sign = (raw >> (sm + se)) & 1;
    let sexp = ((raw >> sm) & ((1 << se) - 1)) as i64;
    let mut mant = raw & ((1u64 << sm) - 1);
    let dmax_exp = (1i64 << de) - 1;
    let out = |e: i64, m: u64| (sign << (dm + de)) | ((e as u64) << dm) | m;
    if sexp == 0 && mant == 0 {
        return out(0, 0);
    }
    if sexp == (1 << se) - 1 {
        return if mant == 0 {
            out(dmax_exp, 0)
        } else {
            out(dmax_exp, (1u64 << dm) - 1)
        };
    }
    // The source's fraction: `msize` bits below its leading one (implied for normal values;
    // the highest set bit of a subnormal's mantissa, which then counts as the leading one).
    let mut denormal = sexp == 0;
    let (mut expo, msize) = if sexp == 0 {
        let top = 63 - mant.leading_zeros() as i64;
        if top == 0 {
            mant = 0;
            (-(sbias - 1) - (sm as i64), 1u32)
        } else {
            (-(sbias - 1) - (sm as i64 - top), top as u32)
        }
    } else {
        (sexp - sbias, sm)
    };
    let mut mrsh: u32 = 0;
    expo += dbias;
    if expo < -(dm as i64) {
        return out(0, 0);
    } else if expo <= 0 {
        mrsh = (1 - expo) as u32;
        expo = 0;
        denormal = true;
    } else if expo >= dmax_exp {
        return out(dmax_exp, 0);
    }
    // Rounding at the first bit cut off.
    let mut implied = 1u64;
    let mut carry = false;
    if mrsh <= dm && mrsh + msize > dm {
        let bitno = mrsh + msize - dm;
        let first_cut = (mant >> (bitno - 1)) & 1 == 1;
        let width = 1 + msize - bitno;
        let field = (mant >> (bitno - 1)) & ((1u64 << width) - 1);
        let bumped = field + 1;
        let kept_all_ones = (mant >> bitno) == (1u64 << (msize - bitno)) - 1;
        let round = |mant: &mut u64| -> bool {
            let low = *mant & ((1u64 << (bitno - 1)) - 1);
            *mant = ((bumped & ((1u64 << width) - 1)) << (bitno - 1)) | low;
            bumped >> width == 1
        };
        if first_cut && !denormal {
            if !kept_all_ones || expo < dmax_exp - 1 {
                carry = round(&mut mant);
                if carry {
                    implied = 2;
                }
            }
        } else if first_cut {
            round(&mut mant);
        }
    }
    // The destination mantissa.
    let dmask = (1u64 << dm) - 1;
    let m = if mrsh > dm + 1 {
        0
    } else if mrsh == dm + 1 {
        1
    } else if mrsh == dm {
        implied & dmask
    } else {
        let mut m = 0u64;
        if mrsh > 0 {
            // The leading one (or the carried two) just above the shifted fraction.
            m |= (implied << (dm - mrsh)) & dmask;
        }
        if mrsh + msize >= dm {
            let n = dm - mrsh;
            let from_bit = msize + mrsh - dm;
            m = (m & !((1u64 << n) - 1)) | ((mant >> from_bit) & ((1u64 << n) - 1));
        } else {
            let at = dm - (mrsh + msize);
            m = (m & !(((1u64 << msize) - 1) << at)) | ((mant & ((1u64 << msize) - 1)) << at);
            m &= !((1u64 << at) - 1);
        }
        m
    };
    if carry {
        expo += 1;
        if expo >= dmax_exp {
            return out(dmax_exp, 0);
        }
    }
    out(expo, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(float: bool, signed: bool, size: usize, big: bool) -> Num {
        Num {
            float,
            signed,
            size,
            big,
        }
    }

    fn conv(src: Num, dst: Num) -> Conversion {
        Conversion { src, dst }
    }

    #[test]
    fn integers_clip_to_the_destination() {
        let c = conv(num(false, true, 8, false), num(false, false, 1, true));
        assert_eq!(c.one((-5i64) as u64), 0);
        assert_eq!(c.one(300), 255);
        assert_eq!(c.one(7), 7);
        let c = conv(num(false, false, 8, false), num(false, true, 2, false));
        assert_eq!(c.one(u64::MAX), 0x7fff);
    }

    #[test]
    fn narrowing_rounds_ties_to_even_in_hardware_and_away_in_software() {
        let tie = (1.0f64 + 2f64.powi(-24)).to_bits();
        let hard = conv(num(true, true, 8, false), num(true, true, 4, false));
        let soft = conv(num(true, true, 8, true), num(true, true, 4, false));
        assert_eq!(f32::from_bits(hard.one(tie) as u32), 1.0);
        assert_eq!(f32::from_bits(soft.one(tie) as u32), 1.0 + f32::EPSILON);
        for x in [0.1f64, -2.5, 1e-3, 3.0e38, 1e-40, -1e-44, 6.0e-39] {
            let a = f32::from_bits(soft.one(x.to_bits()) as u32);
            assert!(
                (a as f64 - x).abs() <= (x.abs() * 1e-7).max(1.5e-45),
                "{x}: {a}"
            );
        }
        assert!(f32::from_bits(soft.one(1e300f64.to_bits()) as u32).is_infinite());
        assert_eq!(soft.one(f64::NAN.to_bits()), 0x7fff_ffff);
    }

    #[test]
    fn floats_to_integers() {
        let hard = conv(num(true, true, 8, false), num(false, true, 4, false));
        let soft = conv(num(true, true, 8, true), num(false, true, 4, false));
        for (c, nan) in [(hard, i32::MIN), (soft, 0)] {
            assert_eq!(c.one(2.9f64.to_bits()) as u32 as i32, 2);
            assert_eq!(c.one((-2.9f64).to_bits()) as u32 as i32, -2);
            assert_eq!(c.one(1e10f64.to_bits()) as u32 as i32, i32::MAX);
            assert_eq!(c.one(f64::NAN.to_bits()) as u32 as i32, nan);
        }
        assert_eq!(soft.one((-0.1f64).to_bits()) as u32 as i32, i32::MIN);
        assert_eq!(hard.one((-0.1f64).to_bits()) as u32 as i32, 0);
    }
}
