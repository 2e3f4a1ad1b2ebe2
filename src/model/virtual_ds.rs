//! Reading a virtual dataset (VDS) by gathering elements from its source datasets.
//!
//! The mapping table ([`crate::format::vds`]) pairs a selection in the virtual dataspace with
//! a selection in a source dataset: the n-th selected virtual element (in the C order of its
//! selection) is the n-th selected source element. Elements no mapping covers, and elements
//! whose source file or dataset is missing, read as the fill value.
//!
//! Each selection is turned into a `Sel` (module `sel`): a list of *parts*, each a product
//! of one regular pattern per dimension (`start + (k / block) * stride + k % block` for
//! `k < n`). "All" and regular hyperslabs are one part, points one part each, and explicit
//! block lists (hyperslab version 1, what the earliest format bounds write) are decomposed by
//! module `boxes` into parts in the C order of their union. A read of an element range walks
//! each mapping's virtual parts by *runs* (elements consecutive both in the virtual file and
//! in selection order), stepping from run to run rather than visiting every element, and copies
//! the matching source runs with one `Dataset::read_at` each; many short runs over a compact
//! stretch of source elements (strides, interleaving) are served by reading that stretch once
//! and scattering it.
//!
//! Unlimited mappings are resolved when the dataset is opened, against the sources' current
//! extents: a source selection unlimited in one dimension is clipped to the source, and the
//! virtual selection keeps as many elements; a `%b` mapping (printf-style names) maps block
//! *i* of the virtual selection to the source named with *i*, for every *i* until the first
//! missing source. As libhdf5 does (view "last available"), the extent of the virtual
//! dataset's unlimited dimensions is then the furthest any mapping reaches, fixed ones
//! included (0 when no source exists); a clipped source keeps its trailing partial block.
//!
//! A source of another numeric type is converted to the virtual dataset's type as libhdf5
//! converts it (module `convert`: byte order, integer width and signedness, float width,
//! integer <-> float); other type differences are refused (unsupported) rather than served
//! as bytes of another type. A source's path follows soft links and external links (to
//! other files, under the resolver's policy), as libhdf5 opens it.
//!
//! Sources in the same file are opened through the same [`File`] when the VDS is opened;
//! sources in other files are found on first read, relative to the VDS file's directory, by
//! the file's resolver ([`super::resolver`]): its path policy, its bound on open files and
//! its one chunk cache hold for sources as for every other file. A source is kept as its
//! file's index and its dataset's address, not as an open file, so a VDS over many thousand
//! files holds no more descriptors than the bound.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};

use super::file::File;
use super::resolver::{FileIdx, Resolver};
use super::{Dataset, ObjectId};
use crate::error::{Error, ErrorClass, Result};
use crate::format::global_heap::GlobalHeapCollection;
use crate::format::messages::datatype::Datatype;
use crate::format::vds::{RegularDim, Selection, VdsBlock, VdsMapping, UNLIMITED};
use crate::io::ReadCtx;

mod boxes;
mod convert;
mod sel;
use convert::Conversion;
use sel::{Dim, Part, Sel};

/// Nested virtual datasets (a VDS whose source is a VDS) followed at most this deep, which
/// also stops a VDS that names itself.
const MAX_NESTING: u32 = 8;
/// `%b` sources probed per mapping (libhdf5 probes until the first missing one).
const MAX_PRINTF_SOURCES: u64 = 1 << 16;
/// Largest element, in bytes, of a virtual dataset: reads assemble whole elements (a read of
/// part of one, or of a byte range cutting elements, goes through a buffer of whole
/// elements), so an element size the datatype message may set up to 4 GiB is bounded here.
const MAX_ELEMENT: u64 = 16 << 20;
/// Largest mapping table read (its global heap object): 64 MiB holds about a million
/// mappings of source file, dataset and selections; libhdf5 writes one object per virtual
/// dataset, so larger is a corrupt size rather than a real table.
const MAX_MAPPING_TABLE: u64 = 64 << 20;
/// Gather a stretch of source ordinals at once when it is at most this many times the elements
/// a read wants from it...
const GATHER_SLACK: u64 = 4;
/// ...and at most this many bytes.
const MAX_GATHER_BYTES: u64 = 16 << 20;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Run `f` one VDS level deeper, refusing to go past [`MAX_NESTING`]. The depth is put back
/// also when `f` panics (the filesystem layer catches a request's panic and the thread
/// serves on: a depth left raised would refuse every virtual dataset on it after a few).
fn nested<T>(addr: u64, f: impl FnOnce() -> Result<T>) -> Result<T> {
    struct Back(u32);
    impl Drop for Back {
        fn drop(&mut self) {
            DEPTH.with(|c| c.set(self.0));
        }
    }
    let d = DEPTH.with(|c| c.get());
    if d >= MAX_NESTING {
        return Err(Error::limit(
            "virtual dataset",
            addr,
            "sources nest too deep (or cycle)",
        ));
    }
    let _back = Back(d);
    DEPTH.with(|c| c.set(d + 1));
    f()
}

