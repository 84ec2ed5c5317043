//! Cold starts and memory of each function binary, beside a Python peer: init
//! time (process start to its first poll of the Runtime API,
//! [`LocalLambda::init_durations`]) over several fresh processes, and peak RSS
//! (`VmHWM`) after one invocation.
//!
//! Every process here does the same init: DynamoDB and SQS clients, an HTTP
//! client for the model, and the API key read from an SSM SecureString
//! (`ANTHROPIC_API_KEY_PARAMETER`, as the template deploys them; the rest of the
//! benchmark passes the key itself). The Python peer
//! ([`super::python_peer`]) does it with boto3 and httpx. Each round starts one
//! of each, one after the other, after one discarded warm-up start of each (so
//! that no one pays alone for the page cache).

use std::time::{Duration, Instant};

use degrau_tests::lambda::LocalLambda;
use degrau_tests::{HttpReply, api_event};
use serde::Serialize;
use serde_json::json;

use super::degrau_run::{CONTACT, TENANT};
use super::procfs::peak_rss_kib;
use super::python_peer;
use super::stack::{ProxiedStack, TimedInvoke};

/// One function's cold starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColdStarts {
    /// `ask` or `compactor`.
    pub function: String,
    /// The binary's size on disk, bytes.
    pub binary_bytes: u64,
    /// Init time of each fresh process, ms.
    pub init_ms: Vec<f64>,
    /// Peak RSS after its first invocation, per fresh process, KiB.
    pub peak_rss_kib: Vec<u64>,
    /// What that invocation was.
    pub invocation: String,
}

impl ColdStarts {
    /// Median init time, ms.
    pub fn median_init_ms(&self) -> f64 {
        median(&self.init_ms)
    }

    /// Median peak RSS after one invocation, KiB.
    pub fn median_peak_rss_kib(&self) -> f64 {
        let values: Vec<f64> = self.peak_rss_kib.iter().map(|v| *v as f64).collect();
        median(&values)
    }
}

/// The Python peer's cold starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerColdStarts {
    /// Its starts (`function` is `python peer`, `binary_bytes` 0); empty when
    /// skipped.
    pub starts: ColdStarts,
    /// `python3 --version`.
    pub python: String,
    /// Its pinned requirements.
    pub requirements: Vec<String>,
    /// Why it did not run, when it did not.
    pub skipped: Option<String>,
}

/// The functions' cold starts and the peer's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColdRun {
    /// `ask`, then `compactor`.
    pub functions: Vec<ColdStarts>,
    /// The Python peer.
    pub peer: PeerColdStarts,
}

/// The median (mean of the middle two for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

