//! Layout: external storage.
//!
//! The raw data lives in other files (spec: "External Data Files Message"): an ordered list of
//! segments, each `size` bytes of the dataset starting at `offset` in its file. Segment `k`
//! holds the dataset bytes after those of segments `0..k`. The last segment may be unlimited
//! (size all ones). As libhdf5 does (checked with h5py), bytes of a segment that lie beyond its
//! file's end read as zeros, and a file that cannot be opened fails only the reads that touch
//! it, with an error naming the file.
//!
//! Files are opened through a [`RawOpener`]: in a mount, the one resolver of other files
//! (`model::resolver`), which applies the mount's path policy and keeps every descriptor in
//! its one bounded set of open files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::io::ByteSource;

use super::ExternalSegment;

/// Opens the raw files of external storage.
pub trait RawOpener: Send + Sync + std::fmt::Debug {
    /// The path of the external file `name` named in a file whose directory is `dir`, if the
    /// policy lets it be read (an error says why not). A missing file is not an error here:
    /// it fails the reads that touch it.
    fn check(&self, dir: &Path, name: &str) -> Result<PathBuf>;

    /// An open descriptor of `path` (a path [`RawOpener::check`] returned), kept as long as
    /// the caller holds it.
    fn open_raw(&self, path: &Path) -> Result<Arc<dyn ByteSource>>;
}

/// A [`RawOpener`] with no policy and no reuse: every read opens the file (tests).
#[derive(Debug, Default)]
pub struct PlainOpener;

impl RawOpener for PlainOpener {
    fn check(&self, dir: &Path, name: &str) -> Result<PathBuf> {
        Ok(dir.join(name))
    }

    fn open_raw(&self, path: &Path) -> Result<Arc<dyn ByteSource>> {
        crate::io::LocalFile::open(path)
            .map(|f| Arc::new(f) as Arc<dyn ByteSource>)
            .map_err(|e| Error::Open {
                what: "external data file",
                source: std::sync::Arc::new(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", path.display()),
                )),
            })
    }
}

/// The segments of an externally stored dataset and how to open their files.
#[derive(Clone, Debug)]
pub struct ExternalFiles {
    pub segments: Vec<ExternalSegment>,
    pub opener: Arc<dyn RawOpener>,
}

/// An externally stored dataset.
#[derive(Debug)]
pub(crate) struct External {
    /// Segments with the dataset offset at which each starts, in order.
    segments: Vec<(u64, ExternalSegment)>,
    opener: Arc<dyn RawOpener>,
}

impl External {
    /// `len` is the dataset's byte length, `id` its object header address (for errors).
    pub(crate) fn new(files: ExternalFiles, len: u64, id: u64) -> Result<External> {
        let mut start = 0u64;
        let mut segments = Vec::with_capacity(files.segments.len());
        for seg in files.segments {
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
            opener: files.opener,
        })
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
            let file = self.opener.open_raw(&seg.path)?;
            read_or_zero(&*file, &seg.path, pos, dst)?;
        }
        Ok(())
    }
}

/// Read `dst.len()` bytes at `pos`; whatever lies past the end of the file reads as zeros.
fn read_or_zero(file: &dyn ByteSource, path: &Path, pos: u64, dst: &mut [u8]) -> Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let at = pos.saturating_add(done as u64);
        match file.read_at(at, &mut dst[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Error::Io {
                    what: "external data file",
                    addr: at,
                    len: (dst.len() - done) as u64,
                    source: std::sync::Arc::new(std::io::Error::new(
                        e.kind(),
                        format!("{}: {e}", path.display()),
                    )),
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

    fn files(segments: Vec<ExternalSegment>) -> ExternalFiles {
        ExternalFiles {
            segments,
            opener: Arc::new(PlainOpener),
        }
    }

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
            files(vec![
                seg(&a, 4, 10),
                seg(&b, 2, 8),
                seg(&missing, 0, u64::MAX),
            ]),
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
        assert!(External::new(files(vec![seg(p, 0, 10), seg(p, 0, 5)]), 16, 0x99).is_err());
        assert!(External::new(files(vec![seg(p, 0, 10), seg(p, 0, 6)]), 16, 0).is_ok());
    }
}
