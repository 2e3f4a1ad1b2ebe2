//! Every HTTP request of the process passes through [`CountingConnector`]: requests by kind,
//! retries, and latency percentiles ([`net_stats`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::ClientOptions;

// ---------------------------------------------------------------------------------------
// Every HTTP request of the process, counted where it is sent.

/// Latency buckets: four per power of two of microseconds.
pub(super) const BUCKETS: usize = 4 * 40;

/// Counters of every HTTP request the process sent (retries included).
pub(super) struct Net {
    heads: AtomicU64,
    gets: AtomicU64,
    lists: AtomicU64,
    others: AtomicU64,
    /// Answers 429 and 5xx, and requests that got no answer (each then retried or failed).
    errors: AtomicU64,
    latency: [AtomicU64; BUCKETS],
}

pub(super) static NET: Net = Net {
    heads: AtomicU64::new(0),
    gets: AtomicU64::new(0),
    lists: AtomicU64::new(0),
    others: AtomicU64::new(0),
    errors: AtomicU64::new(0),
    latency: [const { AtomicU64::new(0) }; BUCKETS],
};

pub(super) fn bucket_of(d: Duration) -> usize {
    let us = d.as_micros().max(1) as f64;
    ((us.log2() * 4.0) as usize).min(BUCKETS - 1)
}

pub(super) fn bucket_ms(b: usize) -> f64 {
    2f64.powf((b + 1) as f64 / 4.0) / 1000.0
}

/// What every HTTP request of the process amounted to.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NetStats {
    /// HTTP requests sent, by kind (retries included).
    pub heads: u64,
    pub gets: u64,
    pub lists: u64,
    /// Answers 429 or 5xx, and requests that got no answer.
    pub errors: u64,
    /// Latency until the answer's head, in milliseconds (upper bound of its bucket).
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Counters of every HTTP request the process has sent.
pub fn net_stats() -> NetStats {
    let counts: Vec<u64> = NET
        .latency
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    let total: u64 = counts.iter().sum();
    let pct = |q: f64| {
        if total == 0 {
            return 0.0;
        }
        let want = ((total as f64) * q).ceil() as u64;
        let mut seen = 0;
        for (b, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return bucket_ms(b);
            }
        }
        bucket_ms(BUCKETS - 1)
    };
    NetStats {
        heads: NET.heads.load(Ordering::Relaxed),
        gets: NET.gets.load(Ordering::Relaxed),
        lists: NET.lists.load(Ordering::Relaxed),
        errors: NET.errors.load(Ordering::Relaxed),
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
    }
}

/// Sends requests through `object_store`'s own client, counting them.
#[derive(Debug)]
pub(super) struct Counting(HttpClient);

#[async_trait::async_trait]
impl HttpService for Counting {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let counter = match req.method().as_str() {
            "HEAD" => &NET.heads,
            "GET" if req.uri().query().is_some_and(|q| q.contains("list-type")) => &NET.lists,
            "GET" => &NET.gets,
            _ => &NET.others,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let t = Instant::now();
        let r = self.0.execute(req).await;
        NET.latency[bucket_of(t.elapsed())].fetch_add(1, Ordering::Relaxed);
        let failed = match &r {
            Ok(a) => a.status().as_u16() == 429 || a.status().is_server_error(),
            Err(_) => true,
        };
        if failed {
            NET.errors.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

#[derive(Debug)]
pub(super) struct CountingConnector;

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Counting(
            ReqwestConnector::default().connect(options)?,
        )))
    }
}
