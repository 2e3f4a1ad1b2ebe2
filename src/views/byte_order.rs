//! Byte-order conversion of served data: a dataset's bytes can be served as stored, or with
//! every number in native, little- or big-endian order.
//!
//! A [`Converter`] is built once per dataset from its [`Datatype`]: the type is flattened into
//! a short list of swap runs ([`SwapRun`]: "starting at this byte of the element, `count`
//! numbers of `width` bytes, `stride` apart") covering exactly the numbers whose stored order
//! differs from the target. Integers, floats, time and bitfields swap as one number, enums
//! through their base, complex numbers as two parts, arrays repeat their base and compound
//! members each follow their own order (so a compound mixing `<i2` and `>f8` converts both to
//! the target). Strings, opaque data and references are never touched; VAX-ordered floats are
//! served as stored (no other reader knows their layout either).
//!
//! Reads at any offset: the converter reads a window that extends the requested range by up to
//! [`MAX_SWAP_WIDTH`]` - 1` bytes on each side, so every number that the request touches lies
//! whole in the window; it swaps those numbers and copies the requested slice out. When no run
//! is needed (the common case) reads go straight to the source.

use crate::error::{Error, Result};
use crate::format::messages::datatype::{ByteOrder, CompoundMember, Datatype, TypeClass};

use super::ByteSource;

/// Which byte order numbers are served in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ByteOrderMode {
    /// Exactly the stored bytes (the raw contract; default).
    #[default]
    AsStored,
    /// The order of the machine running the mount.
    Native,
    Little,
    Big,
}

impl ByteOrderMode {
    /// The order numbers are converted to, `None` for [`ByteOrderMode::AsStored`].
    pub fn target(self) -> Option<ByteOrder> {
        match self {
            ByteOrderMode::AsStored => None,
            ByteOrderMode::Native if cfg!(target_endian = "big") => Some(ByteOrder::Big),
            ByteOrderMode::Native | ByteOrderMode::Little => Some(ByteOrder::Little),
            ByteOrderMode::Big => Some(ByteOrder::Big),
        }
    }
}

/// Widest number that is swapped: 16 bytes (long double, complex parts of 8). A wider "number"
/// only exists in a corrupt or exotic file and is refused, which keeps read windows small.
pub const MAX_SWAP_WIDTH: u32 = 16;

/// Swap runs allowed for one element type; an array of compounds expands into one run per
/// member per array element, and a real type needs a handful.
const MAX_RUNS: usize = 4096;

/// `count` numbers of `width` bytes to reverse, the first at `offset` within the element, each
/// next one `stride` bytes further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapRun {
    pub offset: u64,
    pub width: u32,
    pub count: u64,
    pub stride: u64,
}

/// Converts the bytes of one dataset to a target byte order.
#[derive(Clone, Debug)]
pub struct Converter {
    element_size: u64,
    runs: Vec<SwapRun>,
}

impl Converter {
    /// Plan the conversion of elements of `dtype` under `mode`.
    pub fn new(dtype: &Datatype, mode: ByteOrderMode) -> Result<Converter> {
        let mut runs = Vec::new();
        if let Some(target) = mode.target() {
            plan(dtype, 0, target, &mut runs)?;
        }
        runs.retain(|r| r.count > 0 && r.width > 1);
        for r in &runs {
            let end = (r.count - 1)
                .checked_mul(r.stride)
                .and_then(|x| x.checked_add(r.offset))
                .and_then(|x| x.checked_add(r.width as u64));
            if end.is_none_or(|e| e > dtype.size as u64) {
                return Err(Error::corrupt(
                    "datatype",
                    0,
                    format!("numbers reach past the {}-byte element", dtype.size),
                ));
            }
        }
        Ok(Converter {
            element_size: dtype.size as u64,
            runs,
        })
    }

    /// True when nothing needs swapping: reads go straight to the source.
    pub fn is_noop(&self) -> bool {
        self.runs.is_empty() || self.element_size == 0
    }

    /// The swap plan of one element.
    pub fn runs(&self) -> &[SwapRun] {
        &self.runs
    }

    /// Swap, in `buf` holding the dataset bytes starting at dataset offset `start`, every
    /// number that lies whole inside `buf` (numbers cut by either end are left alone).
    pub fn apply(&self, start: u64, buf: &mut [u8]) {
        if self.is_noop() || buf.is_empty() {
            return;
        }
        let size = self.element_size;
        let end = start.saturating_add(buf.len() as u64);
        let first = start / size;
        let last = (end - 1) / size;
        for e in first..=last {
            let base = e * size;
            for r in &self.runs {
                swap_run(r, base.saturating_add(r.offset), start, end, buf);
            }
        }
    }

    /// Read converted bytes at `offset` of `src` into `buf`; returns the bytes written (short
    /// only at the end of the data).
    pub fn read_at(&self, src: &dyn ByteSource, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if self.is_noop() {
            return src.read_at(offset, buf);
        }
        let total = src.len();
        if offset >= total || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(total - offset);
        let margin = (MAX_SWAP_WIDTH - 1) as u64;
        let lo = offset.saturating_sub(margin);
        let hi = offset
            .saturating_add(want)
            .saturating_add(margin)
            .min(total);
        // hi - lo <= buf.len() + 30: the window is bounded by the caller's buffer.
        let mut window = vec![0u8; (hi - lo) as usize];
        let got = src.read_at(lo, &mut window)?;
        window.truncate(got);
        self.apply(lo, &mut window);
        let from = (offset - lo) as usize;
        let avail = window.len().saturating_sub(from).min(want as usize);
        buf[..avail].copy_from_slice(&window[from..from + avail]);
        Ok(avail)
    }
}

