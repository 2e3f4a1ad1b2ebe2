//! Pipeline tests: real chunks written by h5py/hdf5plugin (`testdata/make_vectors.py`),
//! corrupt input, output caps, filter-mask skipping and unknown filters.

use super::*;
use crate::format::messages::filter_pipeline::{FilterPipeline, FilterSpec};
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/filters/testdata")
}

struct Vector {
    name: String,
    pipeline: Pipeline,
    mask: u32,
    chunk: Vec<u8>,
    expected: Vec<u8>,
}

fn pipeline_of(filters: &[(u16, u16, Vec<u32>)]) -> Pipeline {
    Pipeline::new(&FilterPipeline {
        filters: filters
            .iter()
            .map(|(id, flags, cd)| FilterSpec {
                id: *id,
                flags: *flags,
                name: None,
                client_data: cd.clone(),
            })
            .collect(),
    })
}

fn vectors() -> Vec<Vector> {
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(testdata())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    names.sort();
    for name in names {
        let dir = testdata();
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap())
                .unwrap();
        let filters: Vec<(u16, u16, Vec<u32>)> = meta["filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let cd = f["cd"].as_array().unwrap();
                (
                    f["id"].as_u64().unwrap() as u16,
                    f["flags"].as_u64().unwrap() as u16,
                    cd.iter().map(|v| v.as_u64().unwrap() as u32).collect(),
                )
            })
            .collect();
        let chunk = std::fs::read(dir.join(format!("{name}.chunk"))).unwrap();
        let expected = match std::fs::read(dir.join(format!("{name}.expected"))) {
            Ok(e) => e,
            // Too large to store: the dataset is arange % 1000 as little-endian f32 and the
            // vector is its second chunk.
            Err(_) => {
                let n = meta["expected_len"].as_u64().unwrap() / 4;
                (n..2 * n)
                    .flat_map(|i| ((i % 1000) as f32).to_le_bytes())
                    .collect()
            }
        };
        assert_eq!(
            expected.len() as u64,
            meta["expected_len"].as_u64().unwrap()
        );
        out.push(Vector {
            name,
            pipeline: pipeline_of(&filters),
            mask: meta["mask"].as_u64().unwrap() as u32,
            chunk,
            expected,
        });
    }
    assert!(out.len() >= 25, "test vectors missing: run make_vectors.py");
    out
}

/// Filters this build reports as unknown, with the vectors that use them.
const UNSUPPORTED: &[&str] = &[];

#[test]
fn real_vectors_decode_exactly() {
    for v in vectors() {
        if UNSUPPORTED.contains(&v.name.as_str()) {
            assert!(
                matches!(
                    v.pipeline.check_supported(),
                    Err(Error::UnknownFilter { .. })
                ),
                "{}",
                v.name
            );
            let e = v
                .pipeline
                .decode(v.chunk.clone(), v.mask, v.expected.len(), 0x10);
            assert!(matches!(e, Err(Error::UnknownFilter { .. })), "{}", v.name);
            continue;
        }
        v.pipeline.check_supported().unwrap();
        let got = v
            .pipeline
            .decode(v.chunk.clone(), v.mask, v.expected.len(), 0x1000)
            .unwrap_or_else(|e| panic!("{}: {e}", v.name));
        assert!(got == v.expected, "{}: decoded bytes differ", v.name);
    }
}

#[test]
fn corrupt_vectors_fail_without_panic() {
    for v in vectors() {
        if UNSUPPORTED.contains(&v.name.as_str()) {
            continue;
        }
        let n = v.chunk.len();
        // nbit and scaleoffset buffers end in a spare byte libhdf5 allocates but never fills.
        let spare = usize::from(v.name.starts_with("nbit") || v.name.starts_with("scaleoffset"));
        for cut in [0, 1, 4, 12, 16, 21, n / 2, n.saturating_sub(1 + spare)] {
            if cut >= n {
                continue;
            }
            let r = v
                .pipeline
                .decode(v.chunk[..cut].to_vec(), v.mask, v.expected.len(), 7);
            assert!(r.is_err(), "{}: truncated to {cut} bytes decoded", v.name);
        }
        // Flipped bytes may decode to other values, but must never panic or overrun.
        for (k, at) in [0, 3, 8, 13, 17, 20, 40, n / 3, n / 2, n - 1]
            .iter()
            .enumerate()
        {
            let mut bad = v.chunk.clone();
            if let Some(b) = bad.get_mut(*at) {
                *b ^= 0x5a ^ (k as u8);
            }
            if let Ok(out) = v.pipeline.decode(bad, v.mask, v.expected.len(), 7) {
                assert_eq!(out.len(), v.expected.len());
            }
        }
    }
}

