//! The mount configuration as plain data, and the `-o opt[,opt...]` mount-option parser.
//!
//! The command line (see `cli`) fills a [`Config`]; everything after it (`daemon`, the `fs`
//! layer) sees only this struct. `-o` options are the ones `mount -t fuse.h5mount` and
//! `/etc/fstab` pass through `mount.fuse3`, so the generic ones (`noauto`, `nofail`, `user`,
//! `_netdev`, `x-systemd.*`, ...) are accepted and ignored, and `rw` is refused: h5mount is
//! read-only.

use std::path::PathBuf;
use std::time::Duration;

use h5mount::views::{ByteOrderMode, ViewOptions};

/// Worker threads serving requests when not told otherwise.
pub const DEFAULT_THREADS: usize = 4;
/// Worker threads of a mount of a remote source when not told otherwise: each request
/// that misses waits a round trip, so more of them keep more readers going at once.
pub const DEFAULT_REMOTE_THREADS: usize = 16;
/// Most worker threads accepted (each holds a 1 MiB request buffer).
pub const MAX_THREADS: usize = 64;
/// Readahead (KiB) the daemon sets on the mount when not told otherwise.
pub const DEFAULT_READAHEAD_KB: u64 = 1024;
/// Largest readahead accepted (KiB).
pub const MAX_READAHEAD_KB: u64 = 65536;
/// Decoded-chunk cache size when not told otherwise.
pub const DEFAULT_CACHE: u64 = 256 << 20;
/// Most files open at once when not told otherwise.
pub const DEFAULT_MAX_OPEN_FILES: usize = h5mount::model::resolver::DEFAULT_MAX_OPEN_FILES;
/// Fewest and most open files accepted.
pub const MAX_OPEN_FILES_RANGE: (usize, usize) = (2, 1 << 20);

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
    /// Remote sources (`s3://`, `http(s)://`): S3 endpoint (`--endpoint`, `-o endpoint=`).
    pub endpoint: Option<String>,
    /// S3 region (`--region`, `-o region=`).
    pub region: Option<String>,
    /// Named AWS profile for credentials (`--profile`, `-o profile=`).
    pub profile: Option<String>,
    /// Unsigned requests, for public buckets (`--no-sign-request`, `-o no_sign_request`).
    pub no_sign_request: bool,
    /// Virtual-hosted S3 addressing (`--virtual-hosted`, `-o virtual_hosted`).
    pub virtual_hosted: bool,
    /// Longest one request may take (`--request-timeout`, `-o request_timeout=`).
    pub request_timeout: Duration,
    /// Longest a read may retry before failing (`--retry-timeout`, `-o retry_timeout=`).
    pub retry_timeout: Duration,
    /// List a remote file's root group in the background once the mount is ready (off with
    /// `--no-warm-up`, `-o no_warm_up`).
    pub warm_up: bool,
}

