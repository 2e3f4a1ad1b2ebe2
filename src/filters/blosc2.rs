//! Blosc2 filter (id 32026, hdf5plugin / PyTables `hdf5-blosc2`): each HDF5 chunk is one
//! Blosc2 *contiguous frame* ("cframe", c-blosc2's `README_CFRAME_FORMAT.rst`) holding a
//! super-chunk of Blosc2 chunks (`README_CHUNK_FORMAT.rst`). A bare Blosc2 chunk is accepted
//! too, and a Blosc 1 frame is handed to [`super::blosc`].
//!
//! Frame: a msgpack header (a fixarray whose elements are the magic `"b2frame\0"`, the header
//! size, the frame size, four flag bytes, the uncompressed and compressed data sizes, type,
//! block and chunk sizes, thread counts, a user-meta bool, the filter pipeline as a fixext
//! and the *metalayers*), then the data chunks back to back, then an *offsets chunk* (itself
//! a Blosc2 chunk, at `header size + compressed size`) whose decoded bytes are one
//! little-endian offset per data chunk, counted from the end of the header, and finally a
//! msgpack trailer we do not need. An offset with its top bit set is a whole chunk of a
//! special value (zeros, NaNs, uninitialised) with no bytes stored.
//!
//! Chunk: the 16-byte Blosc header (version, codec version, flags, type size, `nbytes`,
//! block size, `cbytes`) extended to 32 bytes when flags bits 0 and 2 are both set: six
//! filter codes (applied first to last when writing), the user codec, codec meta, six filter
//! meta bytes, a reserved byte and the Blosc2 flags (bit 0 dictionary, bit 3 lazy chunk,
//! bits 4-6 special value for the whole chunk). Flags bit 1 means the data follows the
//! header raw; otherwise `nblocks` i32 block starts follow, and each block is one stream,
//! or `type size` streams when flags bit 4 is clear and the block is not the short last
//! one. A stream is an i32 size then codec data; size 0 is a run of zeros, a negative size
//! with a token byte whose bit 0 is set is a run of the byte `-size`, and a size equal to
//! the stream length means stored raw. Each decoded block then runs the filters last to
//! first: byte shuffle (`meta + 1` times, done in one pass), bit shuffle, delta (XOR with the previous element
//! in block 0 and with block 0 elsewhere) and truncate-precision (nothing to undo).
//!
//! Multi-dimensional HDF5 chunks are written as a *b2nd* array (metalayer `"b2nd"`: shape,
//! chunk shape and block shape): the single Blosc2 chunk holds blocks of the block shape in
//! C order, each in C order, over the chunk shape rounded up to whole blocks. We decode it
//! and copy the array's elements out in plain C order.

use super::msgpack::{Msgpack, Value};
use super::{bitshuffle, shuffle, Stage};

/// The frame magic, at byte 2 after the fixarray and str8 markers.
const FRAME_MAGIC: &[u8] = b"b2frame\0";
/// The extended chunk header length.
const EXT_HEADER: usize = 32;
/// Blosc2 defines at most six filters per chunk.
const MAX_FILTERS: usize = 6;
/// b2nd arrays have at most 8 dimensions (`B2ND_MAX_DIM`).
const MAX_DIMS: usize = 8;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    if input.get(2..10) == Some(FRAME_MAGIC) {
        return decode_frame(input, stage.limit);
    }
    match input.get(2) {
        Some(flags) if flags & 0x05 == 0x05 => decode_chunk(input, stage.limit, "chunk"),
        Some(_) => super::blosc::decode(input, stage),
        None => Err("frame truncated".into()),
    }
}