async fn wait_for_init(lambda: &LocalLambda) -> Duration {
    let started = Instant::now();
    loop {
        if let Some(Some(init)) = lambda.init_durations().first() {
            return *init;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the function never polled for an event"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Puts the API key into SSM (on moto, directly) and returns the parameter's name.
async fn put_key_parameter() -> String {
    let name = format!(
        "/degrau/footprint/{}",
        degrau_tests::moto::unique_name("key")
    );
    aws_sdk_ssm::Client::new(&degrau_tests::moto::sdk_config().await)
        .put_parameter()
        .name(&name)
        .value("offline-test-key")
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .send()
        .await
        .expect("put the API key parameter (moto serves SSM)");
    name
}

/// The functions' environment of `stack`, with the key read from SSM. (It repeats
/// the stack's list rather than change the stack, which passes the key itself.)
fn environment(stack: &ProxiedStack, parameter: &str) -> Vec<(String, String)> {
    [
        ("TABLE_NAME", stack.table.as_str()),
        ("JOBS_QUEUE_URL", stack.queue.queue_url.as_str()),
        ("AWS_ENDPOINT_URL", stack.proxy.url()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("ANTHROPIC_API_KEY_PARAMETER", parameter),
        ("ANTHROPIC_BASE_URL", stack.standin.url.as_str()),
        ("AUTH_MODE", "dev"),
        ("RUST_LOG", "info"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

async fn post(ask: &LocalLambda, text: &str) -> HttpReply {
    let body = json!({ "text": text }).to_string();
    let event = api_event(
        "POST",
        &format!("/v1/contacts/{CONTACT}/messages"),
        "",
        &[
            ("content-type", "application/json"),
            ("x-tenant-id", TENANT),
        ],
        Some(&body),
        None,
    );
    match ask.invoke(event).await {
        Ok(answer) => HttpReply::from_lambda(&answer),
        Err(error) => panic!("cold ask failed: {error}"),
    }
}

fn peak(lambda: &LocalLambda) -> Option<u64> {
    lambda.pids().first().and_then(|pid| peak_rss_kib(*pid))
}

/// `rounds` cold starts of each function and of the Python peer on `stack`: a
/// fresh ask answers one message of the benchmark's conversation; a fresh
/// compactor runs one step job for it (the window then holds more than the
/// messages a step keeps, so the step folds some); a fresh peer answers one
/// empty event.
pub async fn measure(stack: &ProxiedStack, rounds: usize) -> ColdRun {
    let parameter = put_key_parameter().await;
    let env = environment(stack, &parameter);
    let mut ask = no_starts(
        "ask",
        file_size(&stack.binaries.ask),
        "one message of the benchmark's conversation (a long history)",
    );
    let mut compactor = no_starts(
        "compactor",
        file_size(&stack.binaries.compactor),
        "one batch holding one step job of that conversation",
    );
    let mut peer_starts = no_starts(
        "python peer",
        0,
        "one empty event, answered with a fixed response (none of ask's work)",
    );
    let prepared = python_peer::prepare();
    let mut peer_lambda = start_peer(&prepared, &env).await;
    let mut ask_lambda = LocalLambda::start(stack.binaries.ask.clone(), env.clone()).await;
    wait_for_init(&ask_lambda).await;
    let mut compactor_lambda = LocalLambda::start(stack.binaries.compactor.clone(), env).await;
    compactor_lambda.set_timeout(degrau_tests::stack::COMPACTOR_TIMEOUT);
    wait_for_init(&compactor_lambda).await;

    for round in 0..rounds {
        cold_ask(&mut ask_lambda, round, &mut ask).await;
        cold_compactor(stack, &mut compactor_lambda, round, &mut compactor).await;
        if let Some(lambda) = peer_lambda.as_mut() {
            cold_peer(lambda, &mut peer_starts).await;
        }
    }
    stack.proxy.reset();
    let peer = match prepared {
        Ok(peer) => PeerColdStarts {
            starts: peer_starts,
            python: peer.python,
            requirements: peer.requirements,
            skipped: None,
        },
        Err(why) => PeerColdStarts {
            starts: peer_starts,
            python: String::new(),
            requirements: Vec::new(),
            skipped: Some(why),
        },
    };
    ColdRun {
        functions: vec![ask, compactor],
        peer,
    }
}

/// A function's cold starts before the first.
fn no_starts(function: &str, binary_bytes: u64, invocation: &str) -> ColdStarts {
    ColdStarts {
        function: function.into(),
        binary_bytes,
        init_ms: Vec::new(),
        peak_rss_kib: Vec::new(),
        invocation: invocation.into(),
    }
}

/// The Python peer's process, started and through its first init, when it could
/// be prepared.
async fn start_peer(
    prepared: &Result<python_peer::Peer, String>,
    env: &[(String, String)],
) -> Option<LocalLambda> {
    match prepared {
        Ok(peer) => {
            let mut env = env.to_vec();
            env.push(("PATH".into(), peer.path_variable()));
            let lambda = LocalLambda::start(peer.script.clone(), env).await;
            wait_for_init(&lambda).await;
            Some(lambda)
        }
        Err(why) => {
            eprintln!("footprint: no Python peer: {why}");
            None
        }
    }
}

/// One cold start of the ask function: a fresh process answers one message.
async fn cold_ask(ask_lambda: &mut LocalLambda, round: usize, ask: &mut ColdStarts) {
    ask_lambda.spawn().await;
    ask.init_ms
        .push(wait_for_init(ask_lambda).await.as_secs_f64() * 1000.0);
    let text = format!("cold start {round}: thanks, see you soon");
    let reply = post(ask_lambda, &text).await;
    assert_eq!(reply.status, 200, "cold ask: {}", reply.raw);
    ask.peak_rss_kib.extend(peak(ask_lambda));
}

/// One cold start of the compactor: a fresh process runs one step job of the
/// conversation.
async fn cold_compactor(
    stack: &ProxiedStack,
    compactor_lambda: &mut LocalLambda,
    round: usize,
    compactor: &mut ColdStarts,
) {
    let memory = stack.memory(TENANT, CONTACT).await;
    let job = json!({
        "kind": "step",
        "tenant": TENANT,
        "incarnation": stack.incarnation(TENANT, CONTACT).await,
        "session": memory["session"]["number"].as_u64().unwrap_or(1),
        "summarized_until": memory["session"]["summarized_until"].as_u64().unwrap_or(0),
    })
    .to_string();
    compactor_lambda.spawn().await;
    compactor
        .init_ms
        .push(wait_for_init(compactor_lambda).await.as_secs_f64() * 1000.0);
    stack
        .send_job(&job, "cold-starts", &format!("cold-start-{round}"))
        .await;
    let invoke = TimedInvoke::new(compactor_lambda);
    stack.drain(&invoke).await;
    compactor.peak_rss_kib.extend(peak(compactor_lambda));
}

/// One cold start of the Python peer: a fresh process answers one empty event.
async fn cold_peer(lambda: &mut LocalLambda, peer_starts: &mut ColdStarts) {
    lambda.spawn().await;
    peer_starts
        .init_ms
        .push(wait_for_init(lambda).await.as_secs_f64() * 1000.0);
    let answer = lambda.invoke(json!({})).await;
    assert!(answer.is_ok(), "the Python peer answered {answer:?}");
    peer_starts.peak_rss_kib.extend(peak(lambda));
}

fn file_size(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < f64::EPSILON);
        assert!((median(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < f64::EPSILON);
        assert!(median(&[]).abs() < f64::EPSILON);
    }
}
