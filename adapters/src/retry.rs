//! One budgeted retry loop, shared by the model adapters (the Anthropic Messages API
//! over HTTP, and Claude through Amazon Bedrock), so both keep one time budget the
//! same way.
//!
//! **The deadline.** A call ends by the deadline it is given: each attempt's timeout
//! is the smaller of `request_timeout` and the time left; no attempt starts with less
//! than `min_attempt` left (the call is then a `Timeout`); a retry is made only when
//! its wait plus `min_attempt` fits in what is left, else the call ends with the last
//! attempt's error. A hung model thus costs one attempt cut at the deadline, never
//! three full ones. Each adapter decides which failures are worth another attempt and
//! maps its errors onto [`ModelError`]; the wait is the server's requested one when
//! it is within `max_retry_after`, else an exponential backoff with jitter.
//!
//! Logs carry only status, attempt, the request id, latency and the error's kind:
//! never a key, the request or the API's error text (which may quote the request).

use std::future::Future;
use std::time::{Duration, Instant};

use degrau::deadline::Deadline;
use degrau::model::ModelError;

/// How patiently a model call is retried (the official SDKs' defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Longest one attempt may take, from connecting to the last byte of the body.
    pub request_timeout: Duration,
    /// Extra attempts after the first one.
    pub max_retries: u32,
    /// Backoff before the first retry; doubles with each retry.
    pub backoff_base: Duration,
    /// Longest backoff.
    pub backoff_max: Duration,
    /// Longest server-requested wait honoured; a longer one falls back to the backoff.
    pub max_retry_after: Duration,
    /// Least time left for an attempt to start: one with less could not finish.
    pub min_attempt: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            request_timeout: Duration::from_secs(60),
            max_retries: 2,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            min_attempt: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// Backoff before retry number `retry + 1`: `base · 2^retry`, capped, minus up
    /// to 25 % jitter (as the official SDKs do), so that callers who failed together
    /// do not come back together.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exponential = self.backoff_base.saturating_mul(2u32.saturating_pow(retry));
        let capped = exponential.min(self.backoff_max);
        capped.mul_f64(1.0 - 0.25 * fastrand::f64())
    }
}

/// An attempt that answered, with what the logs say about it.
#[derive(Debug)]
pub struct Answered<T> {
    /// The answer.
    pub value: T,
    /// The HTTP status.
    pub status: u16,
    /// The service's request id, when it sent one.
    pub request_id: Option<String>,
}

/// A failed attempt: the error the call would end with, and whether to try again.
#[derive(Debug)]
pub struct Failure {
    /// The error, mapped by the adapter.
    pub error: ModelError,
    /// Whether another attempt may succeed.
    pub retry: bool,
    /// The server's requested wait, before the `max_retry_after` check.
    pub retry_after: Option<Duration>,
    /// The HTTP status, when an answer came.
    pub status: Option<u16>,
    /// The service's request id, when it sent one.
    pub request_id: Option<String>,
}

/// Runs `attempt` (given each attempt's timeout) until it answers, fails for good,
/// or the budget (`deadline` and `policy`) allows no more; see the module
/// documentation.
pub async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    deadline: Deadline,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<Answered<T>, Failure>>,
{
    let mut retries = 0;
    loop {
        let number = retries + 1;
        let left = deadline.remaining();
        if left < policy.min_attempt {
            tracing::warn!(
                attempt = number,
                left_ms = millis(left),
                "no time left for a model call"
            );
            return Err(ModelError::Timeout);
        }
        let started = Instant::now();
        let outcome = attempt(policy.request_timeout.min(left)).await;
        let latency_ms = millis(started.elapsed());
        let failure = match outcome {
            Ok(answer) => {
                tracing::debug!(
                    status = answer.status,
                    attempt = number,
                    request_id = answer.request_id.as_deref(),
                    latency_ms,
                    "model call answered"
                );
                return Ok(answer.value);
            }
            Err(failure) => failure,
        };

        match next_delay(policy, deadline, &failure, retries, number, latency_ms) {
            Some(delay) => tokio::time::sleep(delay).await,
            None => return Err(failure.error),
        }
        retries += 1;
    }
}

/// The wait before the next attempt after `failure` (the server's requested wait
/// when within `max_retry_after`, else the backoff), logged; `None` (logged too)
/// when the failure is final, the retries are spent or the deadline leaves no room.
fn next_delay(
    policy: &RetryPolicy,
    deadline: Deadline,
    failure: &Failure,
    retries: u32,
    number: u32,
    latency_ms: u64,
) -> Option<Duration> {
    let status = failure.status;
    let request_id = failure.request_id.as_deref();
    let error = failure.error.kind();
    if !failure.retry || retries >= policy.max_retries {
        tracing::warn!(
            status,
            attempt = number,
            request_id,
            latency_ms,
            error,
            "model call failed"
        );
        return None;
    }
    let delay = failure
        .retry_after
        .filter(|wait| *wait <= policy.max_retry_after)
        .unwrap_or_else(|| policy.backoff(retries));
    if !deadline.allows(delay.saturating_add(policy.min_attempt)) {
        tracing::warn!(
            status,
            attempt = number,
            request_id,
            latency_ms,
            error,
            delay_ms = millis(delay),
            "model call failed; no time left to retry"
        );
        return None;
    }
    tracing::warn!(
        status,
        attempt = number,
        request_id,
        latency_ms,
        error,
        delay_ms = millis(delay),
        "model call failed; retrying"
    );
    Some(delay)
}