fn zlib(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(data).unwrap();
    z.finish().unwrap()
}

#[test]
fn deflate_bomb_is_refused() {
    let bomb = zlib(&vec![0u8; 8 << 20]);
    assert!(bomb.len() < 20_000);
    let p = pipeline_of(&[(1, 0, vec![6])]);
    match p.decode(bomb, 0, 4096, 0x2000) {
        Err(Error::Filter {
            id: 1,
            addr: 0x2000,
            detail,
            ..
        }) => {
            assert!(detail.contains("past the chunk size"), "{detail}")
        }
        other => panic!("bomb not refused: {other:?}"),
    }
}

#[test]
fn declared_sizes_beyond_the_chunk_are_refused() {
    // LZ4 framing that claims 1 TiB.
    let mut lz4 = (1u64 << 40).to_be_bytes().to_vec();
    lz4.extend_from_slice(&[0, 1, 0, 0]);
    let p = pipeline_of(&[(32004, 0, vec![])]);
    assert!(matches!(
        p.decode(lz4, 0, 1024, 1),
        Err(Error::Filter { id: 32004, .. })
    ));
    // Blosc header that claims 2 GiB.
    let mut blosc = vec![2, 1, 0x21, 4];
    blosc.extend_from_slice(&0x8000_0000u32.to_le_bytes());
    blosc.extend_from_slice(&[0; 8]);
    let p = pipeline_of(&[(32001, 0, vec![])]);
    assert!(matches!(
        p.decode(blosc, 0, 1024, 1),
        Err(Error::Filter { id: 32001, .. })
    ));
}

#[test]
fn wrong_final_size_is_an_error() {
    let p = pipeline_of(&[(1, 0, vec![6])]);
    let e = p.decode(zlib(&[1, 2, 3]), 0, 4, 0x30).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Filter {
                id: 1,
                addr: 0x30,
                ..
            }
        ),
        "{e}"
    );
    assert!(Pipeline::default().decode(vec![1], 0, 2, 0).is_err());
    assert_eq!(
        Pipeline::default().decode(vec![1, 2], 0, 2, 0).unwrap(),
        [1, 2]
    );
}

#[test]
fn mask_skips_filters() {
    let v = vectors()
        .into_iter()
        .find(|v| v.name == "lzf_random_u8")
        .unwrap();
    assert_eq!(v.mask, 1);
    assert_eq!(v.chunk, v.expected);
    // Shuffle then deflate, with deflate skipped (bit 1): only the unshuffle runs.
    let p = pipeline_of(&[(2, 1, vec![2]), (1, 1, vec![4])]);
    assert_eq!(p.decode(vec![1, 3, 2, 4], 2, 4, 0).unwrap(), [1, 2, 3, 4]);
    // Both skipped: bytes pass through.
    assert_eq!(p.decode(vec![1, 3, 2, 4], 3, 4, 0).unwrap(), [1, 3, 2, 4]);
    // Deflate applied, shuffle skipped.
    assert_eq!(p.decode(zlib(&[9, 8, 7]), 1, 3, 0).unwrap(), [9, 8, 7]);
}

