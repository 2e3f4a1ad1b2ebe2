//! Blosc filter (id 32001): each chunk is one Blosc 1 frame.
//!
//! Frame layout (little-endian):
//! ```text
//! 0 version | 1 codec version | 2 flags | 3 type size | 4 u32 nbytes | 8 u32 block size
//! 12 u32 cbytes | 16 { i32 block start }*nblocks | blocks...
//! ```
//! Flags: bit 0 byte shuffle, bit 1 stored raw after the 16-byte header ("memcpyed"),
//! bit 2 bit shuffle, bit 4 blocks not split, bits 5-7 codec (0 BloscLZ, 1 LZ4/LZ4HC,
//! 2 Snappy, 3 zlib, 4 zstd). A block is `block size` bytes (the last one the remainder);
//! it is split into `type size` streams when the split flag is clear, the type size is at
//! most 16, the block holds at least 128 elements and it is not the last short block. Each
//! stream is a u32 compressed size followed by codec data, or the raw bytes when that size
//! equals the stream's decoded size. After decoding, a block is byte- or bit-unshuffled.

use super::{bitshuffle, shuffle, Stage};

/// Blosc's minimum number of elements for a block to be split into per-byte streams.
const MIN_SPLIT_ELEMS: usize = 128;
/// Largest type size for which blocks are split.
const MAX_SPLITS: usize = 16;
/// BloscLZ references farther than this use the long 16-bit distance form.
const BLOSCLZ_MAX_DISTANCE: usize = 8191;

fn le32(b: &[u8], at: usize) -> Result<usize, String> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes(s.try_into().unwrap_or_default()) as usize)
        .ok_or_else(|| format!("frame truncated at byte {at}"))
}

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let head = input.get(..16).ok_or("frame header truncated")?;
    let (version, flags, typesize) = (head[0], head[2], head[3] as usize);
    let nbytes = le32(head, 4)?;
    let blocksize = le32(head, 8)?;
    // Versions 1-2 come from c-blosc 1.x; c-blosc2 writes 3-5 and keeps this layout unless
    // both shuffle bits are set, which marks its extended header (not supported here).
    if version == 0 || version > 5 || (version > 2 && flags & 0x05 == 0x05) {
        return Err(format!(
            "Blosc format version {version} with flags {flags:#04x} is not a Blosc 1 frame"
        ));
    }
    if nbytes > stage.limit {
        return Err(format!("declared size {nbytes} exceeds the chunk size"));
    }
    if nbytes == 0 {
        return Ok(Vec::new());
    }
    if flags & 0x02 != 0 {
        let raw = input.get(16..16 + nbytes).ok_or("raw frame truncated")?;
        return Ok(raw.to_vec());
    }
    if blocksize == 0 || typesize == 0 {
        return Err("block size or type size 0".into());
    }
    let codec = flags >> 5;
    let dont_split = flags & 0x10 != 0;
    let nblocks = nbytes.div_ceil(blocksize);
    let leftover = nbytes % blocksize;
    let mut out = vec![0u8; nbytes];
    let mut tmp = vec![0u8; blocksize.min(nbytes)];
    let mut zstd = super::zstd::Frames::default();
    for j in 0..nblocks {
        let start = le32(input, 16 + 4 * j)?;
        let bsize = if j == nblocks - 1 && leftover > 0 {
            leftover
        } else {
            blocksize
        };
        let split = !dont_split
            && typesize <= MAX_SPLITS
            && blocksize / typesize >= MIN_SPLIT_ELEMS
            && bsize == blocksize
            && !(j == nblocks - 1 && leftover > 0);
        let nstreams = if split { typesize } else { 1 };
        let neblock = bsize / nstreams;
        let staging = &mut tmp[..bsize];
        let mut ip = start;
        for s in 0..nstreams {
            let csize = le32(input, ip)?;
            ip += 4;
            let src = input
                .get(ip..ip.saturating_add(csize))
                .ok_or_else(|| format!("stream at byte {ip} truncated"))?;
            ip += csize;
            let dst = &mut staging[s * neblock..(s + 1) * neblock];
            if csize == neblock {
                dst.copy_from_slice(src);
            } else {
                let got = decode_stream(codec, src, dst, &mut zstd)?;
                if got != neblock {
                    return Err(format!(
                        "block {j} stream {s}: {got} bytes, expected {neblock}"
                    ));
                }
            }
        }
        let dst = &mut out[j * blocksize..j * blocksize + bsize];
        if flags & 0x01 != 0 && typesize > 1 {
            shuffle::unshuffle(staging, dst, typesize);
        } else if flags & 0x04 != 0 {
            let n = bsize / typesize;
            if version == 2 && n % 8 != 0 {
                dst.copy_from_slice(staging);
            } else {
                let whole = n / 8 * 8;
                bitshuffle::untrans_bit_elem(staging, dst, whole, typesize);
                let off = whole * typesize;
                dst[off..].copy_from_slice(&staging[off..]);
            }
        } else {
            dst.copy_from_slice(staging);
        }
    }
    Ok(out)
}

