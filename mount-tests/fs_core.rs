//! Kernel-free tests of the filesystem core, [`h5mount::fs::H5Fs`].
//!
//! `H5Fs` implements every filesystem operation as a plain method on inode numbers (lookup,
//! getattr, listing, open, read, readlink, xattrs, access, statfs, refresh) returning small
//! structs or an `FsError` whose `errno()` is what the kernel would be answered; the FUSE
//! adapter (`src/fs/fuse.rs`) only translates requests and replies. So everything the kernel
//! would see can be checked by calling the core directly, built as the daemon builds it
//! (`H5Fs::new` around a `model::File`, `H5Fs::for_directory` around a `Resolver`), with no
//! `/dev/fuse`, no mount and no daemon process: these tests run anywhere, in parallel, in a
//! few seconds. What needs the kernel (page cache, mmap, the daemon's signals and
//! notifications, permission checks done by the VFS) stays in the real-mount tests.
//!
//! Expected values come from the fixture corpus: `fixtures/manifest.json` (what h5py saw in
//! each `fixtures/data` file: kinds, links, dtypes, shapes, byte counts, digests, attributes)
//! and the `huge/` and `hostile/` fixtures. Inode numbers of the mounted file's objects are
//! `address + 2` (the root group is inode 1), so the manifest's `addr` predicts them.
//!
//! Covered: lookup (groups, datasets, committed types, soft/external/hard links, `.`/`..`,
//! ENOENT/ENOTDIR, names the kernel cannot take); getattr (kinds, modes, sizes, nlink,
//! owner, times, the size cap); listings against the manifest's links; open flags (EROFS,
//! EISDIR); reads against the manifest's digests, at offsets and past the end, through
//! handles; xattrs (names, the size protocol, ERANGE/ENODATA, values, the statistics text);
//! access and statfs; the `.npy`/`.hdr` sidecars, and that a sidecar never shadows a real
//! link; directory mounts (HDF5 files as directories, other files passed through, no file
//! opened by listing); refresh of a replaced file, for a file and a directory mount, driven
//! by calling the refresh entry points directly (no waiting for a period).

mod harness;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use h5mount::fs::attr::MAX_SIZE;
use h5mount::fs::dir::REFUSED_PREFIX;
use h5mount::fs::inode::{EXTERNAL_BASE, LINK_BASE};
use h5mount::fs::refresh::{Invalidation, Outcome, Stamp, Watcher};
use h5mount::fs::stats::{max_text_len, KEYS, STATS_XATTR};
use h5mount::fs::views::sidecar_ino;
use h5mount::fs::{Attr, FileKind, FsOptions, FsResult, H5Fs, XattrReply, ROOT_INO};
use h5mount::model::{File, OpenOptions, Resolver, ResolverOptions};
use h5mount::views::{ByteOrderMode, ViewKind, ViewOptions};
use harness::{fixture, manifest, py_tuple, sha256, soft_text};
use serde_json::{Map, Value};

// ------------------------------------------------------------------------------- helpers

/// Owner given to every inode (not the test user's, so a mix-up shows).
const UID: u32 = 4321;
const GID: u32 = 8765;

fn data(name: &str) -> PathBuf {
    fixture("data").join(name)
}

/// The time shown for objects without a stored modification time (the corpus stores none).
fn file_mtime() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_234_567_890)
}

/// The manifest's objects of the corpus file `file`, by HDF5 path.
fn objects(file: &str) -> &'static Map<String, Value> {
    manifest()["files"][file]["objects"]
        .as_object()
        .unwrap_or_else(|| panic!("{file} is not in the manifest"))
}

fn view_options(npy: bool, envi: bool) -> ViewOptions {
    // Text for variable-length data is always on in the daemon (`Config::views`).
    ViewOptions {
        npy,
        envi,
        text: true,
        byte_order: ByteOrderMode::AsStored,
        ..Default::default()
    }
}

fn fs_options(file_size: u64, views: ViewOptions, refresh: Option<Duration>) -> FsOptions {
    FsOptions {
        uid: UID,
        gid: GID,
        file_mtime: file_mtime(),
        file_size,
        views,
        refresh,
        zarr: None,
    }
}

/// Open `path` and build its filesystem as the daemon does for a file source.
fn mount_path(path: &Path, views: ViewOptions, refresh: Option<Duration>) -> H5Fs {
    let size = std::fs::metadata(path).unwrap().len();
    let opts = OpenOptions {
        cache_bytes: 16 << 20,
        ..OpenOptions::default()
    };
    let file = File::open(path, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    H5Fs::new(file, fs_options(size, views, refresh))
}

/// A copy of the file at `src` in a new temporary directory (kept alive by the first
/// value), for a test that replaces it.
fn copied(src: PathBuf) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.h5");
    std::fs::copy(src, &path).unwrap();
    (dir, path)
}

/// The file at `path`, views off, with refresh on (a long period: the tests call the
/// refresh entry points themselves).
fn refreshing(path: &Path) -> H5Fs {
    mount_path(
        path,
        view_options(false, false),
        Some(Duration::from_secs(3600)),
    )
}

/// The corpus file `name`, views off.
fn mount(name: &str) -> H5Fs {
    mount_path(&data(name), view_options(false, false), None)
}

/// Build the filesystem of the directory `root` as the daemon does for a directory source.
fn mount_dir(root: &Path, refresh: Option<Duration>) -> H5Fs {
    let resolver = Resolver::new(ResolverOptions {
        root: root.to_path_buf(),
        allow_outside_paths: false,
        max_open_files: 8,
        cache_bytes: 16 << 20,
        origin: None,
    });
    H5Fs::for_directory(resolver, fs_options(0, view_options(false, false), refresh))
}

fn os(name: &str) -> &OsStr {
    OsStr::new(name)
}

/// Look `path` up component by component from the root, as the kernel's path walk does.
fn walk(fs: &H5Fs, path: &str) -> FsResult<Attr> {
    let mut attr = fs.getattr(ROOT_INO)?;
    for name in path.split('/').filter(|c| !c.is_empty()) {
        attr = fs.lookup(attr.ino, os(name))?;
    }
    Ok(attr)
}

#[track_caller]
fn attr_of(fs: &H5Fs, path: &str) -> Attr {
    walk(fs, path).unwrap_or_else(|e| panic!("{path}: {e:?}"))
}

/// The errno of a result that must be an error.
#[track_caller]
fn errno<T: std::fmt::Debug>(r: FsResult<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e.errno(),
    }
}

/// The whole file `ino` through `read`, in odd-sized pieces; every piece but the last must
/// be full (FUSE takes a short read for the end of the file).
#[track_caller]
fn read_all(fs: &H5Fs, ino: u64) -> Vec<u8> {
    const PIECE: u32 = 4093;
    let size = fs.getattr(ino).unwrap().size;
    let mut out = Vec::new();
    loop {
        let at = out.len() as u64;
        let piece = fs.read(ino, at, PIECE).unwrap();
        assert_eq!(
            piece.len() as u64,
            size.saturating_sub(at).min(u64::from(PIECE)),
            "read of inode {ino} at {at}"
        );
        if piece.is_empty() {
            return out;
        }
        out.extend(piece);
    }
}

/// Names of the listing of `ino`, `.` and `..` left out.
#[track_caller]
fn entry_names(fs: &H5Fs, ino: u64) -> Vec<String> {
    let listing = fs.listing(ino).unwrap();
    assert_eq!(listing.entries[0].name, ".");
    assert_eq!(listing.entries[1].name, "..");
    listing.entries[2..]
        .iter()
        .map(|e| e.name.to_string())
        .collect()
}

/// `getxattr` as a program does it: ask the size, then read with a buffer of that size.
fn xattr(fs: &H5Fs, ino: u64, name: &str) -> FsResult<Vec<u8>> {
    let XattrReply::Size(n) = fs.getxattr(ino, os(name), 0)? else {
        panic!("size query of {name} answered data");
    };
    match fs.getxattr(ino, os(name), n)? {
        XattrReply::Data(v) => {
            assert_eq!(v.len(), n as usize, "{name}: size query and value disagree");
            Ok(v)
        }
        XattrReply::Size(_) => panic!("read of {name} answered a size"),
    }
}

#[track_caller]
fn xattr_text(fs: &H5Fs, ino: u64, name: &str) -> String {
    String::from_utf8(xattr(fs, ino, name).unwrap_or_else(|e| panic!("{name}: {e:?}"))).unwrap()
}

/// `listxattr` as a program does it; the names in order.
#[track_caller]
fn xattr_names(fs: &H5Fs, ino: u64) -> Vec<String> {
    let XattrReply::Size(n) = fs.listxattr(ino, 0).unwrap() else {
        panic!("size query answered data");
    };
    if n == 0 {
        return Vec::new();
    }
    let XattrReply::Data(list) = fs.listxattr(ino, n).unwrap() else {
        panic!("read answered a size");
    };
    assert_eq!(list.len(), n as usize);
    assert_eq!(list.last(), Some(&0), "NUL-terminated names");
    list[..list.len() - 1]
        .split(|&b| b == 0)
        .map(|n| String::from_utf8(n.to_vec()).unwrap())
        .collect()
}

/// One counter of the statistics text.
#[track_caller]
fn counter(fs: &H5Fs, key: &str) -> u64 {
    let text = fs.stats_text();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no counter {key} in\n{text}"))
}

/// Whether the kernel can take `name` as a directory entry (h5mount leaves the others out).
fn showable(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && name.len() <= 255
}

fn path_showable(path: &str) -> bool {
    path.split('/').filter(|c| !c.is_empty()).all(showable)
}

