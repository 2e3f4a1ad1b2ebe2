//! The command line (clap derive), turned into a plain [`Config`] or an inspect request.
//!
//! `h5mount [OPTIONS] SOURCE MOUNTPOINT` mounts (SOURCE: an HDF5 file or a directory of
//! them); `h5mount inspect FILE [PATH]` lists. The form
//! `h5mount FILE DIR -o opt,...` is what `mount.fuse3` runs for `mount -t fuse.h5mount` and
//! `/etc/fstab` lines, so `-o` takes the same options as the fstab options field.
//!
//! The options of a remote source are declared once ([`RemoteArgs`]) and flattened into
//! both commands. Every value goes through the parser of its option (in `config`) whether
//! it comes as a flag or as `-o name=value`; a refused value is one line on stderr naming
//! the option, the value (a URL's user-info hidden) and what is wrong, and exit status 2.

use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, Args, Parser, Subcommand};

use crate::config::{self, remote, Config, RemoteConfig};

/// What the user asked for.
pub enum Command {
    Mount(Box<Config>),
    Inspect {
        file: PathBuf,
        path: Option<String>,
        remote: RemoteConfig,
    },
    /// Write a reference manifest of a file.
    Refs {
        file: PathBuf,
        path: Option<String>,
        out: Option<PathBuf>,
        url: Option<String>,
        inline_threshold: u64,
        /// Explicit `--format`; `None`: inferred from OUT.
        format: Option<RefsFormat>,
        /// Explicit `--record-size`.
        record_size: Option<u64>,
        remote: RemoteConfig,
    },
    /// Write the man page and shell completions into a directory (packaging).
    GenerateDocs(PathBuf),
}

