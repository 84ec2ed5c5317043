//! `events/whatsapp-worker.json`, the sample event for `sam local invoke
//! WhatsAppWorkerFunction`, is the SQS FIFO batch the inbound queue delivers after
//! the webhook's sample delivery (`events/whatsapp-webhook-delivery.json`): its body
//! is the message the webhook enqueues for it (the same fields; the record it names
//! is the record's incarnation, drawn when the webhook records it, so the test puts
//! the one drawn here in its place), and the real handler makes it a turn and sends
//! the reply.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

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
use degrau_whatsapp::store::WhatsAppStore;
use degrau_whatsapp::testing::{RecordingInbox, ScriptedSender, Sent};
use degrau_whatsapp::webhook::WebhookService;
use degrau_whatsapp::worker::Worker;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::Value;
use whatsapp_worker::handler::{Holding, handle_batch, record_budget};

const WORKER: &str = include_str!("../../../events/whatsapp-worker.json");
const DELIVERY: &str = include_str!("../../../events/whatsapp-webhook-delivery.json");

#[tokio::test]
async fn the_sample_batch_is_the_webhooks_sample_message_and_makes_one_reply() {
    let store = MemoryWhatsApp::new();
    store
        .bind(
            &PhoneNumberId::parse("100000000000001").unwrap(),
            &TenantId::parse("demo-barbershop").unwrap(),
        )
        .await
        .unwrap();
    let clock: degrau::plan::session::Clock = Arc::new(|| 1_796_290_200);

    // The webhook's sample delivery, recorded and enqueued as the webhook does.
    let delivery: Value = serde_json::from_str(DELIVERY).unwrap();
    let inbox = Arc::new(RecordingInbox::default());
    let webhook = WebhookService {
        store: store.clone(),
        tenants: store.core(),
        inbox: inbox.clone(),
        clock: clock.clone(),
        keys: Arc::new(degrau_whatsapp::keyed::ChannelKeys::derive(
            b"a test's pseudonym secret",
        )),
        events: Arc::new(degrau::events::NoEvents),
    };
    let body = delivery["body"].as_str().unwrap();
    webhook
        .accept(&parse_delivery(body.as_bytes()).unwrap())
        .await
        .unwrap();
    let enqueued = serde_json::to_value(&inbox.queued()[0]).unwrap();
    let mut event: SqsEvent = serde_json::from_str(WORKER).unwrap();
    assert_eq!(event.records.len(), 1);
    let sample: Value = serde_json::from_str(event.records[0].body.as_deref().unwrap()).unwrap();
    let fields = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        fields(&sample),
        fields(&enqueued),
        "the sample is the queue's message"
    );
    assert_eq!(sample["tenant"], enqueued["tenant"]);
    assert_eq!(sample["queued_at"], enqueued["queued_at"]);
    assert!(
        sample["record"].as_str().unwrap().len() == 32,
        "a record is named by an incarnation"
    );
    event.records[0].body = Some(enqueued.to_string());

    let model = Arc::new(ScriptedModel::default());
    model.push(ScriptedModel::text("Tem sim: 10:30.", Usage::default()));
    let sender = Arc::new(ScriptedSender::default());
    let worker = Worker {
        store: store.clone(),
        ask: Converse {
            store: store.core().clone(),
            records: store.core().clone(),
            recall: store.core().clone(),
            usage: store.core().clone(),
            tenants: store.core(),
            model,
            tools: Arc::new(ToolDispatch::built_in_only()),
            jobs: Arc::new(NoJobs),
            defaults: Defaults::default(),
            quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
            clock: clock.clone(),
        },
        sender: sender.clone(),
        clock,
        debounce: Duration::ZERO,
        ask_timeout: Duration::from_secs(25),
        voice: None,
        events: Arc::new(degrau::events::NoEvents),
    };
    let budget = record_budget(&worker);
    let response = handle_batch(
        &worker,
        budget,
        &no_hold(),
        LambdaEvent::new(event, Context::default()),
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(sender.sent(), vec![Sent::Text("Tem sim: 10:30.".into())]);
}

/// No queue behind the holds (a held record waits the queue's timeout).
fn no_hold() -> Holding<'static> {
    Holding {
        hold: &degrau_whatsapp::aws::inbox::NoHold,
        max_receives: 5,
    }
}
