//! The mount configuration as plain data, and the checks of option values.
//!
//! The command line (see `cli`, which also reads `-o` options through the same definition)
//! fills a [`Config`]; everything after it (`daemon`, the `fs` layer) sees only this struct.
//!
//! Every value is checked where it is parsed, by one function per option, the value parser
//! of its clap declaration; the function says what is wrong, and `cli` makes that one line
//! naming the option and the value (the remote options' rules are in [`remote`]).

pub mod remote;

use std::path::PathBuf;
use std::time::Duration;

use h5mount::views::zarr::{ZarrOptions, ZarrVersion};
use h5mount::views::{ByteOrderMode, ViewOptions};

pub use remote::RemoteConfig;

/// Worker threads serving requests when not told otherwise.
pub const DEFAULT_THREADS: usize = 4;
/// Worker threads of a mount of a remote source when not told otherwise: each request
/// that misses waits a round trip, so more of them keep more readers going at once.
pub const DEFAULT_REMOTE_THREADS: usize = 16;
/// Most worker threads accepted (each holds a 1 MiB request buffer).
pub const MAX_THREADS: usize = 64;
/// Readahead (KiB) the daemon sets on the mount when not told otherwise.
pub const DEFAULT_READAHEAD_KB: u64 = 1024;
/// The largest FUSE request asked for when not told otherwise (KiB): what every kernel
/// grants.
pub const DEFAULT_MAX_REQUEST_KB: u64 = 1024;
/// Largest FUSE request that can be asked for (KiB).
pub const MAX_MAX_REQUEST_KB: u64 = 4096;
/// Largest readahead accepted (KiB).
pub const MAX_READAHEAD_KB: u64 = 65536;
/// Decoded-chunk cache size when not told otherwise.
pub const DEFAULT_CACHE: u64 = 256 << 20;
/// Most files open at once when not told otherwise.
pub const DEFAULT_MAX_OPEN_FILES: usize = h5mount::model::resolver::DEFAULT_MAX_OPEN_FILES;
/// Fewest and most open files accepted.
pub const MAX_OPEN_FILES_RANGE: (usize, usize) = (2, 1 << 20);
/// Largest chunk cache accepted (16 TiB): far beyond any machine's memory, and small
/// enough that sums of a few capacities cannot overflow.
pub const MAX_CACHE: u64 = 16 << 40;

/// Everything a mount needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub file: PathBuf,
    pub mountpoint: PathBuf,
    /// Stay in front (else: detach once the mount answers).
    pub foreground: bool,
    /// Internal: this process is the detached child of a background mount and reports
    /// readiness on its stdout.
    pub daemon_child: bool,
    pub allow_other: bool,
    pub allow_root: bool,
    pub default_permissions: bool,
    pub auto_unmount: bool,
    /// Owner shown for every inode (default: the HDF5 file's owner).
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub fsname: Option<String>,
    pub subtype: Option<String>,
    pub cache_size: u64,
    /// Worker threads (see [`Config::threads_for`]); `threads_given` when the user chose.
    pub threads: usize,
    pub threads_given: bool,
    /// Most files open at once (`--max-open-files`, `-o max_open_files=`).
    pub max_open_files: usize,
    /// Readahead in KiB to set on the mount (`--readahead`, `-o readahead=`; needs root;
    /// 0: leave the kernel's).
    pub readahead_kb: u64,
    /// The largest FUSE request to ask the kernel for, in KiB (`--max-request`).
    pub max_request_kb: u64,
    /// `-v` count.
    pub verbose: u8,
    pub log_file: Option<PathBuf>,
    /// Follow names of other files (external links, virtual-dataset sources, external
    /// storage, symlinks of a mounted directory) that lead outside the mount's root
    /// (`-o allow_external_paths`; off: such datasets fail their reads and such links
    /// dangle).
    pub allow_external_paths: bool,
    /// `NAME.npy` beside every fixed-size dataset (`--npy`, `-o npy`).
    pub npy: bool,
    /// `NAME.hdr` ENVI headers beside 1- to 3-D numeric datasets (`--envi`, `-o envi`).
    pub envi: bool,
    /// `NAME.tif` beside 2-D and 3-D numeric datasets (`--tiff`, `-o tiff`).
    pub tiff: bool,
    /// Byte order numbers are served in (`--byte-order`, `-o byte_order=`; default as
    /// stored).
    pub byte_order: ByteOrderMode,
    /// Re-read the file this often when it changes (`--refresh`, `-o refresh=`; default
    /// off: the file is served as it was when mounted).
    pub refresh: Option<Duration>,
    /// How to reach a remote source (`s3://`, `http(s)://`).
    pub remote: RemoteConfig,
    /// List a remote file's root group in the background once the mount is ready (off with
    /// `--no-warm-up`, `-o no_warm_up`).
    pub warm_up: bool,
    /// Serve the source as a Zarr store of this format (`--zarr[=3|2]`, `-o zarr[=2]`).
    pub zarr: Option<ZarrVersion>,
    /// Zarr: every chunk decoded (`--zarr-decoded`, `-o zarr_decoded`).
    pub zarr_decoded: bool,
}

