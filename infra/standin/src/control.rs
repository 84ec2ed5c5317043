//! What tests can steer and inspect: injected faults, scripted answers, quirks and
//! the log of received calls. The HTTP control endpoints under `/stand-in/` and the
//! Rust methods of [`crate::StandIn`] share these types.
//!
//! # Quirks
//!
//! `POST /stand-in/quirks` ([`QuirkControl`]) steers the [`crate::quirks`] corpus:
//!
//! - `{"next": ["empty_text_before_tool_use", "ping_mid_stream"]}` queues quirks
//!   ([`crate::StandIn::push_quirks`]). An answer gets one quirk at most: the first
//!   queued one that applies to it, which leaves the queue; one that does not apply
//!   (`ping_mid_stream` to a call that does not stream, a `tool_use` quirk to a text
//!   answer) stays queued for a later answer. Scripted answers get them too.
//! - `{"random": {"seed": 7, "per_mille": 250}}` turns on the random mode
//!   ([`crate::StandIn::set_random_quirks`]): an answer that takes no queued quirk
//!   gets, with probability 250/1000, one drawn among those that apply, the draws
//!   the same for the same seed and the same calls; `{"random": null}` turns it off.
//!
//! Both may come in one body; the answer is `{"queued": n, "random": setting|null}`.
//! An unknown quirk name, or a `per_mille` over 1,000, is a 400 naming it.
//! `POST /stand-in/reset` clears both. Every logged call lists the quirks applied
//! to it ([`LoggedCall::quirks`]), so that a test can assert what the model sent.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::quirks::{Quirk, Random};
use crate::wire::{ResponseBlock, StopReason, Usage};

/// One injected fault, consumed by the next `POST /v1/messages` (or Bedrock call),
/// streamed or not, before anything else (headers and body are not even looked at
/// when it sets a `status`).
///
/// `hang_ms` sleeps first; then `status` answers that error, `drop` breaks the
/// connection, and neither answers normally. With `drop`, the request is handled
/// normally (cache and log included), then the status line, the headers and the
/// first half of the body (the answer, or the error of a refused request) are
/// sent and the connection is closed mid-body (a streamed answer: half its events).
///
/// On a streamed call, `stream_error_after: n` sends the answer's first `n` events
/// then an `error` event (`type` from `type`, default `overloaded_error`; message
/// from `message`; on Bedrock's route an exception frame) and ends the stream;
/// `stream_drop_after: n` sends `n` events then breaks the connection. On a call
/// that does not stream, either breaks it like `drop`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// HTTP status of the error to answer (400–599, 529 included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `error.type`; defaults to the API's type for the status.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `error.message`; defaults to a short text naming the fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `retry-after` header, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// `retry-after-ms` header, for tests that should not wait whole seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// `x-should-retry` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_retry: Option<bool>,
    /// `error.details.error_code`, e.g. `enforced_spend_limit_reached`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Milliseconds to wait before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang_ms: Option<u64>,
    /// Break the connection half-way through the body.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop: bool,
    /// On a streamed call: this many events, then an `error` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_error_after: Option<usize>,
    /// On a streamed call: this many events, then the connection breaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_drop_after: Option<usize>,
}

impl Fault {
    /// Why the fault cannot be queued, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if let Some(status) = self.status
            && !(400..=599).contains(&status)
        {
            return Some(format!("status must be 400–599, got {status}"));
        }
        let ends = [
            self.status.is_some(),
            self.drop,
            self.stream_error_after.is_some(),
            self.stream_drop_after.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count();
        if ends > 1 {
            return Some(
                "a fault sets one of `status`, `drop`, `stream_error_after` and \
                 `stream_drop_after`"
                    .into(),
            );
        }
        if ends == 0 && self.hang_ms.is_none() {
            return Some(
                "a fault needs `status`, `hang_ms`, `drop`, `stream_error_after` or \
                 `stream_drop_after`"
                    .into(),
            );
        }
        None
    }
}

/// A scripted answer, used instead of the heuristics by the next valid request
/// (a request refused with a 400 does not consume it). Usage is still computed. A
/// `thinking` block with an empty `signature`, or a `redacted_thinking` block with
/// empty `data`, is signed (sealed) by the stand-in, so it is accepted when it comes
/// back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedAnswer {
    /// The answer's blocks, as the API returns them.
    pub content: Vec<ResponseBlock>,
    /// Why it stopped; defaults to `tool_use` when `content` holds one, else
    /// `end_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}

impl ScriptedAnswer {
    /// The stop reason to report.
    pub fn stop_reason(&self) -> StopReason {
        self.stop_reason.unwrap_or_else(|| {
            if self
                .content
                .iter()
                .any(|b| matches!(b, ResponseBlock::ToolUse { .. }))
            {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            }
        })
    }
}

/// The body of `POST /stand-in/quirks` (see the module's docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuirkControl {
    /// Quirk names to queue, in order (checked by [`QuirkControl::quirks`]).
    #[serde(default)]
    pub next: Vec<String>,
    /// Absent: the random mode as it is; `null`: off; a setting: on.
    #[serde(default, deserialize_with = "present")]
    pub random: Option<Option<Random>>,
}

