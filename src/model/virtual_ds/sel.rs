//! Selections resolved against an extent, as lists of regular parts, with the two walks a VDS
//! read needs: the runs of a selection inside a range of linear element indexes (virtual
//! side, found by seeking), and the run that starts at a given ordinal (source side).
//!
//! A part is a product over dimensions of `n` positions each, position `k` at coordinate
//! `start + (k / block) * stride + k % block` (`n` need not be a multiple of `block`: an
//! unlimited count clipped to an extent ends in a partial block). A part's C order is the
//! lexicographic order of its positions, and its ordinals follow the parts' order. A *run* is
//! a stretch of consecutive ordinals that is also consecutive in linear index: inside one block
//! of the innermost dimension that is not a whole row, times the whole rows below it.

use crate::error::{Error, Result};
use crate::format::vds::{RegularDim, Selection, UNLIMITED};

/// One dimension of a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim {
    pub start: u64,
    pub stride: u64,
    pub block: u64,
    /// Positions selected.
    pub n: u64,
}

impl Dim {
    /// A finite regular dimension (unlimited ones must first go through [`clip_unlimited`]).
    /// `addr` is where the selection was read from (the global heap collection holding the
    /// mapping table), named by the error when the dimension is corrupt.
    pub fn from_regular(r: RegularDim, addr: u64) -> Result<Dim> {
        if is_unlimited(&r) {
            return Err(Error::unsupported(
                "virtual dataset selection",
                "unresolved unlimited dimension",
            ));
        }
        Dim::finite(r).map_err(|why| Error::corrupt("hyperslab selection", addr, why))
    }

    /// A finite regular dimension, or what is wrong with it.
    fn finite(r: RegularDim) -> std::result::Result<Dim, &'static str> {
        if is_unlimited(&r) {
            return Err("unresolved unlimited dimension");
        }
        let n = r
            .count
            .checked_mul(r.block)
            .ok_or("count × block overflows")?;
        if r.count > 1 && r.stride < r.block {
            return Err("blocks overlap (stride < block)");
        }
        Ok(Dim {
            start: r.start,
            stride: r.stride,
            block: r.block,
            n,
        })
    }

    fn single_block(&self) -> bool {
        self.n <= self.block
    }

    /// Coordinate of position `k` (saturating: an absurd value is simply out of bounds).
    pub fn coord(&self, k: u64) -> u64 {
        if self.block == 0 {
            return u64::MAX;
        }
        self.start
            .saturating_add((k / self.block).saturating_mul(self.stride))
            .saturating_add(k % self.block)
    }

    /// First position whose coordinate is ≥ `x` (`n` if none).
    fn first_at_or_after(&self, x: u64) -> u64 {
        if x <= self.start {
            return 0;
        }
        let rel = x - self.start;
        let k = if self.single_block() || self.stride == 0 {
            rel
        } else {
            let (i, j) = (rel / self.stride, rel % self.stride);
            if j < self.block {
                i.saturating_mul(self.block).saturating_add(j)
            } else {
                i.saturating_add(1).saturating_mul(self.block)
            }
        };
        k.min(self.n)
    }

    /// Positions that lie inside an extent of `d`.
    fn positions_below(&self, d: u64) -> u64 {
        self.first_at_or_after(d)
    }
}

/// Whether a regular dimension has an unlimited count or block.
fn is_unlimited(r: &RegularDim) -> bool {
    r.count == UNLIMITED || r.block == UNLIMITED
}

/// A regular dimension with an unlimited count or block cut to `positions` positions.
pub fn clip_unlimited(r: RegularDim, positions: u64) -> Dim {
    if r.block == 0 {
        // Selects nothing (and must not divide by the block below).
        return Dim {
            start: r.start,
            stride: 1,
            block: 1,
            n: 0,
        };
    }
    if r.block == UNLIMITED {
        Dim {
            start: r.start,
            stride: positions.max(1),
            block: positions.max(1),
            n: positions,
        }
    } else {
        Dim {
            start: r.start,
            stride: r.stride.max(r.block),
            block: r.block,
            n: positions,
        }
    }
}

/// Positions of a (possibly unlimited) regular dimension inside an extent of `d`.
pub fn positions_below(r: &RegularDim, d: u64) -> u64 {
    if r.block == 0 {
        return 0;
    }
    let dim = if r.block == UNLIMITED {
        Dim {
            start: r.start,
            stride: 1,
            block: u64::MAX,
            n: u64::MAX,
        }
    } else {
        Dim {
            start: r.start,
            stride: r.stride.max(r.block),
            block: r.block,
            n: if r.count == UNLIMITED {
                u64::MAX
            } else {
                r.count.saturating_mul(r.block)
            },
        }
    };
    dim.positions_below(d)
}

