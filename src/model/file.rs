//! An open HDF5 file: superblock, caches of object headers and parsed objects, and the entry
//! points of the model API.
//!
//! Everything is parsed lazily: opening reads the superblock and the root object header only.
//! Object headers, group link lists and datasets are parsed on first use and kept in bounded
//! caches keyed by object header address.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use lru::LruCache;

use super::links::{Links, LinksCache};
use super::resolver::{self, FileIdx, Resolver};
use super::{AttrResult, Attribute, Dataset, Link, LinkTarget, ObjectId, ObjectKind};
use crate::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::format::messages::datatype::Datatype;
use crate::format::messages::shared::SharedMessage;
use crate::format::messages::{self, types, Message};
use crate::format::object_header::{flags, ObjectHeader, RawMessage};
use crate::format::superblock::Superblock;
use crate::io::{Sizes, Storage, UNDEFINED_ADDR};
use crate::sync::lock;

/// Options for opening a file.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Bytes of decoded chunks to cache.
    pub cache_bytes: u64,
    /// Follow names of other files (external links, virtual-dataset sources, external
    /// storage) that lead outside the root (refused by default: a file from elsewhere must not
    /// make the mount show bytes of arbitrary host files). See [`super::resolver`].
    pub allow_outside_paths: bool,
    /// Most files open at once, this one and the ones it leads to.
    pub max_open_files: usize,
    /// The directory other files must stay inside; default: this file's directory.
    pub root: Option<PathBuf>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            cache_bytes: 256 << 20,
            allow_outside_paths: false,
            max_open_files: resolver::DEFAULT_MAX_OPEN_FILES,
            root: None,
        }
    }
}

/// How a file reaches the resolver of the other files it names.
enum Back {
    /// Opened on its own ([`File::open`]): it owns its resolver, which holds it weakly.
    Owner(Arc<Resolver>),
    /// Opened by a resolver, which owns it.
    Member(Weak<Resolver>),
}

/// Object headers kept parsed (each is small: its messages' bytes).
const HEADER_CACHE_ENTRIES: usize = 4096;
/// Datasets kept open.
const DATASET_CACHE_ENTRIES: usize = 4096;
/// Soft links followed while resolving one path (as the kernel's ELOOP limit).
const MAX_SOFT_LINK_HOPS: usize = 40;
/// Bytes of an object header hinted for prefetch when its group is listed: its first chunk
/// and then some (the source rounds up to whole pages anyway).
const HEADER_HINT: u64 = 4096;
/// Background listings of child groups running at once (see [`File::prefetch_groups`]).
pub const MAX_CRAWLS: usize = 4;
/// Child groups one background listing covers (each on its own thread).
pub const CRAWL_GROUPS: usize = 16;
/// External links followed while resolving one path (libhdf5's default limit on link
/// traversals is 16).
pub const MAX_EXTERNAL_HOPS: usize = 16;

/// An open HDF5 file. Shared between threads behind an `Arc`.
pub struct File {
    pub(super) storage: Storage,
    pub(super) superblock: Superblock,
    root: ObjectId,
    path: PathBuf,
    /// This file's index in its resolver.
    idx: FileIdx,
    back: Back,
    pub(super) chunk_cache: Arc<ChunkCache>,
    /// This file's id in the chunk cache ([`ChunkCache::new_file_id`]): files sharing one
    /// cache never meet.
    cache_file: u64,
    headers: Mutex<LruCache<u64, Arc<ObjectHeader>>>,
    links: Mutex<LinksCache>,
    datasets: Mutex<LruCache<u64, Arc<Dataset>>>,
    /// Shared-message heaps by message type, found through the superblock extension.
    sohm: Mutex<Option<Arc<HashMap<u16, u64>>>>,
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("path", &self.path)
            .field("root", &self.root)
            .finish()
    }
}