/// A field that is present, `null` included (`Some(None)`), as opposed to absent
/// (`None`, by `#[serde(default)]`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

impl QuirkControl {
    /// The quirks to queue, or why the body cannot be used (`next.1: unknown quirk
    /// …`, `random.per_mille: …`).
    pub fn quirks(&self) -> Result<Vec<Quirk>, String> {
        if let Some(Some(random)) = &self.random
            && let Some(problem) = random.problem()
        {
            return Err(format!("random.{problem}"));
        }
        self.next
            .iter()
            .enumerate()
            .map(|(index, name)| name.parse().map_err(|e| format!("next.{index}: {e}")))
            .collect()
    }
}

/// One `POST /v1/messages` (or Bedrock's `POST /model/{modelId}/invoke`) call as the
/// stand-in saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedCall {
    /// Its `request-id` (`x-amzn-RequestId` on Bedrock's route).
    pub request_id: String,
    /// The path called, as sent (percent-encoding included).
    #[serde(default)]
    pub path: String,
    /// On Bedrock's route only: the request as it was signed, so that a test can
    /// recompute its SigV4 signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RawRequest>,
    /// The HTTP status answered.
    pub status: u16,
    /// The body received: JSON when it parsed, else the text (lossy UTF-8). On
    /// Bedrock's route, as sent (no `model`; `anthropic_version` in it).
    pub body: Value,
    /// The usage computed, for answered calls (as in `response`).
    pub usage: Option<Usage>,
    /// The response body sent (the whole of it, even when `dropped`).
    pub response: Value,
    /// True when a `drop` (or `stream_drop_after`) fault cut the response.
    #[serde(default)]
    pub dropped: bool,
    /// True when the answer was streamed (`"stream": true`, or Bedrock's
    /// `invoke-with-response-stream`).
    #[serde(default)]
    pub streamed: bool,
    /// The quirks applied to the answer (empty when none; `response` is the answer
    /// with them).
    #[serde(default)]
    pub quirks: Vec<Quirk>,
}

/// A request exactly as received: what a SigV4 signature covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawRequest {
    /// `POST`.
    pub method: String,
    /// The path as sent (percent-encoded).
    pub path: String,
    /// The query string, without `?` (empty when none).
    pub query: String,
    /// Every header, its name lowercased (a repeated header's values joined by `,`).
    pub headers: std::collections::BTreeMap<String, String>,
    /// The body, as text (lossy UTF-8).
    pub body: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn faults_parse_from_the_documented_shapes() {
        let faults: Vec<Fault> = serde_json::from_value(json!([
            {"status": 529}, {"status": 429, "retry_after": 1}, {"hang_ms": 5000},
            {"drop": true}, {"status": 400, "type": "invalid_request_error", "message": "no"}
        ]))
        .unwrap();
        assert!(faults.iter().all(|f| f.problem().is_none()));
        assert_eq!(faults[1].retry_after, Some(1));
        assert!(faults[3].drop);
        assert!(Fault::default().problem().is_some());
        let bad = Fault {
            status: Some(200),
            ..Fault::default()
        };
        assert!(bad.problem().unwrap().contains("400–599"));
        assert!(serde_json::from_value::<Fault>(json!({"statuss": 500})).is_err());
    }

    #[test]
    fn a_quirk_control_tells_absent_random_from_null_and_names_what_is_wrong() {
        let read = |body: serde_json::Value| -> QuirkControl {
            serde_json::from_value(body).expect("a control body")
        };
        let queued = read(json!({"next": ["ping_mid_stream", "null_citations"]}));
        assert_eq!(
            queued.quirks().unwrap(),
            [Quirk::PingMidStream, Quirk::NullCitations]
        );
        assert_eq!(queued.random, None);
        assert_eq!(read(json!({"random": null})).random, Some(None));
        assert_eq!(
            read(json!({"random": {"seed": 7, "per_mille": 250}})).random,
            Some(Some(Random {
                seed: 7,
                per_mille: 250
            }))
        );
        let unknown = read(json!({"next": ["ping_mid_stream", "hiccup"]}));
        let problem = unknown.quirks().unwrap_err();
        assert!(
            problem.starts_with(
                "next.1: unknown quirk `hiccup`; the quirks are empty_text_before_tool_use, "
            ),
            "{problem}"
        );
        let too_likely = read(json!({"random": {"seed": 1, "per_mille": 1001}}));
        assert_eq!(
            too_likely.quirks().unwrap_err(),
            "random.per_mille must be 0–1000, got 1001"
        );
        assert!(serde_json::from_value::<QuirkControl>(json!({"nxt": []})).is_err());
    }

    #[test]
    fn a_script_defaults_its_stop_reason_from_its_content() {
        let tool: ScriptedAnswer = serde_json::from_value(json!({"content": [
            {"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}))
        .unwrap();
        assert_eq!(tool.stop_reason(), StopReason::ToolUse);
        let text: ScriptedAnswer =
            serde_json::from_value(json!({"content": [{"type": "text", "text": "hi"}]})).unwrap();
        assert_eq!(text.stop_reason(), StopReason::EndTurn);
    }
}
