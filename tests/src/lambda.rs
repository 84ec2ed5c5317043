//! A minimal AWS Lambda Runtime API on loopback, so tests run the real function
//! binaries as processes (the way Lambda does: the process polls for the next
//! event and posts its response) and can kill and restart them between events.
//!
//! A function that answers with Lambda's response streaming
//! (`Lambda-Runtime-Function-Response-Mode: streaming`, a chunked body) is read as
//! the pieces arrive: [`LocalLambda::invoke_streaming`] hands each one on with the
//! time it came, the way a function URL or API Gateway passes them to the client.
//!
//! Each event carries the invocation deadline Lambda would advertise
//! (`Lambda-Runtime-Deadline-Ms`, counted from when the function takes the event):
//! the function's timeout ([`DEFAULT_TIMEOUT`] unless set with
//! [`LocalLambda::set_timeout`]), or the one a test chooses for one event with
//! [`LocalLambda::invoke_within`].

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use futures_core::Stream;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

type Reply = Result<Value, Value>;

/// Who waits for an invocation's answer: a whole one, or its pieces as they come.
enum Waiter {
    Whole(oneshot::Sender<Reply>),
    Pieces(mpsc::UnboundedSender<(Instant, Bytes)>),
}

/// A streamed invocation's answer, piece by piece, each with the time it reached
/// the Runtime API. The stream ends when the function closed its response.
pub struct Pieces(mpsc::UnboundedReceiver<(Instant, Bytes)>);

impl Pieces {
    /// The next piece, or `None` when the answer ended (or `patience` passed).
    pub async fn next(&mut self, patience: Duration) -> Option<(Instant, Bytes)> {
        tokio::time::timeout(patience, self.0.recv())
            .await
            .ok()
            .flatten()
    }
}

/// The function timeout the Runtime API advertises when a test names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Inner {
    queue: Mutex<VecDeque<(String, Value, Duration)>>,
    waiting: Mutex<HashMap<String, Waiter>>,
    counter: Mutex<u64>,
}

/// One function instance: its process and the flag its Runtime API checks before
/// handing it an event, so a killed instance's pending poll never takes one.
struct Instance {
    child: Child,
    alive: Arc<AtomicBool>,
    spawned: Instant,
    first_poll: Arc<Mutex<Option<Instant>>>,
}

/// What one instance's Runtime API knows: whether the instance is alive and when
/// it first asked for an event (the end of its init).
#[derive(Clone)]
struct InstanceState {
    alive: Arc<AtomicBool>,
    first_poll: Arc<Mutex<Option<Instant>>>,
}

type AppState = (Arc<Inner>, InstanceState);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The Runtime API server and the function process it feeds.
pub struct LocalLambda {
    inner: Arc<Inner>,
    children: Vec<Instance>,
    instances: usize,
    output: Arc<Mutex<Vec<String>>>,
    binary: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
}

/// The path of a workspace binary built by `cargo build` (debug profile).
pub fn binary(name: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("debug").join(name);
    assert!(
        path.exists(),
        "{} is missing: build the functions first (`./dev.sh test` does)",
        path.display()
    );
    path
}

impl LocalLambda {
    /// Serves the Runtime API on an ephemeral port and starts `binary` with `env`.
    pub async fn start(binary: PathBuf, env: Vec<(String, String)>) -> LocalLambda {
        Self::start_instances(binary, env, 1).await
    }

    /// Like [`LocalLambda::start`] with `instances` processes polling the same
    /// queue, as Lambda runs concurrent invocations in separate instances.
    pub async fn start_instances(
        binary: PathBuf,
        env: Vec<(String, String)>,
        instances: usize,
    ) -> LocalLambda {
        let inner = Arc::new(Inner::default());
        let mut lambda = LocalLambda {
            inner,
            children: Vec::new(),
            instances,
            output: Arc::default(),
            binary,
            env,
            timeout: DEFAULT_TIMEOUT,
        };
        lambda.spawn().await;
        lambda
    }

    /// Serves a Runtime API for one instance on an ephemeral port.
    async fn serve(&self, instance: InstanceState) -> SocketAddr {
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state((self.inner.clone(), instance));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the runtime API");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        addr
    }

    /// Starts new function processes (cold starts), replacing any running ones.
    pub async fn spawn(&mut self) {
        self.kill();
        for _ in 0..self.instances {
            let alive = Arc::new(AtomicBool::new(true));
            let first_poll = Arc::new(Mutex::new(None));
            let addr = self
                .serve(InstanceState {
                    alive: alive.clone(),
                    first_poll: first_poll.clone(),
                })
                .await;
            let spawned = Instant::now();
            let mut child = self
                .command(addr)
                .spawn()
                .expect("start the function binary");
            for stream in [
                child
                    .stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
                child
                    .stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            ]
            .into_iter()
            .flatten()
            {
                let output = self.output.clone();
                let echo = std::env::var("DEGRAU_TEST_FUNCTION_LOGS").is_ok();
                std::thread::spawn(move || {
                    use std::io::BufRead;
                    for line in std::io::BufReader::new(stream)
                        .lines()
                        .map_while(Result::ok)
                    {
                        if echo {
                            eprintln!("{line}");
                        }
                        lock(&output).push(line);
                    }
                });
            }
            self.children.push(Instance {
                child,
                alive,
                spawned,
                first_poll,
            });
        }
    }

