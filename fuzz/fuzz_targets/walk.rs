//! Open a file, walk the whole tree (links, kinds, attributes rendered, dataset descriptions),
//! then run `inspect` on it into a sink.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = h5mount_fuzz::write_input(data);
    if let Some(file) = h5mount_fuzz::open(&path) {
        h5mount_fuzz::walk(&file, false);
    }
    let _ = h5mount::inspect::inspect(&path, None, &mut std::io::sink());
});
