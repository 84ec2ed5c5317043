//! Cold starts and memory of each function binary: init time (process start to
//! its first poll of the Runtime API, [`LocalLambda::init_durations`]) over
//! several fresh processes, and peak RSS (`VmHWM`) after one invocation.

use std::time::{Duration, Instant};

use degrau_tests::lambda::LocalLambda;
use serde::Serialize;
use serde_json::json;

use super::degrau_run::{CONTACT, TENANT};
use super::procfs::peak_rss_kib;
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

/// `rounds` cold starts of each function on `stack`: a fresh ask answers one
/// message of the benchmark's conversation; a fresh compactor runs one step job
/// for it (the window then holds more than the messages a step keeps, so the
/// step folds some).
pub async fn measure(stack: &mut ProxiedStack, rounds: usize) -> Vec<ColdStarts> {
    let mut ask = ColdStarts {
        function: "ask".into(),
        binary_bytes: file_size(&stack.binaries.ask),
        init_ms: Vec::new(),
        peak_rss_kib: Vec::new(),
        invocation: "one message of the benchmark's conversation (a long history)".into(),
    };
    let mut compactor = ColdStarts {
        function: "compactor".into(),
        binary_bytes: file_size(&stack.binaries.compactor),
        init_ms: Vec::new(),
        peak_rss_kib: Vec::new(),
        invocation: "one batch holding one step job of that conversation".into(),
    };
    for round in 0..rounds {
        stack.ask.spawn().await;
        ask.init_ms
            .push(wait_for_init(&stack.ask).await.as_secs_f64() * 1000.0);
        let text = format!("cold start {round}: thanks, see you soon");
        let reply = stack.post(TENANT, CONTACT, &text).await;
        assert_eq!(reply.status, 200, "cold ask: {}", reply.raw);
        if let Some(rss) = stack.ask.pids().first().and_then(|pid| peak_rss_kib(*pid)) {
            ask.peak_rss_kib.push(rss);
        }

        let memory = stack.memory(TENANT, CONTACT).await;
        let job = json!({
            "kind": "step",
            "tenant": TENANT,
            "incarnation": stack.incarnation(TENANT, CONTACT).await,
            "session": memory["session"]["number"].as_u64().unwrap_or(1),
            "summarized_until": memory["session"]["summarized_until"].as_u64().unwrap_or(0),
        })
        .to_string();
        stack.compactor.spawn().await;
        compactor
            .init_ms
            .push(wait_for_init(&stack.compactor).await.as_secs_f64() * 1000.0);
        stack
            .send_job(&job, "cold-starts", &format!("cold-start-{round}"))
            .await;
        let invoke = TimedInvoke::new(&stack.compactor);
        stack.drain(&invoke).await;
        if let Some(rss) = stack
            .compactor
            .pids()
            .first()
            .and_then(|pid| peak_rss_kib(*pid))
        {
            compactor.peak_rss_kib.push(rss);
        }
    }
    stack.proxy.reset();
    vec![ask, compactor]
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
