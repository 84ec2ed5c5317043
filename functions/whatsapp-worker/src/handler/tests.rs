//! The worker's handler over the in-memory store, the scripted model and a
//! scripted sender: a queued message made a turn and its reply sent once, a
//! malformed body holding back its own group, a failed send sent on redelivery.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use aws_lambda_events::sqs::SqsEvent;
use degrau::converse::Converse;
use degrau::domain::TenantId;
use degrau::jobs::NoJobs;
use degrau::model::scripted::ScriptedModel;
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use degrau_whatsapp::PhoneNumberId;
use degrau_whatsapp::event::parse_delivery;
use degrau_whatsapp::memory::MemoryWhatsApp;
use degrau_whatsapp::outbound::SendError;
use degrau_whatsapp::store::WhatsAppStore;
use degrau_whatsapp::testing::{RecordingInbox, ScriptedSender, Sent};
use degrau_whatsapp::webhook::WebhookService;
use lambda_runtime::Context;
use serde_json::{Value, json};

use super::*;

const PHONE: &str = "100000000000001";

struct Harness {
    worker: Worker,
    webhook: WebhookService,
    model: Arc<ScriptedModel>,
    inbox: Arc<RecordingInbox>,
    sender: Arc<ScriptedSender>,
}

async fn harness() -> Harness {
    let store = MemoryWhatsApp::new();
    store
        .bind(
            &PhoneNumberId::parse(PHONE).unwrap(),
            &TenantId::parse("barber").unwrap(),
        )
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::default());
    let inbox = Arc::new(RecordingInbox::default());
    let sender = Arc::new(ScriptedSender::default());
    let clock: degrau::plan::session::Clock = Arc::new(|| 1_800_000_000);
    Harness {
        worker: Worker {
            store: store.clone(),
            ask: Converse {
                store: store.core().clone(),
                records: store.core().clone(),
                recall: store.core().clone(),
                usage: store.core().clone(),
                tenants: store.core(),
                model: model.clone(),
                tools: Arc::new(ToolDispatch::built_in_only()),
                jobs: Arc::new(NoJobs),
                quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
                defaults: Defaults::default(),
                clock: clock.clone(),
            },
            sender: sender.clone(),
            clock: clock.clone(),
            debounce: Duration::ZERO,
            ask_timeout: Duration::from_secs(25),
            voice: None,
            events: Arc::new(degrau::events::NoEvents),
        },
        webhook: WebhookService {
            store: store.clone(),
            tenants: store.core(),
            inbox: inbox.clone(),
            clock,
            keys: std::sync::Arc::new(degrau_whatsapp::keyed::ChannelKeys::derive(
                b"a test's pseudonym secret",
            )),
            events: Arc::new(degrau::events::NoEvents),
        },
        model,
        inbox,
        sender,
    }
}

impl Harness {
    /// Delivers a text from `from` and returns the queue body it made.
    async fn deliver(&self, from: &str, id: &str, text: &str) -> String {
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "0",
            "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
            "metadata": {"phone_number_id": PHONE},
            "messages": [{"from": from, "id": id, "type": "text", "text": {"body": text}}]}}]}]});
        let delivery = parse_delivery(body.to_string().as_bytes()).unwrap();
        self.webhook.accept(&delivery).await.unwrap();
        serde_json::to_string(self.inbox.queued().last().unwrap()).unwrap()
    }

    fn answer(&self, text: &str) {
        self.model.push(ScriptedModel::text(
            text,
            Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
        ));
    }
}

fn event(records: &[(&str, &str, &str)]) -> LambdaEvent<SqsEvent> {
    let records: Vec<Value> = records
        .iter()
        .map(|(id, group, body)| {
            json!({"messageId": id, "body": body, "eventSource": "aws:sqs",
                   "attributes": {"MessageGroupId": group}})
        })
        .collect();
    let payload = serde_json::from_value(json!({ "Records": records })).unwrap();
    LambdaEvent::new(payload, Context::default())
}

fn reported(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

#[tokio::test]
async fn a_queued_message_makes_a_turn_and_its_reply_is_sent() {
    let h = harness().await;
    let body = h.deliver("15550000001", "wamid.A", "oi").await;
    h.answer("Olá!");
    let budget = record_budget(&h.worker);
    let response = handle_batch(&h.worker, budget, &no_hold(), event(&[("m1", "g1", &body)]))
        .await
        .unwrap();
    assert!(reported(&response).is_empty());
    assert_eq!(h.sender.sent(), vec![Sent::Text("Olá!".into())]);
    // The same queue message again: handled, nothing sent twice, no model call.
    let response = handle_batch(&h.worker, budget, &no_hold(), event(&[("m1", "g1", &body)]))
        .await
        .unwrap();
    assert!(reported(&response).is_empty());
    assert_eq!(h.sender.sent().len(), 1);
    assert_eq!(h.model.requests().len(), 1);
}

#[tokio::test]
async fn a_malformed_body_is_reported_and_holds_back_its_group_only() {
    let h = harness().await;
    let body = h.deliver("15550000002", "wamid.B", "oi").await;
    h.answer("Olá!");
    let response = handle_batch(
        &h.worker,
        record_budget(&h.worker),
        &no_hold(),
        event(&[
            ("bad", "g1", "{\"not\": \"a message\"}"),
            ("later", "g1", &body),
            ("other", "g2", &body),
        ]),
    )
    .await
    .unwrap();
    assert_eq!(reported(&response), vec!["bad", "later"]);
    assert_eq!(h.sender.sent(), vec![Sent::Text("Olá!".into())]);
}

#[tokio::test]
async fn a_send_that_fails_is_reported_and_sent_once_on_redelivery() {
    let h = harness().await;
    let body = h.deliver("15550000003", "wamid.C", "oi").await;
    h.answer("Olá!");
    h.sender
        .push(Err(SendError::Unavailable("HTTP 500".into())));
    let budget = record_budget(&h.worker);
    let response = handle_batch(&h.worker, budget, &no_hold(), event(&[("m1", "g1", &body)]))
        .await
        .unwrap();
    assert_eq!(reported(&response), vec!["m1"]);
    let response = handle_batch(&h.worker, budget, &no_hold(), event(&[("m1", "g1", &body)]))
        .await
        .unwrap();
    assert!(reported(&response).is_empty());
    assert_eq!(h.model.requests().len(), 1);
    assert_eq!(h.sender.sent(), vec![Sent::Text("Olá!".into())]);
}

/// No queue behind the holds (a held record waits the queue's timeout).
fn no_hold() -> Holding<'static> {
    Holding {
        hold: &degrau_whatsapp::aws::inbox::NoHold,
        max_receives: 5,
    }
}