    fn command(&self, addr: SocketAddr) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "local")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Every line the function processes printed so far (stdout and stderr: logs
    /// and EMF metrics). `DEGRAU_TEST_FUNCTION_LOGS=1` also echoes them.
    pub fn output(&self) -> Vec<String> {
        lock(&self.output).clone()
    }

    /// Process ids of the running instances (for CPU time and memory readings).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|i| i.child.id()).collect()
    }

    /// For each running instance, the time from process start to its first poll
    /// for an event: the function's init (cold start), once it has polled.
    pub fn init_durations(&self) -> Vec<Option<Duration>> {
        self.children
            .iter()
            .map(|i| lock(&i.first_poll).map(|at| at.duration_since(i.spawned)))
            .collect()
    }

    /// Kills the function processes, as a crash or a redeploy would.
    pub fn kill(&mut self) {
        for mut instance in self.children.drain(..) {
            instance.alive.store(false, Ordering::SeqCst);
            let _ = instance.child.kill();
            let _ = instance.child.wait();
        }
    }

    /// The function's timeout, as its configuration would set it (the deadline of
    /// every event [`LocalLambda::invoke`] sends).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Sends one event and waits for the function's response (or error), within the
    /// function's timeout.
    pub async fn invoke(&self, payload: Value) -> Reply {
        self.invoke_within(payload, self.timeout).await
    }

    /// Sends one event whose invocation deadline is `timeout` after the function
    /// takes it, as a function configured with that timeout gets it, and waits for
    /// the response (or error) until a little after it.
    pub async fn invoke_within(&self, payload: Value, timeout: Duration) -> Reply {
        let (tx, rx) = oneshot::channel();
        self.enqueue(payload, timeout, Waiter::Whole(tx));
        // The wait starts before the function takes the event: room for that.
        let patience = timeout.max(DEFAULT_TIMEOUT) + Duration::from_secs(5);
        match tokio::time::timeout(patience, rx).await {
            Ok(Ok(reply)) => reply,
            _ => Err(json!({
                "errorType": "Timeout",
                "errorMessage": format!("no response within {} s", patience.as_secs())
            })),
        }
    }
}

impl LocalLambda {
    fn enqueue(&self, payload: Value, timeout: Duration, waiter: Waiter) {
        let id = {
            let mut counter = lock(&self.inner.counter);
            *counter += 1;
            format!("req-{counter}")
        };
        lock(&self.inner.waiting).insert(id.clone(), waiter);
        lock(&self.inner.queue).push_back((id, payload, timeout));
    }

    /// Sends one event to a function that streams its answer, and hands back the
    /// answer's pieces as they reach the Runtime API (the HTTP integration's
    /// prelude, eight zero bytes, then the body). A function that answers whole
    /// gives one piece: its answer as sent.
    pub fn invoke_streaming(&self, payload: Value) -> Pieces {
        let (tx, rx) = mpsc::unbounded_channel();
        self.enqueue(payload, self.timeout, Waiter::Pieces(tx));
        Pieces(rx)
    }
}

impl Drop for LocalLambda {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn next(State((inner, instance)): State<AppState>) -> impl IntoResponse {
    lock(&instance.first_poll).get_or_insert_with(Instant::now);
    loop {
        if !instance.alive.load(Ordering::SeqCst) {
            return (StatusCode::GONE, HeaderMap::new(), String::new());
        }
        let item = lock(&inner.queue).pop_front();
        if let Some((id, payload, timeout)) = item {
            let mut headers = HeaderMap::new();
            let deadline = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| (d + timeout).as_millis());
            let pairs = [
                ("lambda-runtime-aws-request-id", id),
                ("lambda-runtime-deadline-ms", deadline.to_string()),
                (
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:000000000000:function:local".to_owned(),
                ),
                (
                    "lambda-runtime-trace-id",
                    "Root=1-00000000-000000000000000000000000".to_owned(),
                ),
            ];
            for (name, value) in pairs {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    headers.insert(name, value);
                }
            }
            return (StatusCode::OK, headers, payload.to_string());
        }
        // Polling keeps a killed instance's pending request from ever taking an event.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn response(
    State((inner, _)): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Body,
) -> StatusCode {
    let waiter = lock(&inner.waiting).remove(&id);
    match waiter {
        Some(Waiter::Pieces(tx)) => {
            let mut stream = body.into_data_stream();
            while let Some(Ok(piece)) =
                std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx)).await
            {
                let _ = tx.send((Instant::now(), piece));
            }
        }
        Some(Waiter::Whole(tx)) => {
            let body = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            let _ = tx.send(Ok(serde_json::from_slice(&body).unwrap_or(Value::Null)));
        }
        None => {}
    }
    StatusCode::ACCEPTED
}

async fn error(
    State((inner, _)): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match lock(&inner.waiting).remove(&id) {
        Some(Waiter::Whole(tx)) => {
            let _ = tx.send(Err(value));
        }
        Some(Waiter::Pieces(tx)) => {
            let _ = tx.send((Instant::now(), Bytes::from(value.to_string())));
        }
        None => {}
    }
    StatusCode::ACCEPTED
}

async fn init_error(body: Bytes) -> StatusCode {
    eprintln!("function init error: {}", String::from_utf8_lossy(&body));
    StatusCode::ACCEPTED
}
