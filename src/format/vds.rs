//! The mapping table of a virtual dataset (spec "III.F Disk Format: Level 1F - Global Heap
//! Block for Virtual Datasets") and the dataspace selections it carries.
//!
//! The data layout message of a virtual dataset points at one global heap object. That object
//! holds a version byte, a mapping count (*Size of Lengths* bytes), then one entry per mapping:
//! source file name and source dataset name (NUL-terminated), the source selection and the
//! virtual selection, and finally a lookup3 checksum of everything before it. Version 1 (HDF5
//! 1.14.4+) puts a flags byte before each entry: bit 0 = the file name is an index (*Size of
//! Lengths* bytes) of an earlier entry whose name it shares, bit 1 = the same for the dataset
//! name, bit 2 = the source is this file (no file name stored, it reads as `.`).
//!
//! Selections use the library's selection serialization (`H5S_SELECT_SERIALIZE`): a 4-byte type
//! (0 none, 1 points, 2 hyperslab, 3 all) and a 4-byte version, then a type-specific body.
//! Hyperslabs come in version 1 (explicit blocks, 4-byte values), version 2 (8-byte values,
//! regular flag) and version 3 (a per-selection value width); a regular hyperslab stores
//! start/stride/count/block per dimension, where an all-ones count or block means unlimited.
//! Every count is checked against the bytes left before anything is allocated.

use crate::error::{Error, Result};
use crate::format::limits::MAX_RANK;
use crate::io::checksum::lookup3;
use crate::io::{Cursor, Sizes};

/// An unlimited count or block in a regular hyperslab (`H5S_UNLIMITED`).
pub const UNLIMITED: u64 = u64::MAX;

const WHAT: &str = "virtual dataset mapping block";

/// Selection type codes (`H5S_sel_type`).
const SEL_NONE: u32 = 0;
const SEL_POINTS: u32 = 1;
const SEL_HYPERSLABS: u32 = 2;
const SEL_ALL: u32 = 3;

/// Hyperslab flag: the selection is one regular pattern per dimension.
const HYPER_REGULAR: u8 = 0x01;

/// Entry flags of block version 1.
const FLAG_FILE_SHARED: u8 = 0x01;
const FLAG_DSET_SHARED: u8 = 0x02;
const FLAG_SAME_FILE: u8 = 0x04;

/// One dimension of a regular hyperslab. `count` or `block` may be [`UNLIMITED`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegularDim {
    pub start: u64,
    pub stride: u64,
    pub count: u64,
    pub block: u64,
}

/// A serialized dataspace selection (spec "Dataspace Selection" encodings used by region
/// references and virtual dataset mappings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    None,
    /// The whole extent of the dataspace it is applied to.
    All,
    /// Points in the order they were selected; `coords` holds `rank` values per point.
    Points {
        rank: usize,
        coords: Vec<u64>,
    },
    /// One regular pattern per dimension.
    Regular(Vec<RegularDim>),
    /// Explicit blocks; `corners` holds per block `rank` starts then `rank` inclusive ends.
    Blocks {
        rank: usize,
        corners: Vec<u64>,
    },
}

impl Selection {
    /// Rank the selection was serialized with (`None` for all/none, which carry no rank).
    pub fn rank(&self) -> Option<usize> {
        match self {
            Selection::None | Selection::All => None,
            Selection::Points { rank, .. } | Selection::Blocks { rank, .. } => Some(*rank),
            Selection::Regular(d) => Some(d.len()),
        }
    }

    /// The dimension with an unlimited count or block, if any.
    pub fn unlimited_dim(&self) -> Option<usize> {
        match self {
            Selection::Regular(d) => d
                .iter()
                .position(|d| d.count == UNLIMITED || d.block == UNLIMITED),
            _ => None,
        }
    }

