//! The `.tif` view: a TIFF file (classic, or BigTIFF past 4 GiB) whose pages are the 2-D planes
//! of a dataset, made of a generated header region followed by the dataset's byte image.
//!
//! Which datasets: 2-D `(rows, cols)` (one page) and 3-D `(pages, rows, cols)` (a stack of
//! pages, first axis = pages) of integers of 1, 2, 4 or 8 bytes, signed or not, or IEEE
//! half/single/double floats. Enums are served as their base integer and bitfields as
//! unsigned integers, as the `.npy` view describes them; h5py's booleans (numpy `bool`, not an
//! integer there), complex numbers, compounds, strings, opaque data, references, array
//! elements, non-IEEE floats, VAX order and integers that do not read as whole machine
//! integers get no `.tif`, with the reason. So do scalars, 1-D and 4-D+ datasets, null
//! dataspaces and datasets with any zero extent (a TIFF has at least one page, and every page
//! at least one row and one column), and planes wider or taller than 2^32 - 1.
//!
//! Byte order: the TIFF takes the order of the numbers served (after `--byte-order`): a
//! little-endian dataset is an `II` TIFF, a big-endian one an `MM` TIFF, every header field
//! in that order, so the data needs no conversion. One-byte samples are `II`.
//!
//! Layout of the file, all derived from (type, shape) without reading data:
//!
//! ```text
//! 0                      TIFF header: 8 bytes classic ("II" 42 IFD0), 16 BigTIFF ("II" 43 8 0 IFD0)
//! H + k * IFD            IFD of page k (k = 0 .. pages-1), IFD0 at H, each pointing to the next
//! H + pages * IFD        zeros up to DATA = the next multiple of 4096
//! DATA                   the dataset's bytes exactly as the dataset file serves them;
//! DATA + k * PAGE        page k's one strip (PAGE = rows * cols * element size)
//! ```
//!
//! Every IFD has the same 11 entries, all values inline (no out-of-line values), so every IFD
//! has the same size (classic 138 bytes, BigTIFF 236) and any byte of the header region is
//! computed from its offset alone: [`Layout`] holds a dozen numbers and generates the bytes of
//! any range on request ([`Layout::read_header`]); nothing proportional to the page count is
//! ever kept, so a stack of a million pages costs the same memory as one page. The entries:
//! ImageWidth = cols, ImageLength = rows (LONG), BitsPerSample = 8/16/32/64, Compression = 1
//! (none), PhotometricInterpretation = 1 (BlackIsZero), StripOffsets = DATA + k * PAGE,
//! SamplesPerPixel = 1, RowsPerStrip = rows, StripByteCounts = PAGE, PlanarConfiguration = 1,
//! SampleFormat = 1 unsigned / 2 signed / 3 IEEE float (SHORT unless said; strip offsets and
//! counts are LONG in classic TIFF, LONG8 in BigTIFF).
//!
//! The data start is aligned to 4096 bytes so that, when a page's size is a multiple of the
//! memory page size, reading one page through the kernel's page cache asks for that page's
//! bytes only, hence decodes only the chunks that hold that page.
//!
//! Classic or BigTIFF: classic offsets are 32-bit, so a file whose total size (header region
//! plus data, in the classic form) exceeds 4 GiB - 1 is BigTIFF, any other classic. The
//! threshold can be lowered for tests by [`BIGTIFF_ENV`] (a byte count: files larger than it
//! are BigTIFF; `0` makes every `.tif` BigTIFF); it is a test hook, not a user option.

use crate::error::{Error, Result};
use crate::format::messages::datatype::{ByteOrder, Datatype, TypeClass};
use crate::model::value::is_h5py_bool;

/// Largest total size of a classic TIFF (its offsets are 32-bit).
pub const CLASSIC_MAX: u64 = u32::MAX as u64;
/// Test hook: `.tif` files larger than this many bytes are BigTIFF (default [`CLASSIC_MAX`];
/// values above it are ignored).
pub const BIGTIFF_ENV: &str = "H5MOUNT_TIFF_BIGTIFF_ABOVE";
/// Alignment of the data start.
pub const DATA_ALIGN: u64 = 4096;

