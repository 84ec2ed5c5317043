//! `degrau-awsproxy`: a recording, fault-injecting HTTP/1.1 reverse proxy in front
//! of moto (or any AWS JSON-protocol endpoint), for the benchmarks and the
//! reliability tests.
//!
//! Point an SDK (or a whole function, through `AWS_ENDPOINT_URL`) at the proxy
//! instead of moto. Every request is forwarded unchanged — method, path, query,
//! headers (the SigV4 `Authorization` and `Host` included: moto checks no
//! signature) and body — and the upstream's answer comes back unchanged. On the
//! way, the proxy records one [`Call`] per request and can inject [`Fault`]s.
//!
//! ## What a call records
//! - `service` from `X-Amz-Target` (`DynamoDB_20120810.*` → `dynamodb`,
//!   `AmazonSQS.*` → `sqs`, else `other`) and `operation` (the part after the
//!   dot);
//! - `status`, the error's short `error_type`, the `fault` applied, the time
//!   spent and the body sizes;
//! - for DynamoDB: items and bytes read and written with DynamoDB's item-size
//!   rules ([`size`]), and read/write capacity units with its on-demand rules
//!   ([`dynamodb`], where the approximations are listed);
//! - for SQS: messages moved and the requests SQS would bill.
//!
//! ## Control endpoints (same port, under `/proxy/`)
//! | route | does |
//! |---|---|
//! | `GET /proxy/log` | the calls, oldest first (JSON list); `?since=N` only those with `seq` ≥ N |
//! | `GET /proxy/summary` | their totals ([`Summary`]); `?since=N` as above |
//! | `POST /proxy/reset` | forgets the log and every pending fault |
//! | `POST /proxy/faults` | queues a JSON list of [`Fault`]s (FIFO); answers `{"queued": n, "pending": m}` |
//! | `GET /proxy/faults` | the faults not used up yet |
//! | `DELETE /proxy/faults` | drops the pending faults |
//!
//! ```json
//! [{"service": "dynamodb", "operation": "TransactWriteItems", "status": 400,
//!   "type": "ProvisionedThroughputExceededException", "message": "slow down"},
//!  {"service": "dynamodb", "operation": "Query", "status": 500, "type": "InternalServerError", "times": 3},
//!  {"service": "dynamodb", "operation": "Query", "delay_ms": 3000},
//!  {"service": "dynamodb", "operation": "TransactWriteItems", "drop": "after"},
//!  {"service": "sqs", "operation": "DeleteMessageBatch", "drop": "before"}]
//! ```
//!
//! Mind the SDK's retries: the Rust SDK retries throttling, 500s and broken
//! connections (3 attempts by default), so one fault is absorbed by a retry
//! unless the client is built with one attempt or the fault has `"times": 3`.
//!
//! ## In process
//! [`spawn`] serves on an ephemeral loopback port and returns a [`Running`]
//! handle with the same operations as methods. The `degrau-awsproxy` binary
//! serves the same router: `degrau-awsproxy --upstream http://127.0.0.1:5005
//! --port 0` prints `degrau-awsproxy listening on http://127.0.0.1:PORT`.
//!
//! # Layout
//!
//! This file: the configuration, the shared state ([`Proxy`]), the router and
//! the in-process server ([`spawn`]). `forward` (one call from start to end),
//! `answers` (the error and the broken answers the proxy makes itself) and
//! `control` (the control endpoints) are private modules; [`fault`] (the queued
//! faults), [`dynamodb`] and [`size`] (DynamoDB's item sizes and capacity units),
//! [`record`] (the call log and its summary).

pub mod dynamodb;
pub mod fault;
pub mod record;
pub mod size;

mod answers;
mod control;
mod forward;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use fault::{DropPoint, Fault};
pub use record::{Call, Summary};

use control::{clear_route, faults_route, log_route, pending_route, reset_route, summary_route};
use fault::FaultQueue;
use forward::forward;

/// Largest request body forwarded (a `TransactWriteItems` may carry 4 MB).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where calls go, e.g. `http://127.0.0.1:5005`.
    pub upstream: String,
    /// Size updated items by reading them back after a successful update (one
    /// `GetItem` upstream per update, neither logged nor faulted), since DynamoDB
    /// charges an update by the item's size, which the request does not show.
    /// Off: the request's key and values are the (lower-bound) size.
    pub shadow_reads: bool,
}

impl Config {
    /// Forwards to `upstream`, with shadow reads.
    pub fn new(upstream: impl Into<String>) -> Config {
        Config {
            upstream: upstream.into().trim_end_matches('/').to_owned(),
            shadow_reads: true,
        }
    }
}

