//! `h5mount refs`: write reference manifests (the library's `views::zarr::refs`) of one
//! file, or of every HDF5 file of a directory or bucket prefix, as kerchunk's JSON or its
//! Parquet layout (`views::zarr::parquet`: a directory).
//!
//! One file: its manifest goes to `-o OUT` or standard output (JSON only); `--format`
//! unset, OUT ending in `.parq` or `.parquet` means Parquet, as fsspec reads such a name. A directory or prefix: one
//! manifest per HDF5 file (local files by their signature, objects by their name's
//! extension), written under the directory `-o OUT` (default: `SOURCE-NAME.refs` here) at
//! the file's relative path plus `.json` (JSON, the default) or `.parq` (Parquet); files are
//! done in parallel (the objects of a prefix all through one origin: one client, one context
//! and page cache, each object known from the listing with no HEAD of its own), and a file
//! that fails
//! does not stop the others: each failure is one line on standard error, and the exit
//! status is the number of files that failed (at most 100; 0 when none did). On a terminal,
//! a progress line counts the files done.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use h5mount::model::{File, OpenOptions};
use h5mount::views::zarr::parquet::DEFAULT_RECORD_SIZE;
use h5mount::views::zarr::refs::{manifest, RefsOptions};

use crate::cli::{RefsFormat, RefsOutput};
use crate::config::{self, RemoteConfig};
use crate::daemon::display_url;

/// What the command line asked for.
pub struct Args<'a> {
    pub source: &'a Path,
    pub start: Option<&'a str>,
    /// Where and how to write (`-o`, `--url`, `--inline-threshold`, `--format`,
    /// `--record-size`).
    pub output: &'a RefsOutput,
    pub remote: &'a RemoteConfig,
}

impl Args<'_> {
    /// `-o OUT`.
    fn out(&self) -> Option<&Path> {
        self.output.out.as_deref()
    }
}

/// How each manifest is written: JSON, or Parquet with this many chunk keys per file.
#[derive(Clone, Copy)]
enum Format {
    Json,
    Parquet(u64),
}

impl Format {
    /// The format `a` asks for, for output `out` (inferred from its name when not given);
    /// the line to print when the options disagree.
    fn of(a: &Args, out: Option<&Path>) -> Result<Format, String> {
        let by_name = out
            .and_then(Path::extension)
            .is_some_and(|e| e == "parq" || e == "parquet");
        let format = a.output.format.unwrap_or(if by_name {
            RefsFormat::Parquet
        } else {
            RefsFormat::Json
        });
        match (format, a.output.record_size) {
            (RefsFormat::Json, Some(_)) => Err("--record-size is for --format parquet".into()),
            (RefsFormat::Json, None) => Ok(Format::Json),
            (RefsFormat::Parquet, n) => Ok(Format::Parquet(n.unwrap_or(DEFAULT_RECORD_SIZE))),
        }
    }
}

/// Files of a directory written at most at once.
const PARALLEL: usize = 8;

/// Objects of a prefix written at most at once: each mostly waits for its few round
/// trips, so as many as the origin's context lets send requests together.
#[cfg(feature = "remote")]
const PARALLEL_REMOTE: usize = h5mount::io::remote::MAX_REQUESTS;

/// Run the command; the process's exit status.
pub fn run(a: &Args) -> i32 {
    match sources(a) {
        Ok(None) => {
            let format = match Format::of(a, a.out()) {
                Ok(Format::Parquet(_)) if a.out().is_none() => {
                    eprintln!("h5mount: --format parquet writes a directory: name it with -o OUT");
                    return 2;
                }
                Ok(f) => f,
                Err(msg) => {
                    eprintln!("h5mount: {msg}");
                    return 2;
                }
            };
            match one(
                a,
                &a.source.display().to_string(),
                &Place::Alone,
                a.out(),
                a.output.url.as_deref(),
                format,
            ) {
                Ok(()) => 0,
                Err(msg) => {
                    eprintln!("h5mount: {msg}");
                    1
                }
            }
        }
        Ok(Some((files, place))) => many(a, files, &place),
        Err(msg) => {
            eprintln!("h5mount: {msg}");
            1
        }
    }
}