/// One past the last coordinate a dimension reaches (`None` when empty).
pub fn reach(d: &Dim) -> Option<u64> {
    (d.n > 0).then(|| d.coord(d.n - 1).saturating_add(1))
}

/// One past the furthest coordinate a (finite) selection reaches in each of `rank`
/// dimensions; zeros for "all" and "none", which reach no further than the extent.
pub fn selection_reach(s: &Selection, rank: usize) -> Vec<u64> {
    let mut out = vec![0u64; rank];
    let mut see = |d: usize, top: u64| {
        if let Some(o) = out.get_mut(d) {
            *o = (*o).max(top);
        }
    };
    match s {
        Selection::None | Selection::All => {}
        Selection::Regular(r) => {
            for (d, x) in r.iter().enumerate() {
                if let Some(top) = Dim::finite(*x).ok().as_ref().and_then(reach) {
                    see(d, top);
                }
            }
        }
        Selection::Points { rank: r, coords } => {
            for p in coords.chunks_exact((*r).max(1)) {
                p.iter()
                    .enumerate()
                    .for_each(|(d, &c)| see(d, c.saturating_add(1)));
            }
        }
        Selection::Blocks { rank: r, corners } => {
            for b in corners.chunks_exact(2 * (*r).max(1)) {
                b[*r..]
                    .iter()
                    .enumerate()
                    .for_each(|(d, &e)| see(d, e.saturating_add(1)));
            }
        }
    }
    out
}

/// A product of regular dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub dims: Vec<Dim>,
}

/// A selection resolved against an extent.
#[derive(Clone, Debug)]
pub struct Sel {
    /// The extent (current dimensions of the dataspace).
    space: Vec<u64>,
    /// Elements per step in each dimension (C order).
    lin: Vec<u64>,
    parts: Vec<Part>,
    /// Ordinal of each part's first element.
    cum: Vec<u64>,
    /// Positions inside the extent per part and dimension.
    lim: Vec<Vec<u64>>,
    total: u64,
}

fn point_dim(c: u64) -> Dim {
    Dim {
        start: c,
        stride: 1,
        block: 1,
        n: 1,
    }
}

impl Sel {
    /// Resolve `s` against `space`. `addr` is where the selection was read from (the global
    /// heap collection holding the mapping table), named by the errors of a corrupt one.
    pub fn build(s: &Selection, space: &[u64], addr: u64) -> Result<Sel> {
        let rank = space.len();
        if s.rank().is_some_and(|r| r != rank) {
            return Err(Error::corrupt(
                "virtual dataset selection",
                addr,
                "selection rank differs from the dataspace's",
            ));
        }
        let parts = match s {
            Selection::None => Vec::new(),
            Selection::All => vec![Part {
                dims: space
                    .iter()
                    .map(|&d| Dim {
                        start: 0,
                        stride: d.max(1),
                        block: d.max(1),
                        n: d,
                    })
                    .collect(),
            }],
            Selection::Regular(r) => vec![Part {
                dims: r
                    .iter()
                    .map(|&r| Dim::from_regular(r, addr))
                    .collect::<Result<_>>()?,
            }],
            Selection::Points { coords, .. } => coords
                .chunks_exact(rank.max(1))
                .map(|p| Part {
                    dims: p.iter().map(|&c| point_dim(c)).collect(),
                })
                .collect(),
            Selection::Blocks { corners, .. } => {
                super::boxes::blocks_to_parts(rank, corners, addr)?
            }
        };
        Sel::from_parts(parts, space, addr)
    }

