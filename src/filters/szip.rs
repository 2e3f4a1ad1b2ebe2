//! SZIP filter (id 4): CCSDS 121.0-B adaptive entropy coding (AEC, "Rice"), decoded here as
//! libaec's szip-compatible interface decodes it.
//!
//! HDF5 framing: a u32 little-endian decoded size, then the AEC stream. Client data:
//! `cd = [options mask, pixels per block (J), bits per pixel, pixels per scanline]`. J is any
//! even number up to 256 (libhdf5 writes 2 to 32: the CCSDS sizes 8 to 64 and smaller ones
//! for small chunks; a chunk whose last dimension is shorter than J is coded as one
//! scanline of all its pixels). In the
//! mask, 8 = samples little-endian, 16 = big-endian, 32 = preprocessed with the unit-delay
//! predictor ("nearest neighbour"), 128 = raw (no szip block headers; always set by libhdf5).
//! 32- and 64-bit pixels are coded as 8-bit samples of the byte-shuffled buffer. A scanline
//! that is not a whole number of blocks is padded to one when coding.
//!
//! AEC stream (CCSDS 121.0-B-3 section 5): a reference sample interval (RSI) is
//! `ceil(scanline / J)` blocks of J samples. Each block starts with an option id of 3, 4 or 5
//! bits (for samples of up to 8, 16 or 32 bits):
//! * all ones: J samples stored raw;
//! * `k + 1`: split-sample coding: the high parts as unary codes ("fundamental sequence":
//!   zeros ended by a one), then the low `k` bits of each sample;
//! * 0, then one bit: 1 = second extension (pairs coded as one unary value through the
//!   triangle numbering), 0 = a run of zero blocks (unary count; 4 means "to the end of the
//!   64-block segment or RSI", larger values are one more than the run).
//!
//! With preprocessing, the first sample of every RSI is a reference sample stored raw right
//! after the block's option bits (after the extra bit for id 0); the other samples are mapped
//! prediction residuals, undone in [`unmap`].

use super::Stage;

/// Option-mask bits (szlib.h).
const MSB: u32 = 16;
const NN: u32 = 32;

/// Largest block (pixels) the szip interface codes.
const MAX_BLOCK: usize = 256;

/// Largest unary value a second-extension pair can use (beta up to 12).
const SE_MAX: u64 = 90;

struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    acc: u64,
    nbits: u32,
}

impl<'a> Bits<'a> {
    fn refill(&mut self) {
        while self.nbits <= 56 {
            match self.data.get(self.pos) {
                Some(&b) => {
                    self.acc = (self.acc << 8) | b as u64;
                    self.nbits += 8;
                    self.pos += 1;
                }
                None => return,
            }
        }
    }

    /// Next `n` bits (`n <= 32`), most significant first.
    fn get(&mut self, n: u32) -> Result<u64, String> {
        if n == 0 {
            return Ok(0);
        }
        if self.nbits < n {
            self.refill();
            if self.nbits < n {
                return Err("AEC stream truncated".into());
            }
        }
        self.nbits -= n;
        Ok((self.acc >> self.nbits) & ((1u64 << n) - 1))
    }

    /// A fundamental-sequence (unary) value: the number of zeros before the next one bit.
    fn fs(&mut self) -> Result<u64, String> {
        let mut count = 0u64;
        loop {
            if self.nbits == 0 {
                self.refill();
                if self.nbits == 0 {
                    return Err("AEC stream truncated in a unary code".into());
                }
            }
            let avail = self.acc & (u64::MAX >> (64 - self.nbits));
            if avail == 0 {
                count += self.nbits as u64;
                self.nbits = 0;
                continue;
            }
            let zeros = self.nbits - (64 - avail.leading_zeros());
            count += zeros as u64;
            self.nbits -= zeros + 1;
            return Ok(count);
        }
    }
}

/// AEC stream parameters.
struct Params {
    bits: u32,
    block: usize,
    rsi: usize,
    preprocess: bool,
}

