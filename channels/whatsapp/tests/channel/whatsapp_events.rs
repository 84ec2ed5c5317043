//! The WhatsApp functions' events out (`docs/events.md`) on the in-memory store:
//! the owner's echo publishes `handoff.started` and the hand-back word
//! `handoff.ended` (the worker), a `failed` status on a stored reply publishes
//! `delivery.failed` once (the webhook); a tenant without an events webhook
//! publishes nothing.

use degrau::events::EventType;
use degrau::tenant::{TenantConfig, TenantStore};
use degrau::tools::declared::{EventsWebhook, Webhook};
use degrau_whatsapp::event::parse_delivery;
use serde_json::{Value, json};

use crate::helpers::START;
use crate::whatsapp::{CUSTOMER, Channel, PHONE, answers, channel, customer, text};

/// The tenant's config: its events webhook (when `webhook`) and `voltar` as its
/// hand-back word.
async fn configure(channel: &Channel, webhook: bool) {
    let receiver = Webhook {
        url: "https://crm.example.com/events".into(),
        secret_parameter: format!("/degrau/webhooks/{}/events", customer().tenant),
        timeout_ms: 5000,
    };
    let config = TenantConfig {
        events_webhook: webhook.then(|| EventsWebhook::try_from(receiver).unwrap()),
        whatsapp: Some(serde_json::from_value(json!({"handback_keyword": "voltar"})).unwrap()),
        ..TenantConfig::default()
    };
    channel
        .store
        .put_tenant_config(&customer().tenant, &config)
        .await
        .unwrap();
}

/// A signed-off delivery of the owner's echo `body`.
fn echo(id: &str, body: &str) -> Vec<u8> {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "smb_message_echoes",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550000000", "phone_number_id": PHONE},
                  "message_echoes": [{"from": "15550000000", "to": CUSTOMER, "id": id,
                                      "timestamp": "1800000000", "type": "text",
                                      "text": {"body": body}}]}}]}]})
    .to_string()
    .into_bytes()
}

/// A delivery of one status callback for the sent message `id`.
fn status(id: &str, status: &str, code: Option<i64>) -> Vec<u8> {
    let mut callback =
        json!({"id": id, "status": status, "timestamp": "1800000001", "recipient_id": CUSTOMER});
    if let Some(code) = code {
        callback["errors"] = json!([{"code": code, "title": "Message undeliverable"}]);
    }
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550000000", "phone_number_id": PHONE},
                  "statuses": [callback]}}]}]})
    .to_string()
    .into_bytes()
}

async fn accept(channel: &Channel, body: &[u8]) {
    let delivery = parse_delivery(body).unwrap();
    channel.webhook.accept(&delivery).await.unwrap();
    channel.work().await;
}

/// What was published: (type, data).
fn published(channel: &Channel) -> Vec<(EventType, Value)> {
    channel
        .events
        .published()
        .into_iter()
        .inspect(|(_, o)| assert_eq!(o.contact, customer().contact))
        .map(|(_, o)| (o.kind, o.data))
        .collect()
}

#[tokio::test]
async fn the_owners_echo_starts_a_handoff_and_the_word_ends_it_once() {
    let (channel, _) = channel().await;
    configure(&channel, true).await;
    accept(&channel, &echo("wamid.E1", "Oi, aqui é a Rita")).await;
    accept(&channel, &echo("wamid.E2", "voltar")).await;
    // The word again, with no handoff in force, ends nothing.
    accept(&channel, &echo("wamid.E3", "voltar")).await;
    let until = START + 12 * 3600;
    assert_eq!(
        published(&channel),
        [
            (
                EventType::HandoffStarted,
                json!({"by": "business_app", "since": START, "until": until})
            ),
            (EventType::HandoffEnded, json!({})),
        ]
    );
}

/// A customer's message answered (the reply's delivery record kept), then the
/// given status callbacks for that reply.
async fn reply_then(channel: &Channel, statuses: &[(&str, Option<i64>)]) {
    answers(&channel.model, &["Temos horário amanhã."]);
    accept(channel, &text_delivery("wamid.C1", "tem horário?")).await;
    let id = "wamid.scripted.1";
    for (name, code) in statuses {
        accept(channel, &status(id, name, *code)).await;
    }
}

fn text_delivery(id: &str, body: &str) -> Vec<u8> {
    crate::whatsapp::delivery_to(PHONE, &[text(id, body)])
}

#[tokio::test]
async fn a_failed_status_on_a_stored_reply_publishes_delivery_failed_once() {
    let (channel, _) = channel().await;
    configure(&channel, true).await;
    // Delivered, then failed, then the failure delivered again by Meta.
    reply_then(
        &channel,
        &[
            ("delivered", None),
            ("failed", Some(131_026)),
            ("failed", Some(131_026)),
        ],
    )
    .await;
    assert_eq!(
        published(&channel),
        [(
            EventType::DeliveryFailed,
            json!({"error_code": 131_026, "session": 1, "seq": 2})
        )]
    );
}

#[tokio::test]
async fn a_tenant_without_an_events_webhook_publishes_nothing_from_whatsapp() {
    let (channel, _) = channel().await;
    configure(&channel, false).await;
    reply_then(&channel, &[("failed", Some(131_026))]).await;
    accept(&channel, &echo("wamid.E1", "Oi")).await;
    accept(&channel, &echo("wamid.E2", "voltar")).await;
    assert!(channel.events.published().is_empty());
}