fn join(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// npoints x element size of a dataset of the manifest; it must be the manifest's `nbytes`
/// (`ds[()].tobytes()`), and `None` for the variable-length types, which have no image.
#[track_caller]
fn image_len(path: &str, o: &Value) -> Option<u64> {
    let nbytes = o["nbytes"].as_u64()?;
    let npoints: u64 = match o["shape"].as_array() {
        None => 0,
        Some(dims) => dims.iter().map(|d| d.as_u64().unwrap()).product(),
    };
    let computed = npoints * o["itemsize"].as_u64().unwrap();
    assert_eq!(computed, nbytes, "{path}: npoints x itemsize vs nbytes");
    Some(nbytes)
}

/// The digest of the bytes h5mount serves for a dataset: the stored bytes where libhdf5
/// converts on read (`raw_sha256`), else `ds[()].tobytes()`.
fn served_digest(o: &Value) -> Option<&str> {
    o["nbytes"].as_u64()?;
    o["raw_sha256"].as_str().or(o["sha256"].as_str())
}

/// Datasets with a filter this build does not decode.
fn unsupported(o: &Value) -> bool {
    o["filters"].as_array().is_some_and(|fl| {
        fl.iter()
            .any(|f| !h5mount::filters::is_supported(f["id"].as_u64().unwrap() as u16))
    })
}

/// Write `bytes` next to `path` and rename them over it: a new file replacing the old one,
/// as an atomic writer (or a re-generating script) replaces a file.
fn replace_file(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

// ------------------------------------------------------------------------------- lookup

#[test]
fn lookup_finds_groups_datasets_types_and_every_kind_of_link() {
    let name = "links_latest.h5";
    let objs = objects(name);
    let fs = mount(name);
    let ino_of = |p: &str| objs[p]["addr"].as_u64().unwrap() + 2;

    let a = fs.lookup(ROOT_INO, os("a")).unwrap();
    assert_eq!(a.ino, ino_of("/a"));
    assert_eq!((a.kind, a.perm, a.size), (FileKind::Directory, 0o555, 0));
    let data = fs.lookup(a.ino, os("data")).unwrap();
    assert_eq!(data.ino, ino_of("/a/data"));
    assert_eq!(
        (data.kind, data.perm, data.size),
        (FileKind::RegularFile, 0o444, 16)
    );
    assert_eq!((data.uid, data.gid, data.mtime), (UID, GID, file_mtime()));
    // Hard links: one object, one inode, three names.
    assert_eq!(
        data.nlink, 3,
        "/a/data, /hard/data_alias1, /hard/data_alias2"
    );
    let hard = fs.lookup(ROOT_INO, os("hard")).unwrap();
    for alias in ["data_alias1", "data_alias2"] {
        assert_eq!(fs.lookup(hard.ino, os(alias)).unwrap(), data, "{alias}");
    }
    // A group shown at one path already appears at its other paths as a symlink to it
    // (a Linux directory has one parent); the root too.
    let b = fs.lookup(a.ino, os("b")).unwrap();
    assert_eq!((b.ino, b.kind), (ino_of("/a/b"), FileKind::Directory));
    assert_eq!(b.nlink, 2, "/a/b and /hard/group_alias");
    for (alias, text) in [("group_alias", "../a/b"), ("cycle_to_root", "..")] {
        let l = fs.lookup(hard.ino, os(alias)).unwrap();
        assert_eq!(l.kind, FileKind::Symlink, "{alias}");
        assert!(l.ino >= LINK_BASE, "{alias}: link inode {}", l.ino);
        assert_eq!(fs.readlink(l.ino).unwrap(), text.as_bytes(), "{alias}");
    }
    let cycle = fs.lookup(b.ino, os("cycle_to_parent")).unwrap();
    assert_eq!(fs.readlink(cycle.ino).unwrap(), b"../../a");

    // Soft links are symlinks whose text resolves inside the mount; the manifest's targets.
    for (path, o) in objs.iter().filter(|(_, o)| o["kind"] == "softlink") {
        let (parent, _) = path.rsplit_once('/').unwrap();
        let want = soft_text(parent, o["target"].as_str().unwrap());
        let l = attr_of(&fs, path);
        assert_eq!((l.kind, l.perm), (FileKind::Symlink, 0o777), "{path}");
        assert_eq!(
            l.size,
            want.len() as u64,
            "{path}: a symlink's size is its text's"
        );
        assert_eq!(fs.readlink(l.ino).unwrap(), want.as_bytes(), "{path}");
        assert_eq!(attr_of(&fs, path).ino, l.ino, "{path}: stable link inode");
    }
    assert_eq!(
        fs.readlink(attr_of(&fs, "/soft/absolute").ino).unwrap(),
        b"../a/data"
    );
    assert_eq!(
        fs.readlink(attr_of(&fs, "/a/relative").ino).unwrap(),
        b"b/deep"
    );

    // External links: followed to the object when its file (beside this one) has it, else a
    // dangling symlink naming FILE::PATH.
    let target = &objects("exttarget_latest.h5")["/g/data"];
    let existing = attr_of(&fs, "/ext/existing");
    assert_eq!(existing.kind, FileKind::RegularFile);
    assert_eq!(Some(existing.size), target["nbytes"].as_u64());
    assert!(
        (EXTERNAL_BASE..LINK_BASE).contains(&existing.ino),
        "object of another file: {}",
        existing.ino
    );
    assert_eq!(
        Some(sha256(&read_all(&fs, existing.ino)).as_str()),
        target["sha256"].as_str()
    );
    assert_eq!(
        attr_of(&fs, "/ext/existing_group").kind,
        FileKind::Directory
    );
    for (link, text) in [
        ("missing_file", "no_such_file.h5::/g"),
        ("missing_object", "exttarget_latest.h5::/nope"),
    ] {
        let l = attr_of(&fs, &format!("/ext/{link}"));
        assert_eq!(l.kind, FileKind::Symlink, "{link}");
        assert_eq!(fs.readlink(l.ino).unwrap(), text.as_bytes(), "{link}");
    }

    // A committed datatype is an empty regular file.
    let t = fs.lookup(ROOT_INO, os("mytype")).unwrap();
    assert_eq!(t.ino, ino_of("/mytype"));
    assert_eq!((t.kind, t.perm, t.size), (FileKind::RegularFile, 0o444, 0));
    assert_eq!(fs.read(t.ino, 0, 100).unwrap(), b"");

    // readlink of anything but a symlink.
    for ino in [ROOT_INO, a.ino, data.ino, t.ino] {
        assert_eq!(errno(fs.readlink(ino)), libc::EINVAL, "readlink {ino}");
    }
    assert_eq!(errno(fs.readlink(987_654_321)), libc::ENOENT);
}

#[test]
fn lookup_answers_dots_missing_names_and_non_directories() {
    let fs = mount("links_latest.h5");
    let root = fs.getattr(ROOT_INO).unwrap();
    let a = fs.lookup(ROOT_INO, os("a")).unwrap();
    let b = fs.lookup(a.ino, os("b")).unwrap();
    let data = fs.lookup(a.ino, os("data")).unwrap();
    let soft = attr_of(&fs, "/soft/absolute");
    let mytype = fs.lookup(ROOT_INO, os("mytype")).unwrap();

    // `.` and `..`, before and after the directory's listing is built (lookups are served
    // from the listing once there is one).
    for round in ["by name", "from the listing"] {
        assert_eq!(fs.lookup(b.ino, os(".")).unwrap(), b, "{round}");
        assert_eq!(fs.lookup(b.ino, os("..")).unwrap(), a, "{round}");
        assert_eq!(fs.lookup(a.ino, os("..")).unwrap(), root, "{round}");
        assert_eq!(
            fs.lookup(ROOT_INO, os("..")).unwrap(),
            root,
            "{round}: root's parent"
        );
        assert_eq!(fs.lookup(ROOT_INO, os(".")).unwrap(), root, "{round}");
        for (dir, name) in [(ROOT_INO, "nope"), (a.ino, "nope"), (b.ino, "DATA")] {
            assert_eq!(
                errno(fs.lookup(dir, os(name))),
                libc::ENOENT,
                "{round}: {name}"
            );
        }
        assert_eq!(
            errno(fs.lookup(a.ino, os("data/x"))),
            libc::ENOENT,
            "{round}: a name with a slash"
        );
        for ino in [ROOT_INO, a.ino, b.ino] {
            fs.listing(ino).unwrap();
        }
    }
    assert_eq!(
        fs.lookup(a.ino, os("data")).unwrap(),
        data,
        "found in the listing too"
    );

    // Lookups below things that are not directories.
    for (what, ino) in [
        ("dataset", data.ino),
        ("symlink", soft.ino),
        ("datatype", mytype.ino),
    ] {
        assert_eq!(errno(fs.lookup(ino, os("x"))), libc::ENOTDIR, "{what}");
    }
    // Unknown parents, and names that are not UTF-8 (HDF5 names are).
    assert_eq!(errno(fs.lookup(987_654_321, os("a"))), libc::ENOENT);
    assert_eq!(
        errno(fs.lookup(ROOT_INO, OsStr::from_bytes(b"a\xff"))),
        libc::ENOENT
    );
    assert_eq!(errno(fs.getattr(987_654_321)), libc::ENOENT);
}

#[test]
fn links_leading_outside_and_names_the_kernel_cannot_take_are_contained() {
    let fs = mount_path(
        &fixture("hostile/links.h5"),
        view_options(false, false),
        None,
    );
    // Soft links climbing out of the file and external links to absolute or `../` files are
    // dangling symlinks of one component; well-behaved ones keep their meaning.
    for name in ["up3", "abs_up", "ext_abs", "ext_up", "g/h/mixed"] {
        let l = attr_of(&fs, name);
        assert_eq!(l.kind, FileKind::Symlink, "{name}");
        let text = String::from_utf8(fs.readlink(l.ino).unwrap()).unwrap();
        assert!(text.starts_with(REFUSED_PREFIX), "{name}: {text}");
        assert!(!text.contains('/'), "{name}: {text}");
    }
    assert_eq!(
        fs.readlink(attr_of(&fs, "g/h/good_abs").ino).unwrap(),
        b"../../data"
    );
    assert_eq!(fs.readlink(attr_of(&fs, "good_rel").ino).unwrap(), b"data");
    assert_eq!(
        fs.readlink(attr_of(&fs, "ext_ok").ino).unwrap(),
        b"sibling.h5::/x",
        "missing file: dangling FILE::PATH"
    );
    // `/names` holds links named `Zz/Zz` and `..` next to `ok`: only `ok` is shown, and `..`
    // is the parent directory, not the link.
    let names = attr_of(&fs, "names");
    assert_eq!(entry_names(&fs, names.ino), vec!["ok"]);
    assert_eq!(fs.lookup(names.ino, os("..")).unwrap().ino, ROOT_INO);
    assert_eq!(fs.lookup(names.ino, os("ok")).unwrap().size, 8);
}

// ------------------------------------------------------------------------------- getattr

/// Files whose every object is compared (the links files for committed datatypes and
/// groups linked from several groups).
const ATTR_FILES: [&str; 12] = [
    "dtypes_latest.h5",
    "dtypes_earliest.h5",
    "layouts_latest.h5",
    "chunked_fixed_v114.h5",
    "filters_gzip_latest.h5",
    "groups_earliest.h5",
    "names_latest.h5",
    "sohm_latest.h5",
    "references_latest.h5",
    "userblock512_latest.h5",
    "links_latest.h5",
    "links_earliest.h5",
];

#[test]
fn getattr_of_every_object_matches_the_manifest() {
    let mut checked = [0usize; 3];
    let mut aliases = 0;
    for name in ATTR_FILES {
        let objs = objects(name);
        let fs = mount(name);
        let root_addr = objs["/"]["addr"].as_u64().unwrap();
        let mut links_to: HashMap<u64, u32> = HashMap::new();
        for o in objs.values() {
            if let Some(addr) = o["addr"].as_u64() {
                *links_to.entry(addr).or_default() += 1;
            }
        }
        for (path, o) in objs {
            if !path_showable(path) {
                assert_eq!(errno(walk(&fs, path)), libc::ENOENT, "{name}:{path}");
                continue;
            }
            let what = format!("{name}:{path}");
            let Some(addr) = o["addr"].as_u64() else {
                continue;
            };
            let a = walk(&fs, path).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            if a.kind == FileKind::Symlink {
                // A group linked from several groups is a directory at the path met first
                // and a symlink to it at the others (checked in the listing test).
                assert!(
                    o["kind"] == "group" && links_to[&addr] > 1,
                    "{what}: a symlink for a {}",
                    o["kind"]
                );
                aliases += 1;
                continue;
            }
            let want_ino = if addr == root_addr {
                ROOT_INO
            } else {
                addr + 2
            };
            assert_eq!(a.ino, want_ino, "{what}: inode = address + 2");
            assert_eq!((a.uid, a.gid), (UID, GID), "{what}");
            assert_eq!(a.mtime, file_mtime(), "{what}: no stored time");
            if o["kind"] == "datatype" {
                // nlink is the object header's reference count, and libhdf5 counts every
                // dataset using a committed type as a reference to it (here one each).
                assert_eq!(
                    a.nlink,
                    links_to[&addr] + 1,
                    "{what}: nlink = header refcount"
                );
            } else {
                assert_eq!(a.nlink, links_to[&addr], "{what}: nlink = hard links");
            }
            match o["kind"].as_str().unwrap() {
                "group" => {
                    assert_eq!((a.kind, a.perm, a.size), (FileKind::Directory, 0o555, 0));
                    checked[0] += 1;
                }
                "dataset" => {
                    assert_eq!((a.kind, a.perm), (FileKind::RegularFile, 0o444), "{what}");
                    if let Some(len) = image_len(&what, o) {
                        assert_eq!(a.size, len, "{what}: size = npoints x element size");
                    }
                    checked[1] += 1;
                }
                "datatype" => {
                    assert_eq!((a.kind, a.perm, a.size), (FileKind::RegularFile, 0o444, 0));
                    checked[2] += 1;
                }
                other => panic!("{what}: unexpected kind {other}"),
            }
            assert_eq!(fs.getattr(a.ino).unwrap(), a, "{what}: getattr = lookup");
            assert_eq!(a.blocks(), a.size.div_ceil(512), "{what}");
        }
    }
    eprintln!("checked {checked:?} groups, datasets, datatypes; {aliases} group aliases");
    assert!(
        checked[0] >= 20 && checked[1] >= 150 && checked[2] == 4,
        "{checked:?}"
    );
    assert_eq!(aliases, 6, "three aliased paths in each links file");
}

#[test]
fn sizes_past_what_a_file_can_show_are_capped_and_still_read() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("huge/expected.json")).unwrap())
            .unwrap();
    let mut checked = 0;
    for form in ["earliest", "latest"] {
        let fs = mount_path(
            &fixture(&format!("huge/huge_{form}.h5")),
            view_options(false, false),
            None,
        );
        for (ds, e) in expected[form].as_object().unwrap() {
            let (Some(len), Some(probes)) = (e["len"].as_u64(), e["probes"].as_object()) else {
                continue;
            };
            let a = attr_of(&fs, ds);
            assert_eq!(a.size, len.min(MAX_SIZE), "{form}:{ds}");
            assert_eq!(
                xattr_text(&fs, a.ino, "user.h5.shape"),
                py_tuple(&e["shape"]),
                "{form}:{ds}"
            );
            for (offset, hex) in probes {
                let offset: u64 = offset.parse().unwrap();
                let got = fs.read(a.ino, offset, (hex.as_str().unwrap().len() / 2) as u32);
                let got: String = got.unwrap().iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(&got, hex, "{form}:{ds} at {offset}");
                checked += 1;
            }
            // The bytes past the shown size cannot be asked for by the kernel; the core
            // answers nothing past the image.
            assert_eq!(fs.read(a.ino, len, 16).unwrap(), b"", "{form}:{ds}");
        }
    }
    assert!(checked >= 10, "{checked} probes");
}