/// Tags of every IFD, in the ascending order TIFF requires.
const TAGS: [u16; 11] = [256, 257, 258, 259, 262, 273, 277, 278, 279, 284, 339];
/// TIFF field types.
const SHORT: u16 = 3;
const LONG: u16 = 4;
const LONG8: u16 = 16;
/// Size of one IFD: classic (count u16, 12-byte entries, next u32), BigTIFF (count u64,
/// 20-byte entries, next u64).
const IFD_CLASSIC: u64 = 2 + 12 * TAGS.len() as u64 + 4;
const IFD_BIG: u64 = 8 + 20 * TAGS.len() as u64 + 8;
/// Largest IFD or file header.
const MAX_PIECE: usize = IFD_BIG as usize;

fn refuse(detail: impl std::fmt::Display) -> Error {
    Error::unsupported("tiff view", detail)
}

/// TIFF's SampleFormat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleFormat {
    Unsigned = 1,
    Signed = 2,
    Float = 3,
}

/// The TIFF sample of elements of `t` (as served): format, bits per sample, and whether the
/// file is big-endian (`MM`). Errors say why a type has none.
pub fn sample_type(t: &Datatype) -> Result<(SampleFormat, u16, bool)> {
    let size = t.size;
    if !super::npy::integer_as_is(t) {
        return Err(refuse(
            "integer at a bit offset or signed in fewer bits than stored",
        ));
    }
    let (format, order) = match &t.class {
        TypeClass::FixedPoint { order, signed, .. } => (
            if *signed {
                SampleFormat::Signed
            } else {
                SampleFormat::Unsigned
            },
            *order,
        ),
        TypeClass::Bitfield { order, .. } => (SampleFormat::Unsigned, *order),
        TypeClass::Time { order, .. } => (SampleFormat::Signed, *order),
        TypeClass::FloatingPoint {
            order,
            exponent_size,
            mantissa_size,
            bit_offset,
            ..
        } => {
            let ieee = *bit_offset == 0
                && matches!(
                    (size, exponent_size, mantissa_size),
                    (2, 5, 10) | (4, 8, 23) | (8, 11, 52)
                );
            if !ieee {
                return Err(refuse(format!(
                    "{size}-byte float is not IEEE half/single/double"
                )));
            }
            (SampleFormat::Float, *order)
        }
        TypeClass::Enum { .. } if is_h5py_bool(t) => {
            return Err(refuse("booleans (numpy bool, not an integer type)"))
        }
        TypeClass::Enum { base, .. } => return sample_type(base),
        _ => {
            return Err(refuse(format!(
                "no TIFF sample format for {}",
                t.numpy_str()
            )))
        }
    };
    if !matches!(size, 1 | 2 | 4 | 8) {
        return Err(refuse(format!("{size}-byte samples")));
    }
    let big = match order {
        _ if size == 1 => false,
        ByteOrder::Little => false,
        ByteOrder::Big => true,
        ByteOrder::Vax => return Err(refuse("VAX-ordered floats")),
    };
    Ok((format, (size * 8) as u16, big))
}

/// The BigTIFF threshold of [`BIGTIFF_ENV`], if set (at most [`CLASSIC_MAX`]).
pub fn bigtiff_above_from_env() -> Option<u64> {
    std::env::var(BIGTIFF_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|v| v.min(CLASSIC_MAX))
}

/// Everything the header region of one `.tif` is made of (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    big_endian: bool,
    bigtiff: bool,
    width: u32,
    height: u32,
    pages: u64,
    bits: u16,
    format: SampleFormat,
    /// Bytes of one page.
    page_bytes: u64,
    /// Bytes before the data (header, IFDs, padding).
    header_len: u64,
}

