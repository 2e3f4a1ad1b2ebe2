//! The command line (clap derive), turned into a plain [`Config`] or an inspect request.
//!
//! `h5mount [OPTIONS] SOURCE MOUNTPOINT` mounts (SOURCE: an HDF5 file or a directory of
//! them); `h5mount inspect FILE [PATH]` lists. The form
//! `h5mount FILE DIR -o opt,...` is what `mount.fuse3` runs for `mount -t fuse.h5mount` and
//! `/etc/fstab` lines: each `-o` option is the long option of the same name, read through
//! this same definition ([`mount_options`]), so every option is declared once, here, with
//! its help text, type and limits; `--help`, the man page and `docs/configuration.md` are
//! made from it (`docs`).
//!
//! The options of a remote source are declared once ([`RemoteArgs`]) and flattened into
//! the commands. Every value goes through the parser of its option (in `config`); a refused
//! value is one line on stderr naming the option as it was given (`--threads` or
//! `-o threads=`), the value (a URL's user-info hidden) and what is wrong, and exit status 2.

pub mod mount_options;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

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
        output: RefsOutput,
        remote: RemoteConfig,
    },
    /// Write the man page and shell completions into a directory (packaging), and/or the
    /// configuration page.
    GenerateDocs {
        dir: Option<PathBuf>,
        configuration: Option<PathBuf>,
    },
}

