//! Dimension names from HDF5 dimension scales, as netCDF-4 (and h5py's `dims` API) write
//! them, for v3 `dimension_names` and v2 `_ARRAY_DIMENSIONS`: what xarray needs to give an
//! array its dimensions and coordinate variables.
//!
//! A dataset's `DIMENSION_LIST` attribute holds, for each dimension, a variable-length list
//! of object references to the dimension scale datasets attached to it (netCDF attaches one).
//! A dimension's name is the name of the link to its first scale, as netCDF and h5netcdf
//! name it (the scale's `NAME` attribute says the same for a coordinate variable, and
//! `"This is a netCDF dimension but not a netCDF variable. ..."` for a dimension that has no
//! variable); the link is found by a bounded breadth-first walk from the root group (not
//! found: the scale's own `NAME`, unless it is netCDF's placeholder). A
//! one-dimensional dimension scale (`CLASS = "DIMENSION_SCALE"`) is its own dimension.
//!
//! The bookkeeping attributes this replaces are left out of the JSON attributes, as netCDF
//! readers hide them: `DIMENSION_LIST`, `REFERENCE_LIST` (its back-references), a scale's
//! `CLASS` and `NAME`, and netCDF's internal `_Netcdf4Dimid`, `_Netcdf4Coordinates`,
//! `_nc3_strict` and `_NCProperties`. A scale of the netCDF placeholder kind is a dimension
//! only, not a variable ([`Dims::dimension_only`]).
//!
//! A dataset with no scales gets no names from [`dimensions`]: netCDF's readers name such
//! dimensions `phony_dim_N` group by group, which [`phony_names`] does for one group at a
//! time (the caller knows the group; [`super::ZarrArray::set_dimension_names`] applies them).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::format::messages::datatype::{ReferenceKind, TypeClass, VarLenKind};
use crate::model::{Attribute, DatasetInfo, File, LinkTarget, ObjectId, ObjectKind};
use crate::views::vlen::{parse_ref, HeapCache};

/// The text netCDF stores as the `NAME` of a dimension scale that is not a variable.
pub const NOT_A_VARIABLE: &str = "This is a netCDF dimension but not a netCDF variable.";

/// Links looked at, at most, when looking for the name of a dimension scale.
const MAX_WALK: usize = 200_000;

/// Attributes netCDF keeps for itself.
const NETCDF_INTERNAL: [&str; 6] = [
    "DIMENSION_LIST",
    "REFERENCE_LIST",
    "_Netcdf4Dimid",
    "_Netcdf4Coordinates",
    "_nc3_strict",
    "_NCProperties",
];

/// What a dataset's dimension scales say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dims {
    /// One name per dimension, when every dimension has one.
    pub names: Option<Vec<String>>,
    /// A netCDF dimension without a variable: its dataset holds no data of its own.
    pub dimension_only: bool,
}

/// The text of a string attribute (fixed or variable length, scalar or one element).
fn text(a: &Attribute) -> Option<String> {
    if let Some(s) = &a.strings {
        return s.first().cloned().flatten();
    }
    match a.dtype.class {
        TypeClass::String { .. } => {
            let end = a.raw.iter().position(|&b| b == 0).unwrap_or(a.raw.len());
            Some(String::from_utf8_lossy(&a.raw[..end]).into_owned())
        }
        _ => None,
    }
}

/// Whether the attributes `attrs` make their object a dimension scale.
fn is_scale(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.name == "CLASS" && text(a).as_deref() == Some("DIMENSION_SCALE"))
}

/// Whether attribute `a`, among `attrs` of one object, is dimension bookkeeping left out of
/// the JSON attributes (see the module docs).
pub fn hidden(a: &Attribute, attrs: &[Attribute]) -> bool {
    NETCDF_INTERNAL.contains(&a.name.as_str())
        || ((a.name == "CLASS" || a.name == "NAME") && is_scale(attrs))
}

