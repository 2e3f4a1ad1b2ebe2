//! A build that aborts on panic is refused.
//!
//! The daemon contains a panic (a bug hit by one strange file) to the request that met it:
//! the FUSE layer catches the unwinding panic and answers `EIO`, and every lock a panicking
//! thread held is taken anyway afterwards (`crate::sync`). With `panic = "abort"` the same
//! bug would take the whole mount down, so such a build must fail to compile.

#[cfg(panic = "abort")]
compile_error!(
    "h5mount must be built with panic = \"unwind\": a panic while serving one request is \
     contained to that request by unwinding; aborting would take the whole mount down"
);

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    /// This file compiled on its own: refused with `-C panic=abort`, accepted with unwinding.
    #[test]
    fn an_abort_on_panic_build_does_not_compile() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/panic_guard.rs");
        let out = tempfile::tempdir().unwrap();
        let build = |strategy: &str| {
            Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
                .args([
                    "--edition",
                    "2021",
                    "--crate-type",
                    "lib",
                    "--emit",
                    "metadata",
                ])
                .args(["-C", &format!("panic={strategy}"), "--crate-name", "guard"])
                .arg("--out-dir")
                .arg(out.path())
                .arg(&src)
                .output()
                .expect("run rustc")
        };
        let abort = build("abort");
        assert!(!abort.status.success(), "{abort:?}");
        assert!(
            String::from_utf8_lossy(&abort.stderr).contains("must be built with panic"),
            "{abort:?}"
        );
        let unwind = build("unwind");
        assert!(unwind.status.success(), "{unwind:?}");
    }

    /// Release builds check arithmetic overflow (Cargo.toml's release profile): an overflow
    /// panics, and is contained, rather than wrapping into a wrong offset.
    #[test]
    fn arithmetic_overflow_panics() {
        let x: u8 = std::hint::black_box(255);
        assert!(std::panic::catch_unwind(|| x + 1).is_err());
    }
}
