//! The `h5mount` command: parse the command line, set up logging, then mount or inspect.

#![forbid(unsafe_code)]

mod cli;
mod config;
mod daemon;

use std::io::Write;

use cli::Command;

fn main() {
    let code = match cli::parse() {
        Command::Inspect { file, path } => {
            init_logging(0, None);
            let mut out = std::io::stdout().lock();
            let res = h5mount::inspect::inspect(&file, path.as_deref(), &mut out);
            let _ = out.flush();
            match res {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("h5mount: {}: {e}", file.display());
                    2
                }
            }
        }
        Command::Mount(cfg) => {
            init_logging(cfg.verbose, cfg.log_file.as_deref());
            daemon::run(cfg)
        }
    };
    std::process::exit(code);
}

/// Log to stderr (foreground) and/or append to `log_file`. `RUST_LOG` overrides `-v`.
fn init_logging(verbose: u8, log_file: Option<&std::path::Path>) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level));
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