/// The dimensions of dataset `id` of `file`, of `rank` dimensions, whose attributes are
/// `attrs`.
pub fn dimensions(file: &File, id: ObjectId, rank: usize, attrs: &[Attribute]) -> Dims {
    let scale = is_scale(attrs);
    let name_attr = attrs.iter().find(|a| a.name == "NAME").and_then(text);
    let dimension_only = scale
        && name_attr
            .as_deref()
            .is_some_and(|n| n.starts_with(NOT_A_VARIABLE));
    let names = match attrs.iter().find(|a| a.name == "DIMENSION_LIST") {
        Some(list) => match scales(file, list, rank) {
            Ok(ids) => ids
                .into_iter()
                .map(|s| link_name(file, s).or_else(|| scale_name(file, s)))
                .collect::<Option<Vec<_>>>(),
            Err(e) => {
                log::warn!(
                    "Zarr dimension names of dataset {:#x}: DIMENSION_LIST: {e}",
                    id.0
                );
                None
            }
        },
        None if scale && rank == 1 => link_name(file, id).map(|n| vec![n]),
        None => None,
    };
    Dims {
        names,
        dimension_only,
    }
}

/// The first scale attached to each of the `rank` dimensions by `DIMENSION_LIST` attribute
/// `a` (a variable-length list of object references per dimension).
fn scales(file: &File, a: &Attribute, rank: usize) -> Result<Vec<ObjectId>, String> {
    let TypeClass::VarLen {
        kind: VarLenKind::Sequence,
        base,
    } = &a.dtype.class
    else {
        return Err("not a variable-length list".into());
    };
    if !matches!(
        base.class,
        TypeClass::Reference {
            kind: ReferenceKind::Object
        }
    ) {
        return Err("not a list of object references".into());
    }
    let esize = a.dtype.size as usize;
    let rsize = base.size as usize;
    if esize == 0 || rsize == 0 || rsize > 8 || a.raw.len() / esize != rank {
        return Err(format!(
            "{} entries for {rank} dimensions",
            a.raw.len() / esize.max(1)
        ));
    }
    let heaps = HeapCache::default();
    a.raw
        .chunks_exact(esize)
        .map(|r| {
            let r = parse_ref(file, r).map_err(|e| e.to_string())?;
            let id = r.id.ok_or("a dimension without a scale")?;
            let refs = heaps
                .object(file, id, u64::from(r.len) * rsize as u64)
                .map_err(|e| e.to_string())?;
            let first = refs.get(..rsize).ok_or("an empty list of scales")?;
            let mut b = [0u8; 8];
            b[..rsize].copy_from_slice(first);
            Ok(ObjectId(u64::from_le_bytes(b)))
        })
        .collect()
}

/// The `NAME` a dimension scale gives itself, unless it is netCDF's "not a variable" text.
fn scale_name(file: &File, scale: ObjectId) -> Option<String> {
    let attrs = file.attributes(scale).ok()?;
    let name = attrs.iter().find(|a| a.name == "NAME").and_then(text)?;
    (!name.is_empty() && !name.starts_with(NOT_A_VARIABLE)).then_some(name)
}

/// The name of a link to object `target`, found by a breadth-first walk of the groups from
/// the root (bounded by [`MAX_WALK`] links).
fn link_name(file: &File, target: ObjectId) -> Option<String> {
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([file.root()]);
    let mut looked = 0usize;
    while let Some(g) = queue.pop_front() {
        if !seen.insert(g) {
            continue;
        }
        let links = file.links(g).ok()?;
        for l in links.iter() {
            looked += 1;
            if looked > MAX_WALK {
                log::warn!("Zarr dimension names: no link to object {:#x} among the first {MAX_WALK} links", target.0);
                return None;
            }
            if let LinkTarget::Hard(id) = l.target {
                if id == target {
                    return Some(l.name.to_string());
                }
                if !seen.contains(&id) && matches!(file.kind(id), Ok(ObjectKind::Group)) {
                    queue.push_back(id);
                }
            }
        }
    }
    None
}