    /// Decode one selection; `c` is left after it.
    pub fn parse(c: &mut Cursor<'_>) -> Result<Selection> {
        let kind = c.u32()?;
        let version = c.u32()?;
        match kind {
            SEL_NONE | SEL_ALL => {
                if version != 1 && version != 2 {
                    return Err(c.corrupt(format!("all/none selection version {version}")));
                }
                // Reserved and length fields, both zero.
                c.skip(8)?;
                Ok(if kind == SEL_ALL {
                    Selection::All
                } else {
                    Selection::None
                })
            }
            SEL_POINTS => parse_points(c, version),
            SEL_HYPERSLABS => parse_hyperslab(c, version),
            k => Err(c.corrupt(format!("selection type {k}"))),
        }
    }
}

fn read_rank(c: &mut Cursor<'_>) -> Result<usize> {
    let rank = c.u32()? as usize;
    if rank == 0 || rank > MAX_RANK {
        return Err(c.corrupt(format!("selection rank {rank}")));
    }
    Ok(rank)
}

fn read_width(c: &mut Cursor<'_>) -> Result<usize> {
    let w = c.u8()? as usize;
    if !matches!(w, 2 | 4 | 8) {
        return Err(c.corrupt(format!("selection value width {w}")));
    }
    Ok(w)
}

/// Read `n` values of `width` bytes, refusing counts the remaining bytes cannot hold.
fn read_values(c: &mut Cursor<'_>, n: u64, width: usize) -> Result<Vec<u64>> {
    let bytes = n
        .checked_mul(width as u64)
        .filter(|&b| b <= c.remaining() as u64)
        .ok_or_else(|| c.corrupt(format!("{n} selection values overrun the block")))?;
    let mut v = Vec::with_capacity(bytes as usize / width.max(1));
    for _ in 0..n {
        v.push(c.uint(width)?);
    }
    Ok(v)
}

fn parse_points(c: &mut Cursor<'_>, version: u32) -> Result<Selection> {
    let (rank, n, width) = match version {
        1 => {
            c.skip(8)?; // reserved, length
            let rank = read_rank(c)?;
            (rank, c.u32()? as u64, 4)
        }
        2 => {
            let width = read_width(c)?;
            let rank = read_rank(c)?;
            (rank, c.uint(width)?, width)
        }
        v => return Err(c.corrupt(format!("point selection version {v}"))),
    };
    let total = n
        .checked_mul(rank as u64)
        .ok_or_else(|| c.corrupt(format!("{n} points")))?;
    let coords = read_values(c, total, width)?;
    Ok(Selection::Points { rank, coords })
}

fn parse_hyperslab(c: &mut Cursor<'_>, version: u32) -> Result<Selection> {
    let (flags, width, rank) = match version {
        1 => {
            c.skip(8)?; // reserved, length
            (0, 4, read_rank(c)?)
        }
        2 => {
            let flags = c.u8()?;
            c.skip(4)?; // length
            (flags, 8, read_rank(c)?)
        }
        3 => {
            let flags = c.u8()?;
            let width = read_width(c)?;
            (flags, width, read_rank(c)?)
        }
        v => return Err(c.corrupt(format!("hyperslab selection version {v}"))),
    };
    // An all-ones value of the stored width is H5S_UNLIMITED.
    let all_ones = if width == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    if flags & HYPER_REGULAR != 0 {
        let v = read_values(c, 4 * rank as u64, width)?;
        let unl = |x: u64| if x == all_ones { UNLIMITED } else { x };
        let dims: Vec<RegularDim> = v
            .chunks_exact(4)
            .map(|d| RegularDim {
                start: d[0],
                stride: d[1],
                count: unl(d[2]),
                block: unl(d[3]),
            })
            .collect();
        if dims
            .iter()
            .filter(|d| d.count == UNLIMITED || d.block == UNLIMITED)
            .count()
            > 1
        {
            return Err(c.corrupt("hyperslab unlimited in more than one dimension"));
        }
        return Ok(Selection::Regular(dims));
    }
    let nblocks = if version == 1 {
        c.u32()? as u64
    } else {
        c.uint(width)?
    };
    let total = nblocks
        .checked_mul(2 * rank as u64)
        .ok_or_else(|| c.corrupt(format!("{nblocks} hyperslab blocks")))?;
    let corners = read_values(c, total, width)?;
    for b in corners.chunks_exact(2 * rank) {
        if b[..rank].iter().zip(&b[rank..]).any(|(s, e)| e < s) {
            return Err(c.corrupt("hyperslab block ends before it starts"));
        }
    }
    Ok(Selection::Blocks { rank, corners })
}

