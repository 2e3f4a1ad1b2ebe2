//! Layout: contiguous storage.
//!
//! The raw data is one block of the HDF5 file (spec: "Data Layout Message", layout class 1):
//! byte `i` of the dataset is at `addr + i`, so a read is one `pread`. A block that was never
//! allocated has the undefined address and reads as the fill value. The size the message
//! states must cover the dataset; the block's end is checked against the file at read time.

use crate::error::{Error, Result};
use crate::io::{ReadCtx, Storage, UNDEFINED_ADDR};

use super::{fill_pattern, LayoutParams};

/// A contiguous dataset.
#[derive(Debug)]
pub(crate) struct Contiguous {
    storage: Storage,
    /// Relative address of the block, or `None` when never allocated.
    addr: Option<u64>,
    fill: Option<Vec<u8>>,
}

impl Contiguous {
    /// Name image bytes `offset..end` (clipped by the caller) to a source where every
    /// request costs a round trip, to be fetched in the background.
    pub(crate) fn hint(&self, offset: u64, end: u64) {
        if let Some(a) = self.addr {
            if self.storage.wants_hints() {
                // `a + len` was checked in `new`, and `end <= len`.
                self.storage.prefetch(&[(a + offset, end - offset)]);
            }
        }
    }

    /// The block's relative address; `None` when never allocated.
    pub(crate) fn addr(&self) -> Option<u64> {
        self.addr
    }

    /// `len` is the dataset's byte length.
    pub(crate) fn new(params: &LayoutParams, addr: u64, size: u64, len: u64) -> Result<Contiguous> {
        let addr = (addr != UNDEFINED_ADDR).then_some(addr);
        if addr.is_some() && size < len {
            return Err(Error::corrupt(
                "contiguous layout",
                params.cache_id,
                format!("block of {size} bytes for a dataset of {len} bytes"),
            ));
        }
        if let Some(a) = addr {
            if a.checked_add(len).is_none() {
                return Err(Error::corrupt(
                    "contiguous layout",
                    params.cache_id,
                    format!("block at {a:#x} of {len} bytes overflows the address space"),
                ));
            }
        }
        Ok(Contiguous {
            storage: params.storage.clone(),
            addr,
            fill: params.fill.clone(),
        })
    }

    /// Fill `buf` from `offset` for `ctx`; the caller has clipped the range to the dataset.
    pub(crate) fn read(&self, ctx: ReadCtx, offset: u64, buf: &mut [u8]) -> Result<()> {
        match self.addr {
            None => {
                fill_pattern(buf, offset, self.fill.as_deref());
                Ok(())
            }
            Some(a) => {
                // Cannot overflow: offset + buf.len() <= len and a + len was checked in `new`.
                self.storage
                    .for_read(ctx)
                    .read_data(a + offset, buf, "contiguous data")
            }
        }
    }
}
