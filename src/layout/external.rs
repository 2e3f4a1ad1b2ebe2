//! Layout: external storage.
//!
//! The raw data lives in other files (spec: "External Data Files Message"): an ordered list of
//! segments, each `size` bytes of the dataset starting at `offset` in its file. Segment `k`
//! holds the dataset bytes after those of segments `0..k`. The last segment may be unlimited
//! (size all ones). As libhdf5 does (checked with h5py), bytes of a segment that lie beyond its
//! file's end read as zeros, and a file that cannot be opened fails only the reads that touch
//! it, with an error naming the file.
//!
//! Files are opened on first use and kept open (at most [`MAX_OPEN_FILES`]) so a sequential
//! read does not reopen per call.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

use super::ExternalSegment;

/// Open external files kept per dataset. A dataset rarely has more than a few; the bound only
/// stops a crafted segment list from exhausting file descriptors.
pub const MAX_OPEN_FILES: usize = 16;

/// An externally stored dataset.
#[derive(Debug)]
pub(crate) struct External {
    /// Segments with the dataset offset at which each starts, in order.
    segments: Vec<(u64, ExternalSegment)>,
    files: Mutex<HashMap<PathBuf, Arc<File>>>,
}

impl External {
    /// `len` is the dataset's byte length, `id` its object header address (for errors).
    pub(crate) fn new(list: Vec<ExternalSegment>, len: u64, id: u64) -> Result<External> {
        let mut start = 0u64;
        let mut segments = Vec::with_capacity(list.len());
        for seg in list {
            if start >= len {
                break;
            }
            let next = start.saturating_add(seg.size);
            segments.push((start, seg));
            start = next;
        }
        if start < len {
            return Err(Error::corrupt(
                "external file list",
                id,
                format!("segments hold {start} bytes of a dataset of {len} bytes"),
            ));
        }
        Ok(External {
            segments,
            files: Mutex::new(HashMap::new()),
        })
    }

    fn open(&self, path: &Path) -> Result<Arc<File>> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = files.get(path) {
            return Ok(f.clone());
        }
        let f = Arc::new(
            crate::io::storage::open_data_file(path).map_err(|e| Error::Io {
                what: "external data file",
                addr: 0,
                len: 0,
                source: std::io::Error::new(e.kind(), format!("{}: {e}", path.display())),
            })?,
        );
        if files.len() >= MAX_OPEN_FILES {
            files.clear();
        }
        files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }

    /// Fill `buf` from `offset`; the caller has clipped the range to the dataset.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset + buf.len() as u64;
        // First segment that ends after `offset`.
        let first = self
            .segments
            .partition_point(|(s, seg)| s.saturating_add(seg.size) <= offset);
        for (start, seg) in &self.segments[first..] {
            if *start >= end {
                break;
            }
            let lo = offset.max(*start);
            let hi = end.min(start.saturating_add(seg.size));
            if lo >= hi {
                continue;
            }
            let dst = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
            let pos = seg.offset.checked_add(lo - start).ok_or_else(|| {
                Error::corrupt("external data file", seg.offset, "segment offset overflows")
            })?;
            let file = self.open(&seg.path)?;
            read_or_zero(&file, &seg.path, pos, dst)?;
        }
        Ok(())
    }
}

/// Read `dst.len()` bytes at `pos`; whatever lies past the end of the file reads as zeros.
fn read_or_zero(file: &File, path: &Path, pos: u64, dst: &mut [u8]) -> Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let at = pos.saturating_add(done as u64);
        match file.read_at(&mut dst[done..], at) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Error::Io {
                    what: "external data file",
                    addr: at,
                    len: (dst.len() - done) as u64,
                    source: std::io::Error::new(e.kind(), format!("{}: {e}", path.display())),
                })
            }
        }
    }
    dst[done..].fill(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(path: &Path, offset: u64, size: u64) -> ExternalSegment {
        ExternalSegment {
            path: path.to_path_buf(),
            offset,
            size,
        }
    }

    #[test]
    fn spans_segments_zero_fills_and_names_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.bin");
        let b = dir.path().join("b.bin");
        std::fs::write(&a, (0u8..40).collect::<Vec<_>>()).unwrap();
        std::fs::write(&b, [0xaa; 6]).unwrap();
        let missing = dir.path().join("gone.bin");
        let e = External::new(
            vec![seg(&a, 4, 10), seg(&b, 2, 8), seg(&missing, 0, u64::MAX)],
            30,
            0,
        )
        .unwrap();
        let mut buf = [0xffu8; 18];
        e.read(0, &mut buf).unwrap();
        let mut want: Vec<u8> = (4u8..14).collect();
        want.extend([0xaa; 4]);
        want.extend([0; 4]); // b.bin ends 2 + 4 bytes in
        assert_eq!(&buf[..], &want[..]);
        let mut mid = [0u8; 4];
        e.read(8, &mut mid).unwrap();
        assert_eq!(mid, [12, 13, 0xaa, 0xaa]);
        let err = e.read(17, &mut mid).unwrap_err().to_string();
        assert!(err.contains("gone.bin"), "{err}");
    }

    #[test]
    fn segments_must_cover_dataset() {
        let p = Path::new("/nonexistent");
        assert!(External::new(vec![seg(p, 0, 10), seg(p, 0, 5)], 16, 0x99).is_err());
        assert!(External::new(vec![seg(p, 0, 10), seg(p, 0, 6)], 16, 0).is_ok());
    }
}