fn decode_frame(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut rd = Msgpack { buf: input, pos: 0 };
    let header = match rd.value(0)? {
        Value::Array(items) => items,
        _ => return Err("frame header is not a msgpack array".into()),
    };
    let int = |i: usize, what: &str| match header.get(i) {
        Some(Value::Int(v)) => Ok(*v),
        _ => Err(format!("frame header: {what} (element {i}) missing")),
    };
    let header_size = usize::try_from(int(1, "header size")?).map_err(|_| "bad header size")?;
    let frame_size = usize::try_from(int(2, "frame size")?).map_err(|_| "bad frame size")?;
    if frame_size > input.len() || header_size > frame_size {
        return Err(format!(
            "frame of {frame_size} bytes (header {header_size}) but {} stored",
            input.len()
        ));
    }
    let flags = match header.get(3) {
        Some(Value::Str(s)) if s.len() >= 2 => *s,
        _ => return Err("frame header: flags missing".into()),
    };
    if flags[1] & 0x0f != 0 {
        return Err(format!("frame type {} is not contiguous", flags[1] & 0x0f));
    }
    let offset_width = 4usize << ((flags[0] >> 4) & 3);
    if offset_width > 8 {
        return Err(format!("{offset_width}-byte chunk offsets"));
    }
    let nbytes = usize::try_from(int(4, "uncompressed size")?).map_err(|_| "bad size")?;
    let cbytes = usize::try_from(int(5, "compressed size")?).map_err(|_| "bad size")?;
    let chunk_size = match header.get(8) {
        Some(Value::Int(v)) if *v > 0 => usize::try_from(*v).unwrap_or(nbytes),
        _ => nbytes,
    };
    let b2nd = match header.last() {
        Some(Value::Array(meta)) => b2nd_meta(input, meta)?,
        _ => None,
    };
    let typesize = match header.get(6) {
        Some(Value::Int(t)) if *t > 0 => usize::try_from(*t).unwrap_or(0),
        _ => return Err("frame header: type size missing".into()),
    };
    // A b2nd chunk is padded to whole blocks, so it may exceed the HDF5 chunk size.
    let data_limit = match &b2nd {
        Some(nd) => nd.padded_bytes(typesize, limit)?,
        None => limit,
    };
    if nbytes > data_limit {
        return Err(format!(
            "frame declares {nbytes} bytes, past the chunk size"
        ));
    }
    let frame = &input[..frame_size];

    let index_at = header_size
        .checked_add(cbytes)
        .filter(|&a| a < frame_size)
        .ok_or("offsets chunk lies past the frame")?;
    let index = decode_chunk(&frame[index_at..], data_limit, "offsets chunk")?;
    if index.len() % offset_width != 0 {
        return Err(format!("offsets chunk of {} bytes", index.len()));
    }
    let mut out = Vec::with_capacity(nbytes);
    for entry in index.chunks_exact(offset_width) {
        let mut le = [0u8; 8];
        le[..offset_width].copy_from_slice(entry);
        let offset = u64::from_le_bytes(le);
        let remaining = nbytes - out.len();
        let top = entry[offset_width - 1];
        if top & 0x80 != 0 {
            let n = chunk_size.min(remaining);
            let special = top & 0x7f;
            let value = match special {
                // Zeros (0 in the format document, 1 as c-blosc2 writes it) and
                // uninitialised values (4), for which zeros are as good as any.
                0 | 1 | 4 => Special::Zero,
                2 => Special::Nan,
                s => return Err(format!("chunk offset with special value {s}")),
            };
            fill_special(&mut out, n, value, None, typesize)?;
            continue;
        }
        let at = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(header_size))
            .filter(|&a| a < index_at)
            .ok_or_else(|| format!("chunk offset {offset} lies past the data"))?;
        let chunk = decode_chunk(&frame[at..index_at], remaining, "data chunk")?;
        out.extend_from_slice(&chunk);
    }
    if out.len() != nbytes {
        return Err(format!(
            "frame chunks hold {} bytes, header says {nbytes}",
            out.len()
        ));
    }
    match b2nd {
        Some(nd) => nd.to_c_order(&out, limit),
        None => Ok(out),
    }
}

/// Geometry of a b2nd array (its `"b2nd"` metalayer).
struct B2nd {
    shape: Vec<usize>,
    chunk: Vec<usize>,
    block: Vec<usize>,
}