/// One source → virtual mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VdsMapping {
    /// Source file name as stored (`.` = the virtual dataset's own file); may hold `%b`.
    pub file_name: String,
    /// Source dataset path; may hold `%b`.
    pub dataset_name: String,
    pub source_select: Selection,
    pub virtual_select: Selection,
}

/// The decoded mapping table (spec "III.F").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VdsBlock {
    pub version: u8,
    pub mappings: Vec<VdsMapping>,
}

impl VdsBlock {
    /// Decode the heap object `data` (read from global heap collection `addr`).
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<VdsBlock> {
        let mut c = Cursor::new(data, addr, WHAT);
        let version = c.u8()?;
        if version > 1 {
            return Err(c.corrupt(format!("version {version}")));
        }
        let n = c.length(sizes)?;
        // Every entry takes at least two 16-byte selections.
        if n > (c.remaining() / 32) as u64 {
            return Err(Error::limit(
                WHAT,
                addr,
                format!("{n} mappings in {} bytes", data.len()),
            ));
        }
        let mut mappings: Vec<VdsMapping> = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let flags = if version >= 1 { c.u8()? } else { 0 };
            let shared = |c: &mut Cursor<'_>, m: &[VdsMapping], file: bool| -> Result<String> {
                let i = c.length(sizes)?;
                let e = usize::try_from(i)
                    .ok()
                    .and_then(|i| m.get(i))
                    .ok_or_else(|| c.corrupt(format!("shared name refers to entry {i}")))?;
                Ok(if file {
                    e.file_name.clone()
                } else {
                    e.dataset_name.clone()
                })
            };
            let text = |c: &mut Cursor<'_>| -> Result<String> {
                Ok(String::from_utf8_lossy(c.cstring()?).into_owned())
            };
            let file_name = if flags & FLAG_SAME_FILE != 0 {
                ".".to_string()
            } else if flags & FLAG_FILE_SHARED != 0 {
                shared(&mut c, &mappings, true)?
            } else {
                text(&mut c)?
            };
            let dataset_name = if flags & FLAG_DSET_SHARED != 0 {
                shared(&mut c, &mappings, false)?
            } else {
                text(&mut c)?
            };
            let source_select = Selection::parse(&mut c)?;
            let virtual_select = Selection::parse(&mut c)?;
            mappings.push(VdsMapping {
                file_name,
                dataset_name,
                source_select,
                virtual_select,
            });
        }
        let body = c.pos();
        let stored = c.u32()?;
        let computed = lookup3(&data[..body], 0);
        if stored != computed {
            return Err(Error::Checksum { what: WHAT, addr });
        }
        Ok(VdsBlock { version, mappings })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// h5py, libver='latest': three same-file mappings (flags 0x04), source "all", virtual a
    /// regular hyperslab v3 with 2-byte values selecting one row of a (4, 10) dataset.
    const LATEST: &str = concat!(
        "01030000000000000004",
        "2f7372633000030000000100000000000000000000000200000003000000010202000000000001000100",
        "010000000100010",
        "00a0004",
        "2f7372633100030000000100000000000000000000000200000003000000010202000000010001000100",
        "010000000100010",
        "00a0004",
        "2f7372633200030000000100000000000000000000000200000003000000010202000000020001000100",
        "010000000100010",
        "00a00",
        "4049f8e8"
    );

    #[test]
    fn real_latest_block() {
        let b = VdsBlock::parse(&unhex(LATEST), 0x878, Sizes::DEFAULT).unwrap();
        assert_eq!(b.version, 1);
        assert_eq!(b.mappings.len(), 3);
        let m = &b.mappings[2];
        assert_eq!(m.file_name, ".");
        assert_eq!(m.dataset_name, "/src2");
        assert_eq!(m.source_select, Selection::All);
        let row = |r| RegularDim {
            start: r,
            stride: 1,
            count: 1,
            block: 1,
        };
        assert_eq!(
            m.virtual_select,
            Selection::Regular(vec![
                row(2),
                RegularDim {
                    start: 0,
                    stride: 1,
                    count: 1,
                    block: 10
                }
            ])
        );
    }

    #[test]
    fn checksum_and_truncation() {
        let mut img = unhex(LATEST);
        let n = img.len();
        img[12] ^= 1;
        assert!(matches!(
            VdsBlock::parse(&img, 0, Sizes::DEFAULT),
            Err(Error::Checksum { .. })
        ));
        let img = unhex(LATEST);
        for cut in [1, 9, 30, n - 5, n - 1] {
            assert!(
                VdsBlock::parse(&img[..cut], 0, Sizes::DEFAULT).is_err(),
                "cut {cut}"
            );
        }
    }

    /// h5py, libver='earliest': version 0, file and dataset names inline, hyperslab v1.
    #[test]
    fn real_earliest_block_v1_hyperslab() {
        let img = unhex(concat!(
            "000100000000000000",
            "615f6561726c696573742e68350064000300000001000000000000000000000002000000",
            "010000000000000018000000020000000100000003000000000000000300000013000000"
        ));
        let mut img = img;
        let sum = lookup3(&img, 0);
        img.extend_from_slice(&sum.to_le_bytes());
        let b = VdsBlock::parse(&img, 0, Sizes::DEFAULT).unwrap();
        let m = &b.mappings[0];
        assert_eq!(m.file_name, "a_earliest.h5");
        assert_eq!(m.dataset_name, "d");
        assert_eq!(
            m.virtual_select,
            Selection::Blocks {
                rank: 2,
                corners: vec![3, 0, 3, 19]
            }
        );
    }

    /// Unlimited count with 2-byte values (all ones), shared names, hostile counts.
    #[test]
    fn unlimited_shared_and_hostile() {
        let sel = unhex("020000000300000001020100000000000100ffff0100");
        let mut c = Cursor::new(&sel, 0, "t");
        let s = Selection::parse(&mut c).unwrap();
        assert_eq!(s.unlimited_dim(), Some(0));
        assert_eq!(
            s,
            Selection::Regular(vec![RegularDim {
                start: 0,
                stride: 1,
                count: UNLIMITED,
                block: 1
            }])
        );
        // Entry 1 shares entry 0's file name (flag 1) and names a dataset; entry 2 shares a
        // name of a later entry, which is corrupt.
        let all = unhex("03000000010000000000000000000000");
        let mut img = vec![1];
        img.extend_from_slice(&2u64.to_le_bytes());
        img.extend_from_slice(b"\0f.h5\0/a\0");
        img.extend_from_slice(&all);
        img.extend_from_slice(&all);
        img.push(FLAG_FILE_SHARED | FLAG_DSET_SHARED);
        img.extend_from_slice(&0u64.to_le_bytes());
        img.extend_from_slice(&0u64.to_le_bytes());
        img.extend_from_slice(&all);
        img.extend_from_slice(&all);
        let mut ok = img.clone();
        ok.extend_from_slice(&lookup3(&img, 0).to_le_bytes());
        let b = VdsBlock::parse(&ok, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(b.mappings[1].file_name, "f.h5");
        assert_eq!(b.mappings[1].dataset_name, "/a");
        let mut bad = img.clone();
        bad[9 + 1 + 5 + 3 + 32 + 1] = 1;
        bad.extend_from_slice(&lookup3(&bad, 0).to_le_bytes());
        assert!(VdsBlock::parse(&bad, 0, Sizes::DEFAULT).is_err());
        // A point count that the bytes cannot hold is refused before allocating.
        let pts = unhex("01000000020000000801000000ffffffffffffff7f");
        assert!(Selection::parse(&mut Cursor::new(&pts, 0, "t")).is_err());
        // A mapping count far beyond the bytes.
        let mut huge = vec![0];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            VdsBlock::parse(&huge, 0, Sizes::DEFAULT),
            Err(Error::Limit { .. })
        ));
    }
}
