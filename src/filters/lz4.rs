//! LZ4 filter (id 32004, the HDF5 LZ4 plugin). Framing, all integers big-endian:
//!
//! ```text
//! u64 total decoded size | u32 block size | { u32 stored size | block }*
//! ```
//!
//! Each block decodes to `block size` bytes (the last to the remainder). A block whose stored
//! size equals its decoded size was incompressible and is stored raw; otherwise it is an LZ4
//! block (no frame header). `cd[0]` is the block size chosen when writing (0 = default).

use super::Stage;

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let total = declared(input, stage.limit)?;
    let mut out = vec![0u8; total];
    decode_into(input, &mut out)?;
    Ok(out)
}

/// The decoded size the header declares, if at most `limit`.
fn declared(input: &[u8], limit: usize) -> Result<usize, String> {
    let total = input
        .get(..8)
        .map(|b| u64::from_be_bytes(b.try_into().unwrap_or_default()))
        .ok_or("header truncated")?;
    usize::try_from(total)
        .ok()
        .filter(|&t| t <= limit)
        .ok_or_else(|| format!("declared size {total} exceeds the chunk size {limit}"))
}

/// Decode into `out`, which must hold the declared size; the number of bytes written.
pub(crate) fn decode_into(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    let total = declared(input, out.len())?;
    let block = be32(input, 8).ok_or("header truncated")? as usize;
    if block == 0 && total > 0 {
        return Err("block size 0".into());
    }
    let mut ip = 12usize;
    let mut op = 0usize;
    while op < total {
        let raw_len = block.min(total - op);
        let stored = be32(input, ip).ok_or_else(|| format!("block header at {ip} truncated"))?;
        ip += 4;
        let src = input
            .get(ip..ip.saturating_add(stored as usize))
            .ok_or_else(|| format!("block at {ip} truncated"))?;
        ip += src.len();
        let dst = &mut out[op..op + raw_len];
        if src.len() == raw_len {
            dst.copy_from_slice(src);
        } else {
            let n = decode_block(src, dst)?;
            if n != raw_len {
                return Err(format!("block decoded to {n} bytes, expected {raw_len}"));
            }
        }
        op += raw_len;
    }
    Ok(total)
}

/// Decode one raw LZ4 block into `dst`; returns the number of bytes written.
pub(crate) fn decode_block(src: &[u8], dst: &mut [u8]) -> Result<usize, String> {
    lz4_flex::block::decompress_into(src, dst).map_err(|e| format!("lz4 block: {e}"))
}