impl Config {
    /// The worker threads to run: the user's choice, else the default for the source.
    pub fn threads_for(&self, remote: bool) -> usize {
        match (self.threads_given, remote) {
            (false, true) => DEFAULT_REMOTE_THREADS,
            _ => self.threads,
        }
    }

    /// Defaults for a mount of `file` at `mountpoint`.
    pub fn new(file: PathBuf, mountpoint: PathBuf) -> Config {
        Config {
            file,
            mountpoint,
            foreground: false,
            daemon_child: false,
            allow_other: false,
            allow_root: false,
            default_permissions: true,
            auto_unmount: false,
            uid: None,
            gid: None,
            fsname: None,
            subtype: None,
            cache_size: DEFAULT_CACHE,
            threads: DEFAULT_THREADS,
            threads_given: false,
            readahead_kb: DEFAULT_READAHEAD_KB,
            max_request_kb: DEFAULT_MAX_REQUEST_KB,
            max_open_files: DEFAULT_MAX_OPEN_FILES,
            verbose: 0,
            log_file: None,
            allow_external_paths: false,
            npy: false,
            envi: false,
            tiff: false,
            byte_order: ByteOrderMode::AsStored,
            refresh: None,
            remote: RemoteConfig::default(),
            warm_up: true,
            zarr: None,
            zarr_decoded: false,
        }
    }

    /// How the Zarr store is served, when the mount serves one.
    pub fn zarr(&self) -> Option<ZarrOptions> {
        self.zarr.map(|version| ZarrOptions {
            version,
            decoded: self.zarr_decoded,
        })
    }

    /// The views to serve: the flags, plus text for variable-length data, always on; a
    /// `.tif` is BigTIFF past 4 GiB (or past the test hook's threshold,
    /// `h5mount::views::tiff::BIGTIFF_ENV`).
    pub fn views(&self) -> ViewOptions {
        ViewOptions {
            npy: self.npy,
            envi: self.envi,
            text: true,
            byte_order: self.byte_order,
            tiff: self.tiff,
            bigtiff_above: h5mount::views::tiff::bigtiff_above_from_env(),
        }
    }

    /// Reject combinations that cannot be mounted.
    pub fn validate(&self) -> Result<(), String> {
        if self.allow_other && self.allow_root {
            return Err("allow_other and allow_root are mutually exclusive".into());
        }
        if self.auto_unmount && !(self.allow_other || self.allow_root) {
            return Err("auto_unmount needs allow_other or allow_root".into());
        }
        if let Some(url) = self.file.to_str().filter(|f| is_remote(f)) {
            remote::check_source(url, &self.remote)?;
        }
        if self.zarr_decoded && self.zarr.is_none() {
            return Err("--zarr-decoded (zarr_decoded) needs --zarr (zarr)".into());
        }
        if self.zarr.is_some() {
            let others = [
                (self.npy, "--npy"),
                (self.envi, "--envi"),
                (self.tiff, "--tiff"),
                (self.byte_order != ByteOrderMode::AsStored, "--byte-order"),
                (self.refresh.is_some(), "--refresh"),
            ];
            if let Some((_, flag)) = others.iter().find(|(on, _)| *on) {
                return Err(format!(
                    "--zarr (zarr) serves a Zarr store and does not combine with {flag}"
                ));
            }
        }
        Ok(())
    }
}

