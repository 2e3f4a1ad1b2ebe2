//! The layout engine: a byte range of a dataset's virtual file (elements in C order, file
//! datatype) translated into reads of compact, contiguous, external or chunked storage.
//!
//! The byte image of a dataset is `npoints × element_size` bytes. [`DataReader::new`] checks
//! the sizes the file states against that length (cheaply: no chunk index is walked) and picks
//! one of four readers:
//! * [`compact`]: the bytes are in the layout message;
//! * [`contiguous`]: one block of the HDF5 file, read with one `pread`;
//! * [`external`]: segments of other files, in order;
//! * [`chunked`]: the range is cut into boxes, each box into the chunks it touches; a
//!   decoded chunk comes through the shared [`crate::cache::ChunkCache`] and is copied out in
//!   contiguous row runs, and unfiltered chunks are mostly copied from the file directly,
//!   the runs of adjacent ones read together.
//!
//! Storage never written (an undefined contiguous address, a chunk missing from its index)
//! reads as the fill value, one element repeated, or zeros when there is none.

pub mod chunk_index;
pub mod chunked;
pub mod compact;
pub mod contiguous;
pub mod external;
mod gather;

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::{ChunkBytes, ChunkCache};
use crate::error::{Error, Result};
use crate::format::messages::filter_pipeline::FilterPipeline;
use crate::format::messages::layout::{Layout, LayoutClass};
use crate::io::{ReadCtx, Sizes, Storage};
pub use chunk_index::ChunkRecord;

/// One segment of external storage, with its file name already resolved to a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalSegment {
    pub path: PathBuf,
    /// Offset in the external file.
    pub offset: u64,
    /// Bytes of the dataset this segment holds.
    pub size: u64,
}

/// Everything the layout engine needs to serve a dataset.
#[derive(Clone, Debug)]
pub struct LayoutParams {
    pub storage: Storage,
    pub sizes: Sizes,
    pub layout: Layout,
    /// Current dimensions (empty for scalar).
    pub dims: Vec<u64>,
    /// Maximum dimensions (`u64::MAX` unlimited); `dims` when not stored.
    pub max_dims: Vec<u64>,
    /// Number of elements (1 for scalar, 0 for null dataspace).
    pub npoints: u64,
    pub element_size: u32,
    /// One element of fill value; `None` means zeros.
    pub fill: Option<Vec<u8>>,
    pub filters: FilterPipeline,
    /// Resolved external storage segments, if the dataset has an external file list.
    pub external: Option<external::ExternalFiles>,
    /// The shared chunk cache.
    pub cache: Arc<ChunkCache>,
    /// The buffers decodes reuse, shared like the cache.
    pub scratch: Arc<crate::filters::ScratchPool>,
    /// Id of the dataset within its file (its object header address; also named in errors).
    pub cache_id: u64,
    /// Id of the dataset's file within the cache ([`ChunkCache::new_file_id`]).
    pub cache_file: u64,
}

/// Serves byte ranges of one dataset.
#[derive(Debug)]
pub struct DataReader {
    len: u64,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Compact(compact::Compact),
    Contiguous(contiguous::Contiguous),
    External(external::External),
    Chunked(Box<chunked::Chunked>),
}

impl DataReader {
    /// Prepare a reader. Cheap: no chunk index is walked.
    pub fn new(mut params: LayoutParams) -> Result<DataReader> {
        let id = params.cache_id;
        let es = params.element_size as u64;
        if es == 0 {
            return Err(Error::corrupt("dataset", id, "element size is 0"));
        }
        let len = params.npoints.checked_mul(es).ok_or_else(|| {
            Error::limit(
                "dataset",
                id,
                format!("{} elements of {es} bytes overflow", params.npoints),
            )
        })?;
        if !params.dims.is_empty() {
            let product = params.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            if product != Some(params.npoints) {
                return Err(Error::corrupt(
                    "dataspace",
                    id,
                    format!(
                        "dimensions {:?} do not hold {} elements",
                        params.dims, params.npoints
                    ),
                ));
            }
        }
        if let Some(f) = &params.fill {
            if f.len() as u64 != es {
                return Err(Error::corrupt(
                    "fill value",
                    id,
                    format!("{} bytes for an element of {es} bytes", f.len()),
                ));
            }
        }
        let kind = if let Some(files) = &params.external {
            Kind::External(external::External::new(files.clone(), len, id)?)
        } else {
            match &params.layout.class {
                LayoutClass::Compact { data } => {
                    Kind::Compact(compact::Compact::new(data.clone(), len, id)?)
                }
                LayoutClass::Contiguous { addr, size } => {
                    let (addr, size) = (*addr, *size);
                    let extent = (addr != crate::io::UNDEFINED_ADDR).then_some((addr, len));
                    params.storage = params.storage.for_dataset(id, extent);
                    Kind::Contiguous(contiguous::Contiguous::new(&params, addr, size, len)?)
                }
                LayoutClass::Chunked(c) => {
                    let c = c.clone();
                    params.storage = params.storage.for_dataset(id, None);
                    Kind::Chunked(Box::new(chunked::Chunked::new(&params, &c)?))
                }
                LayoutClass::Virtual { .. } => {
                    return Err(Error::unsupported(
                        "virtual dataset layout",
                        format!("dataset at {id:#x}"),
                    ))
                }
            }
        };
        Ok(DataReader { len, kind })
    }

