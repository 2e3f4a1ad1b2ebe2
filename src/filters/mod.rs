//! The filter pipeline: decode a stored chunk by running the dataset's filters in reverse
//! order, skipping those whose bit is set in the chunk's filter mask, and checking that the
//! output is exactly the expected chunk size (no decompression bombs).
//!
//! The filter pipeline message (spec IV.A.2.l) lists filters in the order the writer applied
//! them; a reader undoes them last-first. Bit `i` of a chunk's 32-bit filter mask says filter
//! `i` was *not* applied to that chunk (an optional filter that failed or did not pay off,
//! e.g. LZF on random bytes), so the reader must skip it too.
//!
//! Every stage is given an output limit: the expected chunk size plus [`STAGE_SLACK`]. A
//! decoder stops and fails as soon as its output would pass that limit, whatever the stored
//! data claims about its own size, so a hostile chunk cannot make us allocate more than the
//! dataset's chunk size justifies. Each codec lives in its own file and returns a plain
//! `Result<Vec<u8>, String>`; this module turns the message into [`Error::Filter`] naming the
//! filter and the chunk address.
//!
//! Decoded here: deflate (1), shuffle (2), fletcher32 (3), szip (4), nbit (5), scaleoffset
//! (6), bzip2 (307), lzf (32000), blosc 1 (32001), lz4 (32004), bitshuffle (32008) and zstd
//! (32015), blosc2 (32026), zfp (32013, int and float fields of 1-4 dimensions, from
//! little- or big-endian writers) and lzo (305, PyTables). Every other id, notably sz/sz3
//! (32017/32024), is reported as [`Error::UnknownFilter`].

use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::format::messages::filter_pipeline::{FilterPipeline, FilterSpec};

mod bits;
mod bitshuffle;
mod blosc;
mod blosc2;
mod bzip2;
mod deflate;
pub mod encode;
mod fletcher32;
mod lz4;
mod lzf;
mod lzo;
mod msgpack;
mod nbit;
mod scaleoffset;
pub mod shuffle;
mod szip;
mod zfp;
mod zstd;

#[cfg(test)]
mod tests;

/// How much an intermediate stage may exceed the final chunk size. Fletcher-32 adds 4 bytes
/// per instance and the pipeline holds at most 32 filters; nothing else legitimately grows
/// the data between stages.
pub const STAGE_SLACK: usize = 1024;

/// Filter ids as registered with The HDF Group.
pub mod ids {
    pub const DEFLATE: u16 = 1;
    pub const SHUFFLE: u16 = 2;
    pub const FLETCHER32: u16 = 3;
    pub const SZIP: u16 = 4;
    pub const NBIT: u16 = 5;
    pub const SCALEOFFSET: u16 = 6;
    pub const LZO: u16 = 305;
    pub const BZIP2: u16 = 307;
    pub const LZF: u16 = 32000;
    pub const BLOSC: u16 = 32001;
    pub const LZ4: u16 = 32004;
    pub const BITSHUFFLE: u16 = 32008;
    pub const ZFP: u16 = 32013;
    pub const ZSTD: u16 = 32015;
    pub const SZ: u16 = 32017;
    pub const SZ3: u16 = 32024;
    pub const BLOSC2: u16 = 32026;
}

/// Registered name of a filter id (for messages and `inspect`).
pub fn filter_name(id: u16) -> &'static str {
    match id {
        1 => "deflate",
        2 => "shuffle",
        3 => "fletcher32",
        4 => "szip",
        5 => "nbit",
        6 => "scaleoffset",
        305 => "lzo",
        307 => "bzip2",
        32000 => "lzf",
        32001 => "blosc",
        32002 => "mafisc",
        32003 => "snappy",
        32004 => "lz4",
        32005 => "apax",
        32006 => "cbf",
        32007 => "jpeg-xr",
        32008 => "bitshuffle",
        32009 => "spdp",
        32010 => "lpc-rice",
        32011 => "ccsds-123",
        32012 => "jpeg-ls",
        32013 => "zfp",
        32014 => "fpzip",
        32015 => "zstd",
        32016 => "b3d",
        32017 => "sz",
        32018 => "fcidecomp",
        32019 => "jpeg",
        32020 => "vbz",
        32022 => "bitgroom",
        32023 => "granular-bitround",
        32024 => "sz3",
        32025 => "delta-rice",
        32026 => "blosc2",
        32028 => "sperr",
        32029 => "htj2k",
        _ => "unknown",
    }
}

/// True when this build can decode filter `id`.
pub fn is_supported(id: u16) -> bool {
    use ids::*;
    matches!(
        id,
        DEFLATE
            | SHUFFLE
            | FLETCHER32
            | SZIP
            | NBIT
            | SCALEOFFSET
            | BZIP2
            | LZF
            | BLOSC
            | LZ4
            | BITSHUFFLE
            | ZSTD
            | BLOSC2
            | ZFP
            | LZO
    )
}

