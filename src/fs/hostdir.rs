//! Directory mounts: `h5mount DIR MOUNTPOINT` serves a directory of HDF5 files as one tree.
//!
//! Subdirectories are directories. Each HDF5 file (recognised by the format signature at
//! offset 0, 512, 1024, 2048, ..., where a superblock may start after a user block; never by
//! its name) is a directory of the same name holding the file's tree. Every other regular
//! file is passed through byte for byte, read-only. FIFOs, sockets and devices are left out.
//!
//! Listing is lazy: building a directory's listing reads the directory and, of each regular
//! file, only the eight signature bytes at those offsets; no file is parsed. Attributes of
//! entries (times, sizes) come from `stat` of the host entry. An HDF5 file is parsed at the
//! first lookup or listing inside it, by the mount's resolver (`model::resolver`), which also
//! closes it again under the bound on open files; a file that cannot be parsed fails with
//! `EIO` its own directory only, with one log line naming it.
//!
//! Symlinks in the directory are resolved on the host. One that leads to an entry inside the
//! mounted directory is shown as a symlink to that entry's place in the mount (relative, so it
//! works wherever the mount is); one that leads outside is left out, unless the mount allows
//! outside paths (`allow_external_paths`), when it keeps its own text; a dangling one is left
//! out. Each left-out entry is logged once.
//!
//! Every entry is numbered by its path below the mount root (see `inode`), so an inode stays
//! the same for the life of the mount; the objects inside each file are numbered per file,
//! and external links and virtual-dataset sources between the files reach the same files
//! (one resolver, one index per file) and so the same inodes as browsing does.
//!
//! A prefix of a bucket (`s3://bucket/prefix/`) is served the same way through the
//! resolver's origin: sub-prefixes are directories and objects are listed with
//! ListObjectsV2 (one request per 1,000 keys, each directory listed once for the life of
//! the mount); objects named like HDF5 files ([`HDF5_EXTENSIONS`]) are the directories of
//! their trees, opened at first use without a HEAD (the listing gave their size and ETag);
//! one that is not HDF5 after all fails its own directory with `EIO`. Other objects pass
//! through. Sizes and times come from the listing.
//!
//! With `--refresh`, each directory whose listing was built, and each file whose attributes
//! were asked, is checked every period: entries added or removed appear and disappear, and a
//! changed HDF5 file is closed and read afresh at its next use ([`H5Fs::refresh_dir`]).

use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::attr::{Attr, FileKind};
use super::dir::{self, DirEntry, Listing, Origin};
use super::refresh::Stamp;
use super::{FsError, FsResult, H5Fs, Mounted, Node, NodeKind};
use crate::model::FileIdx;
use crate::sync::lock;

/// Names of objects a prefix mount serves as HDF5 files (reading each object's signature
/// would cost a request per object).
pub const HDF5_EXTENSIONS: [&str; 6] = [".h5", ".hdf5", ".he5", ".nc", ".nc4", ".nxs"];

/// Whether `name` ends in one of [`HDF5_EXTENSIONS`] (any case).
pub fn has_hdf5_extension(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    HDF5_EXTENSIONS
        .iter()
        .any(|e| lower.ends_with(e) && lower.len() > e.len())
}

/// The HDF5 format signature.
pub const SIGNATURE: [u8; 8] = *b"\x89HDF\r\n\x1a\n";

