//! Array datatypes stored in version-1 datatype messages, as libhdf5 before 1.8 wrote them and
//! old PyTables files hold them (`mount-tests/fixtures/pytables/`, from `make_pytables.py`):
//! tables with array and nested columns, VLArrays (one of them over an array type), CArrays and
//! EArrays of array atoms, h5py datasets of array and compound types, a committed array type,
//! attributes of array types. Every object h5py lists appears, through the library and through
//! the mount, with h5py's dtype, shape and bytes; the variable-length datasets behave as every
//! vlen dataset does (no byte image; the mount serves their rows as text).

mod harness;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use h5mount::error::ErrorClass;
use h5mount::format::messages::datatype::{Datatype, TypeClass};
use h5mount::model::{Dataset, File, LinkTarget, ObjectId, ObjectKind, OpenOptions};
use h5mount::views::text::TextView;
use harness::{getxattr, listxattr, read_three_ways, sha256, Mount};
use serde_json::Value;

const FILES: [&str; 2] = ["tables_v1.h5", "h5py_v1.h5"];

fn dir() -> PathBuf {
    harness::fixture("pytables")
}

/// expected.json by file, then by object path (`/`, `/runs/calib`).
fn expected() -> BTreeMap<String, BTreeMap<String, Value>> {
    let v = harness::expected_json("pytables");
    let mut out: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (k, e) in v.as_object().unwrap() {
        let (file, path) = k.split_once('/').unwrap();
        out.entry(file.to_string())
            .or_default()
            .insert(format!("/{path}"), e.clone());
    }
    assert_eq!(out.keys().collect::<Vec<_>>(), {
        let mut f = FILES.to_vec();
        f.sort();
        f
    });
    out
}

fn kind_name(k: ObjectKind) -> &'static str {
    match k {
        ObjectKind::Group => "group",
        ObjectKind::Dataset => "dataset",
        ObjectKind::NamedDatatype => "datatype",
        ObjectKind::Unknown => "unknown",
    }
}

/// Every object reachable from the root through hard links: path -> (id, kind).
fn walk(f: &File) -> BTreeMap<String, (ObjectId, ObjectKind)> {
    let mut out = BTreeMap::new();
    out.insert("/".to_string(), (f.root(), ObjectKind::Group));
    let mut todo = vec![("/".to_string(), f.root())];
    while let Some((path, id)) = todo.pop() {
        for link in f.links(id).unwrap().iter() {
            let LinkTarget::Hard(child) = link.target else {
                panic!("{path}/{}: not a hard link", link.name)
            };
            let p = format!("{}/{}", path.trim_end_matches('/'), link.name);
            let kind = f.kind(child).unwrap_or_else(|e| panic!("{p}: {e}"));
            if kind == ObjectKind::Group {
                todo.push((p.clone(), child));
            }
            out.insert(p, (child, kind));
        }
    }
    out
}

/// Array types stored as version 1 anywhere in `t`.
fn arrays_v1(t: &Datatype) -> u64 {
    let own = u64::from(t.version == 1 && matches!(t.class, TypeClass::Array { .. }));
    own + match &t.class {
        TypeClass::Compound { members } => members.iter().map(|m| arrays_v1(&m.dtype)).sum(),
        TypeClass::Enum { base, .. }
        | TypeClass::VarLen { base, .. }
        | TypeClass::Array { base, .. }
        | TypeClass::Complex { base } => arrays_v1(base),
        _ => 0,
    }
}

