//! Byte sources: where the bytes of a file come from.
//!
//! Everything above `io` reads through [`Storage`](super::Storage), and `Storage` reads
//! through one [`ByteSource`]: a length, positioned reads, an identity that changes when the
//! bytes may have, and a name for messages. Two sources live here: [`LocalFile`], positioned
//! reads of a file on disk (never mapped: a file truncated while mounted must give an error,
//! not SIGBUS), and [`Memory`], a buffer (unit tests and fuzzing, with no file per input). A
//! remote source (HTTP ranges, an object store) implements the same trait plus
//! [`RemoteSource`], which the layers above reach through [`ByteSource::remote`]: where every
//! read costs a request, they say what they will read (merged into few requests) and what
//! a reader reads now (followed with readahead), and a refresh asks the bytes' identity
//! afresh.
//!
//! Who a read is for travels with it as a [`ReadCtx`], passed down explicitly from the
//! filesystem layer.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::sync::try_lock;

/// What a data read belongs to, for a source that reads ahead: the dataset (its object
/// header address; 0 when unknown) and, for a dataset stored as one block, that block's
/// absolute byte range. Readahead stays inside the block of the dataset being read until
/// the reader shows that it goes on from one dataset into the next in file order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataHint {
    pub object: u64,
    pub extent: Option<(u64, u64)>,
}

/// Who a read is made for, passed down with it from the layer that knows (the filesystem
/// layer knows which thread asked, and whether a read is a prefetch worker's) to the
/// source, which a remote source uses for readahead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCtx {
    /// The reader: the thread that made the request (for a single-threaded program such as
    /// `cat`, its process); 0 when not known. A remote source follows a reader from one
    /// dataset into the next in file order only when the same reader reads both: two
    /// programs, or two threads of one, that read neighbouring datasets at the same time
    /// are not one reader going through the file.
    pub reader: u32,
    /// Background work on behalf of readers (a prefetch worker decoding the chunks a reader
    /// will ask for next): such reads only bring chunks into the cache, and a remote source
    /// does not take them for a reader's progress through the file.
    pub prefetch: bool,
}

impl ReadCtx {
    /// A prefetch worker's reads.
    pub const PREFETCH: ReadCtx = ReadCtx {
        reader: 0,
        prefetch: true,
    };

    /// The reads of reader `reader` (a thread id; 0: not known).
    pub fn reader(reader: u32) -> ReadCtx {
        ReadCtx {
            reader,
            prefetch: false,
        }
    }
}

/// Where the bytes of a file come from (see the module docs).
pub trait ByteSource: Send + Sync + std::fmt::Debug {
    /// Length in bytes, as taken when the source was opened.
    fn len(&self) -> u64;

    /// True when the source holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Read into `buf` from `offset`; the bytes read, fewer than asked only at the end (0 at or
    /// past it).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize>;

    /// What identifies this state of the bytes (an ETag, or device, inode, size and times).
    fn identity(&self) -> String;

    /// A name for messages (a path or a URL, without credentials).
    fn name(&self) -> String;

    /// What a source where every read costs a request can do besides: `None` for a local
    /// file or memory.
    fn remote(&self) -> Option<&dyn RemoteSource> {
        None
    }
}

/// The capability of a [`ByteSource`] whose every read costs a request (a remote object):
/// the layers above tell it what they will read and what they read now, so that it merges
/// requests and reads ahead; it can ask afresh for the bytes' identity, and counts its
/// requests.
pub trait RemoteSource: Send + Sync {
    /// [`ByteSource::read_at`] for the bytes of a dataset rather than metadata: followed
    /// with readahead and cached apart from metadata. `hint` says which dataset the bytes
    /// belong to (see [`DataHint`]), `ctx` for whom they are read.
    fn read_data_at(
        &self,
        offset: u64,
        buf: &mut [u8],
        hint: &DataHint,
        ctx: ReadCtx,
    ) -> std::io::Result<usize>;

