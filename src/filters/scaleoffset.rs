//! Scale-offset filter (id 6, `H5Pset_scaleoffset`).
//!
//! Client data: `cd = [scale type (0 float D-scale, 1 float E-scale, 2 integer), scale
//! factor, element count, class (0 integer, 1 float), size, sign (0 unsigned, 1 two's
//! complement), byte order (0 LE, 1 BE), fill value defined (1), fill value bytes...]`. The
//! fill value is packed little-endian into `cd[8..]`.
//!
//! Encoded chunk: a 21-byte header (u32 LE `minbits`, one byte giving the width of `minval`,
//! then `minval` LE in a field of up to 16 bytes), followed by each element's low `minbits`
//! bits, most significant first, in a continuous stream. Decoding: an all-ones value is the
//! fill value (when defined); otherwise integers are `value + minval` (wrapping in the
//! type) and D-scaled floats are `value / 10^D + min`, computed in the float's own precision
//! with `min` the float whose bits are the low bytes of `minval`. `minbits` equal to the full
//! width means the values follow the header unchanged. libhdf5 works in little-endian and
//! swaps big-endian data at the end.

use super::bits::{unpack_atomic, BitReader};
use super::Stage;

/// Offset of the packed values: 4 bytes minbits, 1 byte minval width, 16 bytes minval.
const HEADER: usize = 21;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let cd = stage.cd;
    if cd.len() < 8 {
        return Err(format!("{} client data values, need at least 8", cd.len()));
    }
    let (scale_type, scale_factor) = (cd[0], cd[1] as i32);
    let (npoints, class, size) = (cd[2] as usize, cd[3], cd[4] as usize);
    let (signed, big_endian, fill_defined) = (cd[5] == 1, cd[6] == 1, cd[7] == 1);
    if !matches!(size, 1 | 2 | 4 | 8) || (class == 1 && size < 4) {
        return Err(format!("element size {size} for class {class}"));
    }
    match (class, scale_type) {
        (0, 2) => {
            // An integer scale factor of the full width means the data was not touched.
            if scale_factor == (size * 8) as i32 {
                return Ok(input.to_vec());
            }
        }
        (1, 0) => {}
        (1, 1) => return Err("the E-scale method is not supported (libhdf5 forbids it)".into()),
        _ => return Err(format!("scale type {scale_type} for class {class}")),
    }
    let total = npoints
        .checked_mul(size)
        .filter(|&t| t <= stage.limit)
        .ok_or_else(|| format!("{npoints} elements exceed the chunk size"))?;
    let head = input.get(..HEADER).ok_or("header truncated")?;
    let minbits = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let width = (head[4] as usize).min(8);
    let minval = head[5..5 + width]
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | b as u64);
    if minbits > size * 8 {
        return Err(format!("minbits {minbits} exceeds the {size}-byte type"));
    }
    let mut out = vec![0u8; total];
    if minbits == size * 8 {
        let raw = input
            .get(HEADER..HEADER + total)
            .ok_or("unpacked data truncated")?;
        out.copy_from_slice(raw);
    } else {
        if minbits > 0 {
            let mut bits = BitReader::new(&input[HEADER..]);
            for elem in out.chunks_exact_mut(size) {
                unpack_atomic(&mut bits, elem, minbits, 0, false).ok_or("packed data truncated")?;
            }
        }
        let mut fill = [0u8; 8];
        for (i, v) in cd[8..].iter().take(2).enumerate() {
            fill[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let fill = fill_defined.then_some(u64::from_le_bytes(fill));
        let all_ones = (1u64 << minbits) - 1;
        if class == 0 {
            post_integer(&mut out, size, signed, minval, all_ones, fill);
        } else {
            post_float(&mut out, size, scale_factor, minval, all_ones, fill);
        }
    }
    if big_endian {
        for elem in out.chunks_exact_mut(size) {
            elem.reverse();
        }
    }
    Ok(out)
}

fn load(elem: &[u8]) -> u64 {
    elem.iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | b as u64)
}

fn store(elem: &mut [u8], v: u64) {
    let n = elem.len();
    elem.copy_from_slice(&v.to_le_bytes()[..n]);
}

fn post_integer(
    out: &mut [u8],
    size: usize,
    _signed: bool,
    min: u64,
    ones: u64,
    fill: Option<u64>,
) {
    // Two's complement addition truncated to the type is the same for signed and unsigned.
    for elem in out.chunks_exact_mut(size) {
        let v = load(elem);
        let r = match fill {
            Some(f) if v == ones => f,
            _ => v.wrapping_add(min),
        };
        store(elem, r);
    }
}

fn post_float(out: &mut [u8], size: usize, d: i32, min: u64, ones: u64, fill: Option<u64>) {
    for elem in out.chunks_exact_mut(size) {
        let v = load(elem);
        let r = match fill {
            Some(f) if v == ones => f,
            _ if size == 4 => {
                let min = f32::from_bits(min as u32);
                ((v as u32 as i32) as f32 / 10f32.powf(d as f32) + min).to_bits() as u64
            }
            _ => {
                let min = f64::from_bits(min);
                ((v as i64) as f64 / 10f64.powf(d as f64) + min).to_bits()
            }
        };
        store(elem, r);
    }
}
