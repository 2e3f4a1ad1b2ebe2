//! Bitshuffle filter (id 32008, Kiyoshi Masui's bitshuffle, also inside blosc).
//!
//! Client data: `cd = [major, minor, element size, block size (elements, 0 = default),
//! compression (0 none, 2 LZ4, 3 zstd), zstd level]`.
//!
//! The data is cut into blocks of `block size` elements; a final short block is rounded down
//! to a multiple of 8 elements, and the last `n % 8` elements are stored untransformed at
//! the end. Within a block of `n` elements of `s` bytes, the writer stores `8 s` bit rows of
//! `n / 8` bytes: row `8 b + k` holds bit `k` of byte `b` of every element, element `j` at
//! bit `j % 8` of byte `j / 8` (checked against real files).
//!
//! With compression, the chunk starts with a 12-byte header (u64 BE decoded size, u32 BE
//! block size in bytes) and each transformed block is stored as a u32 BE compressed size
//! followed by an LZ4 block or zstd frame; the raw tail follows the last block.

use super::Stage;

/// Elements per block when `cd[3]` is 0: about 8 KiB of data, a multiple of 8, at least 128
/// (the bitshuffle library's default, fixed so that old data stays decodable).
fn default_block(elem: usize) -> usize {
    ((8192 / elem) / 8 * 8).max(128)
}

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let cd = |i: usize| stage.cd.get(i).copied();
    let elem = cd(2).ok_or("missing element size (cd[2])")? as usize;
    if elem == 0 {
        return Err("element size 0".into());
    }
    let compression = cd(4).unwrap_or(0);
    let (total, block, body) = match compression {
        0 => {
            let block = match cd(3).unwrap_or(0) as usize {
                0 => default_block(elem),
                b => b,
            };
            (input.len(), block, input)
        }
        2 | 3 => {
            let head = input.get(..12).ok_or("header truncated")?;
            let total = u64::from_be_bytes(head[..8].try_into().unwrap_or_default());
            let block_bytes = u32::from_be_bytes(head[8..].try_into().unwrap_or_default());
            let total = usize::try_from(total)
                .ok()
                .filter(|&t| t <= stage.limit)
                .ok_or_else(|| format!("declared size {total} exceeds the chunk size"))?;
            (total, block_bytes as usize / elem, &input[12..])
        }
        c => return Err(format!("unknown compression {c}")),
    };
    if total > stage.limit {
        return Err(format!(
            "{total} bytes exceed the chunk size {}",
            stage.limit
        ));
    }
    if total % elem != 0 {
        return Err(format!("{total} bytes are not whole {elem}-byte elements"));
    }
    if block == 0 || block % 8 != 0 {
        return Err(format!(
            "block of {block} elements is not a positive multiple of 8"
        ));
    }
    let count = total / elem;
    let mut out = vec![0u8; total];
    let mut tmp = Vec::new();
    let mut zstd = super::zstd::Frames::default();
    let mut ip = 0usize;
    let mut done = 0usize;
    while count - done >= 8 {
        let n = block.min((count - done) / 8 * 8);
        let nbytes = n * elem;
        let dst = &mut out[done * elem..(done + n) * elem];
        let src: &[u8] = if compression == 0 {
            let s = body.get(ip..ip + nbytes).ok_or("data truncated")?;
            ip += nbytes;
            s
        } else {
            let size = body
                .get(ip..ip + 4)
                .map(|b| u32::from_be_bytes(b.try_into().unwrap_or_default()) as usize)
                .ok_or_else(|| format!("block header at {} truncated", ip + 12))?;
            ip += 4;
            let packed = body
                .get(ip..ip.saturating_add(size))
                .ok_or_else(|| format!("block at {} truncated", ip + 12))?;
            ip += size;
            tmp.resize(nbytes, 0);
            if compression == 2 {
                let got = super::lz4::decode_block(packed, &mut tmp)?;
                if got != nbytes {
                    return Err(format!("block decoded to {got} bytes, expected {nbytes}"));
                }
            } else {
                tmp = zstd.decode(packed, nbytes)?;
                if tmp.len() != nbytes {
                    return Err(format!("block decoded to {} bytes", tmp.len()));
                }
            }
            &tmp
        };
        untrans_bit_elem(src, dst, n, elem);
        done += n;
    }
    let tail = (count - done) * elem;
    let src = body.get(ip..ip + tail).ok_or("tail truncated")?;
    out[done * elem..].copy_from_slice(src);
    Ok(out)
}

/// Transpose an 8x8 bit matrix held in a u64 (byte = row, bit = column).
#[inline]
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00aa_00aa_00aa_00aa;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_cccc_0000_cccc;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_f0f0_f0f0;
    x ^= t ^ (t << 28);
    x
}

/// Undo the bit transposition of one block of `n` elements (`n % 8 == 0`) of `elem` bytes.
/// `src` and `dst` hold `n * elem` bytes.
pub(crate) fn untrans_bit_elem(src: &[u8], dst: &mut [u8], n: usize, elem: usize) {
    let row = n / 8;
    for b in 0..elem {
        let rows = &src[b * 8 * row..(b + 1) * 8 * row];
        for g in 0..row {
            let mut x = 0u64;
            for k in 0..8 {
                x |= (rows[k * row + g] as u64) << (8 * k);
            }
            let y = transpose8(x).to_le_bytes();
            for (i, &v) in y.iter().enumerate() {
                dst[(8 * g + i) * elem + b] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer's side, bit by bit.
    fn trans_naive(src: &[u8], n: usize, elem: usize) -> Vec<u8> {
        let row = n / 8;
        let mut out = vec![0u8; src.len()];
        for j in 0..n {
            for b in 0..elem {
                for k in 0..8 {
                    let bit = (src[j * elem + b] >> k) & 1;
                    out[(b * 8 + k) * row + j / 8] |= bit << (j % 8);
                }
            }
        }
        out
    }

    #[test]
    fn untrans_inverts_naive_transposition() {
        for elem in [1usize, 2, 3, 4, 8, 16] {
            let n = 64;
            let src: Vec<u8> = (0..n * elem).map(|i| (i * 37 + 11) as u8).collect();
            let shuffled = trans_naive(&src, n, elem);
            let mut back = vec![0; src.len()];
            untrans_bit_elem(&shuffled, &mut back, n, elem);
            assert_eq!(back, src, "elem {elem}");
        }
    }

    #[test]
    fn uncompressed_with_tail_and_short_block() {
        // 21 two-byte elements, blocks of 8: two full blocks, then 5 raw elements.
        let src: Vec<u8> = (0..42u8).map(|i| i.wrapping_mul(29)).collect();
        let mut stored = trans_naive(&src[..16], 8, 2);
        stored.extend(trans_naive(&src[16..32], 8, 2));
        stored.extend_from_slice(&src[32..]);
        let cd = [0, 4, 2, 8, 0];
        let stage = Stage {
            cd: &cd,
            limit: 100,
        };
        assert_eq!(decode(&stored, &stage).unwrap(), src);
    }
}
