//! Open a file, walk the whole tree (links, kinds, attributes rendered, dataset descriptions),
//! then run `inspect` on it into a sink.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(file) = h5mount_fuzz::open(data) {
        h5mount_fuzz::walk(&file, false);
        let _ = h5mount::inspect::inspect_file(&file, None, &mut std::io::sink());
    }
});