// ------------------------------------------------------------------------------- listings

/// The kind of the directory entry for the manifest object `o` (an external link shows its
/// target when the target exists); a group already shown at another path is a symlink
/// instead, which the caller decides.
fn entry_kind(o: &Value) -> FileKind {
    match o["kind"].as_str().unwrap() {
        "group" => FileKind::Directory,
        "dataset" | "datatype" => FileKind::RegularFile,
        "softlink" => FileKind::Symlink,
        "extlink" => {
            let target = manifest()["files"][o["file"].as_str().unwrap()]["objects"]
                .get(o["path"].as_str().unwrap());
            match target {
                Some(t) => entry_kind(t),
                None => FileKind::Symlink,
            }
        }
        other => panic!("kind {other}"),
    }
}

#[test]
fn listings_match_the_manifests_links() {
    let mut dirs = 0;
    for name in [
        "groups_latest.h5",
        "groups_earliest.h5",
        "links_latest.h5",
        "links_earliest.h5",
        "names_latest.h5",
        "names_earliest.h5",
        "biggroups_latest.h5",
        "attrs_latest.h5",
    ] {
        let objs = objects(name);
        let fs = mount(name);
        // Breadth-first over the listings, as `find` walks a mount: the first path a group
        // is met at is its directory, its other paths symlinks to it.
        let mut shown_at: HashMap<u64, String> = HashMap::new();
        shown_at.insert(objs["/"]["addr"].as_u64().unwrap(), "/".into());
        let mut todo = VecDeque::from([("/".to_string(), ROOT_INO, ROOT_INO)]);
        while let Some((path, ino, parent)) = todo.pop_front() {
            let what = format!("{name}:{path}");
            dirs += 1;
            fs.opendir(ino).unwrap();
            let listing = fs.listing(ino).unwrap();
            assert_eq!(
                (listing.entries[0].ino, listing.entries[1].ino),
                (ino, parent),
                "{what}: . and .."
            );
            let want: Vec<&str> = objs[&path]["links"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap())
                .filter(|l| showable(l))
                .collect();
            assert_eq!(entry_names(&fs, ino), want, "{what}: links in name order");
            for e in &listing.entries[2..] {
                let child = join(&path, &e.name);
                let o = &objs[&child];
                let a = fs.lookup(ino, os(&e.name)).unwrap();
                assert_eq!((a.ino, a.kind), (e.ino, e.kind), "{what}: lookup = readdir");
                let mut kind = entry_kind(o);
                if o["kind"] == "group" {
                    let addr = o["addr"].as_u64().unwrap();
                    match shown_at.get(&addr) {
                        Some(first) => {
                            kind = FileKind::Symlink;
                            assert_eq!(
                                fs.readlink(e.ino).unwrap(),
                                soft_text(&path, first).as_bytes(),
                                "{what}/{}: symlink to where the group is shown",
                                e.name
                            );
                        }
                        None => {
                            shown_at.insert(addr, child.clone());
                            todo.push_back((child.clone(), e.ino, ino));
                        }
                    }
                }
                assert_eq!(e.kind, kind, "{name}:{child}");
            }
            // The listing is kept: asking again gives the same one.
            assert!(std::sync::Arc::ptr_eq(&listing, &fs.listing(ino).unwrap()));
        }
    }
    assert!(dirs > 130, "{dirs} directories listed");
}

#[test]
fn listing_anything_but_a_directory_fails() {
    let fs = mount("links_latest.h5");
    let data = attr_of(&fs, "/a/data");
    let soft = attr_of(&fs, "/soft/absolute");
    let mytype = attr_of(&fs, "/mytype");
    for (what, ino) in [
        ("dataset", data.ino),
        ("symlink", soft.ino),
        ("datatype", mytype.ino),
    ] {
        assert_eq!(errno(fs.listing(ino)), libc::ENOTDIR, "{what}");
        assert_eq!(errno(fs.opendir(ino)), libc::ENOTDIR, "{what}");
    }
    assert_eq!(errno(fs.listing(987_654_321)), libc::ENOENT);
    // An empty group lists `.` and `..` only.
    let fs = mount("groups_latest.h5");
    let empty = attr_of(&fs, "/empty");
    assert_eq!(fs.listing(empty.ino).unwrap().entries.len(), 2);
}

/// An HDF5 file of a mounted directory whose superblock's root object is a dataset (a
/// corrupt file) is shown as a directory that fails to list with EIO, not ENOTDIR.
#[test]
fn a_file_whose_root_is_not_a_group_lists_with_eio() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(data("layouts_latest.h5")).unwrap();
    let ds = manifest()["files"]["layouts_latest.h5"]["objects"]["/compact_f8_2d"]["addr"]
        .as_u64()
        .unwrap();
    // Superblock version 2/3: the root object header address is at byte 36, the checksum
    // of the 44 bytes before it at 44.
    assert!(bytes[8] >= 2, "superblock version {}", bytes[8]);
    bytes[36..44].copy_from_slice(&ds.to_le_bytes());
    let sum = h5mount::io::checksum::lookup3(&bytes[..44], 0);
    bytes[44..48].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(dir.path().join("bad.h5"), &bytes).unwrap();
    let fs = mount_dir(dir.path(), None);
    let root = fs.lookup(ROOT_INO, os("bad.h5")).unwrap();
    assert_eq!(root.kind, FileKind::Directory);
    assert_eq!(errno(fs.listing(root.ino)), libc::EIO);
    assert_eq!(errno(fs.opendir(root.ino)), libc::EIO);
}

// ------------------------------------------------------------------------------- open