/// How the files of a source are opened.
enum Place {
    /// The source is one file, opened by its name (a path or URL).
    Alone,
    /// Files of a directory, by their paths.
    Local,
    /// Objects of one bucket prefix, by their keys: one origin (client, connections,
    /// runtime, page cache) for all of them, not one each.
    #[cfg(feature = "remote")]
    Remote(Arc<h5mount::io::remote::RemoteOrigin>),
}

/// Files of a directory or prefix, as (what to open, relative name).
type Files = Vec<(String, String)>;

/// The files of a directory or prefix source and how to open them; `None` for a source
/// that is one file.
fn sources(a: &Args) -> Result<Option<(Files, Place)>, String> {
    let text = a.source.display().to_string();
    #[cfg(feature = "remote")]
    if config::is_remote(&text) {
        if !h5mount::io::remote::is_prefix(&text) {
            return Ok(None);
        }
        return prefix_objects(&text, a.remote)
            .map(|(files, origin)| Some((files, Place::Remote(origin))));
    }
    if !a.source.is_dir() {
        return Ok(None);
    }
    let mut out = Vec::new();
    let mut stack = vec![a.source.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && h5mount::fs::hostdir::path_is_hdf5(&p) {
                let rel = p.strip_prefix(a.source).unwrap_or(&p);
                out.push((p.display().to_string(), rel.display().to_string()));
            }
        }
    }
    out.sort();
    Ok(Some((out, Place::Local)))
}

/// The objects under an `s3://bucket/prefix/` named like HDF5 files, listed recursively,
/// by their keys in the origin returned.
#[cfg(feature = "remote")]
fn prefix_objects(
    url: &str,
    remote: &RemoteConfig,
) -> Result<(Files, Arc<h5mount::io::remote::RemoteOrigin>), String> {
    use h5mount::io::Opener;
    let ropts = remote.options()?;
    let (origin, path) =
        h5mount::io::remote::RemoteOrigin::of(url, &ropts).map_err(|e| e.to_string())?;
    let root = path.trim_end_matches('/').to_string();
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in origin.list(&dir).map_err(|e| e.to_string())? {
            let child = format!("{dir}/{}", e.name);
            if e.dir {
                stack.push(child);
            } else if h5mount::fs::hostdir::has_hdf5_extension(&e.name) {
                let rel = child[root.len()..].trim_start_matches('/').to_string();
                out.push((child, rel));
            }
        }
    }
    out.sort();
    Ok((out, origin))
}

/// Write the manifest of every file of `files` under the output directory.
fn many(a: &Args, files: Files, place: &Place) -> i32 {
    // OUT is the directory of the manifests: its name says nothing of their format.
    let format = match Format::of(a, None) {
        Ok(f) => f,
        Err(msg) => {
            eprintln!("h5mount: {msg}");
            return 2;
        }
    };
    let suffix = match format {
        Format::Json => "json",
        Format::Parquet(_) => "parq",
    };
    let out_dir = match a.out() {
        Some(o) => o.to_path_buf(),
        None => {
            let name = a
                .source
                .file_name()
                .map_or("source".into(), |n| n.to_string_lossy().into_owned());
            PathBuf::from(format!("{name}.refs"))
        }
    };
    if let Err(e) = std::fs::create_dir_all(&out_dir) {
        eprintln!("h5mount: {}: {e}", out_dir.display());
        return 1;
    }
    if a.output.url.is_some() {
        eprintln!("h5mount: --url names one file; each file of a directory keeps its own");
        return 2;
    }
    let total = files.len();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let files = Arc::new(files);
    let progress = std::io::stderr().is_terminal();
    let stderr = Mutex::new(());
    std::thread::scope(|s| {
        let parallel = match place {
            #[cfg(feature = "remote")]
            Place::Remote(_) => PARALLEL_REMOTE,
            _ => PARALLEL,
        };
        for _ in 0..parallel.min(total.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((src, rel)) = files.get(i) else {
                    break;
                };
                let target = out_dir.join(format!("{rel}.{suffix}"));
                let r = target
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .map_err(|e| format!("{}: {e}", target.display()))
                    .and_then(|()| one(a, src, place, Some(&target), None, format));
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                let _held = stderr.lock();
                if let Err(msg) = r {
                    failed.fetch_add(1, Ordering::Relaxed);
                    if progress {
                        eprint!("\r\x1b[K");
                    }
                    eprintln!("h5mount: {msg}");
                }
                if progress {
                    eprint!("\r\x1b[K{n}/{total} {rel}");
                    let _ = std::io::stderr().flush();
                }
            });
        }
    });
    if progress {
        eprintln!();
    }
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("h5mount: {failed} of {total} files failed");
    }
    failed.min(100) as i32
}