/// A source dataset as resolved for one mapping.
enum Source {
    /// File or dataset absent: the region reads as the fill value.
    Missing,
    Ready {
        file: FileIdx,
        dset: ObjectId,
        sel: Sel,
        /// From the source's type to the virtual dataset's, when they differ.
        conv: Option<Conversion>,
    },
    /// Present but unusable (corrupt, different type): reads fail with this.
    Failed { class: ErrorClass, message: String },
}

/// One mapping, or one block of a `%b` mapping.
struct Sub {
    vsel: Sel,
    file_name: String,
    dataset_name: String,
    source_select: Selection,
    source: OnceLock<Source>,
}

/// Serves byte ranges of one virtual dataset.
pub struct VirtualReader {
    /// The dataset's object header.
    addr: u64,
    /// The global heap collection holding the mapping table, where the selections were read
    /// from (named by the errors of a corrupt one).
    heap: u64,
    dims: Vec<u64>,
    esize: u64,
    len: u64,
    fill: Vec<u8>,
    dtype: Datatype,
    /// The VDS file's directory (relative source names start there).
    dir: PathBuf,
    /// The VDS file's resolver, which finds and bounds the source files.
    resolver: Weak<Resolver>,
    subs: Vec<Sub>,
}

impl std::fmt::Debug for VirtualReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualReader")
            .field("addr", &self.addr)
            .field("dims", &self.dims)
            .field("mappings", &self.subs.len())
            .finish()
    }
}

/// Replace `%b` by the block index and `%%` by `%` (libhdf5's printf-style source names).
fn substitute(name: &str, block: u64) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('%', Some('b')) => {
                chars.next();
                out.push_str(&block.to_string());
            }
            ('%', Some('%')) => {
                chars.next();
                out.push('%');
            }
            _ => out.push(c),
        }
    }
    out
}

fn is_printf(m: &VdsMapping) -> bool {
    let has = |s: &str| s.replace("%%", "").contains("%b");
    has(&m.file_name) || has(&m.dataset_name)
}

impl Sub {
    fn new(vsel: Sel, m: &VdsMapping) -> Sub {
        Sub {
            vsel,
            file_name: m.file_name.clone(),
            dataset_name: m.dataset_name.clone(),
            source_select: m.source_select.clone(),
            source: OnceLock::new(),
        }
    }
}

/// A mapping unlimited in its virtual selection, or one block of a `%b` mapping, resolved
/// against its source before the virtual extent is known.
struct Resolved<'m> {
    /// The virtual selection's dimensions, the unlimited one cut to what the source fills.
    vdims: Vec<Dim>,
    mapping: &'m VdsMapping,
    source: Source,
}

/// Refuse a datatype whose elements a virtual dataset cannot assemble: one without a fixed-size
/// byte image, or one bigger than [`MAX_ELEMENT`] (`addr`: the dataset's header).
fn check_element(dtype: &Datatype, addr: u64) -> Result<()> {
    if !dtype.is_fixed_size() {
        return Err(Error::unsupported(
            "datatype",
            format!("{} has no fixed-size byte image", dtype.numpy_str()),
        ));
    }
    if dtype.size as u64 > MAX_ELEMENT {
        return Err(Error::limit(
            "virtual dataset",
            addr,
            format!(
                "elements of {} bytes exceed the {MAX_ELEMENT} bytes a virtual dataset's \
                 element may have",
                dtype.size
            ),
        ));
    }
    Ok(())
}