#[test]
fn open_refuses_write_intent_and_directories() {
    let fs = mount("links_latest.h5");
    let data = attr_of(&fs, "/a/data");
    let dir = attr_of(&fs, "/a");
    let mytype = attr_of(&fs, "/mytype");
    let external = attr_of(&fs, "/ext/existing");
    let writes = [
        ("O_WRONLY", libc::O_WRONLY),
        ("O_RDWR", libc::O_RDWR),
        ("O_RDONLY|O_TRUNC", libc::O_RDONLY | libc::O_TRUNC),
        ("O_WRONLY|O_TRUNC", libc::O_WRONLY | libc::O_TRUNC),
        ("O_WRONLY|O_APPEND", libc::O_WRONLY | libc::O_APPEND),
        ("O_RDWR|O_CREAT", libc::O_RDWR | libc::O_CREAT),
    ];
    for ino in [data.ino, dir.ino, ROOT_INO, mytype.ino, external.ino] {
        for (what, flags) in writes {
            assert_eq!(errno(fs.open(ino, flags)), libc::EROFS, "{ino} {what}");
            assert_eq!(
                errno(fs.open_handle(ino, flags)),
                libc::EROFS,
                "{ino} {what}"
            );
        }
    }
    for flags in [
        libc::O_RDONLY,
        libc::O_RDONLY | libc::O_NONBLOCK,
        libc::O_RDONLY | libc::O_NOATIME,
    ] {
        fs.open(data.ino, flags).unwrap();
        fs.open(mytype.ino, flags).unwrap();
        fs.open(external.ino, flags).unwrap();
    }
    for ino in [dir.ino, ROOT_INO] {
        assert_eq!(errno(fs.open(ino, libc::O_RDONLY)), libc::EISDIR, "{ino}");
        assert_eq!(errno(fs.read(ino, 0, 10)), libc::EISDIR, "read {ino}");
    }
    assert_eq!(errno(fs.open(987_654_321, libc::O_RDONLY)), libc::ENOENT);
    // Datasets get handles of their own (for decode-ahead); other files handle 0.
    let h1 = fs.open_handle(data.ino, libc::O_RDONLY).unwrap();
    let h2 = fs.open_handle(data.ino, libc::O_RDONLY).unwrap();
    assert!(h1 != 0 && h2 != 0 && h1 != h2, "{h1} {h2}");
    assert_eq!(fs.open_handle(mytype.ino, libc::O_RDONLY).unwrap(), 0);
    fs.release(h1);
    fs.release(h2);
}

// ------------------------------------------------------------------------------- read

/// Files whose every dataset with a byte image is read and compared with its digest.
const READ_FILES: [&str; 14] = [
    "dtypes_latest.h5",
    "dtypes_earliest.h5",
    "layouts_latest.h5",
    "layouts_earliest.h5",
    "chunked_fixed_v114.h5",
    "chunked_ext2_earliest.h5",
    "chunked_single_latest.h5",
    "filters_gzip_latest.h5",
    "filters_zstd_latest.h5",
    "filters_lz4_v114.h5",
    "external_latest.h5",
    "virtual_latest.h5",
    "sohm_latest.h5",
    "userblock4096_earliest.h5",
];

#[test]
fn dataset_bytes_match_the_manifests_digests() {
    let mut checked = 0;
    let mut bytes = 0;
    for name in READ_FILES {
        let fs = mount(name);
        for (path, o) in objects(name) {
            if o["kind"] != "dataset" || !path_showable(path) || unsupported(o) {
                continue;
            }
            let Some(digest) = served_digest(o) else {
                continue;
            };
            let what = format!("{name}:{path}");
            let a = attr_of(&fs, path);
            fs.open(a.ino, libc::O_RDONLY)
                .unwrap_or_else(|e| panic!("{what}: {e:?}"));
            let whole = read_all(&fs, a.ino);
            assert_eq!(sha256(&whole), digest, "{what}");
            let len = whole.len() as u64;
            assert_eq!(a.size, len, "{what}");
            // One request for everything, and a request from the middle.
            assert_eq!(
                fs.read(a.ino, 0, len as u32 + 100).unwrap(),
                whole,
                "{what}"
            );
            let (mid, n) = (len / 3, (len / 2) as u32 + 1);
            let want = &whole[mid as usize..(mid + u64::from(n)).min(len) as usize];
            assert_eq!(fs.read(a.ino, mid, n).unwrap(), want, "{what} at {mid}");
            // At and past the end: nothing.
            for at in [len, len + 1, len + 4096, u64::MAX - 1] {
                assert_eq!(fs.read(a.ino, at, 64).unwrap(), b"", "{what} at {at}");
            }
            assert_eq!(fs.read(a.ino, 0, 0).unwrap(), b"", "{what}: empty request");
            checked += 1;
            bytes += len;
        }
    }
    eprintln!("{checked} datasets, {bytes} bytes");
    assert!(checked >= 150, "{checked} datasets read");
}

#[test]
fn reads_through_handles_and_the_read_counters() {
    let name = "chunked_fixed_v114.h5";
    let o = &objects(name)["/gz_250"];
    let fs = mount(name);
    let a = attr_of(&fs, "/gz_250");
    let before = counter(&fs, "read_requests");
    let fh = fs.open_handle(a.ino, libc::O_RDONLY).unwrap();
    let mut got = Vec::new();
    let mut buf = Vec::new();
    let mut requests = 0;
    loop {
        let answer = fs
            .read_handle(
                h5mount::io::ReadCtx::default(),
                a.ino,
                fh,
                got.len() as u64,
                4096,
                &mut buf,
            )
            .unwrap();
        requests += 1;
        let piece = answer.bytes(&buf);
        if piece.is_empty() {
            break;
        }
        got.extend_from_slice(piece);
    }
    fs.release(fh);
    assert_eq!(Some(sha256(&got).as_str()), o["sha256"].as_str());
    assert_eq!(counter(&fs, "read_requests") - before, requests);
    assert_eq!(counter(&fs, "read_bytes"), got.len() as u64);
    assert_eq!(counter(&fs, "read_max_request"), 4096);
}

#[test]
fn a_read_over_several_chunks_has_workers_decode_all_but_its_first() {
    // soak.h5's /gz_shuf_fixed: 16 MiB of shuffled, deflated chunks of 256 KiB.
    let path = fixture("big/soak.h5");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(path.with_file_name("soak.json")).unwrap())
            .unwrap();
    let fs = mount_path(&path, view_options(false, false), None);
    let a = attr_of(&fs, "/gz_shuf_fixed");
    assert_eq!(Some(a.size), json["/gz_shuf_fixed"]["nbytes"].as_u64());
    const MIB: u64 = 1 << 20;
    const CHUNK: u64 = 256 << 10;
    let fh = fs.open_handle(a.ino, libc::O_RDONLY).unwrap();
    // 4 MiB at 12 MiB, far from where a new handle's stream expects its first read: no
    // read-ahead, but the 15 chunks after the first of the read go to the workers.
    let (jobs, misses) = (counter(&fs, "prefetch_jobs"), counter(&fs, "cache_misses"));
    let mut buf = Vec::new();
    let tail = fs
        .read_handle(
            h5mount::io::ReadCtx::default(),
            a.ino,
            fh,
            12 * MIB,
            (4 * MIB) as u32,
            &mut buf,
        )
        .unwrap()
        .bytes(&buf)
        .to_vec();
    assert_eq!(tail.len() as u64, 4 * MIB);
    assert_eq!(counter(&fs, "prefetch_jobs") - jobs, 15);
    // Each chunk decoded once, by the reader or by a worker (the reader waited for those in
    // flight); the workers went through every piece they were given.
    assert_eq!(counter(&fs, "cache_misses") - misses, 16);
    assert!(
        harness::wait_for(|| counter(&fs, "prefetch_bytes") == 15 * CHUNK),
        "{}",
        fs.stats_text()
    );
    assert_eq!(counter(&fs, "cache_misses") - misses, 16);
    // The bytes: the rest read through the same handle, the whole against soak.json.
    let mut all = Vec::new();
    while (all.len() as u64) < 12 * MIB {
        let answer = fs
            .read_handle(
                h5mount::io::ReadCtx::default(),
                a.ino,
                fh,
                all.len() as u64,
                MIB as u32,
                &mut buf,
            )
            .unwrap();
        all.extend_from_slice(answer.bytes(&buf));
    }
    fs.release(fh);
    all.extend_from_slice(&tail);
    assert_eq!(
        Some(sha256(&all).as_str()),
        json["/gz_shuf_fixed"]["sha256"].as_str()
    );
}

#[test]
fn datasets_opened_in_listing_order_have_the_next_ones_decoded_ahead() {
    // filters_gzip: a root of 14 small deflated datasets, far less than DECODE_AHEAD.
    let name = "filters_gzip_earliest.h5";
    let fs = mount(name);
    let names = entry_names(&fs, ROOT_INO);
    assert_eq!(names.len(), 14, "{names:?}");
    let attrs: Vec<Attr> = names
        .iter()
        .map(|n| attr_of(&fs, &format!("/{n}")))
        .collect();
    // Open, read whole and close (a flush, then the release) as `cat` does.
    let cat = |k: usize| {
        let a = &attrs[k];
        let fh = fs.open_handle(a.ino, libc::O_RDONLY).unwrap();
        let mut buf = Vec::new();
        let got = fs
            .read_handle(
                h5mount::io::ReadCtx::default(),
                a.ino,
                fh,
                0,
                (a.size + 1) as u32,
                &mut buf,
            )
            .unwrap()
            .bytes(&buf)
            .to_vec();
        fs.flush(fh);
        fs.release(fh);
        let o = &objects(name)[&format!("/{}", names[k])];
        assert_eq!(
            Some(sha256(&got).as_str()),
            o["sha256"].as_str(),
            "{}",
            names[k]
        );
    };
    // Out of listing order: no walk, nothing decoded ahead.
    let jobs = counter(&fs, "prefetch_jobs");
    cat(3);
    cat(1);
    assert_eq!(counter(&fs, "prefetch_jobs"), jobs, "{}", fs.stats_text());
    // The next one after the last, that one closed: a walk. Each dataset after it is
    // decoded by the workers, one job each (a dataset is smaller than a piece), the one
    // read already found in the cache.
    let bytes = counter(&fs, "prefetch_bytes");
    let a = &attrs[2];
    let fh = fs.open_handle(a.ino, libc::O_RDONLY).unwrap();
    let rest: u64 = attrs[3..].iter().map(|a| a.size).sum();
    assert!(
        harness::wait_for(|| counter(&fs, "prefetch_bytes") - bytes == rest),
        "{}",
        fs.stats_text()
    );
    assert_eq!(
        counter(&fs, "prefetch_jobs") - jobs,
        11,
        "{}",
        fs.stats_text()
    );
    fs.flush(fh);
    fs.release(fh);
    // The walk goes on: what it decoded is read without a decode, and not queued again.
    let misses = counter(&fs, "cache_misses");
    for k in 3..14 {
        cat(k);
    }
    // Once the walk's steps are all handled.
    assert!(
        harness::wait_for(
            || counter(&fs, "prefetch_walk_done") == counter(&fs, "prefetch_walk_steps")
        ),
        "{}",
        fs.stats_text()
    );
    assert!(
        counter(&fs, "prefetch_walk_steps") >= 11,
        "{}",
        fs.stats_text()
    );
    assert_eq!(counter(&fs, "cache_misses"), misses, "{}", fs.stats_text());
    assert_eq!(
        counter(&fs, "prefetch_jobs") - jobs,
        11,
        "{}",
        fs.stats_text()
    );
}

