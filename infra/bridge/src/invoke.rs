//! Invoking the function: the [`Invoke`] port, and [`HttpInvoke`], its adapter
//! for the invoke endpoint of `cargo lambda watch` (the Lambda Invoke API's path,
//! `/2015-03-31/functions/{name}/invocations`).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

/// Runs the function on one event: `Ok` with its JSON answer, `Err` when the
/// invocation failed (the function returned an error, crashed or timed out, or
/// could not be reached). The error text must not carry message bodies: the
/// bridge logs it.
#[async_trait]
pub trait Invoke: Send + Sync {
    /// Invokes the function synchronously with `event`.
    async fn invoke(&self, event: Value) -> Result<Value, String>;
}

/// Invokes a function served by `cargo lambda watch` (or anything speaking the
/// Lambda Invoke API without signatures) over HTTP.
#[derive(Debug, Clone)]
pub struct HttpInvoke {
    /// The full invocations URL.
    pub url: String,
    client: reqwest::Client,
}

impl HttpInvoke {
    /// An invoker of `function` behind `base` (e.g. `http://127.0.0.1:9000`) that
    /// gives up on an invocation after `timeout` (the function's own timeout plus
    /// the time `cargo lambda watch` needs to compile it on first use).
    pub fn new(base: &str, function: &str, timeout: Duration) -> Result<HttpInvoke, String> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpInvoke {
            url: invocations_url(base, function),
            client,
        })
    }
}

/// `{base}/2015-03-31/functions/{function}/invocations`.
pub fn invocations_url(base: &str, function: &str) -> String {
    format!(
        "{}/2015-03-31/functions/{function}/invocations",
        base.trim_end_matches('/')
    )
}

/// The `errorType` of a Lambda error body, for a log line without the message.
fn error_type(body: &Value) -> &str {
    body.get("errorType")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
}

#[async_trait]
impl Invoke for HttpInvoke {
    async fn invoke(&self, event: Value) -> Result<Value, String> {
        let response = self
            .client
            .post(&self.url)
            .json(&event)
            .send()
            .await
            .map_err(|e| format!("invoke {}: {e}", self.url))?;
        let status = response.status();
        // AWS answers a function error with 200 and this header; cargo lambda
        // watch answers it with 500. Both count.
        let function_error = response
            .headers()
            .get("x-amz-function-error")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response
            .text()
            .await
            .map_err(|e| format!("invoke {}: reading the answer: {e}", self.url))?;
        let body: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|_| format!("invoke {}: HTTP {status}, not JSON", self.url))?
        };
        if let Some(kind) = function_error {
            return Err(format!(
                "function error ({kind}, HTTP {status}): {}",
                error_type(&body)
            ));
        }
        if !status.is_success() {
            return Err(format!(
                "function error (HTTP {status}): {}",
                error_type(&body)
            ));
        }
        // cargo lambda watch relays an init error (the process failed before its
        // first event) as 200 with the error body; no batch response has these.
        if body.get("errorType").is_some() && body.get("errorMessage").is_some() {
            return Err(format!(
                "function error (HTTP {status}): {}",
                error_type(&body)
            ));
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_the_lambda_invoke_path() {
        assert_eq!(
            invocations_url("http://127.0.0.1:9000/", "compactor"),
            "http://127.0.0.1:9000/2015-03-31/functions/compactor/invocations"
        );
    }
}
