//! Datasets: the description (type, shape, layout, filters, fill) gathered from the object
//! header, and byte-range reads through the layout engine.

use super::file::File;
use super::virtual_ds::VirtualReader;
use super::ObjectId;
use crate::cache::ChunkBytes;
use crate::error::{Error, ErrorClass, Result};
use crate::format::local_heap::LocalHeap;
use crate::format::messages::dataspace::{Dataspace, DataspaceKind};
use crate::format::messages::datatype::Datatype;
use crate::format::messages::external::ExternalFileList;
use crate::format::messages::fill_value::{FillTime, FillValue};
use crate::format::messages::filter_pipeline::{FilterPipeline, FilterSpec};
use crate::format::messages::layout::{ChunkIndexSpec, Layout, LayoutClass};
use crate::format::messages::{types, Message};
use crate::format::object_header::{ObjectHeader, RawMessage};
use crate::io::ReadCtx;
use crate::layout::external::{ExternalFiles, RawOpener};
use crate::layout::{ChunkRecord, DataReader, ExternalSegment, LayoutParams};

/// What `inspect` and xattrs show of a dataset.
#[derive(Clone, Debug)]
pub struct DatasetInfo {
    pub dtype: Datatype,
    /// Shape (empty for scalar).
    pub shape: Vec<u64>,
    /// Maximum shape (`u64::MAX` = unlimited), if stored.
    pub max_shape: Option<Vec<u64>>,
    /// True for a null dataspace.
    pub null: bool,
    pub layout: LayoutKind,
    pub chunk_shape: Option<Vec<u64>>,
    pub chunk_index: Option<ChunkIndexKind>,
    pub filters: Vec<FilterSpec>,
    /// User-defined fill value bytes, if any.
    pub fill_value: Option<Vec<u8>>,
}

/// How a dataset's bytes are stored (shown as `user.h5.layout` and by `inspect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutKind {
    Compact,
    Contiguous,
    Chunked,
    Virtual,
    /// Contiguous storage in external files (an external file list).
    External,
}

impl LayoutKind {
    /// The name shown for it.
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Compact => "compact",
            LayoutKind::Contiguous => "contiguous",
            LayoutKind::Chunked => "chunked",
            LayoutKind::Virtual => "virtual",
            LayoutKind::External => "external",
        }
    }
}

impl std::fmt::Display for LayoutKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The index of a chunked dataset's chunks (shown as `user.h5.chunk_index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkIndexKind {
    BtreeV1,
    Single,
    Implicit,
    FixedArray,
    ExtensibleArray,
    BtreeV2,
}

impl ChunkIndexKind {
    /// The name shown for it.
    pub fn name(self) -> &'static str {
        match self {
            ChunkIndexKind::BtreeV1 => "btree-v1",
            ChunkIndexKind::Single => "single",
            ChunkIndexKind::Implicit => "implicit",
            ChunkIndexKind::FixedArray => "fixed-array",
            ChunkIndexKind::ExtensibleArray => "extensible-array",
            ChunkIndexKind::BtreeV2 => "btree-v2",
        }
    }
}

impl std::fmt::Display for ChunkIndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug)]
enum ReaderState {
    Ready(DataReader),
    /// A variable-length type: no value image (reads fail with `why`), but the stored
    /// references (a length and a global heap ID per element) read, for views.
    Stored {
        reader: DataReader,
        why: String,
    },
    /// Virtual layout: gathered from source datasets (see `virtual_ds`).
    Virtual(super::virtual_ds::VirtualReader),
    Failed {
        class: ErrorClass,
        message: String,
    },
}

/// An open dataset.
#[derive(Debug)]
pub struct Dataset {
    pub id: ObjectId,
    pub info: DatasetInfo,
    len: u64,
    reader: ReaderState,
    /// Whether its file's reads cost a request each (a remote source).
    remote: bool,
}

impl Dataset {
    /// Size of the dataset's byte image: npoints × element size.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every read of its file costs a request (a remote source), so that reading
    /// ahead pays even where the kernel's own readahead would do locally.
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// Whether the dataset's description could not be turned into a reader at all (a broken
    /// or unsupported layout, a size that overflows): every read fails.
    pub fn is_broken(&self) -> bool {
        matches!(self.reader, ReaderState::Failed { .. })
    }

