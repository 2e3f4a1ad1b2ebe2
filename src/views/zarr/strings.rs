//! Variable-length strings as Zarr strings: a chunk key of such an array holds the chunk's
//! strings in numcodecs' `vlen-utf8` encoding (v3 codec `vlen-utf8` on data type `string`;
//! v2 filter `vlen-utf8` on dtype `|O`), built from the stored references (one global heap
//! object per string).
//!
//! The encoding: the number of items as a 4-byte little-endian integer, then for each item
//! its length in bytes (4 bytes, little-endian) and its UTF-8 bytes. A string is cut at its
//! first NUL when its type says null-terminated (as the text view reads it), invalid UTF-8
//! is replaced (U+FFFD; numcodecs would refuse it), and an element never written (a null
//! reference) or past the dataset's edge in an edge chunk is the empty string, as h5py reads
//! it.

use super::super::vlen::{parse_ref, HeapCache};
use crate::error::{Error, Result};
use crate::format::messages::datatype::StringPad;
use crate::model::File;

/// The `vlen-utf8` encoding of `count` strings whose stored references (each `ref_size`
/// bytes) are `refs`: fewer references than `count` leave the rest empty.
pub fn vlen_utf8(
    file: &File,
    heaps: &HeapCache,
    refs: &[u8],
    ref_size: usize,
    count: u64,
    pad: StringPad,
) -> Result<Vec<u8>> {
    let n = u32::try_from(count)
        .map_err(|_| Error::unsupported("Zarr strings", format!("{count} strings in one chunk")))?;
    let mut out = Vec::with_capacity(4 + 4 * n as usize);
    out.extend_from_slice(&n.to_le_bytes());
    let mut done = 0u64;
    for r in refs.chunks_exact(ref_size.max(1)).take(n as usize) {
        let r = parse_ref(file, r)?;
        let text = match r.id {
            None => Vec::new(),
            Some(id) => {
                let obj = heaps.object(file, id, u64::from(r.len))?;
                let mut b = obj.get(..r.len as usize).unwrap_or(&obj);
                if pad == StringPad::NullTerminate {
                    if let Some(nul) = b.iter().position(|&x| x == 0) {
                        b = &b[..nul];
                    }
                }
                String::from_utf8_lossy(b).into_owned().into_bytes()
            }
        };
        let len = u32::try_from(text.len())
            .map_err(|_| Error::unsupported("Zarr strings", "a string of 4 GiB or more"))?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&text);
        done += 1;
    }
    for _ in done..count {
        out.extend_from_slice(&0u32.to_le_bytes());
    }
    Ok(out)
}