/// Decode one stream with codec `codec` into `dst`; returns the bytes written.
pub(super) fn decode_stream(
    codec: u8,
    src: &[u8],
    dst: &mut [u8],
    zstd: &mut super::zstd::Frames,
) -> Result<usize, String> {
    match codec {
        0 => blosclz(src, dst),
        1 => super::lz4::decode_block(src, dst),
        3 => super::deflate::zlib_into(src, dst).map_err(|e| format!("zlib stream: {e:?}")),
        4 => {
            let v = zstd.decode(src, dst.len())?;
            dst[..v.len()].copy_from_slice(&v);
            Ok(v.len())
        }
        2 => Err("the Snappy codec is not supported".into()),
        c => Err(format!("unknown codec {c}")),
    }
}

/// BloscLZ, a FastLZ variant. Tokens start with a control byte (the first one's top three
/// bits are a format marker and are ignored):
/// * `ctrl < 32`: a literal run of `ctrl + 1` bytes;
/// * otherwise a match: length code `L = ctrl >> 5`, high distance bits `ctrl & 31`. When
///   `L == 7`, bytes follow and are added to the length until one is not 255. Then a low
///   distance byte. The copy is `L + 2` bytes long from `distance + 1` bytes back; if the
///   low byte is 255 and the high bits are all ones, a 16-bit big-endian distance follows
///   instead, counting from [`BLOSCLZ_MAX_DISTANCE`].
pub(crate) fn blosclz(src: &[u8], dst: &mut [u8]) -> Result<usize, String> {
    let mut ip = 0usize;
    let mut op = 0usize;
    let byte = |ip: &mut usize| -> Result<usize, String> {
        let b = *src.get(*ip).ok_or("BloscLZ stream truncated")?;
        *ip += 1;
        Ok(b as usize)
    };
    let mut ctrl = byte(&mut ip)? & 31;
    loop {
        if ctrl >= 32 {
            let mut len = (ctrl >> 5) - 1;
            let hi = (ctrl & 31) << 8;
            if len == 6 {
                loop {
                    let c = byte(&mut ip)?;
                    len += c;
                    if c != 255 {
                        break;
                    }
                }
            }
            let lo = byte(&mut ip)?;
            len += 3;
            let mut dist = hi + lo;
            if lo == 255 && hi == 31 << 8 {
                dist = (byte(&mut ip)? << 8) + byte(&mut ip)? + BLOSCLZ_MAX_DISTANCE;
            }
            let from = op
                .checked_sub(dist + 1)
                .ok_or("BloscLZ reference before the block start")?;
            if op + len > dst.len() {
                return Err("BloscLZ output overruns the block".into());
            }
            if dist + 1 >= len {
                dst.copy_within(from..from + len, op);
            } else {
                for k in 0..len {
                    dst[op + k] = dst[from + k];
                }
            }
            op += len;
        } else {
            let run = ctrl + 1;
            let lit = src.get(ip..ip + run).ok_or("BloscLZ literal truncated")?;
            let out = dst
                .get_mut(op..op + run)
                .ok_or("BloscLZ output overruns the block")?;
            out.copy_from_slice(lit);
            ip += run;
            op += run;
        }
        if ip >= src.len() {
            return Ok(op);
        }
        ctrl = byte(&mut ip)?;
    }
}