/// Whether `source` names a remote object (`s3://`, `http(s)://`) in this build.
pub fn is_remote(source: &str) -> bool {
    #[cfg(feature = "remote")]
    {
        h5mount::io::remote::is_remote(source)
    }
    #[cfg(not(feature = "remote"))]
    {
        let _ = source;
        false
    }
}

/// `--uid`/`--gid`: a numeric id other than the reserved -1.
pub fn parse_id(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n != u32::MAX => Ok(n),
        _ => Err("not a numeric id".into()),
    }
}

/// `--fsname`/`--subtype`: a non-empty name without control characters.
pub fn parse_name(v: &str) -> Result<String, String> {
    match v.is_empty() || v.contains(char::is_control) {
        true => Err("expected a name without control characters".into()),
        false => Ok(v.to_string()),
    }
}

/// `--byte-order`/`byte_order=`: `native`, `little` or `big`.
pub fn parse_byte_order(v: &str) -> Result<ByteOrderMode, String> {
    match v {
        "native" => Ok(ByteOrderMode::Native),
        "little" => Ok(ByteOrderMode::Little),
        "big" => Ok(ByteOrderMode::Big),
        _ => Err("expected native, little or big".into()),
    }
}

/// `--zarr=`/`zarr=`: the Zarr format, 3 or 2.
pub fn parse_zarr_version(v: &str) -> Result<ZarrVersion, String> {
    match v {
        "3" => Ok(ZarrVersion::V3),
        "2" => Ok(ZarrVersion::V2),
        _ => Err("expected 3 or 2 (the Zarr format)".into()),
    }
}

/// A count from `lo` to `hi` (the value exactly: no sign, no spaces).
pub fn parse_count(v: &str, (lo, hi): (usize, usize)) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("expected {lo} to {hi}")),
    }
}

/// Worker thread count: 1 to [`MAX_THREADS`].
pub fn parse_threads(v: &str) -> Result<usize, String> {
    parse_count(v, (1, MAX_THREADS))
}

/// `--max-open-files`/`max_open_files=`: a count in [`MAX_OPEN_FILES_RANGE`].
pub fn parse_max_open_files(v: &str) -> Result<usize, String> {
    parse_count(v, MAX_OPEN_FILES_RANGE)
}

/// `--readahead`/`readahead=`: KiB from 0 (leave the kernel's) to [`MAX_READAHEAD_KB`].
pub fn parse_readahead(v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if n <= MAX_READAHEAD_KB => Ok(n),
        _ => Err(format!(
            "expected KiB from 0 (leave the kernel's) to {MAX_READAHEAD_KB}"
        )),
    }
}

/// `--max-request`/`max_request=`: KiB from [`DEFAULT_MAX_REQUEST_KB`] to
/// [`MAX_MAX_REQUEST_KB`], whole pages of 4 KiB.
pub fn parse_max_request(v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if (DEFAULT_MAX_REQUEST_KB..=MAX_MAX_REQUEST_KB).contains(&n) && n % 4 == 0 => Ok(n),
        _ => Err(format!(
            "expected KiB from {DEFAULT_MAX_REQUEST_KB} to {MAX_MAX_REQUEST_KB}, a multiple of 4"
        )),
    }
}

/// Shortest refresh period accepted: a file re-read more often would cost more than it
/// serves.
pub const MIN_REFRESH: Duration = Duration::from_millis(100);
/// Longest refresh period accepted (a day).
pub const MAX_REFRESH: Duration = Duration::from_secs(86_400);