    /// A selection of the given parts against `space`; `addr` as for [`Sel::build`].
    pub fn from_parts(parts: Vec<Part>, space: &[u64], addr: u64) -> Result<Sel> {
        if space.is_empty() {
            return Err(Error::unsupported(
                "virtual dataset selection",
                "scalar dataspace",
            ));
        }
        let mut lin = vec![1u64; space.len()];
        for d in (0..space.len() - 1).rev() {
            lin[d] = lin[d + 1].checked_mul(space[d + 1]).ok_or_else(|| {
                Error::corrupt("virtual dataset selection", addr, "extent overflows")
            })?;
        }
        let mut cum = Vec::with_capacity(parts.len());
        let mut lim = Vec::with_capacity(parts.len());
        let mut total = 0u64;
        for p in &parts {
            if p.dims.len() != space.len() {
                return Err(Error::corrupt(
                    "virtual dataset selection",
                    addr,
                    "part rank differs",
                ));
            }
            cum.push(total);
            let n = p
                .dims
                .iter()
                .try_fold(1u64, |a, d| a.checked_mul(d.n))
                .and_then(|n| total.checked_add(n))
                .ok_or_else(|| {
                    Error::corrupt("virtual dataset selection", addr, "element count overflows")
                })?;
            total = n;
            lim.push(
                p.dims
                    .iter()
                    .zip(space)
                    .map(|(d, &s)| d.positions_below(s))
                    .collect(),
            );
        }
        Ok(Sel {
            space: space.to_vec(),
            lin,
            parts,
            cum,
            lim,
            total,
        })
    }

    /// Number of selected elements.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether dimension `d` of part `p` selects every coordinate of the extent, in order.
    fn full(&self, p: &Part, d: usize) -> bool {
        let x = &p.dims[d];
        x.start == 0 && x.n == self.space[d] && (x.single_block() || x.stride == x.block)
    }

    /// The run starting at positions `ks` of part `p`: (inside the extent, length). An
    /// inside run is cut where it leaves the extent; an outside one spans to the run's end.
    fn run(&self, p: &Part, ks: &[u64]) -> (bool, u64) {
        let (inside, len, _, _) = self.run_ext(p, ks);
        (inside, len)
    }

    /// [`Sel::run`], plus the dimension the run advances along and by how many positions.
    fn run_ext(&self, p: &Part, ks: &[u64]) -> (bool, u64, usize, u64) {
        let r = ks.len();
        let mut j = r - 1;
        while j > 0 && self.full(p, j) {
            j -= 1;
        }
        let t = self.lin[j];
        let within: u64 = (j + 1..r).map(|d| ks[d] * self.lin[d]).sum();
        let x = &p.dims[j];
        let k = ks[j];
        let contig = if x.single_block() || x.stride == x.block {
            x.n - k
        } else {
            (x.block - k % x.block).min(x.n - k)
        };
        let len = contig.saturating_mul(t) - within;
        let outside = (0..j).any(|d| p.dims[d].coord(ks[d]) >= self.space[d]);
        let c = x.coord(k);
        if outside || c >= self.space[j] {
            return (false, len, j, contig);
        }
        let valid = contig.min(self.space[j] - c);
        (true, (valid * t - within).min(len), j, valid)
    }

    fn linear(&self, p: &Part, ks: &[u64]) -> u64 {
        ks.iter()
            .enumerate()
            .map(|(d, &k)| p.dims[d].coord(k) * self.lin[d])
            .sum()
    }

    /// First position of part `i` inside the extent whose linear index is ≥ `lin`.
    fn seek(&self, i: usize, lin: u64) -> Option<Vec<u64>> {
        let (p, lim) = (&self.parts[i], &self.lim[i]);
        if lim.contains(&0) {
            return None;
        }
        let r = self.space.len();
        let mut ks = vec![0u64; r];
        for d in 0..r {
            let x = (lin / self.lin[d]) % self.space[d].max(1);
            let k = p.dims[d].first_at_or_after(x).min(lim[d]);
            if k >= lim[d] {
                // Nothing at or after x here: step the previous dimension on.
                let mut e = d;
                loop {
                    if e == 0 {
                        return None;
                    }
                    e -= 1;
                    ks[e] += 1;
                    if ks[e] < lim[e] {
                        ks[e + 1..].iter_mut().for_each(|k| *k = 0);
                        return Some(ks);
                    }
                }
            }
            ks[d] = k;
            if p.dims[d].coord(k) > x {
                return Some(ks);
            }
        }
        Some(ks)
    }

    fn ordinal(&self, i: usize, ks: &[u64]) -> u64 {
        let p = &self.parts[i];
        let local = ks.iter().zip(&p.dims).fold(0u64, |a, (&k, d)| a * d.n + k);
        self.cum[i] + local
    }