/// What one decoding stage knows besides its input.
pub(crate) struct Stage<'a> {
    /// The filter's client data values.
    pub cd: &'a [u32],
    /// The most bytes this stage may output.
    pub limit: usize,
}

/// A dataset's decode pipeline.
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    spec: FilterPipeline,
}

impl Pipeline {
    pub fn new(spec: &FilterPipeline) -> Pipeline {
        Pipeline { spec: spec.clone() }
    }

    /// True when there are no filters.
    pub fn is_empty(&self) -> bool {
        self.spec.filters.is_empty()
    }

    /// [`crate::error::Error::UnknownFilter`] if some filter cannot be decoded by this build.
    /// Optional filters count too: any chunk may have had them applied.
    pub fn check_supported(&self) -> Result<()> {
        match self.spec.filters.iter().find(|f| !is_supported(f.id)) {
            Some(f) => Err(unknown(f)),
            None => Ok(()),
        }
    }

    /// Decode one stored chunk read from `chunk_addr` (for messages). The result is exactly
    /// `expected_len` bytes or an error.
    pub fn decode(
        &self,
        data: Vec<u8>,
        filter_mask: u32,
        expected_len: usize,
        chunk_addr: u64,
    ) -> Result<Vec<u8>> {
        let mut out = vec![0u8; expected_len];
        self.decode_with(data, filter_mask, &mut out, chunk_addr, &mut Vec::new())?;
        Ok(out)
    }

    /// Decode the stored chunk at `chunk_addr`, `stored` bytes, read from `storage`, into
    /// `out`, which must come out exactly full. The last stage writes straight into `out`
    /// (the chunk cache's shared buffer) where its codec can: deflate, shuffle, lzf, lz4 and
    /// zstd. The stored bytes and the intermediate stages live in buffers of `pool` reused
    /// from chunk to chunk: a fresh multi-MiB buffer per stage costs page faults and zeroing
    /// that take as long as the decoding itself. The stored bytes are read once
    /// ([`crate::io::Storage::read_data_once`]): the caller keeps the decoded chunk.
    pub fn decode_from(
        &self,
        storage: &crate::io::Storage,
        chunk_addr: u64,
        stored: u64,
        filter_mask: u32,
        out: &mut [u8],
        pool: &ScratchPool,
    ) -> Result<()> {
        let n = usize::try_from(stored)
            .ok()
            .filter(|_| stored <= storage.available(chunk_addr))
            .ok_or_else(|| {
                Error::truncated("chunk", chunk_addr, stored, storage.available(chunk_addr))
            })?;
        if !self.applies(filter_mask) && n == out.len() {
            // Every filter skipped (an optional one that did not pay off, as LZF on noisy
            // floats): the stored bytes are the chunk.
            return storage.read_data_once(chunk_addr, out, "chunk");
        }
        // Both buffers get room for the largest stage up front, so that neither is
        // reallocated (and its old contents copied) when the stages swap them.
        let room = n.max(out.len().saturating_add(STAGE_SLACK));
        let mut input = sized(pool.take(), room);
        let mut spare = sized(pool.take(), room);
        // Growing zeroes only the new tail; a reused buffer is truncated, not cleared.
        input.resize(n, 0);
        if let Err(e) = storage.read_data_once(chunk_addr, &mut input, "chunk") {
            pool.give(input);
            pool.give(spare);
            return Err(e);
        }
        let r = self.decode_with(input, filter_mask, out, chunk_addr, &mut spare);
        pool.give(spare);
        pool.give(r?);
        Ok(())
    }

    /// True when some filter runs on a chunk with `filter_mask`.
    fn applies(&self, filter_mask: u32) -> bool {
        (0..self.spec.filters.len()).any(|i| !skipped(filter_mask, i))
    }