/// Find the `"b2nd"` (or older `"caterva"`) metalayer and read its shapes. The metalayers
/// element is `[idx size, {name: offset}, [bin contents]]`; the offset points at the bin32
/// holding `[version, ndim, [shape], [chunk shape], [block shape], ...]`.
fn b2nd_meta(frame: &[u8], meta: &[Value]) -> Result<Option<B2nd>, String> {
    let Some(Value::Map(names)) = meta.get(1) else {
        return Ok(None);
    };
    let Some(offset) = names.iter().find_map(|(k, v)| match (k, v) {
        (Value::Str(b"b2nd" | b"caterva"), Value::Int(o)) => Some(*o),
        _ => None,
    }) else {
        return Ok(None);
    };
    let pos = usize::try_from(offset).map_err(|_| "bad b2nd metalayer offset")?;
    let mut rd = Msgpack { buf: frame, pos };
    let Value::Bin(content) = rd.value(0)? else {
        return Err("b2nd metalayer is not a bin".into());
    };
    let mut rd = Msgpack {
        buf: content,
        pos: 0,
    };
    let Value::Array(items) = rd.value(0)? else {
        return Err("b2nd metalayer is not an array".into());
    };
    let dims = |i: usize| -> Result<Vec<usize>, String> {
        match items.get(i) {
            Some(Value::Array(v)) if v.len() <= MAX_DIMS => v
                .iter()
                .map(|d| match d {
                    Value::Int(n) => usize::try_from(*n).map_err(|_| "negative b2nd dimension"),
                    _ => Err("b2nd dimension is not an integer"),
                })
                .collect::<Result<_, _>>()
                .map_err(String::from),
            _ => Err(format!("b2nd metalayer element {i} missing")),
        }
    };
    let nd = B2nd {
        shape: dims(2)?,
        chunk: dims(3)?,
        block: dims(4)?,
    };
    let n = nd.shape.len();
    if nd.chunk.len() != n || nd.block.len() != n {
        return Err("b2nd shapes of different ranks".into());
    }
    if nd
        .block
        .iter()
        .zip(&nd.chunk)
        .any(|(&b, &c)| b == 0 || b > c)
    {
        return Err("b2nd block shape does not fit the chunk shape".into());
    }
    if nd.shape.iter().zip(&nd.chunk).any(|(&s, &c)| s > c) {
        return Err("b2nd arrays of several chunks are not supported".into());
    }
    Ok(Some(nd))
}

impl B2nd {
    /// Bytes of the decoded chunk: the chunk shape rounded up to whole blocks. The chunk
    /// shape itself (the HDF5 chunk) must fit `limit`; the padding adds less than one block
    /// per dimension, so at most doubles each.
    fn padded_bytes(&self, typesize: usize, limit: usize) -> Result<usize, String> {
        checked_product(&self.chunk)?
            .checked_mul(typesize)
            .filter(|&b| b <= limit)
            .ok_or("b2nd chunk shape larger than the chunk")?;
        let padded: Vec<usize> = (0..self.chunk.len())
            .map(|i| self.chunk[i].div_ceil(self.block[i]) * self.block[i])
            .collect();
        checked_product(&padded)?
            .checked_mul(typesize)
            .ok_or_else(|| "b2nd chunk too large".into())
    }