#[test]
fn unknown_filters_are_reported() {
    let p = pipeline_of(&[(1, 0, vec![]), (31999, 1, vec![])]);
    match p.check_supported() {
        Err(Error::UnknownFilter { id: 31999, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        p.decode(vec![], 0, 0, 0),
        Err(Error::UnknownFilter { id: 31999, .. })
    ));
    // A skipped unknown filter does not matter to that chunk.
    assert_eq!(p.decode(zlib(&[5]), 2, 1, 0).unwrap(), [5]);
    let named = Pipeline::new(&FilterPipeline {
        filters: vec![FilterSpec {
            id: 40000,
            flags: 0,
            name: Some("mine".into()),
            client_data: vec![],
        }],
    });
    match named.check_supported() {
        Err(Error::UnknownFilter { name, .. }) => assert_eq!(name, "mine"),
        other => panic!("{other:?}"),
    }
    assert_eq!(filter_name(32015), "zstd");
}

#[test]
fn fletcher32_mismatch_names_the_chunk() {
    let v = vectors()
        .into_iter()
        .find(|v| v.name == "fletcher32_i16")
        .unwrap();
    let mut bad = v.chunk.clone();
    bad[100] ^= 1;
    match v.pipeline.decode(bad, 0, v.expected.len(), 0xabc0) {
        Err(Error::Filter {
            id: 3,
            addr: 0xabc0,
            detail,
            ..
        }) => assert!(detail.contains("checksum")),
        other => panic!("{other:?}"),
    }
    // The pre-1.6.3 form (bytes swapped within each 16-bit half) is accepted.
    let mut old = v.chunk.clone();
    let n = old.len();
    old.swap(n - 4, n - 3);
    old.swap(n - 2, n - 1);
    assert_eq!(
        v.pipeline.decode(old, 0, v.expected.len(), 0).unwrap(),
        v.expected
    );
}

#[test]
fn random_input_never_panics() {
    // A small LCG: deterministic garbage, some of it starting with plausible headers.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let pipelines = [
        pipeline_of(&[(1, 0, vec![])]),
        pipeline_of(&[(2, 0, vec![4])]),
        pipeline_of(&[(3, 0, vec![])]),
        pipeline_of(&[(4, 0, vec![169, 8, 16, 32])]),
        pipeline_of(&[(4, 0, vec![141, 16, 32, 30])]),
        pipeline_of(&[(5, 0, vec![8, 0, 64, 1, 2, 0, 12, 2])]),
        pipeline_of(&[(6, 0, vec![2, 0, 64, 0, 2, 1, 0, 1, 0])]),
        pipeline_of(&[(6, 0, vec![0, 2, 32, 1, 4, 0, 0, 0, 0])]),
        pipeline_of(&[(307, 0, vec![9])]),
        pipeline_of(&[(32000, 0, vec![])]),
        pipeline_of(&[(32001, 0, vec![])]),
        pipeline_of(&[(32004, 0, vec![])]),
        pipeline_of(&[(32008, 0, vec![0, 4, 2, 0, 0])]),
        pipeline_of(&[(32008, 0, vec![0, 4, 4, 0, 2])]),
        pipeline_of(&[(32008, 0, vec![0, 4, 4, 0, 3])]),
        pipeline_of(&[(32015, 0, vec![])]),
    ];
    let headers: [&[u8]; 5] = [
        &[0, 1, 0, 0],
        &[0x78, 0x9c],
        &[2, 1, 0x01, 4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0],
        &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 64],
        &[0x28, 0xb5, 0x2f, 0xfd],
    ];
    for round in 0..400 {
        let len = (next() % 300) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let head = headers[round % headers.len()];
        if round % 2 == 0 && data.len() >= head.len() {
            data[..head.len()].copy_from_slice(head);
        }
        for p in &pipelines {
            if let Ok(out) = p.decode(data.clone(), 0, 256, 0) {
                assert_eq!(out.len(), 256);
            }
        }
    }
}

/// Throughput of the pipeline on a 1 MiB shuffled + gzip-4 float32 chunk. Run with
/// `cargo test --release --lib filters::tests::bench -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_shuffle_deflate_1mib() {
    use std::io::Write;
    let n = 1 << 18;
    let mut seed = 1u32;
    let raw: Vec<u8> = (0..n)
        .flat_map(|i| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let noise = (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
            ((i as f32 * 0.001).sin() * 100.0 + noise).to_le_bytes()
        })
        .collect();
    let mut shuffled = vec![0; raw.len()];
    shuffle::shuffle(&raw, &mut shuffled, 4);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(4));
    z.write_all(&shuffled).unwrap();
    let chunk = z.finish().unwrap();
    let p = pipeline_of(&[(2, 1, vec![4]), (1, 1, vec![4])]);
    let iters = 40;
    let t = std::time::Instant::now();
    for _ in 0..iters {
        assert_eq!(
            p.decode(chunk.clone(), 0, raw.len(), 0).unwrap().len(),
            raw.len()
        );
    }
    let mbs = (raw.len() * iters) as f64 / 1e6 / t.elapsed().as_secs_f64();
    println!(
        "shuffle+deflate: {mbs:.0} MB/s ({} -> {} bytes)",
        chunk.len(),
        raw.len()
    );
    let p = pipeline_of(&[(1, 1, vec![4])]);
    let t = std::time::Instant::now();
    for _ in 0..iters {
        p.decode(chunk.clone(), 0, raw.len(), 0).unwrap();
    }
    let mbs = (raw.len() * iters) as f64 / 1e6 / t.elapsed().as_secs_f64();
    println!("deflate alone: {mbs:.0} MB/s");
    let mut out = vec![0; raw.len()];
    let t = std::time::Instant::now();
    for _ in 0..iters {
        shuffle::unshuffle(&shuffled, &mut out, 4);
    }
    let mbs = (raw.len() * iters) as f64 / 1e6 / t.elapsed().as_secs_f64();
    assert_eq!(out, raw);
    println!("unshuffle alone: {mbs:.0} MB/s");
    let p = pipeline_of(&[(2, 1, vec![4])]);
    let t = std::time::Instant::now();
    for _ in 0..iters {
        p.decode(shuffled.clone(), 0, raw.len(), 0).unwrap();
    }
    let mbs = (raw.len() * iters) as f64 / 1e6 / t.elapsed().as_secs_f64();
    println!("shuffle stage with clone: {mbs:.0} MB/s");
    let p = pipeline_of(&[(2, 1, vec![4]), (1, 1, vec![4])]);
    let t = std::time::Instant::now();
    for _ in 0..iters {
        p.decode(chunk.clone(), 0, raw.len(), 0).unwrap();
    }
    let mbs = (raw.len() * iters) as f64 / 1e6 / t.elapsed().as_secs_f64();
    println!("shuffle+deflate again: {mbs:.0} MB/s");
}

