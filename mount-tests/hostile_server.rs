//! A fault-injecting HTTP/1.1 server of our own, for the tests of what a remote mount does
//! when a server misbehaves: it serves objects from memory with an HTTP face (`GET`/`HEAD`
//! of `/path`, single and multiple `Range`s, `If-Match`, an ETag) and a minimal S3 face
//! (path-style `GET`/`HEAD /bucket/key`, ListObjectsV2 on `GET /bucket?list-type=2`),
//! ignoring signatures. Every request is recorded (method, target, headers, addresses,
//! status and body bytes written), and a per-test fault ([`HostileServer::set_fault`])
//! decides each answer: the normal one, another [`Response`] (any status, headers and body,
//! a body generated lazily, bytes trickled one at a time, a connection cut mid-body), a
//! connection held without an answer, or closed.
//!
//! One thread accepts (non-blocking listener, polled), one thread per connection with
//! keep-alive (the client, reqwest, reuses connections). Every wait is a short timeout in a
//! loop bounded in count and time and watching the stop flag: Drop stops the server and
//! joins every thread; [`Aborter::abort`] (for a test's memory guard) closes every
//! connection at once and refuses new ones, without stopping the server.
//!
//! The answers themselves (objects, ranges, listings, the pieces of a fault's answer) are in
//! [`answers`]; the server's own checks in `selftest`.

#![allow(dead_code)]

mod answers;
#[cfg(test)]
mod selftest;

pub use answers::*;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Poll interval of every blocking wait (accept, read, write, pacing, holding).
const TICK: Duration = Duration::from_millis(20);
/// Longest a server lives, a connection stays idle, or an answer is held or trickled.
const LIFETIME: Duration = Duration::from_secs(600);
/// Connections accepted per server; later ones are closed at once.
const MAX_CONNECTIONS: usize = 20_000;
/// Requests served on one connection.
const MAX_REQUESTS_PER_CONNECTION: usize = 100_000;
/// Requests kept in the log (later ones are counted, not kept).
const MAX_LOGGED: usize = 200_000;
/// Longest request head accepted.
const MAX_HEAD: usize = 64 << 10;
/// Size of the pieces a body is written in.
const WRITE_PIECE: usize = 64 << 10;

/// One parsed request.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The request target as sent: path and query.
    pub target: String,
    /// The path, percent-decoded, without its leading `/` (`bucket/key`, `f.h5`).
    pub path: String,
    /// The query's pairs, percent-decoded, in order.
    pub query: Vec<(String, String)>,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub peer: SocketAddr,
    pub local: SocketAddr,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A ListObjectsV2 request (`GET /bucket?list-type=2...`).
    pub fn is_list(&self) -> bool {
        self.method == "GET" && self.query("list-type") == Some("2") && !self.path.contains('/')
    }

    /// The `Range` header's ranges as `(first, last)` byte positions, for an object of
    /// `len` bytes (`None`: no header, or one this server does not understand).
    pub fn ranges(&self, len: u64) -> Option<Vec<(u64, u64)>> {
        parse_ranges(self.header("range")?, len)
    }

    /// True if the request carries credentials of any kind.
    pub fn has_credentials(&self) -> bool {
        self.headers.iter().any(|(k, _)| {
            k == "authorization" || k == "x-amz-security-token" || k == "proxy-authorization"
        })
    }
}

/// A request as the log keeps it, with what was answered.
#[derive(Clone, Debug)]
pub struct Logged {
    pub req: Request,
    /// The status sent (0: none, the connection was held or closed).
    pub status: u16,
    /// Body bytes written to the socket.
    pub body_bytes: u64,
    /// Whether the server is done with it (answered, cut, held until the client left).
    pub finished: bool,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hexpair = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hexpair) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
type Fault = dyn Fn(&Request, &Store) -> Reply + Send + Sync;

struct Shared {
    store: Store,
    fault: RwLock<Option<Arc<Fault>>>,
    log: Mutex<Vec<Logged>>,
    requests: AtomicUsize,
    connections: AtomicUsize,
    stop: AtomicBool,
    aborted: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    started: Instant,
}

impl Shared {
    /// True once the server should drop what it is doing.
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.aborted.load(Ordering::Relaxed)
            || self.started.elapsed() > LIFETIME
    }
}

/// Closes every connection of a server and refuses new ones (cloneable, for another thread).
#[derive(Clone)]
pub struct Aborter(Arc<AtomicBool>);

