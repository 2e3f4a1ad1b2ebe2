//! The filter pipeline on arbitrary stored bytes: one to three filters chosen from every id
//! this reader knows (and one it does not), with fuzzed flags, client data, filter mask and
//! expected chunk size. A successful decode must yield exactly the expected size.
//!
//! Input: `n`, then per filter `selector flags ncd cd[ncd]` (cd as u32 LE), then the expected
//! size (u32, capped at 1 MiB), the mask (u8), and the stored bytes.
#![no_main]

use h5mount::filters::Pipeline;
use h5mount::format::messages::filter_pipeline::{FilterPipeline, FilterSpec};
use h5mount_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;

/// deflate, shuffle, fletcher32, szip, nbit, scaleoffset, then the registered plugin ids
/// (bzip2 307, lzf 32000, blosc 32001, lz4 32004, bitshuffle 32008, zfp 32013, zstd 32015,
/// sz 32017, blosc2 32026) and an unregistered id.
const IDS: [u16; 16] = [
    1, 2, 3, 4, 5, 6, 307, 32000, 32001, 32004, 32008, 32013, 32015, 32017, 32026, 40000,
];
/// Expected chunk sizes are capped so one execution stays fast.
const MAX_EXPECTED: u32 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let n = 1 + b.u8() % 3;
    let mut filters = Vec::new();
    for _ in 0..n {
        let id = IDS[(b.u8() % IDS.len() as u8) as usize];
        let flags = (b.u8() & 1) as u16;
        let ncd = b.u8() % 9;
        let client_data = (0..ncd).map(|_| b.u32()).collect();
        filters.push(FilterSpec {
            id,
            flags,
            name: None,
            client_data,
        });
    }
    let expected = (b.u32() % MAX_EXPECTED) as usize;
    let mask = b.u8() as u32;
    let stored = b.rest().to_vec();
    let pipeline = Pipeline::new(&FilterPipeline { filters });
    if pipeline.check_supported().is_err() {
        return;
    }
    if let Ok(out) = pipeline.decode(stored, mask, expected, 0x1000) {
        assert_eq!(
            out.len(),
            expected,
            "decoded size differs from the expected chunk size"
        );
    }
});