#[derive(Parser, Debug)]
#[command(
    name = "h5mount",
    // The commit the binary was built from (build.rs).
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("H5MOUNT_COMMIT"), ")"),
    about = "Mount an HDF5 file, or a directory of them, read-only: groups become directories, \
             datasets files of raw elements (the bytes of numpy's ds[()].tobytes())",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,

    /// HDF5 file to mount, or a directory (its HDF5 files become directories of their trees,
    /// its other files are served as they are), or a remote object: s3://BUCKET/KEY,
    /// https://HOST/PATH or http://HOST/PATH.
    #[arg(required = true, value_name = "SOURCE")]
    file: Option<PathBuf>,

    /// Existing directory to mount it on.
    #[arg(required = true)]
    mountpoint: Option<PathBuf>,

    /// Mount options, comma separated (repeatable): ro, allow_other, allow_root,
    /// default_permissions (on by default; nodefault_permissions turns it off),
    /// auto_unmount, uid=N, gid=N, fsname=NAME, subtype=NAME, cache_size=SIZE, threads=N,
    /// readahead=KB, max_open_files=N,
    /// allow_external_paths (follow external links, virtual-dataset sources, external
    /// storage and directory symlinks that lead outside the mounted file's directory or the
    /// mounted directory),
    /// npy, envi, tiff, byte_order=native|little|big (see Views), zarr, zarr=2, zarr_decoded
    /// (see Zarr), refresh=SECONDS;
    /// fstab options (noauto, nofail, _netdev, user, x-*, ...) and rw are accepted and ignored.
    #[arg(
        short = 'o',
        value_name = "OPT[,OPT...]",
        help_heading = "Mount options"
    )]
    options: Vec<String>,

    /// Also serve NAME.npy (NumPy format) beside every fixed-size dataset (-o npy).
    #[arg(long, help_heading = "Views")]
    npy: bool,

    /// Also serve NAME.hdr (ENVI header) beside 1- to 3-D numeric datasets (-o envi).
    #[arg(long, help_heading = "Views")]
    envi: bool,

    /// Also serve NAME.tif (TIFF, one page per 2-D plane; BigTIFF past 4 GiB) beside 2-D and
    /// 3-D numeric datasets (-o tiff).
    #[arg(long, help_heading = "Views")]
    tiff: bool,

    /// Serve numbers in this byte order: native, little or big (-o byte_order=...)
    /// [default: as stored].
    #[arg(long, value_name = "ORDER", value_parser = config::parse_byte_order, help_heading = "Views")]
    byte_order: Option<h5mount::views::ByteOrderMode>,

    /// Serve SOURCE as a Zarr store instead, in format 3 (--zarr, --zarr=3) or 2 (--zarr=2):
    /// groups are Zarr groups, datasets Zarr arrays with one file per chunk that was
    /// written, the root carries consolidated metadata (-o zarr, -o zarr=2). Does not
    /// combine with the views or --refresh.
    #[arg(
        long,
        value_name = "FORMAT",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "3",
        value_parser = config::parse_zarr_version,
        help_heading = "Zarr"
    )]
    zarr: Option<h5mount::views::zarr::ZarrVersion>,

    /// With --zarr: serve every chunk decoded, under the plain bytes codec (v2: no
    /// compressor), for readers that know few codecs (-o zarr_decoded).
    #[arg(long, help_heading = "Zarr")]
    zarr_decoded: bool,

    /// Re-read the file when it changes, checking every SECONDS (decimals allowed; 0: off),
    /// for files written while mounted (-o refresh=SECONDS) [default: off].
    // Parsed in `into_command`: clap would read `Option<Option<_>>` as a flag whose value
    // may be left out.
    #[arg(long, value_name = "SECONDS", help_heading = "Growing files")]
    refresh: Option<String>,

    /// Stay in the foreground (default: return once the mount answers, serve in background).
    #[arg(short, long, help_heading = "Process")]
    foreground: bool,

    /// Bytes of decoded chunks to cache (K, M, G, T suffixes; at most 16T) [default: 256M].
    #[arg(long, value_name = "SIZE", value_parser = config::parse_cache_size, help_heading = "Performance")]
    cache_size: Option<u64>,

    /// Worker threads serving requests [default: 4; 16 for a remote source].
    #[arg(long, value_name = "N", value_parser = config::parse_threads, help_heading = "Performance")]
    threads: Option<usize>,

    /// Readahead to set on the mount in KiB, if root (0: leave the kernel's, 128)
    /// (-o readahead=KB) [default: 1024].
    #[arg(long, value_name = "KB", value_parser = config::parse_readahead, help_heading = "Performance")]
    readahead: Option<u64>,

    /// Most files kept open at once: HDF5 files reached by a directory mount, external links
    /// and virtual-dataset sources, and raw files of external storage; the least recently
    /// used is closed and opened again when needed (-o max_open_files=N) [default: 256].
    #[arg(long, value_name = "N", value_parser = config::parse_max_open_files, help_heading = "Performance")]
    max_open_files: Option<usize>,

    #[command(flatten)]
    remote: RemoteArgs,

    /// Do not list a remote file's root group in the background once the mount is ready
    /// (its links, its children's headers, its child groups' listings), nor ask an HTTP
    /// server whether it answers GETs of several ranges: fetch nothing until asked
    /// (-o no_warm_up).
    #[arg(long, help_heading = "Remote sources")]
    no_warm_up: bool,

    /// More log output (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = ArgAction::Count, help_heading = "Logging")]
    verbose: u8,

    /// Append log lines to this file (default: stderr in the foreground, syslog in the
    /// background).
    #[arg(long, value_name = "PATH", help_heading = "Logging")]
    log_file: Option<PathBuf>,

    /// Internal: run as the detached child of a background mount.
    #[arg(long, hide = true)]
    daemon_child: bool,
}

/// How to reach a remote source: one declaration of each option, for mounting and for
/// `inspect` (the `-o` forms are parsed in `config` by the same functions).
#[derive(Args, Debug)]
struct RemoteArgs {
    /// S3 endpoint of an S3-compatible store: an http:// or https:// URL, e.g.
    /// http://127.0.0.1:8333 (-o endpoint=URL) [default: AWS].
    #[arg(long, value_name = "URL", value_parser = remote::parse_endpoint, help_heading = "Remote sources")]
    endpoint: Option<String>,