/// Write the manifest of the one file `source` (opened as `place` says) in `format` to
/// `out` (standard output when `None`; Parquet needs `out`); what was left out is listed on
/// standard error. The message of a failure is the line to print.
fn one(
    a: &Args,
    source: &str,
    place: &Place,
    out: Option<&Path>,
    url: Option<&str>,
    format: Format,
) -> Result<(), String> {
    if let (Some(o), Format::Parquet(_)) = (out, format) {
        // Before the file is read: a refusal is then the one line.
        h5mount::views::zarr::parquet::check_target(o)?;
    }
    let opts = OpenOptions {
        cache_bytes: 64 << 20,
        ..Default::default()
    };
    let (f, default_url, shown) = match place {
        #[cfg(feature = "remote")]
        Place::Remote(origin) => {
            use h5mount::io::Opener;
            let shown = display_url(&origin.url(source));
            let f =
                File::open_in_origin(origin, source, &opts).map_err(|e| format!("{shown}: {e}"))?;
            (f, shown.clone(), shown)
        }
        #[cfg(feature = "remote")]
        Place::Alone if config::is_remote(source) => {
            let shown = display_url(source);
            let ropts = a.remote.options()?;
            let f = File::open_url(source, &opts, &ropts).map_err(|e| format!("{shown}: {e}"))?;
            (f, shown.clone(), shown)
        }
        _ => {
            let shown = display_url(source);
            let (f, url) = local(source, &opts, &shown)?;
            (f, url, shown)
        }
    };
    let failed = |e: h5mount::Error| format!("{shown}: {e}");
    let root = match a.start {
        Some(p) => f.resolve(p).map_err(failed)?,
        None => f.root(),
    };
    let m = manifest(
        &f,
        root,
        &RefsOptions {
            url: url.map_or(default_url, str::to_string),
            inline_threshold: a.output.inline_threshold,
        },
    )
    .map_err(failed)?;
    for (path, why) in &m.left_out {
        eprintln!("h5mount: {shown}: {path}: left out: {why}");
    }
    match (out, format) {
        (Some(o), Format::Parquet(record_size)) => m.write_parquet(o, record_size)?,
        (None, Format::Parquet(_)) => return Err("Parquet needs an output directory".into()),
        (Some(o), Format::Json) => std::fs::File::create(o)
            .and_then(|mut f| m.write_json(&mut f))
            .map_err(|e| format!("{}: {e}", o.display()))?,
        (None, Format::Json) => {
            let mut stdout = std::io::stdout().lock();
            m.write_json(&mut stdout)
                .map_err(|e| format!("standard output: {e}"))?;
        }
    }
    log::info!(
        "{shown}: {} arrays, {} chunks referenced, {} inline, {} left out",
        m.arrays,
        m.referenced,
        m.inlined,
        m.left_out.len()
    );
    Ok(())
}

/// The local file `source`, and the URL its references name: its absolute path.
fn local(source: &str, opts: &OpenOptions, shown: &str) -> Result<(Arc<File>, String), String> {
    let f = File::open(Path::new(source), opts).map_err(|e| format!("{shown}: {e}"))?;
    let abs = std::path::absolute(source).map_err(|e| format!("{shown}: {e}"))?;
    Ok((f, abs.display().to_string()))
}