    /// Why reads of this dataset cannot be served, if they cannot.
    pub fn unreadable_reason(&self) -> Option<&str> {
        match &self.reader {
            ReaderState::Ready(_) | ReaderState::Virtual(_) => None,
            ReaderState::Stored { why, .. } => Some(why),
            ReaderState::Failed { message, .. } => Some(message),
        }
    }

    /// The whole byte image (for tests and tools; a mount never needs it).
    pub fn read_all(&self) -> Result<Vec<u8>> {
        crate::io::read_fully(self.len, "dataset image", |off, buf| self.read_at(off, buf))
    }

    /// The cached decoded chunk holding bytes `offset..offset + len` of the image as one
    /// contiguous run, and the run's start in it (see [`DataReader::read_shared`]); `None`
    /// when the bytes must be assembled by [`Dataset::read_at`].
    /// `ctx`: for whom, should the chunk have to be fetched.
    pub fn read_shared(
        &self,
        ctx: ReadCtx,
        offset: u64,
        len: u64,
    ) -> Result<Option<(ChunkBytes, usize)>> {
        match &self.reader {
            ReaderState::Ready(r) => r.read_shared(ctx, offset, len),
            _ => Ok(None),
        }
    }

    /// Name the stored bytes that image bytes `offset..offset + len` need to a remote
    /// source, which fetches them together in the background; `read`: the reader who reads
    /// them now, not ahead (see [`DataReader::hint`]).
    pub fn hint(&self, offset: u64, len: u64, read: Option<ReadCtx>) -> Result<()> {
        match &self.reader {
            ReaderState::Ready(r) => r.hint(offset, len, read),
            _ => Ok(()),
        }
    }

    /// Name the chunk index nodes that image bytes `offset..offset + len` need to a remote
    /// source, which fetches the last level's in the background; the levels above it are
    /// read on the calling thread (see [`DataReader::prepare_index`]).
    pub fn prepare_index(&self, offset: u64, len: u64) -> Result<()> {
        match &self.reader {
            ReaderState::Ready(r) => r.prepare_index(offset, len),
            _ => Ok(()),
        }
    }

    /// Name the chunks numbered `first..end` in C order of the chunk grid to a remote
    /// source: their stored bytes when `data`, else the index nodes that find them (see
    /// [`DataReader::hint_grid`]). For a reader going through the chunks one by one in grid
    /// order; nothing for other layouts.
    pub fn hint_grid(&self, first: u64, end: u64, data: bool) -> Result<()> {
        match &self.reader {
            ReaderState::Ready(r) | ReaderState::Stored { reader: r, .. } => {
                r.hint_grid(first, end, data)
            }
            _ => Ok(()),
        }
    }

    /// The relative address of a contiguous dataset's block (see
    /// [`DataReader::contiguous_addr`]); `None` otherwise.
    pub fn contiguous_addr(&self) -> Option<u64> {
        match &self.reader {
            ReaderState::Ready(r) => r.contiguous_addr(),
            _ => None,
        }
    }

    /// The chunk shape of a chunked dataset h5mount can read (of a variable-length type too,
    /// whose chunks hold the stored references); `None` otherwise.
    pub fn chunk_dims(&self) -> Option<&[u64]> {
        match &self.reader {
            ReaderState::Ready(r) | ReaderState::Stored { reader: r, .. } => r.chunk_dims(),
            _ => None,
        }
    }

    /// The stored chunk at chunk coordinates `coords` of a chunked dataset, and whether it is
    /// stored raw (see [`DataReader::stored_chunk`]); `None` when never written.
    pub fn stored_chunk(&self, coords: &[u64]) -> Result<Option<(ChunkRecord, bool)>> {
        match &self.reader {
            ReaderState::Ready(r) | ReaderState::Stored { reader: r, .. } => r.stored_chunk(coords),
            _ => self.read_at(0, &mut []).map(|_| None),
        }
    }

    /// The decoded chunk at chunk coordinates `coords` of a chunked dataset (see
    /// [`DataReader::decoded_chunk`]; of a variable-length type: its stored references);
    /// `None` when never written.
    pub fn decoded_chunk(&self, ctx: ReadCtx, coords: &[u64]) -> Result<Option<ChunkBytes>> {
        match &self.reader {
            ReaderState::Ready(r) | ReaderState::Stored { reader: r, .. } => {
                r.decoded_chunk(ctx, coords)
            }
            _ => self.read_at(0, &mut []).map(|_| None),
        }
    }

