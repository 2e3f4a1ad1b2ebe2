//! Write the Zarr store the Zarr view serves for an HDF5 file into a directory, with the
//! h5mount library alone (no FUSE): every group's and dataset's metadata documents and every
//! chunk key, as files. `mount-tests/zarr_check.py` reads such a copy with zarr-python.
//!
//! `cargo run --example zarr_export -- FILE.h5 OUT_DIR [2|3] [decoded]`
//!
//! Arrays the mapping refuses are skipped with a line on stderr; so are netCDF dimensions
//! without a variable (readers of netCDF show them as dimensions only).

use std::collections::HashSet;
use std::path::Path;

use h5mount::io::ReadCtx;
use h5mount::model::{File, LinkTarget, ObjectKind, OpenOptions};
use h5mount::views::zarr::{
    document_bytes, group_metadata, Documents, ZarrArray, ZarrOptions, ZarrVersion,
};

fn write_docs(dir: &Path, docs: &Documents) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, v) in docs {
        std::fs::write(dir.join(name), document_bytes(v))?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(src), Some(out)) = (args.get(1), args.get(2)) else {
        return Err("usage: zarr_export FILE.h5 OUT_DIR [2|3] [decoded]".into());
    };
    let opts = ZarrOptions {
        version: if args.get(3).map(String::as_str) == Some("2") {
            ZarrVersion::V2
        } else {
            ZarrVersion::V3
        },
        decoded: args.get(4).map(String::as_str) == Some("decoded"),
    };
    let file = File::open(src.as_ref(), &OpenOptions::default())?;
    let mut seen = HashSet::new();
    let mut stack = vec![(Path::new(out).to_path_buf(), file.root())];
    while let Some((dir, id)) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        match file.kind(id)? {
            ObjectKind::Group => {
                write_docs(&dir, &group_metadata(&file, id, opts)?)?;
                for link in file.links(id)?.iter() {
                    if let LinkTarget::Hard(child) = link.target {
                        stack.push((dir.join(link.name), child));
                    }
                }
            }
            ObjectKind::Dataset => {
                let ds = file.dataset(id)?;
                let a = match ZarrArray::new(&file, &ds, opts) {
                    Ok(a) if !a.is_dimension_only() => a,
                    Ok(_) => continue,
                    Err(e) => {
                        eprintln!("{}: skipped: {e}", dir.display());
                        continue;
                    }
                };
                write_docs(&dir, &a.metadata())?;
                let grid = a.grid_shape();
                let total: u64 = grid.iter().product();
                for mut k in 0..total {
                    let mut c = vec![0u64; grid.len()];
                    for (i, &g) in grid.iter().enumerate().rev() {
                        c[i] = k % g;
                        k /= g;
                    }
                    match a.chunk(ReadCtx::default(), &c) {
                        Ok(Some(bytes)) => {
                            let path = dir.join(a.chunk_key(&c));
                            if let Some(parent) = path.parent() {
                                std::fs::create_dir_all(parent)?;
                            }
                            std::fs::write(path, bytes)?;
                        }
                        Ok(None) => {}
                        // A dataset h5mount cannot read: its chunk keys fail (EIO in a
                        // mount); here the array is left out.
                        Err(e) => {
                            eprintln!("{}: skipped: chunk {}: {e}", dir.display(), a.chunk_key(&c));
                            std::fs::remove_dir_all(&dir)?;
                            break;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