    /// Rearrange the decoded b2nd chunk (blocks in C order, each in C order, over the chunk
    /// shape rounded up to whole blocks) into the array's elements in C order.
    fn to_c_order(&self, data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let n = self.shape.len();
        if n == 0 {
            return Ok(data.to_vec());
        }
        let grid: Vec<usize> = (0..n)
            .map(|i| self.chunk[i].div_ceil(self.block[i]))
            .collect();
        let block_items = checked_product(&self.block)?;
        let ext_items = checked_product(&grid)?
            .checked_mul(block_items)
            .ok_or("b2nd chunk too large")?;
        if ext_items == 0 || !data.len().is_multiple_of(ext_items) {
            return Err(format!(
                "b2nd chunk of {} bytes is not a whole number of {ext_items} items",
                data.len()
            ));
        }
        let item = data.len() / ext_items;
        let total = checked_product(&self.shape)?
            .checked_mul(item)
            .filter(|&t| t <= limit)
            .ok_or("b2nd array larger than the chunk")?;
        let mut out = Vec::with_capacity(total);
        if total == 0 {
            return Ok(out);
        }
        // Walk the array's rows (every index but the last), copying runs along the last
        // dimension that stay inside one block.
        let last = n - 1;
        let mut idx = vec![0usize; n];
        loop {
            let mut j = 0;
            while j < self.shape[last] {
                let run = (self.block[last] - j % self.block[last]).min(self.shape[last] - j);
                let (mut blk, mut inner) = (0usize, 0usize);
                for d in 0..n {
                    let i = if d == last { j } else { idx[d] };
                    blk = blk * grid[d] + i / self.block[d];
                    inner = inner * self.block[d] + i % self.block[d];
                }
                let at = (blk * block_items + inner) * item;
                out.extend_from_slice(&data[at..at + run * item]);
                j += run;
            }
            // Next row: odometer over dimensions 0..last.
            let mut d = last;
            loop {
                if d == 0 {
                    return Ok(out);
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

fn checked_product(v: &[usize]) -> Result<usize, String> {
    v.iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or_else(|| "b2nd shape overflows".to_string())
}

#[derive(Clone, Copy)]
enum Special {
    Zero,
    Nan,
    Value,
}

/// Append `n` bytes of a special value; `value` holds one element for [`Special::Value`].
fn fill_special(
    out: &mut Vec<u8>,
    n: usize,
    kind: Special,
    value: Option<&[u8]>,
    typesize: usize,
) -> Result<(), String> {
    match kind {
        Special::Zero => out.resize(out.len() + n, 0),
        Special::Nan => {
            // The quiet NaNs C's nanf("") / nan("") give, little-endian.
            let nan: &[u8] = match typesize {
                4 => &[0, 0, 0xc0, 0x7f],
                8 => &[0, 0, 0, 0, 0, 0, 0xf8, 0x7f],
                t => return Err(format!("NaN run with type size {t}")),
            };
            if !n.is_multiple_of(nan.len()) {
                return Err("NaN run not a whole number of elements".into());
            }
            out.extend(nan.iter().cycle().take(n));
        }
        Special::Value => {
            let v = value
                .filter(|v| !v.is_empty())
                .ok_or("repeated value missing")?;
            if !n.is_multiple_of(v.len()) {
                return Err("value run not a whole number of elements".into());
            }
            out.extend(v.iter().cycle().take(n));
        }
    }
    Ok(())
}

fn le32(b: &[u8], at: usize) -> Result<i32, String> {
    b.get(at..at.saturating_add(4))
        .and_then(|s| s.try_into().ok())
        .map(i32::from_le_bytes)
        .ok_or_else(|| format!("chunk truncated at byte {at}"))
}

fn usize_of(v: i32, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("negative {what} {v}"))
}

/// Decode one Blosc2 chunk (extended header) of at most `limit` bytes; `what` names it in
/// messages. Blosc 1 headers are handed to the Blosc 1 decoder.
fn decode_chunk(src: &[u8], limit: usize, what: &str) -> Result<Vec<u8>, String> {
    let head = src
        .get(..16)
        .ok_or_else(|| format!("{what}: header truncated"))?;
    let (flags, typesize) = (head[2], head[3] as usize);
    if flags & 0x05 != 0x05 {
        let stage = Stage { cd: &[], limit };
        let n = usize_of(le32(head, 12)?, "cbytes")?;
        return super::blosc::decode(src.get(..n).ok_or("chunk truncated")?, &stage);
    }
    let nbytes = usize_of(le32(head, 4)?, "nbytes")?;
    let blocksize = usize_of(le32(head, 8)?, "block size")?;
    let cbytes = usize_of(le32(head, 12)?, "cbytes")?;
    if nbytes > limit {
        return Err(format!(
            "{what} declares {nbytes} bytes, past the chunk size"
        ));
    }
    let src = src
        .get(..cbytes)
        .filter(|s| s.len() >= EXT_HEADER)
        .ok_or_else(|| format!("{what} of {cbytes} bytes truncated"))?;
    let filters = &src[16..16 + MAX_FILTERS];
    let filters_meta = &src[24..24 + MAX_FILTERS];
    let b2flags = src[31];
    let mut out = Vec::with_capacity(nbytes);
    match (b2flags >> 4) & 7 {
        0 => {}
        1 | 4 => return fill_special(&mut out, nbytes, Special::Zero, None, typesize).map(|_| out),
        2 => return fill_special(&mut out, nbytes, Special::Nan, None, typesize).map(|_| out),
        3 => {
            let v = src.get(EXT_HEADER..EXT_HEADER + typesize);
            fill_special(&mut out, nbytes, Special::Value, v, typesize)?;
            return Ok(out);
        }
        s => return Err(format!("{what}: special value kind {s}")),
    }
    if flags & 0x02 != 0 {
        let raw = src
            .get(EXT_HEADER..EXT_HEADER + nbytes)
            .ok_or_else(|| format!("{what}: stored bytes truncated"))?;
        return Ok(raw.to_vec());
    }
    if b2flags & 0x01 != 0 {
        return Err(format!("{what}: codec dictionaries are not supported"));
    }
    if b2flags & 0x08 != 0 {
        return Err(format!("{what}: lazy chunk in a stored frame"));
    }
    let codec = flags >> 5;
    if codec > 4 {
        return Err(format!("{what}: user-defined codec {}", src[22]));
    }
    if nbytes == 0 {
        return Ok(out);
    }
    if blocksize == 0 || typesize == 0 {
        return Err(format!("{what}: block size or type size 0"));
    }
    let nblocks = nbytes.div_ceil(blocksize);
    if nblocks > src.len() / 4 {
        return Err(format!(
            "{what}: {nblocks} blocks cannot fit {cbytes} bytes"
        ));
    }
    out.resize(nbytes, 0);
    let dont_split = flags & 0x10 != 0;
    let mut buf = vec![0u8; blocksize.min(nbytes)];
    let mut tmp = vec![0u8; buf.len()];
    let mut zstd = super::zstd::Frames::default();
    for j in 0..nblocks {
        let start = usize_of(le32(src, EXT_HEADER + 4 * j)?, "block start")?;
        let bsize = blocksize.min(nbytes - j * blocksize);
        let leftover = bsize < blocksize;
        let nstreams = if dont_split || leftover { 1 } else { typesize };
        let neblock = bsize / nstreams;
        if neblock == 0 || neblock * nstreams != bsize {
            return Err(format!(
                "{what}: block {j} of {bsize} bytes in {nstreams} streams"
            ));
        }
        let block = &mut buf[..bsize];
        let mut ip = start;
        for s in 0..nstreams {
            let csize = le32(src, ip)?;
            ip += 4;
            let dst = &mut block[s * neblock..(s + 1) * neblock];
            if csize == 0 {
                dst.fill(0);
            } else if csize < 0 {
                let token = *src.get(ip).ok_or("stream token truncated")?;
                ip += 1;
                if token & 1 == 0 || csize < -255 {
                    return Err(format!("{what}: stream token {token:#x} size {csize}"));
                }
                dst.fill(csize.unsigned_abs() as u8);
            } else {
                let n = csize as usize;
                let data = src
                    .get(ip..ip.saturating_add(n))
                    .ok_or_else(|| format!("{what}: stream at byte {ip} truncated"))?;
                ip += n;
                if n == neblock {
                    dst.copy_from_slice(data);
                } else {
                    let got = super::blosc::decode_stream(codec, data, dst, &mut zstd)?;
                    if got != neblock {
                        return Err(format!(
                            "{what}: block {j} stream {s} gave {got} bytes, expected {neblock}"
                        ));
                    }
                }
            }
        }
        let tmp = &mut tmp[..bsize];
        for i in (0..MAX_FILTERS).rev() {
            match filters[i] {
                0 | 4 => {}
                1 => {
                    let rounds = u32::from(filters_meta[i]) + 1;
                    shuffle::unshuffle_rounds(block, tmp, typesize, rounds);
                    block.copy_from_slice(tmp);
                }
                2 => {
                    let n = bsize / typesize;
                    // Format version 2 left blocks of a count not divisible by 8 alone.
                    let whole = if head[0] == 2 && n % 8 != 0 {
                        0
                    } else {
                        n / 8 * 8
                    };
                    tmp.copy_from_slice(block);
                    bitshuffle::untrans_bit_elem(block, tmp, whole, typesize);
                    block.copy_from_slice(tmp);
                }
                3 => undelta(block, &out, j, typesize),
                f => return Err(format!("{what}: filter {f} is not supported")),
            }
        }
        out[j * blocksize..j * blocksize + bsize].copy_from_slice(block);
    }
    Ok(out)
}

/// Undo Blosc2's delta filter on block `j`: block 0 was XORed element-wise with its
/// previous element, later blocks with the same position of (decoded) block 0. Elements of
/// 1, 2, 4 or 8 bytes are XORed as such, other sizes as 8-byte words when they are a
/// multiple of 8 and as bytes otherwise; XOR is byte-wise, so a width is all that matters.
fn undelta(block: &mut [u8], out: &[u8], j: usize, typesize: usize) {
    let w = match typesize {
        1 | 2 | 4 | 8 => typesize,
        t if t % 8 == 0 => 8,
        _ => 1,
    };
    let end = block.len() / w * w;
    if j == 0 {
        for k in w..end {
            block[k] ^= block[k - w];
        }
    } else {
        for (b, r) in block[..end].iter_mut().zip(out) {
            *b ^= r;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An extended (32-byte) chunk header.
    fn header(
        flags: u8,
        typesize: u8,
        nbytes: i32,
        blocksize: i32,
        filters: [u8; 6],
        b2: u8,
    ) -> Vec<u8> {
        let mut h = vec![5, 1, flags | 0x05, typesize];
        for v in [nbytes, blocksize, 0] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h.extend_from_slice(&filters);
        h.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0]);
        h.push(b2);
        h
    }

    fn finish(mut c: Vec<u8>) -> Vec<u8> {
        let n = c.len() as i32;
        c[12..16].copy_from_slice(&n.to_le_bytes());
        c
    }

    #[test]
    fn special_and_raw_chunks() {
        let zeros = finish(header(0, 4, 16, 16, [0; 6], 0x10));
        assert_eq!(decode_chunk(&zeros, 16, "t").unwrap(), [0; 16]);
        let mut value = header(0, 2, 6, 6, [0; 6], 0x30);
        value.extend_from_slice(&[0xab, 0xcd]);
        let value = finish(value);
        assert_eq!(
            decode_chunk(&value, 6, "t").unwrap(),
            [0xab, 0xcd].repeat(3)
        );
        let nans = finish(header(0, 8, 16, 16, [0; 6], 0x20));
        let got = decode_chunk(&nans, 16, "t").unwrap();
        assert!(f64::from_le_bytes(got[8..].try_into().unwrap()).is_nan());
        let mut raw = header(0x02, 1, 3, 3, [0; 6], 0);
        raw.extend_from_slice(&[7, 8, 9]);
        assert_eq!(
            decode_chunk(&finish(raw.clone()), 3, "t").unwrap(),
            [7, 8, 9]
        );
        // Past the limit, and truncated.
        assert!(decode_chunk(&finish(raw.clone()), 2, "t").is_err());
        let mut short = finish(raw);
        short.pop();
        assert!(decode_chunk(&short, 3, "t").is_err());
    }

    #[test]
    fn streams_runs_split_and_shuffle() {
        // Two blocks of 4 bytes, type size 2, split into 2 streams each and byte-shuffled:
        // block 0 streams: zeros, run of 0x11; block 1 streams: raw [1, 2], run of 0x22.
        let mut c = header(0, 2, 8, 4, [0, 0, 0, 0, 0, 1], 0);
        let b0 = c.len() + 8;
        let b1 = b0 + 4 + 5;
        c.extend_from_slice(&(b0 as i32).to_le_bytes());
        c.extend_from_slice(&(b1 as i32).to_le_bytes());
        c.extend_from_slice(&0i32.to_le_bytes());
        c.extend_from_slice(&(-0x11i32).to_le_bytes());
        c.push(1);
        c.extend_from_slice(&2i32.to_le_bytes());
        c.extend_from_slice(&[1, 2]);
        c.extend_from_slice(&(-0x22i32).to_le_bytes());
        c.push(1);
        let got = decode_chunk(&finish(c), 8, "t").unwrap();
        assert_eq!(got, [0, 0x11, 0, 0x11, 1, 0x22, 2, 0x22]);
    }

    #[test]
    fn delta_references_block_zero() {
        let out = [1u8, 2, 3, 4];
        let mut b0 = [1u8, 2, 1 ^ 3, 2 ^ 4];
        undelta(&mut b0, &[], 0, 2);
        assert_eq!(b0, [1, 2, 3, 4]);
        let mut b1 = [5 ^ 1, 6 ^ 2, 7 ^ 3, 8 ^ 4, 9];
        undelta(&mut b1, &out, 1, 4);
        assert_eq!(b1, [5, 6, 7, 8, 9]);
    }

    #[test]
    fn b2nd_blocks_to_c_order() {
        // A 3 x 3 array in 2 x 2 blocks over a 4 x 4 padded chunk of u8: value = 10 * row +
        // column, padding 0xff.
        let nd = B2nd {
            shape: vec![3, 3],
            chunk: vec![3, 3],
            block: vec![2, 2],
        };
        assert_eq!(nd.padded_bytes(1, 9).unwrap(), 16);
        assert!(nd.padded_bytes(1, 8).is_err());
        let p = 0xff;
        let data = [
            0, 1, 10, 11, // block (0, 0)
            2, p, 12, p, // block (0, 1)
            20, 21, p, p, // block (1, 0)
            22, p, p, p, // block (1, 1)
        ];
        let got = nd.to_c_order(&data, 9).unwrap();
        assert_eq!(got, [0, 1, 2, 10, 11, 12, 20, 21, 22]);
        assert!(nd.to_c_order(&data[..15], 9).is_err());
    }

    #[test]
    fn bare_frame_magic_is_an_error() {
        // A frame magic with nothing else is an error, not a panic.
        let mut f = vec![0x9e, 0xa8];
        f.extend_from_slice(FRAME_MAGIC);
        assert!(decode(&f, &Stage { cd: &[], limit: 64 }).is_err());
    }
}