    /// S3 region: a-z, 0-9 and '-' (-o region=NAME) [default: AWS_REGION, else us-east-1].
    #[arg(long, value_name = "NAME", value_parser = remote::parse_region, help_heading = "Remote sources")]
    region: Option<String>,

    /// Credentials (and region, endpoint) of this named profile of ~/.aws/credentials and
    /// ~/.aws/config: static keys, credential_process or role_arn, kept fresh while mounted
    /// (-o profile=NAME) [default: the AWS environment variables, web identity, container and
    /// instance metadata].
    #[arg(long, value_name = "NAME", value_parser = remote::parse_profile, help_heading = "Remote sources")]
    profile: Option<String>,

    /// Send unsigned requests, for public buckets (-o no_sign_request).
    #[arg(long, help_heading = "Remote sources")]
    no_sign_request: bool,

    /// Address buckets as BUCKET.HOST rather than HOST/BUCKET (-o virtual_hosted).
    #[arg(long, help_heading = "Remote sources")]
    virtual_hosted: bool,

    /// Follow an HTTP(S) server's redirects to other origins too (-o allow_redirects)
    /// [default: within the same scheme, host and port only; an S3 store's never].
    #[arg(long, help_heading = "Remote sources")]
    allow_redirects: bool,

    /// Entries of one directory of a bucket listed at most, from 1 to 10,000,000
    /// (-o list_max_keys=N) [default: 50000].
    #[arg(long, value_name = "N", value_parser = remote::parse_list_max_keys, help_heading = "Remote sources")]
    list_max_keys: Option<usize>,

    /// Longest one request may take, in seconds from 0.1 to 3600 (-o request_timeout=S)
    /// [default: 10].
    #[arg(long, value_name = "SECONDS", value_parser = remote::parse_seconds, help_heading = "Remote sources")]
    request_timeout: Option<std::time::Duration>,

    /// Longest a read may spend retrying failed requests, in seconds from 0.1 to 3600
    /// (-o retry_timeout=S) [default: 30].
    #[arg(long, value_name = "SECONDS", value_parser = remote::parse_seconds, help_heading = "Remote sources")]
    retry_timeout: Option<std::time::Duration>,
}