fn cap(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

impl File {
    /// Open and parse the superblock and root object header. Other files it names are found
    /// by a resolver of its own, rooted at `options.root` (default: this file's directory).
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Arc<File>> {
        let resolver = Resolver::new(resolver::standalone(path, options));
        let idx = resolver.register_path(&resolver::absolute(path))?;
        let cache = resolver.chunk_cache().clone();
        let cache_file = cache.new_file_id();
        let file = File::open_with(path, Back::Owner(resolver.clone()), idx, cache, cache_file)?;
        resolver.adopt(idx, &file);
        Ok(file)
    }

    /// Open a file whose bytes come from `source` (memory, in tests and fuzzing). It follows
    /// no name of another file: external links, VDS sources in other files and external
    /// storage are refused (unsupported).
    pub fn from_source(
        source: Arc<dyn crate::io::ByteSource>,
        options: &OpenOptions,
    ) -> Result<Arc<File>> {
        let resolver = Resolver::isolated(options.cache_bytes);
        let name = source.name();
        let idx = resolver.register_source(&name);
        File::open_owned(source, Path::new(&name), resolver, idx)
    }

    /// Open `source` (found at `path`) as file `idx` of `resolver`, owning the resolver:
    /// the resolver hands this file out while the caller keeps it.
    fn open_owned(
        source: Arc<dyn crate::io::ByteSource>,
        path: &Path,
        resolver: Arc<Resolver>,
        idx: FileIdx,
    ) -> Result<Arc<File>> {
        let cache = resolver.chunk_cache().clone();
        let cache_file = cache.new_file_id();
        let file = File::open_storage(
            Storage::from_source(source),
            path,
            Back::Owner(resolver.clone()),
            idx,
            cache,
            cache_file,
        )?;
        resolver.adopt(idx, &file);
        Ok(file)
    }

    /// Open the remote object `url` (`s3://bucket/key`, `https://host/path`): one HEAD and
    /// one GET. Other files it names are objects of the same server or bucket, below its
    /// directory unless `options.allow_outside_paths` (see [`Resolver`]).
    #[cfg(feature = "remote")]
    pub fn open_url(
        url: &str,
        options: &OpenOptions,
        remote: &crate::io::remote::RemoteOptions,
    ) -> Result<Arc<File>> {
        let io = |source: std::io::Error| Error::Open {
            what: "HDF5 file",
            source: std::sync::Arc::new(source),
        };
        let (origin, path) = crate::io::remote::RemoteOrigin::of(url, remote).map_err(io)?;
        File::open_in_origin(&origin, &path, options)
    }

    /// Open the object `path` of `origin`: many files of one bucket or server opened this
    /// way share its client, connections and context (runtime, page cache), where
    /// [`File::open_url`] makes them anew for each.
    #[cfg(feature = "remote")]
    pub fn open_in_origin(
        origin: &Arc<crate::io::remote::RemoteOrigin>,
        path: &str,
        options: &OpenOptions,
    ) -> Result<Arc<File>> {
        use crate::io::Opener;
        let io = |source: std::io::Error| Error::Open {
            what: "HDF5 file",
            source: std::sync::Arc::new(source),
        };
        let resolver = Resolver::new(super::resolver::ResolverOptions {
            root: Path::new(path)
                .parent()
                .unwrap_or(Path::new("/"))
                .to_path_buf(),
            allow_outside_paths: options.allow_outside_paths,
            max_open_files: options.max_open_files,
            cache_bytes: options.cache_bytes,
            origin: Some(origin.clone()),
        });
        let idx = resolver.register_path(Path::new(path))?;
        let source = origin.open(path).map_err(io)?;
        File::open_owned(source, Path::new(&path), resolver, idx)
    }

    /// Open `path` as file `idx` of `resolver`, decoding into `cache` under `cache_file`.
    pub(super) fn open_member(
        path: &Path,
        resolver: Weak<Resolver>,
        idx: FileIdx,
        cache: Arc<ChunkCache>,
        cache_file: u64,
    ) -> Result<Arc<File>> {
        File::open_with(path, Back::Member(resolver), idx, cache, cache_file)
    }

    /// Open `source` (found at `path` of the resolver's origin) as file `idx` of `resolver`.
    pub(super) fn open_source_member(
        source: Arc<dyn crate::io::ByteSource>,
        path: &Path,
        resolver: Weak<Resolver>,
        idx: FileIdx,
        cache: Arc<ChunkCache>,
        cache_file: u64,
    ) -> Result<Arc<File>> {
        File::open_storage(
            Storage::from_source(source),
            path,
            Back::Member(resolver),
            idx,
            cache,
            cache_file,
        )
    }

    fn open_with(
        path: &Path,
        back: Back,
        idx: FileIdx,
        cache: Arc<ChunkCache>,
        cache_file: u64,
    ) -> Result<Arc<File>> {
        let raw = Storage::open(path).map_err(|source| Error::Open {
            what: "HDF5 file",
            source: std::sync::Arc::new(std::io::Error::new(
                source.kind(),
                format!("{}: {source}", path.display()),
            )),
        })?;
        File::open_storage(raw, path, back, idx, cache, cache_file)
    }

    fn open_storage(
        raw: Storage,
        path: &Path,
        back: Back,
        idx: FileIdx,
        cache: Arc<ChunkCache>,
        cache_file: u64,
    ) -> Result<Arc<File>> {
        let (superblock, storage) = Superblock::locate(&raw)?;
        if let Some(page) = superblock.fs_page_size {
            if let Some(r) = raw.source().remote() {
                r.page_size_hint(page);
            }
        }
        let file = File {
            storage,
            root: ObjectId(superblock.root_addr),
            superblock,
            path: path.to_path_buf(),
            idx,
            back,
            cache_file,
            chunk_cache: cache,
            headers: Mutex::new(LruCache::sparse(cap(HEADER_CACHE_ENTRIES))),
            links: Mutex::new(LinksCache::new()),
            datasets: Mutex::new(LruCache::sparse(cap(DATASET_CACHE_ENTRIES))),
            sohm: Mutex::new(None),
        };
        // The root must at least have a readable header.
        file.header(file.root)?;
        Ok(Arc::new(file))
    }

    /// The resolver of the other files this one names (`None` only while a mount is being
    /// torn down).
    pub fn resolver(&self) -> Option<Arc<Resolver>> {
        match &self.back {
            Back::Owner(r) => Some(r.clone()),
            Back::Member(w) => w.upgrade(),
        }
    }

    /// The buffers its chunk decodes reuse: its resolver's (a pool of its own once the
    /// resolver is gone).
    pub fn scratch(&self) -> Arc<crate::filters::ScratchPool> {
        self.resolver()
            .map(|r| r.scratch().clone())
            .unwrap_or_default()
    }

    /// This file's index in its resolver.
    pub fn idx(&self) -> FileIdx {
        self.idx
    }

    /// Whether names of other files may lead outside the root
    /// ([`OpenOptions::allow_outside_paths`]).
    pub fn allow_outside_paths(&self) -> bool {
        self.resolver().is_some_and(|r| r.allow_outside_paths())
    }

    /// Path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The superblock.
    pub fn superblock(&self) -> &Superblock {
        &self.superblock
    }

    /// This file's id in its chunk cache (kept across reopens by its resolver).
    pub fn cache_file(&self) -> u64 {
        self.cache_file
    }

    /// Widths of addresses and lengths.
    pub fn sizes(&self) -> Sizes {
        self.superblock.sizes
    }

    /// The storage (base address applied).
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The chunk cache shared by this file's datasets.
    pub fn chunk_cache(&self) -> &Arc<ChunkCache> {
        &self.chunk_cache
    }

    /// The root group.
    pub fn root(&self) -> ObjectId {
        self.root
    }

    /// The object header of `id` (cached).
    pub fn header(&self, id: ObjectId) -> Result<Arc<ObjectHeader>> {
        if let Some(h) = lock(&self.headers).get(&id.0) {
            return Ok(h.clone());
        }
        if id.0 == UNDEFINED_ADDR {
            return Err(Error::corrupt("object header", id.0, "undefined address"));
        }
        let h = Arc::new(ObjectHeader::read(&self.storage, id.0, self.sizes())?);
        lock(&self.headers).put(id.0, h.clone());
        Ok(h)
    }

    /// Whether the header of `id` is cached.
    fn headers_cached(&self, id: ObjectId) -> bool {
        lock(&self.headers).contains(&id.0)
    }

    /// Decode a raw message, resolving a shared message to its real body first.
    pub fn decode(&self, raw: &RawMessage) -> Result<Message> {
        let sizes = self.sizes();
        if raw.flags & flags::SHARED == 0 {
            return messages::parse(raw.mtype, &raw.data, raw.addr, sizes);
        }
        let shared = SharedMessage::parse(&raw.data, raw.addr, sizes)?;
        self.resolve_shared(raw.mtype, &shared)
    }

    /// The body of a shared message of type `mtype`.
    pub fn resolve_shared(&self, mtype: u16, shared: &SharedMessage) -> Result<Message> {
        let sizes = self.sizes();
        match shared {
            SharedMessage::ObjectHeader(addr) => {
                let h = self.header(ObjectId(*addr))?;
                let raw = h.first(mtype).ok_or_else(|| {
                    Error::corrupt(
                        "shared message",
                        *addr,
                        format!("object header has no message of type {mtype:#x}"),
                    )
                })?;
                if raw.flags & flags::SHARED != 0 {
                    return Err(Error::corrupt(
                        "shared message",
                        *addr,
                        "shared message refers to another shared message",
                    ));
                }
                messages::parse(mtype, &raw.data, raw.addr, sizes)
            }
            SharedMessage::SohmHeap(id) => {
                let heaps = self.sohm_heaps()?;
                let heap_addr = *heaps.get(&mtype).ok_or_else(|| {
                    Error::corrupt(
                        "shared message table",
                        0,
                        format!("no shared-message index holds type {mtype:#x}"),
                    )
                })?;
                let heap = crate::format::fractal_heap::FractalHeap::open(
                    &self.storage,
                    heap_addr,
                    sizes,
                )?;
                let body = heap.get(&self.storage, sizes, id)?;
                messages::parse(mtype, &body, heap_addr, sizes)
            }
        }
    }

    /// Map of message type → fractal heap address of the shared-message indexes.
    fn sohm_heaps(&self) -> Result<Arc<HashMap<u16, u64>>> {
        if let Some(m) = lock(&self.sohm).as_ref() {
            return Ok(m.clone());
        }
        let map = Arc::new(super::sohm::read_sohm_indexes(self)?);
        *lock(&self.sohm) = Some(map.clone());
        Ok(map)
    }

    /// Decoded messages of one type in header `h`.
    pub fn messages(&self, h: &ObjectHeader, mtype: u16) -> Result<Vec<Message>> {
        h.messages_of(mtype).map(|m| self.decode(m)).collect()
    }

    /// What kind of object this is.
    ///
    /// Reads no more of an uncached header than its first chunk when that settles it: a
    /// layout message makes a dataset whatever follows, and a header of one chunk is whole
    /// (and is kept). Listing a group needs every child's kind, not its attributes, which
    /// often fill continuation chunks.
    pub fn kind(&self, id: ObjectId) -> Result<ObjectKind> {
        if let Some(h) = lock(&self.headers).get(&id.0) {
            return Ok(kind_of(h));
        }
        if id.0 == UNDEFINED_ADDR {
            return Err(Error::corrupt("object header", id.0, "undefined address"));
        }
        let (first, unread) = ObjectHeader::read_first_chunk(&self.storage, id.0, self.sizes())?;
        let kind = kind_of(&first);
        if unread.is_empty() {
            lock(&self.headers).put(id.0, Arc::new(first));
            return Ok(kind);
        }
        if kind == ObjectKind::Dataset {
            return Ok(kind);
        }
        Ok(kind_of(&*self.header(id)?))
    }

    /// Links of a group, sorted by name (byte order, h5py's default for untracked groups).
    pub fn links(&self, group: ObjectId) -> Result<Arc<Links>> {
        if let Some(l) = lock(&self.links).get(group.0) {
            return Ok(l);
        }
        let h = self.header(group)?;
        let links = Arc::new(super::group::read_links(self, &h)?);
        lock(&self.links).put(group.0, links.clone());
        Ok(links)
    }

    /// Drop the cached links of `group`: a caller that keeps its own copy of a large group's
    /// (the filesystem's listing) frees the memory.
    pub fn uncache_links(&self, group: ObjectId) {
        lock(&self.links).remove(group.0);
    }

    /// The links of `group` if they are cached: nothing is read.
    pub fn cached_links(&self, group: ObjectId) -> Option<Arc<Links>> {
        lock(&self.links).get(group.0)
    }

    /// Whether the dataset `id` has a virtual layout, without opening it (opening one may
    /// open its source files): from the dataset if open, else from its layout message.
    pub fn is_virtual_dataset(&self, id: ObjectId) -> Result<bool> {
        if let Some(d) = lock(&self.datasets).get(&id.0) {
            return Ok(d.info.layout == super::LayoutKind::Virtual);
        }
        let h = self.header(id)?;
        super::dataset::is_virtual(self, &h)
    }

    /// Hint that the objects `links` lead to are about to be read (a listing goes on to
    /// `stat` every entry): on a remote source, their headers are fetched together, in one
    /// round trip, rather than one request per child as each is parsed.
    /// Only the first `limit` links are looked at.
    pub fn prefetch_headers(&self, links: &Links, limit: usize) {
        self.prefetch_headers_from(links, 0, limit);
    }

    /// [`File::prefetch_headers`] of `limit` links from link `start` on.
    pub fn prefetch_headers_from(&self, links: &Links, start: usize, limit: usize) {
        if !self.storage.wants_hints() {
            return;
        }
        let ids: Vec<ObjectId> = links
            .iter()
            .skip(start)
            .take(limit)
            .filter_map(|l| match l.target {
                LinkTarget::Hard(id) => Some(id),
                _ => None,
            })
            .collect();
        self.prefetch_objects(&ids);
    }

    /// Hint that the objects `ids` are about to be read: on a remote source, their headers
    /// not cached yet are fetched together.
    pub fn prefetch_objects(&self, ids: &[ObjectId]) {
        if !self.storage.wants_hints() {
            return;
        }
        let heads: Vec<(u64, u64)> = ids
            .iter()
            .filter(|id| !self.headers_cached(**id))
            .map(|id| (id.0, HEADER_HINT))
            .collect();
        self.storage.prefetch(&heads);
    }

    /// Where the rest of the header of `id` lies: the continuation chunks (address, length)
    /// announced by those here already or in `fetching` (named in a hint: they are read,
    /// waiting for them), for a hint that names those of many objects together. Empty when
    /// the header is cached, or whole from what was read (it is then kept), or cannot be
    /// read (the reader that needs it reports that). A chunk named here may announce more:
    /// asked again with it in `fetching`, this names those.
    pub fn header_rest(&self, id: ObjectId, fetching: &[(u64, u64)]) -> Vec<(u64, u64)> {
        if self.headers_cached(id) {
            return Vec::new();
        }
        let follow =
            |addr, len| fetching.contains(&(addr, len)) || self.storage.cached(&[(addr, len)]);
        match ObjectHeader::read_following(&self.storage, id.0, self.sizes(), &follow) {
            Ok((header, unread)) if unread.is_empty() => {
                lock(&self.headers).put(id.0, Arc::new(header));
                Vec::new()
            }
            Ok((_, unread)) => unread.iter().map(|c| (c.addr, c.len)).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Where the indexes of object `id` begin beyond its header (a group's link indexes, a
    /// chunked dataset's chunk index; see `pieces`), for a hint that names those of many
    /// objects together once their headers are here; [`File::index_pieces`] names what
    /// they lead to. Empty for a group whose links are cached, and when the header cannot
    /// be read.
    pub fn index_heads(&self, id: ObjectId) -> Vec<super::Piece> {
        self.pieces_of(id, super::pieces::heads)
    }

    /// What the indexes [`File::index_heads`] names lead to (an old-style group's symbol
    /// table nodes and heap data, a chunk index's first level below its header; see
    /// `pieces`), read from them, for a hint that names those of many objects together.
    pub fn index_pieces(&self, id: ObjectId) -> Vec<super::Piece> {
        self.pieces_of(id, super::pieces::pieces)
    }

    /// What `find` names of object `id` from its header: nothing for a group whose links
    /// are cached, or when the header cannot be read.
    fn pieces_of(
        &self,
        id: ObjectId,
        find: fn(&File, &ObjectHeader) -> Vec<super::Piece>,
    ) -> Vec<super::Piece> {
        if lock(&self.links).contains(id.0) {
            return Vec::new();
        }
        match self.header(id) {
            Ok(h) => find(self, &h),
            Err(_) => Vec::new(),
        }
    }

    /// Read the links of `group` and the headers of the first `limit` objects they lead to
    /// (on a remote source, hinted together first), so that listing it later costs few
    /// reads; errors are left to that listing.
    pub fn warm_group(&self, group: ObjectId, limit: usize) {
        let Ok(links) = self.links(group) else {
            return;
        };
        self.prefetch_headers(&links, limit);
        for l in links.iter().take(limit) {
            if let LinkTarget::Hard(id) = l.target {
                let _ = self.kind(id);
            }
        }
    }

    /// On a remote source, list the groups `ids` in the background, several at once (their
    /// links, then their children's headers), so that a walk going on into them finds them
    /// fetched: `find` or `ls -R` then costs about one round trip per level of the tree
    /// rather than a few per group. At most [`MAX_CRAWLS`] such background listings run at a
    /// time among the files of one resolver, of at most [`CRAWL_GROUPS`] groups each;
    /// beyond, nothing is prefetched.
    pub fn prefetch_groups(self: &Arc<Self>, ids: Vec<ObjectId>) {
        if !self.storage.wants_hints() {
            return;
        }
        let ids: Vec<ObjectId> = ids
            .into_iter()
            .filter(|id| !lock(&self.links).contains(id.0))
            .take(CRAWL_GROUPS)
            .collect();
        if ids.is_empty() {
            return;
        }
        // A crawl's slot, given back when the crawl ends (or never starts).
        let Some(slot) = self.resolver().and_then(|r| r.begin_crawl()) else {
            return;
        };
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("h5mount-crawl".into())
            .spawn(move || {
                let _slot = slot;
                std::thread::scope(|s| {
                    for &id in &ids {
                        let me = &me;
                        s.spawn(move || {
                            if let Ok(links) = me.links(id) {
                                me.prefetch_headers(&links, usize::MAX);
                            }
                        });
                    }
                });
            });
    }

    /// Links of a group in creation order, where the group tracks it (h5py's order for
    /// `track_order=True` groups); `None` when some link has no creation order.
    pub fn links_by_creation_order(&self, group: ObjectId) -> Result<Option<Vec<Link>>> {
        let links = self.links(group)?;
        if !links.tracks_order() {
            return Ok(None);
        }
        let mut v = links.to_vec();
        v.sort_by_key(|l| l.creation_order);
        Ok(Some(v))
    }

    /// One link of a group by name. A name longer than [`super::group::MAX_NAME`] bytes is
    /// an error for that name (its group lists none such), not `None`: such a link may exist.
    pub fn lookup(&self, group: ObjectId, name: &str) -> Result<Option<Link>> {
        if let Some(e) = super::group::name_too_long(group.0, name) {
            return Err(e);
        }
        let links = self.links(group)?;
        Ok(links.find(name).map(|l| l.to_link()))
    }

    /// Resolve an absolute path (following hard and soft links) to an object.
    pub fn resolve(&self, path: &str) -> Result<ObjectId> {
        let mut hops = 0;
        self.resolve_from(self.root, path, &mut hops)
    }

    fn resolve_from(&self, start: ObjectId, path: &str, hops: &mut usize) -> Result<ObjectId> {
        let mut stack: Vec<ObjectId> = Vec::new();
        let mut cur = if path.starts_with('/') {
            self.root
        } else {
            start
        };
        for comp in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            if comp == ".." {
                cur = stack.pop().unwrap_or(self.root);
                continue;
            }
            let link = self
                .lookup(cur, comp)?
                .ok_or_else(|| Error::NotFound(path.to_string()))?;
            let next = match link.target {
                LinkTarget::Hard(id) => id,
                LinkTarget::Soft(target) => {
                    *hops += 1;
                    if *hops > MAX_SOFT_LINK_HOPS {
                        return Err(Error::limit(
                            "soft link",
                            0,
                            format!("too many hops at {path}"),
                        ));
                    }
                    self.resolve_from(cur, &target, hops)?
                }
                LinkTarget::External { .. } | LinkTarget::UserDefined(_) => {
                    return Err(Error::unsupported(
                        "link",
                        format!("{comp} in {path} is an external or user-defined link"),
                    ))
                }
            };
            stack.push(cur);
            cur = next;
        }
        Ok(cur)
    }

    /// Resolve an absolute path as [`File::resolve`] does, going on through external links
    /// into the files they name (opened by this file's resolver, under its path policy), as
    /// libhdf5's traversal does: the file and object the path leads to.
    pub fn follow(self: &Arc<File>, path: &str) -> Result<(Arc<File>, ObjectId)> {
        let mut file = self.clone();
        let mut path = path.to_string();
        for _ in 0..=MAX_EXTERNAL_HOPS {
            let err = match file.resolve(&path) {
                Ok(id) => return Ok((file, id)),
                Err(e) => e,
            };
            // The path goes on in another file from the first component that is an external
            // link (a chain when it is the last one).
            let Some((name, next)) = file.external_step(&path) else {
                return Err(err);
            };
            file = file.open_linked(&name)?;
            path = next;
        }
        Err(Error::limit(
            "external link",
            0,
            format!("more than {MAX_EXTERNAL_HOPS} external links in a chain"),
        ))
    }

    /// The object an external link of this file to `name`::`path` leads to.
    pub fn follow_external(
        self: &Arc<File>,
        name: &str,
        path: &str,
    ) -> Result<(Arc<File>, ObjectId)> {
        self.open_linked(name)?.follow(path)
    }

    /// The file an external link of this file names.
    pub(super) fn open_linked(&self, name: &str) -> Result<Arc<File>> {
        let r = self
            .resolver()
            .ok_or_else(|| Error::NotFound(format!("{name}: the mount is closing")))?;
        Ok(r.open_named(&self.dir(), name, "external link")?.1)
    }

    /// Where `path` goes on when it does not resolve in this file because one of its
    /// components is an external link: that link's file, and its path followed by the
    /// components after it.
    pub(super) fn external_step(&self, path: &str) -> Option<(String, String)> {
        let comps: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        let mut parent = self.root;
        for (k, comp) in comps.iter().enumerate() {
            match self.resolve(&format!("/{}", comps[..=k].join("/"))) {
                Ok(id) => parent = id,
                Err(_) => {
                    let LinkTarget::External { file, path } =
                        self.lookup(parent, comp).ok()??.target
                    else {
                        return None;
                    };
                    let rest = comps[k + 1..].join("/");
                    return Some(if rest.is_empty() {
                        (file, path)
                    } else {
                        (file, format!("{}/{rest}", path.trim_end_matches('/')))
                    });
                }
            }
        }
        None
    }

    /// The dataset at `id` (parsed once, then cached).
    pub fn dataset(&self, id: ObjectId) -> Result<Arc<Dataset>> {
        if let Some(d) = lock(&self.datasets).get(&id.0) {
            return Ok(d.clone());
        }
        let h = self.header(id)?;
        let d = Arc::new(super::dataset::open_dataset(self, id, &h)?);
        lock(&self.datasets).put(id.0, d.clone());
        Ok(d)
    }

    /// The type of a committed (named) datatype object.
    pub fn named_datatype(&self, id: ObjectId) -> Result<Datatype> {
        let h = self.header(id)?;
        let raw = h
            .first(types::DATATYPE)
            .ok_or_else(|| Error::corrupt("committed datatype", id.0, "no datatype message"))?;
        match self.decode(raw)? {
            Message::Datatype(t) => Ok(t),
            _ => Err(Error::corrupt("committed datatype", id.0, "not a datatype")),
        }
    }

    /// Attributes of any object, in name order, each resolved on its own: one whose type,
    /// space or value cannot be read is refused alone, beside the others.
    pub fn attribute_results(&self, id: ObjectId) -> Result<Vec<AttrResult>> {
        let h = self.header(id)?;
        let mut attrs = super::attribute::read_attribute_results(self, &h)?;
        fn name(r: &AttrResult) -> &[u8] {
            match r {
                Ok(a) => a.name.as_bytes(),
                Err(r) => r.name.as_bytes(),
            }
        }
        attrs.sort_by(|a, b| name(a).cmp(name(b)));
        Ok(attrs)
    }

    /// Attributes of any object, in name order; the first that cannot be read fails them all
    /// ([`File::attribute_results`] refuses it alone).
    pub fn attributes(&self, id: ObjectId) -> Result<Vec<Attribute>> {
        self.attribute_results(id)?
            .into_iter()
            .map(|r| r.map_err(|r| r.error))
            .collect()
    }

    /// Modification time of the object (seconds since the epoch), if stored.
    pub fn mtime(&self, id: ObjectId) -> Result<Option<u64>> {
        let h = self.header(id)?;
        for raw in &h.messages {
            if raw.mtype == types::MTIME || raw.mtype == types::MTIME_OLD {
                if let Ok(Message::ModificationTime(t)) = self.decode(raw) {
                    return Ok(Some(t.seconds));
                }
            }
        }
        Ok(h.times.map(|t| t.modification as u64).filter(|&t| t != 0))
    }

    /// Hard-link count of the object.
    pub fn refcount(&self, id: ObjectId) -> Result<u32> {
        Ok(self.header(id)?.refcount.max(1))
    }

    /// The comment of an object, if any.
    pub fn comment(&self, id: ObjectId) -> Result<Option<String>> {
        let h = self.header(id)?;
        for m in self.messages(&h, types::COMMENT)? {
            if let Message::Comment(c) = m {
                return Ok(Some(c.0));
            }
        }
        Ok(None)
    }

    /// Directory against which relative external names are resolved (the file's directory).
    pub fn dir(&self) -> PathBuf {
        self.path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// Classify an object header by the messages it holds.
pub fn kind_of(h: &ObjectHeader) -> ObjectKind {
    let has = |t| h.first(t).is_some();
    if has(types::LAYOUT) {
        ObjectKind::Dataset
    } else if has(types::SYMBOL_TABLE)
        || has(types::LINK_INFO)
        || has(types::LINK)
        || has(types::GROUP_INFO)
    {
        ObjectKind::Group
    } else if has(types::DATATYPE) && !has(types::DATASPACE) {
        ObjectKind::NamedDatatype
    } else {
        ObjectKind::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that cannot be opened is named, with the system's reason and no made-up
    /// address or length.
    #[test]
    fn a_file_that_cannot_be_opened_says_so() {
        let e = File::open(Path::new("/etc/passwd/x.h5"), &OpenOptions::default())
            .expect_err("a path through a file");
        let text = e.to_string();
        assert!(matches!(e, Error::Open { .. }), "{e:?}");
        assert!(
            text.starts_with("cannot open file: /etc/passwd/x.h5: "),
            "{text}"
        );
        let e = File::open(Path::new("/nonexistent/x.h5"), &OpenOptions::default())
            .expect_err("no such file");
        assert_eq!(e.to_string(), "not found: file /nonexistent/x.h5");
        assert!(!text.contains("0x0"), "{text}");
    }

    /// A panic while a cache lock of the file is held (poisoning it) does not fail the
    /// file's later requests.
    #[test]
    fn a_poisoned_cache_lock_is_taken_anyway() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mount-tests/fixtures/data/groups_earliest.h5");
        let f = File::open(&path, &OpenOptions::default()).unwrap();
        let before = f.links(f.root()).unwrap().len();
        assert!(before > 0);
        for poison in [0, 1, 2] {
            let g = f.clone();
            let r = std::thread::spawn(move || match poison {
                0 => {
                    let _held = lock(&g.headers);
                    panic!("while holding the header cache");
                }
                1 => {
                    let _held = lock(&g.links);
                    panic!("while holding the link cache");
                }
                _ => {
                    let _held = lock(&g.datasets);
                    panic!("while holding the dataset cache");
                }
            })
            .join();
            assert!(r.is_err());
        }
        assert!(f.headers.is_poisoned() && f.links.is_poisoned() && f.datasets.is_poisoned());
        assert_eq!(f.links(f.root()).unwrap().len(), before);
        let id = f.resolve("/").unwrap();
        assert!(f.header(id).is_ok());
    }
}
