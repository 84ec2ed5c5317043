//! The WhatsApp path of one message, measured through the real functions: Meta's
//! signed delivery to `whatsapp-webhook` (its DynamoDB writes and its send to the
//! inbound queue), the event source mapping's receive and delete (the bridge), and
//! `whatsapp-worker`'s turn (the ask service's reads and commit, the channel's
//! records, the reply sent to the Graph API, here the stand-in's). One message a
//! turn, each after the last reply, from one customer: the common case of a chat.

use std::time::Instant;

use degrau_awsproxy::Summary;
use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use serde_json::json;
use sha2::Sha256;

use super::stack::{ProxiedStack, TimedInvoke, WHATSAPP_APP_SECRET, WHATSAPP_PHONE};

/// The customer of the WhatsApp run (a number of the fictional 555 range).
pub const CUSTOMER: &str = "15550001234";

/// One WhatsApp message, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatsAppFigures {
    /// 1-based message.
    pub message: usize,
    /// The webhook's answer (200 when the message was recorded and enqueued).
    pub webhook_status: u16,
    /// The webhook invocation's wall time, ms.
    pub webhook_wall_ms: f64,
    /// The webhook's AWS calls.
    pub webhook_aws: Summary,
    /// Worker invocations for the message.
    pub worker_invocations: usize,
    /// Their wall time, ms.
    pub worker_wall_ms: f64,
    /// The worker's DynamoDB and SQS calls and the event source mapping's SQS calls.
    pub worker_aws: Summary,
    /// Messages the worker sent to the Graph API.
    pub graph_sends: u64,
}

/// Meta's delivery of one text message.
fn delivery(message: usize, text: &str) -> String {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550009999", "phone_number_id": WHATSAPP_PHONE},
                  "contacts": [{"profile": {"name": "Footprint"}, "wa_id": CUSTOMER}],
                  "messages": [{"from": CUSTOMER, "id": format!("wamid.FOOTPRINT{message:06}"),
                                "timestamp": "1800000000", "type": "text", "text": {"body": text}}]}}]}]})
    .to_string()
}

/// `X-Hub-Signature-256` of `body` under the stack's app secret.
fn signature(body: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(WHATSAPP_APP_SECRET.as_bytes()).expect("any key length");
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

async fn graph_sent(stack: &ProxiedStack) -> u64 {
    let sent: serde_json::Value = async {
        reqwest::get(format!("{}/stand-in/graph/sent", stack.standin.url))
            .await
            .ok()?
            .json()
            .await
            .ok()
    }
    .await
    .unwrap_or_default();
    sent.as_array().map_or(0, |a| a.len() as u64)
}

/// Plays `texts` as WhatsApp messages, one a turn, and measures each.
pub async fn run(stack: &ProxiedStack, texts: &[String]) -> Vec<WhatsAppFigures> {
    let invoke = TimedInvoke::new(&stack.worker);
    let mut out = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        let message = index + 1;
        let body = delivery(message, text);
        let signed = signature(&body);
        let event = degrau_tests::api_event(
            "POST",
            "/whatsapp/webhook",
            "",
            &[
                ("content-type", "application/json"),
                ("x-hub-signature-256", &signed),
            ],
            Some(&body),
            None,
        );
        stack.proxy.reset();
        let started = Instant::now();
        let answer = stack.webhook.invoke(event).await;
        let webhook_wall_ms = started.elapsed().as_secs_f64() * 1000.0;
        let webhook_aws = Summary::of(&stack.proxy.log());
        let webhook_status = answer
            .ok()
            .and_then(|a| a["statusCode"].as_u64())
            .unwrap_or(0) as u16;

        let sent_before = graph_sent(stack).await;
        stack.proxy.reset();
        let worker_invocations = stack.drain_whatsapp(&invoke).await;
        let worker_aws = Summary::of(&stack.proxy.log());
        let worker_wall_ms = invoke.take().iter().map(|d| d.as_secs_f64() * 1000.0).sum();
        let graph_sends = graph_sent(stack).await.saturating_sub(sent_before);
        // The turn's compaction jobs, if any, are the ask service's (measured with
        // the conversation above): drained here so that they do not pile up.
        let compactor = TimedInvoke::new(&stack.compactor);
        stack.drain(&compactor).await;
        out.push(WhatsAppFigures {
            message,
            webhook_status,
            webhook_wall_ms,
            webhook_aws,
            worker_invocations,
            worker_wall_ms,
            worker_aws,
            graph_sends,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_delivery_is_one_text_message_signed_as_the_webhook_checks() {
        let body = delivery(1, "oi");
        let signed = signature(&body);
        assert!(degrau_whatsapp::event::parse_delivery(body.as_bytes()).is_ok());
        assert!(
            degrau_whatsapp::signature::verify_signature(
                WHATSAPP_APP_SECRET.as_bytes(),
                body.as_bytes(),
                Some(&signed)
            )
            .is_ok()
        );
        assert!(
            degrau_whatsapp::signature::verify_signature(b"other", body.as_bytes(), Some(&signed))
                .is_err()
        );
    }
}
