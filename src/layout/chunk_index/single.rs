//! Single-chunk index (layout v4/v5 chunk indexing type 1): the dataset is exactly one chunk,
//! whose address the layout message holds. When the chunk is filtered (layout flag bit 1) the
//! message also holds its stored size and filter mask; otherwise the stored size is the full
//! chunk size. The only coordinates that name a chunk are all zeros.

use super::{ChunkIndex, ChunkRecord, IndexParams};
use crate::error::{Error, Result};
use crate::io::UNDEFINED_ADDR;

/// The single-chunk index: no I/O at all.
#[derive(Debug)]
pub struct SingleChunkIndex {
    /// `None` when the chunk was never written.
    record: Option<ChunkRecord>,
}

impl SingleChunkIndex {
    /// Build the index from the layout message's fields.
    pub fn open(
        params: IndexParams,
        addr: u64,
        filtered_size: Option<u64>,
        filter_mask: u32,
    ) -> Result<SingleChunkIndex> {
        const WHAT: &str = "single chunk index";
        params.validate(WHAT, addr)?;
        let size = match filtered_size {
            Some(s) => s,
            None => params
                .chunk_bytes()
                .ok_or_else(|| Error::corrupt(WHAT, addr, "chunk size overflows"))?,
        };
        let record = (addr != UNDEFINED_ADDR).then_some(ChunkRecord {
            addr,
            size,
            filter_mask: if filtered_size.is_some() {
                filter_mask
            } else {
                0
            },
        });
        Ok(SingleChunkIndex { record })
    }
}

impl ChunkIndex for SingleChunkIndex {
    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
        if coords.iter().all(|&c| c == 0) {
            Ok(self.record)
        } else {
            Ok(None)
        }
    }
}
