//! Read one dataset through the library the way a program reads a mounted file: sequentially in
//! 1 MiB requests (cold chunk cache, then warm), and 4 KiB requests at random offsets. Prints
//! one JSON line. Used by `mount-tests/bench/run`.
//!
//! `cargo run --release --example bench_read -- FILE.h5 /dataset [random-reads]`

use std::time::Instant;

use h5mount::model::{File, OpenOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: bench_read FILE.h5 DATASET [RANDOM_READS]".into());
    }
    let nrand: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let t0 = Instant::now();
    // A cache larger than the dataset, so the warm pass measures hits, not LRU thrash.
    let size = std::fs::metadata(&args[1])?.len();
    let file = File::open(
        args[1].as_ref(),
        &OpenOptions {
            cache_bytes: (256 << 20u64).max(size.saturating_mul(2)),
            ..OpenOptions::default()
        },
    )?;
    let ds = file.dataset(file.resolve(&args[2])?)?;
    let open_s = t0.elapsed().as_secs_f64();
    let len = ds.len();
    let mut buf = vec![0u8; 1 << 20];
    let mut seq = |label: &str| -> Result<f64, Box<dyn std::error::Error>> {
        let t = Instant::now();
        let mut off = 0u64;
        let mut sum = 0u64;
        while off < len {
            let n = ds.read_at(off, &mut buf)?;
            if n == 0 {
                return Err(format!("{label}: short read at {off}").into());
            }
            sum = sum.wrapping_add(buf[0] as u64);
            off += n as u64;
        }
        std::hint::black_box(sum);
        Ok(len as f64 / t.elapsed().as_secs_f64() / 1e6)
    };
    let cold = seq("cold")?;
    let warm = seq("warm")?;
    // Random 4 KiB reads (xorshift offsets), latency percentiles in microseconds.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut lat = Vec::with_capacity(nrand);
    let mut small = [0u8; 4096];
    for _ in 0..nrand {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % len.saturating_sub(4096).max(1)) & !4095;
        let t = Instant::now();
        ds.read_at(off, &mut small)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "{{\"bytes\": {len}, \"open_s\": {open_s:.6}, \"seq_cold_mbs\": {cold:.1}, \"seq_warm_mbs\": {warm:.1}, \"rand4k_p50_us\": {:.1}, \"rand4k_p99_us\": {:.1}}}",
        pct(0.5),
        pct(0.99)
    );
    Ok(())
}