#[derive(Parser, Debug)]
#[command(
    name = "h5mount",
    // The commit the binary was built from (build.rs).
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("H5MOUNT_COMMIT"), ")"),
    about = "Mount an HDF5 file, or a directory of them, read-only: groups become directories, \
             datasets files of raw elements (the bytes of numpy's ds[()].tobytes())",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    // The last of an option given twice wins; `-o` options come first (see mount_options).
    args_override_self = true
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

    /// Mount options, comma separated (repeatable), as in the options field of an /etc/fstab
    /// line: every long option is also NAME or NAME=VALUE here, with '_' for '-'
    /// (allow_other, cache_size=1G, zarr=2).
    // The long help, naming the fstab options accepted and ignored, is set in `command()`.
    #[arg(
        short = 'o',
        value_name = "OPT[,OPT...]",
        help_heading = "Mount options"
    )]
    options: Vec<String>,

    /// Let other users use the mount; for users other than root, /etc/fuse.conf must hold
    /// user_allow_other.
    #[arg(long, help_heading = "Mount options")]
    allow_other: bool,

    /// Let root use the mount too.
    #[arg(long, help_heading = "Mount options")]
    allow_root: bool,

    /// The kernel checks the modes shown (on by default).
    #[arg(
        long,
        overrides_with = "no_default_permissions",
        help_heading = "Mount options"
    )]
    default_permissions: bool,

    /// The kernel does not check the modes shown: access(2) answers read allowed, write
    /// EROFS (-o nodefault_permissions too).
    #[arg(
        long,
        alias = "nodefault-permissions",
        overrides_with = "default_permissions",
        help_heading = "Mount options"
    )]
    no_default_permissions: bool,

    /// Unmount when the process dies (needs --allow-other or --allow-root).
    #[arg(long, help_heading = "Mount options")]
    auto_unmount: bool,

    /// Owner shown for every entry [default: the owner of SOURCE].
    #[arg(long, value_name = "N", value_parser = config::parse_id, help_heading = "Mount options")]
    uid: Option<u32>,

    /// Group shown for every entry [default: the group of SOURCE].
    #[arg(long, value_name = "N", value_parser = config::parse_id, help_heading = "Mount options")]
    gid: Option<u32>,

    /// Source shown in /proc/mounts [default: SOURCE].
    #[arg(long, value_name = "NAME", value_parser = config::parse_name, help_heading = "Mount options")]
    fsname: Option<String>,

    /// Type shown in /proc/mounts after "fuse." [default: h5mount].
    #[arg(long, value_name = "NAME", value_parser = config::parse_name, help_heading = "Mount options")]
    subtype: Option<String>,

    /// Follow external links, virtual-dataset sources, external storage and directory
    /// symlinks that lead outside the mounted file's directory or the mounted directory
    /// (absolute names, '..', symlinks pointing out) [default: refused: such datasets fail
    /// their reads and such links dangle].
    #[arg(long, help_heading = "Mount options")]
    allow_external_paths: bool,

    /// Also serve NAME.npy (NumPy format) beside every fixed-size dataset.
    #[arg(long, help_heading = "Views")]
    npy: bool,

    /// Also serve NAME.hdr (ENVI header) beside 1- to 3-D numeric datasets.
    #[arg(long, help_heading = "Views")]
    envi: bool,

    /// Also serve NAME.tif (TIFF, one page per 2-D plane; BigTIFF past 4 GiB) beside 2-D and
    /// 3-D numeric datasets.
    #[arg(long, help_heading = "Views")]
    tiff: bool,

    /// Serve numbers in this byte order: native, little or big [default: as stored].
    #[arg(long, value_name = "ORDER", value_parser = config::parse_byte_order, help_heading = "Views")]
    byte_order: Option<h5mount::views::ByteOrderMode>,

    /// Serve SOURCE as a Zarr store instead, in format 3 (--zarr, --zarr=3) or 2 (--zarr=2):
    /// groups are Zarr groups, datasets Zarr arrays with one file per chunk that was
    /// written, the root carries consolidated metadata. Does not combine with the views or
    /// --refresh.
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
    /// compressor), for readers that know few codecs.
    #[arg(long, help_heading = "Zarr")]
    zarr_decoded: bool,

    /// Re-read the file when it changes, checking every SECONDS (decimals allowed; 0: off),
    /// for files written while mounted [default: off].
    #[arg(long, value_name = "SECONDS", value_parser = refresh, help_heading = "Growing files")]
    refresh: Option<Refresh>,

    /// Stay in the foreground (default: return once the mount answers, serve in background).
    #[arg(short, long, help_heading = "Process")]
    foreground: bool,

    /// Bytes of decoded chunks to cache (K, M, G, T suffixes; at most 16T); also the largest
    /// chunk a read will decode (at least 64M): a larger one fails with EIO and a log line
    /// [default: 256M].
    #[arg(long, value_name = "SIZE", value_parser = config::parse_cache_size, help_heading = "Performance")]
    cache_size: Option<u64>,

    /// Worker threads serving requests, 1 to 64 [default: 4; 16 for a remote source].
    #[arg(long, value_name = "N", value_parser = config::parse_threads, help_heading = "Performance")]
    threads: Option<usize>,

    /// Readahead to set on the mount in KiB, up to 65536, if root (0: leave the kernel's,
    /// 128) [default: 1024].
    #[arg(long, value_name = "KB", value_parser = config::parse_readahead, help_heading = "Performance")]
    readahead: Option<u64>,

    /// Largest FUSE request to ask the kernel for, in KiB, 1024 to 4096 (whole 4 KiB pages);
    /// the readahead follows it unless --readahead is given. Above 1024 needs Linux 6.13 or
    /// later, whose /proc/sys/fs/fuse/max_pages_limit h5mount raises as root, with a log
    /// line (otherwise a warning says what the kernel grants). Not faster on the project's
    /// bench (docs/performance.md) [default: 1024].
    #[arg(long, value_name = "KB", value_parser = config::parse_max_request, help_heading = "Performance")]
    max_request: Option<u64>,

    /// Most files kept open at once, at least 2: HDF5 files reached by a directory mount,
    /// external links and virtual-dataset sources, and raw files of external storage; the
    /// least recently used is closed and opened again when needed [default: 256].
    #[arg(long, value_name = "N", value_parser = config::parse_max_open_files, help_heading = "Performance")]
    max_open_files: Option<usize>,

    #[command(flatten)]
    remote: RemoteArgs,

    /// Do not list a remote file's root group in the background once the mount is ready
    /// (its links, its children's headers, its child groups' listings), nor ask an HTTP
    /// server whether it answers GETs of several ranges: fetch nothing until asked.
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

/// `--refresh`: the period, or `None` for off. (A newtype: clap would read
/// `Option<Option<_>>` as a flag whose value may be left out.)
#[derive(Clone, Debug)]
struct Refresh(Option<Duration>);