impl Aborter {
    pub fn abort(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The server (see the module docs). Stops and joins its threads on drop.
pub struct HostileServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl HostileServer {
    /// A server on `ip` (a loopback address: `127.0.0.1`, `127.0.0.2`), on a free port.
    pub fn start(ip: &str) -> HostileServer {
        let listener = TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}: {e}"));
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            store: Store::default(),
            fault: RwLock::new(None),
            log: Mutex::new(Vec::new()),
            requests: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            aborted: Arc::new(AtomicBool::new(false)),
            threads: Mutex::new(Vec::new()),
            started: Instant::now(),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, s));
        HostileServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// Serve `bytes` at `path` (`f.h5` for `http://HOST/f.h5`, `bucket/key` for S3).
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        self.shared.store.put(path, bytes);
    }

    /// Answer every later request through `fault` (which may give the normal answer,
    /// [`Store::answer`]).
    pub fn set_fault(&self, fault: impl Fn(&Request, &Store) -> Reply + Send + Sync + 'static) {
        *self.shared.fault.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(fault));
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://IP:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// The requests received so far (the first [`MAX_LOGGED`]), with their answers.
    pub fn requests(&self) -> Vec<Logged> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Requests received so far (all of them, logged or not).
    pub fn request_count(&self) -> usize {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    pub fn aborter(&self) -> Aborter {
        Aborter(self.shared.aborted.clone())
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let threads = std::mem::take(
            &mut *self
                .shared
                .threads
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) && shared.started.elapsed() < LIFETIME {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(_) => {
                std::thread::sleep(TICK / 4);
                continue;
            }
        };
        let n = shared.connections.fetch_add(1, Ordering::Relaxed);
        if n >= MAX_CONNECTIONS || shared.aborted.load(Ordering::Relaxed) {
            continue;
        }
        let s = shared.clone();
        let t = std::thread::spawn(move || {
            let _ = serve_connection(stream, peer, &s);
        });
        let mut threads = shared.threads.lock().unwrap_or_else(|e| e.into_inner());
        threads.retain(|t| !t.is_finished());
        threads.push(t);
    }
}

/// Why a connection ends.
enum End {
    /// The peer closed, the server stops, or a bound was reached.
    Closed,
}

fn serve_connection(mut stream: TcpStream, peer: SocketAddr, shared: &Shared) -> Result<(), End> {
    stream.set_nonblocking(false).map_err(|_| End::Closed)?;
    stream
        .set_read_timeout(Some(TICK))
        .map_err(|_| End::Closed)?;
    stream
        .set_write_timeout(Some(TICK))
        .map_err(|_| End::Closed)?;
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().map_err(|_| End::Closed)?;
    let mut pending: Vec<u8> = Vec::new();
    for _ in 0..MAX_REQUESTS_PER_CONNECTION {
        let head = read_head(&mut stream, &mut pending, shared)?;
        let Some(req) = parse_head(&head, peer, local) else {
            let _ = write_all(
                &mut stream,
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                None,
                shared,
            );
            return Err(End::Closed);
        };
        // A body sent with the request (none expected): skipped.
        let body_len: usize = req
            .header("content-length")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        skip_body(&mut stream, &mut pending, body_len, shared)?;
        shared.requests.fetch_add(1, Ordering::Relaxed);
        let index = {
            let mut log = shared.log.lock().unwrap_or_else(|e| e.into_inner());
            (log.len() < MAX_LOGGED).then(|| {
                log.push(Logged {
                    req: req.clone(),
                    status: 0,
                    body_bytes: 0,
                    finished: false,
                });
                log.len() - 1
            })
        };
        let fault = shared
            .fault
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let reply = match fault {
            Some(f) => f(&req, &shared.store),
            None => Reply::Send(shared.store.answer(&req)),
        };
        let sent = match reply {
            Reply::Send(r) => send(&mut stream, &req, r, index, shared),
            Reply::Close => Err(End::Closed),
            Reply::Hold => {
                hold(&mut stream, shared);
                Err(End::Closed)
            }
        };
        set_logged(shared, index, |l| l.finished = true);
        sent?;
        if req
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        {
            return Err(End::Closed);
        }
    }
    Err(End::Closed)
}

/// Read up to the end of a request head (bytes after it stay in `pending`).
fn read_head(
    stream: &mut TcpStream,
    pending: &mut Vec<u8>,
    shared: &Shared,
) -> Result<Vec<u8>, End> {
    let idle = Instant::now();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = pending.split_off(i + 4);
            return Ok(std::mem::replace(pending, rest));
        }
        if pending.len() > MAX_HEAD || shared.over() || idle.elapsed() > LIFETIME {
            return Err(End::Closed);
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err(End::Closed),
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e) if transient(&e) => {}
            Err(_) => return Err(End::Closed),
        }
    }
}