/// Default bound on one request to a remote source.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on the retries of one read of a remote source.
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(30);

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
            max_open_files: DEFAULT_MAX_OPEN_FILES,
            verbose: 0,
            log_file: None,
            allow_external_paths: false,
            npy: false,
            envi: false,
            tiff: false,
            byte_order: ByteOrderMode::AsStored,
            refresh: None,
            endpoint: None,
            region: None,
            profile: None,
            no_sign_request: false,
            virtual_hosted: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            retry_timeout: DEFAULT_RETRY_TIMEOUT,
            warm_up: true,
        }
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

    /// Apply one `-o` argument: comma-separated options.
    pub fn apply_options(&mut self, list: &str) -> Result<(), String> {
        for opt in list.split(',').filter(|o| !o.is_empty()) {
            self.apply_option(opt)?;
        }
        Ok(())
    }

    fn apply_option(&mut self, opt: &str) -> Result<(), String> {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let need = || value.ok_or_else(|| format!("option {key} needs a value"));
        match key {
            "ro" => {}
            // mount(8) passes `rw` unless `ro` is given; the mount is read-only either way,
            // as for write-protected media.
            "rw" => {}
            "allow_other" => self.allow_other = true,
            "allow_root" => self.allow_root = true,
            "default_permissions" => self.default_permissions = true,
            "nodefault_permissions" | "no_default_permissions" => self.default_permissions = false,
            "auto_unmount" => self.auto_unmount = true,
            "allow_external_paths" => self.allow_external_paths = true,
            "npy" => self.npy = true,
            "envi" => self.envi = true,
            "tiff" => self.tiff = true,
            "byte_order" => self.byte_order = parse_byte_order(need()?)?,
            "uid" => self.uid = Some(parse_id(key, need()?)?),
            "gid" => self.gid = Some(parse_id(key, need()?)?),
            "fsname" => self.fsname = Some(need()?.to_string()),
            "subtype" => self.subtype = Some(need()?.to_string()),
            "cache_size" => self.cache_size = parse_size(need()?)?,
            "threads" => {
                self.threads = parse_threads(need()?)?;
                self.threads_given = true;
            }
            "refresh" => self.refresh = parse_refresh(need()?)?,
            "readahead" => self.readahead_kb = parse_readahead(need()?)?,
            "max_open_files" => self.max_open_files = parse_max_open_files(need()?)?,
            "endpoint" => self.endpoint = Some(need()?.to_string()),
            "region" => self.region = Some(need()?.to_string()),
            "profile" => self.profile = Some(need()?.to_string()),
            "no_sign_request" => self.no_sign_request = true,
            "virtual_hosted" => self.virtual_hosted = true,
            "no_warm_up" => self.warm_up = false,
            "request_timeout" => self.request_timeout = parse_seconds(key, need()?)?,
            "retry_timeout" => self.retry_timeout = parse_seconds(key, need()?)?,
            // Generic mount(8)/fstab options that mean nothing to a FUSE filesystem, or are
            // implied (h5mount always mounts nodev,nosuid).
            "noauto" | "auto" | "nofail" | "_netdev" | "user" | "users" | "nouser" | "dev"
            | "nodev" | "suid" | "nosuid" | "exec" | "noexec" | "defaults" | "atime"
            | "noatime" | "relatime" | "strictatime" | "async" => {}
            k if k.starts_with("x-") || k == "comment" => {}
            _ => return Err(format!("unknown mount option {opt:?}")),
        }
        Ok(())
    }

    /// Reject combinations that cannot be mounted.
    pub fn validate(&self) -> Result<(), String> {
        if self.allow_other && self.allow_root {
            return Err("allow_other and allow_root are mutually exclusive".into());
        }
        if self.auto_unmount && !(self.allow_other || self.allow_root) {
            return Err("auto_unmount needs allow_other or allow_root".into());
        }
        Ok(())
    }
}

fn parse_id(key: &str, v: &str) -> Result<u32, String> {
    v.parse()
        .map_err(|_| format!("option {key}={v}: not a numeric id"))
}

/// `--byte-order`/`byte_order=`: `native`, `little` or `big`.
pub fn parse_byte_order(v: &str) -> Result<ByteOrderMode, String> {
    match v {
        "native" => Ok(ByteOrderMode::Native),
        "little" => Ok(ByteOrderMode::Little),
        "big" => Ok(ByteOrderMode::Big),
        _ => Err(format!("byte_order={v}: expected native, little or big")),
    }
}

/// Worker thread count: 1 to [`MAX_THREADS`].
pub fn parse_threads(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!("threads={v}: expected 1 to {MAX_THREADS}")),
    }
}

/// `--max-open-files`/`max_open_files=`: a count in [`MAX_OPEN_FILES_RANGE`].
pub fn parse_max_open_files(v: &str) -> Result<usize, String> {
    let (lo, hi) = MAX_OPEN_FILES_RANGE;
    match v.parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("max_open_files={v}: expected {lo} to {hi}")),
    }
}

