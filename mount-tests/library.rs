//! The library against the fixture corpus, without mounting: for every fixture file and every
//! object the manifest lists (what h5py saw), the model must report the same kind, links,
//! dtype, shape, layout, chunking, filters, fill value and attributes, and every dataset's byte
//! image must hash to h5py's `ds[()].tobytes()` and agree with itself at random ranges.

mod harness;

use std::collections::BTreeMap;
use std::sync::Arc;

use h5mount::error::ErrorClass;
use h5mount::model::{File, LinkTarget, ObjectId, ObjectKind, OpenOptions};
use serde_json::Value;

/// Deterministic pseudo-random numbers (xorshift) for range checks.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Mismatches found in one file.
struct Report {
    file: String,
    failures: Vec<String>,
    checks: usize,
    /// Datasets whose filters this build does not decode (checked to fail as unsupported).
    unsupported: Vec<String>,
}

impl Report {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.checks += 1;
        if !ok {
            self.failures.push(format!("{}: {}", self.file, what()));
        }
    }
}

fn parent_and_name(path: &str) -> (&str, &str) {
    let i = path.rfind('/').unwrap();
    (if i == 0 { "/" } else { &path[..i] }, &path[i + 1..])
}

fn read_all(d: &h5mount::model::Dataset) -> Result<Vec<u8>, String> {
    d.read_all().map_err(|e| e.to_string())
}