/// netCDF's names for the dimensions of the datasets of group `group` that have no
/// dimension scales, by dataset, as h5netcdf names them (`phony_dims="access"`; netCDF-C
/// alike): in the group's order (creation order where tracked, else by name), each dataset
/// needs, for each length `n`, as many dimensions of length `n` as it has axes of that
/// length; the group's one-dimensional dimension scales of length `n` serve first (named
/// after their datasets), then new names `phony_dim_0`, `phony_dim_1`, ... in order of first
/// need. The `k`-th axis of length `n` of a dataset is the `k`-th such dimension. The count
/// starts at 0 in every group (h5netcdf goes on counting from group to group, in the order
/// it opens them). Datasets with some scales attached, and the scales, are left out.
///
/// The names cover the array's whole shape ([`zarr_shape`]), since xarray opens no group
/// with an array whose dimensions are not all named. The axes netCDF has no dataset
/// dimension for (a null dataspace's one empty axis, an array datatype's axes after the
/// dataset's own) are named in a second round, after every other: the same rule, with the
/// names the first round gave taken already, so the names netCDF's readers give stay as
/// they are.
pub fn phony_names(file: &File, group: ObjectId) -> HashMap<ObjectId, Vec<String>> {
    let links = match file.links_by_creation_order(group) {
        Ok(Some(l)) => l,
        _ => file.links(group).map(|l| l.to_vec()).unwrap_or_default(),
    };
    // Length (None: unlimited) -> names of the group's scales of that length.
    let mut labeled: HashMap<Option<u64>, Vec<String>> = HashMap::new();
    // Per round, length -> most axes of that length in one dataset, in order of first
    // need: the datasets' own axes, then the whole shapes.
    let mut need: [Vec<(u64, usize)>; 2] = [Vec::new(), Vec::new()];
    let mut unnamed: Vec<(ObjectId, Vec<u64>)> = Vec::new();
    for l in &links {
        let LinkTarget::Hard(id) = l.target else {
            continue;
        };
        if !matches!(file.kind(id), Ok(ObjectKind::Dataset)) {
            continue;
        }
        let Ok(ds) = file.dataset(id) else { continue };
        let attrs = file.attributes(id).unwrap_or_default();
        if is_scale(&attrs) {
            if let [n] = ds.info.shape[..] {
                let unlimited = ds.info.max_shape.as_deref() == Some(&[u64::MAX][..]);
                labeled
                    .entry((!unlimited).then_some(n))
                    .or_default()
                    .push(l.name.clone());
            }
            continue;
        }
        if attrs.iter().any(|a| a.name == "DIMENSION_LIST") {
            continue;
        }
        let own: &[u64] = if ds.info.null { &[] } else { &ds.info.shape };
        let shape = zarr_shape(&ds.info);
        for (round, axes) in need.iter_mut().zip([own, &shape[..]]) {
            for (n, c) in axis_counts(axes) {
                match round.iter_mut().find(|(m, _)| *m == n) {
                    Some((_, have)) => *have = (*have).max(c),
                    None => round.push((n, c)),
                }
            }
        }
        unnamed.push((id, shape));
    }
    let mut names: HashMap<(u64, usize), String> = HashMap::new();
    let mut next = 0usize;
    for round in &need {
        for &(n, c) in round {
            let scales = labeled.get(&Some(n)).map_or(&[][..], Vec::as_slice);
            for k in 0..c {
                if names.contains_key(&(n, k)) {
                    continue;
                }
                let name = match scales.get(k) {
                    Some(s) => s.clone(),
                    None => {
                        next += 1;
                        format!("phony_dim_{}", next - 1)
                    }
                };
                names.insert((n, k), name);
            }
        }
    }
    unnamed
        .into_iter()
        .map(|(id, shape)| {
            let mut seen: HashMap<u64, usize> = HashMap::new();
            let dims = shape
                .iter()
                .map(|&n| {
                    let k = seen.entry(n).or_insert(0);
                    *k += 1;
                    names.get(&(n, *k - 1)).cloned().unwrap_or_default()
                })
                .collect();
            (id, dims)
        })
        .collect()
}

/// The shape of the Zarr array of a dataset described by `info`, as
/// [`super::ZarrArray::new`] makes it: one empty axis for a null dataspace, and the axes of
/// an array datatype (when the Zarr type keeps them) after the dataset's own.
pub fn zarr_shape(info: &DatasetInfo) -> Vec<u64> {
    let mut shape = own_shape(info);
    if let Ok(z) = super::dtype::map(&info.dtype, info.fill_value.as_deref()) {
        shape.extend(z.sub);
    }
    shape
}

/// The dataset's own axes in its Zarr array: its shape, or one empty axis for a null
/// dataspace (which holds nothing).
pub fn own_shape(info: &DatasetInfo) -> Vec<u64> {
    if info.null {
        vec![0]
    } else {
        info.shape.clone()
    }
}

/// Each length among `axes` with how many axes have it, in order of first appearance.
fn axis_counts(axes: &[u64]) -> Vec<(u64, usize)> {
    let mut counts: Vec<(u64, usize)> = Vec::new();
    for &n in axes {
        match counts.iter_mut().find(|(m, _)| *m == n) {
            Some((_, c)) => *c += 1,
            None => counts.push((n, 1)),
        }
    }
    counts
}