// ------------------------------------------------------------------------------- xattrs

#[test]
fn dataset_xattrs_describe_it_and_follow_the_size_protocol() {
    let name = "chunked_fixed_v114.h5";
    let fs = mount(name);
    let o = &objects(name)["/gz_sparse_fill"];
    let ino = attr_of(&fs, "/gz_sparse_fill").ino;
    let want = [
        ("user.h5.dtype", "<i2".to_string()),
        ("user.h5.shape", py_tuple(&o["shape"])),
        ("user.h5.maxshape", py_tuple(&o["maxshape"])),
        ("user.h5.layout", "chunked".to_string()),
        ("user.h5.filters", "shuffle,deflate(4)".to_string()),
        ("user.h5.chunks", py_tuple(&o["chunks"])),
        ("user.h5.chunk_index", "fixed-array".to_string()),
        // fillvalue_hex f9ff: -7 as <i2.
        ("user.h5.fillvalue", "-7".to_string()),
    ];
    assert_eq!(o["fillvalue_hex"], "f9ff");
    assert_eq!(
        xattr_names(&fs, ino),
        want.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>()
    );
    for (k, v) in &want {
        assert_eq!(&xattr_text(&fs, ino, k), v, "{k}");
    }
    assert_eq!(want[1].1, "(100, 100)");

    // The size protocol: size 0 asks the size; a buffer too small is ERANGE; a larger one
    // gets the value.
    let list_len: usize = want.iter().map(|(k, _)| k.len() + 1).sum();
    assert_eq!(
        fs.listxattr(ino, 0).unwrap(),
        XattrReply::Size(list_len as u32)
    );
    assert_eq!(errno(fs.listxattr(ino, list_len as u32 - 1)), libc::ERANGE);
    let XattrReply::Data(list) = fs.listxattr(ino, list_len as u32 + 100).unwrap() else {
        panic!("list read answered a size");
    };
    assert_eq!(list.len(), list_len);
    let shape = os("user.h5.shape");
    assert_eq!(fs.getxattr(ino, shape, 0).unwrap(), XattrReply::Size(10));
    assert_eq!(
        fs.getxattr(ino, shape, 10).unwrap(),
        XattrReply::Data(b"(100, 100)".to_vec())
    );
    assert_eq!(
        fs.getxattr(ino, shape, 4096).unwrap(),
        XattrReply::Data(b"(100, 100)".to_vec())
    );
    assert_eq!(errno(fs.getxattr(ino, shape, 9)), libc::ERANGE);
    assert_eq!(errno(fs.getxattr(ino, shape, 1)), libc::ERANGE);

    // Names that are not there, in and out of the `user.` namespace.
    for missing in [
        "user.h5.nope",
        "user.nope",
        "user.",
        "system.posix_acl",
        "system.posix_acl_access2",
        "trusted.h5.dtype",
        "h5.dtype",
    ] {
        assert_eq!(
            errno(fs.getxattr(ino, os(missing), 0)),
            libc::ENODATA,
            "{missing}"
        );
        assert_eq!(
            errno(fs.getxattr(ino, os(missing), 100)),
            libc::ENODATA,
            "{missing}"
        );
    }
    assert_eq!(
        errno(fs.getxattr(ino, OsStr::from_bytes(b"user.\xff"), 0)),
        libc::ENODATA
    );
    // No security labels or ACLs: not supported, so `ls -l` stops asking.
    for label in [
        "security.selinux",
        "security.capability",
        "security.",
        "system.posix_acl_access",
        "system.posix_acl_default",
    ] {
        for size in [0, 100] {
            assert_eq!(
                errno(fs.getxattr(ino, os(label), size)),
                libc::EOPNOTSUPP,
                "{label}"
            );
        }
        assert_eq!(
            errno(fs.getxattr(ROOT_INO, os(label), 100)),
            libc::EOPNOTSUPP,
            "{label} of the root"
        );
    }
    assert_eq!(errno(fs.getxattr(987_654_321, shape, 0)), libc::ENOENT);
    assert_eq!(errno(fs.listxattr(987_654_321, 0)), libc::ENOENT);

    // dtype and shape of every dataset of a file of many types, as h5py names them.
    let name = "dtypes_latest.h5";
    let fs = mount(name);
    let mut checked = 0;
    for (path, o) in objects(name) {
        if o["kind"] != "dataset" {
            continue;
        }
        let ino = attr_of(&fs, path).ino;
        let names = xattr_names(&fs, ino);
        assert_eq!(
            names[..5],
            [
                "user.h5.dtype",
                "user.h5.shape",
                "user.h5.maxshape",
                "user.h5.layout",
                "user.h5.filters"
            ],
            "{path}"
        );
        assert_eq!(xattr_text(&fs, ino, "user.h5.dtype"), o["dtype"], "{path}");
        assert_eq!(
            xattr_text(&fs, ino, "user.h5.shape"),
            py_tuple(&o["shape"]),
            "{path}"
        );
        assert_eq!(
            xattr_text(&fs, ino, "user.h5.layout"),
            o["layout"],
            "{path}"
        );
        checked += 1;
    }
    assert_eq!(checked, 46);
}

#[test]
fn attributes_types_links_and_the_statistics_as_xattrs() {
    let name = "attrs_latest.h5";
    let fs = mount(name);
    // HDF5 attributes are `user.NAME`, after the dataset's `user.h5.*`.
    let compact = attr_of(&fs, "/compact").ino;
    let names = xattr_names(&fs, compact);
    let attrs: BTreeSet<&str> = names
        .iter()
        .filter(|n| !n.starts_with("user.h5."))
        .map(String::as_str)
        .collect();
    assert_eq!(
        attrs,
        BTreeSet::from(["user.scale", "user.units", "user.valid_range"])
    );
    assert!(
        names[..5].iter().all(|n| n.starts_with("user.h5.")),
        "{names:?}"
    );
    assert_eq!(xattr_text(&fs, compact, "user.scale"), "0.5");
    assert_eq!(xattr_text(&fs, compact, "user.units"), "m/s");
    // The root group's attributes, and what they do not include.
    assert_eq!(
        xattr_names(&fs, ROOT_INO),
        vec!["user.title", "user.version"]
    );
    assert_eq!(
        xattr_text(&fs, ROOT_INO, "user.title"),
        "attribute fixtures"
    );
    assert_eq!(xattr_text(&fs, ROOT_INO, "user.version"), "3");
    // A group with more attributes than fit in its header (dense storage).
    let many = attr_of(&fs, "/many").ino;
    assert_eq!(xattr_names(&fs, many).len(), 13);
    assert_eq!(xattr_text(&fs, many, "user.attr11"), "11000");
    assert_eq!(xattr_text(&fs, many, "user.label"), "twelve+1 attributes");

    // The statistics: on the root only, not listed, sized for the longest text.
    let XattrReply::Size(n) = fs.getxattr(ROOT_INO, os(STATS_XATTR), 0).unwrap() else {
        panic!("size query answered data");
    };
    assert_eq!(n as usize, max_text_len());
    let XattrReply::Data(text) = fs.getxattr(ROOT_INO, os(STATS_XATTR), n).unwrap() else {
        panic!("read answered a size");
    };
    let text = String::from_utf8(text).unwrap();
    let keys: Vec<&str> = text.lines().map(|l| l.split_once(' ').unwrap().0).collect();
    assert_eq!(keys, KEYS);
    assert_eq!(
        errno(fs.getxattr(ROOT_INO, os(STATS_XATTR), 10)),
        libc::ERANGE
    );
    assert_eq!(
        errno(fs.getxattr(compact, os(STATS_XATTR), 0)),
        libc::ENODATA
    );

    // A group without attributes, a committed datatype, links.
    let fs = mount("links_latest.h5");
    assert_eq!(
        fs.listxattr(attr_of(&fs, "/a").ino, 0).unwrap(),
        XattrReply::Size(0)
    );
    // A committed datatype is described by its type, then its own attributes.
    let mytype = attr_of(&fs, "/mytype").ino;
    assert_eq!(xattr_names(&fs, mytype), ["user.h5.dtype", "user.unit"]);
    assert_eq!(xattr_text(&fs, mytype, "user.h5.dtype"), "<f8");
    assert_eq!(xattr_text(&fs, mytype, "user.unit"), "m");
    let compound = attr_of(&fs, "/compound_type").ino;
    assert_eq!(xattr_names(&fs, compound), ["user.h5.dtype"]);
    assert_eq!(
        xattr_text(&fs, compound, "user.h5.dtype"),
        "{x:<i4@0,y:>f4@4}"
    );
    // A dataset of a committed type names the type, like h5py.
    let typed = attr_of(&fs, "/typed_compound").ino;
    assert_eq!(xattr_text(&fs, typed, "user.h5.dtype"), "{x:<i4@0,y:>f4@4}");
    let soft = attr_of(&fs, "/soft/absolute").ino;
    assert_eq!(fs.listxattr(soft, 0).unwrap(), XattrReply::Size(0));
    assert_eq!(
        errno(fs.getxattr(soft, os("user.h5.dtype"), 0)),
        libc::ENODATA
    );
}

