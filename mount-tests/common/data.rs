//! The committed fixtures and what tests compare with them: paths below
//! `mount-tests/fixtures`, JSON manifests (`manifest.json` of the corpus, each subdirectory's
//! `expected.json`) and hex sha256 digests, the form the manifests record bytes in.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// `mount-tests/fixtures/<rel>` of the source tree (`rel` may be empty or have several parts).
pub fn fixture(rel: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/fixtures");
    if rel.is_empty() {
        dir
    } else {
        dir.join(rel)
    }
}

/// The corpus files (`mount-tests/fixtures/data`).
pub fn data_dir() -> PathBuf {
    fixture("data")
}

/// The JSON file at `path`, parsed; panics naming the file when it is missing or bad.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `mount-tests/fixtures/<dir>/expected.json`, parsed.
pub fn expected_json(dir: &str) -> Value {
    read_json(&fixture(dir).join("expected.json"))
}

/// The corpus manifest (`mount-tests/fixtures/manifest.json`, written by `generate.py` with
/// h5py's view of every corpus file), parsed once per test binary.
pub fn manifest() -> &'static Value {
    static MANIFEST: OnceLock<Value> = OnceLock::new();
    MANIFEST.get_or_init(|| read_json(&fixture("manifest.json")))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