    /// [`RemoteSource::read_data_at`] for bytes the caller keeps in another form (a chunk it
    /// decodes into its chunk cache) and reads no more: the pages wholly inside them need not
    /// stay cached, and a source may let them go at once, so that a stream reuses their
    /// memory rather than fill its cache with bytes nobody reads again.
    fn read_data_once(
        &self,
        offset: u64,
        buf: &mut [u8],
        hint: &DataHint,
        ctx: ReadCtx,
    ) -> std::io::Result<usize> {
        self.read_data_at(offset, buf, hint, ctx)
    }

    /// A note that a reader is reading the data bytes `offset..end` now (as one read, though
    /// they are fetched in pieces, some by helper threads): followed with readahead as
    /// [`RemoteSource::read_data_at`] is.
    fn note_data(&self, offset: u64, end: u64, hint: &DataHint, ctx: ReadCtx);

    /// A hint that the ranges `(offset, length)` will be read soon: they are fetched in the
    /// background, merged into few requests.
    fn prefetch(&self, ranges: &[(u64, u64)]);

    /// Whether the bytes `offset..offset + len` are here now, so that reading them costs no
    /// request (a hint's caller can then read them at once and name what they lead to in
    /// the same hint). A source that cannot tell says no.
    fn cached(&self, _offset: u64, _len: u64) -> bool {
        false
    }

    /// The file's own page size (a file written with paged aggregation keeps its metadata in
    /// pages of this size): metadata is then fetched a whole page at a time.
    fn page_size_hint(&self, bytes: u64);

    /// Learn, in the background of a mount just ready, what the source would otherwise
    /// learn on its readers' first requests, one round trip each: an HTTP source finds out
    /// whether its server answers a GET of several ranges with the parts asked for, which
    /// until then go one at a time. Nothing for an object its first GET holds whole.
    fn warm_up(&self);

    /// The identity the bytes have now, asked afresh (a HEAD).
    fn current_identity(&self) -> std::io::Result<String>;

    /// What this source has asked its server.
    fn requests(&self) -> RequestCounts;
}

/// Where the files of a mount come from when they are not local files: the objects of one
/// server or bucket, named by `/`-separated paths (`/dir/file.h5`), each opened as a byte
/// source. The resolver (`model::resolver`) resolves names against these paths exactly as
/// against a directory tree, and opens through this.
pub trait Opener: Send + Sync + std::fmt::Debug {
    /// The object at `path` (absolute, folded).
    fn open(&self, path: &str) -> std::io::Result<Arc<dyn ByteSource>>;

    /// The URL of `path`, for messages.
    fn url(&self, path: &str) -> String;

    /// What the directory `path` holds, sorted by name (an object store's listing);
    /// `Unsupported` where there is no listing (a plain HTTP server).
    fn list(&self, path: &str) -> std::io::Result<Vec<OriginEntry>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("{}: no listing", self.url(path)),
        ))
    }

    /// What the sources opened through this have asked their server, with what their
    /// listings cost (`None`: nothing is asked of a server).
    fn requests(&self) -> Option<RequestCounts> {
        None
    }

    /// What a listing said of the object at `path`.
    fn listed(&self, path: &str) -> Option<OriginEntry> {
        let _ = path;
        None
    }
}

/// An entry of an [`Opener`]'s listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginEntry {
    pub name: String,
    /// A sub-prefix (directory) rather than an object.
    pub dir: bool,
    pub size: u64,
    /// Last modification, seconds since the epoch (0 for a directory).
    pub modified: i64,
    /// The object's ETag, when the listing gave one.
    pub etag: Option<String>,
}

/// What a remote source has asked its server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    pub heads: u64,
    pub gets: u64,
    /// Bytes received in answers to GETs.
    pub bytes: u64,
    /// Requests that failed for good (after retries).
    pub failures: u64,
    /// GETs refused because the object changed (412).
    pub changed: u64,
    /// Ranges asked for together that were merged into fewer GETs (ranges minus GETs).
    pub merged: u64,
    /// GETs sent ahead of a sequential reader (readahead).
    pub readahead: u64,
    /// The rest is for a whole origin, in [`Opener::requests`] only (0 elsewhere):
    /// LIST requests sent (one per page of 1,000 keys).
    pub lists: u64,
    /// HTTP requests sent, retries included.
    pub sent: u64,
    /// Requests sent again after a 429 or 5xx answer, or no answer.
    pub retries: u64,
    /// Median and 99th-percentile latency of a request until its answer's head, in µs.
    pub p50_us: u64,
    pub p99_us: u64,
}