fn refresh(v: &str) -> Result<Refresh, String> {
    config::parse_refresh(v).map(Refresh)
}

/// How to reach a remote source: one declaration of each option, for mounting and for
/// `inspect` and `refs`.
#[derive(Args, Debug)]
struct RemoteArgs {
    /// S3 endpoint of an S3-compatible store: an http:// or https:// URL, e.g.
    /// http://127.0.0.1:8333 [default: AWS].
    #[arg(long, value_name = "URL", value_parser = remote::parse_endpoint, help_heading = "Remote sources")]
    endpoint: Option<String>,

    /// S3 region: a-z, 0-9 and '-' [default: AWS_REGION, else us-east-1].
    #[arg(long, value_name = "NAME", value_parser = remote::parse_region, help_heading = "Remote sources")]
    region: Option<String>,

    /// Credentials (and region, endpoint) of this named profile of ~/.aws/credentials and
    /// ~/.aws/config: static keys, credential_process or role_arn, kept fresh while mounted
    /// [default: the AWS environment variables, web identity, container and instance
    /// metadata].
    #[arg(long, value_name = "NAME", value_parser = remote::parse_profile, help_heading = "Remote sources")]
    profile: Option<String>,

    /// Send unsigned requests, for public buckets.
    #[arg(long, help_heading = "Remote sources")]
    no_sign_request: bool,

    /// Address buckets as BUCKET.HOST rather than HOST/BUCKET.
    #[arg(long, help_heading = "Remote sources")]
    virtual_hosted: bool,

    /// Follow an HTTP(S) server's redirects to other origins too [default: within the same
    /// scheme, host and port only; an S3 store's never].
    #[arg(long, help_heading = "Remote sources")]
    allow_redirects: bool,

    /// Entries of one directory of a bucket listed at most, from 1 to 10,000,000
    /// [default: 50000].
    #[arg(long, value_name = "N", value_parser = remote::parse_list_max_keys, help_heading = "Remote sources")]
    list_max_keys: Option<usize>,

    /// Longest one request may take, in seconds from 0.1 to 3600 [default: 10].
    #[arg(long, value_name = "SECONDS", value_parser = remote::parse_seconds, help_heading = "Remote sources")]
    request_timeout: Option<Duration>,

    /// Longest a read may spend retrying failed requests, in seconds from 0.1 to 3600
    /// [default: 30].
    #[arg(long, value_name = "SECONDS", value_parser = remote::parse_seconds, help_heading = "Remote sources")]
    retry_timeout: Option<Duration>,

    /// On a server that answers one byte range per request (S3 stores), metadata ranges at
    /// most SIZE apart are fetched in one request, the bytes between them too: fewer
    /// requests for more bytes, where object headers lie between megabytes of data; 0 to
    /// 64M [default: 128K].
    #[arg(long, value_name = "SIZE", value_parser = remote::parse_merge_gap, help_heading = "Remote sources")]
    merge_gap: Option<u64>,
}

