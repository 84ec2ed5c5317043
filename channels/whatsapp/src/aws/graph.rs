//! The Graph API adapter of the channel's [`Sender`]: `POST
//! {GRAPH_API_BASE_URL}/{version}/{phone-number-id}/messages` with the system user's
//! access token as a bearer token, over `reqwest`.
//!
//! **Retries within the deadline.** A 429, a 5xx, a rate-limit error code (4,
//! 80007, 130429, 131056) or no answer is tried again, after the `Retry-After` the
//! answer names or a short backoff, only while the wait and another attempt fit
//! before the deadline the worker gives; then it is [`SendError::Unavailable`] and
//! the queue message comes back. Error 131047 is [`SendError::OutsideWindow`]; any
//! other refusal is [`SendError::Rejected`], not retried. The token is never
//! logged, nor the recipient or the text.

use std::time::Duration;

use crate::outbound::{OUTSIDE_WINDOW_CODE, OutboundMessage, SendError, Sender};
use crate::{PhoneNumberId, WaId, WaMessageId};
use async_trait::async_trait;
use degrau::deadline::Deadline;
use serde_json::{Value, json};
use tracing::warn;

/// The Graph API's base URL when `GRAPH_API_BASE_URL` is unset.
pub const DEFAULT_BASE_URL: &str = "https://graph.facebook.com";

/// The Graph API version when `GRAPH_API_VERSION` is unset.
pub const DEFAULT_VERSION: &str = "v23.0";

/// Most attempts at one message.
pub const MAX_ATTEMPTS: u32 = 4;

/// Longest one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(8);

/// Least time an attempt needs to be worth starting.
const MIN_ATTEMPT: Duration = Duration::from_millis(500);

/// Longest a read mark may take, retries included: it must never hold up the
/// turn it announces.
const READ_MARK_BUDGET: Duration = Duration::from_secs(2);

/// Graph API error codes that mean "too many, later": retried like a 429.
const RATE_LIMIT_CODES: &[i64] = &[4, 80_007, 130_429, 131_056];

/// The Graph API client.
#[derive(Clone)]
pub struct GraphSender {
    http: reqwest::Client,
    base_url: String,
    version: String,
    token: String,
}

impl std::fmt::Debug for GraphSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphSender")
            .field("base_url", &self.base_url)
            .field("version", &self.version)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl GraphSender {
    /// A client of the Graph API at `base_url` (no trailing slash), `version`
    /// (`v23.0`), with the access `token`.
    pub fn new(
        base_url: impl Into<String>,
        version: impl Into<String>,
        token: impl Into<String>,
    ) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .build()
            .map_err(|err| format!("the Graph API's HTTP client: {err}"))?;
        Ok(GraphSender {
            http,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            version: version.into(),
            token: token.into(),
        })
    }

    fn body(to: &WaId, message: OutboundMessage<'_>) -> Value {
        match message {
            OutboundMessage::Text(text) => json!({
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": to.as_str(),
                "type": "text",
                "text": {"preview_url": false, "body": text}
            }),
            OutboundMessage::Template(template) => json!({
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": to.as_str(),
                "type": "template",
                "template": {"name": template.name.as_str(),
                             "language": {"code": template.language.as_str()}}
            }),
        }
    }
}

/// What one attempt came to.
enum Attempt {
    /// Taken, with the message id the answer names (none for a read mark).
    Sent(Option<WaMessageId>),
    Retry {
        after: Option<Duration>,
        why: String,
    },
    Final(SendError),
}

fn backoff(attempt: u32) -> Duration {
    let base = 200u64.saturating_mul(1 << attempt.min(4));
    Duration::from_millis(base / 2 + fastrand::u64(0..=base / 2))
}

async fn read_answer(response: reqwest::Response) -> Attempt {
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let id = body["messages"][0]["id"].as_str();
        return Attempt::Sent(id.and_then(|id| WaMessageId::parse(id).ok()));
    }
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let code = body["error"]["code"].as_i64();
    if code == Some(OUTSIDE_WINDOW_CODE) {
        return Attempt::Final(SendError::OutsideWindow);
    }
    let rate_limited = code.is_some_and(|code| RATE_LIMIT_CODES.contains(&code));
    if status == 429 || status >= 500 || rate_limited {
        return Attempt::Retry {
            after: retry_after,
            why: format!("HTTP {status}, code {code:?}"),
        };
    }
    Attempt::Final(SendError::Rejected { status, code })
}