/// An attribute whose value cannot be read (a vlen string whose global heap object records
/// another size than the string's: refused, as libhdf5 refuses it) is refused alone: the
/// object's other xattrs are listed and read, and only that attribute's `getxattr` fails.
#[test]
fn an_attribute_that_cannot_be_read_is_refused_alone() {
    let (_dir, path) = copied(data("attrs_earliest.h5"));
    let mut bytes = std::fs::read(&path).unwrap();
    // The heap object holding the root's title: its 8-byte size (18) just before the text.
    let text = b"attribute fixtures";
    let at = (8..bytes.len() - text.len())
        .find(|&i| &bytes[i..i + text.len()] == text && bytes[i - 8..i] == 18u64.to_le_bytes())
        .unwrap();
    let fs = mount_path(&path, view_options(false, false), None);
    assert_eq!(xattr_names(&fs, ROOT_INO), ["user.title", "user.version"]);
    bytes[at - 8..at].copy_from_slice(&19u64.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let fs = mount_path(&path, view_options(false, false), None);
    assert_eq!(xattr_names(&fs, ROOT_INO), ["user.version"]);
    assert_eq!(xattr_text(&fs, ROOT_INO, "user.version"), "3");
    assert_eq!(errno(fs.getxattr(ROOT_INO, os("user.title"), 0)), libc::EIO);
    assert_eq!(
        errno(fs.getxattr(ROOT_INO, os("user.absent"), 0)),
        libc::ENODATA
    );
    // Other objects are untouched.
    let compact = attr_of(&fs, "/compact").ino;
    assert!(!xattr_names(&fs, compact).is_empty());
}

// ------------------------------------------------------------------------------- access, statfs

#[test]
fn access_is_read_only_and_statfs_reports_the_file() {
    let name = "links_latest.h5";
    let fs = mount(name);
    let dir = attr_of(&fs, "/a").ino;
    let file = attr_of(&fs, "/a/data").ino;
    let link = attr_of(&fs, "/soft/absolute").ino;
    let (r, w, x) = (libc::R_OK, libc::W_OK, libc::X_OK);
    for ino in [ROOT_INO, dir, link] {
        for mask in [libc::F_OK, r, x, r | x] {
            fs.access(ino, mask)
                .unwrap_or_else(|e| panic!("{ino} {mask}: {e:?}"));
        }
    }
    fs.access(file, r).unwrap();
    fs.access(file, libc::F_OK).unwrap();
    assert_eq!(
        errno(fs.access(file, x)),
        libc::EACCES,
        "datasets are not programs"
    );
    assert_eq!(errno(fs.access(file, r | x)), libc::EACCES);
    for ino in [ROOT_INO, dir, file, link] {
        for mask in [w, r | w, r | w | x] {
            assert_eq!(errno(fs.access(ino, mask)), libc::EROFS, "{ino} {mask}");
        }
    }
    assert_eq!(errno(fs.access(987_654_321, r)), libc::ENOENT);

    let size = std::fs::metadata(data(name)).unwrap().len();
    let st = fs.statfs();
    assert_eq!(st.blocks, size.div_ceil(4096));
    assert_eq!((st.bsize, st.namelen), (4096, 255));
    let fresh = mount(name);
    assert_eq!(fresh.statfs().files, 1, "the root only");
    attr_of(&fresh, "/a/b/deep");
    assert_eq!(fresh.statfs().files, 4, "root, a, b, deep");
}

// ------------------------------------------------------------------------------- sidecars

/// ENVI's data type code of a numpy type string, for the types of `chunked_fixed_v114.h5`.
fn envi_code(dtype: &str) -> u8 {
    match dtype {
        "|u1" => 1,
        "<i2" => 2,
        "<i4" => 3,
        "<f4" => 4,
        "<f8" => 5,
        other => panic!("no code for {other} in this test"),
    }
}

#[test]
fn npy_and_hdr_sidecars_are_listed_and_serve_header_and_data() {
    let name = "chunked_fixed_v114.h5";
    let objs = objects(name);
    let fs = mount_path(&data(name), view_options(true, true), None);
    let listing = fs.listing(ROOT_INO).unwrap();
    let mut want_names = BTreeSet::new();
    let mut sidecars = 0;
    for (path, o) in objs.iter().filter(|(_, o)| o["kind"] == "dataset") {
        let ds_name = &path[1..];
        let ds = attr_of(&fs, path);
        let shape: Vec<u64> = o["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        let dtype = o["dtype"].as_str().unwrap();
        let image = read_all(&fs, ds.ino);
        want_names.insert(ds_name.to_string());

        // NAME.npy: an NPY 1.0 header padded to 64 bytes, then the dataset's bytes.
        let npy_name = format!("{ds_name}.npy");
        want_names.insert(npy_name.clone());
        let e = listing.find(&npy_name).expect("listed");
        assert_eq!(
            Some(e.ino),
            sidecar_ino(ds.ino, ViewKind::Npy),
            "{npy_name}"
        );
        assert_eq!(e.kind, FileKind::RegularFile);
        let a = fs.lookup(ROOT_INO, os(&npy_name)).unwrap();
        assert_eq!(a.ino, e.ino, "{npy_name}: lookup = readdir");
        assert_eq!(
            (a.kind, a.perm, a.uid, a.gid),
            (FileKind::RegularFile, 0o444, UID, GID)
        );
        fs.open(a.ino, libc::O_RDONLY).unwrap();
        assert_eq!(errno(fs.open(a.ino, libc::O_WRONLY)), libc::EROFS);
        let npy = read_all(&fs, a.ino);
        assert_eq!(&npy[..8], b"\x93NUMPY\x01\x00", "{npy_name}");
        let hlen = 10 + u16::from_le_bytes([npy[8], npy[9]]) as usize;
        assert_eq!(hlen % 64, 0, "{npy_name}: data aligned for mmap");
        let header = std::str::from_utf8(&npy[10..hlen]).unwrap();
        let shape_text = py_tuple(&o["shape"]);
        assert_eq!(
            header.trim_end(),
            format!("{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape_text}, }}"),
            "{npy_name}"
        );
        assert!(header.ends_with('\n'));
        assert!(
            npy[hlen..] == image[..],
            "{npy_name}: data = the dataset's bytes"
        );
        assert_eq!(a.size, npy.len() as u64);
        let at = hlen as u64 + 7;
        assert_eq!(
            fs.read(a.ino, at, 5).unwrap(),
            npy[at as usize..(at as usize + 5).min(npy.len())],
            "{npy_name} at {at}"
        );
        sidecars += 1;

        // NAME.hdr for 1- to 3-D numeric datasets.
        let hdr_name = format!("{ds_name}.hdr");
        let Some(e) = listing.find(&hdr_name) else {
            assert!(shape.len() > 3, "{hdr_name} missing");
            assert_eq!(errno(fs.lookup(ROOT_INO, os(&hdr_name))), libc::ENOENT);
            continue;
        };
        want_names.insert(hdr_name.clone());
        assert_eq!(Some(e.ino), sidecar_ino(ds.ino, ViewKind::EnviHeader));
        let (samples, lines, bands) = match shape[..] {
            [n] => (n, 1, 1),
            [r, c] => (c, r, 1),
            [a, b, c] => (c, b, a),
            _ => panic!("{hdr_name}: {shape:?}"),
        };
        let text = String::from_utf8(read_all(&fs, e.ino)).unwrap();
        assert_eq!(
            text,
            format!(
                "ENVI\ndescription = {{h5mount dataset view}}\nsamples = {samples}\n\
                 lines = {lines}\nbands = {bands}\nheader offset = 0\n\
                 file type = ENVI Standard\ndata type = {}\ninterleave = bsq\n\
                 byte order = 0\n",
                envi_code(dtype)
            ),
            "{hdr_name}"
        );
        sidecars += 1;

        // A sidecar is a plain file: no xattrs, no listing, no link text.
        for ino in [a.ino, e.ino] {
            assert_eq!(fs.listxattr(ino, 0).unwrap(), XattrReply::Size(0));
            assert_eq!(
                errno(fs.getxattr(ino, os("user.h5.dtype"), 0)),
                libc::ENODATA
            );
            assert_eq!(errno(fs.listing(ino)), libc::ENOTDIR);
            assert_eq!(errno(fs.readlink(ino)), libc::EINVAL);
            assert_eq!(errno(fs.access(ino, libc::W_OK)), libc::EROFS);
            assert_eq!(errno(fs.access(ino, libc::X_OK)), libc::EACCES);
        }
    }
    let got: BTreeSet<String> = entry_names(&fs, ROOT_INO).into_iter().collect();
    assert_eq!(got, want_names);
    assert_eq!(
        sidecars,
        22 + 20,
        "every dataset has a .npy, all but the 4-D a .hdr"
    );

    // Found by lookup before any listing; nothing for groups, missing names or bare suffixes.
    let fs = mount_path(&data("groups_latest.h5"), view_options(true, false), None);
    let nine = fs.lookup(ROOT_INO, os("nine")).unwrap().ino;
    let d1 = fs.lookup(nine, os("d1")).unwrap();
    let npy = fs.lookup(nine, os("d1.npy")).unwrap();
    assert_eq!(Some(npy.ino), sidecar_ino(d1.ino, ViewKind::Npy));
    assert_eq!(npy.size, 128 + 16, "header of 128 bytes, 4 x <i4");
    for missing in [
        "nine.npy",
        "g0.npy",
        "d3.npy",
        ".npy",
        "d1.hdr",
        "d1.npy.npy",
    ] {
        let parent = if missing == "nine.npy" {
            ROOT_INO
        } else {
            nine
        };
        assert_eq!(
            errno(fs.lookup(parent, os(missing))),
            libc::ENOENT,
            "{missing}"
        );
    }
    // And with the views off, there are none.
    let fs = mount("groups_latest.h5");
    let nine = fs.lookup(ROOT_INO, os("nine")).unwrap().ino;
    assert_eq!(errno(fs.lookup(nine, os("d1.npy"))), libc::ENOENT);
    assert!(entry_names(&fs, nine).iter().all(|n| !n.contains('.')));
}

#[test]
fn a_sidecar_never_shadows_a_real_link() {
    // No corpus file has a link named like a sidecar, so make one the way the hostile
    // fixture's generator makes odd names: in an earliest-form copy of chunked_ext2 the
    // root group's link names sit NUL-terminated in its local heap, with no checksum; the
    // link `gz_sparse` (a 100x100 <i2 dataset) is renamed `gz_r3.npy`, the same length,
    // sorting at the same place (`gz_r3` < `gz_r3.npy` < `r2_250`), next to the real
    // dataset `gz_r3`, whose `.npy` sidecar would have that name. (h5py reads the patched
    // copy back with the new name and the same bytes.)
    let name = "chunked_ext2_earliest.h5";
    let objs = objects(name);
    let mut bytes = std::fs::read(data(name)).unwrap();
    let at = bytes
        .windows(11)
        .position(|w| w == b"\0gz_sparse\0")
        .expect("the link name in the local heap");
    assert_eq!(
        bytes.windows(9).filter(|w| *w == b"gz_sparse").count(),
        1,
        "one occurrence"
    );
    bytes[at + 1..at + 10].copy_from_slice(b"gz_r3.npy");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shadow.h5");
    std::fs::write(&path, &bytes).unwrap();
    let real_ino = objs["/gz_sparse"]["addr"].as_u64().unwrap() + 2;
    let gz_r3_ino = objs["/gz_r3"]["addr"].as_u64().unwrap() + 2;
    let shadowed = sidecar_ino(gz_r3_ino, ViewKind::Npy).unwrap();

    for listing_first in [true, false] {
        let fs = mount_path(&path, view_options(true, true), None);
        if listing_first {
            let listing = fs.listing(ROOT_INO).unwrap();
            let names = entry_names(&fs, ROOT_INO);
            assert_eq!(
                names.iter().filter(|n| *n == "gz_r3.npy").count(),
                1,
                "{names:?}"
            );
            let e = listing.find("gz_r3.npy").unwrap();
            assert_eq!((e.ino, e.kind), (real_ino, FileKind::RegularFile));
            assert!(listing.entries.iter().all(|e| e.ino != shadowed));
            // The real link's own sidecars, and gz_r3's other one, are there.
            for n in ["gz_r3.npy.npy", "gz_r3.npy.hdr", "gz_r3.hdr"] {
                assert!(listing.find(n).is_some(), "{n} in {names:?}");
            }
        }
        let a = fs.lookup(ROOT_INO, os("gz_r3.npy")).unwrap();
        assert_eq!(a.ino, real_ino, "listing first: {listing_first}");
        assert_eq!(a.size, 20000);
        assert_eq!(
            Some(sha256(&read_all(&fs, a.ino)).as_str()),
            objs["/gz_sparse"]["sha256"].as_str()
        );
        assert_eq!(
            xattr_text(&fs, a.ino, "user.h5.shape"),
            "(100, 100)",
            "the dataset's xattrs, not a sidecar's"
        );
        let gz_r3 = fs.lookup(ROOT_INO, os("gz_r3")).unwrap();
        assert_eq!(gz_r3.ino, gz_r3_ino);
        let own = fs.lookup(ROOT_INO, os("gz_r3.npy.npy")).unwrap();
        assert_eq!(Some(own.ino), sidecar_ino(real_ino, ViewKind::Npy));
    }
}

// ------------------------------------------------------------------------------- directories

/// A directory with HDF5 files under an HDF5 name and under none, a text file, and a
/// subdirectory holding a file with external links and their target file.
fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::copy(data("groups_latest.h5"), root.join("groups.h5")).unwrap();
    std::fs::copy(data("dtypes_latest.h5"), root.join("noext")).unwrap();
    std::fs::write(root.join("notes.txt"), b"beamtime notes\n").unwrap();
    for f in ["links_latest.h5", "exttarget_latest.h5"] {
        std::fs::copy(data(f), root.join("sub").join(f)).unwrap();
    }
}

#[test]
fn a_directory_mount_shows_hdf5_files_as_directories_and_lists_without_opening_them() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("tree");
    make_tree(&root);
    let fs = mount_dir(&root, None);
    use FileKind::*;
    let listing = fs.listing(ROOT_INO).unwrap();
    let kinds: Vec<(&str, FileKind)> = listing.entries[2..]
        .iter()
        .map(|e| (e.name.as_str(), e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("groups.h5", Directory),
            ("noext", Directory),
            ("notes.txt", RegularFile),
            ("sub", Directory),
        ],
        "HDF5 found by signature, not by name"
    );
    let sub = fs.lookup(ROOT_INO, os("sub")).unwrap();
    assert_eq!(
        entry_names(&fs, sub.ino),
        ["exttarget_latest.h5", "links_latest.h5"]
    );
    // The entries with their attributes, as the kernel lists (readdirplus), then a stat of
    // each (the kernel holds them now).
    let mut seen = 0;
    fs.readdirplus(ROOT_INO, 2, |e, _, a, _| {
        assert_eq!((a.ino, a.kind), (e.ino, e.kind), "{}", e.name);
        assert_eq!(a.perm, if e.kind == Directory { 0o555 } else { 0o444 });
        assert_eq!((a.uid, a.gid), (UID, GID));
        seen += 1;
        false
    })
    .unwrap();
    assert_eq!(seen, listing.entries.len() - 2);
    for e in &listing.entries[2..] {
        assert_eq!(fs.getattr(e.ino).unwrap().kind, e.kind, "{}", e.name);
    }
    // Listing and stat of every entry parsed nothing: the HDF5 files are known, not opened.
    assert_eq!(counter(&fs, "files_known"), 4);
    assert_eq!(counter(&fs, "files_opened"), 0);
    assert_eq!(counter(&fs, "files_open"), 0);

    // Other files are passed through byte for byte, read-only.
    let notes = fs.lookup(ROOT_INO, os("notes.txt")).unwrap();
    assert_eq!((notes.kind, notes.size), (RegularFile, 15));
    fs.open(notes.ino, libc::O_RDONLY).unwrap();
    assert_eq!(fs.open_handle(notes.ino, libc::O_RDONLY).unwrap(), 0);
    assert_eq!(errno(fs.open(notes.ino, libc::O_WRONLY)), libc::EROFS);
    assert_eq!(errno(fs.open(notes.ino, libc::O_RDWR)), libc::EROFS);
    assert_eq!(fs.read(notes.ino, 0, 100).unwrap(), b"beamtime notes\n");
    assert_eq!(fs.read(notes.ino, 9, 3).unwrap(), b"not");
    assert_eq!(fs.read(notes.ino, 15, 10).unwrap(), b"");
    assert_eq!(errno(fs.listing(notes.ino)), libc::ENOTDIR);
    assert_eq!(errno(fs.lookup(notes.ino, os("x"))), libc::ENOTDIR);
    assert_eq!(fs.listxattr(notes.ino, 0).unwrap(), XattrReply::Size(0));
    assert_eq!(errno(fs.access(notes.ino, libc::W_OK)), libc::EROFS);
    for dir in [ROOT_INO, sub.ino] {
        assert_eq!(errno(fs.open(dir, libc::O_RDONLY)), libc::EISDIR);
        assert_eq!(errno(fs.read(dir, 0, 10)), libc::EISDIR);
        assert_eq!(errno(fs.access(dir, libc::W_OK)), libc::EROFS);
    }
    // The passed-through file was opened for its reads (once, then kept).
    assert_eq!(counter(&fs, "files_known"), 5);
    assert_eq!(counter(&fs, "files_opened"), 1);

    // Inside an HDF5 file: its tree, opened at first use.
    let groups = fs.lookup(ROOT_INO, os("groups.h5")).unwrap();
    assert_eq!(
        (groups.kind, groups.perm, groups.size),
        (Directory, 0o555, 0)
    );
    let want: Vec<&str> = objects("groups_latest.h5")["/"]["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(entry_names(&fs, groups.ino), want);
    assert_eq!(counter(&fs, "files_opened"), 2);
    let d1 = attr_of(&fs, "groups.h5/nine/d1");
    assert_eq!(
        Some(sha256(&read_all(&fs, d1.ino)).as_str()),
        objects("groups_latest.h5")["/nine/d1"]["sha256"].as_str()
    );
    assert!(
        d1.ino >= EXTERNAL_BASE,
        "objects numbered per file: {}",
        d1.ino
    );
    assert_eq!(errno(fs.open(groups.ino, libc::O_RDONLY)), libc::EISDIR);
    let dtypes = attr_of(&fs, "noext");
    assert_eq!(
        entry_names(&fs, dtypes.ino).len(),
        objects("dtypes_latest.h5")["/"]["links"]
            .as_array()
            .unwrap()
            .len()
    );
    assert_eq!(counter(&fs, "files_opened"), 3);

    // An external link between two files of the tree reaches the object browsing reaches.
    let via_link = attr_of(&fs, "sub/links_latest.h5/ext/existing");
    let browsed = attr_of(&fs, "sub/exttarget_latest.h5/g/data");
    assert_eq!(via_link, browsed);
    assert_eq!(counter(&fs, "files_opened"), 5);
    assert_eq!(counter(&fs, "files_known"), 5);
    // Stable numbers.
    assert_eq!(fs.lookup(ROOT_INO, os("notes.txt")).unwrap().ino, notes.ino);
    assert_eq!(attr_of(&fs, "groups.h5/nine/d1").ino, d1.ino);
    assert_eq!(errno(fs.lookup(ROOT_INO, os("missing.h5"))), libc::ENOENT);
}

// ------------------------------------------------------------------------------- refresh

/// The grow fixtures' rows (`fixtures/grow/rows.py`): `gz[i, j] = i * 4 + j + 1` (int32, 3
/// columns), `plain[i] = i + 0.5` (float64).
fn gz_rows(rows: u64) -> Vec<u8> {
    (0..rows)
        .flat_map(|i| (0..3).map(move |j| (i * 4 + j + 1) as i32))
        .flat_map(i32::to_le_bytes)
        .collect()
}

fn plain_rows(rows: u64) -> Vec<u8> {
    (0..rows)
        .flat_map(|i| (i as f64 + 0.5).to_le_bytes())
        .collect()
}

#[test]
fn a_refresh_serves_a_file_replaced_on_disk() {
    // Two snapshots of one file an application rewrote (earliest form): 20 rows, then 45
    // rows and a new group /extra. The new one replaces the old by rename (a new inode).
    let (_dir, path) = copied(fixture("grow/plain_a.h5"));
    let mut watcher = Watcher::new(&path, Some(Stamp::of(&path).unwrap()));
    let fs = refreshing(&path);
    let gz = attr_of(&fs, "/data/gz");
    let plain = attr_of(&fs, "/data/plain");
    let fixed = attr_of(&fs, "/fixed");
    assert_eq!((gz.size, plain.size), (20 * 12, 20 * 8));
    assert_eq!(read_all(&fs, gz.ino), gz_rows(20));
    let fixed_bytes = read_all(&fs, fixed.ino);
    assert_eq!(entry_names(&fs, ROOT_INO), ["data", "fixed"]);
    assert_eq!(watcher.check(&fs), Outcome::Unchanged);

    replace_file(&path, &std::fs::read(fixture("grow/plain_b.h5")).unwrap());
    assert_eq!(
        attr_of(&fs, "/data/gz"),
        gz,
        "served as first read until the refresh"
    );
    assert_eq!(entry_names(&fs, ROOT_INO), ["data", "fixed"]);
    let Outcome::Refreshed(inv) = watcher.check(&fs) else {
        panic!("not refreshed");
    };
    for want in [
        // Grown: the kernel drops its pages from the old end's page on (here 0).
        Invalidation::Inode {
            ino: gz.ino,
            from: Some(0),
        },
        Invalidation::Inode {
            ino: plain.ino,
            from: Some(0),
        },
        Invalidation::Entry {
            parent: ROOT_INO,
            name: "extra".into(),
        },
        Invalidation::Inode {
            ino: ROOT_INO,
            from: Some(0),
        },
    ] {
        assert!(inv.contains(&want), "{want:?} in {inv:?}");
    }
    assert!(
        !inv.iter()
            .any(|i| matches!(i, Invalidation::Inode { ino, .. } if *ino == fixed.ino)),
        "unchanged dataset: {inv:?}"
    );
    assert_eq!(entry_names(&fs, ROOT_INO), ["data", "extra", "fixed"]);
    assert_eq!(attr_of(&fs, "/data/gz").ino, gz.ino, "same inode numbers");
    assert_eq!(fs.getattr(gz.ino).unwrap().size, 45 * 12);
    assert_eq!(read_all(&fs, gz.ino), gz_rows(45));
    assert_eq!(read_all(&fs, plain.ino), plain_rows(45));
    assert_eq!(read_all(&fs, fixed.ino), fixed_bytes);
    assert_eq!(read_all(&fs, attr_of(&fs, "/extra/note").ino), [7, 8, 9]);
    assert_eq!(counter(&fs, "refreshes"), 1);
    assert_eq!(watcher.check(&fs), Outcome::Unchanged);
}

/// After a refresh, a group whose header address was shown before under another name (a
/// renamed group; here, a replacing file whose `/a` sits where the old file's `/level0`
/// did, address 179) is a directory where it is found now, with the same inode number. It
/// used to be a symlink to the old, now missing path (nodes kept the path they were first
/// shown at), and `/a/data` could not be reached.
#[test]
fn after_a_refresh_a_group_is_a_directory_at_its_new_path() {
    let (_dir, path) = copied(data("groups_latest.h5"));
    let fs = refreshing(&path);
    assert_eq!(entry_names(&fs, ROOT_INO)[1], "level0");
    let level0 = fs.lookup(ROOT_INO, os("level0")).unwrap();
    // Both files have their root group at address 48 (latest form): taken as the same file.
    replace_file(&path, &std::fs::read(data("links_latest.h5")).unwrap());
    fs.refresh().unwrap();
    assert_eq!(entry_names(&fs, ROOT_INO)[0], "a");
    let a = fs.lookup(ROOT_INO, os("a")).unwrap();
    let text = fs
        .readlink(a.ino)
        .map(|t| String::from_utf8_lossy(&t).into_owned());
    assert_eq!(a.kind, FileKind::Directory, "/a is a symlink: {text:?}");
    assert_eq!(a.ino, level0.ino, "the same header address");
    let d = attr_of(&fs, "/a/data");
    assert_eq!(
        Some(sha256(&read_all(&fs, d.ino)).as_str()),
        objects("links_latest.h5")["/a/data"]["sha256"].as_str()
    );
}

#[test]
fn a_refresh_keeps_the_old_view_while_a_shown_object_does_not_read() {
    // The refresh checks every object the kernel was shown against the new file (a writer
    // caught mid-write leaves objects that do not read): one that is gone keeps the old view.
    let (_dir, path) = copied(data("groups_latest.h5"));
    let fs = refreshing(&path);
    let d1 = attr_of(&fs, "/nine/d1");
    let before = read_all(&fs, d1.ino);
    replace_file(&path, &std::fs::read(data("links_latest.h5")).unwrap());
    let why = fs.refresh().expect_err("/nine/d1 is not in the new file");
    assert!(why.contains("/nine"), "{why}");
    assert_eq!(counter(&fs, "refreshes"), 0);
    assert_eq!(attr_of(&fs, "/nine/d1"), d1, "old view still served");
    assert_eq!(read_all(&fs, d1.ino), before);
}

#[test]
fn a_directory_refresh_sees_replaced_files_and_new_entries() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("tree");
    std::fs::create_dir(&root).unwrap();
    std::fs::copy(data("groups_latest.h5"), root.join("a.h5")).unwrap();
    let fs = mount_dir(&root, Some(Duration::from_secs(3600)));
    assert_eq!(entry_names(&fs, ROOT_INO), ["a.h5"]);
    let a = fs.lookup(ROOT_INO, os("a.h5")).unwrap();
    assert_eq!(entry_names(&fs, a.ino)[0], "empty");
    let nine = attr_of(&fs, "a.h5/nine");
    assert!(fs.refresh_dir().is_empty(), "nothing changed");

    replace_file(
        &root.join("a.h5"),
        &std::fs::read(data("links_latest.h5")).unwrap(),
    );
    std::fs::write(root.join("b.txt"), b"new").unwrap();
    // A time no earlier check can have seen: the directory's change does not hinge on the
    // clock having ticked since the listing was built.
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    std::fs::File::open(&root)
        .unwrap()
        .set_modified(past)
        .unwrap();

    let inv = fs.refresh_dir();
    for want in [
        Invalidation::Entry {
            parent: ROOT_INO,
            name: "b.txt".into(),
        },
        Invalidation::Inode {
            ino: a.ino,
            from: Some(0),
        },
        Invalidation::Inode {
            ino: nine.ino,
            from: Some(0),
        },
    ] {
        assert!(inv.contains(&want), "{want:?} in {inv:?}");
    }
    assert_eq!(entry_names(&fs, ROOT_INO), ["a.h5", "b.txt"]);
    assert_eq!(fs.lookup(ROOT_INO, os("a.h5")).unwrap().ino, a.ino);
    let want: Vec<&str> = objects("links_latest.h5")["/"]["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(entry_names(&fs, a.ino), want, "the new file's tree");
    assert_eq!(fs.read(attr_of(&fs, "b.txt").ino, 0, 10).unwrap(), b"new");
    assert!(fs.refresh_dir().is_empty(), "settled");
}

// ----------------------------------------------------------------------- forgotten inodes

/// What the kernel holds after a walk: how many times each inode was handed to it (FUSE's
/// `nlookup`), and each path's attributes.
#[derive(Default)]
struct Held {
    counts: HashMap<u64, u64>,
    attrs: BTreeMap<String, Attr>,
}

/// Read every directory below `path` (number `ino`) with `readdirplus` as the kernel does,
/// `page` entries per request, and recurse into the directories listed; what the kernel
/// would hold goes to `held` (`.` and `..` are not counted, as the kernel counts them not).
fn readdirplus_tree(fs: &H5Fs, ino: u64, path: &str, page: usize, held: &mut Held) {
    let mut offset = 0;
    let mut dirs = Vec::new();
    loop {
        let mut taken = Vec::new();
        fs.readdirplus(ino, offset, |e, next, attr, _ttl| {
            if taken.len() == page {
                return true;
            }
            taken.push((e.name.to_string(), next, *attr));
            false
        })
        .unwrap_or_else(|e| panic!("readdirplus {path}: {e:?}"));
        let Some(&(_, last, _)) = taken.last() else {
            break;
        };
        offset = last;
        for (name, _, attr) in taken {
            if name == "." || name == ".." {
                continue;
            }
            *held.counts.entry(attr.ino).or_default() += 1;
            let p = format!("{path}/{name}");
            if attr.kind == FileKind::Directory {
                dirs.push((attr.ino, p.clone()));
            }
            held.attrs.insert(p, attr);
        }
    }
    for (ino, p) in dirs {
        readdirplus_tree(fs, ino, &p, page, held);
    }
}

/// Walk `fs` with `readdirplus` and a lookup of every entry, forget it all as the kernel
/// would, and find it again: the table shrinks to the root, every entry comes back under
/// the same number with the same attributes.
fn forget_everything_and_find_it_again(fs: &H5Fs) -> usize {
    let mut held = Held::default();
    readdirplus_tree(fs, ROOT_INO, "", 7, &mut held);
    assert!(held.attrs.len() > 5, "{} entries", held.attrs.len());
    // `ls -l` stats every entry too: lookups, one count each.
    for (path, attr) in &held.attrs {
        let again = walk(fs, path).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        assert_eq!(again, *attr, "{path}");
        *held.counts.entry(attr.ino).or_default() += 1;
        for comp in path.match_indices('/').skip(1) {
            // The walk looked up each directory on the way as well.
            let dir = &path[..comp.0];
            *held.counts.entry(held.attrs[dir].ino).or_default() += 1;
        }
    }
    let known = held.counts.keys().filter(|&&i| i != ROOT_INO).count();
    assert_eq!(
        fs.known_inodes(),
        1 + known,
        "the root and what the kernel holds"
    );
    let stats = String::from_utf8(
        match fs.getxattr(ROOT_INO, os(STATS_XATTR), 4096).unwrap() {
            XattrReply::Data(d) => d,
            XattrReply::Size(_) => panic!("size"),
        },
    )
    .unwrap();
    assert!(
        stats.contains(&format!("\ninodes {}\n", 1 + known)),
        "{stats}"
    );
    // The kernel gives the counts back (in any order: here the directories first).
    let dirs: BTreeSet<u64> = held
        .attrs
        .values()
        .filter(|a| a.kind == FileKind::Directory)
        .map(|a| a.ino)
        .collect();
    let mut order: Vec<(u64, u64)> = held.counts.iter().map(|(&i, &c)| (i, c)).collect();
    order.sort_by_key(|&(ino, _)| (!dirs.contains(&ino), ino));
    for (ino, count) in order {
        // In two parts, as batches may split them.
        fs.forget(ino, count - count / 2);
        fs.forget(ino, count / 2);
    }
    assert_eq!(fs.known_inodes(), 1, "only the root is left");
    // Found again: the same numbers, working attributes.
    for (path, attr) in &held.attrs {
        let again = walk(fs, path).unwrap_or_else(|e| panic!("{path} after forget: {e:?}"));
        assert_eq!(again, *attr, "{path} after forget");
        assert_eq!(fs.getattr(again.ino).unwrap(), *attr, "{path}");
    }
    held.attrs.len()
}

#[test]
fn forgotten_inodes_are_dropped_and_found_again_under_the_same_numbers() {
    for form in ["earliest", "latest"] {
        // Dense and old-style groups of hundreds of links, soft and hard links.
        let seen = forget_everything_and_find_it_again(&mount(&format!("biggroups_{form}.h5")));
        assert!(seen > 5000, "{seen}");
        // Soft, external and hard links, committed datatypes.
        forget_everything_and_find_it_again(&mount(&format!("links_{form}.h5")));
    }
    // Sidecars keep their datasets known.
    let npy = mount_path(&data("groups_latest.h5"), view_options(true, true), None);
    forget_everything_and_find_it_again(&npy);
    // A directory mount: entries numbered from a counter, objects of several files.
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("tree");
    make_tree(&root);
    forget_everything_and_find_it_again(&mount_dir(&root, None));
}

#[test]
fn hard_links_share_a_number_while_known_and_after() {
    for form in ["earliest", "latest"] {
        let fs = mount(&format!("links_{form}.h5"));
        let a = attr_of(&fs, "/a/data");
        let alias = attr_of(&fs, "/hard/data_alias1");
        assert_eq!(a.ino, alias.ino);
        assert_eq!(a.nlink, 3, "three links");
        // The kernel forgets the first name's count only: still known, still shared.
        fs.forget(a.ino, 1);
        assert_eq!(attr_of(&fs, "/hard/data_alias2").ino, a.ino);
        fs.forget(a.ino, 2);
        let before = fs.known_inodes();
        // Every count given back: gone, and a stat of a new lookup works as before.
        assert_eq!(attr_of(&fs, "/hard/data_alias2"), a);
        assert!(fs.known_inodes() >= before);
        assert_eq!(fs.getattr(a.ino).unwrap(), a);
    }
}
