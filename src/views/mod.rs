//! Self-describing views of datasets: extra files next to a dataset, or a different rendering
//! of the dataset file itself, each served lazily at any (offset, length). All are off by
//! default; the raw contract (the dataset file holds exactly `ds[()].tobytes()`) stays the
//! default.
//!
//! | option | file | content |
//! |---|---|---|
//! | [`ViewOptions::byte_order`] | `NAME` | the raw bytes with numbers in another byte order ([`byte_order`]) |
//! | [`ViewOptions::npy`] | `NAME.npy` | NPY header + the (converted) bytes ([`npy`]) |
//! | [`ViewOptions::envi`] | `NAME.hdr` | ENVI header describing `NAME` ([`envi`]) |
//! | [`ViewOptions::text`] | `NAME` | vlen strings/sequences as text, one element per line ([`text`]) |
//! | [`ViewOptions::tiff`] | `NAME.tif` | TIFF header and IFDs + the (converted) bytes, one page per 2-D plane ([`tiff`]) |
//!
//! `fs` calls [`ViewSet::for_dataset`] once per dataset and serves what it returns:
//! [`ViewSet::primary`], when present, replaces what the dataset file `NAME` serves;
//! [`ViewSet::sidecars`] are extra files named `NAME` + [`View::name_suffix`]. Views that do
//! not apply are listed in [`ViewSet::skipped`] with the reason (for logs and `inspect`).
//! Building a set reads no data; sizes are known without reading, except the text view, which
//! measures itself on first use.

pub mod byte_order;
pub mod envi;
pub mod npy;
pub mod text;
pub mod tiff;
pub mod vlen;
pub mod zarr;

use std::sync::Arc;

pub use byte_order::{ByteOrderMode, Converter};

use crate::error::Result;
use crate::io::ReadCtx;
use crate::model::{Dataset, File};
use text::TextView;