/// `--readahead`/`readahead=`: KiB from 0 (leave the kernel's) to [`MAX_READAHEAD_KB`].
pub fn parse_readahead(v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if n <= MAX_READAHEAD_KB => Ok(n),
        _ => Err(format!(
            "readahead={v}: expected KiB from 0 (leave the kernel's) to {MAX_READAHEAD_KB}"
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
            "refresh={v}: expected 0 (off) or seconds from {} to {}",
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

/// A duration in seconds (decimals allowed) from 0.1 s to one hour, for `key`.
pub fn parse_seconds(key: &str, v: &str) -> Result<Duration, String> {
    let err = || format!("{key}={v}: expected seconds from 0.1 to 3600");
    let secs: f64 = v.trim().parse().map_err(|_| err())?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if (Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&d) => Ok(d),
        _ => Err(err()),
    }
}

/// A byte count with an optional binary suffix: `1048576`, `512K`, `64M`, `1G`, `2GiB`.
pub fn parse_size(v: &str) -> Result<u64, String> {
    let err = || format!("size {v:?}: expected a number with an optional K, M, G or T suffix");
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
    }

    #[test]
    fn fstab_style_options() {
        let mut c = cfg();
        c.apply_options("ro,allow_other,uid=1000,gid=100,fsname=data,cache_size=1G")
            .unwrap();
        c.apply_options("noauto,nofail,_netdev,x-systemd.automount,comment=x,users,nodev")
            .unwrap();
        c.apply_options("threads=8,subtype=h5,nodefault_permissions")
            .unwrap();
        assert!(c.allow_other);
        assert_eq!((c.uid, c.gid), (Some(1000), Some(100)));
        assert_eq!(c.fsname.as_deref(), Some("data"));
        assert_eq!(c.subtype.as_deref(), Some("h5"));
        assert_eq!(c.cache_size, 1 << 30);
        assert_eq!(c.threads, 8);
        assert!(!c.default_permissions);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn refused_options() {
        assert!(
            cfg().apply_options("rw").is_ok(),
            "accepted; the mount stays read-only"
        );
        assert!(cfg().apply_options("bogus").is_err());
        assert!(cfg().apply_options("uid=abc").is_err());
        assert!(cfg().apply_options("uid").is_err());
        assert!(cfg().apply_options("threads=0").is_err());
        let mut c = cfg();
        c.apply_options("allow_other,allow_root").unwrap();
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.apply_options("auto_unmount").unwrap();
        assert!(c.validate().is_err());
        assert!(cfg().default_permissions, "on by default");
        assert!(!cfg().allow_other && !cfg().allow_root, "off by default");
        assert!(!cfg().allow_external_paths, "off by default");
        let mut c = cfg();
        c.apply_options("allow_external_paths").unwrap();
        assert!(c.allow_external_paths);
        assert!(cfg().apply_options("byte_order=middle").is_err());
        assert!(cfg().apply_options("byte_order").is_err());
    }

    #[test]
    fn readahead_option() {
        assert_eq!(cfg().readahead_kb, 1024);
        let mut c = cfg();
        c.apply_options("readahead=0").unwrap();
        assert_eq!(c.readahead_kb, 0);
        c.apply_options("readahead=4096").unwrap();
        assert_eq!(c.readahead_kb, 4096);
        for bad in [
            "readahead",
            "readahead=x",
            "readahead=-1",
            "readahead=65537",
        ] {
            assert!(cfg().apply_options(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn remote_options() {
        let mut c = cfg();
        assert_eq!(c.request_timeout, DEFAULT_REQUEST_TIMEOUT);
        c.apply_options("ro,endpoint=http://127.0.0.1:8333,region=eu-west-1,no_sign_request")
            .unwrap();
        c.apply_options("virtual_hosted,request_timeout=2.5,retry_timeout=60")
            .unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:8333"));
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        assert!(c.no_sign_request && c.virtual_hosted);
        assert!(c.warm_up);
        c.apply_options("no_warm_up").unwrap();
        assert!(!c.warm_up);
        assert_eq!(c.request_timeout, Duration::from_millis(2500));
        assert_eq!(c.retry_timeout, Duration::from_secs(60));
        for bad in ["endpoint", "request_timeout=0", "retry_timeout=x"] {
            assert!(cfg().apply_options(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn max_open_files_option() {
        assert_eq!(cfg().max_open_files, 256);
        let mut c = cfg();
        c.apply_options("ro,max_open_files=8").unwrap();
        assert_eq!(c.max_open_files, 8);
        for bad in ["max_open_files", "max_open_files=1", "max_open_files=x"] {
            assert!(cfg().apply_options(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refresh_option() {
        assert_eq!(cfg().refresh, None, "off by default");
        let mut c = cfg();
        c.apply_options("ro,refresh=2").unwrap();
        assert_eq!(c.refresh, Some(Duration::from_secs(2)));
        c.apply_options("refresh=0.5").unwrap();
        assert_eq!(c.refresh, Some(Duration::from_millis(500)));
        c.apply_options("refresh=0").unwrap();
        assert_eq!(c.refresh, None);
        for bad in [
            "refresh",
            "refresh=x",
            "refresh=-1",
            "refresh=0.01",
            "refresh=1e9",
        ] {
            assert!(cfg().apply_options(bad).is_err(), "{bad}");
        }
        assert!(cfg().apply_options("refresh=NaN").is_err());
    }

    #[test]
    fn view_options() {
        let v = cfg().views();
        assert!(!v.npy && !v.envi && v.text, "only text by default");
        assert_eq!(v.byte_order, ByteOrderMode::AsStored);
        assert!(!cfg().views().tiff);
        let mut c = cfg();
        c.apply_options("npy,envi,byte_order=big,tiff").unwrap();
        let v = c.views();
        assert!(v.npy && v.envi);
        assert_eq!(v.byte_order, ByteOrderMode::Big);
        assert!(c.views().tiff);
    }
}