impl RemoteArgs {
    /// The remote configuration these options give (defaults for those not given).
    fn into_config(self) -> RemoteConfig {
        let d = RemoteConfig::default();
        RemoteConfig {
            endpoint: self.endpoint,
            region: self.region,
            profile: self.profile,
            no_sign_request: self.no_sign_request,
            virtual_hosted: self.virtual_hosted,
            allow_redirects: self.allow_redirects,
            list_max_keys: self.list_max_keys.unwrap_or(d.list_max_keys),
            request_timeout: self.request_timeout.unwrap_or(d.request_timeout),
            retry_timeout: self.retry_timeout.unwrap_or(d.retry_timeout),
            merge_gap: self.merge_gap.unwrap_or(d.merge_gap),
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
        #[command(flatten)]
        output: RefsOutput,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Write the man page (h5mount.1) and the bash, zsh and fish completions into DIR
    /// (packaging/build-deb runs it), and/or docs/configuration.md into FILE.
    #[command(hide = true)]
    GenerateDocs {
        dir: Option<PathBuf>,
        #[arg(long, value_name = "FILE")]
        configuration: Option<PathBuf>,
    },
}

/// What `refs` writes and how (its options beside the source and the remote ones).
#[derive(Args, Clone, Debug)]
pub struct RefsOutput {
    /// Write the manifest to OUT [default: standard output].
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// The URL the references name [default: the source as given; for a local file,
    /// its absolute path].
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Chunks of at most BYTES are written inline rather than referenced; an array whose
    /// chunks must be decoded by h5mount is written only if every chunk fits.
    #[arg(long, value_name = "BYTES", default_value_t = h5mount::views::zarr::refs::DEFAULT_INLINE_THRESHOLD,
          value_parser = inline_threshold)]
    pub inline_threshold: u64,
    /// json: one JSON document. parquet: kerchunk's Parquet layout, a directory OUT
    /// (.zmetadata, and per array refs.N.parq files of N chunk keys each) that fsspec
    /// reads lazily, for files of millions of chunks [default: parquet when OUT ends in
    /// .parq or .parquet, else json; a directory SOURCE: json].
    #[arg(long, value_name = "FORMAT", value_parser = refs_format)]
    pub format: Option<RefsFormat>,
    /// Chunk keys per Parquet file (parquet only) [default: 10000].
    #[arg(long, value_name = "N", value_parser = record_size)]
    pub record_size: Option<u64>,
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

/// The command line definition: for parsing, the man page, completions and
/// `docs/configuration.md`. The long help of `-o` names the fstab options it ignores, from
/// [`mount_options::IGNORED`].
pub fn command() -> clap::Command {
    Cli::command().mut_arg("options", |a| {
        let short = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        a.long_help(format!(
            "{short}. A flag given on the command line wins over the same option in -o; among \
             -o options, as among repeated flags, the last wins. Accepted and ignored: {} \
             (fstab's and mount(8)'s own; the mount is always read-only, nodev and nosuid).",
            mount_options::ignored_list()
        ))
    })
}

/// Why the command line was refused.
#[derive(Debug)]
enum Refused {
    /// A value or `-o` option refused: the line to print.
    Line(String),
    /// Another usage error, printed by clap with its hints (or `--help`, `--version`).
    Clap(clap::Error),
}

/// Parse the process arguments. A refused value prints one line and exits 2; other usage
/// errors print clap's message (with its hints) and exit 2.
pub fn parse() -> Command {
    match parse_from(std::env::args_os().collect()) {
        Ok(c) => c,
        Err(Refused::Line(msg)) => {
            eprintln!("h5mount: {msg}");
            std::process::exit(2);
        }
        Err(Refused::Clap(e)) => e.exit(),
    }
}

/// Parse `args` (the program name first): once to find the `-o` options, which become the
/// flags they name ([`mount_options`]); those flags alone, so that a refused value is named
/// as the `-o` option it came from; then those flags before `args`, so that the command
/// line's own flags win.
fn parse_from(args: Vec<OsString>) -> Result<Command, Refused> {
    let cmd = command();
    let clap_refused = |e: clap::Error| match refused_value(&e) {
        Some((arg, value, why)) => Refused::Line(format!("{arg} {}: {why}", remote::shown(&value))),
        None => Refused::Clap(e),
    };
    let first = cli_from(&cmd, &args).map_err(clap_refused)?;
    if first.options.is_empty() {
        return into_command(first).map_err(Refused::Line);
    }
    let flags = mount_options::to_flags(&cmd, &first.options).map_err(Refused::Line)?;
    let program = args.first().cloned().unwrap_or_else(|| "h5mount".into());
    // The `-o` options alone, with the positionals already found.
    let mut alone = vec![program.clone()];
    alone.extend(flags.iter().map(|f| OsString::from(&f.arg)));
    alone.push("--".into());
    alone.extend(
        first
            .file
            .iter()
            .chain(&first.mountpoint)
            .map(OsString::from),
    );
    if let Err(e) = cli_from(&cmd, &alone) {
        return Err(Refused::Line(match refused_value(&e) {
            Some((arg, value, why)) => {
                let key = flags
                    .iter()
                    .find(|f| f.arg.starts_with(&format!("{arg}=")))
                    .map_or_else(
                        || mount_options::o_name(arg.trim_start_matches('-')),
                        |f| f.key.clone(),
                    );
                format!("-o {key}={}: {why}", remote::shown(&value))
            }
            None => format!("-o {}: {}", first.options.join(","), first_line(&e)),
        }));
    }
    let mut all = vec![program];
    all.extend(flags.iter().map(|f| OsString::from(&f.arg)));
    all.extend(args.into_iter().skip(1));
    let cli = cli_from(&cmd, &all).map_err(clap_refused)?;
    into_command(cli).map_err(Refused::Line)
}

/// `args` through the definition `cmd`.
fn cli_from(cmd: &clap::Command, args: &[OsString]) -> Result<Cli, clap::Error> {
    let mut m = cmd.clone().try_get_matches_from(args)?;
    Cli::from_arg_matches_mut(&mut m)
}

/// The first line of clap's message, without its `error: `.
fn first_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or("");
    line.trim_start_matches("error: ").to_string()
}