impl Layout {
    /// The layout of a dataset of `shape` with elements of `t` (as served), BigTIFF when its
    /// total size in the classic form exceeds `bigtiff_above` (at most [`CLASSIC_MAX`]).
    pub fn new(t: &Datatype, shape: &[u64], bigtiff_above: u64) -> Result<Layout> {
        let (pages, rows, cols) = match *shape {
            [rows, cols] => (1, rows, cols),
            [pages, rows, cols] => (pages, rows, cols),
            [] => return Err(refuse("scalar dataset")),
            _ => {
                return Err(refuse(format!(
                    "{}-D dataset (TIFF takes 2-D, or 3-D as a stack of pages)",
                    shape.len()
                )))
            }
        };
        if pages == 0 || rows == 0 || cols == 0 {
            return Err(refuse("empty dataset (a zero extent)"));
        }
        let (format, bits, big_endian) = sample_type(t)?;
        let (Ok(width), Ok(height)) = (u32::try_from(cols), u32::try_from(rows)) else {
            return Err(refuse("plane wider or taller than 2^32 - 1"));
        };
        let too_big = || refuse("larger than 2^64 bytes");
        let page_bytes = rows
            .checked_mul(cols)
            .and_then(|n| n.checked_mul(t.size as u64))
            .ok_or_else(too_big)?;
        let data = page_bytes.checked_mul(pages).ok_or_else(too_big)?;
        let header_len = |bigtiff: bool| {
            let (head, ifd) = if bigtiff {
                (16, IFD_BIG)
            } else {
                (8, IFD_CLASSIC)
            };
            pages
                .checked_mul(ifd)
                .and_then(|n| n.checked_add(head))
                .and_then(|n| n.checked_next_multiple_of(DATA_ALIGN))
        };
        let classic_total = header_len(false).and_then(|h| h.checked_add(data));
        let bigtiff = classic_total.is_none_or(|n| n > bigtiff_above.min(CLASSIC_MAX));
        let header_len = header_len(bigtiff).ok_or_else(too_big)?;
        header_len.checked_add(data).ok_or_else(too_big)?;
        Ok(Layout {
            big_endian,
            bigtiff,
            width,
            height,
            pages,
            bits,
            format,
            page_bytes,
            header_len,
        })
    }

    pub fn is_bigtiff(&self) -> bool {
        self.bigtiff
    }

    /// True for an `MM` (big-endian) file.
    pub fn is_big_endian(&self) -> bool {
        self.big_endian
    }

    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Bytes of one page (its one strip).
    pub fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    /// Bytes before the data: header, IFDs and padding (a multiple of [`DATA_ALIGN`]).
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// Total size of the file: header region plus `pages * page_bytes`.
    pub fn len(&self) -> u64 {
        self.header_len + self.pages * self.page_bytes
    }

    /// Never true: a `.tif` has at least one page of at least one sample.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Offset of page `k`'s strip in the file.
    pub fn page_offset(&self, k: u64) -> u64 {
        self.header_len + k * self.page_bytes
    }

    /// Size of the TIFF header (8 classic, 16 BigTIFF).
    fn head_len(&self) -> u64 {
        if self.bigtiff {
            16
        } else {
            8
        }
    }

    fn ifd_len(&self) -> u64 {
        if self.bigtiff {
            IFD_BIG
        } else {
            IFD_CLASSIC
        }
    }

    /// Offset of page `k`'s IFD in the file.
    pub fn ifd_offset(&self, k: u64) -> u64 {
        self.head_len() + k * self.ifd_len()
    }

    /// End of the last IFD (padding follows up to [`Layout::header_len`]).
    fn ifds_end(&self) -> u64 {
        self.ifd_offset(self.pages)
    }

    /// The TIFF header into `out`; returns its length.
    fn write_head(&self, out: &mut [u8; MAX_PIECE]) -> usize {
        let mut w = Writer::new(out, self.big_endian);
        w.bytes(if self.big_endian { b"MM" } else { b"II" });
        if self.bigtiff {
            w.u16(43);
            w.u16(8);
            w.u16(0);
            w.u64(self.ifd_offset(0));
        } else {
            w.u16(42);
            // Classic: the whole file, so every offset in it, is below 2^32.
            w.u32(self.ifd_offset(0) as u32);
        }
        w.pos
    }

