//! ioctls on a mounted dataset answer ENOTTY without a warning in the daemon's log (fuser's
//! default logs one per call, and Python asks every file it opens whether it is a
//! terminal).

mod harness;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use harness::Mount;

/// The first regular file below `dir`, depth first.
fn first_file(dir: &Path) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let t = e.file_type().ok()?;
        if t.is_file() {
            return Some(e.path());
        }
        if t.is_dir() {
            if let Some(p) = first_file(&e.path()) {
                return Some(p);
            }
        }
    }
    None
}

#[test]
fn ioctl_answers_enotty_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("daemon.log");
    let file = harness::fixture("data/layouts_latest.h5");
    // At debug level the adapter's own line shows the ioctl reached it.
    let m = Mount::background(&file, &["-vv", "--log-file", log.to_str().unwrap()]);
    let ds = first_file(m.path()).expect("a dataset in the fixture");
    let f = std::fs::File::open(&ds).unwrap();
    for request in [libc::TCGETS, libc::TIOCGWINSZ] {
        let mut buf = [0u8; 256];
        // SAFETY: `f` is an open descriptor; `buf` outlives the call and is larger than the
        // `termios` and `winsize` structures these requests write.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), request, buf.as_mut_ptr()) };
        let err = std::io::Error::last_os_error();
        assert_eq!(r, -1, "ioctl {request:#x} succeeded");
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ENOTTY),
            "ioctl {request:#x}: {err}"
        );
    }
    // What Python does on open(), which is how users met the warning.
    let py = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys; f = open(sys.argv[1], 'rb'); f.isatty(); f.read(1)",
        ])
        .arg(&ds)
        .status();
    if let Ok(st) = py {
        assert!(st.success(), "python3 open: {st}");
    }
    drop(f);
    drop(m);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("ioctl") && l.contains("ENOTTY")),
        "the ioctls never reached the adapter:\n{text}"
    );
    let loud: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ioctl") && (l.contains("WARN") || l.contains("ERROR")))
        .collect();
    assert!(loud.is_empty(), "{loud:#?}");
}
