//! The text view of variable-length datasets: one element per line, each followed by `\n`.
//!
//! - vlen strings: the string as UTF-8 (invalid bytes become U+FFFD; a null-terminated string
//!   stops at its first NUL). So that every element stays on exactly one line, `\` is written
//!   `\\`, a newline `\n` and a carriage return `\r` (backslash escapes, as in C or Python). A
//!   null reference (an unwritten element) is an empty line.
//! - vlen sequences of a fixed-size base (h5py `vlen_dtype('<i4')`): the values separated by
//!   single spaces, each rendered like numpy prints it (`1 2 3`, `0.5 1.0`); an empty sequence
//!   is an empty line. Sequences of sequences or of vlen strings are refused (Unsupported).
//!
//! The file size must be known before the first read (`stat`), so the first call to
//! [`TextView::len`] or [`TextView::read_at`] renders every element once to measure it and
//! keeps a checkpoint (the text offset) every [`BLOCK`] elements; that index is cached for the
//! life of the view. A read then starts at the checkpoint before its offset and renders at most
//! one block plus the elements it returns, so memory stays small for any dataset size.

use std::sync::{Arc, OnceLock};

use super::vlen::{parse_ref, HeapCache, RawVlen};
use crate::error::{Error, Result};
use crate::format::messages::datatype::{Datatype, StringPad, TypeClass, VarLenKind};
use crate::model::value::render_element;
use crate::model::{Dataset, File};

/// Elements per checkpoint of the offset index.
pub const BLOCK: u64 = 256;

/// Most elements a text view serves: its size is known only once every element has been
/// rendered (a few seconds for this many), so a dataspace claiming billions of elements would
/// hold the first `stat` for hours.
pub const MAX_ELEMENTS: u64 = 1 << 24;

#[derive(Debug)]
enum Kind {
    Strings { pad: StringPad },
    Sequence { base: Datatype },
}

#[derive(Debug)]
struct Index {
    /// Text offset of element `k * BLOCK`.
    checkpoints: Vec<u64>,
    total: u64,
}

/// Lazily measured text rendering of one vlen dataset.
#[derive(Debug)]
pub struct TextView {
    file: Arc<File>,
    raw: RawVlen,
    kind: Kind,
    heaps: HeapCache,
    index: OnceLock<Result<Index>>,
}

impl TextView {
    /// A text view of `ds`, which must have a variable-length type.
    pub fn new(file: Arc<File>, ds: &Arc<Dataset>) -> Result<TextView> {
        let kind = match &ds.info.dtype.class {
            TypeClass::VarLen {
                kind: VarLenKind::String { pad, .. },
                ..
            } => Kind::Strings { pad: *pad },
            TypeClass::VarLen {
                kind: VarLenKind::Sequence,
                base,
            } if base.is_fixed_size() && base.size > 0 => Kind::Sequence {
                base: (**base).clone(),
            },
            _ => {
                return Err(Error::unsupported(
                    "text view",
                    format!(
                        "{} is not a vlen string or a vlen sequence of fixed-size values",
                        ds.info.dtype.numpy_str()
                    ),
                ))
            }
        };
        let raw = RawVlen::open(ds.clone(), file.sizes().offset)?;
        if raw.count > MAX_ELEMENTS {
            return Err(Error::unsupported(
                "text view",
                format!(
                    "{} elements: the text view measures every element to know its size, and \
                     serves at most {MAX_ELEMENTS}",
                    raw.count
                ),
            ));
        }
        Ok(TextView {
            file,
            raw,
            kind,
            heaps: HeapCache::default(),
            index: OnceLock::new(),
        })
    }

    /// Size of the text in bytes (measured on first use).
    pub fn len(&self) -> Result<u64> {
        Ok(self.index()?.total)
    }

    /// True when the text is empty (no elements).
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    fn index(&self) -> Result<&Index> {
        // The measuring error itself, kept (errors are Clone) and answered to every caller.
        self.index
            .get_or_init(|| self.measure())
            .as_ref()
            .map_err(Clone::clone)
    }

    fn measure(&self) -> Result<Index> {
        let blocks = self.raw.count.div_ceil(BLOCK);
        let mut checkpoints = Vec::new();
        let mut total = 0u64;
        let mut refs = Vec::new();
        let mut line = Vec::new();
        for b in 0..blocks {
            checkpoints.push(total);
            let first = b * BLOCK;
            let n = BLOCK.min(self.raw.count - first);
            self.raw.read_elements(first, n, &mut refs)?;
            for r in refs.chunks_exact(self.raw.element_size as usize) {
                line.clear();
                self.render(r, &mut line)?;
                total = total.saturating_add(line.len() as u64);
            }
        }
        Ok(Index { checkpoints, total })
    }

    /// Append the line of the element whose stored reference is `r`.
    fn render(&self, r: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let r = parse_ref(&self.file, r)?;
        if let Some(id) = r.id {
            let expected = match &self.kind {
                Kind::Strings { .. } => u64::from(r.len),
                Kind::Sequence { base } => u64::from(r.len).saturating_mul(base.size as u64),
            };
            let obj = self.heaps.object(&self.file, id, expected)?;
            match &self.kind {
                Kind::Strings { pad } => {
                    let mut bytes = obj.get(..r.len as usize).unwrap_or(&obj);
                    if *pad == StringPad::NullTerminate {
                        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
                            bytes = &bytes[..nul];
                        }
                    }
                    escape(&String::from_utf8_lossy(bytes), out);
                }
                Kind::Sequence { base } => {
                    let need = (r.len as u64).saturating_mul(base.size as u64);
                    let data = obj.get(..need as usize).ok_or_else(|| {
                        Error::corrupt(
                            "global heap",
                            id.collection,
                            format!("object {} shorter than its sequence", id.index),
                        )
                    })?;
                    for (i, e) in data.chunks_exact(base.size as usize).enumerate() {
                        if i > 0 {
                            out.push(b' ');
                        }
                        out.extend_from_slice(render_element(base, e).as_bytes());
                    }
                }
            }
        }
        out.push(b'\n');
        Ok(())
    }

    /// Read text bytes at `offset`; returns the bytes written (short only at the end).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let index = self.index()?;
        if offset >= index.total || buf.is_empty() {
            return Ok(0);
        }
        let b = index
            .checkpoints
            .partition_point(|&c| c <= offset)
            .saturating_sub(1);
        let mut pos = index.checkpoints.get(b).copied().unwrap_or(0);
        let mut elem = b as u64 * BLOCK;
        let mut written = 0usize;
        let mut refs = Vec::new();
        let mut line = Vec::new();
        while written < buf.len() && elem < self.raw.count {
            let n = BLOCK.min(self.raw.count - elem);
            self.raw.read_elements(elem, n, &mut refs)?;
            for r in refs.chunks_exact(self.raw.element_size as usize) {
                line.clear();
                self.render(r, &mut line)?;
                let end = pos + line.len() as u64;
                if end > offset {
                    let from = offset.saturating_sub(pos) as usize;
                    let take = (line.len() - from).min(buf.len() - written);
                    buf[written..written + take].copy_from_slice(&line[from..from + take]);
                    written += take;
                    if written == buf.len() {
                        return Ok(written);
                    }
                }
                pos = end;
            }
            elem += n;
        }
        Ok(written)
    }
}

/// Append `s` with `\`, newline and carriage return escaped, so it stays on one line.
pub fn escape(s: &str, out: &mut Vec<u8>) {
    for ch in s.chars() {
        match ch {
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            c => {
                let mut tmp = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
        }
    }
}