    /// A reader for a chunked dataset that uses `index` instead of opening the index its layout
    /// message describes (for tests and tools that hold an index already).
    pub fn with_chunk_index(
        params: LayoutParams,
        index: Box<dyn chunk_index::ChunkIndex>,
    ) -> Result<DataReader> {
        if params.external.is_some() || !matches!(params.layout.class, LayoutClass::Chunked(_)) {
            return Err(Error::Invalid(
                "with_chunk_index needs a chunked layout".into(),
            ));
        }
        let reader = DataReader::new(params)?;
        if let Kind::Chunked(c) = &reader.kind {
            c.set_index(index);
        }
        Ok(reader)
    }

    /// The relative address of a contiguous dataset's block, which holds its image byte for
    /// byte (checked to lie in the address space when the reader was made; against the file
    /// when read); `None` for other layouts and for a block never allocated.
    pub fn contiguous_addr(&self) -> Option<u64> {
        match &self.kind {
            Kind::Contiguous(r) => r.addr(),
            _ => None,
        }
    }

    /// The chunk shape of a chunked dataset; `None` for other layouts.
    pub fn chunk_dims(&self) -> Option<&[u64]> {
        match &self.kind {
            Kind::Chunked(r) => Some(r.chunk_dims()),
            _ => None,
        }
    }

    /// The stored chunk of a chunked dataset at chunk coordinates `coords` (one per
    /// dimension, in chunk units): where it is, its stored size and filter mask, and whether
    /// it is stored raw (no filter applies to it: an unfiltered dataset, or a partial edge
    /// chunk a file stores unfiltered). `None` when it was never written, for coordinates
    /// outside the grid, and for other layouts.
    pub fn stored_chunk(&self, coords: &[u64]) -> Result<Option<(ChunkRecord, bool)>> {
        match &self.kind {
            Kind::Chunked(r) => r.stored_chunk(coords),
            _ => Ok(None),
        }
    }

    /// The decoded bytes of the chunk at `coords` (the whole chunk, as HDF5 stores it:
    /// the parts past the dataset's edges included), through the chunk cache; `None` when
    /// never written or not a chunked dataset.
    pub fn decoded_chunk(&self, ctx: ReadCtx, coords: &[u64]) -> Result<Option<ChunkBytes>> {
        match &self.kind {
            Kind::Chunked(r) => r.decoded_chunk(ctx, coords),
            _ => Ok(None),
        }
    }

    /// The stored (filtered) bytes of the chunk `rec` of a chunked dataset, as they are in
    /// the file.
    pub fn read_stored_chunk(&self, ctx: ReadCtx, rec: &ChunkRecord) -> Result<Vec<u8>> {
        match &self.kind {
            Kind::Chunked(r) => r.read_stored(ctx, rec),
            _ => Err(Error::Invalid("not a chunked dataset".into())),
        }
    }