fn skip_body(
    stream: &mut TcpStream,
    pending: &mut Vec<u8>,
    mut len: usize,
    shared: &Shared,
) -> Result<(), End> {
    let from_pending = len.min(pending.len());
    pending.drain(..from_pending);
    len -= from_pending;
    let mut buf = [0u8; 8192];
    let start = Instant::now();
    while len > 0 {
        if shared.over() || start.elapsed() > LIFETIME {
            return Err(End::Closed);
        }
        match stream.read(&mut buf[..len.min(8192)]) {
            Ok(0) => return Err(End::Closed),
            Ok(n) => len -= n,
            Err(e) if transient(&e) => {}
            Err(_) => return Err(End::Closed),
        }
    }
    Ok(())
}

fn parse_head(head: &[u8], peer: SocketAddr, local: SocketAddr) -> Option<Request> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((&target, ""));
    let headers = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect();
    let query = raw_query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Some(Request {
        method,
        path: percent_decode(raw_path.trim_start_matches('/')),
        target: target.clone(),
        query,
        headers,
        peer,
        local,
    })
}

/// Whether a socket error only means "not now" (a read or write timed out, a signal): the
/// loop goes on, checking whether the server stops.
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Keep the connection open, answering nothing, until the client closes it or the server
/// stops.
fn hold(stream: &mut TcpStream, shared: &Shared) {
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    while !shared.over() && start.elapsed() < LIFETIME {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if transient(&e) => {}
            Err(_) => return,
        }
    }
}

/// Write all of `bytes`, one byte per `pace` if given; `counted` adds what was written.
fn write_all(
    stream: &mut TcpStream,
    bytes: &[u8],
    pace: Option<Duration>,
    shared: &Shared,
) -> Result<(), End> {
    let start = Instant::now();
    let mut at = 0;
    while at < bytes.len() {
        if shared.over() || start.elapsed() > LIFETIME {
            return Err(End::Closed);
        }
        let end = if pace.is_some() { at + 1 } else { bytes.len() };
        match stream.write(&bytes[at..end]) {
            Ok(0) => return Err(End::Closed),
            Ok(n) => at += n,
            Err(e) if transient(&e) => continue,
            Err(_) => return Err(End::Closed),
        }
        if let Some(p) = pace {
            if at < bytes.len() {
                pause(p, shared)?;
            }
        }
    }
    Ok(())
}

/// Sleep `d` in ticks, ending early (as a closed connection) when the server stops.
fn pause(d: Duration, shared: &Shared) -> Result<(), End> {
    let start = Instant::now();
    while start.elapsed() < d {
        if shared.over() {
            return Err(End::Closed);
        }
        std::thread::sleep(TICK.min(d.saturating_sub(start.elapsed())));
    }
    Ok(())
}

fn set_logged(shared: &Shared, index: Option<usize>, f: impl FnOnce(&mut Logged)) {
    if let Some(i) = index {
        if let Some(l) = shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(i)
        {
            f(l);
        }
    }
}

fn send(
    stream: &mut TcpStream,
    req: &Request,
    mut resp: Response,
    index: Option<usize>,
    shared: &Shared,
) -> Result<(), End> {
    let head_only = req.method == "HEAD";
    let announced = match &resp.body {
        Body::Bytes(b) => b.len() as u64,
        Body::Gen { len, .. } => *len,
    };
    if resp.get_header("content-length").is_none() {
        resp = resp.header("Content-Length", &announced.to_string());
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (k, v) in &resp.headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    set_logged(shared, index, |l| l.status = resp.status);
    write_all(stream, head.as_bytes(), resp.trickle_head, shared)?;
    if head_only {
        return Ok(());
    }
    let mut sent: u64 = 0;
    let cut = resp.cut_after.unwrap_or(u64::MAX);
    let pace = resp.trickle_body;
    let piece = |stream: &mut TcpStream, bytes: &[u8], sent: &mut u64| -> Result<(), End> {
        let mut at = 0;
        while at < bytes.len() {
            let room = cut.saturating_sub(*sent);
            if room == 0 {
                return Err(End::Closed);
            }
            let n = (bytes.len() - at).min(WRITE_PIECE).min(room as usize);
            write_all(stream, &bytes[at..at + n], pace, shared)?;
            at += n;
            *sent += n as u64;
            set_logged(shared, index, |l| l.body_bytes = *sent);
        }
        Ok(())
    };
    match &mut resp.body {
        Body::Bytes(b) => piece(stream, b, &mut sent)?,
        Body::Gen { next, .. } => {
            let start = Instant::now();
            while let Some(p) = next() {
                if shared.over() || start.elapsed() > LIFETIME {
                    return Err(End::Closed);
                }
                piece(stream, &p, &mut sent)?;
            }
        }
    }
    if resp.cut_after.is_some_and(|c| sent >= c) || sent < announced {
        // Cut, or a generated body shorter than announced: the client sees it end early.
        return Err(End::Closed);
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        412 => "Precondition Failed",
        416 => "Range Not Satisfiable",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