/// Fill `buf` from `offset` of `src`, or fail: `UnexpectedEof` if the source ends first.
pub fn read_exact_at<S: ByteSource + ?Sized>(
    src: &S,
    offset: u64,
    buf: &mut [u8],
) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        match src.read_at(offset + done as u64, &mut buf[done..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Open `path` for reading if it is a regular file (or a block device). A name that leads to
/// a FIFO, socket or character device is refused before anything reads it: opening a FIFO
/// blocks until a writer appears, which would hang the request (and a mount's worker) that
/// followed a link to it. The open itself does not block (`O_NONBLOCK`, which has no effect
/// on regular files and block devices).
pub fn open_data_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let ft = file.metadata()?.file_type();
    if ft.is_file() || ft.is_block_device() {
        Ok(file)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ))
    }
}

/// A file on disk, read with `pread`.
#[derive(Debug)]
pub struct LocalFile {
    file: File,
    len: u64,
    path: PathBuf,
    identity: String,
    /// The last block read for small reads (see [`LocalFile::read_small`]).
    block: Mutex<Block>,
}

/// Reads of at most this many bytes are metadata (a header prefix, a message, a heap, a
/// B-tree node) and are served from an aligned block ([`BLOCK`]).
const SMALL: usize = 1024;

/// The aligned block a small read brings in: one `pread` for the structures around it,
/// which a parse reads next (a file's object headers, heaps and nodes lie close together;
/// its first parse otherwise costs one system call per field group). One per open file.
const BLOCK: u64 = 16 << 10;

/// Bytes `start..start + bytes.len()` of a [`LocalFile`] (empty: none yet).
#[derive(Debug, Default)]
struct Block {
    start: u64,
    bytes: Vec<u8>,
}

impl LocalFile {
    /// Open `path` (see [`open_data_file`]). The length is taken once; later growth is not
    /// seen.
    pub fn open(path: &Path) -> std::io::Result<LocalFile> {
        let file = open_data_file(path)?;
        let meta = file.metadata()?;
        Ok(LocalFile {
            len: meta.len(),
            identity: format!(
                "{}:{}:{}:{}.{}",
                meta.dev(),
                meta.ino(),
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec()
            ),
            file,
            path: path.to_path_buf(),
            block: Mutex::new(Block::default()),
        })
    }

    /// A read of at most [`SMALL`] bytes at `offset` (below the length) that lies inside one
    /// aligned [`BLOCK`], from the block read last or a new one; `None` (the caller reads
    /// directly) when it spans two blocks or another thread is using the block.
    fn read_small(&self, offset: u64, buf: &mut [u8]) -> Option<std::io::Result<usize>> {
        let start = offset - offset % BLOCK;
        let end = offset.checked_add(buf.len() as u64)?;
        if end > start.checked_add(BLOCK)? {
            return None;
        }
        let mut block = try_lock(&self.block)?;
        if block.bytes.is_empty() || block.start != start {
            // Bounded by BLOCK, so it fits in usize.
            let want = BLOCK.min(self.len - start) as usize;
            block.bytes.resize(want, 0);
            let mut done = 0;
            while done < want {
                match self
                    .file
                    .read_at(&mut block.bytes[done..], start + done as u64)
                {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        block.bytes.clear();
                        return Some(Err(e));
                    }
                }
            }
            // Short only if the file shrank since it was opened: what is there.
            block.bytes.truncate(done);
            block.start = start;
        }
        let from = (offset - start) as usize;
        let n = block.bytes.len().saturating_sub(from).min(buf.len());
        buf[..n].copy_from_slice(&block.bytes[from..from + n]);
        Some(Ok(n))
    }
}