    /// The stored (filtered) bytes of chunk `rec`, as they are in the file.
    pub fn read_stored_chunk(&self, ctx: ReadCtx, rec: &ChunkRecord) -> Result<Vec<u8>> {
        match &self.reader {
            ReaderState::Ready(r) | ReaderState::Stored { reader: r, .. } => {
                r.read_stored_chunk(ctx, rec)
            }
            _ => self
                .read_at(0, &mut [])
                .and(Err(Error::Invalid("not a chunked dataset".into()))),
        }
    }

    /// Read the stored bytes at `offset`: the byte image, or for a variable-length type the
    /// stored references (see [`crate::views`]), which [`Dataset::read_at`] refuses.
    pub fn read_stored_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        match &self.reader {
            ReaderState::Stored { reader, .. } => reader.read_at(offset, buf),
            _ => self.read_at(offset, buf),
        }
    }

    /// Read bytes at `offset` of the byte image; returns the number of bytes written, short
    /// only at the end. For a reader not known: see [`Dataset::read_in`].
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_in(ReadCtx::default(), offset, buf)
    }

    /// [`Dataset::read_at`] for `ctx`: a reader's read, or a prefetch worker's, which only
    /// brings chunks into the chunk cache and leaves `buf` as it is.
    pub fn read_in(&self, ctx: ReadCtx, offset: u64, buf: &mut [u8]) -> Result<usize> {
        match &self.reader {
            ReaderState::Ready(r) => r.read_in(ctx, offset, buf),
            ReaderState::Virtual(v) => v.read_in(ctx, offset, buf),
            ReaderState::Stored { why, .. } => Err(Error::unsupported("dataset", why)),
            ReaderState::Failed { class, message } => Err(match class {
                ErrorClass::Unsupported => Error::unsupported("dataset", message),
                _ => Error::corrupt("dataset", self.id.0, message),
            }),
        }
    }
}

fn layout_names(layout: &Layout) -> (LayoutKind, Option<Vec<u64>>, Option<ChunkIndexKind>) {
    match &layout.class {
        LayoutClass::Compact { .. } => (LayoutKind::Compact, None, None),
        LayoutClass::Contiguous { .. } => (LayoutKind::Contiguous, None, None),
        LayoutClass::Virtual { .. } => (LayoutKind::Virtual, None, None),
        LayoutClass::Chunked(c) => {
            let index = match c.index {
                ChunkIndexSpec::BtreeV1 { .. } => ChunkIndexKind::BtreeV1,
                ChunkIndexSpec::SingleChunk { .. } => ChunkIndexKind::Single,
                ChunkIndexSpec::Implicit { .. } => ChunkIndexKind::Implicit,
                ChunkIndexSpec::FixedArray { .. } => ChunkIndexKind::FixedArray,
                ChunkIndexSpec::ExtensibleArray { .. } => ChunkIndexKind::ExtensibleArray,
                ChunkIndexSpec::BtreeV2 { .. } => ChunkIndexKind::BtreeV2,
            };
            (LayoutKind::Chunked, Some(c.chunk_dims.clone()), Some(index))
        }
    }
}

/// The messages of a dataset's object header that describe it.
struct Described {
    space: Dataspace,
    dtype: Datatype,
    layout: Layout,
    /// The fill value message, else the old fill value message.
    fill: Option<FillValue>,
    pipeline: FilterPipeline,
    efl: Option<ExternalFileList>,
}