#[async_trait]
impl Sender for GraphSender {
    async fn send(
        &self,
        from: &PhoneNumberId,
        to: &WaId,
        message: OutboundMessage<'_>,
        deadline: Deadline,
    ) -> Result<Option<WaMessageId>, SendError> {
        self.post(from, &Self::body(to, message), deadline).await
    }

    async fn mark_read(
        &self,
        from: &PhoneNumberId,
        message: &WaMessageId,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        let body = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message.as_str(),
            "typing_indicator": {"type": "text"}
        });
        let deadline = deadline.earlier(Deadline::after(READ_MARK_BUDGET));
        self.post(from, &body, deadline).await.map(|_| ())
    }
}

impl GraphSender {
    /// Posts `body` to the number's `messages` endpoint, retrying what may pass
    /// while the deadline allows (see the module documentation).
    async fn post(
        &self,
        from: &PhoneNumberId,
        body: &Value,
        deadline: Deadline,
    ) -> Result<Option<WaMessageId>, SendError> {
        let url = format!("{}/{}/{}/messages", self.base_url, self.version, from);
        let mut last = String::from("no attempt fit the deadline");
        for attempt in 1..=MAX_ATTEMPTS {
            if !deadline.allows(MIN_ATTEMPT) {
                break;
            }
            let request = self
                .http
                .post(&url)
                .bearer_auth(&self.token)
                .json(body)
                .timeout(ATTEMPT_TIMEOUT.min(deadline.remaining()))
                .send();
            let outcome = match request.await {
                Ok(response) => read_answer(response).await,
                Err(err) => Attempt::Retry {
                    after: None,
                    why: if err.is_timeout() {
                        "timed out".into()
                    } else {
                        "no connection".into()
                    },
                },
            };
            match outcome {
                Attempt::Sent(id) => return Ok(id),
                Attempt::Final(error) => return Err(error),
                Attempt::Retry { after, why } => {
                    warn!(
                        attempt,
                        why = why.as_str(),
                        "the Graph API did not take the message"
                    );
                    let wait = after.unwrap_or_else(|| backoff(attempt));
                    last = why;
                    if attempt == MAX_ATTEMPTS || !deadline.allows(wait + MIN_ATTEMPT) {
                        break;
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
        Err(SendError::Unavailable(last))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::settings::TemplateRef;
    use axum::http::{HeaderMap, StatusCode};

    use super::*;

    type Seen = Arc<Mutex<Vec<(String, String, Value)>>>;

    /// One scripted answer: status, headers, body.
    type Answer = (u16, Vec<(&'static str, &'static str)>, Value);

    /// A Graph API that answers from `answers`, then 200.
    async fn fake_graph(answers: Vec<Answer>) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let script = Arc::new(Mutex::new(
            answers
                .into_iter()
                .collect::<std::collections::VecDeque<_>>(),
        ));
        let recorded = seen.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
                let (recorded, script) = (recorded.clone(), script.clone());
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    recorded.lock().unwrap().push((
                        uri.path().to_owned(),
                        auth,
                        serde_json::from_str(&body).unwrap_or(Value::Null),
                    ));
                    let (status, headers, body) = script.lock().unwrap().pop_front().unwrap_or((
                        200,
                        vec![],
                        json!({"messaging_product": "whatsapp", "messages": [{"id": "wamid.out"}]}),
                    ));
                    let mut map = HeaderMap::new();
                    for (name, value) in headers {
                        map.insert(name, value.parse().unwrap());
                    }
                    (StatusCode::from_u16(status).unwrap(), map, body.to_string())
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    fn ids() -> (PhoneNumberId, WaId) {
        (
            PhoneNumberId::parse("100000000000001").unwrap(),
            WaId::parse("15550000001").unwrap(),
        )
    }

    fn minute() -> Deadline {
        Deadline::after(Duration::from_secs(60))
    }

    #[tokio::test]
    async fn a_read_mark_posts_the_status_with_the_typing_indicator() {
        let (url, seen) = fake_graph(vec![]).await;
        let graph = GraphSender::new(url, "v23.0", "secret-token").unwrap();
        let (from, _) = ids();
        let message = WaMessageId::parse("wamid.IN1").unwrap();
        graph.mark_read(&from, &message, minute()).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        let (path, _, body) = &seen[0];
        assert_eq!(path, "/v23.0/100000000000001/messages");
        assert_eq!(
            body,
            &json!({"messaging_product": "whatsapp", "status": "read",
                    "message_id": "wamid.IN1", "typing_indicator": {"type": "text"}})
        );
    }

    #[tokio::test]
    async fn a_500_then_a_200_sends_once_with_the_token_to_the_numbers_path() {
        let (url, seen) = fake_graph(vec![(500, vec![], json!({"error": {"code": 1}}))]).await;
        let graph = GraphSender::new(format!("{url}/"), "v23.0", "secret-token").unwrap();
        let (from, to) = ids();
        graph
            .send(&from, &to, OutboundMessage::Text("Olá"), minute())
            .await
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "one retry");
        let (path, auth, body) = &seen[1];
        assert_eq!(path, "/v23.0/100000000000001/messages");
        assert_eq!(auth, "Bearer secret-token");
        assert_eq!(body["to"], "15550000001");
        assert_eq!(body["text"]["body"], "Olá");
        assert_eq!(body["messaging_product"], "whatsapp");
        assert!(!format!("{graph:?}").contains("secret-token"));
    }

    #[tokio::test]
    async fn a_429_is_retried_after_its_retry_after_and_a_template_has_its_language() {
        let (url, seen) = fake_graph(vec![(429, vec![("retry-after", "1")], json!({}))]).await;
        let graph = GraphSender::new(url, "v23.0", "t").unwrap();
        let (from, to) = ids();
        let template: TemplateRef =
            serde_json::from_value(json!({"name": "retomar", "language": "pt_BR"})).unwrap();
        graph
            .send(&from, &to, OutboundMessage::Template(&template), minute())
            .await
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].2["type"], "template");
        assert_eq!(seen[1].2["template"]["language"]["code"], "pt_BR");
    }

    #[tokio::test]
    async fn refusals_are_final_and_131047_is_the_window() {
        let (url, seen) = fake_graph(vec![
            (
                400,
                vec![],
                json!({"error": {"code": 131047, "message": "Re-engagement message"}}),
            ),
            (401, vec![], json!({"error": {"code": 190}})),
        ])
        .await;
        let graph = GraphSender::new(url, "v23.0", "t").unwrap();
        let (from, to) = ids();
        assert_eq!(
            graph
                .send(&from, &to, OutboundMessage::Text("a"), minute())
                .await,
            Err(SendError::OutsideWindow)
        );
        assert_eq!(
            graph
                .send(&from, &to, OutboundMessage::Text("a"), minute())
                .await,
            Err(SendError::Rejected {
                status: 401,
                code: Some(190)
            })
        );
        assert_eq!(seen.lock().unwrap().len(), 2, "neither retried");
    }

    #[tokio::test]
    async fn failures_past_the_deadline_are_unavailable() {
        let answers = (0..MAX_ATTEMPTS)
            .map(|_| (503, vec![("retry-after", "30")], json!({})))
            .collect();
        let (url, seen) = fake_graph(answers).await;
        let graph = GraphSender::new(url, "v23.0", "t").unwrap();
        let (from, to) = ids();
        let result = graph
            .send(
                &from,
                &to,
                OutboundMessage::Text("a"),
                Deadline::after(Duration::from_secs(5)),
            )
            .await;
        assert!(
            matches!(result, Err(SendError::Unavailable(_))),
            "{result:?}"
        );
        assert_eq!(
            seen.lock().unwrap().len(),
            1,
            "a 30 s wait does not fit 5 s"
        );
    }
}