impl RemoteArgs {
    /// Set in `c` what was given (flags win over `-o`, which `c` may hold already).
    fn apply(self, c: &mut RemoteConfig) {
        if self.endpoint.is_some() {
            c.endpoint = self.endpoint;
        }
        if self.region.is_some() {
            c.region = self.region;
        }
        if self.profile.is_some() {
            c.profile = self.profile;
        }
        c.no_sign_request |= self.no_sign_request;
        c.virtual_hosted |= self.virtual_hosted;
        c.allow_redirects |= self.allow_redirects;
        if let Some(n) = self.list_max_keys {
            c.list_max_keys = n;
        }
        if let Some(t) = self.request_timeout {
            c.request_timeout = t;
        }
        if let Some(t) = self.retry_timeout {
            c.retry_timeout = t;
        }
    }
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Print the tree of objects with types, shapes, layouts and attributes.
    Inspect {
        /// HDF5 file, or a remote object (s3://BUCKET/KEY, https://HOST/PATH,
        /// http://HOST/PATH).
        file: PathBuf,
        /// Object to start at [default: /].
        path: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Write a reference manifest (kerchunk's JSON, version 1, or its Parquet layout: Zarr
    /// v2 keys, each chunk a reference [URL, offset, length] or its bytes inline), with which
    /// zarr-python, xarray and dask read the file through fsspec, without a mount.
    Refs {
        /// HDF5 file, or a remote object (s3://BUCKET/KEY, https://HOST/PATH,
        /// http://HOST/PATH).
        file: PathBuf,
        /// Group or dataset to write [default: /].
        path: Option<String>,
        /// Write the manifest to OUT [default: standard output].
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        out: Option<PathBuf>,
        /// The URL the references name [default: the source as given; for a local file,
        /// its absolute path].
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Chunks of at most BYTES are written inline rather than referenced; an array whose
        /// chunks must be decoded by h5mount is written only if every chunk fits.
        #[arg(long, value_name = "BYTES", default_value_t = h5mount::views::zarr::refs::DEFAULT_INLINE_THRESHOLD,
              value_parser = inline_threshold)]
        inline_threshold: u64,
        /// json: one JSON document. parquet: kerchunk's Parquet layout, a directory OUT
        /// (.zmetadata, and per array refs.N.parq files of N chunk keys each) that fsspec
        /// reads lazily, for files of millions of chunks [default: parquet when OUT ends in
        /// .parq or .parquet, else json; a directory SOURCE: json].
        #[arg(long, value_name = "FORMAT", value_parser = refs_format)]
        format: Option<RefsFormat>,
        /// Chunk keys per Parquet file (parquet only) [default: 10000].
        #[arg(long, value_name = "N", value_parser = record_size)]
        record_size: Option<u64>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Write the man page (h5mount.1) and the bash, zsh and fish completions into DIR
    /// (packaging/build-deb runs it).
    #[command(hide = true)]
    GenerateDocs { dir: PathBuf },
}

/// The format of a reference manifest (`refs --format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefsFormat {
    Json,
    Parquet,
}

/// `--format`: json or parquet.
fn refs_format(v: &str) -> Result<RefsFormat, String> {
    match v.trim() {
        "json" => Ok(RefsFormat::Json),
        "parquet" => Ok(RefsFormat::Parquet),
        _ => Err("expected json or parquet".into()),
    }
}

/// `--record-size`: chunk keys per Parquet file, 1 to 10,000,000 (each file is read whole).
fn record_size(v: &str) -> Result<u64, String> {
    use h5mount::views::zarr::parquet::MAX_RECORD_SIZE;
    match v.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_RECORD_SIZE).contains(&n) => Ok(n),
        Ok(_) => Err(format!("expected 1 to {MAX_RECORD_SIZE}")),
        Err(_) => Err("expected a number of chunk keys".into()),
    }
}

/// `--inline-threshold`: a byte count, at most 64 MiB (a manifest is held in memory).
fn inline_threshold(v: &str) -> Result<u64, String> {
    match v.trim().parse::<u64>() {
        Ok(n) if n <= 64 << 20 => Ok(n),
        Ok(_) => Err("expected at most 67108864 bytes".into()),
        Err(_) => Err("expected a number of bytes".into()),
    }
}

/// The command line definition, for the man page and completions.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command()
}

/// Parse the process arguments. A refused value prints one line and exits 2; other usage
/// errors print clap's message (with its hints) and exit 2.
pub fn parse() -> Command {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match refused_value(&e) {
            Some(msg) => {
                eprintln!("h5mount: {msg}");
                std::process::exit(2);
            }
            None => e.exit(),
        },
    };
    match into_command(cli) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("h5mount: {msg}");
            std::process::exit(2);
        }
    }
}

/// A value refused by its option's parser as one line (`--threads "0": expected 1 to 64`),
/// or `None` for other errors.
fn refused_value(e: &clap::Error) -> Option<String> {
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let why = std::error::Error::source(e)?;
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    // The argument as clap names it: `--threads <N>`, `--zarr[=<FORMAT>]`.
    let arg = text(ContextKind::InvalidArg)?;
    let arg = arg.split([' ', '[']).next().unwrap_or(arg);
    let value = text(ContextKind::InvalidValue)?;
    Some(format!("{arg} {}: {why}", remote::shown(value)))
}