    /// The stage loop, ending in `out` (its length is the expected chunk size). `spare` is a
    /// buffer stages may write into (DEFLATE and SHUFFLE do); on return it holds a buffer the
    /// caller may reuse, and so does the returned vector.
    fn decode_with(
        &self,
        data: Vec<u8>,
        filter_mask: u32,
        out: &mut [u8],
        chunk_addr: u64,
        spare: &mut Vec<u8>,
    ) -> Result<Vec<u8>> {
        let expected_len = out.len();
        let limit = expected_len.saturating_add(STAGE_SLACK);
        let skipped = |i: usize| skipped(filter_mask, i);
        // The last stage to run (the first filter the writer applied).
        let last = (0..self.spec.filters.len()).find(|&i| !skipped(i));
        let mut buf = data;
        let mut last_id = None;
        let mismatch = |id: Option<u16>, got: usize| {
            let id_ = id.unwrap_or(0);
            Error::Filter {
                id: id_,
                name: if id.is_some() {
                    filter_name(id_)
                } else {
                    "none applied"
                },
                addr: chunk_addr,
                detail: format!("decoded chunk has {got} bytes, expected {expected_len}"),
            }
        };
        for (i, spec) in self.spec.filters.iter().enumerate().rev() {
            if skipped(i) {
                continue;
            }
            let stage = Stage {
                cd: &spec.client_data,
                limit,
            };
            let fail = |e: StageError| match e {
                StageError::Unknown => unknown(spec),
                StageError::Failed(detail) => Error::Filter {
                    id: spec.id,
                    name: filter_name(spec.id),
                    addr: chunk_addr,
                    detail,
                },
            };
            if Some(i) == last {
                if let Some(r) = decode_final(spec.id, &buf, &stage, out) {
                    let n = r.map_err(fail)?;
                    if n != expected_len {
                        return Err(mismatch(Some(spec.id), n));
                    }
                    return Ok(buf);
                }
            }
            buf = decode_reusing(spec.id, buf, &stage, spare).map_err(fail)?;
            last_id = Some(spec.id);
        }
        if buf.len() != expected_len {
            return Err(mismatch(last_id, buf.len()));
        }
        out.copy_from_slice(&buf);
        Ok(buf)
    }
}

/// The last stage written straight into `out` (the final chunk buffer): the number of bytes
/// it holds when done, or `None` if filter `id` has no such path (the caller then decodes
/// into a vector and copies). Output beyond `out` is an error, never a write.
fn decode_final(
    id: u16,
    data: &[u8],
    stage: &Stage,
    out: &mut [u8],
) -> Option<std::result::Result<usize, StageError>> {
    let r = match id {
        ids::DEFLATE => deflate::zlib_into(data, out).map_err(|e| deflate::message(e, out.len())),
        ids::SHUFFLE => {
            let Some(&elem) = stage.cd.first() else {
                return Some(Err("missing element size (cd[0])".to_string().into()));
            };
            if data.len() == out.len() {
                shuffle::unshuffle(data, out, elem as usize);
            }
            Ok(data.len())
        }
        ids::LZF => lzf::decode_into(data, out),
        ids::LZ4 => lz4::decode_into(data, out),
        ids::ZSTD => zstd::decode_into(data, out),
        _ => return None,
    };
    Some(r.map_err(StageError::Failed))
}

/// True when bit `i` of `filter_mask` says filter `i` was not applied. Only 32 filters fit
/// the mask (the format's maximum pipeline length).
fn skipped(filter_mask: u32, i: usize) -> bool {
    i < 32 && filter_mask & (1 << i) != 0
}

enum StageError {
    Unknown,
    Failed(String),
}

impl From<String> for StageError {
    fn from(s: String) -> Self {
        StageError::Failed(s)
    }
}

fn unknown(f: &FilterSpec) -> Error {
    let name = match (&f.name, filter_name(f.id)) {
        (Some(n), "unknown") if !n.is_empty() => n.clone(),
        (_, n) => n.to_string(),
    };
    Error::UnknownFilter { id: f.id, name }
}

/// The buffers [`Pipeline::decode_from`] reuses from chunk to chunk (the stored bytes and
/// the other stage), shared by the decoding threads of one mount (its resolver holds it):
/// a decode takes two, and gives back what it is left with. At most 14 MiB are kept in
/// all, none larger than room for a 1 MiB chunk and its stored form; a decode that finds
/// none free allocates its own.
#[derive(Debug, Default)]
pub struct ScratchPool {
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    free: Vec<Vec<u8>>,
    /// Bytes (capacity) of `free`.
    kept: usize,
}

impl ScratchPool {
    /// A free buffer (the one given back last: its memory is the likeliest in cache), or an
    /// empty one.
    fn take(&self) -> Vec<u8> {
        let mut st = crate::sync::lock(&self.state);
        let v = st.free.pop().unwrap_or_default();
        st.kept -= v.capacity();
        v
    }

    /// Keep `v` for a later decode if it is small enough ([`SCRATCH_KEEP`]) and the total
    /// allows it; else free it.
    fn give(&self, v: Vec<u8>) {
        let v = bounded(v);
        let n = v.capacity();
        let mut st = crate::sync::lock(&self.state);
        if n == 0 || st.kept + n > SCRATCH_TOTAL {
            return;
        }
        st.kept += n;
        st.free.push(v);
    }

    /// Bytes kept now (for tests).
    #[cfg(test)]
    fn kept(&self) -> usize {
        crate::sync::lock(&self.state).kept
    }
}