/// Something with a byte image readable at any offset: a dataset, or a buffer in tests.
pub trait ByteSource: Send + Sync {
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`; returns the bytes written (short only at the end).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize>;
}

impl ByteSource for Dataset {
    fn len(&self) -> u64 {
        Dataset::len(self)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        Dataset::read_at(self, offset, buf)
    }
}

/// A dataset read for one reader ([`ReadCtx`]).
struct ReadFor<'a>(&'a Dataset, ReadCtx);

impl ByteSource for ReadFor<'_> {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.0.read_in(self.1, offset, buf)
    }
}

impl ByteSource for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.as_slice().len());
        let n = buf.len().min(self.as_slice().len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// Which views to offer (everything off by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViewOptions {
    /// `NAME.npy` for fixed-size datasets.
    pub npy: bool,
    /// `NAME.hdr` for 1- to 3-D numeric datasets.
    pub envi: bool,
    /// Variable-length datasets served as text in `NAME`.
    pub text: bool,
    /// Byte order of numbers in `NAME` (and in `NAME.npy`, `NAME.tif`).
    pub byte_order: ByteOrderMode,
    /// `NAME.tif` for 2-D and 3-D numeric datasets.
    pub tiff: bool,
    /// A `.tif` whose classic form is larger than this many bytes is BigTIFF; `None`:
    /// [`tiff::CLASSIC_MAX`], the most classic TIFF can address (lower only in tests).
    pub bigtiff_above: Option<u64>,
}

/// What a view is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    /// The dataset bytes, byte-order converted.
    Data,
    Npy,
    EnviHeader,
    Tiff,
    Text,
}

impl ViewKind {
    /// Suffix appended to the dataset's name ("" for views that replace the dataset file).
    pub fn name_suffix(self) -> &'static str {
        match self {
            ViewKind::Data | ViewKind::Text => "",
            ViewKind::Npy => ".npy",
            ViewKind::EnviHeader => ".hdr",
            ViewKind::Tiff => ".tif",
        }
    }
}

#[derive(Debug)]
enum Body {
    Data {
        ds: Arc<Dataset>,
        conv: Arc<Converter>,
    },
    Npy {
        header: Vec<u8>,
        ds: Arc<Dataset>,
        conv: Arc<Converter>,
    },
    Tiff {
        layout: Box<tiff::Layout>,
        ds: Arc<Dataset>,
        conv: Arc<Converter>,
    },
    Bytes(Vec<u8>),
    Text(Box<TextView>),
}

/// One servable file.
#[derive(Debug)]
pub struct View {
    kind: ViewKind,
    body: Body,
}

impl View {
    pub fn kind(&self) -> ViewKind {
        self.kind
    }

    /// Suffix appended to the dataset's name ("" when the view replaces the dataset file).
    pub fn name_suffix(&self) -> &'static str {
        self.kind.name_suffix()
    }

    /// Size in bytes. Cheap except for a text view's first call (see [`text`]).
    pub fn len(&self) -> Result<u64> {
        Ok(match &self.body {
            Body::Data { ds, .. } => ds.len(),
            Body::Npy { header, ds, .. } => (header.len() as u64).saturating_add(ds.len()),
            Body::Tiff { layout, ds, .. } => layout.header_len().saturating_add(ds.len()),
            Body::Bytes(b) => b.len() as u64,
            Body::Text(t) => return t.len(),
        })
    }

    /// True when the view has no bytes.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// All the view's bytes.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        crate::io::read_fully(self.len()?, "view", |off, buf| self.read_at(off, buf))
    }

    /// Read at `offset`; returns the bytes written (short only at the end). For a reader
    /// not known: see [`View::read_in`].
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_in(ReadCtx::default(), offset, buf)
    }

    /// [`View::read_at`] for the reader `ctx` names.
    pub fn read_in(&self, ctx: ReadCtx, offset: u64, buf: &mut [u8]) -> Result<usize> {
        match &self.body {
            Body::Data { ds, conv } => conv.read_at(&ReadFor(ds, ctx), offset, buf),
            Body::Bytes(b) => b.read_at(offset, buf),
            Body::Text(t) => t.read_at(offset, buf),
            Body::Npy { header, ds, conv } => {
                let head = |off, buf: &mut [u8]| header.read_at(off, buf);
                let ds = ReadFor(ds, ctx);
                read_framed(header.len() as u64, head, &ds, conv, offset, buf)
            }
            Body::Tiff { layout, ds, conv } => {
                let head = |off, buf: &mut [u8]| Ok(layout.read_header(off, buf));
                let ds = ReadFor(ds, ctx);
                read_framed(layout.header_len(), head, &ds, conv, offset, buf)
            }
        }
    }
}

/// Read at `offset` of a header of `hlen` bytes (read by `head`) followed by the converted
/// bytes of `ds`.
fn read_framed(
    hlen: u64,
    head: impl Fn(u64, &mut [u8]) -> Result<usize>,
    ds: &dyn ByteSource,
    conv: &Converter,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize> {
    let mut done = 0;
    if offset < hlen {
        done = head(offset, buf)?;
    }
    if done < buf.len() {
        let data_off = offset.saturating_add(done as u64).saturating_sub(hlen);
        done += conv.read_at(ds, data_off, &mut buf[done..])?;
    }
    Ok(done)
}

/// The views of one dataset under some [`ViewOptions`].
#[derive(Debug, Default)]
pub struct ViewSet {
    /// What the dataset file `NAME` serves instead of the raw bytes, if anything.
    pub primary: Option<View>,
    /// Extra files `NAME` + suffix.
    pub sidecars: Vec<View>,
    /// Views that were asked for but do not apply, with the reason.
    pub skipped: Vec<(ViewKind, String)>,
}

impl ViewSet {
    /// Decide which views `ds` (a dataset of `file`) gets. Reads no data.
    pub fn for_dataset(file: &Arc<File>, ds: &Arc<Dataset>, opts: &ViewOptions) -> ViewSet {
        let mut set = ViewSet::default();
        let dtype = &ds.info.dtype;
        if !dtype.is_fixed_size() {
            if opts.text {
                match TextView::new(file.clone(), ds) {
                    Ok(t) => {
                        set.primary = Some(View {
                            kind: ViewKind::Text,
                            body: Body::Text(Box::new(t)),
                        })
                    }
                    Err(e) => set.skipped.push((ViewKind::Text, e.to_string())),
                }
            }
            let asked = [
                (opts.npy, ViewKind::Npy),
                (opts.envi, ViewKind::EnviHeader),
                (opts.tiff, ViewKind::Tiff),
            ];
            for (on, kind) in asked {
                if on {
                    set.skipped
                        .push((kind, "variable-length data has no fixed-size image".into()));
                }
            }
            return set;
        }
        let conv = match Converter::new(dtype, opts.byte_order) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                // Serving unconverted bytes under a header that claims another order would lie.
                set.skipped.push((ViewKind::Data, e.to_string()));
                return set;
            }
        };
        if !conv.is_noop() {
            let body = Body::Data {
                ds: ds.clone(),
                conv: conv.clone(),
            };
            set.primary = Some(View {
                kind: ViewKind::Data,
                body,
            });
        }
        let served = byte_order::served_type(dtype, opts.byte_order);
        let null = || {
            (!ds.info.null)
                .then_some(())
                .ok_or("null dataspace (no data)")
        };
        if opts.npy {
            let header = null()
                .map_err(String::from)
                .and_then(|()| npy::header(&served, &ds.info.shape).map_err(|e| e.to_string()));
            match header {
                Ok(header) => {
                    let body = Body::Npy {
                        header,
                        ds: ds.clone(),
                        conv: conv.clone(),
                    };
                    set.sidecars.push(View {
                        kind: ViewKind::Npy,
                        body,
                    });
                }
                Err(e) => set.skipped.push((ViewKind::Npy, e)),
            }
        }
        if opts.envi {
            let text = null()
                .map_err(String::from)
                .and_then(|()| envi::header(&served, &ds.info.shape).map_err(|e| e.to_string()));
            match text {
                Ok(t) => set.sidecars.push(View {
                    kind: ViewKind::EnviHeader,
                    body: Body::Bytes(t.into_bytes()),
                }),
                Err(e) => set.skipped.push((ViewKind::EnviHeader, e)),
            }
        }
        if opts.tiff {
            let layout = null()
                .map_err(String::from)
                .and_then(|()| {
                    tiff::Layout::new(
                        &served,
                        &ds.info.shape,
                        opts.bigtiff_above.unwrap_or(tiff::CLASSIC_MAX),
                    )
                    .map_err(|e| e.to_string())
                })
                .and_then(|l| {
                    // The strips point into the image: it must be exactly the pages' bytes.
                    (l.len() - l.header_len() == ds.len())
                        .then_some(l)
                        .ok_or_else(|| "image size is not the pages' size".to_string())
                });
            match layout {
                Ok(layout) => set.sidecars.push(View {
                    kind: ViewKind::Tiff,
                    body: Body::Tiff {
                        layout: Box::new(layout),
                        ds: ds.clone(),
                        conv: conv.clone(),
                    },
                }),
                Err(e) => set.skipped.push((ViewKind::Tiff, e)),
            }
        }
        set
    }

    /// The sidecar with `suffix` (".npy", ".hdr", ".tif"), if offered.
    pub fn sidecar(&self, suffix: &str) -> Option<&View> {
        self.sidecars.iter().find(|v| v.name_suffix() == suffix)
    }
}

#[cfg(test)]
mod tests;
