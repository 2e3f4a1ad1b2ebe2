//! Print every message of one object's header, raw and decoded: a developer's look at what a
//! file really contains.
//!
//! `cargo run --example dump_header -- FILE.h5 /path/to/object`

use h5mount::model::{File, OpenOptions};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let f = File::open(a[1].as_ref(), &OpenOptions::default()).expect("readable");
    let id = f.resolve(&a[2]).expect("readable");
    let h = f.header(id).expect("readable");
    for m in &h.messages {
        println!(
            "type {:#06x} flags {:#04x} len {} addr {:#x} {:02x?}",
            m.mtype,
            m.flags,
            m.data.len(),
            m.addr,
            &m.data[..m.data.len().min(24)]
        );
        println!(
            "   -> {:?}",
            f.decode(m)
                .map(|x| format!("{x:?}").chars().take(150).collect::<String>())
        );
    }
}