/// The mapping table: object `heap.1` of the global heap collection at `heap.0`, of at
/// most [`MAX_MAPPING_TABLE`] bytes (the layout message does not record its size).
fn read_mapping_table(file: &File, heap: (u64, u32)) -> Result<VdsBlock> {
    let gcol = GlobalHeapCollection::open(file.storage(), heap.0, file.sizes())?;
    let raw = gcol.object_up_to(file.storage(), heap.1, MAX_MAPPING_TABLE)?;
    VdsBlock::parse(&raw, heap.0, file.sizes())
}

/// The dimensions of a virtual selection unlimited in dimension `skip`, that one left empty
/// (to be set from the sources); `addr` is where the selection was read from.
fn finite_except(vdims: &[RegularDim], skip: usize, addr: u64) -> Result<Vec<Dim>> {
    vdims
        .iter()
        .enumerate()
        .map(|(d, &r)| {
            if d == skip {
                Ok(sel::clip_unlimited(r, 0))
            } else {
                Dim::from_regular(r, addr)
            }
        })
        .collect()
}

/// Bytes of the image of `dims` elements of `esize` bytes (`addr`: the dataset's header, named
/// when the size overflows).
fn image_len(dims: &[u64], esize: u64, addr: u64) -> Result<u64> {
    dims.iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(esize))
        .ok_or_else(|| Error::corrupt("virtual dataset", addr, "extent overflows"))
}

impl VirtualReader {
    /// Read the mapping table and resolve unlimited mappings. `dims`/`max_dims` are the stored
    /// extent; the effective one is [`VirtualReader::dims`].
    pub fn open(
        file: &File,
        addr: u64,
        heap: (u64, u32),
        dims: &[u64],
        max_dims: &[u64],
        dtype: &Datatype,
        fill: Option<Vec<u8>>,
    ) -> Result<VirtualReader> {
        check_element(dtype, addr)?;
        let block = read_mapping_table(file, heap)?;
        let mut reader = VirtualReader::unmapped(file, addr, heap.0, dims, dtype, fill);
        reader.add_mappings(file, &block.mappings, max_dims)?;
        Ok(reader)
    }

    /// A reader with the stored extent and no mappings yet. A fill value not of one element
    /// is replaced by zeros.
    fn unmapped(
        file: &File,
        addr: u64,
        heap: u64,
        dims: &[u64],
        dtype: &Datatype,
        fill: Option<Vec<u8>>,
    ) -> VirtualReader {
        let esize = dtype.size as u64;
        VirtualReader {
            addr,
            heap,
            dims: dims.to_vec(),
            esize,
            len: 0,
            fill: fill
                .filter(|f| f.len() as u64 == esize)
                .unwrap_or_else(|| vec![0; esize as usize]),
            dtype: dtype.clone(),
            dir: file.dir(),
            resolver: file
                .resolver()
                .as_ref()
                .map_or_else(Weak::new, Arc::downgrade),
            subs: Vec::new(),
        }
    }

    /// Resolve the unlimited mappings, set the effective extent and the image's length from
    /// them, and add one sub per mapping (or `%b` block).
    fn add_mappings(
        &mut self,
        file: &File,
        mappings: &[VdsMapping],
        max_dims: &[u64],
    ) -> Result<()> {
        let (resolved, fixed) = self.resolve_unlimited(file, mappings)?;
        if mappings
            .iter()
            .any(|m| m.virtual_select.unlimited_dim().is_some())
        {
            self.set_unlimited_extent(&fixed, &resolved, max_dims);
        }
        self.len = image_len(&self.dims, self.esize, self.addr)?;
        self.add_subs(file, resolved, fixed)
    }