/// A value refused by its option's parser: the option as clap names it (`--threads`), the
/// value and the reason; `None` for other errors.
fn refused_value(e: &clap::Error) -> Option<(String, String, String)> {
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
    let arg = arg.split([' ', '[', '=']).next().unwrap_or(arg);
    let value = text(ContextKind::InvalidValue)?;
    Some((arg.to_string(), value.to_string(), why.to_string()))
}

/// The remote options `args` give for reading `file`, checked against it when it is a URL.
fn remote_for(file: &std::path::Path, args: RemoteArgs) -> Result<RemoteConfig, String> {
    let remote = args.into_config();
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
            output,
            remote: args,
        }) => {
            let remote = remote_for(&file, args)?;
            return Ok(Command::Refs {
                file,
                path,
                output,
                remote,
            });
        }
        Some(Sub::GenerateDocs { dir, configuration }) => {
            return Ok(Command::GenerateDocs { dir, configuration })
        }
        None => {}
    }
    let (Some(file), Some(mountpoint)) = (cli.file, cli.mountpoint) else {
        return Err("SOURCE and MOUNTPOINT are required".into());
    };
    let d = Config::new(file, mountpoint);
    let c = Config {
        foreground: cli.foreground || cli.daemon_child,
        daemon_child: cli.daemon_child,
        allow_other: cli.allow_other,
        allow_root: cli.allow_root,
        default_permissions: !cli.no_default_permissions,
        auto_unmount: cli.auto_unmount,
        uid: cli.uid,
        gid: cli.gid,
        fsname: cli.fsname,
        subtype: cli.subtype,
        cache_size: cli.cache_size.unwrap_or(d.cache_size),
        threads: cli.threads.unwrap_or(d.threads),
        threads_given: cli.threads.is_some(),
        max_open_files: cli.max_open_files.unwrap_or(d.max_open_files),
        readahead_kb: cli.readahead.or(cli.max_request).unwrap_or(d.readahead_kb),
        max_request_kb: cli.max_request.unwrap_or(d.max_request_kb),
        verbose: cli.verbose,
        log_file: cli.log_file,
        allow_external_paths: cli.allow_external_paths,
        npy: cli.npy,
        envi: cli.envi,
        tiff: cli.tiff,
        byte_order: cli.byte_order.unwrap_or(d.byte_order),
        refresh: cli.refresh.map_or(d.refresh, |r| r.0),
        remote: cli.remote.into_config(),
        warm_up: !cli.no_warm_up,
        zarr: cli.zarr,
        zarr_decoded: cli.zarr_decoded,
        ..d
    };
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
        match parse_from(args.iter().map(OsString::from).collect()) {
            Ok(c) => Ok(c),
            Err(Refused::Line(l)) => Err(l),
            Err(Refused::Clap(e)) => Err(e.to_string()),
        }
    }

    /// The configuration of mounting `f.h5` on `/m` with `args`.
    fn mount(args: &[&str]) -> Result<Config, String> {
        let mut all = vec!["h5mount"];
        all.extend_from_slice(args);
        if !args.contains(&"f.h5") {
            all.extend(["f.h5", "/m"]);
        }
        match parse(&all)? {
            Command::Mount(c) => Ok(*c),
            _ => panic!("{args:?}: not a mount"),
        }
    }

    fn default() -> Config {
        Config::new("f.h5".into(), "/m".into())
    }

    /// A sample value for each value name of the definition, and the options that must come
    /// with an option for the mount to be valid.
    fn sample(arg: &clap::Arg) -> (Option<&'static str>, &'static [&'static str]) {
        let value = arg
            .get_value_names()
            .and_then(|v| v.first())
            .filter(|_| arg.get_action().takes_values())
            .map(|v| match (arg.get_id().as_str(), v.as_str()) {
                ("max_request", _) => "2048",
                (_, v) => match v {
                    "N" => "7",
                    "SIZE" => "3M",
                    "KB" => "512",
                    "SECONDS" => "2.5",
                    "URL" => "http://127.0.0.1:1",
                    "NAME" => "lab",
                    "ORDER" => "big",
                    "FORMAT" => "2",
                    "PATH" => "/tmp/h5mount-test.log",
                    other => panic!("--{:?}: no sample value for {other}", arg.get_long()),
                },
            });
        let with: &[&str] = match arg.get_id().as_str() {
            "auto_unmount" => &["allow_other"],
            "zarr_decoded" => &["zarr"],
            // On by default: only seen after its opposite.
            "default_permissions" => &["no_default_permissions"],
            _ => &[],
        };
        (value, with)
    }

    /// Every option reachable by -o gives the same configuration as a flag and as an -o
    /// option, and a different one from the defaults.
    #[test]
    fn every_option_given_both_ways_gives_the_same_config() {
        let cmd = command();
        let mut seen = 0;
        for arg in mount_options::reachable(&cmd) {
            let long = arg.get_long().unwrap();
            let key = mount_options::o_name(long);
            let (value, with) = sample(arg);
            let (flag, o) = match value {
                Some(v) => (format!("--{long}={v}"), format!("{key}={v}")),
                None => (format!("--{long}"), key.clone()),
            };
            // The companions as -o options first, so that the flag or -o option tested
            // comes last and wins.
            let companions = with.join(",");
            let by_flag =
                mount(&["-o", &companions, &flag]).unwrap_or_else(|e| panic!("{flag}: {e}"));
            let by_o =
                mount(&["-o", &companions, "-o", &o]).unwrap_or_else(|e| panic!("-o {o}: {e}"));
            assert_eq!(by_flag, by_o, "{flag} and -o {o}");
            let baseline = mount(&["-o", &companions]).unwrap_or_else(|_| default());
            assert_ne!(by_flag, baseline, "{flag} changed nothing");
            seen += 1;
        }
        assert!(seen >= 30, "{seen} options");
    }

    #[test]
    fn unknown_o_options_are_one_line_naming_them() {
        for bad in [
            "bogus",
            "cache-size=1G",
            "daemon_child",
            "help",
            "version",
            "o=x",
            "f",
        ] {
            let e = mount(&["-o", &format!("ro,{bad},nofail")]).unwrap_err();
            assert_eq!(e, format!("-o {:?}: unknown mount option", bad), "{bad}");
        }
        let e = mount(&["-o", "threads=0"]).unwrap_err();
        assert_eq!(e, "-o threads=\"0\": expected 1 to 64");
        let e = mount(&["-o", "fsname=a\nb"]).unwrap_err();
        assert!(
            e.starts_with("-o fsname=\"a\\nb\": ") && !e.contains('\n'),
            "{e}"
        );
        let e = mount(&["-o", "npy=1"]).unwrap_err();
        assert_eq!(e, "-o npy=\"1\": npy takes no value");
        let e = mount(&["-o", "uid"]).unwrap_err();
        assert_eq!(e, "-o uid: needs a value (-o uid=...)");
        let e = mount(&["-o", "zarr=v3"]).unwrap_err();
        assert_eq!(e, "-o zarr=\"v3\": expected 3 or 2 (the Zarr format)");
        for bad in [
            "uid=4294967295",
            "byte_order=middle",
            "byte_order",
            "readahead=65537",
            "max_open_files=1",
            "refresh=0.01",
            "refresh=NaN",
            "zarr=",
            "zarr=4",
            "endpoint=127.0.0.1:9000",
            "region=",
            "profile=a/b",
            "request_timeout=0",
            "retry_timeout=x",
            "no_sign_request=yes",
            "list_max_keys=0",
        ] {
            let e = mount(&["-o", bad]).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(
                e.starts_with(&format!("-o {key}")) && !e.contains('\n'),
                "{bad}: {e}"
            );
        }
    }

    /// fstab's and mount(8)'s own options are accepted, with or without a value, and change
    /// nothing.
    #[test]
    fn fstab_only_options_are_accepted_and_ignored() {
        // Written out, not taken from IGNORED: what mount(8) and fstab pass must stay accepted.
        let mut all: Vec<String> = "ro,rw,defaults,auto,noauto,nofail,_netdev,user,users,nouser,\
            dev,nodev,suid,nosuid,exec,noexec,atime,noatime,relatime,strictatime,async,comment"
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        all.extend(
            [
                "x-systemd.automount",
                "x-gvfs-show",
                "comment=a b",
                "noauto=1",
            ]
            .map(String::from),
        );
        assert_eq!(mount(&["-o", &all.join(",")]), Ok(default()));
        for one in &all {
            assert_eq!(mount(&["-o", one]), Ok(default()), "{one}");
        }
        assert_eq!(mount(&["-o", ",,ro,"]), Ok(default()));
    }

    /// A flag on the command line wins over the same option in -o, wherever it stands; among
    /// -o options, and among repeated flags, the last wins.
    #[test]
    fn flags_win_over_o_and_the_last_wins() {
        let threads = |args: &[&str]| mount(args).unwrap().threads;
        assert_eq!(threads(&["--threads", "3", "-o", "threads=5"]), 3);
        assert_eq!(threads(&["-o", "threads=5", "--threads", "3"]), 3);
        assert_eq!(threads(&["-o", "threads=5,threads=6"]), 6);
        assert_eq!(threads(&["-o", "threads=5", "-o", "threads=6"]), 6);
        assert_eq!(threads(&["--threads", "2", "--threads", "9"]), 9);
        let perms = |args: &[&str]| mount(args).unwrap().default_permissions;
        assert!(!perms(&["-o", "nodefault_permissions"]));
        assert!(!perms(&["-o", "no_default_permissions"]));
        assert!(perms(&["-o", "nodefault_permissions,default_permissions"]));
        assert!(perms(&[
            "--default-permissions",
            "-o",
            "nodefault_permissions"
        ]));
        assert!(!perms(&[
            "--default-permissions",
            "--no-default-permissions"
        ]));
        // A flag's value refused is named as the flag, an -o one's as the -o option.
        let e = mount(&["--threads", "0", "-o", "threads=2"]).unwrap_err();
        assert!(e.starts_with("--threads \"0\""), "{e}");
        let e = mount(&["--threads", "2", "-o", "threads=0"]).unwrap_err();
        assert!(e.starts_with("-o threads=\"0\""), "{e}");
        // -v counts across both.
        assert_eq!(mount(&["-v", "-o", "verbose"]).unwrap().verbose, 2);
        // A SOURCE that looks like a flag stays SOURCE.
        let Ok(Command::Mount(c)) = parse(&["h5mount", "-o", "npy", "--", "-f.h5", "/m"]) else {
            panic!("not a mount");
        };
        assert!(c.npy && c.file == std::path::Path::new("-f.h5"));
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
        let line = parse(&["h5mount", "--zarr=x", "f.h5", "/m"]).err().unwrap();
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

    /// A value refused by clap's parser becomes one line naming the flag and the value.
    #[test]
    fn refused_flag_values_are_one_line() {
        let line = parse(&["h5mount", "--endpoint", "h:1\nx", "f.h5", "/m"])
            .err()
            .unwrap();
        assert!(line.starts_with("--endpoint \"h:1\\nx\": "), "{line}");
        assert!(!line.contains('\n'), "{line}");
        let line = parse(&["h5mount", "--endpoint", "http://k:s3cret@h:1", "f.h5", "/m"])
            .err()
            .unwrap();
        assert!(
            line.contains("***@h:1") && !line.contains("s3cret"),
            "{line}"
        );
        let e = command()
            .try_get_matches_from(["h5mount", "--bogus", "f.h5", "/m"])
            .unwrap_err();
        assert!(refused_value(&e).is_none());
    }
}
