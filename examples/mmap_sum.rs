//! Memory-map a dataset file of a mounted HDF5 file and sum its elements, as any program that
//! mmaps raw arrays would. The element type is read from the file's `user.h5.dtype` xattr.
//!
//! ```text
//! h5mount examples/sample.h5 /tmp/h5
//! cargo run --example mmap_sum -- /tmp/h5/calibration/gain
//! ```

use std::fs::File;
use std::num::NonZeroUsize;

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: mmap_sum MOUNTED_DATASET_FILE")?;
    let dtype = String::from_utf8(xattr(&path, "user.h5.dtype")?)?;
    let file = File::open(&path)?;
    let len = file.metadata()?.len() as usize;
    let Some(nz) = NonZeroUsize::new(len) else {
        println!("{path}: empty");
        return Ok(());
    };
    // SAFETY: a read-only private mapping of a file on a read-only filesystem; the slice is
    // dropped before munmap and nothing else aliases the mapping.
    let sum = unsafe {
        let addr = mmap(
            None,
            nz,
            ProtFlags::PROT_READ,
            MapFlags::MAP_PRIVATE,
            &file,
            0,
        )?;
        let bytes = std::slice::from_raw_parts(addr.as_ptr().cast::<u8>(), len);
        let sum = sum_elements(bytes, &dtype);
        munmap(addr, len)?;
        sum
    }
    .ok_or_else(|| format!("unsupported dtype {dtype}"))?;
    println!("{path}: {dtype}, {len} bytes, sum = {sum}");
    Ok(())
}

/// Sum elements of a numeric numpy dtype string (`<f4`, `>u2`, ...).
fn sum_elements(b: &[u8], dtype: &str) -> Option<f64> {
    let big = dtype.starts_with('>');
    macro_rules! sum {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            b.chunks_exact(N)
                .map(|c| {
                    let a: [u8; N] = c.try_into().unwrap();
                    (if big {
                        <$t>::from_be_bytes(a)
                    } else {
                        <$t>::from_le_bytes(a)
                    }) as f64
                })
                .sum()
        }};
    }
    Some(match dtype.get(1..)? {
        "f4" => sum!(f32),
        "f8" => sum!(f64),
        "i1" => sum!(i8),
        "u1" => sum!(u8),
        "i2" => sum!(i16),
        "u2" => sum!(u16),
        "i4" => sum!(i32),
        "u4" => sum!(u32),
        "i8" => sum!(i64),
        "u8" => sum!(u64),
        _ => return None,
    })
}

/// The value of extended attribute `name` of `path`.
fn xattr(path: &str, name: &str) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let p = std::ffi::CString::new(path)?;
    let n = std::ffi::CString::new(name)?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: both strings are NUL-terminated and live across the call; the kernel writes at
    // most `buf.len()` bytes into `buf`.
    let got = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if got < 0 {
        return Err(format!("{path}: {name}: {}", std::io::Error::last_os_error()).into());
    }
    buf.truncate(got as usize);
    Ok(buf)
}