    /// Size of the virtual file: npoints × element size.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the dataset holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fill `buf` with the bytes at `offset`; returns the number of bytes written (short only
    /// at the end of the data). For a reader not known ([`DataReader::read_in`]).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_in(ReadCtx::default(), offset, buf)
    }

    /// [`DataReader::read_at`] for `ctx`: a reader's read, or a prefetch worker's, which
    /// only brings the chunks of a chunked dataset into the chunk cache and leaves `buf` as
    /// it is (it wants the decode, not the bytes); other layouts read as usual.
    pub fn read_in(&self, ctx: ReadCtx, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if offset >= self.len || buf.is_empty() {
            return Ok(0);
        }
        // Fits in usize: it is at most buf.len().
        let n = (self.len - offset).min(buf.len() as u64) as usize;
        let buf = &mut buf[..n];
        match &self.kind {
            Kind::Compact(r) => r.read(offset, buf),
            Kind::Contiguous(r) => r.read(ctx, offset, buf),
            Kind::External(r) => r.read(offset, buf),
            Kind::Chunked(r) => r.read(ctx, offset, buf),
        }?;
        Ok(n)
    }

    /// Name the stored bytes that image bytes `offset..offset + len` need to a source where
    /// every request costs a round trip, so that they are fetched together now (merged
    /// requests, in the background). `read`: the reader for whom these bytes are read now
    /// (rather than ahead), which the source follows as the reader's progress. Chunked
    /// layouts name their chunks; a contiguous one names its block for bytes read ahead (a
    /// read of it is one range already).
    pub fn hint(&self, offset: u64, len: u64, read: Option<ReadCtx>) -> Result<()> {
        let end = offset.saturating_add(len).min(self.len);
        match &self.kind {
            Kind::Chunked(r) if offset < end => r.hint(offset, end, read),
            Kind::Contiguous(r) if offset < end && read.is_none() => {
                r.hint(offset, end);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Name the chunk index nodes that image bytes `offset..offset + len` need to a source
    /// where every request costs a round trip, ahead of naming the data itself (see
    /// [`DataReader::hint`]); the levels above the last are read here. Nothing for other
    /// layouts, whose place needs no index.
    pub fn prepare_index(&self, offset: u64, len: u64) -> Result<()> {
        let end = offset.saturating_add(len).min(self.len);
        match &self.kind {
            Kind::Chunked(r) if offset < end => r.prepare_index(offset, end),
            _ => Ok(()),
        }
    }

    /// Name the chunks numbered `first..end` in C order of a chunked dataset's chunk grid
    /// to a source where every request costs a round trip: their stored bytes when `data`,
    /// else their index nodes (see [`DataReader::hint`], [`DataReader::prepare_index`]).
    /// Nothing for other layouts.
    pub fn hint_grid(&self, first: u64, end: u64, data: bool) -> Result<()> {
        match &self.kind {
            Kind::Chunked(r) => r.hint_grid(first, end, data),
            _ => Ok(()),
        }
    }

    /// The cached decoded chunk holding bytes `offset..offset + len` of the image as one
    /// contiguous run, and the run's start in it; `None` when the range is not such a run
    /// (other layouts, ranges crossing chunks or rows, chunks never written) or not wholly
    /// inside the image. A read can answer from it without copying.
    /// `ctx`: for whom, should the chunk have to be fetched.
    pub fn read_shared(
        &self,
        ctx: ReadCtx,
        offset: u64,
        len: u64,
    ) -> Result<Option<(ChunkBytes, usize)>> {
        match &self.kind {
            Kind::Chunked(r) if offset.checked_add(len).is_some_and(|e| e <= self.len) => {
                r.shared_run(ctx, offset, len)
            }
            _ => Ok(None),
        }
    }
}

/// Fill `buf`, which holds the image bytes starting at `image_offset`, with the fill value
/// (`None`: zeros). The element pattern is aligned on element boundaries of the image.
pub(crate) fn fill_pattern(buf: &mut [u8], image_offset: u64, fill: Option<&[u8]>) {
    let pat = match fill {
        Some(p) if !p.is_empty() && p.iter().any(|&b| b != 0) => p,
        _ => {
            buf.fill(0);
            return;
        }
    };
    let es = pat.len();
    let phase = (image_offset % es as u64) as usize;
    let first = es.min(buf.len());
    for (i, b) in buf[..first].iter_mut().enumerate() {
        *b = pat[(phase + i) % es];
    }
    // Double the filled prefix: it always holds whole periods, so copies keep the phase.
    let mut filled = first;
    while filled < buf.len() {
        let k = filled.min(buf.len() - filled);
        buf.copy_within(0..k, filled);
        filled += k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::messages::filter_pipeline::FilterSpec;
    use crate::format::messages::layout::{ChunkIndexSpec, ChunkedLayout};
    use crate::layout::chunk_index::{ChunkIndex, ChunkRecord};
    use serde_json::Value;
    use std::collections::HashMap;

    /// A chunk index fed from libhdf5's own chunk list (H5Dget_chunk_info).
    #[derive(Debug)]
    struct ListIndex(HashMap<Vec<u64>, ChunkRecord>);

    impl ChunkIndex for ListIndex {
        fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
            Ok(self.0.get(coords).copied())
        }
    }

    fn u64s(v: &Value) -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    }

    use crate::io::testutil::hex;

    /// Compare whole and pseudo-random range reads with h5py's bytes for every dataset of the
    /// manifest written by `testdata/make_fixtures.py`. Skipped unless
    /// `H5MOUNT_LAYOUT_FIXTURES` names that manifest.
    #[test]
    fn real_files() {
        let Ok(manifest) = std::env::var("H5MOUNT_LAYOUT_FIXTURES") else {
            return;
        };
        let entries: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
        let cache = Arc::new(ChunkCache::new(1 << 16));
        for (n, e) in entries.iter().enumerate() {
            let what = format!("{} {}", e["file"], e["name"]);
            let storage = Storage::open(std::path::Path::new(e["file"].as_str().unwrap()))
                .unwrap()
                .with_base(e["userblock"].as_u64().unwrap());
            let dims = u64s(&e["dims"]);
            let es = e["element_size"].as_u64().unwrap() as u32;
            let mut external = None;
            let mut index = None;
            let class = match e["kind"].as_str().unwrap() {
                "contiguous" => LayoutClass::Contiguous {
                    addr: e["addr"].as_u64().unwrap(),
                    size: e["size"].as_u64().unwrap(),
                },
                "compact" => LayoutClass::Compact {
                    data: hex(e["data"].as_str().unwrap()),
                },
                "external" => {
                    let segs = e["external"].as_array().unwrap();
                    external = Some(external::ExternalFiles {
                        segments: segs
                            .iter()
                            .map(|s| ExternalSegment {
                                path: s[0].as_str().unwrap().into(),
                                offset: s[1].as_u64().unwrap(),
                                size: s[2].as_u64().unwrap(),
                            })
                            .collect(),
                        opener: Arc::new(external::PlainOpener),
                    });
                    LayoutClass::Contiguous {
                        addr: u64::MAX,
                        size: 0,
                    }
                }
                _ => {
                    let mut map = HashMap::new();
                    for c in e["chunks"].as_array().unwrap() {
                        let rec = ChunkRecord {
                            addr: c["addr"].as_u64().unwrap(),
                            size: c["size"].as_u64().unwrap(),
                            filter_mask: c["mask"].as_u64().unwrap() as u32,
                        };
                        map.insert(u64s(&c["coords"]), rec);
                    }
                    index = Some(Box::new(ListIndex(map)) as Box<dyn ChunkIndex>);
                    LayoutClass::Chunked(ChunkedLayout {
                        flags: e["layout_flags"].as_u64().unwrap() as u8,
                        chunk_dims: u64s(&e["chunk_dims"]),
                        element_size: es,
                        index: ChunkIndexSpec::BtreeV1 { addr: 0 },
                    })
                }
            };
            let filters = FilterPipeline {
                filters: e["filters"]
                    .as_array()
                    .map(|v| v.as_slice())
                    .unwrap_or_default()
                    .iter()
                    .map(|f| FilterSpec {
                        id: f[0].as_u64().unwrap() as u16,
                        flags: f[1].as_u64().unwrap() as u16,
                        name: None,
                        client_data: u64s(&f[2]).iter().map(|&x| x as u32).collect(),
                    })
                    .collect(),
            };
            let params = LayoutParams {
                storage,
                sizes: Sizes::DEFAULT,
                layout: Layout {
                    version: 3,
                    class,
                    legacy_dims: None,
                },
                npoints: dims.iter().product(),
                max_dims: u64s(&e["max_dims"]),
                dims,
                element_size: es,
                fill: e["fill"].as_str().map(hex),
                filters,
                external,
                cache: cache.clone(),
                scratch: Arc::default(),
                cache_id: n as u64,
                cache_file: 0,
            };
            let reader = match index {
                Some(i) => DataReader::with_chunk_index(params, i),
                None => DataReader::new(params),
            }
            .unwrap();
            let expect = std::fs::read(e["expect"].as_str().unwrap()).unwrap();
            assert_eq!(reader.len(), expect.len() as u64, "{what}");
            let mut all = vec![0u8; expect.len() + 5];
            match reader.read_at(0, &mut all) {
                // A build whose filter pipeline cannot decode these chunks yet.
                Err(Error::Unsupported { .. }) if !e["filters"].is_null() => {
                    eprintln!("skipped (filters unsupported): {what}");
                    continue;
                }
                r => assert_eq!(r.unwrap(), expect.len(), "{what}"),
            }
            assert!(all[..expect.len()] == expect[..], "{what}: whole read");
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let off = (x % (expect.len() as u64 + 1)) as usize;
                let n = ((x >> 32) % 300) as usize;
                let mut b = vec![0u8; n];
                let got = reader.read_at(off as u64, &mut b).unwrap();
                let want = &expect[off..(off + n).min(expect.len())];
                assert!(&b[..got] == want, "{what}: {off}+{n}");
            }
        }
        eprintln!("{} real datasets checked", entries.len());
    }

    fn params(class: LayoutClass, dims: Vec<u64>, es: u32, fill: Option<Vec<u8>>) -> LayoutParams {
        let storage = crate::io::testutil::memory_storage(&(0u8..64).collect::<Vec<_>>());
        LayoutParams {
            storage,
            sizes: Sizes::DEFAULT,
            layout: Layout {
                version: 3,
                class,
                legacy_dims: None,
            },
            npoints: dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .unwrap_or(u64::MAX),
            max_dims: dims.clone(),
            dims,
            element_size: es,
            fill,
            filters: FilterPipeline::default(),
            external: None,
            cache: Arc::new(ChunkCache::new(0)),
            scratch: Arc::default(),
            cache_id: 0x1234,
            cache_file: 0,
        }
    }

    #[test]
    fn contiguous_reads_fills_and_checks() {
        let c = |addr, size| LayoutClass::Contiguous { addr, size };
        let r = DataReader::new(params(c(10, 12), vec![3, 2], 2, None)).unwrap();
        let mut b = [0u8; 20];
        assert_eq!(r.read_at(3, &mut b).unwrap(), 9);
        assert_eq!(&b[..9], &(13u8..22).collect::<Vec<_>>()[..]);
        assert_eq!(r.read_at(12, &mut b).unwrap(), 0);
        // Never allocated: the fill value, element-aligned.
        let r = DataReader::new(params(c(u64::MAX, 0), vec![4], 2, Some(vec![1, 2]))).unwrap();
        assert_eq!(r.read_at(1, &mut b).unwrap(), 7);
        assert_eq!(&b[..7], &[2, 1, 2, 1, 2, 1, 2]);
        // A block smaller than the dataset, or one past the end of the file.
        assert!(DataReader::new(params(c(0, 11), vec![3, 2], 2, None)).is_err());
        let r = DataReader::new(params(c(60, 12), vec![3, 2], 2, None)).unwrap();
        assert!(matches!(r.read_at(0, &mut b), Err(Error::Truncated { .. })));
    }

    #[test]
    fn new_rejects_bad_sizes_and_virtual() {
        let c = LayoutClass::Contiguous { addr: 0, size: 0 };
        let big = params(c.clone(), vec![1 << 40, 1 << 30], 8, None);
        assert!(matches!(
            DataReader::new(big),
            Err(Error::Limit { addr: 0x1234, .. })
        ));
        let mut p = params(c.clone(), vec![2], 8, None);
        p.npoints = 3;
        assert!(matches!(DataReader::new(p), Err(Error::Corrupt { .. })));
        let fill = params(c.clone(), vec![2], 8, Some(vec![1]));
        assert!(matches!(DataReader::new(fill), Err(Error::Corrupt { .. })));
        let v = LayoutClass::Virtual {
            heap_addr: 0,
            index: 0,
        };
        let e = DataReader::new(params(v, vec![2], 8, None)).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }));
        let compact = LayoutClass::Compact { data: vec![5; 8] };
        let r = DataReader::new(params(compact, vec![], 8, None)).unwrap();
        let mut b = [0u8; 9];
        assert_eq!(r.read_at(0, &mut b).unwrap(), 8);
    }

    #[test]
    fn shareable_between_fuse_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<DataReader>();
        send_sync::<ChunkCache>();
    }

    #[test]
    fn fill_pattern_keeps_element_phase() {
        let mut b = [0u8; 7];
        fill_pattern(&mut b, 5, Some(&[1, 2, 3]));
        // Image offset 5 is byte 2 of element 1.
        assert_eq!(b, [3, 1, 2, 3, 1, 2, 3]);
        let mut z = [9u8; 4];
        fill_pattern(&mut z, 1, None);
        assert_eq!(z, [0; 4]);
        let mut long = vec![0u8; 1000];
        fill_pattern(&mut long, 0, Some(&[1, 2, 3, 4, 5, 6, 7]));
        assert!(long
            .iter()
            .enumerate()
            .all(|(i, &v)| v as usize == i % 7 + 1));
    }
}