/// The remote options `args` give for reading `file`, checked against it when it is a URL.
fn remote_for(file: &std::path::Path, args: RemoteArgs) -> Result<RemoteConfig, String> {
    let mut remote = RemoteConfig::default();
    args.apply(&mut remote);
    if let Some(url) = file.to_str().filter(|f| config::is_remote(f)) {
        remote::check_source(url, &remote)?;
    }
    Ok(remote)
}

fn into_command(cli: Cli) -> Result<Command, String> {
    match cli.command {
        Some(Sub::Inspect {
            file,
            path,
            remote: args,
        }) => {
            let remote = remote_for(&file, args)?;
            return Ok(Command::Inspect { file, path, remote });
        }
        Some(Sub::Refs {
            file,
            path,
            out,
            url,
            inline_threshold,
            format,
            record_size,
            remote: args,
        }) => {
            let remote = remote_for(&file, args)?;
            return Ok(Command::Refs {
                file,
                path,
                out,
                url,
                inline_threshold,
                format,
                record_size,
                remote,
            });
        }
        Some(Sub::GenerateDocs { dir }) => return Ok(Command::GenerateDocs(dir)),
        None => {}
    }
    let (Some(file), Some(mountpoint)) = (cli.file, cli.mountpoint) else {
        return Err("SOURCE and MOUNTPOINT are required".into());
    };
    let mut c = Config::new(file, mountpoint);
    for o in &cli.options {
        c.apply_options(o)?;
    }
    if let Some(n) = cli.cache_size {
        c.cache_size = n;
    }
    if let Some(n) = cli.threads {
        c.threads = n;
        c.threads_given = true;
    }
    if let Some(n) = cli.readahead {
        c.readahead_kb = n;
    }
    if let Some(n) = cli.max_open_files {
        c.max_open_files = n;
    }
    cli.remote.apply(&mut c.remote);
    c.warm_up &= !cli.no_warm_up;
    c.npy |= cli.npy;
    c.envi |= cli.envi;
    c.tiff |= cli.tiff;
    if let Some(b) = cli.byte_order {
        c.byte_order = b;
    }
    if let Some(v) = cli.zarr {
        c.zarr = Some(v);
    }
    c.zarr_decoded |= cli.zarr_decoded;
    if let Some(r) = &cli.refresh {
        c.refresh = config::parse_refresh(r)
            .map_err(|why| format!("--refresh {}: {why}", remote::shown(r)))?;
    }
    c.foreground = cli.foreground || cli.daemon_child;
    c.daemon_child = cli.daemon_child;
    c.verbose = cli.verbose;
    c.log_file = cli.log_file;
    c.validate()?;
    Ok(Command::Mount(Box::new(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--version` names the commit built from: the checkout's, when git can tell.
    #[test]
    fn version_names_the_commit() {
        use clap::CommandFactory;
        let v = Cli::command().render_version();
        assert!(
            v.starts_with(&format!("h5mount {} (", env!("CARGO_PKG_VERSION"))),
            "{v}"
        );
        let head = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        match head {
            Some(h) => assert!(v.contains(&format!("commit {h}")), "{v} vs {h}"),
            None => assert!(v.contains("unknown commit"), "{v}"),
        }
    }

    fn parse(args: &[&str]) -> Result<Command, String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        into_command(cli)
    }

    #[test]
    fn mount_fuse3_form() {
        let Ok(Command::Mount(c)) = parse(&["h5mount", "f.h5", "/mnt", "-o", "ro,allow_other"])
        else {
            panic!("not a mount");
        };
        assert!(c.allow_other && !c.foreground);
        assert_eq!(c.file, PathBuf::from("f.h5"));
        let Ok(Command::Mount(c)) = parse(&[
            "h5mount",
            "-f",
            "-o",
            "ro",
            "-o",
            "threads=2",
            "--cache-size",
            "1M",
            "f.h5",
            "/m",
        ]) else {
            panic!("not a mount");
        };
        assert!(c.foreground);
        assert_eq!((c.threads, c.cache_size), (2, 1 << 20));
        let Ok(Command::Mount(c)) = parse(&["h5mount", "--readahead", "0", "f.h5", "/m"]) else {
            panic!("not a mount");
        };
        assert_eq!(c.readahead_kb, 0);
        assert!(parse(&["h5mount", "--readahead", "1M", "f.h5", "/m"]).is_err());
        // mount(8) passes rw unless ro is given: accepted, the mount stays read-only.
        assert!(parse(&["h5mount", "f.h5", "/m", "-o", "rw"]).is_ok());
        assert!(parse(&["h5mount", "f.h5"]).is_err());
        let Ok(Command::Mount(c)) = parse(&[
            "h5mount",
            "--npy",
            "--byte-order",
            "native",
            "f.h5",
            "/m",
            "-o",
            "envi",
        ]) else {
            panic!("not a mount");
        };
        assert!(c.npy && c.envi && !c.tiff);
        assert_eq!(c.byte_order, h5mount::views::ByteOrderMode::Native);
        let Ok(Command::Mount(c)) = parse(&["h5mount", "--tiff", "f.h5", "/m"]) else {
            panic!("not a mount");
        };
        assert!(c.tiff && !c.npy);
        let Ok(Command::Mount(c)) = parse(&["h5mount", "f.h5", "/m", "-o", "ro,tiff"]) else {
            panic!("not a mount");
        };
        assert!(c.tiff);
        assert!(parse(&["h5mount", "--byte-order", "odd", "f.h5", "/m"]).is_err());
    }

    #[test]
    fn zarr_flags_and_options() {
        use h5mount::views::zarr::ZarrVersion;
        let zarr_of = |args: &[&str]| match parse(args) {
            Ok(Command::Mount(c)) => c.zarr(),
            Ok(_) => panic!("not a mount"),
            Err(e) => panic!("{args:?}: {e}"),
        };
        assert_eq!(zarr_of(&["h5mount", "f.h5", "/m"]), None);
        // A bare --zarr takes no value from the next argument: SOURCE stays SOURCE.
        let z = zarr_of(&["h5mount", "--zarr", "f.h5", "/m"]).unwrap();
        assert_eq!((z.version, z.decoded), (ZarrVersion::V3, false));
        let z = zarr_of(&["h5mount", "--zarr=2", "--zarr-decoded", "f.h5", "/m"]).unwrap();
        assert_eq!((z.version, z.decoded), (ZarrVersion::V2, true));
        let z = zarr_of(&["h5mount", "f.h5", "/m", "-o", "ro,zarr=2,zarr_decoded"]).unwrap();
        assert_eq!((z.version, z.decoded), (ZarrVersion::V2, true));
        // The flag wins over -o.
        let z = zarr_of(&["h5mount", "--zarr=3", "f.h5", "/m", "-o", "zarr=2"]).unwrap();
        assert_eq!(z.version, ZarrVersion::V3);
        assert!(parse(&["h5mount", "--zarr=4", "f.h5", "/m"]).is_err());
        assert!(parse(&["h5mount", "--zarr-decoded", "f.h5", "/m"]).is_err());
        assert!(parse(&["h5mount", "--zarr", "--npy", "f.h5", "/m"]).is_err());
        let e = Cli::try_parse_from(["h5mount", "--zarr=x", "f.h5", "/m"]).unwrap_err();
        let line = refused_value(&e).unwrap();
        assert!(line.starts_with("--zarr \"x\": expected 3 or 2"), "{line}");
    }

    #[test]
    fn refresh_flag_and_option() {
        let secs = |s| Some(std::time::Duration::from_secs(s));
        let Ok(Command::Mount(c)) = parse(&["h5mount", "--refresh", "3", "f.h5", "/m"]) else {
            panic!("not a mount");
        };
        assert_eq!(c.refresh, secs(3));
        let Ok(Command::Mount(c)) = parse(&["h5mount", "f.h5", "/m", "-o", "ro,refresh=2"]) else {
            panic!("not a mount");
        };
        assert_eq!(c.refresh, secs(2));
        // The flag wins over -o, like the other flags.
        let Ok(Command::Mount(c)) =
            parse(&["h5mount", "--refresh", "0", "f.h5", "/m", "-o", "refresh=2"])
        else {
            panic!("not a mount");
        };
        assert_eq!(c.refresh, None);
        assert!(parse(&["h5mount", "--refresh", "soon", "f.h5", "/m"]).is_err());
    }

    #[test]
    fn inspect_subcommand() {
        let Ok(Command::Inspect { file, path, remote }) =
            parse(&["h5mount", "inspect", "f.h5", "/g"])
        else {
            panic!("not inspect");
        };
        assert_eq!(file, PathBuf::from("f.h5"));
        assert_eq!(path.as_deref(), Some("/g"));
        assert_eq!(remote, RemoteConfig::default());
        let Ok(Command::Inspect { remote, .. }) = parse(&[
            "h5mount",
            "inspect",
            "--endpoint",
            "http://127.0.0.1:8333/",
            "--no-sign-request",
            "--region",
            "eu-west-1",
            "s3://data/f.h5",
        ]) else {
            panic!("not inspect");
        };
        assert_eq!(remote.endpoint.as_deref(), Some("http://127.0.0.1:8333"));
        assert_eq!(remote.region.as_deref(), Some("eu-west-1"));
        assert!(remote.no_sign_request);
        assert!(parse(&["h5mount", "inspect", "https://u:p@h/f.h5"]).is_err());
    }

    /// Every remote option has its `-o` form (the long name with `_`), taking a value when
    /// the flag does.
    #[test]
    fn every_remote_flag_is_an_o_option() {
        let cmd = RemoteArgs::augment_args(clap::Command::new("t"));
        let mut seen = 0;
        for arg in cmd.get_arguments() {
            let name = arg.get_long().unwrap().replace('-', "_");
            let value_name = arg.get_value_names().and_then(|v| v.first());
            let value_name = value_name.filter(|_| arg.get_action().takes_values());
            let opt = match value_name.map(|v| v.as_str()) {
                None => name.clone(),
                Some("URL") => format!("{name}=http://127.0.0.1:1"),
                Some("NAME") => format!("{name}=lab"),
                Some("SECONDS") => format!("{name}=1.5"),
                Some("N") => format!("{name}=7"),
                Some(other) => panic!("no sample value for {other}"),
            };
            let mut c = Config::new("f.h5".into(), "/m".into());
            c.apply_options(&opt)
                .unwrap_or_else(|e| panic!("{opt}: {e}"));
            assert_ne!(c.remote, RemoteConfig::default(), "{opt} changed nothing");
            seen += 1;
        }
        assert_eq!(seen, 9);
    }

    /// A value refused by clap's parser becomes one line naming the flag and the value.
    #[test]
    fn refused_flag_values_are_one_line() {
        let e = Cli::try_parse_from(["h5mount", "--endpoint", "h:1\nx", "f.h5", "/m"]).unwrap_err();
        let line = refused_value(&e).unwrap();
        assert!(line.starts_with("--endpoint \"h:1\\nx\": "), "{line}");
        assert!(!line.contains('\n'), "{line}");
        let e = Cli::try_parse_from(["h5mount", "--endpoint", "http://k:s3cret@h:1", "f.h5", "/m"])
            .unwrap_err();
        let line = refused_value(&e).unwrap();
        assert!(
            line.contains("***@h:1") && !line.contains("s3cret"),
            "{line}"
        );
        let e = Cli::try_parse_from(["h5mount", "--bogus", "f.h5", "/m"]).unwrap_err();
        assert!(refused_value(&e).is_none());
    }
}