/// Most bytes of scratch buffers one pool keeps: the two buffers of six decodes at once
/// (four FUSE threads and the prefetch pool's two, by default) for 1 MiB chunks. Without a
/// bound, each decoding thread would keep up to 4 MiB, 80 MiB for a remote mount's 16
/// threads, outside the cache budget.
const SCRATCH_TOTAL: usize = 14 << 20;

/// Largest scratch buffer a pool keeps between chunks: room for the common 1 MiB chunk
/// and its stored form. Larger chunks (16 MiB ones exist) get fresh buffers, so that every
/// decode holding two of them cannot leave hundreds of MiB beyond the cache budget.
const SCRATCH_KEEP: usize = (2 << 20) + STAGE_SLACK;

/// `v` if it can hold `room` bytes, else a vector that can. Beyond [`SCRATCH_KEEP`], `v`
/// as it is: such a buffer is not kept anyway, and each stage allocates the size it needs
/// (see [`grown`]), so reserving room up front would only be allocated and dropped.
fn sized(v: Vec<u8>, room: usize) -> Vec<u8> {
    if v.capacity() >= room || room > SCRATCH_KEEP {
        v
    } else {
        Vec::with_capacity(room)
    }
}

/// `v` grown to `n` bytes. Beyond [`SCRATCH_KEEP`], a fresh zeroed vector instead: the
/// allocator maps such a size as fresh zero pages, which take memory only where the stage
/// then writes, whereas growing `v` writes every zero. A chunk that claims a huge size but
/// inflates to little (a damaged or hostile file) then costs what it inflates to.
fn grown(mut v: Vec<u8>, n: usize) -> Vec<u8> {
    if n > SCRATCH_KEEP {
        return vec![0u8; n];
    }
    v.resize(n, 0);
    v
}

/// `v`, or an empty vector if keeping `v` would hold more than [`SCRATCH_KEEP`].
fn bounded(v: Vec<u8>) -> Vec<u8> {
    if v.capacity() > SCRATCH_KEEP {
        Vec::new()
    } else {
        v
    }
}

/// [`decode_one`], with DEFLATE and SHUFFLE writing into `spare` (grown without being cleared
/// once it is large enough) and the consumed input left in `spare` for the next stage.
fn decode_reusing(
    id: u16,
    data: Vec<u8>,
    stage: &Stage,
    spare: &mut Vec<u8>,
) -> std::result::Result<Vec<u8>, StageError> {
    let mut out = std::mem::take(spare);
    match id {
        ids::DEFLATE => {
            if out.len() < stage.limit {
                out = grown(out, stage.limit);
            }
            let n = deflate::zlib_into(&data, &mut out[..stage.limit])
                .map_err(|e| deflate::message(e, stage.limit))?;
            out.truncate(n);
        }
        ids::SHUFFLE => {
            let elem = match stage.cd.first() {
                Some(&e) => e as usize,
                None => return Err(StageError::Failed("missing element size (cd[0])".into())),
            };
            if elem <= 1 || data.len() < elem {
                *spare = out;
                return Ok(data);
            }
            // Truncating keeps the capacity; growing zeroes only the new tail.
            out.resize(data.len(), 0);
            shuffle::unshuffle(&data, &mut out, elem);
        }
        _ => {
            *spare = out;
            return decode_one(id, data, stage);
        }
    }
    *spare = data;
    Ok(out)
}

/// Undo one filter.
fn decode_one(id: u16, data: Vec<u8>, stage: &Stage) -> std::result::Result<Vec<u8>, StageError> {
    use ids::*;
    let out = match id {
        DEFLATE => deflate::decode(&data, stage)?,
        SHUFFLE => shuffle::decode(data, stage)?,
        FLETCHER32 => fletcher32::decode(data, stage)?,
        SZIP => szip::decode(&data, stage)?,
        NBIT => nbit::decode(&data, stage)?,
        SCALEOFFSET => scaleoffset::decode(&data, stage)?,
        BZIP2 => bzip2::decode(&data, stage)?,
        LZF => lzf::decode(&data, stage)?,
        BLOSC => blosc::decode(&data, stage)?,
        LZ4 => lz4::decode(&data, stage)?,
        BITSHUFFLE => bitshuffle::decode(&data, stage)?,
        ZSTD => zstd::decode(&data, stage)?,
        BLOSC2 => blosc2::decode(&data, stage)?,
        ZFP => zfp::decode(&data, stage)?,
        LZO => lzo::decode(&data, stage)?,
        _ => return Err(StageError::Unknown),
    };
    if out.len() > stage.limit {
        return Err(StageError::Failed(format!(
            "output of {} bytes exceeds the chunk size limit {}",
            out.len(),
            stage.limit
        )));
    }
    Ok(out)
}