    /// IFD `k` into `out`; returns its length.
    fn write_ifd(&self, k: u64, out: &mut [u8; MAX_PIECE]) -> usize {
        let next = if k + 1 < self.pages {
            self.ifd_offset(k + 1)
        } else {
            0
        };
        let long = if self.bigtiff { LONG8 } else { LONG };
        let strip = self.page_offset(k);
        let mut w = Writer::new(out, self.big_endian);
        if self.bigtiff {
            w.u64(TAGS.len() as u64);
        } else {
            w.u16(TAGS.len() as u16);
        }
        for tag in TAGS {
            let (kind, value) = match tag {
                256 => (LONG, u64::from(self.width)),
                257 | 278 => (LONG, u64::from(self.height)),
                258 => (SHORT, u64::from(self.bits)),
                273 => (long, strip),
                279 => (long, self.page_bytes),
                339 => (SHORT, self.format as u64),
                // Compression, PhotometricInterpretation, SamplesPerPixel, PlanarConfiguration.
                _ => (SHORT, 1),
            };
            w.u16(tag);
            w.u16(kind);
            // Count 1, then the value left-justified in the 4- or 8-byte value field.
            let field = if self.bigtiff {
                w.u64(1);
                8
            } else {
                w.u32(1);
                4
            };
            let used = match kind {
                SHORT => {
                    w.u16(value as u16);
                    2
                }
                LONG => {
                    w.u32(value as u32);
                    4
                }
                _ => {
                    w.u64(value);
                    8
                }
            };
            w.zeros(field - used);
        }
        if self.bigtiff {
            w.u64(next);
        } else {
            w.u32(next as u32);
        }
        w.pos
    }

    /// Bytes `offset..` of the header region into `buf`, generated on the fly; returns the
    /// bytes written (fewer than asked only at the end of the header region).
    pub fn read_header(&self, offset: u64, buf: &mut [u8]) -> usize {
        let end = self.header_len.min(offset.saturating_add(buf.len() as u64));
        let mut pos = offset;
        let mut piece = [0u8; MAX_PIECE];
        while pos < end {
            let done = (pos - offset) as usize;
            // The piece holding `pos`: its start and bytes (zeros for the padding).
            let (start, len) = if pos < self.head_len() {
                (0, self.write_head(&mut piece))
            } else if pos < self.ifds_end() {
                let k = (pos - self.head_len()) / self.ifd_len();
                (self.ifd_offset(k), self.write_ifd(k, &mut piece))
            } else {
                let n = (end - pos) as usize;
                buf[done..done + n].fill(0);
                break;
            };
            let from = (pos - start) as usize;
            let n = (len - from).min((end - pos) as usize);
            buf[done..done + n].copy_from_slice(&piece[from..from + n]);
            pos += n as u64;
        }
        end.saturating_sub(offset) as usize
    }

    /// The whole header region (tests, and small stacks; [`Layout::read_header`] serves it).
    pub fn header(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.header_len as usize];
        let n = self.read_header(0, &mut out);
        debug_assert_eq!(n, out.len());
        out
    }
}

/// Numbers written in one byte order into a fixed buffer.
struct Writer<'a> {
    out: &'a mut [u8; MAX_PIECE],
    pos: usize,
    big: bool,
}

impl<'a> Writer<'a> {
    fn new(out: &'a mut [u8; MAX_PIECE], big: bool) -> Writer<'a> {
        Writer { out, pos: 0, big }
    }

    fn bytes(&mut self, b: &[u8]) {
        self.out[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    fn zeros(&mut self, n: usize) {
        self.out[self.pos..self.pos + n].fill(0);
        self.pos += n;
    }

    fn u16(&mut self, v: u16) {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    fn u32(&mut self, v: u32) {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    fn u64(&mut self, v: u64) {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
}
