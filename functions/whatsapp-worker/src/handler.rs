//! Maps an SQS FIFO batch of the inbound queue to the worker, and the outcome to a
//! partial batch response. The batch runs by the rules of [`degrau::fifo`], the
//! compactor's too: records in order, each within its record budget
//! ([`record_budget`]) and the invocation's deadline; a failed record holds back
//! its own message group (one conversation) only; what no longer fits the
//! invocation comes back in a later batch. A body that is not a queued message is
//! reported too, and ends in the dead-letter queue.

use std::time::Duration;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use degrau::deadline::Deadline;
use degrau::fifo::{self, Outcome, Record};
use degrau::metrics::Event;
use degrau::whatsapp::inbox::QueuedMessage;
use degrau::whatsapp::worker::{FUNCTION, Worker};
use lambda_runtime::{Error, LambdaEvent};
use tracing::{error, warn};

/// Time a record keeps besides its turn: the debounce's waits (at most three
/// debounces) and its reads and writes.
pub const RECORD_STORE_MARGIN: Duration = Duration::from_secs(3);

/// The time budget of one record: three debounces, the turn's ask and send, and
/// [`RECORD_STORE_MARGIN`].
pub fn record_budget(worker: &Worker) -> Duration {
    worker.debounce * 3 + worker.turn_budget() + RECORD_STORE_MARGIN
}

/// Runs a batch by the rules of [`degrau::fifo`], each record within `budget`.
/// `Err` only when a record to report has no `messageId` (never from SQS): the
/// whole batch comes back, which is safe since every step of a turn is conditional.
pub async fn handle_batch(
    worker: &Worker,
    budget: Duration,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let (batch, context) = event.into_parts();
    let records: Vec<Record> = batch.records.iter().map(record).collect();
    let invocation = Deadline::from_epoch_millis(context.deadline);
    let outcome = fifo::run(&records, budget, invocation, async |record, deadline| {
        run_record(worker, record, deadline).await
    })
    .await;
    let response = failures(&outcome)?;
    if !outcome.reported.is_empty() {
        Event::new(FUNCTION)
            .count("RecordsFailed", outcome.reported.len() as u64)
            .emit();
    }
    Ok(response)
}

/// An SQS message as the runner reads it: a missing id, body or group is empty or
/// none, and a receive count that cannot be read is the first. (The compactor's
/// handler maps SQS the same way, and back with the same `failures`: their one home
/// would be `degrau-adapters`, which holds no Lambda event types yet.)
fn record(message: &SqsMessage) -> Record {
    Record {
        id: message.message_id.clone().unwrap_or_default(),
        group: message.attributes.get("MessageGroupId").cloned(),
        body: message.body.clone().unwrap_or_default(),
        receives: message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|count| count.parse().ok())
            .unwrap_or(1),
    }
}

/// The partial batch response naming the records the runner reported, in order; an
/// error when one of them has no `messageId`.
fn failures(outcome: &Outcome) -> Result<SqsBatchResponse, Error> {
    let mut response = SqsBatchResponse::default();
    for id in &outcome.reported {
        if id.is_empty() {
            return Err("a record to report has no messageId; failing the whole batch".into());
        }
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id.clone();
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}

/// Runs one record by `deadline` (in the runner's span for the record); true when
/// it succeeded (nothing to do included).
async fn run_record(worker: &Worker, record: &Record, deadline: Deadline) -> bool {
    let queued = match serde_json::from_str::<QueuedMessage>(&record.body) {
        Ok(queued) => queued,
        Err(parse) => {
            // The serde message may quote the body (a number): its class only.
            error!(category = ?parse.classify(), "the body is not a queued message");
            Event::new(FUNCTION)
                .dimension("Error", "malformed")
                .rollup()
                .count("RecordFailures", 1)
                .emit();
            return false;
        }
    };
    match worker.handle(&queued, deadline).await {
        Ok(outcome) => {
            tracing::info!(?outcome, "record done");
            true
        }
        Err(failure) => {
            warn!(code = failure.code(), error = %failure, "record failed; it comes back");
            Event::new(FUNCTION)
                .dimension("Error", failure.code())
                .rollup()
                .count("RecordFailures", 1)
                .emit();
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use aws_lambda_events::sqs::SqsEvent;
    use degrau::ask::AskService;
    use degrau::domain::TenantId;
    use degrau::jobs::NoJobs;
    use degrau::model::scripted::ScriptedModel;
    use degrau::store::memory::MemoryStore;
    use degrau::tenant::Defaults;
    use degrau::tools::ToolDispatch;
    use degrau::usage::Usage;
    use degrau::whatsapp::PhoneNumberId;
    use degrau::whatsapp::event::parse_delivery;
    use degrau::whatsapp::outbound::SendError;
    use degrau::whatsapp::store::WhatsAppStore;
    use degrau::whatsapp::testing::{RecordingInbox, ScriptedSender, Sent};
    use degrau::whatsapp::webhook::WebhookService;
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
        let store = Arc::new(MemoryStore::new());
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
        let clock: degrau::session::Clock = Arc::new(|| 1_800_000_000);
        Harness {
            worker: Worker {
                store: store.clone(),
                ask: AskService {
                    store: store.clone(),
                    tenants: store.clone(),
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
            },
            webhook: WebhookService {
                store: store.clone(),
                tenants: store,
                inbox: inbox.clone(),
                clock,
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
        let response = handle_batch(&h.worker, budget, event(&[("m1", "g1", &body)]))
            .await
            .unwrap();
        assert!(reported(&response).is_empty());
        assert_eq!(h.sender.sent(), vec![Sent::Text("Olá!".into())]);
        // The same queue message again: handled, nothing sent twice, no model call.
        let response = handle_batch(&h.worker, budget, event(&[("m1", "g1", &body)]))
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
        let response = handle_batch(&h.worker, budget, event(&[("m1", "g1", &body)]))
            .await
            .unwrap();
        assert_eq!(reported(&response), vec!["m1"]);
        let response = handle_batch(&h.worker, budget, event(&[("m1", "g1", &body)]))
            .await
            .unwrap();
        assert!(reported(&response).is_empty());
        assert_eq!(h.model.requests().len(), 1);
        assert_eq!(h.sender.sent(), vec![Sent::Text("Olá!".into())]);
    }
}
