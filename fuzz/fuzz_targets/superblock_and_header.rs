//! Superblock search and decoding, the root object header (and the superblock extension's),
//! and every message in them through the one dispatch point `messages::parse`.
#![no_main]

use h5mount::format::messages;
use h5mount::format::object_header::ObjectHeader;
use h5mount::format::superblock::Superblock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let raw = h5mount_fuzz::storage(data);
    let Ok((mut sb, storage)) = Superblock::locate(&raw) else {
        return;
    };
    let _ = sb.read_extension(&storage);
    let mut addrs = vec![sb.root_addr];
    addrs.extend(sb.extension_addr);
    for addr in addrs {
        let Ok(h) = ObjectHeader::read(&storage, addr, sb.sizes) else {
            continue;
        };
        for m in &h.messages {
            let _ = messages::parse(m.mtype, &m.data, m.addr, sb.sizes);
        }
    }
});