/// Reverse the numbers of run `r` of the element whose run starts at dataset offset `first`,
/// those lying whole in `[start, end)` (the bytes of `buf`).
fn swap_run(r: &SwapRun, first: u64, start: u64, end: u64, buf: &mut [u8]) {
    let w = r.width as u64;
    // k range of numbers with start >= `start` and end <= `end`.
    let k_lo = if first >= start {
        0
    } else {
        (start - first).div_ceil(r.stride.max(1))
    };
    if end < first.saturating_add(w) {
        return;
    }
    let k_hi = (end - first - w).checked_div(r.stride).unwrap_or(0);
    let k_hi = k_hi.min(r.count - 1);
    let mut k = k_lo;
    while k <= k_hi {
        let at = first + k * r.stride - start;
        if let Some(slot) = buf.get_mut(at as usize..(at + w) as usize) {
            slot.reverse();
        }
        k += 1;
    }
}

fn too_complex(what: &str) -> Error {
    Error::unsupported("byte order conversion", what)
}

/// Append the swap runs of a `t` element placed at `base` within the top-level element.
fn plan(t: &Datatype, base: u64, target: ByteOrder, out: &mut Vec<SwapRun>) -> Result<()> {
    let number = |order: ByteOrder, out: &mut Vec<SwapRun>| -> Result<()> {
        if order == target || order == ByteOrder::Vax || t.size <= 1 {
            return Ok(());
        }
        if t.size > MAX_SWAP_WIDTH {
            return Err(too_complex(&format!("{}-byte number", t.size)));
        }
        push(
            out,
            SwapRun {
                offset: base,
                width: t.size,
                count: 1,
                stride: t.size as u64,
            },
        )
    };
    match &t.class {
        TypeClass::FixedPoint { order, .. }
        | TypeClass::FloatingPoint { order, .. }
        | TypeClass::Time { order, .. }
        | TypeClass::Bitfield { order, .. } => number(*order, out),
        TypeClass::Enum { base: b, .. } => plan(b, base, target, out),
        TypeClass::Complex { base: b } => {
            let mut parts = Vec::new();
            plan(b, 0, target, &mut parts)?;
            repeat(&parts, base, 2, b.size as u64, out)
        }
        TypeClass::Array { dims, base: b } => {
            let n = dims
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
                .ok_or_else(|| too_complex("array element count overflows"))?;
            let mut inner = Vec::new();
            plan(b, 0, target, &mut inner)?;
            repeat(&inner, base, n, b.size as u64, out)
        }
        TypeClass::Compound { members } => {
            for m in members {
                check_member(t, m)?;
                plan(&m.dtype, base + m.offset as u64, target, out)?;
            }
            Ok(())
        }
        TypeClass::String { .. }
        | TypeClass::Opaque { .. }
        | TypeClass::Reference { .. }
        | TypeClass::VarLen { .. } => Ok(()),
    }
}

/// A member must lie inside its compound, or swapping it would touch the next element.
fn check_member(t: &Datatype, m: &CompoundMember) -> Result<()> {
    let end = m.offset as u64 + m.dtype.size as u64;
    if end > t.size as u64 {
        return Err(Error::corrupt(
            "compound datatype",
            0,
            format!(
                "member {:?} ends at byte {end}, past the {}-byte element",
                m.name, t.size
            ),
        ));
    }
    Ok(())
}

/// Repeat the runs `inner` of one base element `n` times, `stride` apart, starting at `base`.
/// A single one-number run becomes one long run instead of `n` copies.
fn repeat(inner: &[SwapRun], base: u64, n: u64, stride: u64, out: &mut Vec<SwapRun>) -> Result<()> {
    if let [r] = inner {
        if r.count == 1 {
            return push(
                out,
                SwapRun {
                    offset: base + r.offset,
                    width: r.width,
                    count: n,
                    stride,
                },
            );
        }
    }
    for k in 0..n {
        for r in inner {
            let offset = base + k * stride + r.offset;
            push(out, SwapRun { offset, ..*r })?;
        }
    }
    Ok(())
}

fn push(out: &mut Vec<SwapRun>, r: SwapRun) -> Result<()> {
    if out.len() >= MAX_RUNS {
        return Err(too_complex("more than 4096 swap runs per element"));
    }
    out.push(r);
    Ok(())
}

/// The datatype as served under `mode`: every swapped number carries the target order, so
/// sidecar descriptions (npy `descr`, ENVI `byte order`) describe the bytes actually served.
pub fn served_type(t: &Datatype, mode: ByteOrderMode) -> Datatype {
    let Some(target) = mode.target() else {
        return t.clone();
    };
    let mut t = t.clone();
    retarget(&mut t, target);
    t
}

fn retarget(t: &mut Datatype, target: ByteOrder) {
    let wide = t.size > 1 && t.size <= MAX_SWAP_WIDTH;
    match &mut t.class {
        TypeClass::FixedPoint { order, .. }
        | TypeClass::FloatingPoint { order, .. }
        | TypeClass::Time { order, .. }
        | TypeClass::Bitfield { order, .. }
            if wide && *order != ByteOrder::Vax =>
        {
            *order = target
        }
        TypeClass::Enum { base, .. }
        | TypeClass::Complex { base }
        | TypeClass::Array { base, .. } => retarget(base, target),
        TypeClass::Compound { members } => members
            .iter_mut()
            .for_each(|m| retarget(&mut m.dtype, target)),
        _ => {}
    }
}