/// A duration in whole milliseconds, for logs.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn unavailable(retry: bool) -> Failure {
        Failure {
            error: ModelError::Unavailable { status: 503 },
            retry,
            retry_after: None,
            status: Some(503),
            request_id: None,
        }
    }

    fn answered(value: u32) -> Answered<u32> {
        Answered {
            value,
            status: 200,
            request_id: Some("req_1".into()),
        }
    }

    /// Runs a scripted sequence of outcomes; returns the result and each attempt's
    /// timeout.
    async fn run(
        policy: RetryPolicy,
        deadline: Deadline,
        script: Vec<Result<Answered<u32>, Failure>>,
    ) -> (Result<u32, ModelError>, Vec<Duration>) {
        let script = Mutex::new(script.into_iter());
        let timeouts = Mutex::new(Vec::new());
        let result = with_retries(&policy, deadline, |timeout| {
            timeouts.lock().unwrap().push(timeout);
            let next = script
                .lock()
                .unwrap()
                .next()
                .expect("an outcome per attempt");
            async move { next }
        })
        .await;
        (result, timeouts.into_inner().unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn retryable_failures_are_retried_up_to_the_limit_and_the_last_error_ends_the_call() {
        let policy = RetryPolicy::default();
        let minute = Deadline::after(Duration::from_secs(60));
        let (result, timeouts) = run(
            policy,
            minute,
            vec![
                Err(unavailable(true)),
                Err(unavailable(true)),
                Ok(answered(7)),
            ],
        )
        .await;
        assert_eq!(result, Ok(7));
        assert_eq!(timeouts.len(), 3);
        let (result, timeouts) = run(
            policy,
            Deadline::after(Duration::from_secs(60)),
            vec![
                Err(unavailable(true)),
                Err(unavailable(true)),
                Err(unavailable(true)),
            ],
        )
        .await;
        assert_eq!(result, Err(ModelError::Unavailable { status: 503 }));
        assert_eq!(timeouts.len(), 3);
        let (result, timeouts) = run(
            policy,
            Deadline::after(Duration::from_secs(60)),
            vec![Err(unavailable(false))],
        )
        .await;
        assert_eq!(result, Err(ModelError::Unavailable { status: 503 }));
        assert_eq!(
            timeouts.len(),
            1,
            "a failure not worth retrying ends the call"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn each_attempt_gets_the_smaller_of_its_limit_and_the_time_left() {
        let policy = RetryPolicy {
            request_timeout: Duration::from_secs(20),
            ..RetryPolicy::default()
        };
        let (_, timeouts) = run(
            policy,
            Deadline::after(Duration::from_secs(5)),
            vec![Ok(answered(1))],
        )
        .await;
        assert_eq!(timeouts, [Duration::from_secs(5)]);
        let (_, timeouts) = run(
            policy,
            Deadline::after(Duration::from_secs(90)),
            vec![Ok(answered(1))],
        )
        .await;
        assert_eq!(timeouts, [Duration::from_secs(20)]);
    }

    #[tokio::test(start_paused = true)]
    async fn no_attempt_starts_below_the_floor_and_no_wait_is_made_that_does_not_fit() {
        let policy = RetryPolicy::default();
        let (result, timeouts) =
            run(policy, Deadline::after(Duration::from_millis(500)), vec![]).await;
        assert_eq!(result, Err(ModelError::Timeout));
        assert!(timeouts.is_empty());
        let slow = RetryPolicy {
            backoff_base: Duration::from_secs(5),
            backoff_max: Duration::from_secs(10),
            ..policy
        };
        let (result, timeouts) = run(
            slow,
            Deadline::after(Duration::from_secs(3)),
            vec![Err(unavailable(true))],
        )
        .await;
        assert_eq!(result, Err(ModelError::Unavailable { status: 503 }));
        assert_eq!(timeouts.len(), 1);
        let mut asked = unavailable(true);
        asked.retry_after = Some(Duration::from_secs(30));
        let (result, timeouts) = run(
            policy,
            Deadline::after(Duration::from_secs(10)),
            vec![Err(asked)],
        )
        .await;
        assert_eq!(result, Err(ModelError::Unavailable { status: 503 }));
        assert_eq!(timeouts.len(), 1, "a requested wait past the deadline");
    }

    #[test]
    fn the_backoff_doubles_with_jitter_and_stops_at_the_cap() {
        let policy = RetryPolicy::default();
        for (retry, full) in [
            (0, 500),
            (1, 1000),
            (2, 2000),
            (4, 8000),
            (10, 8000),
            (40, 8000),
        ] {
            let full = Duration::from_millis(full);
            let wait = policy.backoff(retry);
            assert!(
                wait <= full && wait >= full.mul_f64(0.75),
                "{retry}: {wait:?}"
            );
        }
    }
}