struct Shared {
    config: Config,
    http: reqwest::Client,
    next_seq: AtomicU64,
    log: Mutex<Vec<Call>>,
    faults: Mutex<FaultQueue>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The proxy's state: its log and fault queue. Cheap to clone.
#[derive(Clone)]
pub struct Proxy(Arc<Shared>);

impl Proxy {
    /// A proxy for `config` (serve it with [`router`] or [`serve`]).
    pub fn new(config: Config) -> Proxy {
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Proxy(Arc::new(Shared {
            config,
            http,
            next_seq: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            faults: Mutex::new(FaultQueue::default()),
        }))
    }

    /// Every call logged since the last reset, oldest first.
    pub fn log(&self) -> Vec<Call> {
        lock(&self.0.log).clone()
    }

    /// The calls with `seq` ≥ `since`.
    pub fn log_since(&self, since: u64) -> Vec<Call> {
        lock(&self.0.log)
            .iter()
            .filter(|c| c.seq >= since)
            .cloned()
            .collect()
    }

    /// The `seq` the next call will get: a mark to pass to [`Proxy::log_since`].
    pub fn mark(&self) -> u64 {
        self.0.next_seq.load(Ordering::SeqCst)
    }

    /// Forgets the log and the pending faults.
    pub fn reset(&self) {
        lock(&self.0.log).clear();
        lock(&self.0.faults).clear();
    }

    /// Queues faults after the pending ones; refuses the whole list, naming the
    /// first bad fault, when one cannot be applied.
    pub fn faults(&self, faults: impl IntoIterator<Item = Fault>) -> Result<usize, String> {
        let faults: Vec<Fault> = faults.into_iter().collect();
        if let Some((index, problem)) = faults
            .iter()
            .enumerate()
            .find_map(|(i, f)| f.problem().map(|p| (i, p)))
        {
            return Err(format!("fault {index}: {problem}"));
        }
        let count = faults.len();
        lock(&self.0.faults).push(faults);
        Ok(count)
    }

    /// The faults not used up yet.
    pub fn pending_faults(&self) -> Vec<Fault> {
        lock(&self.0.faults).pending()
    }

    /// Drops the pending faults.
    pub fn clear_faults(&self) {
        lock(&self.0.faults).clear();
    }

    fn record(&self, call: Call) {
        lock(&self.0.log).push(call);
    }
}

/// The proxy's routes: the control endpoints, and everything else forwarded.
pub fn router(proxy: Proxy) -> Router {
    Router::new()
        .route("/proxy/log", get(log_route))
        .route("/proxy/summary", get(summary_route))
        .route("/proxy/reset", post(reset_route))
        .route(
            "/proxy/faults",
            get(pending_route).post(faults_route).delete(clear_route),
        )
        .fallback(forward)
        .with_state(proxy)
}

/// Serves `proxy` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, proxy: Proxy) -> std::io::Result<()> {
    axum::serve(listener, router(proxy)).await
}

/// A proxy serving in this process; stops when dropped.
pub struct Running {
    proxy: Proxy,
    url: String,
    task: JoinHandle<()>,
}

impl Running {
    /// Its base URL, e.g. `http://127.0.0.1:41234` (for `AWS_ENDPOINT_URL`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The shared state (log and faults), e.g. to hand to another task.
    pub fn proxy(&self) -> &Proxy {
        &self.proxy
    }

    /// Every call logged since the last reset, oldest first.
    pub fn log(&self) -> Vec<Call> {
        self.proxy.log()
    }

    /// The calls with `seq` ≥ `since` (see [`Running::mark`]).
    pub fn log_since(&self, since: u64) -> Vec<Call> {
        self.proxy.log_since(since)
    }

    /// The `seq` the next call will get.
    pub fn mark(&self) -> u64 {
        self.proxy.mark()
    }

    /// Forgets the log and the pending faults.
    pub fn reset(&self) {
        self.proxy.reset();
    }

    /// Queues faults (see [`Fault`]); refuses a list holding a bad one.
    pub fn faults(&self, faults: impl IntoIterator<Item = Fault>) -> Result<usize, String> {
        self.proxy.faults(faults)
    }

    /// The faults not used up yet.
    pub fn pending_faults(&self) -> Vec<Fault> {
        self.proxy.pending_faults()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a proxy to `upstream` on an ephemeral loopback port, with shadow reads.
///
/// # Panics
/// When no loopback port can be bound.
pub async fn spawn(upstream: impl Into<String>) -> Running {
    spawn_with(Config::new(upstream))
        .await
        .unwrap_or_else(|err| panic!("degrau-awsproxy: bind 127.0.0.1:0: {err}"))
}

/// Starts a proxy with `config` on an ephemeral loopback port.
pub async fn spawn_with(config: Config) -> std::io::Result<Running> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let proxy = Proxy::new(config);
    let served = proxy.clone();
    let task = tokio::spawn(async move {
        let _ = serve(listener, served).await;
    });
    Ok(Running { proxy, url, task })
}