impl ByteSource for LocalFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        // Past the length taken at open: nothing (and no offset the kernel refuses).
        if offset >= self.len {
            return Ok(0);
        }
        if buf.len() <= SMALL {
            if let Some(r) = self.read_small(offset, buf) {
                return r;
            }
        }
        self.file.read_at(buf, offset)
    }

    fn identity(&self) -> String {
        self.identity.clone()
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}

/// A byte source that counts the reads asked of it: how tests and benchmarks see the reads
/// a mechanism saves (merged chunk reads, cached index nodes).
#[derive(Debug)]
pub struct Counting<S> {
    inner: S,
    reads: std::sync::atomic::AtomicUsize,
}

impl<S: ByteSource> Counting<S> {
    pub fn new(inner: S) -> Counting<S> {
        Counting {
            inner,
            reads: Default::default(),
        }
    }

    /// Reads asked so far.
    pub fn reads(&self) -> usize {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl<S: ByteSource> ByteSource for Counting<S> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_at(offset, buf)
    }
    fn identity(&self) -> String {
        self.inner.identity()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

/// Bytes in memory.
#[derive(Clone, Debug)]
pub struct Memory {
    bytes: Arc<[u8]>,
    name: String,
}

impl Memory {
    /// A source over `bytes`, named `name` in messages.
    pub fn new(bytes: impl Into<Arc<[u8]>>, name: &str) -> Memory {
        Memory {
            bytes: bytes.into(),
            name: name.to_string(),
        }
    }
}

impl ByteSource for Memory {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        let avail = self.bytes.get(start..).unwrap_or(&[]);
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        Ok(n)
    }

    fn identity(&self) -> String {
        format!("memory:{}:{:p}", self.bytes.len(), self.bytes.as_ptr())
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_reads_through_the_block_read_what_is_there() {
        // Not a multiple of the block: the last block is short.
        let len = 2 * BLOCK as usize + 777;
        let bytes: Vec<u8> = (0..len as u64)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, &bytes).unwrap();
        let f = LocalFile::open(&p).unwrap();
        let b = BLOCK;
        // Inside one block, across a boundary (read directly), at and past the end, the
        // largest small read, and back to a block read before.
        let reads: [(u64, usize); 10] = [
            (5, 4),
            (b - 3, 8),
            (b + 100, SMALL),
            (100, 16),
            (2 * b + 770, 16),
            (2 * b + 777, 4),
            (b - SMALL as u64, SMALL),
            (0, 1),
            (2 * b, 777),
            (b + 1, SMALL + 1),
        ];
        for (off, n) in reads {
            let mut buf = vec![0u8; n];
            let got = f.read_at(off, &mut buf).unwrap();
            let want = bytes.len().saturating_sub(off as usize).min(n);
            assert_eq!(got, want, "read of {n} at {off}");
            assert_eq!(
                &buf[..got],
                &bytes[off as usize..off as usize + got],
                "{n} at {off}"
            );
        }
    }

    #[test]
    fn memory_and_files_read_alike() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, &bytes).unwrap();
        let sources: [Arc<dyn ByteSource>; 2] = [
            Arc::new(Memory::new(bytes.clone(), "mem")),
            Arc::new(LocalFile::open(&p).unwrap()),
        ];
        for s in sources {
            assert_eq!(s.len(), 5000);
            let mut a = [0u8; 10];
            let mut b = [0u8; 3];
            read_exact_at(&*s, 4990, &mut a).unwrap();
            read_exact_at(&*s, 7, &mut b).unwrap();
            assert_eq!(&a[..], &bytes[4990..]);
            assert_eq!(&b[..], &bytes[7..10]);
            let mut c = [0u8; 4];
            assert_eq!(s.read_at(4998, &mut c).unwrap(), 2, "short at the end");
            assert_eq!(s.read_at(u64::MAX, &mut c).unwrap(), 0);
            let e = read_exact_at(&*s, 4998, &mut c).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
            assert!(!s.identity().is_empty() && !s.name().is_empty());
        }
    }
}
