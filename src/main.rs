//! The `h5mount` command: parse the command line, set up logging, then mount or inspect.

#![forbid(unsafe_code)]

mod cli;
mod config;
mod daemon;
mod docs;
mod refs_cmd;

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

use cli::Command;

/// `h5mount inspect`: a local file, or a remote object reached as `remote` says; the
/// message of a failure is the line to print.
fn inspect(
    file: &Path,
    start: Option<&str>,
    remote: &config::RemoteConfig,
    out: &mut dyn Write,
) -> Result<(), String> {
    let failed =
        |e: h5mount::Error| format!("{}: {e}", daemon::display_url(&file.display().to_string()));
    #[cfg(feature = "remote")]
    if let Some(url) = file.to_str().filter(|u| config::is_remote(u)) {
        let ropts = remote.options()?;
        let opts = h5mount::model::OpenOptions {
            cache_bytes: 16 << 20,
            ..Default::default()
        };
        let f = h5mount::model::File::open_url(url, &opts, &ropts).map_err(failed)?;
        return h5mount::inspect::inspect_file(&f, start, out).map_err(failed);
    }
    #[cfg(not(feature = "remote"))]
    let _ = remote;
    h5mount::inspect::inspect(file, start, out).map_err(failed)
}

fn main() {
    let code = match cli::parse() {
        Command::GenerateDocs { dir, configuration } => {
            match docs::generate(cli::command(), dir.as_deref(), configuration.as_deref()) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("h5mount: generate-docs: {e}");
                    1
                }
            }
        }
        Command::Inspect { file, path, remote } => {
            init_logging(0, None);
            let mut out = std::io::stdout().lock();
            let res = inspect(&file, path.as_deref(), &remote, &mut out);
            let _ = out.flush();
            match res {
                Ok(()) => 0,
                Err(msg) => {
                    eprintln!("h5mount: {msg}");
                    2
                }
            }
        }
        Command::Refs {
            file,
            path,
            output,
            remote,
        } => {
            init_logging(0, None);
            refs_cmd::run(&refs_cmd::Args {
                source: &file,
                start: path.as_deref(),
                output: &output,
                remote: &remote,
            })
        }
        Command::Mount(cfg) => {
            ensure_allocator_env();
            if cfg.daemon_child && cfg.log_file.is_none() {
                // Background without a log file: the local syslog, if there is one.
                init_syslog(Path::new(SYSLOG_SOCKET), cfg.verbose);
            } else {
                init_logging(cfg.verbose, cfg.log_file.as_deref());
            }
            daemon::run(*cfg)
        }
    };
    std::process::exit(code);
}

/// glibc's malloc threshold for serving allocations with mmap.
const MMAP_THRESHOLD_VAR: &str = "MALLOC_MMAP_THRESHOLD_";

/// Start the daemon with glibc's mmap threshold fixed at 128 KiB. By default glibc raises the
/// threshold dynamically, so freed chunk-sized buffers (decoded chunks, read replies) stay in
/// per-thread heaps that fragment: the soak test saw peak RSS climb from 65 to 81 MiB over a
/// minute with a 32 MiB cache. With the threshold fixed they are mapped and unmapped and RSS
/// stays at the cache budget plus ~9 MiB. glibc reads the variable only at start-up, so the
/// process re-executes itself once with it set (no `unsafe` `mallopt` needed).
fn ensure_allocator_env() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(MMAP_THRESHOLD_VAR).is_some() {
        return;
    }
    if let Ok(exe) = std::env::current_exe() {
        let err = std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(MMAP_THRESHOLD_VAR, "131072")
            .exec();
        // Only reached when exec failed: carry on with the default allocator settings.
        eprintln!("h5mount: could not re-execute with {MMAP_THRESHOLD_VAR} set: {err}");
    }
}

/// The local syslog socket.
const SYSLOG_SOCKET: &str = "/dev/log";

fn level(verbose: u8) -> log::LevelFilter {
    match verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    }
}

