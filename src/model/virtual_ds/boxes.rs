//! A hyperslab stored as explicit blocks (selection version 1, or an irregular version 2/3)
//! turned into regular parts whose concatenation is the C order of the blocks' union.
//!
//! libhdf5 writes version 1 for every hyperslab of a file with the earliest format bounds, so a
//! strided selection such as `[::2, 1:8:2]` arrives as one block per selected cell group. The
//! decomposition sweeps the first dimension: between consecutive block boundaries the set of
//! covering blocks is constant, so those rows share one cross-section, decomposed the same way
//! one dimension down. A band whose cross-section is a single part becomes one part; otherwise
//! each row of the band repeats the cross-section's parts. Consecutive parts that differ only
//! in their first dimension, by a constant step and block, merge back into one strided part.

use super::sel::{Dim, Part};
use crate::error::{Error, Result};

/// Parts produced from one block list at most (a hostile list cannot make us allocate more).
const MAX_PARTS: usize = 1 << 20;

/// The parts one decomposition may still produce, and where its block list was read from.
struct Budget {
    left: usize,
    /// The global heap collection holding the selection, named by the error.
    addr: u64,
}

impl Budget {
    /// Count one more part (or band entry) against the budget.
    fn spend(&mut self) -> Result<()> {
        self.left = self
            .left
            .checked_sub(1)
            .ok_or_else(|| too_many(self.addr))?;
        Ok(())
    }
}

/// The error of a block list, read at `addr`, too big (or too far out) to decompose.
fn too_many(addr: u64) -> Error {
    Error::limit("hyperslab selection", addr, "too many blocks to decompose")
}

/// Parts, in C order, of the union of the blocks in `corners` (per block `rank` starts then
/// `rank` inclusive ends). `addr` is where the selection was read from (the global heap
/// collection holding the mapping table), named by the error when the list is too big.
pub fn blocks_to_parts(rank: usize, corners: &[u64], addr: u64) -> Result<Vec<Part>> {
    if rank == 0 {
        return Ok(Vec::new());
    }
    // One flat list of (start, length) pairs, `rank` per block: no allocation per block.
    let flat: Vec<(u64, u64)> = corners
        .chunks_exact(2 * rank)
        .flat_map(|b| (0..rank).map(move |d| (b[d], (b[rank + d] - b[d]).saturating_add(1))))
        .collect();
    let refs: Vec<&[(u64, u64)]> = flat.chunks_exact(rank).collect();
    let mut budget = Budget {
        left: MAX_PARTS,
        addr,
    };
    Ok(decompose(&refs, &mut budget)?
        .into_iter()
        .map(|dims| Part { dims })
        .collect())
}

/// Parts (as dimension lists from this level down) of the union of `blocks`.
fn decompose(blocks: &[&[(u64, u64)]], budget: &mut Budget) -> Result<Vec<Vec<Dim>>> {
    if blocks.iter().all(|b| b.len() == 1) {
        return Ok(intervals(blocks, budget)?
            .into_iter()
            .map(|d| vec![d])
            .collect());
    }
    let mut bounds: Vec<u64> = Vec::with_capacity(2 * blocks.len());
    for b in blocks {
        let (s, n) = b[0];
        bounds.push(s);
        bounds.push(s.checked_add(n).ok_or_else(|| too_many(budget.addr))?);
    }
    bounds.sort_unstable();
    bounds.dedup();
    // Blocks covering each band [bounds[i], bounds[i + 1]).
    let mut bands: Vec<Vec<&[(u64, u64)]>> = vec![Vec::new(); bounds.len().saturating_sub(1)];
    for b in blocks {
        let (s, n) = b[0];
        let first = bounds.partition_point(|&x| x < s);
        let last = bounds.partition_point(|&x| x < s + n);
        for band in &mut bands[first..last] {
            budget.spend()?;
            band.push(&b[1..]);
        }
    }
    let mut out: Vec<Vec<Dim>> = Vec::new();
    for (i, band) in bands.iter().enumerate() {
        if band.is_empty() {
            continue;
        }
        let (a, z) = (bounds[i], bounds[i + 1]);
        let rows = Dim {
            start: a,
            stride: z - a,
            block: z - a,
            n: z - a,
        };
        let cross = if band[0].is_empty() {
            vec![Vec::new()]
        } else {
            decompose(band, budget)?
        };
        if cross.len() == 1 {
            let mut p = vec![rows];
            p.extend_from_slice(&cross[0]);
            push_merged(&mut out, p, budget)?;
        } else {
            for r in a..z {
                for c in &cross {
                    let mut p = vec![Dim {
                        start: r,
                        stride: 1,
                        block: 1,
                        n: 1,
                    }];
                    p.extend_from_slice(c);
                    push_merged(&mut out, p, budget)?;
                }
            }
        }
    }
    Ok(out)
}

