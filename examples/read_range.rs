//! Read a byte range of one dataset through the h5mount library and write it to stdout: what a
//! `pread` on the mounted file returns, without mounting.
//!
//! `cargo run --example read_range -- examples/sample.h5 /calibration/gain 0 64 | od -f`

use std::io::Write;

use h5mount::model::{File, OpenOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        return Err("usage: read_range FILE.h5 DATASET OFFSET LENGTH".into());
    }
    let file = File::open(args[1].as_ref(), &OpenOptions::default())?;
    let ds = file.dataset(file.resolve(&args[2])?)?;
    let offset: u64 = args[3].parse()?;
    let mut buf = vec![0u8; args[4].parse()?];
    let n = ds.read_at(offset, &mut buf)?;
    std::io::stdout().write_all(&buf[..n])?;
    Ok(())
}