fn check_dataset(r: &mut Report, f: &Arc<File>, path: &str, id: ObjectId, o: &Value) {
    let d = match f.dataset(id) {
        Ok(d) => d,
        Err(e) => return r.check(false, || format!("{path}: dataset() failed: {e}")),
    };
    let i = &d.info;
    let dt = i.dtype.numpy_str();
    r.check(o["dtype"] == dt.as_str(), || {
        format!("{path}: dtype {dt} != {}", o["dtype"])
    });
    // h5py reports the in-memory size for vlen types (a pointer), not the 16-byte file element.
    if let Some(size) = o["itemsize"].as_u64().filter(|_| !dt.starts_with("vlen")) {
        r.check(size == i.dtype.size as u64, || {
            format!("{path}: itemsize {} != {size}", i.dtype.size)
        });
    }
    match o["shape"].as_array() {
        None => r.check(i.null, || format!("{path}: expected a null dataspace")),
        Some(s) => {
            let want: Vec<u64> = s.iter().map(|v| v.as_u64().unwrap()).collect();
            r.check(want == i.shape, || {
                format!("{path}: shape {:?} != {want:?}", i.shape)
            });
        }
    }
    if let Some(m) = o["maxshape"].as_array() {
        let want: Vec<u64> = m.iter().map(|v| v.as_u64().unwrap_or(u64::MAX)).collect();
        let got = i.max_shape.clone().unwrap_or_else(|| i.shape.clone());
        r.check(want == got, || {
            format!("{path}: maxshape {got:?} != {want:?}")
        });
    }
    if let Some(l) = o["layout"].as_str() {
        r.check(l == i.layout.name(), || {
            format!("{path}: layout {} != {l}", i.layout)
        });
    }
    if let Some(c) = o["chunks"].as_array() {
        let want: Vec<u64> = c.iter().map(|v| v.as_u64().unwrap()).collect();
        r.check(Some(&want) == i.chunk_shape.as_ref(), || {
            format!("{path}: chunks {:?} != {want:?}", i.chunk_shape)
        });
    }
    if let Some(x) = o["chunk_index"].as_str() {
        r.check(Some(x) == i.chunk_index.map(|k| k.name()), || {
            format!("{path}: chunk index {:?} != {x}", i.chunk_index)
        });
    }
    if let Some(fl) = o["filters"].as_array() {
        let want: Vec<(u64, Vec<u64>)> = fl
            .iter()
            .map(|f| {
                let cd = f["cd"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                (f["id"].as_u64().unwrap(), cd)
            })
            .collect();
        let got: Vec<(u64, Vec<u64>)> = i
            .filters
            .iter()
            .map(|f| {
                (
                    f.id as u64,
                    f.client_data.iter().map(|&v| v as u64).collect(),
                )
            })
            .collect();
        r.check(want == got, || {
            format!("{path}: filters {got:?} != {want:?}")
        });
    }
    if let Some(fv) = o["fillvalue_hex"].as_str() {
        let got = i
            .fill_value
            .as_deref()
            .map(harness::hex)
            .unwrap_or_else(|| "0".repeat(2 * i.dtype.size as usize));
        r.check(got == fv, || format!("{path}: fill value {got} != {fv}"));
    }
    if let Some(nbytes) = o["nbytes"].as_u64() {
        r.check(d.len() == nbytes, || {
            format!("{path}: len {} != nbytes {nbytes}", d.len())
        });
    }
    // Where libhdf5 converts on read (space-padded strings, n-bit offsets), the manifest also
    // records the digest of the stored representation, which is what h5mount serves.
    let Some(sha) = o["raw_sha256"].as_str().or(o["sha256"].as_str()) else {
        return;
    };
    // Filters this build cannot decode: reads must fail as unsupported (EOPNOTSUPP), nothing else.
    let missing: Vec<u16> = i
        .filters
        .iter()
        .map(|f| f.id)
        .filter(|&id| !h5mount::filters::is_supported(id))
        .collect();
    if !missing.is_empty() {
        let mut b = [0u8; 16];
        let err = d.read_at(0, &mut b).err();
        let ok = matches!(&err, Some(e) if e.errno_class() == ErrorClass::Unsupported);
        r.check(ok, || {
            format!("{path}: filters {missing:?} unsupported, but read gave {err:?}")
        });
        r.unsupported.push(format!("{path} (filters {missing:?})"));
        return;
    }
    let all = match read_all(&d) {
        Ok(b) => b,
        Err(e) => return r.check(false, || format!("{path}: read failed: {e}")),
    };
    let got = harness::sha256(&all);
    r.check(got == sha, || {
        format!("{path}: sha256 of {} bytes differs", all.len())
    });
    if all.is_empty() {
        return;
    }
    // Random ranges agree with the whole read (itself checked against h5py above).
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ id.0);
    for _ in 0..24 {
        let off = rng.next() % all.len() as u64;
        let len = 1 + rng.next() % (all.len() as u64 - off).min(70_000);
        let mut buf = vec![0u8; len as usize];
        match d.read_at(off, &mut buf) {
            Ok(n) => r.check(
                n == buf.len() && buf[..] == all[off as usize..(off + len) as usize],
                || format!("{path}: range {off}+{len} differs"),
            ),
            Err(e) => r.check(false, || format!("{path}: range {off}+{len}: {e}")),
        }
    }
    let mut past = [0u8; 8];
    r.check(
        matches!(d.read_at(all.len() as u64, &mut past), Ok(0)),
        || format!("{path}: read past end not empty"),
    );
}

fn check_attrs(r: &mut Report, f: &Arc<File>, path: &str, id: ObjectId, want: &Value) {
    let Some(want) = want.as_object() else { return };
    let attrs = match f.attributes(id) {
        Ok(a) => a,
        Err(e) => return r.check(false, || format!("{path}: attributes() failed: {e}")),
    };
    let got: BTreeMap<&str, &h5mount::model::Attribute> =
        attrs.iter().map(|a| (a.name.as_str(), a)).collect();
    let names: Vec<&str> = got.keys().copied().collect();
    let mut want_names: Vec<&str> = want.keys().map(String::as_str).collect();
    want_names.sort();
    r.check(names == want_names, || {
        format!("{path}: attribute names {names:?} != {want_names:?}")
    });
    for (name, w) in want {
        let Some(a) = got.get(name.as_str()) else {
            continue;
        };
        let dt = a.dtype.numpy_str();
        r.check(w["dtype"] == dt.as_str(), || {
            format!("{path}@{name}: dtype {dt} != {}", w["dtype"])
        });
        if let Some(raw) = w["raw_hex"].as_str() {
            r.check(harness::hex(&a.raw) == raw, || {
                format!("{path}@{name}: raw value differs")
            });
        }
        if let (Some(strings), Some(vals)) = (&a.strings, w["value"].as_array()) {
            let got: Vec<String> = strings
                .iter()
                .map(|s| s.clone().unwrap_or_default())
                .collect();
            let want: Vec<String> = vals
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
            r.check(got == want, || {
                format!("{path}@{name}: strings {got:?} != {want:?}")
            });
        } else if let (Some(strings), Some(val)) = (&a.strings, w["value"].as_str()) {
            let got = strings.first().cloned().flatten().unwrap_or_default();
            r.check(got == val, || {
                format!("{path}@{name}: string {got:?} != {val:?}")
            });
        }
    }
}