/// Whether the open file `f` of `len` bytes holds an HDF5 superblock: its signature at
/// offset 0 or at a power of two from 512 on, as the format places it after a user block.
pub fn is_hdf5(f: &std::fs::File, len: u64) -> std::io::Result<bool> {
    let mut at = 0u64;
    let mut buf = [0u8; 8];
    while at.saturating_add(8) <= len {
        let mut done = 0;
        while done < buf.len() {
            match f.read_at(&mut buf[done..], at + done as u64) {
                Ok(0) => return Ok(false),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if buf == SIGNATURE {
            return Ok(true);
        }
        at = if at == 0 { 512 } else { at.saturating_mul(2) };
    }
    Ok(false)
}

/// Whether the file at `path` is HDF5 (see [`is_hdf5`]); a file that cannot be opened or
/// read is not.
pub fn path_is_hdf5(path: &Path) -> bool {
    let Ok(f) = crate::io::storage::open_data_file(path) else {
        return false;
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    is_hdf5(&f, len).unwrap_or(false)
}

/// The text of a symlink in the directory `from` (below the mount root) to the entry `to`
/// (below the mount root): relative, climbing only to the mount root.
fn relative_text(from: &Path, to: &Path) -> String {
    let mut parts: Vec<String> = from.components().map(|_| "..".to_string()).collect();
    parts.extend(
        to.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

impl H5Fs {
    /// The mounted directory (absolute), for a directory mount.
    fn host_root(&self) -> Option<&Path> {
        match &self.mounted {
            Mounted::Dir { root } => Some(root),
            Mounted::File { .. } => None,
        }
    }

    /// The host path of the entry `rel` below the mount root.
    pub(super) fn host_abs(&self, rel: &Path) -> PathBuf {
        self.host_root()
            .map_or_else(|| rel.to_path_buf(), |r| r.join(rel))
    }

    /// Remember the state of the host entry of `node` that is being served (what a refresh
    /// compares against), unless one is remembered already: a later `stat` may see a change
    /// the refresh has not acted on yet, which must not hide it.
    fn remember_stamp(&self, node: &Node, meta: &std::fs::Metadata) {
        if self.opts.refresh.is_some() {
            lock(&self.host_stamps)
                .entry(node.ino)
                .or_insert_with(|| Stamp::of_meta(meta));
        }
    }

    /// Attributes of an entry of the mounted directory, from `stat` of the host entry (no
    /// file is parsed).
    pub(super) fn host_attr(&self, node: &Node) -> FsResult<Attr> {
        let rel = node.host_path().ok_or(FsError::Errno(libc::EINVAL))?;
        if let Some(origin) = self.resolver.origin() {
            // A prefix of a bucket: what its listing said.
            let (kind, size, mtime) = match node.kind {
                NodeKind::HostDir { .. } => (FileKind::Directory, 0, self.opts.file_mtime),
                _ => {
                    let e = origin
                        .listed(&self.host_abs(rel).to_string_lossy())
                        .ok_or(FsError::Errno(libc::ENOENT))?;
                    let t = SystemTime::UNIX_EPOCH
                        + std::time::Duration::from_secs(e.modified.max(0) as u64);
                    match node.kind {
                        NodeKind::HostFile { .. } => (FileKind::RegularFile, e.size, t),
                        _ => (FileKind::Directory, 0, t),
                    }
                }
            };
            return Ok(Attr::new(
                node.ino,
                kind,
                size,
                (self.opts.uid, self.opts.gid),
                mtime,
            ));
        }
        let meta = std::fs::metadata(self.host_abs(rel)).map_err(|e| {
            FsError::Errno(match e.kind() {
                std::io::ErrorKind::NotFound => libc::ENOENT,
                _ => libc::EIO,
            })
        })?;
        let (kind, size) = match node.kind {
            NodeKind::HostFile { .. } => (FileKind::RegularFile, meta.len()),
            _ => (FileKind::Directory, 0),
        };
        if !matches!(node.kind, NodeKind::HostDir { .. }) {
            self.remember_stamp(node, &meta);
        }
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        Ok(Attr::new(
            node.ino,
            kind,
            size,
            (self.opts.uid, self.opts.gid),
            mtime,
        ))
    }

    /// Log once that the entry at `path` of the mount is left out, and why.
    fn leave_out(&self, path: &str, why: impl FnOnce() -> String) {
        self.log_once(path, || format!("{path}: left out of the mount: {}", why()));
    }

    /// The listing of the host directory `rel` (node `node`).
    pub(super) fn host_listing(&self, node: &Node, rel: &Path) -> FsResult<Listing> {
        if self.resolver.origin().is_some() {
            return self.origin_listing(node, rel);
        }
        let abs = self.host_abs(rel);
        let meta = std::fs::metadata(&abs).map_err(|_| FsError::Errno(libc::ENOENT))?;
        let read = std::fs::read_dir(&abs).map_err(|e| {
            self.log_once(&node.path, || format!("readdir {}: {e}", abs.display()));
            FsError::Errno(libc::EIO)
        })?;
        self.remember_stamp(node, &meta);
        let mut entries = dir::dots(node.ino, node.parent);
        let mut found: Vec<(String, std::fs::FileType)> = Vec::new();
        for e in read.flatten() {
            let child_path = super::inode::join_path(&node.path, &e.file_name().to_string_lossy());
            let Some(name) = e.file_name().to_str().map(String::from) else {
                self.leave_out(&child_path, || "name is not UTF-8".into());
                continue;
            };
            if let Some(why) = dir::bad_name(&name) {
                self.leave_out(&child_path, || why.into());
                continue;
            }
            match e.file_type() {
                Ok(t) => found.push((name, t)),
                Err(err) => self.leave_out(&child_path, || err.to_string()),
            }
        }
        found.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut origins = Vec::new();
        for (name, ft) in found {
            let child_rel = rel.join(&name);
            let child_path = super::inode::join_path(&node.path, &name);
            let entry = if ft.is_symlink() {
                self.host_symlink(node, &name, &child_rel, &child_path)
            } else {
                self.host_entry(node, &name, child_rel, ft, &child_path)
            };
            if let Some((e, origin)) = entry {
                // Fewer entries than 2^32 in one directory.
                origins.push((entries.len() as u32, origin));
                entries.push(e);
            }
        }
        Ok(Listing::with_origins(entries, origins))
    }

    /// The listing of the directory `rel` of a mounted prefix of a bucket: sub-prefixes are
    /// directories, objects whose names end in an HDF5 extension ([`HDF5_EXTENSIONS`]) are
    /// the directories of their trees (opened at first use), other objects pass through.
    fn origin_listing(&self, node: &Node, rel: &Path) -> FsResult<Listing> {
        let origin = self.resolver.origin().ok_or(FsError::Errno(libc::EIO))?;
        let abs = self.host_abs(rel);
        let listed = origin.list(&abs.to_string_lossy()).map_err(|e| {
            self.log_once(&node.path, || {
                format!("list {}: {e}", origin.url(&abs.to_string_lossy()))
            });
            FsError::Errno(libc::EIO)
        })?;
        let mut entries = dir::dots(node.ino, node.parent);
        let mut origins = Vec::new();
        for e in listed {
            let child_path = super::inode::join_path(&node.path, &e.name);
            if let Some(why) = dir::bad_name(&e.name) {
                self.leave_out(&child_path, || why.into());
                continue;
            }
            let child_rel = rel.join(&e.name);
            let (kind, file) = if e.dir {
                (NodeKind::HostDir { rel: child_rel }, FileIdx::MAX)
            } else if has_hdf5_extension(&e.name) {
                match self.resolver.register_path(&self.host_abs(&child_rel)) {
                    Ok(idx) => (NodeKind::FileRoot { rel: child_rel }, idx),
                    Err(err) => {
                        self.leave_out(&child_path, || err.to_string());
                        continue;
                    }
                }
            } else {
                (NodeKind::HostFile { rel: child_rel }, FileIdx::MAX)
            };
            let (entry, origin) = self.host_child(node, &e.name, kind, file);
            // Fewer entries than 2^32 in one listing.
            origins.push((entries.len() as u32, origin));
            entries.push(entry);
        }
        Ok(Listing::with_origins(entries, origins))
    }

    /// The entry for the file or directory `name` of `parent`.
    fn host_entry(
        &self,
        parent: &Node,
        name: &str,
        rel: PathBuf,
        ft: std::fs::FileType,
        path: &str,
    ) -> Option<(DirEntry, Origin)> {
        let (kind, file): (NodeKind, FileIdx) = if ft.is_dir() {
            (NodeKind::HostDir { rel }, FileIdx::MAX)
        } else if ft.is_file() {
            let abs = self.host_abs(&rel);
            if path_is_hdf5(&abs) {
                match self.resolver.register_path(&abs) {
                    Ok(idx) => (NodeKind::FileRoot { rel }, idx),
                    Err(e) => {
                        self.leave_out(path, || e.to_string());
                        return None;
                    }
                }
            } else {
                (NodeKind::HostFile { rel }, FileIdx::MAX)
            }
        } else {
            let what = if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else {
                "a device"
            };
            self.leave_out(path, || format!("{what} is not served"));
            return None;
        };
        Some(self.host_child(parent, name, kind, file))
    }

    /// The entry `name` of `parent`, a host directory, file or HDF5 file root (of `file`),
    /// and where it comes from (what makes its node when it is handed out).
    fn host_child(
        &self,
        parent: &Node,
        name: &str,
        kind: NodeKind,
        file: FileIdx,
    ) -> (DirEntry, Origin) {
        let shown = match kind {
            NodeKind::HostFile { .. } => FileKind::RegularFile,
            _ => FileKind::Directory,
        };
        let child = self.inodes.host(parent, name, kind.clone(), file);
        let entry = DirEntry {
            ino: child.ino,
            kind: shown,
            name: name.into(),
        };
        (entry, Origin::Host(kind, file))
    }

    /// The entry for the symlink `name` of `parent` (see the module docs).
    fn host_symlink(
        &self,
        parent: &Node,
        name: &str,
        rel: &Path,
        path: &str,
    ) -> Option<(DirEntry, Origin)> {
        let abs = self.host_abs(rel);
        let canon_root = self.resolver.canonical_root();
        let text = match std::fs::canonicalize(&abs) {
            Err(e) => {
                self.leave_out(path, || format!("symlink leads nowhere: {e}"));
                return None;
            }
            Ok(target) => match target.strip_prefix(canon_root) {
                Ok(inside) => relative_text(rel.parent().unwrap_or(Path::new("")), inside),
                Err(_) if self.resolver.allow_outside_paths() => std::fs::read_link(&abs)
                    .ok()?
                    .to_string_lossy()
                    .into_owned(),
                Err(_) => {
                    self.leave_out(path, || {
                        format!(
                            "symlink leads outside the mounted directory, to {} \
                             (mount option allow_external_paths shows it)",
                            target.display()
                        )
                    });
                    return None;
                }
            },
        };
        let node = self.inodes.symlink(parent, name, text.clone());
        let entry = DirEntry {
            ino: node.ino,
            kind: FileKind::Symlink,
            name: name.into(),
        };
        Some((entry, Origin::HostSymlink(text)))
    }

    /// Read `size` bytes at `offset` of the passed-through file `rel` into `out` (short at
    /// its end).
    pub(super) fn host_read(
        &self,
        node: &Node,
        rel: &Path,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> FsResult<()> {
        let f: Arc<dyn crate::io::ByteSource> =
            crate::layout::external::RawOpener::open_raw(&*self.resolver, &self.host_abs(rel))
                .map_err(|e| FsError::model(&node.path, e))?;
        out.clear();
        out.resize(size as usize, 0);
        let mut done = 0usize;
        while done < out.len() {
            match f.read_at(offset.saturating_add(done as u64), &mut out[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let err = crate::error::Error::Io {
                        what: "file",
                        addr: offset,
                        len: u64::from(size),
                        source: std::sync::Arc::new(e),
                    };
                    return Err(FsError::model(&node.path, err));
                }
            }
        }
        out.truncate(done);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FsOptions, ROOT_INO};
    use crate::model::{File, LinkTarget, OpenOptions, Resolver, ResolverOptions};
    use std::ffi::OsStr;

    const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

    fn mount_dir(root: &Path, allow: bool, max_open: usize) -> H5Fs {
        let resolver = Resolver::new(ResolverOptions {
            root: root.to_path_buf(),
            allow_outside_paths: allow,
            max_open_files: max_open,
            cache_bytes: 8 << 20,
            origin: None,
        });
        let opts = FsOptions {
            uid: 0,
            gid: 0,
            file_mtime: SystemTime::UNIX_EPOCH,
            file_size: 0,
            views: Default::default(),
            refresh: None,
            zarr: None,
        };
        H5Fs::for_directory(resolver, opts)
    }

    fn walk(fs: &H5Fs, path: &str) -> crate::fs::FsResult<Attr> {
        let mut attr = fs.getattr(ROOT_INO)?;
        for name in path.split('/').filter(|c| !c.is_empty()) {
            attr = fs.lookup(attr.ino, OsStr::new(name))?;
        }
        Ok(attr)
    }

    fn names(fs: &H5Fs, ino: u64) -> Vec<(String, FileKind)> {
        let l = fs.listing(ino).unwrap();
        l.entries
            .iter()
            .skip(2)
            .map(|e| (e.name.to_string(), e.kind))
            .collect()
    }

    /// A directory like a user's run directory: HDF5 files under several names, one corrupt,
    /// one with an HDF5 name that is not HDF5, a text file, symlinks in and out, a FIFO.
    fn run_dir(top: &Path) -> PathBuf {
        let root = top.join("run");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        let sample = Path::new(MANIFEST).join("examples/sample.h5");
        std::fs::copy(&sample, root.join("sample.h5")).unwrap();
        std::fs::copy(&sample, root.join("sub/noext")).unwrap();
        let mut user_block = vec![0u8; 512];
        user_block.extend(b"not the superblock, only bytes before it");
        std::fs::write(root.join("sub/deeper/ub.nxs"), &user_block).unwrap();
        // A real file cut short: its signature and superblock, not its root group.
        let whole = std::fs::read(&sample).unwrap();
        std::fs::write(root.join("corrupt.h5"), &whole[..200]).unwrap();
        std::fs::write(root.join("fake.h5"), b"just text").unwrap();
        std::fs::write(root.join("notes.txt"), b"beamtime notes\n").unwrap();
        std::fs::write(top.join("secret.txt"), b"secret").unwrap();
        std::os::unix::fs::symlink(top.join("secret.txt"), root.join("out_link")).unwrap();
        std::os::unix::fs::symlink("../sample.h5", root.join("sub/alias.h5")).unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status();
        assert!(made.unwrap().success());
        root
    }

    #[test]
    fn a_directory_is_one_tree_and_listing_parses_nothing() {
        let top = tempfile::tempdir().unwrap();
        let root = run_dir(top.path());
        let fs = mount_dir(&root, false, 4);
        use FileKind::*;
        assert_eq!(
            names(&fs, ROOT_INO),
            vec![
                ("corrupt.h5".to_string(), Directory),
                ("fake.h5".to_string(), RegularFile),
                ("notes.txt".to_string(), RegularFile),
                ("sample.h5".to_string(), Directory),
                ("sub".to_string(), Directory),
            ],
            "FIFO, dangling and outside symlinks left out"
        );
        let sub = walk(&fs, "sub").unwrap();
        assert_eq!(
            names(&fs, sub.ino),
            vec![
                ("alias.h5".to_string(), Symlink),
                ("deeper".to_string(), Directory),
                ("noext".to_string(), Directory),
            ]
        );
        assert_eq!(
            fs.readlink(walk(&fs, "sub/alias.h5").unwrap().ino).unwrap(),
            b"../sample.h5"
        );
        // Listing and stat of every entry opened no HDF5 file.
        for p in ["sample.h5", "corrupt.h5", "sub/noext"] {
            assert_eq!(walk(&fs, p).unwrap().kind, Directory);
        }
        assert_eq!(fs.resolver().stats().opens, 0, "no file parsed by listing");
        // The same tree as a mount of the file itself, with the same bytes.
        let single = File::open(&root.join("sample.h5"), &OpenOptions::default()).unwrap();
        let ds = single.resolve("/detector/frames").unwrap();
        let want = crate::io::read_fully(single.dataset(ds).unwrap().len(), "test", |o, b| {
            single.dataset(ds).unwrap().read_at(o, b)
        })
        .unwrap();
        for p in ["sample.h5/detector/frames", "sub/noext/detector/frames"] {
            let a = walk(&fs, p).unwrap();
            assert_eq!(a.size, want.len() as u64, "{p}");
            let mut got = Vec::new();
            let mut off = 0u64;
            while off < a.size {
                let chunk = fs.read(a.ino, off, 1 << 16).unwrap();
                assert!(!chunk.is_empty());
                off += chunk.len() as u64;
                got.extend(chunk);
            }
            assert!(got == want, "{p}");
        }
        assert_ne!(
            walk(&fs, "sample.h5/detector/frames").unwrap().ino,
            walk(&fs, "sub/noext/detector/frames").unwrap().ino,
            "two files, two inodes"
        );
        // The file with a user block is found by its signature at 512, and being only a
        // signature-less stub, fails alone.
        assert_eq!(
            walk(&fs, "sub/deeper/ub.nxs").unwrap().kind,
            RegularFile,
            "no signature at a power of two: passed through"
        );
        // Other files pass through byte for byte.
        let notes = walk(&fs, "notes.txt").unwrap();
        assert_eq!(notes.size, 15);
        assert_eq!(fs.read(notes.ino, 0, 100).unwrap(), b"beamtime notes\n");
        assert_eq!(fs.read(notes.ino, 9, 3).unwrap(), b"not");
        assert_eq!(
            fs.read(walk(&fs, "fake.h5").unwrap().ino, 0, 100).unwrap(),
            b"just text"
        );
        // A file that cannot be parsed fails its own directory only.
        let bad = walk(&fs, "corrupt.h5").unwrap();
        assert_eq!(fs.listing(bad.ino).unwrap_err().errno(), libc::EIO);
        assert_eq!(
            fs.lookup(bad.ino, OsStr::new("x")).unwrap_err().errno(),
            libc::EIO
        );
        assert!(walk(&fs, "sample.h5/detector").is_ok());
        // Read-only, and nothing outside.
        assert_eq!(
            fs.open(notes.ino, libc::O_WRONLY).unwrap_err().errno(),
            libc::EROFS
        );
        assert_eq!(walk(&fs, "out_link").unwrap_err().errno(), libc::ENOENT);
        assert_eq!(walk(&fs, "pipe").unwrap_err().errno(), libc::ENOENT);
        // Inode numbers are stable: asking again gives the same ones.
        assert_eq!(walk(&fs, "notes.txt").unwrap().ino, notes.ino);
        assert_eq!(walk(&fs, "corrupt.h5").unwrap().ino, bad.ino);
    }

    #[test]
    fn outside_symlinks_are_shown_only_when_allowed() {
        let top = tempfile::tempdir().unwrap();
        let root = run_dir(top.path());
        let fs = mount_dir(&root, true, 4);
        let out = walk(&fs, "out_link").unwrap();
        assert_eq!(out.kind, FileKind::Symlink);
        assert_eq!(
            fs.readlink(out.ino).unwrap(),
            top.path().join("secret.txt").as_os_str().as_encoded_bytes()
        );
    }

    #[test]
    fn external_links_between_files_reach_the_objects_browsing_reaches() {
        let top = tempfile::tempdir().unwrap();
        let src = Path::new(MANIFEST).join("mount-tests/fixtures/extlinks");
        let root = top.path().join("d");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        for form in ["earliest", "latest"] {
            let main = format!("main_{form}.h5");
            std::fs::copy(src.join(&main), root.join(&main)).unwrap();
            for n in [format!("a_{form}.h5"), format!("b_{form}.h5")] {
                std::fs::copy(src.join("sub").join(&n), root.join("sub").join(&n)).unwrap();
            }
        }
        // Two open files at most: following links and browsing close and reopen files.
        let fs = mount_dir(&root, false, 2);
        let mut checked = 0;
        for form in ["earliest", "latest"] {
            let main = format!("main_{form}.h5");
            let f = File::open(&root.join(&main), &OpenOptions::default()).unwrap();
            for link in f.links(f.root()).unwrap().iter() {
                let LinkTarget::External { file, path } = &link.target else {
                    continue;
                };
                let Ok((target, id)) = f.follow_external(file, path) else {
                    continue;
                };
                if target.kind(id).ok() != Some(crate::model::ObjectKind::Dataset) {
                    continue;
                }
                let via_link = walk(&fs, &format!("{main}/{}", link.name)).unwrap();
                let rel = target.path().strip_prefix(&root).unwrap().to_owned();
                // Where browsing finds the same object: its file's directory, then its path
                // (the link's path, resolved through the target file's own links).
                let mut browse_path = rel.to_string_lossy().into_owned();
                for (name, obj) in object_paths(&target) {
                    if obj == id {
                        browse_path = format!("{browse_path}{name}");
                        break;
                    }
                }
                let browsed = walk(&fs, &browse_path).unwrap();
                assert_eq!(
                    via_link.ino, browsed.ino,
                    "{main}/{} vs {browse_path}",
                    link.name
                );
                assert_eq!(via_link.size, browsed.size);
                checked += 1;
            }
        }
        assert!(checked >= 4, "{checked} dataset links checked");
        let s = fs.resolver().stats();
        assert!(s.open <= 2, "{s:?}");
        assert!(s.evictions > 0, "{s:?}");
    }

    /// Every object path of `f` reachable by hard links, with its object.
    fn object_paths(f: &File) -> Vec<(String, crate::model::ObjectId)> {
        let mut out = Vec::new();
        let mut todo = vec![(String::new(), f.root())];
        while let Some((path, id)) = todo.pop() {
            let Ok(links) = f.links(id) else { continue };
            for l in links.iter() {
                if let LinkTarget::Hard(c) = l.target {
                    let p = format!("{path}/{}", l.name);
                    if out.len() < 1000 {
                        out.push((p.clone(), c));
                        todo.push((p, c));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn signatures_after_user_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let check = |name: &str, at: usize, len: usize| {
            let mut b = vec![7u8; len];
            if at + 8 <= len {
                b[at..at + 8].copy_from_slice(&SIGNATURE);
            }
            let p = dir.path().join(name);
            std::fs::write(&p, &b).unwrap();
            path_is_hdf5(&p)
        };
        assert!(check("a", 0, 100));
        assert!(check("b", 512, 1000));
        assert!(check("c", 4096, 5000));
        assert!(!check("d", 700, 1000), "not at a power of two");
        assert!(!check("e", 0, 4), "too short");
        assert!(!path_is_hdf5(&dir.path().join("missing")));
    }

    #[test]
    fn symlink_texts_stay_inside() {
        assert_eq!(
            relative_text(Path::new("a/b"), Path::new("c/d.h5")),
            "../../c/d.h5"
        );
        assert_eq!(relative_text(Path::new(""), Path::new("x")), "x");
        assert_eq!(relative_text(Path::new("a"), Path::new("")), "..");
        assert_eq!(relative_text(Path::new(""), Path::new("")), ".");
    }
}