/// fuser's modules whose warnings come from its unmount-on-drop, which fails with EINVAL
/// after every `fusermount3 -u` or `umount` (the filesystem is already gone): below debug
/// level those are noise, so only their errors are kept.
const UNMOUNT_NOISE: [&str; 2] = ["fuser::session", "fuser::mnt"];

/// The level a record of `target` must reach to be logged at `level`.
fn threshold(target: &str, level: log::LevelFilter) -> log::LevelFilter {
    if level < log::LevelFilter::Debug && UNMOUNT_NOISE.iter().any(|t| target.starts_with(t)) {
        log::LevelFilter::Error
    } else {
        level
    }
}

/// Log records sent as RFC 3164 datagrams (facility daemon) to a syslog socket.
struct Syslog {
    sock: UnixDatagram,
    level: log::LevelFilter,
    pid: u32,
}

impl Syslog {
    fn connect(path: &Path, level: log::LevelFilter) -> std::io::Result<Syslog> {
        let sock = UnixDatagram::unbound()?;
        sock.connect(path)?;
        Ok(Syslog {
            sock,
            level,
            pid: std::process::id(),
        })
    }

    fn line(&self, record: &log::Record) -> String {
        const DAEMON: u8 = 3;
        let severity = match record.level() {
            log::Level::Error => 3,
            log::Level::Warn => 4,
            log::Level::Info => 6,
            log::Level::Debug | log::Level::Trace => 7,
        };
        format!(
            "<{}>h5mount[{}]: {}",
            DAEMON * 8 + severity,
            self.pid,
            record.args()
        )
    }
}

impl log::Log for Syslog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= threshold(metadata.target(), self.level)
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            // A full or vanished syslog must not stop the filesystem: drop the line.
            let _ = self.sock.send(self.line(record).as_bytes());
        }
    }

    fn flush(&self) {}
}

/// Log to the syslog socket at `path`; without one, logs go to stderr (/dev/null in the
/// background).
fn init_syslog(path: &Path, verbose: u8) {
    match Syslog::connect(path, level(verbose)) {
        Ok(s) => {
            let max = s.level;
            if log::set_logger(Box::leak(Box::new(s))).is_ok() {
                log::set_max_level(max);
            }
        }
        Err(_) => init_logging(verbose, None),
    }
}

/// Log to stderr (foreground) and/or append to `log_file`. `RUST_LOG` overrides `-v`.
fn init_logging(verbose: u8, log_file: Option<&std::path::Path>) {
    let level = level(verbose);
    let mut filter = level.to_string().to_lowercase();
    for t in UNMOUNT_NOISE {
        filter += &format!(",{t}={}", threshold(t, level).to_string().to_lowercase());
    }
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(filter));
    if let Some(path) = log_file {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => {
                b.target(env_logger::Target::Pipe(Box::new(f)));
            }
            Err(e) => eprintln!("h5mount: log file {}: {e}", path.display()),
        }
    }
    let _ = b.try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_datagrams() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let server = UnixDatagram::bind(&path).unwrap();
        let s = Syslog::connect(&path, log::LevelFilter::Info).unwrap();
        let args = format_args!("mounted {}", 42);
        let rec = log::Record::builder()
            .args(args)
            .level(log::Level::Warn)
            .build();
        log::Log::log(&s, &rec);
        let debug = log::Record::builder()
            .args(format_args!("hidden"))
            .level(log::Level::Debug)
            .build();
        log::Log::log(&s, &debug);
        let unmount = log::Record::builder()
            .args(format_args!(
                "Failed to umount filesystem: Invalid argument"
            ))
            .level(log::Level::Warn)
            .target("fuser::session")
            .build();
        log::Log::log(&s, &unmount);
        let mut buf = [0u8; 256];
        let n = server.recv(&mut buf).unwrap();
        let want = format!("<28>h5mount[{}]: mounted 42", std::process::id());
        assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), want);
        server.set_nonblocking(true).unwrap();
        assert!(
            server.recv(&mut buf).is_err(),
            "debug line and fuser's unmount warning filtered out"
        );
        assert_eq!(
            threshold("fuser::session", log::LevelFilter::Debug),
            log::LevelFilter::Debug
        );
    }
}