/// The innermost dimension: sorted intervals, overlapping or touching ones joined, then
/// equal blocks at equal steps folded into strided dimensions.
fn intervals(blocks: &[&[(u64, u64)]], budget: &mut Budget) -> Result<Vec<Dim>> {
    let addr = budget.addr;
    let mut iv: Vec<(u64, u64)> = blocks.iter().map(|b| b[0]).collect();
    iv.sort_unstable();
    let mut out: Vec<Dim> = Vec::new();
    let mut cur: Option<(u64, u64)> = None;
    let mut emit = |(s, n): (u64, u64), out: &mut Vec<Dim>| -> Result<()> {
        let d = Dim {
            start: s,
            stride: n,
            block: n,
            n,
        };
        if let Some(p) = out.last_mut() {
            if let Some(m) = merge(*p, d) {
                *p = m;
                return Ok(());
            }
        }
        budget.spend()?;
        out.push(d);
        Ok(())
    };
    for (s, n) in iv {
        let e = s.checked_add(n).ok_or_else(|| too_many(addr))?;
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                emit((cs, ce - cs), &mut out)?;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        emit((cs, ce - cs), &mut out)?;
    }
    Ok(out)
}

/// Append `p`, merging it into the previous part when both are one pattern along the first
/// dimension with everything below equal.
fn push_merged(out: &mut Vec<Vec<Dim>>, p: Vec<Dim>, budget: &mut Budget) -> Result<()> {
    if let Some(prev) = out.last_mut() {
        if prev[1..] == p[1..] {
            if let Some(m) = merge(prev[0], p[0]) {
                prev[0] = m;
                return Ok(());
            }
        }
    }
    budget.spend()?;
    out.push(p);
    Ok(())
}

/// One dimension covering `x` then `y` (a single block after `x`), if it is regular.
fn merge(x: Dim, y: Dim) -> Option<Dim> {
    if y.n != y.block {
        return None;
    }
    let single = x.n == x.block;
    let gap = y.start.checked_sub(x.start)?;
    if single && gap == x.n {
        // Adjacent: one longer block.
        let n = x.n + y.n;
        return Some(Dim {
            start: x.start,
            stride: n,
            block: n,
            n,
        });
    }
    if y.block != x.block {
        return None;
    }
    if single && gap > x.block {
        return Some(Dim {
            start: x.start,
            stride: gap,
            block: x.block,
            n: 2 * x.block,
        });
    }
    if !single && x.n.is_multiple_of(x.block) && gap == (x.n / x.block) * x.stride {
        return Some(Dim { n: x.n + y.n, ..x });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address a caller says the block lists were read from.
    const HEAP: u64 = 0x1234;

    fn d(start: u64, stride: u64, block: u64, n: u64) -> Dim {
        Dim {
            start,
            stride,
            block,
            n,
        }
    }

    #[test]
    fn strided_grid_becomes_one_part() {
        // Rows 0, 2, 4 × columns 1, 3, 5, 7: twelve 1×1 blocks, in any order.
        let mut corners = Vec::new();
        for r in [4u64, 0, 2] {
            for c in [7u64, 1, 5, 3] {
                corners.extend_from_slice(&[r, c, r, c]);
            }
        }
        let parts = blocks_to_parts(2, &corners, HEAP).unwrap();
        assert_eq!(
            parts,
            vec![Part {
                dims: vec![d(0, 2, 1, 3), d(1, 2, 1, 4)]
            }]
        );
    }

    #[test]
    fn overlapping_rows_keep_c_order() {
        // Two boxes side by side over rows 0..2 but offset: (0..2, 0..1) and (1..3, 3..4).
        let parts = blocks_to_parts(2, &[0, 0, 1, 1, 1, 3, 2, 4], HEAP).unwrap();
        let cells: Vec<(u64, u64)> = parts
            .iter()
            .flat_map(|p| {
                let (r, c) = (p.dims[0], p.dims[1]);
                (0..r.n).flat_map(move |i| (0..c.n).map(move |j| (r.coord(i), c.coord(j))))
            })
            .collect();
        assert_eq!(
            cells,
            vec![
                (0, 0),
                (0, 1),
                (1, 0),
                (1, 1),
                (1, 3),
                (1, 4),
                (2, 3),
                (2, 4)
            ]
        );
    }

    #[test]
    fn adjacent_blocks_join_and_budget_holds() {
        assert_eq!(
            blocks_to_parts(1, &[0, 1, 2, 5], HEAP).unwrap(),
            vec![Part {
                dims: vec![d(0, 6, 6, 6)]
            }]
        );
        // Two tall thin boxes interleave on every row: rows × parts beyond the budget fail.
        let tall = [0, 0, 1 << 21, 0, 0, 2, 1 << 21, 2];
        assert!(matches!(blocks_to_parts(2, &tall, HEAP), Ok(p) if p.len() == 1));
        let tall = [0, 0, 1 << 21, 0, 0, 3, 1 << 21, 4];
        let e = blocks_to_parts(2, &tall, HEAP).unwrap_err().to_string();
        assert!(e.contains("too many blocks"), "{e}");
        assert!(e.contains("at 0x1234:"), "{e}");
        // A block reaching past the last coordinate is refused, naming the address too.
        for rank in [1, 2] {
            let mut far = vec![0u64; 2 * rank];
            far[0] = u64::MAX - 1;
            far[rank] = u64::MAX;
            let e = blocks_to_parts(rank, &far, HEAP).unwrap_err().to_string();
            assert!(e.contains("at 0x1234:"), "{e}");
        }
    }
}
