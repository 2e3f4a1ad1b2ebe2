//! Open a file, walk it and read every dataset at its start, middle and end.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = h5mount_fuzz::write_input(data);
    if let Some(file) = h5mount_fuzz::open(&path) {
        h5mount_fuzz::walk(&file, true);
    }
});
