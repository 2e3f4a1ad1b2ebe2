//! Stored bytes of variable-length datasets and the values they point to.
//!
//! A vlen element is stored as a fixed-size reference (spec "IV.A.2.d", class 9, and "III.E"):
//! a 4-byte length (bytes for strings, base elements for sequences), then a global heap ID
//! (collection address, 4-byte object index): 16 bytes with 8-byte offsets. The model refuses
//! `read_at` on such datasets (they have no fixed-size value image), so [`RawVlen`] rebuilds a
//! [`DataReader`] from the object header with the reference as element size; the layout engine
//! serves those bytes like any other. [`HeapCache`] fetches the objects, keeping a few recently
//! used global heap collections.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::format::global_heap::{GlobalHeapCollection, GlobalHeapId};
use crate::format::local_heap::LocalHeap;
use crate::format::messages::dataspace::Dataspace;
use crate::format::messages::external::ExternalFileList;
use crate::format::messages::filter_pipeline::FilterPipeline;
use crate::format::messages::layout::Layout;
use crate::format::messages::{types, Message};
use crate::io::{Cursor, UNDEFINED_ADDR};
use crate::layout::{DataReader, ExternalSegment, LayoutParams};
use crate::model::{Dataset, File};

/// Collections kept by a [`HeapCache`]; each is one read of at least 4 KiB, and vlen data is
/// usually written into a few consecutive collections.
const HEAP_CACHE: usize = 16;

/// Reader of the stored vlen references of one dataset.
#[derive(Debug)]
pub struct RawVlen {
    reader: DataReader,
    /// Bytes of one stored reference.
    pub element_size: u32,
    /// Number of elements.
    pub count: u64,
}

impl RawVlen {
    /// Prepare reads of the stored references of `ds`, a dataset of a variable-length type.
    pub fn open(file: &File, ds: &Dataset) -> Result<RawVlen> {
        let h = file.header(ds.id)?;
        let mut space: Option<Dataspace> = None;
        let mut layout: Option<Layout> = None;
        let mut pipeline = FilterPipeline::default();
        let mut efl: Option<ExternalFileList> = None;
        for raw in &h.messages {
            if !matches!(
                raw.mtype,
                types::DATASPACE | types::LAYOUT | types::FILTER_PIPELINE | types::EXTERNAL_FILES
            ) {
                continue;
            }
            match file.decode(raw)? {
                Message::Dataspace(s) => space = Some(s),
                Message::Layout(l) => layout = Some(l),
                Message::FilterPipeline(p) => pipeline = p,
                Message::ExternalFiles(e) => efl = Some(e),
                _ => {}
            }
        }
        let missing = |what: &str| {
            Error::corrupt(
                "dataset object header",
                ds.id.0,
                format!("no {what} message"),
            )
        };
        let space = space.ok_or_else(|| missing("dataspace"))?;
        let layout = layout.ok_or_else(|| missing("layout"))?;
        let count = space
            .npoints()
            .ok_or_else(|| Error::corrupt("dataspace", ds.id.0, "element count overflows"))?;
        let element_size = ds.info.dtype.size;
        let external = match &efl {
            Some(e) => Some(external_segments(file, e)?),
            None => None,
        };
        let reader = DataReader::new(LayoutParams {
            storage: file.storage().clone(),
            sizes: file.sizes(),
            layout,
            dims: space.dims.clone(),
            max_dims: space.max_dims.clone().unwrap_or_else(|| space.dims.clone()),
            npoints: count,
            element_size,
            // A vlen fill value is itself a heap reference; zeros (a null reference) are what
            // libhdf5 writes for unwritten elements.
            fill: None,
            filters: pipeline,
            external,
            cache: file.chunk_cache().clone(),
            cache_id: ds.id.0,
            cache_file: file.cache_file(),
        })?;
        Ok(RawVlen {
            reader,
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
        let got = self.reader.read_at(first.saturating_mul(es), buf)?;
        buf.truncate(got);
        Ok(())
    }
}

/// Resolve external file names relative to the HDF5 file's directory (as the model does).
fn external_segments(file: &File, efl: &ExternalFileList) -> Result<Vec<ExternalSegment>> {
    let heap = LocalHeap::read(file.storage(), efl.heap_addr, file.sizes())?;
    let dir = file.dir();
    efl.slots
        .iter()
        .map(|s| {
            let name = String::from_utf8_lossy(heap.string_at(s.name_offset)?).into_owned();
            Ok(ExternalSegment {
                path: dir.join(name),
                offset: s.file_offset,
                size: s.size,
            })
        })
        .collect()
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
    heaps: Mutex<HashMap<u64, std::sync::Arc<GlobalHeapCollection>>>,
}

impl HeapCache {
    /// The bytes of the heap object `id`, whole (callers cut them to the stored length).
    pub fn object(&self, file: &File, id: GlobalHeapId) -> Result<Vec<u8>> {
        let cached = self
            .heaps
            .lock()
            .ok()
            .and_then(|m| m.get(&id.collection).cloned());
        let col = match cached {
            Some(c) => c,
            None => {
                let c = std::sync::Arc::new(GlobalHeapCollection::read(
                    file.storage(),
                    id.collection,
                    file.sizes(),
                )?);
                if let Ok(mut m) = self.heaps.lock() {
                    if m.len() >= HEAP_CACHE {
                        m.clear();
                    }
                    m.insert(id.collection, c.clone());
                }
                c
            }
        };
        col.get(id.index).map(<[u8]>::to_vec).ok_or_else(|| {
            Error::corrupt(
                "global heap",
                id.collection,
                format!("no object {}", id.index),
            )
        })
    }
}