/// `--refresh`/`refresh=`: seconds between checks of the file, decimals allowed (`1`, `0.5`);
/// `0` turns refreshing off.
pub fn parse_refresh(v: &str) -> Result<Option<Duration>, String> {
    let err = || {
        format!(
            "expected 0 (off) or seconds from {} to {}",
            MIN_REFRESH.as_secs_f64(),
            MAX_REFRESH.as_secs()
        )
    };
    let secs: f64 = v.trim().parse().map_err(|_| err())?;
    if secs == 0.0 {
        return Ok(None);
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if (MIN_REFRESH..=MAX_REFRESH).contains(&d) => Ok(Some(d)),
        _ => Err(err()),
    }
}

/// `--cache-size`/`cache_size=`: a [`parse_size`] of at most [`MAX_CACHE`].
pub fn parse_cache_size(v: &str) -> Result<u64, String> {
    match parse_size(v) {
        Ok(n) if n <= MAX_CACHE => Ok(n),
        Ok(_) => Err(format!("at most {}T", MAX_CACHE >> 40)),
        Err(e) => Err(e),
    }
}

/// A byte count with an optional binary suffix: `1048576`, `512K`, `64M`, `1G`, `2GiB`.
pub fn parse_size(v: &str) -> Result<u64, String> {
    let err = || "expected a number with an optional K, M, G or T suffix".to_string();
    let t = v.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(err()),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| err())?;
    n.checked_mul(1u64 << shift).ok_or_else(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::new("f.h5".into(), "/mnt".into())
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("1X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(parse_cache_size("16T"), Ok(16 << 40));
        assert!(parse_cache_size("17T").is_err());
    }

    #[test]
    fn combinations() {
        let mut c = cfg();
        (c.allow_other, c.allow_root) = (true, true);
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.auto_unmount = true;
        assert!(c.validate().is_err());
        c.allow_root = true;
        assert!(c.validate().is_ok());
        let mut c = cfg();
        c.zarr_decoded = true;
        assert!(c.validate().unwrap_err().contains("needs --zarr"));
        c.zarr = Some(ZarrVersion::V2);
        assert!(c.validate().is_ok());
        let others: [fn(&mut Config); 5] = [
            |c| c.npy = true,
            |c| c.envi = true,
            |c| c.tiff = true,
            |c| c.byte_order = ByteOrderMode::Big,
            |c| c.refresh = Some(Duration::from_secs(2)),
        ];
        for set in others {
            let mut c = cfg();
            c.zarr = Some(ZarrVersion::V3);
            set(&mut c);
            assert!(c.validate().is_err(), "{c:?}");
        }
    }

    #[test]
    fn values() {
        assert_eq!(parse_id("1000"), Ok(1000));
        assert!(parse_id("4294967295").is_err() && parse_id("abc").is_err());
        assert!(parse_name("a\nb").is_err() && parse_name("").is_err());
        assert_eq!(parse_readahead("0"), Ok(0));
        assert_eq!(parse_max_request("1024"), Ok(1024));
        assert_eq!(parse_max_request("4096"), Ok(4096));
        for bad in ["0", "512", "1023", "1026", "4100", "8192", "-1", "4M", ""] {
            assert!(parse_max_request(bad).is_err(), "{bad}");
        }
        for bad in ["x", "-1", "65537"] {
            assert!(parse_readahead(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_refresh("0"), Ok(None));
        assert_eq!(parse_refresh("0.5"), Ok(Some(Duration::from_millis(500))));
        for bad in ["x", "-1", "0.01", "1e9", "NaN"] {
            assert!(parse_refresh(bad).is_err(), "{bad}");
        }
        assert!(parse_max_open_files("1").is_err());
        assert_eq!(parse_zarr_version("2"), Ok(ZarrVersion::V2));
        assert_eq!(
            parse_zarr_version("v3"),
            Err("expected 3 or 2 (the Zarr format)".into())
        );
    }

    #[test]
    fn view_options() {
        let v = cfg().views();
        assert!(
            !v.npy && !v.envi && v.text && !v.tiff,
            "only text by default"
        );
        assert_eq!(v.byte_order, ByteOrderMode::AsStored);
    }
}
