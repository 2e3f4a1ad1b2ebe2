//! A fake STS on 127.0.0.1 for tests: records each request, checks its SigV4 signature
//! against the secret a test names (an implementation of its own, not the signer's), and
//! answers as the test says. The library's unit tests and the mount tests
//! (`mount-tests/remote_profile.rs`, through `#[path]`) share it, so it names nothing of
//! the crate (its locks are plain ones).

use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request as received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The form body's value of `key`.
    pub fn form(&self, key: &str) -> Option<String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    }

    /// The access key id the request was signed with, if its signature is right for
    /// `secret` (and its payload hash for its body).
    pub fn signed_by(&self, secret: &str) -> Option<String> {
        let auth = self.header("authorization")?;
        let rest = auth.strip_prefix("AWS4-HMAC-SHA256 Credential=")?;
        let (credential, rest) = rest.split_once(", SignedHeaders=")?;
        let (signed, signature) = rest.split_once(", Signature=")?;
        let (key_id, scope) = credential.split_once('/')?;
        let payload = hex(&Sha256::digest(self.body.as_bytes()));
        if self.header("x-amz-content-sha256")? != payload {
            return None;
        }
        let mut canonical = format!("{}\n{}\n\n", self.method, self.path);
        for name in signed.split(';') {
            canonical.push_str(&format!("{name}:{}\n", self.header(name)?.trim()));
        }
        canonical.push_str(&format!("\n{signed}\n{payload}"));
        let date = self.header("x-amz-date")?;
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let mut key = format!("AWS4{secret}").into_bytes();
        for part in scope.split('/') {
            key = hmac(&key, part.as_bytes());
        }
        (hex(&hmac(&key, to_sign.as_bytes())) == signature).then(|| key_id.to_string())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

/// What the fake answers a request: status, extra headers, body.
pub type Answer = (u16, Vec<(String, String)>, String);
/// A plain lock that a panicking test thread does not poison for the others.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Responder = Box<dyn FnMut(&Recorded) -> Answer + Send>;

/// The fake server; stops when dropped.
pub struct FakeSts {
    pub url: String,
    port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// An AssumeRole answer with these credentials, expiring at `expiration` (RFC 3339).
pub fn answer(key_id: &str, secret: &str, token: &str, expiration: &str) -> Answer {
    let body = format!(
        "<AssumeRoleResponse><AssumeRoleResult><Credentials>\
         <AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>\
         <SessionToken>{token}</SessionToken><Expiration>{expiration}</Expiration>\
         </Credentials></AssumeRoleResult></AssumeRoleResponse>"
    );
    (200, vec![], body)
}

impl FakeSts {
    pub fn start(responder: impl FnMut(&Recorded) -> Answer + Send + 'static) -> FakeSts {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (recorded, stopped) = (requests.clone(), stop.clone());
        let mut responder: Responder = Box::new(responder);
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                if let Some(r) = read_request(&conn) {
                    lock(&recorded).push(r.clone());
                    let (status, headers, body) = responder(&r);
                    let mut out = format!(
                        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                        body.len()
                    );
                    for (k, v) in headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    out.push_str(&body);
                    let _ = (&conn).write_all(out.as_bytes());
                }
            }
        });
        FakeSts {
            url: format!("http://127.0.0.1:{port}/"),
            port,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.requests).clone()
    }
}

impl Drop for FakeSts {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_request(conn: &TcpStream) -> Option<Recorded> {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map_or(Some(0), |(_, v)| v.parse().ok())?;
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8(body).ok()?,
    })
}