/// Decode `count` samples (residuals still mapped when preprocessing) into `out`.
fn decode_samples(input: &[u8], p: &Params, count: usize) -> Result<Vec<u32>, String> {
    let id_len = match p.bits {
        0 => return Err("0 bits per sample".into()),
        1..=8 => 3,
        9..=16 => 4,
        17..=32 => 5,
        n => return Err(format!("{n} bits per sample")),
    };
    let uncomp_id = (1u64 << id_len) - 1;
    let xmax = (1u64 << p.bits) - 1;
    let rsi_len = p.rsi * p.block;
    let mut bits = Bits {
        data: input,
        pos: 0,
        acc: 0,
        nbits: 0,
    };
    // Samples have at most 32 bits: u32 keeps this buffer within 4x the chunk size.
    let mut out: Vec<u32> = Vec::with_capacity(count);
    let sample = |out: &mut Vec<u32>, v: u64| -> Result<bool, String> {
        if v > xmax {
            return Err(format!("sample {v} exceeds {} bits", p.bits));
        }
        out.push(v as u32);
        Ok(out.len() >= count)
    };
    let mut fs_buf = vec![0u64; p.block];
    while out.len() < count {
        let in_rsi = out.len() % rsi_len;
        let has_ref = p.preprocess && in_rsi == 0;
        let id = bits.get(id_len)?;
        if id == 0 {
            let second_ext = bits.get(1)? == 1;
            if has_ref && sample(&mut out, bits.get(p.bits)?)? {
                break;
            }
            if second_ext {
                let mut i = usize::from(has_ref);
                while i < p.block {
                    let m = bits.fs()?;
                    if m > SE_MAX {
                        return Err(format!("second-extension value {m} out of range"));
                    }
                    // Triangle numbering: m = beta (beta + 1) / 2 + second.
                    let mut beta = 0u64;
                    while (beta + 1) * (beta + 2) / 2 <= m {
                        beta += 1;
                    }
                    let second = m - beta * (beta + 1) / 2;
                    if i % 2 == 0 {
                        if sample(&mut out, beta - second)? {
                            break;
                        }
                        i += 1;
                    }
                    if sample(&mut out, second)? {
                        break;
                    }
                    i += 1;
                }
            } else {
                let mut blocks = bits.fs()? + 1;
                let block_index = (in_rsi + usize::from(has_ref)) / p.block;
                if blocks == 5 {
                    let to_rsi = p.rsi - block_index;
                    let to_segment = 64 - block_index % 64;
                    blocks = to_rsi.min(to_segment) as u64;
                } else if blocks > 5 {
                    blocks -= 1;
                }
                let zeros = (blocks as usize)
                    .checked_mul(p.block)
                    .and_then(|z| z.checked_sub(usize::from(has_ref)))
                    .ok_or("zero-block run overflows")?;
                let zeros = zeros.min(count - out.len());
                out.resize(out.len() + zeros, 0);
            }
        } else if id == uncomp_id {
            for _ in 0..p.block {
                if sample(&mut out, bits.get(p.bits)?)? {
                    break;
                }
            }
        } else {
            let k = (id - 1) as u32;
            let mut n = p.block;
            if has_ref {
                if sample(&mut out, bits.get(p.bits)?)? {
                    break;
                }
                n -= 1;
            }
            for v in fs_buf.iter_mut().take(n) {
                *v = bits.fs()?;
            }
            for &high in fs_buf.iter().take(n) {
                let v = (high << k) | bits.get(k)?;
                if sample(&mut out, v)? {
                    break;
                }
            }
        }
    }
    out.truncate(count);
    Ok(out)
}

/// Undo the unit-delay predictor's residual mapping (CCSDS 121.0-B section 4) in place.
fn unmap(samples: &mut [u32], bits: u32, rsi_len: usize) {
    let xmax = (1u64 << bits) - 1;
    for rsi in samples.chunks_mut(rsi_len) {
        let mut x = rsi[0] as u64;
        for d in rsi.iter_mut().skip(1) {
            let theta = x.min(xmax - x);
            let delta = *d as u64;
            x = if delta <= 2 * theta {
                if delta.is_multiple_of(2) {
                    x + delta / 2
                } else {
                    x - delta.div_ceil(2)
                }
            } else if theta == x {
                delta
            } else {
                xmax - delta
            };
            *d = x as u32;
        }
    }
}

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let (mask, ppb, bpp, ppsl) = match stage.cd {
        [a, b, c, d, ..] => (*a, *b as usize, *c, *d as usize),
        _ => return Err("need 4 client data values".into()),
    };
    let size = input
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("size header truncated")?;
    if size > stage.limit {
        return Err(format!("declared size {size} exceeds the chunk size"));
    }
    // CCSDS blocks are 8, 16, 32 or 64 samples; the szip interface also codes any even
    // block size (libhdf5 writes 2 to 32, and fewer than 8 for small chunks).
    if ppb == 0 || ppb % 2 != 0 || ppb > MAX_BLOCK || ppsl == 0 {
        return Err(format!("{ppb} pixels per block, {ppsl} per scanline"));
    }
    let interleave = bpp == 32 || bpp == 64;
    let bits = if interleave { 8 } else { bpp };
    let pixel = match bits {
        1..=8 => 1,
        9..=16 => 2,
        _ => 4,
    };
    let p = Params {
        bits,
        block: ppb,
        rsi: ppsl.div_ceil(ppb),
        preprocess: mask & NN != 0,
    };
    let rsi_len = p.rsi * p.block;
    // Scanlines are padded to whole blocks when they are not a multiple of the block size.
    let pixels = size / pixel;
    let scanlines = pixels.div_ceil(ppsl);
    let coded = if ppsl % ppb != 0 {
        scanlines
            .checked_mul(rsi_len)
            .filter(|&c| c <= stage.limit)
            .ok_or("padded size overflows")?
    } else {
        pixels
    };
    let mut samples = decode_samples(&input[4..], &p, coded)?;
    if p.preprocess {
        unmap(&mut samples, bits, rsi_len);
    }
    if ppsl % ppb != 0 {
        samples = samples
            .chunks(rsi_len)
            .flat_map(|line| line.iter().take(ppsl).copied())
            .collect();
    }
    let mut out = Vec::with_capacity(size);
    for &s in samples.iter().take(size / pixel) {
        let bytes = s.to_le_bytes();
        if mask & MSB != 0 {
            out.extend(bytes[..pixel].iter().rev());
        } else {
            out.extend_from_slice(&bytes[..pixel]);
        }
    }
    if out.len() != size {
        return Err(format!("decoded {} of {size} bytes", out.len()));
    }
    if interleave {
        let mut plain = vec![0u8; size];
        super::shuffle::unshuffle(&out, &mut plain, bpp as usize / 8);
        out = plain;
    }
    Ok(out)
}
