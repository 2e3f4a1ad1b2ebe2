//! Encoders, the writer's side of a few filters, for the Zarr view: a chunk whose stored
//! form the array's one codec chain cannot describe (a filter its mask skipped, a partial
//! edge chunk stored unfiltered) is encoded again from its decoded bytes with that chain,
//! so that every chunk key of the array decodes with the same codecs.
//!
//! Such chunks are rare (a filter skipped because it did not pay off), so the settings are
//! the cheapest each format allows, not the smallest output: zlib stores its blocks (level
//! 0), zstd and bzip2 use level 1, and Blosc writes a "memcpyed" frame (its 16-byte header
//! and the bytes as they are, which every Blosc 1 decoder copies out). Each encoder's output
//! decodes with the matching decoder of this module's parent, and with numcodecs (checked by
//! the Zarr view's tests and fixture script).

use std::io::Write;

use crate::io::checksum::fletcher32 as checksum;

/// A zlib stream (RFC 1950) of `data` in stored blocks.
pub fn zlib(data: &[u8]) -> Result<Vec<u8>, String> {
    let cap = data.len().saturating_add(data.len() / 16_000 * 5 + 64);
    let mut e =
        flate2::write::ZlibEncoder::new(Vec::with_capacity(cap), flate2::Compression::none());
    e.write_all(data).map_err(|e| format!("zlib: {e}"))?;
    e.finish().map_err(|e| format!("zlib: {e}"))
}

/// `data` byte-shuffled over elements of `elem` bytes (HDF5's shuffle; trailing bytes that
/// make no whole element stay at the end, as HDF5 leaves them).
pub fn shuffle(data: &[u8], elem: usize) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    super::shuffle::shuffle(data, &mut out, elem);
    out
}

/// `data` followed by its Fletcher-32 checksum, 4 bytes little-endian (HDF5's fletcher32).
pub fn fletcher32(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len().saturating_add(4));
    out.extend_from_slice(data);
    out.extend_from_slice(&checksum(data).to_le_bytes());
    out
}

/// One zstd frame of `data` (level 1, content size recorded).
pub fn zstd(data: &[u8]) -> Result<Vec<u8>, String> {
    ::zstd::bulk::compress(data, 1).map_err(|e| format!("zstd: {e}"))
}

/// One bzip2 stream of `data` (blocks of 100 kB).
pub fn bzip2(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut e = ::bzip2::write::BzEncoder::new(Vec::new(), ::bzip2::Compression::new(1));
    e.write_all(data).map_err(|e| format!("bzip2: {e}"))?;
    e.finish().map_err(|e| format!("bzip2: {e}"))
}

/// A Blosc 1 frame holding `data` as it is (flag "memcpyed"), for elements of `typesize`
/// bytes (1-255; recorded only). Blosc counts sizes in 32 bits: larger data is refused.
pub fn blosc_memcpy(data: &[u8], typesize: u8) -> Result<Vec<u8>, String> {
    const HEADER: usize = 16;
    let nbytes = u32::try_from(data.len())
        .ok()
        .filter(|&n| n <= u32::MAX - HEADER as u32)
        .ok_or_else(|| format!("blosc: {} bytes do not fit one frame", data.len()))?;
    let mut out = Vec::with_capacity(data.len() + HEADER);
    // Format version 2 (c-blosc 1.x), BloscLZ format version 1, flags: memcpyed.
    out.extend_from_slice(&[2, 1, 0x02, typesize.max(1)]);
    out.extend_from_slice(&nbytes.to_le_bytes());
    // Block size: the whole buffer (a decoder of a memcpyed frame only checks it is sane).
    out.extend_from_slice(&nbytes.max(1).to_le_bytes());
    out.extend_from_slice(&(nbytes + HEADER as u32).to_le_bytes());
    out.extend_from_slice(data);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::{ids, Pipeline};
    use crate::format::messages::filter_pipeline::{FilterPipeline, FilterSpec};

    fn decode(id: u16, cd: &[u32], data: Vec<u8>, len: usize) -> Vec<u8> {
        let p = Pipeline::new(&FilterPipeline {
            filters: vec![FilterSpec {
                id,
                flags: 0,
                name: None,
                client_data: cd.to_vec(),
            }],
        });
        p.decode(data, 0, len, 0).unwrap()
    }

    /// Every encoder's output decodes, with the filter decoders, to its input: odd lengths,
    /// empty input, and more than one zlib stored block.
    #[test]
    fn encoders_round_trip_through_the_decoders() {
        for n in [0usize, 1, 7, 1000, 200_001] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
            assert_eq!(decode(ids::DEFLATE, &[0], zlib(&data).unwrap(), n), data);
            assert_eq!(decode(ids::SHUFFLE, &[4], shuffle(&data, 4), n), data);
            assert_eq!(decode(ids::FLETCHER32, &[], fletcher32(&data), n), data);
            assert_eq!(decode(ids::ZSTD, &[1], zstd(&data).unwrap(), n), data);
            assert_eq!(decode(ids::BZIP2, &[1], bzip2(&data).unwrap(), n), data);
            let b = blosc_memcpy(&data, 4).unwrap();
            assert_eq!(b.len(), n + 16);
            assert_eq!(decode(ids::BLOSC, &[2, 2, 4, n as u32], b, n), data);
        }
    }
}
