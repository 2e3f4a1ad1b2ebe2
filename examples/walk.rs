//! Walk an HDF5 file with the h5mount library (no FUSE, no libhdf5) and print every dataset
//! with its dtype, shape and byte size.
//!
//! `cargo run --example walk -- examples/sample.h5`

use std::collections::HashSet;

use h5mount::model::{File, LinkTarget, ObjectKind, OpenOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: walk FILE.h5")?;
    let file = File::open(path.as_ref(), &OpenOptions::default())?;
    let mut seen = HashSet::new();
    let mut stack = vec![("/".to_string(), file.root())];
    while let Some((p, id)) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        match file.kind(id)? {
            ObjectKind::Group => {
                println!("{p}/");
                for link in file.links(id)?.iter().rev() {
                    if let LinkTarget::Hard(child) = link.target {
                        let cp = if p == "/" {
                            format!("/{}", link.name)
                        } else {
                            format!("{p}/{}", link.name)
                        };
                        stack.push((cp, child));
                    }
                }
            }
            ObjectKind::Dataset => {
                let d = file.dataset(id)?;
                println!(
                    "{p}  {} {:?}  {} bytes",
                    d.info.dtype.numpy_str(),
                    d.info.shape,
                    d.len()
                );
            }
            _ => println!("{p}  (other)"),
        }
    }
    Ok(())
}