/// Decode `raw` if it is one of the messages that describe a dataset; `None` for the others,
/// and for an undecodable old fill value message (libhdf5 ignores the old one when the new one
/// is present, and it must not make the dataset unreadable).
fn decode_describing(file: &File, raw: &RawMessage) -> Result<Option<Message>> {
    match raw.mtype {
        types::DATASPACE
        | types::DATATYPE
        | types::LAYOUT
        | types::FILL_VALUE
        | types::FILL_VALUE_OLD
        | types::FILTER_PIPELINE
        | types::EXTERNAL_FILES => {}
        _ => return Ok(None),
    }
    match file.decode(raw) {
        Ok(m) => Ok(Some(m)),
        Err(_) if raw.mtype == types::FILL_VALUE_OLD => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether the header `h` describes a virtual dataset: only its layout message is decoded.
pub(super) fn is_virtual(file: &File, h: &ObjectHeader) -> Result<bool> {
    for raw in h.messages.iter().filter(|r| r.mtype == types::LAYOUT) {
        if let Some(Message::Layout(l)) = decode_describing(file, raw)? {
            return Ok(matches!(l.class, LayoutClass::Virtual { .. }));
        }
    }
    Ok(false)
}

impl Described {
    /// Gather the describing messages of the header `h` of dataset `id`; the dataspace,
    /// datatype and layout messages are required.
    fn read(file: &File, id: ObjectId, h: &ObjectHeader) -> Result<Described> {
        let mut space: Option<Dataspace> = None;
        let mut dtype: Option<Datatype> = None;
        let mut layout: Option<Layout> = None;
        let mut fill_new: Option<FillValue> = None;
        let mut fill_old: Option<FillValue> = None;
        let mut pipeline = FilterPipeline::default();
        let mut efl: Option<ExternalFileList> = None;
        for raw in &h.messages {
            match decode_describing(file, raw)? {
                Some(Message::Dataspace(s)) => space = Some(s),
                Some(Message::Datatype(t)) => dtype = Some(t),
                Some(Message::Layout(l)) => layout = Some(l),
                Some(Message::FillValue(f)) if raw.mtype == types::FILL_VALUE => fill_new = Some(f),
                Some(Message::FillValue(f)) => fill_old = Some(f),
                Some(Message::FilterPipeline(p)) => pipeline = p,
                Some(Message::ExternalFiles(e)) => efl = Some(e),
                _ => {}
            }
        }
        let missing = |what: &str| {
            Error::corrupt("dataset object header", id.0, format!("no {what} message"))
        };
        Ok(Described {
            space: space.ok_or_else(|| missing("dataspace"))?,
            dtype: dtype.ok_or_else(|| missing("datatype"))?,
            layout: layout.ok_or_else(|| missing("layout"))?,
            fill: fill_new.or(fill_old),
            pipeline,
            efl,
        })
    }

    /// The user-defined fill value (defined, one element), and the fill value reads use (the
    /// same, unless the fill time is "never").
    fn fill_values(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let fill_value = self
            .fill
            .as_ref()
            .filter(|f| f.defined)
            .and_then(|f| f.value.clone())
            .filter(|v| v.len() == self.dtype.size as usize);
        let fill_for_reads = self
            .fill
            .as_ref()
            .filter(|f| f.fill_time != FillTime::Never)
            .and(fill_value.clone());
        (fill_value, fill_for_reads)
    }

    /// What `inspect` and xattrs show, with the stored shape and the user fill value.
    fn info(&self, fill_value: Option<Vec<u8>>) -> DatasetInfo {
        let (mut layout_name, chunk_shape, chunk_index) = layout_names(&self.layout);
        if self.efl.is_some() {
            layout_name = LayoutKind::External;
        }
        DatasetInfo {
            dtype: self.dtype.clone(),
            shape: self.space.dims.clone(),
            max_shape: self.space.max_dims.clone(),
            null: self.space.kind == DataspaceKind::Null,
            layout: layout_name,
            chunk_shape,
            chunk_index,
            filters: self.pipeline.filters.clone(),
            fill_value,
        }
    }

    /// Bytes of the byte image (npoints × element size), `None` when that overflows.
    fn image_len(&self) -> Option<u64> {
        self.space
            .npoints()
            .and_then(|n| n.checked_mul(self.dtype.size as u64))
    }

    /// The number of elements, refused (unsupported) when the count or the byte image does
    /// not fit 64 bits: valid (libhdf5 reads such a dataset as its fill value) but not
    /// addressable here, byte offsets being 64-bit.
    fn addressable_npoints(&self, id: ObjectId) -> Result<u64> {
        let elements = || {
            self.space
                .dims
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(" x ")
        };
        let npoints = self.space.npoints().ok_or_else(|| {
            Error::unsupported(
                "dataset size",
                format!(
                    "dataset at {:#x}: {} elements are more than a 64-bit count holds",
                    id.0,
                    elements()
                ),
            )
        })?;
        if self.image_len().is_none() {
            return Err(Error::unsupported(
                "dataset size",
                format!(
                    "dataset at {:#x}: {} elements of {} bytes are more than 2^64 bytes",
                    id.0,
                    elements(),
                    self.dtype.size
                ),
            ));
        }
        Ok(npoints)
    }

    /// The layout engine's reader of the stored bytes (external files resolved through the
    /// file's resolver), with `fill` for unwritten elements.
    fn data_reader(&self, file: &File, id: ObjectId, fill: Option<Vec<u8>>) -> Result<DataReader> {
        let npoints = self.addressable_npoints(id)?;
        let external = match &self.efl {
            Some(e) => Some(external_segments(file, e)?),
            None => None,
        };
        DataReader::new(LayoutParams {
            storage: file.storage().clone(),
            sizes: file.sizes(),
            layout: self.layout.clone(),
            dims: self.space.dims.clone(),
            max_dims: self
                .space
                .max_dims
                .clone()
                .unwrap_or_else(|| self.space.dims.clone()),
            npoints,
            element_size: self.dtype.size,
            // A vlen fill value is itself a heap reference; zeros (a null reference) are what
            // libhdf5 writes for unwritten elements.
            fill: if self.dtype.is_fixed_size() {
                fill
            } else {
                None
            },
            filters: self.pipeline.clone(),
            external,
            cache: file.chunk_cache().clone(),
            scratch: file.scratch(),
            cache_id: id.0,
            cache_file: file.cache_file(),
        })
    }

    /// The virtual dataset reader of a virtual layout (`None` for other layouts), with `fill`
    /// for elements no source covers.
    fn virtual_reader(
        &self,
        file: &File,
        id: ObjectId,
        fill: Option<Vec<u8>>,
    ) -> Option<Result<VirtualReader>> {
        let LayoutClass::Virtual { heap_addr, index } = self.layout.class else {
            return None;
        };
        let max_dims = self.space.max_dims.as_deref().unwrap_or(&self.space.dims);
        Some(VirtualReader::open(
            file,
            id.0,
            (heap_addr, index),
            &self.space.dims,
            max_dims,
            &self.dtype,
            fill,
        ))
    }
}

/// The state of a layout engine's reader: ready for a fixed-size type, stored references only
/// for a variable-length one, failed with the error's class and text.
fn reader_state(reader: Result<DataReader>, dtype: &Datatype) -> ReaderState {
    match reader {
        Ok(r) if dtype.is_fixed_size() => ReaderState::Ready(r),
        Ok(reader) => ReaderState::Stored {
            reader,
            why: Error::unsupported(
                "datatype",
                format!("{} has no fixed-size byte image", dtype.numpy_str()),
            )
            .to_string(),
        },
        Err(e) => failed(e),
    }
}

/// A reader that fails every read with `e`'s class and text.
fn failed(e: Error) -> ReaderState {
    ReaderState::Failed {
        class: e.errno_class(),
        message: e.to_string(),
    }
}

/// Parse a dataset's messages and prepare its reader.
pub(super) fn open_dataset(file: &File, id: ObjectId, h: &ObjectHeader) -> Result<Dataset> {
    let d = Described::read(file, id, h)?;
    let (fill_value, fill_for_reads) = d.fill_values();
    let mut info = d.info(fill_value);
    let mut len = d.image_len();
    let mut reader = reader_state(d.data_reader(file, id, fill_for_reads.clone()), &d.dtype);
    // Virtual layout: served by `virtual_ds`; unlimited mappings take their extent from the
    // sources, so the shape and length may differ from the stored dataspace.
    if let Some(v) = d.virtual_reader(file, id, fill_for_reads) {
        reader = match v {
            Ok(v) => {
                info.shape = v.dims().to_vec();
                len = Some(v.len());
                ReaderState::Virtual(v)
            }
            Err(e) => failed(e),
        };
    }
    Ok(Dataset {
        id,
        info,
        len: len.unwrap_or(0),
        reader,
        remote: file.storage().wants_hints(),
    })
}

/// Resolve external file names (local heap) to paths relative to the HDF5 file's directory,
/// which is what libhdf5 does with an `${ORIGIN}` prefix; its default (the process's current
/// directory) means nothing for a daemon. Each name goes through the file's resolver, whose
/// path policy ([`super::resolver`]) refuses names that lead outside the mount's root, and
/// whose bounded set of open files holds the descriptors.
fn external_segments(file: &File, efl: &ExternalFileList) -> Result<ExternalFiles> {
    let heap = LocalHeap::read_for(file.storage(), efl.heap_addr, file.sizes(), efl.slots.len())?;
    let dir = file.dir();
    let resolver = file
        .resolver()
        .ok_or_else(|| Error::NotFound("external storage: the mount is closing".into()))?;
    let segments = efl
        .slots
        .iter()
        .map(|s| {
            let name =
                String::from_utf8_lossy(&heap.string(file.storage(), s.name_offset)?).into_owned();
            Ok(ExternalSegment {
                path: resolver.check(&dir, &name)?,
                offset: s.file_offset,
                size: s.size,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ExternalFiles {
        segments,
        opener: resolver,
    })
}
