//! The chunk keys of one array as a tree of inode numbers, and the walk that lists the keys
//! that exist.
//!
//! Numbering. An array whose chunk grid is `g = [g0, ..., g(n-1)]` gets a block of
//! consecutive inode numbers, one per node of its key tree, computed from the coordinates
//! alone, so that no table of chunks is kept however many are visited:
//! - Zarr v3 (`c/0/1/2`): local number 0 is the directory `c`; the nodes of depth `k` (the
//!   prefixes `c/i0/.../i(k-1)`, directories for `k < n`, chunk files for `k = n`) follow
//!   the nodes of depth `k - 1`, in row-major order of their `k` coordinates. There are
//!   `P(k) = g0 * ... * g(k-1)` of them, so the block holds `1 + P(1) + ... + P(n)` numbers.
//!   A scalar's one key is `c` itself, a file.
//! - Zarr v2 (`0.1.2`, flat): local number = the row-major index of the chunk; `P(n)`
//!   numbers (a scalar: one, the key `0`).
//!
//! A grid whose block size overflows has no numbering ([`KeyTree::new`] says so).
//!
//! Listing. A listing shows only keys of chunks that exist (were written), found by asking
//! for each grid position in row-major order; a v3 prefix directory is listed when some
//! chunk below it exists (the walk below it stops at the first one). Every question costs
//! one unit of a budget shared by the whole listing; when it runs out the listing stops
//! there and says it was cut short.

use crate::error::Result;
use crate::views::zarr::ZarrVersion;

/// The key tree of one array (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTree {
    version: ZarrVersion,
    grid: Vec<u64>,
    /// v3: the local number of the first node of each depth `k` in `1..=n` (index `k - 1`).
    starts: Vec<u64>,
    len: u64,
}

/// What a node of the key tree is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyNode {
    /// A v3 directory: `c` (no coordinates) or a prefix `c/i0/...`.
    Dir(Vec<u64>),
    /// A chunk key.
    Chunk(Vec<u64>),
}

impl KeyTree {
    /// The tree of a grid of `grid` chunks per dimension; `None` when it has too many nodes
    /// to number.
    pub fn new(version: ZarrVersion, grid: &[u64]) -> Option<KeyTree> {
        let mut starts = Vec::with_capacity(grid.len());
        let len = match version {
            ZarrVersion::V3 => {
                let mut next = 1u64;
                let mut count = 1u64;
                for &g in grid {
                    count = count.checked_mul(g)?;
                    starts.push(next);
                    next = next.checked_add(count)?;
                }
                next
            }
            ZarrVersion::V2 => grid.iter().try_fold(1u64, |a, &g| a.checked_mul(g))?,
        };
        Some(KeyTree {
            version,
            grid: grid.to_vec(),
            starts,
            len,
        })
    }

    /// How many inode numbers the tree takes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the tree has no node (a v2 grid with no chunk).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The grid's rank.
    pub fn rank(&self) -> usize {
        self.grid.len()
    }

    /// The local number of the node at `coords` (a prefix of v3 coordinates, or a whole
    /// chunk's), if it is inside the grid.
    pub fn local(&self, coords: &[u64]) -> Option<u64> {
        let k = coords.len();
        let dims = self.grid.get(..k)?;
        let index = linear(coords, dims)?;
        match self.version {
            ZarrVersion::V3 if k == 0 => Some(0),
            ZarrVersion::V3 => self.starts.get(k - 1)?.checked_add(index),
            ZarrVersion::V2 => (k == self.grid.len()).then_some(index),
        }
    }

    /// The node of local number `local`.
    pub fn node(&self, local: u64) -> Option<KeyNode> {
        if local >= self.len {
            return None;
        }
        let n = self.grid.len();
        let coords = match self.version {
            ZarrVersion::V2 => unravel(local, &self.grid)?,
            ZarrVersion::V3 if local == 0 => Vec::new(),
            ZarrVersion::V3 => {
                // The deepest depth whose first node is at or before `local`.
                let k = self.starts.partition_point(|&s| s <= local);
                let start = *self.starts.get(k.checked_sub(1)?)?;
                unravel(local - start, self.grid.get(..k)?)?
            }
        };
        Some(match coords.len() == n {
            true => KeyNode::Chunk(coords),
            false => KeyNode::Dir(coords),
        })
    }