fn check_file(name: &str, entry: &Value) -> Report {
    let mut r = Report {
        file: name.to_string(),
        failures: Vec::new(),
        checks: 0,
        unsupported: Vec::new(),
    };
    let f = match File::open(
        &harness::data_dir().join(name),
        &OpenOptions {
            cache_bytes: 64 << 20,
            ..OpenOptions::default()
        },
    ) {
        Ok(f) => f,
        Err(e) => {
            r.check(false, || format!("open failed: {e}"));
            return r;
        }
    };
    let Some(objects) = entry["objects"].as_object() else {
        return r;
    };
    for (path, o) in objects {
        let kind = o["kind"].as_str().unwrap_or("");
        if kind == "softlink" || kind == "extlink" {
            let (parent, leaf) = parent_and_name(path);
            let link = f.resolve(parent).and_then(|g| f.lookup(g, leaf));
            let ok = match (&link, kind) {
                (Ok(Some(l)), "softlink") => {
                    l.target == LinkTarget::Soft(o["target"].as_str().unwrap_or("").into())
                }
                (Ok(Some(l)), _) => matches!(&l.target, LinkTarget::External { file, path: p }
                    if o["file"] == file.as_str() && o["path"] == p.as_str()),
                _ => false,
            };
            r.check(ok, || format!("{path}: {kind} mismatch: {link:?}"));
            continue;
        }
        let id = match f.resolve(path) {
            Ok(id) => id,
            Err(e) => {
                r.check(false, || format!("{path}: resolve failed: {e}"));
                continue;
            }
        };
        if let Some(addr) = o["addr"].as_u64() {
            r.check(id.0 == addr, || format!("{path}: addr {} != {addr}", id.0));
        }
        let got_kind = f.kind(id);
        let want_kind = match kind {
            "group" => ObjectKind::Group,
            "dataset" => ObjectKind::Dataset,
            "datatype" => ObjectKind::NamedDatatype,
            _ => ObjectKind::Unknown,
        };
        r.check(matches!(got_kind, Ok(k) if k == want_kind), || {
            format!("{path}: kind {got_kind:?} != {kind}")
        });
        match want_kind {
            ObjectKind::Group => {
                if let Some(links) = o["links"].as_array() {
                    let mut want: Vec<&str> = links.iter().filter_map(Value::as_str).collect();
                    want.sort();
                    match f.links(id) {
                        Ok(l) => {
                            let got: Vec<&str> = l.iter().map(|l| l.name).collect();
                            r.check(got == want, || {
                                format!("{path}: links differ ({} vs {})", got.len(), want.len())
                            });
                        }
                        Err(e) => r.check(false, || format!("{path}: links() failed: {e}")),
                    }
                }
            }
            ObjectKind::Dataset => check_dataset(&mut r, &f, path, id, o),
            _ => {}
        }
        check_attrs(&mut r, &f, path, id, &o["attrs"]);
    }
    r
}