    /// Call `f(linear, ordinal, len)` for each run of selected elements inside the extent
    /// with linear index in `[e0, e1)`.
    pub fn runs_in(&self, e0: u64, e1: u64, f: &mut impl FnMut(u64, u64, u64)) {
        for i in 0..self.parts.len() {
            let (p, lim) = (&self.parts[i], &self.lim[i]);
            let Some(mut ks) = self.seek(i, e0) else {
                continue;
            };
            loop {
                let l = self.linear(p, &ks);
                if l >= e1 {
                    break;
                }
                let (inside, len, j, step) = self.run_ext(p, &ks);
                if !inside || len == 0 {
                    break;
                }
                f(l, self.ordinal(i, &ks), len.min(e1 - l));
                // Step past the run: on along dimension j, carrying into outer ones.
                ks[j] += step;
                ks[j + 1..].iter_mut().for_each(|k| *k = 0);
                let mut d = j;
                while ks[d] >= lim[d] {
                    if d == 0 {
                        break;
                    }
                    ks[d] = 0;
                    d -= 1;
                    ks[d] += 1;
                }
                if ks[0] >= lim[0] {
                    break;
                }
            }
        }
    }

    /// The run at ordinal `o` (< total): (inside the extent, linear index, length).
    pub fn run_at(&self, o: u64) -> (bool, u64, u64) {
        let i = self.cum.partition_point(|&c| c <= o).saturating_sub(1);
        let p = &self.parts[i];
        let mut local = o - self.cum[i];
        let mut ks = vec![0u64; p.dims.len()];
        for d in (0..p.dims.len()).rev() {
            let n = p.dims[d].n.max(1);
            ks[d] = local % n;
            local /= n;
        }
        let (inside, len) = self.run(p, &ks);
        let l = if inside { self.linear(p, &ks) } else { 0 };
        (inside, l, len.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address a caller says the selections were read from.
    const HEAP: u64 = 0x1234;

    fn reg(start: u64, stride: u64, count: u64, block: u64) -> RegularDim {
        RegularDim {
            start,
            stride,
            count,
            block,
        }
    }

    /// Every selected (linear, ordinal) pair by brute force, for comparison.
    fn brute(s: &Sel) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for o in 0..s.total() {
            let (inside, l, _) = s.run_at(o);
            if inside {
                out.push((l, o));
            }
        }
        out
    }

    fn expand_runs(s: &Sel, e0: u64, e1: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        s.runs_in(e0, e1, &mut |l, o, n| {
            out.extend((0..n).map(|i| (l + i, o + i)))
        });
        out
    }

    #[test]
    fn runs_match_brute_force() {
        let cases = vec![
            (Selection::All, vec![4, 5]),
            (
                Selection::Regular(vec![reg(1, 3, 3, 2), reg(0, 1, 1, 6)]),
                vec![9, 6],
            ),
            (
                Selection::Regular(vec![reg(0, 2, 5, 1), reg(1, 4, 2, 3)]),
                vec![10, 8],
            ),
            // Bigger than the extent: parts outside are skipped.
            (
                Selection::Regular(vec![reg(2, 3, 4, 2), reg(3, 1, 1, 7)]),
                vec![9, 8],
            ),
            (
                Selection::Points {
                    rank: 2,
                    coords: vec![3, 1, 0, 0, 2, 2],
                },
                vec![4, 4],
            ),
            (
                Selection::Blocks {
                    rank: 2,
                    corners: vec![5, 1, 6, 2, 0, 0, 1, 3],
                },
                vec![8, 4],
            ),
        ];
        for (s, space) in cases {
            let sel = Sel::build(&s, &space, HEAP).unwrap();
            let total: u64 = space.iter().product();
            let mut all = brute(&sel);
            // Points keep their listed order; compare as sets ordered by linear index.
            all.sort();
            let mut got = expand_runs(&sel, 0, total);
            got.sort();
            assert_eq!(got, all, "{s:?}");
            for (a, b) in [(0, 1), (3, 11), (7, total), (total - 1, total)] {
                let mut part = expand_runs(&sel, a, b);
                part.sort();
                let want: Vec<_> = all
                    .iter()
                    .copied()
                    .filter(|&(l, _)| l >= a && l < b)
                    .collect();
                assert_eq!(part, want, "{s:?} [{a},{b})");
            }
        }
    }

    #[test]
    fn all_is_one_run_and_ordinals_follow_c_order() {
        let s = Sel::build(&Selection::All, &[3, 4], HEAP).unwrap();
        let mut runs = Vec::new();
        s.runs_in(0, 12, &mut |l, o, n| runs.push((l, o, n)));
        assert_eq!(runs, vec![(0, 0, 12)]);
        // Row 1, columns 1..3 of a 4-wide extent: ordinal 3 is (2, 1) → linear 9.
        let s = Sel::build(
            &Selection::Regular(vec![reg(1, 1, 1, 2), reg(1, 1, 1, 2)]),
            &[3, 4],
            HEAP,
        )
        .unwrap();
        assert_eq!(s.run_at(3), (true, 10, 1));
        assert_eq!(s.run_at(0), (true, 5, 2));
    }

    #[test]
    fn reach_of_selections() {
        let blocks = Selection::Blocks {
            rank: 2,
            corners: vec![0, 1, 3, 2, 5, 0, 6, 0],
        };
        assert_eq!(selection_reach(&blocks, 2), vec![7, 3]);
        let r = Selection::Regular(vec![reg(1, 4, 3, 2), reg(0, 1, 1, 5)]);
        assert_eq!(selection_reach(&r, 2), vec![11, 5]);
        assert_eq!(selection_reach(&Selection::All, 2), vec![0, 0]);
    }

    #[test]
    fn unlimited_clipping() {
        // Count unlimited, stride 2, against an extent of 7: coordinates 0, 2, 4, 6.
        let r = reg(0, 2, UNLIMITED, 1);
        assert_eq!(positions_below(&r, 7), 4);
        let d = clip_unlimited(r, 4);
        assert_eq!(reach(&d), Some(7));
        // Block unlimited from 3 against 10: 7 positions.
        let r = reg(3, 1, 1, UNLIMITED);
        assert_eq!(positions_below(&r, 10), 7);
        assert_eq!(reach(&clip_unlimited(r, 7)), Some(10));
        // Partial last block: blocks of 3 every 4, 5 positions → 0,1,2,4,5.
        let d = clip_unlimited(reg(0, 4, UNLIMITED, 3), 5);
        assert_eq!(reach(&d), Some(6));
        assert!(Dim::from_regular(reg(0, 1, UNLIMITED, 1), HEAP).is_err());
        // A zero block with a zero stride selects nothing instead of dividing by zero.
        let z = reg(0, 0, UNLIMITED, 0);
        assert_eq!(positions_below(&z, 10), 0);
        assert_eq!(clip_unlimited(z, 5).n, 0);
        assert!(Dim::from_regular(reg(0, 1, 3, 2), HEAP).is_err());
    }

    /// Each corrupt selection names the address its caller read it from, not a placeholder.
    #[test]
    fn corrupt_selections_name_their_address() {
        let two = vec![3u64, 4];
        let named = |r: Result<Sel>| {
            let e = r.unwrap_err();
            assert_eq!(e.errno_class(), crate::error::ErrorClass::Io, "{e}");
            let text = e.to_string();
            assert!(text.contains("at 0x1234:"), "{text}");
            text
        };
        // A rank other than the dataspace's.
        let t = named(Sel::build(
            &Selection::Regular(vec![reg(0, 1, 1, 1)]),
            &two,
            HEAP,
        ));
        assert!(t.contains("rank differs from the dataspace"), "{t}");
        // count × block overflows.
        let huge = Selection::Regular(vec![reg(0, 1, 1, 1), reg(0, 1 << 40, 1 << 40, 1 << 40)]);
        let t = named(Sel::build(&huge, &two, HEAP));
        assert!(t.contains("count × block overflows"), "{t}");
        // Overlapping blocks.
        let overlap = Selection::Regular(vec![reg(0, 1, 2, 2), reg(0, 1, 1, 1)]);
        let t = named(Sel::build(&overlap, &two, HEAP));
        assert!(t.contains("blocks overlap"), "{t}");
        // An extent whose element count overflows.
        let t = named(Sel::build(
            &Selection::All,
            &[1 << 40, 1 << 40, 1 << 40],
            HEAP,
        ));
        assert!(t.contains("extent overflows"), "{t}");
        // A part of another rank than the extent.
        let t = named(Sel::from_parts(
            vec![Part {
                dims: vec![point_dim(0)],
            }],
            &two,
            HEAP,
        ));
        assert!(t.contains("part rank differs"), "{t}");
        // Parts whose element counts overflow together.
        let big = Dim {
            start: 0,
            stride: 1 << 32,
            block: 1 << 32,
            n: 1 << 32,
        };
        let parts = vec![Part {
            dims: vec![big, big],
        }];
        let t = named(Sel::from_parts(parts, &two, HEAP));
        assert!(t.contains("element count overflows"), "{t}");
    }
}