    /// The coordinate `name` gives at depth `depth` (a canonical decimal inside the grid).
    pub fn coordinate(&self, depth: usize, name: &str) -> Option<u64> {
        let g = *self.grid.get(depth)?;
        let canonical = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_digit())
            && (name == "0" || !name.starts_with('0'));
        canonical
            .then(|| name.parse::<u64>().ok())
            .flatten()
            .filter(|&c| c < g)
    }

    /// Whether a chunk exists at or below the v3 prefix `prefix`, and whether the budget
    /// ran out before that was known.
    pub fn any_below(
        &self,
        prefix: &[u64],
        budget: &mut u64,
        mut exists: impl FnMut(&[u64]) -> Result<bool>,
    ) -> Result<(bool, bool)> {
        let rest = self.grid.get(prefix.len()..).unwrap_or(&[]);
        let mut pos = Odometer::new(prefix, rest);
        while let Some(c) = pos.current() {
            if *budget == 0 {
                return Ok((false, true));
            }
            *budget -= 1;
            if exists(c)? {
                return Ok((true, false));
            }
            pos.advance();
        }
        Ok((false, false))
    }

    /// The children that hold a chunk of the v3 directory at `prefix` (coordinates at
    /// depth `prefix.len()`, ascending), asking `exists` about chunks; or, for v2, every
    /// chunk that exists. `budget`: questions left (see the module docs). Returns them and
    /// whether the budget ran out first.
    pub fn existing_children(
        &self,
        prefix: &[u64],
        budget: &mut u64,
        mut exists: impl FnMut(&[u64]) -> Result<bool>,
    ) -> Result<(Vec<Vec<u64>>, bool)> {
        let mut out = Vec::new();
        if self.grid.contains(&0) {
            // No chunk at all (and no question asked about the positions of the others).
            return Ok((out, false));
        }
        if self.version == ZarrVersion::V2 {
            let mut pos = Odometer::new(&[], &self.grid);
            while let Some(c) = pos.current() {
                if *budget == 0 {
                    return Ok((out, true));
                }
                *budget -= 1;
                if exists(c)? {
                    out.push(c.to_vec());
                }
                pos.advance();
            }
            return Ok((out, false));
        }
        let Some(&g) = self.grid.get(prefix.len()) else {
            return Ok((out, false));
        };
        for v in 0..g {
            let mut child = prefix.to_vec();
            child.push(v);
            let (found, cut) = self.any_below(&child, budget, &mut exists)?;
            if found {
                out.push(child);
            }
            if cut {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }
}

/// The row-major index of `coords` in a grid of `dims`, if inside it.
fn linear(coords: &[u64], dims: &[u64]) -> Option<u64> {
    coords.iter().zip(dims).try_fold(0u64, |acc, (&c, &d)| {
        (c < d).then_some(())?;
        acc.checked_mul(d)?.checked_add(c)
    })
}

/// The coordinates of row-major index `index` in a grid of `dims`, if inside it.
fn unravel(mut index: u64, dims: &[u64]) -> Option<Vec<u64>> {
    let mut out = vec![0u64; dims.len()];
    for (slot, &d) in out.iter_mut().zip(dims).rev() {
        if d == 0 {
            return None;
        }
        *slot = index % d;
        index /= d;
    }
    (index == 0).then_some(out)
}

/// Row-major positions of a sub-grid: `fixed` coordinates followed by every position of
/// `dims`.
struct Odometer {
    coords: Vec<u64>,
    fixed: usize,
    dims: Vec<u64>,
    done: bool,
}

impl Odometer {
    fn new(fixed: &[u64], dims: &[u64]) -> Odometer {
        let mut coords = fixed.to_vec();
        coords.extend(std::iter::repeat_n(0, dims.len()));
        Odometer {
            coords,
            fixed: fixed.len(),
            dims: dims.to_vec(),
            done: dims.contains(&0),
        }
    }

    fn current(&self) -> Option<&[u64]> {
        (!self.done).then_some(&self.coords[..])
    }

    fn advance(&mut self) {
        for (i, &d) in self.dims.iter().enumerate().rev() {
            let c = &mut self.coords[self.fixed + i];
            *c += 1;
            if *c < d {
                return;
            }
            *c = 0;
        }
        self.done = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_numbers_round_trip_through_every_depth() {
        let t = KeyTree::new(ZarrVersion::V3, &[2, 3, 4]).unwrap();
        assert_eq!(t.len(), 1 + 2 + 6 + 24);
        let mut seen = std::collections::HashSet::new();
        for local in 0..t.len() {
            let node = t.node(local).unwrap();
            let coords = match &node {
                KeyNode::Dir(c) => c.clone(),
                KeyNode::Chunk(c) => c.clone(),
            };
            assert_eq!(matches!(node, KeyNode::Chunk(_)), coords.len() == 3);
            assert_eq!(t.local(&coords), Some(local), "{coords:?}");
            assert!(seen.insert(coords));
        }
        assert_eq!(t.node(t.len()), None);
        assert_eq!(t.local(&[2]), None, "outside the grid");
        assert_eq!(t.local(&[0, 0, 0, 0]), None, "deeper than the grid");
        assert_eq!(t.node(0), Some(KeyNode::Dir(vec![])));
        assert_eq!(t.node(1), Some(KeyNode::Dir(vec![0])));
        assert_eq!(t.node(9), Some(KeyNode::Chunk(vec![0, 0, 0])));
    }

    #[test]
    fn v2_and_scalar_numbers() {
        let t = KeyTree::new(ZarrVersion::V2, &[3, 5]).unwrap();
        assert_eq!(t.len(), 15);
        assert_eq!(t.local(&[2, 4]), Some(14));
        assert_eq!(t.local(&[2]), None, "v2 has no prefix directories");
        assert_eq!(t.node(7), Some(KeyNode::Chunk(vec![1, 2])));
        let s = KeyTree::new(ZarrVersion::V3, &[]).unwrap();
        assert_eq!((s.len(), s.node(0)), (1, Some(KeyNode::Chunk(vec![]))));
        let s = KeyTree::new(ZarrVersion::V2, &[]).unwrap();
        assert_eq!((s.len(), s.node(0)), (1, Some(KeyNode::Chunk(vec![]))));
        let empty = KeyTree::new(ZarrVersion::V2, &[0, 7]).unwrap();
        assert!(empty.is_empty());
        let wide = KeyTree::new(ZarrVersion::V3, &[1 << 40, 0]).unwrap();
        let never = |_: &[u64]| -> Result<bool> { panic!("asked") };
        assert_eq!(
            wide.existing_children(&[], &mut 5, never).unwrap(),
            (vec![], false)
        );
        assert_eq!(KeyTree::new(ZarrVersion::V3, &[1 << 40, 1 << 40]), None);
        assert_eq!(KeyTree::new(ZarrVersion::V2, &[u64::MAX, 2]), None);
    }

    #[test]
    fn coordinates_are_canonical_decimals_inside_the_grid() {
        let t = KeyTree::new(ZarrVersion::V3, &[12, 3]).unwrap();
        assert_eq!(t.coordinate(0, "11"), Some(11));
        assert_eq!(t.coordinate(0, "0"), Some(0));
        for bad in ["12", "01", "+1", "", "1a", " 1", "-0"] {
            assert_eq!(t.coordinate(0, bad), None, "{bad:?}");
        }
        assert_eq!(t.coordinate(2, "0"), None, "no such depth");
    }

    #[test]
    fn listings_show_only_what_holds_a_chunk_within_the_budget() {
        // Chunks (0, 1), (2, 0) and (2, 2) of a 3 x 3 grid exist.
        let have = [[0u64, 1], [2, 0], [2, 2]];
        let exists = |c: &[u64]| Ok(have.iter().any(|h| h[..] == *c));
        let t = KeyTree::new(ZarrVersion::V3, &[3, 3]).unwrap();
        let mut budget = 100;
        let (top, cut) = t.existing_children(&[], &mut budget, exists).unwrap();
        assert_eq!((top, cut), (vec![vec![0], vec![2]], false));
        // Row 0: 2 questions; row 1: 3; row 2: 1.
        assert_eq!(budget, 100 - 6);
        let (row, _) = t.existing_children(&[2], &mut 100, exists).unwrap();
        assert_eq!(t.any_below(&[1], &mut 100, exists).unwrap(), (false, false));
        assert_eq!(t.any_below(&[], &mut 100, exists).unwrap(), (true, false));
        assert_eq!(t.any_below(&[1], &mut 2, exists).unwrap(), (false, true));
        assert_eq!(row, vec![vec![2, 0], vec![2, 2]]);
        let v2 = KeyTree::new(ZarrVersion::V2, &[3, 3]).unwrap();
        let (all, cut) = v2.existing_children(&[], &mut 100, exists).unwrap();
        assert_eq!((all.len(), cut), (3, false));
        let (some, cut) = v2.existing_children(&[], &mut 7, exists).unwrap();
        assert_eq!((some, cut), (vec![vec![0, 1], vec![2, 0]], true));
        let failing = |_: &[u64]| Err(crate::Error::corrupt("chunk index", 0, "bad"));
        assert!(v2.existing_children(&[], &mut 9, failing).is_err());
    }
}