#[test]
fn corpus_matches_h5py() {
    let m = harness::manifest();
    let files = m["files"].as_object().expect("manifest has files");
    let mut failures = Vec::new();
    let mut checks = 0;
    let mut unsupported = 0;
    for (name, entry) in files {
        let r = check_file(name, entry);
        checks += r.checks;
        unsupported += r.unsupported.len();
        failures.extend(r.failures);
    }
    eprintln!("corpus: {unsupported} datasets use filters this build does not decode (read fails with EOPNOTSUPP)");
    for f in &failures {
        eprintln!("MISMATCH {f}");
    }
    eprintln!(
        "corpus: {} files, {checks} checks, {} mismatches",
        files.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches against h5py (see above)",
        failures.len()
    );
}

/// Unfiltered datasets of thousands of chunks of one to four bytes, stored back to back
/// in the order h5py wrote them, under each chunk index, with index nodes between runs of
/// chunks (the v1 B-tree of the earliest form), chunks never written between written ones
/// (the sparse ones, read as the fill value), and chunks of four rows of one column (each
/// chunk's rows go to four rows of the image): read whole, and in pieces of 1,000 and
/// 65,536 bytes, each hashes to h5py's digest, and the whole read asks the source for at
/// most one read per 16 chunks (without merging the reads of adjacent chunks: one per chunk
/// and more).
#[test]
fn adjacent_small_chunks_are_read_together_and_exactly() {
    let m = harness::manifest();
    let cases: &[(&str, &[&str])] = &[
        (
            "chunked_huge_latest.h5",
            &["/ea_140000", "/ea_sparse_140000"],
        ),
        (
            "chunked_many_earliest.h5",
            &[
                "/fixed_r1",
                "/fixed_r2",
                "/fixed_sparse",
                "/ext1_r1",
                "/ext2_r2",
            ],
        ),
        (
            "chunked_many_latest.h5",
            &[
                "/fixed_r1",
                "/fixed_r2",
                "/fixed_sparse",
                "/ext1_r1",
                "/ext1_sparse",
                "/ext2_r2",
            ],
        ),
        (
            "chunked_many_v114.h5",
            &["/fixed_r1", "/ext1_r1", "/ext2_r2"],
        ),
    ];
    for (name, paths) in cases {
        let bytes = std::fs::read(harness::data_dir().join(name)).unwrap();
        let src = Arc::new(h5mount::io::Counting::new(h5mount::io::Memory::new(
            bytes, name,
        )));
        let f = File::from_source(src.clone(), &OpenOptions::default()).unwrap();
        for path in *paths {
            let o = &m["files"][*name]["objects"][*path];
            let want = o["sha256"].as_str().unwrap();
            let chunks: u64 = o["shape"]
                .as_array()
                .unwrap()
                .iter()
                .zip(o["chunks"].as_array().unwrap())
                .map(|(s, c)| s.as_u64().unwrap().div_ceil(c.as_u64().unwrap()))
                .product();
            assert!(chunks >= 2000, "{name}{path}: {chunks} chunks");
            let d = f.dataset(f.resolve(path).unwrap()).unwrap();
            assert!(d.info.filters.is_empty(), "{name}{path} is filtered");
            let before = src.reads();
            let all = d.read_all().unwrap();
            let reads = src.reads() - before;
            assert_eq!(harness::sha256(&all), want, "{name}{path}: whole read");
            assert!(
                reads as u64 <= chunks / 16,
                "{name}{path}: {reads} source reads for {chunks} chunks"
            );
            for piece in [1000usize, 65_536] {
                let mut got = Vec::with_capacity(all.len());
                let mut buf = vec![0u8; piece];
                while got.len() < all.len() {
                    let n = d.read_at(got.len() as u64, &mut buf).unwrap();
                    assert!(n > 0, "{name}{path}: short at {}", got.len());
                    got.extend_from_slice(&buf[..n]);
                }
                assert_eq!(
                    harness::sha256(&got),
                    want,
                    "{name}{path}: pieces of {piece}"
                );
            }
            eprintln!("{name}{path}: {chunks} chunks, {reads} source reads");
        }
    }
}