/// zlib (and so libhdf5) ignores bytes after the end of the stream; so do we.
#[test]
fn deflate_trailing_bytes() {
    let p = pipeline_of(&[(1, 0, vec![6])]);
    let mut z = zlib(&[7u8; 300]);
    z.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(p.decode(z, 0, 300, 0).unwrap(), vec![7u8; 300]);
}

/// Decode speed of every real vector (small chunks, so per-chunk overhead shows). Run with
/// `cargo test --release --lib filters::tests::bench_vectors -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_vectors() {
    for v in vectors() {
        if UNSUPPORTED.contains(&v.name.as_str()) {
            continue;
        }
        let iters = (4_000_000 / v.expected.len()).max(3);
        let t = std::time::Instant::now();
        for _ in 0..iters {
            v.pipeline
                .decode(v.chunk.clone(), v.mask, v.expected.len(), 0)
                .unwrap();
        }
        let mbs = (v.expected.len() * iters) as f64 / 1e6 / t.elapsed().as_secs_f64();
        println!("{:32} {mbs:6.0} MB/s", v.name);
    }
}

#[test]
fn a_chunk_claiming_far_more_than_it_inflates_to_costs_what_it_inflates_to() {
    const NAME: &str =
        "filters::tests::a_chunk_claiming_far_more_than_it_inflates_to_costs_what_it_inflates_to";
    let Some(rise) = crate::peak::rise_kib(NAME, || {
        // Shuffle + deflate, a chunk that declares 64 MiB (a damaged chunk dimension) but
        // whose stream inflates to 256 KiB.
        let p = pipeline_of(&[(ids::SHUFFLE, 0, vec![4]), (ids::DEFLATE, 0, vec![4])]);
        let stored = zlib(&vec![7u8; 256 << 10]);
        assert!(p.decode(stored, 0, 64 << 20, 0x1000).is_err());
    }) else {
        return;
    };
    // Without lazily zeroed stage buffers: 64 MiB, every zero written.
    assert!(rise < 16 << 10, "peak rose by {rise} KiB");
}

#[test]
fn decodes_together_keep_at_most_the_scratch_total_and_reuse_the_buffers() {
    use crate::io::source::Memory;
    use crate::io::Storage;
    // Twelve threads decode a 1 MiB shuffled, deflated chunk each at the same time, with
    // one pool: each decode takes two buffers of about 1 MiB and gives them back, 25 MiB
    // in all were they all kept.
    let chunk: Vec<u8> = (0..1u32 << 18)
        .flat_map(|i| (i * 7).to_le_bytes())
        .collect();
    let mut shuffled = vec![0u8; chunk.len()];
    shuffle::shuffle(&chunk, &mut shuffled, 4);
    let stored = zlib(&shuffled);
    let storage = Storage::from_source(std::sync::Arc::new(Memory::new(stored.clone(), "mem")));
    let p = pipeline_of(&[(ids::SHUFFLE, 0, vec![4]), (ids::DEFLATE, 0, vec![4])]);
    let pool = ScratchPool::default();
    let threads = 12;
    let start = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut out = vec![0u8; chunk.len()];
                start.wait();
                p.decode_from(&storage, 0, stored.len() as u64, 0, &mut out, &pool)
                    .unwrap();
                assert!(out == chunk);
            });
        }
    });
    let kept = pool.kept();
    // Not the 25 MiB twelve decodes would keep on their own.
    assert!(kept <= 16 << 20, "{kept} bytes kept");
    assert!(
        kept >= 2 << 20,
        "{kept} bytes kept: the buffers are kept at all"
    );
    // A decode after them takes kept buffers and gives them back: the total stays.
    let mut out = vec![0u8; chunk.len()];
    p.decode_from(&storage, 0, stored.len() as u64, 0, &mut out, &pool)
        .unwrap();
    assert!(out == chunk);
    assert_eq!(pool.kept(), kept);
}