fn shape(e: &Value) -> Vec<u64> {
    e["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect()
}

/// A shape the way the `user.h5.shape` xattr writes it: `(4,)`, `(2, 3)`.
fn tuple(dims: &[u64]) -> String {
    let parts: Vec<String> = dims.iter().map(u64::to_string).collect();
    match parts.len() {
        1 => format!("({},)", parts[0]),
        _ => format!("({})", parts.join(", ")),
    }
}

/// The text view of a vlen dataset with rows `values` (h5py's lists): one line per row, its
/// elements separated by spaces, array elements in brackets. The fixture's floats are exact
/// binary fractions, which Rust's `{:?}` writes as Python's repr does.
fn vlen_text(values: &Value) -> String {
    fn element(v: &Value) -> String {
        match v {
            Value::Array(items) => {
                let inner: Vec<String> = items.iter().map(element).collect();
                format!("[{}]", inner.join(" "))
            }
            Value::Number(n) if n.is_i64() => n.to_string(),
            Value::Number(n) => format!("{:?}", n.as_f64().unwrap()),
            other => panic!("unexpected value {other}"),
        }
    }
    let mut s = String::new();
    for row in values.as_array().unwrap() {
        let items: Vec<String> = row.as_array().unwrap().iter().map(element).collect();
        s.push_str(&items.join(" "));
        s.push('\n');
    }
    s
}

fn check_dataset(f: &Arc<File>, what: &str, d: &Arc<Dataset>, e: &Value) {
    let t = &d.info.dtype;
    assert_eq!(t.numpy_str(), e["dtype"].as_str().unwrap(), "{what}");
    assert_eq!(d.info.shape, shape(e), "{what}");
    assert_eq!(arrays_v1(t), e["arrays_v1"].as_u64().unwrap(), "{what}");
    if let Some(cols) = e["columns"].as_object() {
        let TypeClass::Compound { members } = &t.class else {
            panic!("{what}: a table that is not a compound")
        };
        assert_eq!(members.len(), cols.len(), "{what}");
        for m in members {
            assert_eq!(
                cols.get(&m.name).and_then(Value::as_str),
                Some(m.dtype.numpy_str().as_str()),
                "{what}: column {}",
                m.name
            );
        }
    }
    match e["sha256"].as_str() {
        Some(digest) => {
            let bytes = d.read_all().unwrap_or_else(|err| panic!("{what}: {err}"));
            assert_eq!(bytes.len() as u64, e["len"].as_u64().unwrap(), "{what}");
            assert_eq!(sha256(&bytes), digest, "{what}");
        }
        None => {
            // Variable-length: 16-byte heap references, no byte image, the rows as text.
            assert!(!t.is_fixed_size(), "{what}");
            let n: u64 = d.info.shape.iter().product();
            assert_eq!(d.len(), n * 16, "{what}");
            let err = d.read_all().expect_err(what);
            assert_eq!(err.errno_class(), ErrorClass::Unsupported, "{what}: {err}");
            assert!(d.unreadable_reason().is_some(), "{what}");
            let view = TextView::new(f.clone(), d).unwrap_or_else(|err| panic!("{what}: {err}"));
            let len = view.len().unwrap() as usize;
            let mut buf = vec![0u8; len];
            assert_eq!(view.read_at(0, &mut buf).unwrap(), len, "{what}");
            assert_eq!(
                String::from_utf8(buf).unwrap(),
                vlen_text(&e["values"]),
                "{what}"
            );
        }
    }
}

#[test]
fn old_array_datatypes_read_in_the_library() {
    let mut v1 = 0;
    for (file, want) in expected() {
        let f = File::open(&dir().join(&file), &OpenOptions::default()).unwrap();
        let found = walk(&f);
        assert_eq!(
            found.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{file}: objects"
        );
        for (path, e) in &want {
            let what = format!("{file}:{path}");
            let (id, kind) = found[path];
            assert_eq!(kind_name(kind), e["kind"].as_str().unwrap(), "{what}");
            match kind {
                ObjectKind::Dataset => {
                    let d = f.dataset(id).unwrap_or_else(|err| panic!("{what}: {err}"));
                    check_dataset(&f, &what, &d, e);
                }
                ObjectKind::NamedDatatype => {
                    let t = f
                        .named_datatype(id)
                        .unwrap_or_else(|err| panic!("{what}: {err}"));
                    assert_eq!(t.numpy_str(), e["dtype"].as_str().unwrap(), "{what}");
                    assert_eq!(arrays_v1(&t), e["arrays_v1"].as_u64().unwrap(), "{what}");
                }
                _ => {}
            }
            v1 += e["arrays_v1"].as_u64().unwrap_or(0);
            let attrs = f
                .attributes(id)
                .unwrap_or_else(|err| panic!("{what}: {err}"));
            for (name, a) in e["attrs"].as_object().into_iter().flatten() {
                let what = format!("{what} attribute {name}");
                let got = attrs
                    .iter()
                    .find(|x| &x.name == name)
                    .unwrap_or_else(|| panic!("{what}: missing"));
                assert_eq!(
                    got.dtype.numpy_str(),
                    a["dtype"].as_str().unwrap(),
                    "{what}"
                );
                assert_eq!(arrays_v1(&got.dtype), a["arrays_v1"].as_u64().unwrap());
                assert_eq!(got.raw.len() as u64, a["len"].as_u64().unwrap(), "{what}");
                assert_eq!(sha256(&got.raw), a["sha256"].as_str().unwrap(), "{what}");
                v1 += a["arrays_v1"].as_u64().unwrap();
            }
        }
    }
    // The fixture really holds version-1 arrays (the committed one counted twice: its own
    // entry and the dataset that uses it).
    assert!(v1 >= 18, "{v1} version-1 array types");
}

#[test]
fn old_array_datatypes_read_through_the_mount() {
    for (file, want) in expected() {
        let m = Mount::background(&dir().join(&file), &[]);
        // The mounted tree is exactly the objects h5py lists, and every file reads.
        let tree = harness::walk(m.path());
        let listed: Vec<String> = want
            .keys()
            .filter(|p| p.as_str() != "/")
            .map(|p| p.trim_start_matches('/').to_string())
            .collect();
        assert_eq!(
            tree.keys().cloned().collect::<Vec<_>>(),
            listed,
            "{file}: {tree:?}"
        );
        for (path, e) in &want {
            let what = format!("{file}:{path}");
            let p = m.at(path);
            let md = std::fs::metadata(&p).unwrap_or_else(|err| panic!("{what}: {err}"));
            let xattr = |name: &str| {
                getxattr(&p, name)
                    .map(|v| String::from_utf8(v).unwrap())
                    .unwrap_or_else(|errno| panic!("{what}: {name}: errno {errno}"))
            };
            match e["kind"].as_str().unwrap() {
                "group" => assert!(md.is_dir(), "{what}"),
                "datatype" => {
                    assert!(md.is_file() && md.len() == 0, "{what}");
                    assert_eq!(xattr("user.h5.dtype"), e["dtype"].as_str().unwrap());
                }
                _ => {
                    assert_eq!(xattr("user.h5.dtype"), e["dtype"].as_str().unwrap());
                    assert_eq!(xattr("user.h5.shape"), tuple(&shape(e)), "{what}");
                    let (len, digest) = match e["sha256"].as_str() {
                        Some(d) => (e["len"].as_u64().unwrap(), d.to_string()),
                        None => {
                            let text = vlen_text(&e["values"]);
                            (text.len() as u64, sha256(text.as_bytes()))
                        }
                    };
                    assert_eq!(md.len(), len, "{what}");
                    assert_eq!(
                        read_three_ways(&p, len as usize)
                            .unwrap_or_else(|err| panic!("{what}: {err}")),
                        digest,
                        "{what}"
                    );
                }
            }
            let names = listxattr(&p).unwrap_or_else(|errno| panic!("{what}: errno {errno}"));
            for name in e["attrs"].as_object().into_iter().flatten().map(|(k, _)| k) {
                let full = format!("user.{name}");
                assert!(names.contains(&full), "{what}: {full} not listed");
                assert!(!xattr(&full).is_empty(), "{what}: {full} empty");
            }
        }
    }
}
