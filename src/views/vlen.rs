//! Stored bytes of variable-length datasets and the values they point to.
//!
//! A vlen element is stored as a fixed-size reference (spec "IV.A.2.d", class 9, and "III.E"):
//! a 4-byte length (bytes for strings, base elements for sequences), then a global heap ID
//! (collection address, 4-byte object index): 16 bytes with 8-byte offsets. The model serves
//! those references through [`Dataset::read_stored_at`] (its `read_at` refuses such datasets,
//! which have no fixed-size value image); [`RawVlen`] reads them by element. [`HeapCache`]
//! fetches the objects, keeping a few recently used global heap collections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::format::global_heap::{GlobalHeapCollection, GlobalHeapId};
use crate::io::{Cursor, UNDEFINED_ADDR};
use crate::model::{Dataset, File};
use crate::sync::lock;

/// Collections kept by a [`HeapCache`]; each is one read of at least 4 KiB, and vlen data is
/// usually written into a few consecutive collections.
const HEAP_CACHE: usize = 16;

/// Reader of the stored vlen references of one dataset.
#[derive(Debug)]
pub struct RawVlen {
    ds: Arc<Dataset>,
    /// Bytes of one stored reference.
    pub element_size: u32,
    /// Number of elements.
    pub count: u64,
}

impl RawVlen {
    /// Reads of the stored references of `ds`, a dataset of a variable-length type in a file
    /// whose addresses are `offset_size` bytes. A reference is a 4-byte length and a heap ID
    /// (an address and a 4-byte index): a datatype that says otherwise is refused, as its
    /// size would size every buffer of references.
    pub fn open(ds: Arc<Dataset>, offset_size: u8) -> Result<RawVlen> {
        let element_size = ds.info.dtype.size;
        let want = 8 + u32::from(offset_size);
        if element_size != want {
            return Err(Error::corrupt(
                "datatype",
                ds.id.0,
                format!(
                    "variable-length reference of {element_size} bytes (a reference has \
                     {want} in this file)"
                ),
            ));
        }
        let count = ds.len() / u64::from(element_size);
        Ok(RawVlen {
            ds,
            element_size,
            count,
        })
    }

    /// Read the stored references of elements `first..first + n` into `buf` (cleared first).
    pub fn read_elements(&self, first: u64, n: u64, buf: &mut Vec<u8>) -> Result<()> {
        let es = self.element_size as u64;
        let bytes = n
            .checked_mul(es)
            .ok_or_else(|| Error::unsupported("vlen read", "range overflows"))?;
        buf.clear();
        buf.resize(bytes as usize, 0);
        let got = self.ds.read_stored_at(first.saturating_mul(es), buf)?;
        buf.truncate(got);
        Ok(())
    }
}

/// One stored vlen reference: the length and where the data lives (`None`: null reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlenRef {
    pub len: u32,
    pub id: Option<GlobalHeapId>,
}

/// Decode one stored reference.
pub fn parse_ref(file: &File, bytes: &[u8]) -> Result<VlenRef> {
    let mut c = Cursor::new(bytes, 0, "variable-length reference");
    let len = c.u32()?;
    let id = GlobalHeapId::parse(&mut c, file.sizes())?;
    let null = id.collection == 0 || id.collection == UNDEFINED_ADDR;
    Ok(VlenRef {
        len,
        id: (!null).then_some(id),
    })
}

/// Recently used global heap collections of one file.
#[derive(Debug, Default)]
pub struct HeapCache {
    heaps: Mutex<HashMap<u64, Arc<GlobalHeapCollection>>>,
}

impl HeapCache {
    /// The bytes of the heap object `id`, which its reference says holds `expected` bytes
    /// (a string's length, a sequence's length times its base type's size): a larger object
    /// is refused before it is read (see [`GlobalHeapCollection::object_up_to`]); a shorter
    /// one is returned as it is, for the caller to judge.
    pub fn object(&self, file: &File, id: GlobalHeapId, expected: u64) -> Result<Vec<u8>> {
        let cached = lock(&self.heaps).get(&id.collection).cloned();
        let col = match cached {
            Some(c) => c,
            None => {
                let c = Arc::new(GlobalHeapCollection::open(
                    file.storage(),
                    id.collection,
                    file.sizes(),
                )?);
                let mut m = lock(&self.heaps);
                if m.len() >= HEAP_CACHE {
                    m.clear();
                }
                m.insert(id.collection, c.clone());
                c
            }
        };
        col.object_up_to(file.storage(), id.index, expected)
    }
}