    /// Split the mappings into those unlimited in their virtual selection, resolved here
    /// against their sources (a `%b` mapping into one entry per block), and fixed ones.
    fn resolve_unlimited<'m>(
        &self,
        file: &File,
        mappings: &'m [VdsMapping],
    ) -> Result<(Vec<Resolved<'m>>, Vec<&'m VdsMapping>)> {
        let mut resolved = Vec::new();
        let mut fixed = Vec::new();
        for m in mappings {
            if m.virtual_select
                .rank()
                .is_some_and(|r| r != self.dims.len())
            {
                return Err(Error::corrupt(
                    "virtual dataset mapping",
                    self.heap,
                    "virtual selection rank differs from the dataset's",
                ));
            }
            let (Some(u), Selection::Regular(vdims)) =
                (m.virtual_select.unlimited_dim(), &m.virtual_select)
            else {
                fixed.push(m);
                continue;
            };
            if is_printf(m) {
                self.resolve_printf(file, m, u, vdims, &mut resolved)?;
            } else {
                resolved.push(self.resolve_clipped(file, m, u, vdims)?);
            }
        }
        Ok((resolved, fixed))
    }

    /// The blocks of a `%b` mapping unlimited in dimension `u`: block *i* of the virtual
    /// selection maps to the source named with *i*, for every *i* until the first source that
    /// is missing (not included) or unusable (included: its block reports the error).
    fn resolve_printf<'m>(
        &self,
        file: &File,
        m: &'m VdsMapping,
        u: usize,
        vdims: &[RegularDim],
        out: &mut Vec<Resolved<'m>>,
    ) -> Result<()> {
        let vu = vdims[u];
        if vu.count != UNLIMITED || vu.block == UNLIMITED {
            return Err(Error::unsupported(
                "virtual dataset",
                "%b mapping with an unlimited block",
            ));
        }
        for i in 0..MAX_PRINTF_SOURCES {
            let (f, d) = (substitute(&m.file_name, i), substitute(&m.dataset_name, i));
            let source = self.resolve_source(file, &f, &d, &m.source_select, true)?;
            if matches!(source, Source::Missing) {
                break;
            }
            let start = i
                .checked_mul(vu.stride.max(vu.block))
                .and_then(|o| o.checked_add(vu.start));
            let mut v = finite_except(vdims, u, self.heap)?;
            v[u] = Dim {
                start: start.ok_or_else(|| {
                    Error::corrupt(
                        "virtual dataset mapping",
                        self.heap,
                        "block start overflows",
                    )
                })?,
                stride: vu.block,
                block: vu.block,
                n: vu.block,
            };
            // A source that exists but cannot be used (unreadable, other type, out of file
            // descriptors) ends the probing too; its block reports the error.
            let last = matches!(source, Source::Failed { .. });
            out.push(Resolved {
                vdims: v,
                mapping: m,
                source,
            });
            if last {
                break;
            }
        }
        Ok(())
    }

    /// A (not `%b`) mapping unlimited in dimension `u` of its virtual selection: that
    /// dimension keeps as many positions as the source's selection, clipped to the source,
    /// fills (none when the source is missing or unusable).
    fn resolve_clipped<'m>(
        &self,
        file: &File,
        m: &'m VdsMapping,
        u: usize,
        vdims: &[RegularDim],
    ) -> Result<Resolved<'m>> {
        let source =
            self.resolve_source(file, &m.file_name, &m.dataset_name, &m.source_select, false)?;
        let n = match &source {
            Source::Ready { sel, .. } => sel.total(),
            _ => 0,
        };
        let mut v = finite_except(vdims, u, self.heap)?;
        let other = v
            .iter()
            .enumerate()
            .filter(|(d, _)| *d != u)
            .try_fold(1u64, |a, (_, x)| a.checked_mul(x.n))
            .unwrap_or(0);
        let positions = n.checked_div(other).unwrap_or(0);
        v[u] = sel::clip_unlimited(vdims[u], positions);
        Ok(Resolved {
            vdims: v,
            mapping: m,
            source,
        })
    }

    /// Set the extent of the dimensions `max_dims` marks unlimited to the furthest coordinate
    /// any mapping, fixed or resolved, reaches (libhdf5's "last available" view).
    fn set_unlimited_extent(
        &mut self,
        fixed: &[&VdsMapping],
        resolved: &[Resolved<'_>],
        max_dims: &[u64],
    ) {
        let rank = self.dims.len();
        let mut reach: Vec<u64> = vec![0; rank];
        let fixed_reach = fixed
            .iter()
            .map(|m| sel::selection_reach(&m.virtual_select, rank));
        let unlimited_reach = resolved
            .iter()
            .map(|r| r.vdims.iter().map(|x| sel::reach(x).unwrap_or(0)).collect());
        for r in fixed_reach.chain(unlimited_reach) {
            for (d, top) in r.into_iter().enumerate() {
                reach[d] = reach[d].max(top);
            }
        }
        for (d, r) in reach.into_iter().enumerate() {
            if max_dims.get(d) == Some(&UNLIMITED) {
                self.dims[d] = r;
            }
        }
    }

    /// One sub per resolved mapping, then per fixed one, against the effective extent. A
    /// fixed mapping's same-file source is resolved now, through the same `File`; other files
    /// are left to the first read.
    fn add_subs(
        &mut self,
        file: &File,
        resolved: Vec<Resolved<'_>>,
        fixed: Vec<&VdsMapping>,
    ) -> Result<()> {
        for r in resolved {
            let vsel = Sel::from_parts(vec![Part { dims: r.vdims }], &self.dims, self.heap)?;
            let sub = Sub::new(vsel, r.mapping);
            let _ = sub.source.set(r.source);
            self.subs.push(sub);
        }
        for m in fixed {
            let sub = Sub::new(Sel::build(&m.virtual_select, &self.dims, self.heap)?, m);
            if m.file_name == "." {
                let s = self.resolve_source(file, ".", &m.dataset_name, &m.source_select, false)?;
                let _ = sub.source.set(s);
            }
            self.subs.push(sub);
        }
        Ok(())
    }

    /// Effective extent (stored extent, or computed from the sources for unlimited mappings).
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// Bytes of the byte image.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the image holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn resolver(&self) -> Result<Arc<Resolver>> {
        self.resolver
            .upgrade()
            .ok_or_else(|| Error::NotFound("virtual dataset source: the mount is closing".into()))
    }

    /// The source file `name` (relative names from the VDS file's directory); `None` if it
    /// does not exist.
    fn source_file(&self, name: &str, quiet: bool) -> Result<Option<Arc<File>>> {
        match self
            .resolver()?
            .open_named(&self.dir, name, "virtual dataset source")
        {
            Ok((_, f)) => Ok(Some(f)),
            Err(Error::NotFound(what)) => {
                if !quiet {
                    log::warn!(
                        "virtual dataset at {:#x}: {what} is missing; its region reads as fill",
                        self.addr
                    );
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Find a source dataset and build its selection. Missing files and datasets give
    /// [`Source::Missing`]; `quiet` skips the log line (printf probing ends on a missing one).
    fn resolve_source(
        &self,
        file: &File,
        file_name: &str,
        dataset_name: &str,
        select: &Selection,
        quiet: bool,
    ) -> Result<Source> {
        let found = nested(self.addr, || -> Result<Option<(FileIdx, Arc<Dataset>)>> {
            let other;
            let f: &File = if file_name == "." {
                file
            } else {
                match self.source_file(file_name, quiet)? {
                    Some(f) => {
                        other = f;
                        &other
                    }
                    None => return Ok(None),
                }
            };
            match find_dataset(f, dataset_name) {
                Ok(found) => Ok(Some(found)),
                Err(e) if e.errno_class() == ErrorClass::NotFound => {
                    if !quiet {
                        log::warn!(
                            "virtual dataset at {:#x}: source {dataset_name} not found in {file_name}; its region reads as fill",
                            self.addr
                        );
                    }
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        });
        let failed = |e: Error| Source::Failed {
            class: e.errno_class(),
            message: format!("source {dataset_name} in {file_name}: {e}"),
        };
        let (src_file, dset) = match found {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(Source::Missing),
            Err(e) => return Ok(failed(e)),
        };
        let conv = if dset.info.dtype == self.dtype {
            None
        } else {
            match Conversion::new(&dset.info.dtype, &self.dtype) {
                Some(c) if c.is_identity() => None,
                Some(c) => Some(c),
                None => {
                    return Ok(failed(Error::unsupported(
                        "virtual dataset source",
                        format!(
                            "type {} differs from the virtual dataset's {} (conversions \
                             are between integer and IEEE float types only)",
                            dset.info.dtype.numpy_str(),
                            self.dtype.numpy_str()
                        ),
                    )))
                }
            }
        };
        let built = source_sel(select, &dset.info.shape, self.heap);
        Ok(match built {
            Ok(sel) => Source::Ready {
                file: src_file,
                dset: dset.id,
                sel,
                conv,
            },
            Err(e) => failed(e),
        })
    }

    fn source_of<'a>(&self, sub: &'a Sub) -> &'a Source {
        sub.source.get_or_init(|| {
            // The main file is not at hand here: only other files are left unresolved.
            let file_name = sub.file_name.clone();
            match self.source_file(&file_name, false) {
                Ok(Some(f)) => self
                    .resolve_source(&f, ".", &sub.dataset_name, &sub.source_select, false)
                    .unwrap_or_else(|e| Source::Failed {
                        class: e.errno_class(),
                        message: e.to_string(),
                    }),
                Ok(None) => Source::Missing,
                Err(e) => Source::Failed {
                    class: e.errno_class(),
                    message: e.to_string(),
                },
            }
        })
    }

    /// Fill `buf` with the bytes at `offset`; returns the number written (short only at the
    /// end). `ctx`: for whom (a prefetch worker's read only brings the sources' chunks into
    /// the cache).
    pub fn read_in(&self, ctx: ReadCtx, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if offset >= self.len || buf.is_empty() || self.esize == 0 {
            return Ok(0);
        }
        let end = offset.saturating_add(buf.len() as u64).min(self.len);
        let n = (end - offset) as usize;
        let e0 = offset / self.esize;
        let e1 = end.div_ceil(self.esize);
        let skip = (offset - e0 * self.esize) as usize;
        if skip == 0 && end.is_multiple_of(self.esize) {
            self.read_elements(ctx, e0, e1, &mut buf[..n])?;
        } else {
            let mut tmp = vec![0u8; ((e1 - e0) * self.esize) as usize];
            self.read_elements(ctx, e0, e1, &mut tmp)?;
            buf[..n].copy_from_slice(&tmp[skip..skip + n]);
        }
        Ok(n)
    }

    /// Elements `[e0, e1)` into `out` (exactly their size).
    fn read_elements(&self, ctx: ReadCtx, e0: u64, e1: u64, out: &mut [u8]) -> Result<()> {
        for el in out.chunks_exact_mut(self.esize as usize) {
            el.copy_from_slice(&self.fill);
        }
        let es = self.esize;
        nested(self.addr, || {
            for sub in &self.subs {
                let mut runs = Vec::new();
                sub.vsel
                    .runs_in(e0, e1, &mut |lin, ord, len| runs.push((lin, ord, len)));
                if runs.is_empty() {
                    continue;
                }
                let (dset, ssel, conv) = match self.source_of(sub) {
                    Source::Missing => continue,
                    Source::Failed { class, message } => {
                        return Err(match class {
                            ErrorClass::Unsupported => {
                                Error::unsupported("virtual dataset source", message)
                            }
                            _ => Error::corrupt("virtual dataset source", self.addr, message),
                        })
                    }
                    Source::Ready {
                        file,
                        dset,
                        sel,
                        conv,
                    } => {
                        let dset = self.resolver()?.get(*file)?.dataset(*dset)?;
                        (dset, sel, conv.as_ref())
                    }
                };
                let read = |off: u64, b: &mut [u8]| dset.read_in(ctx, off, b);
                let (lo, hi) = (runs[0].1, runs[runs.len() - 1].1 + runs[runs.len() - 1].2);
                let wanted: u64 = runs.iter().map(|r| r.2).sum();
                let span = hi - lo;
                if runs.len() > 1
                    && span <= wanted.saturating_mul(GATHER_SLACK)
                    && span * es <= MAX_GATHER_BYTES
                {
                    // Many short virtual runs (strides, interleaving) over a compact stretch
                    // of source ordinals: read that stretch in source-sized runs, then scatter.
                    let mut tmp = self.fill.repeat(span as usize);
                    copy_source(&read, ssel, conv, lo, span, es, &mut tmp)?;
                    for (lin, ord, len) in runs {
                        let (a, b) = (((ord - lo) * es) as usize, ((ord - lo + len) * es) as usize);
                        let d = ((lin - e0) * es) as usize;
                        out[d..d + (b - a)].copy_from_slice(&tmp[a..b]);
                    }
                } else {
                    for (lin, ord, len) in runs {
                        let d = ((lin - e0) * es) as usize;
                        copy_source(
                            &read,
                            ssel,
                            conv,
                            ord,
                            len,
                            es,
                            &mut out[d..d + (len * es) as usize],
                        )?;
                    }
                }
            }
            Ok(())
        })
    }
}

/// A source selection resolved against the source's extent `sdims`, a selection unlimited in
/// one dimension clipped to it; `addr` is where the selection was read from.
fn source_sel(select: &Selection, sdims: &[u64], addr: u64) -> Result<Sel> {
    match (select, select.unlimited_dim()) {
        (Selection::Regular(r), Some(u)) if u < sdims.len() && r.len() == sdims.len() => r
            .iter()
            .enumerate()
            .map(|(d, &x)| {
                if d == u {
                    Ok(sel::clip_unlimited(x, sel::positions_below(&x, sdims[u])))
                } else {
                    Dim::from_regular(x, addr)
                }
            })
            .collect::<Result<Vec<_>>>()
            .and_then(|dims| Sel::from_parts(vec![Part { dims }], sdims, addr)),
        _ => Sel::build(select, sdims, addr),
    }
}

/// Source ordinals `[o, o + count)` into `dst` (their size in the virtual dataset's type,
/// `es` bytes each), converted by `conv` when the source has another type; elements outside
/// the source's extent or beyond its selection are left as they are (the fill value).
/// `read` reads the source dataset's image.
fn copy_source(
    read: &dyn Fn(u64, &mut [u8]) -> Result<usize>,
    ssel: &Sel,
    conv: Option<&Conversion>,
    o: u64,
    count: u64,
    es: u64,
    dst: &mut [u8],
) -> Result<()> {
    let ses = conv.map_or(es, |c| c.src_size() as u64);
    let mut staged = Vec::new();
    let stop = o + count;
    let mut o = o;
    let mut at = 0u64;
    while o < stop && o < ssel.total() {
        let (valid, slin, slen) = ssel.run_at(o);
        let k = slen.min(stop - o);
        if valid {
            let (a, b) = ((at * es) as usize, ((at + k) * es) as usize);
            match conv {
                None => {
                    read(slin * ses, &mut dst[a..b])?;
                }
                Some(c) => {
                    staged.clear();
                    staged.resize((k * ses) as usize, 0);
                    read(slin * ses, &mut staged)?;
                    c.run(&staged, &mut dst[a..b]);
                }
            }
        }
        o += k;
        at += k;
    }
    Ok(())
}

/// The dataset at `path` of `f`, following soft links and, as libhdf5 does for a source's
/// path, external links (to other files, through the resolver and its path policy).
fn find_dataset(f: &File, path: &str) -> Result<(FileIdx, Arc<Dataset>)> {
    match f.resolve(path) {
        Ok(id) => Ok((f.idx(), f.dataset(id)?)),
        Err(e) => {
            let Some((name, rest)) = f.external_step(path) else {
                return Err(e);
            };
            let (g, id) = f.open_linked(&name)?.follow(&rest)?;
            Ok((g.idx(), g.dataset(id)?))
        }
    }
}

#[cfg(test)]
mod tests {
    /// A panic inside a nested read leaves the depth as it was: after more panics than
    /// levels, the thread still reads (the fault the issue saw: every VDS refused).
    #[test]
    fn the_nesting_depth_survives_panics() {
        for _ in 0..(2 * super::MAX_NESTING) {
            let caught = std::panic::catch_unwind(|| {
                super::nested(1, || -> crate::error::Result<()> {
                    panic!("a read panics")
                })
            });
            assert!(caught.is_err());
        }
        assert_eq!(super::DEPTH.with(|c| c.get()), 0);
        assert_eq!(super::nested(1, || Ok(7)).unwrap(), 7);
    }

    use super::*;

    /// A virtual dataset whose datatype declares elements of 1 GiB is refused when opened,
    /// before a read sizes a buffer of one element.
    #[test]
    fn huge_elements_are_refused() {
        use crate::format::messages::layout::LayoutClass;
        use crate::format::messages::{types, Message};
        use crate::model::OpenOptions;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mount-tests/fixtures/vds/vds_latest.h5");
        let f = File::open(&path, &OpenOptions::default()).unwrap();
        let id = f.resolve("/concat").unwrap();
        let header = f.header(id).unwrap();
        let (mut layout, mut dtype) = (None, None);
        for raw in header
            .messages_of(types::LAYOUT)
            .chain(header.messages_of(types::DATATYPE))
        {
            match f.decode(raw).unwrap() {
                Message::Layout(l) => layout = Some(l),
                Message::Datatype(t) => dtype = Some(t),
                _ => {}
            }
        }
        let LayoutClass::Virtual { heap_addr, index } = layout.unwrap().class else {
            panic!("not virtual")
        };
        let mut dtype = dtype.unwrap();
        let open = |dtype: &Datatype| {
            VirtualReader::open(
                &f,
                id.0,
                (heap_addr, index),
                &[4, 10],
                &[4, 10],
                dtype,
                None,
            )
        };
        assert!(open(&dtype).is_ok());
        dtype.size = 1 << 30;
        let e = open(&dtype).unwrap_err().to_string();
        assert!(e.contains("elements of 1073741824 bytes exceed"), "{e}");
    }

    /// Corrupt selections of the mapping table name the global heap collection they were read
    /// from: a virtual one (fixed, or unlimited) when the dataset is opened, a source one when
    /// its region is read.
    #[test]
    fn corrupt_selections_name_the_heap() {
        use crate::model::OpenOptions;
        const HEAP: u64 = 0x1234;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mount-tests/fixtures/vds/vds_latest.h5");
        let f = File::open(&path, &OpenOptions::default()).unwrap();
        let base = f.dataset(f.resolve("/base").unwrap()).unwrap();
        let reg = |start, stride, count, block| RegularDim {
            start,
            stride,
            count,
            block,
        };
        let mapping = |source_select, virtual_select| VdsMapping {
            file_name: ".".into(),
            dataset_name: "/base".into(),
            source_select,
            virtual_select,
        };
        let open = |m: VdsMapping| {
            let dims = [4, 10];
            let mut r = VirtualReader::unmapped(&f, base.id.0, HEAP, &dims, &base.info.dtype, None);
            r.add_mappings(&f, &[m], &dims).map(|()| r)
        };
        let overlap = reg(0, 1, 2, 2);
        let whole = Selection::Regular(vec![reg(0, 1, 1, 4), reg(0, 1, 1, 10)]);
        let fixed = Selection::Regular(vec![reg(0, 1, 1, 4), overlap]);
        let unlimited = Selection::Regular(vec![reg(0, 1, UNLIMITED, 1), overlap]);
        assert!(open(mapping(whole.clone(), whole.clone())).is_ok());
        for bad in [fixed.clone(), unlimited] {
            let e = open(mapping(whole.clone(), bad)).unwrap_err().to_string();
            assert!(e.contains("at 0x1234: blocks overlap"), "{e}");
        }
        let r = open(mapping(fixed, whole)).unwrap();
        let e = r
            .read_in(ReadCtx::default(), 0, &mut [0u8; 4])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("source /base in .: corrupt hyperslab selection at 0x1234"),
            "{e}"
        );
    }

    #[test]
    fn printf_names() {
        assert_eq!(substitute("f%b.h5", 12), "f12.h5");
        assert_eq!(substitute("a%%b%b", 3), "a%b3");
        assert!(!is_printf(&VdsMapping {
            file_name: "x%%b".into(),
            dataset_name: "d".into(),
            source_select: Selection::All,
            virtual_select: Selection::All,
        }));
    }
}
