//! The WhatsApp channel's services against the in-memory store, the scripted model
//! and the test doubles of the queue and the Graph API: once per message id, bursts
//! made one turn, a message during a round in the next turn, retries that never
//! answer twice, the 24-hour window, media notes, unknown numbers and erasure.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use degrau::channel::ChannelSection;
use degrau::deadline::Deadline;
use degrau::domain::{ContactId, Incarnation, TenantId};
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::model::{Model, ModelError, ModelResponse};
use degrau::plan::request::ModelRequest;
use degrau::plan::session::Clock;
use degrau::store::{ContactKey, RecordStore, SessionFilter, StoreError};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use degrau_whatsapp::event::parse_delivery;
use degrau_whatsapp::inbox::QueuedMessage;
use degrau_whatsapp::memory::MemoryWhatsApp;
use degrau_whatsapp::outbound::SendError;
use degrau_whatsapp::store::{
    InboundRecord, NewInbound, Outgoing, RecordState, Recorded, TurnId, TurnRecord, WhatsAppStore,
};
use degrau_whatsapp::testing::{RecordingInbox, ScriptedSender, Sent};
use degrau_whatsapp::webhook::{Accepted, WebhookService};
use degrau_whatsapp::worker::{Outcome, Worker, WorkerError};
use degrau_whatsapp::{PhoneNumberId, WaMessageId};
use serde_json::{Value, json};

use crate::helpers::{START, ask_service, minute, operate_of, test_clock};

pub(crate) const PHONE: &str = "100000000000001";
pub(crate) const CUSTOMER: &str = "15550000001";
const TENANT: &str = "barber";

fn usage() -> Usage {
    Usage {
        input_tokens: 50,
        output_tokens: 10,
        ..Usage::default()
    }
}

pub(crate) fn customer() -> ContactKey {
    ContactKey {
        tenant: TenantId::parse(TENANT).unwrap(),
        contact: ContactId::parse(CUSTOMER).unwrap(),
    }
}

pub(crate) fn text(id: &str, body: &str) -> Value {
    json!({"from": CUSTOMER, "id": id, "timestamp": "1800000000", "type": "text", "text": {"body": body}})
}

fn audio(id: &str) -> Value {
    json!({"from": CUSTOMER, "id": id, "type": "audio", "audio": {"id": "1", "mime_type": "audio/ogg"}})
}

pub(crate) fn delivery_to(phone: &str, messages: &[Value]) -> Vec<u8> {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone},
                  "messages": messages}}]}]})
    .to_string()
    .into_bytes()
}

/// The channel on the in-memory store: the webhook, the worker, and what they talk to.
pub(crate) struct Channel {
    pub(crate) store: Arc<MemoryWhatsApp>,
    pub(crate) model: Arc<ScriptedModel>,
    pub(crate) inbox: Arc<RecordingInbox>,
    pub(crate) sender: Arc<ScriptedSender>,
    pub(crate) webhook: WebhookService,
    pub(crate) worker: Worker,
    /// Queue messages the worker already handled.
    pub(crate) worked: AtomicUsize,
    /// What the webhook and the worker published (for a tenant with an events
    /// webhook; nothing otherwise).
    pub(crate) events: Arc<degrau::events::MemoryEvents>,
}

pub(crate) async fn channel() -> (Channel, Arc<AtomicI64>) {
    let (now, clock) = test_clock();
    let model = Arc::new(ScriptedModel::default());
    (channel_with(model.clone(), model, clock, 0).await, now)
}

async fn channel_with(
    model: Arc<dyn Model>,
    scripted: Arc<ScriptedModel>,
    clock: Clock,
    debounce: u64,
) -> Channel {
    channel_on(
        Arc::new(MemoryStore::new()),
        model,
        scripted,
        clock,
        debounce,
    )
    .await
}

async fn channel_on(
    store: Arc<MemoryStore>,
    model: Arc<dyn Model>,
    scripted: Arc<ScriptedModel>,
    clock: Clock,
    debounce: u64,
) -> Channel {
    let store = MemoryWhatsApp::on(store);
    store
        .bind(
            &PhoneNumberId::parse(PHONE).unwrap(),
            &TenantId::parse(TENANT).unwrap(),
        )
        .await
        .unwrap();
    let inbox = Arc::new(RecordingInbox::default());
    let sender = Arc::new(ScriptedSender::default());
    let events = Arc::new(degrau::events::MemoryEvents::default());
    let ask = ask_service(
        &store.core(),
        model,
        Arc::new(ToolDispatch::built_in_only()),
        Arc::new(NoJobs),
        Defaults::default(),
        clock.clone(),
    );
    Channel {
        webhook: WebhookService {
            store: store.clone(),
            tenants: store.core(),
            inbox: inbox.clone(),
            clock: clock.clone(),
            keys: std::sync::Arc::new(degrau_whatsapp::keyed::ChannelKeys::derive(
                b"a test's pseudonym secret",
            )),
            events: events.clone(),
        },
        worker: Worker {
            store: store.clone(),
            ask,
            sender: sender.clone(),
            clock,
            debounce: Duration::from_secs(debounce),
            ask_timeout: Duration::from_secs(25),
            voice: None,
            events: events.clone(),
        },
        store,
        model: scripted,
        inbox,
        sender,
        worked: AtomicUsize::new(0),
        events,
    }
}

impl Channel {
    pub(crate) async fn deliver(&self, messages: &[Value]) -> Accepted {
        self.deliver_to(PHONE, messages).await
    }

    pub(crate) async fn deliver_to(&self, phone: &str, messages: &[Value]) -> Accepted {
        let delivery = parse_delivery(&delivery_to(phone, messages)).unwrap();
        self.webhook.accept(&delivery).await.unwrap()
    }

    /// Runs the worker on every queued message not handled yet, in order.
    pub(crate) async fn work(&self) -> Vec<Result<Outcome, WorkerError>> {
        let mut results = Vec::new();
        loop {
            let queued = self.inbox.queued();
            let next = self.worked.load(Ordering::SeqCst);
            let Some(message) = queued.get(next) else {
                return results;
            };
            results.push(self.worker.handle(message, minute()).await);
            self.worked.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The texts of the user messages stored in the conversation.
    pub(crate) async fn user_texts(&self) -> Vec<String> {
        let page = self
            .store
            .transcript(&customer(), SessionFilter::All, 200, None)
            .await
            .unwrap();
        page.messages
            .iter()
            .filter(|m| m.role == degrau::domain::Role::User)
            .map(|m| m.to_message().text())
            .collect()
    }

    pub(crate) fn model_calls(&self) -> usize {
        self.model.requests().len()
    }
}

pub(crate) fn answers(model: &ScriptedModel, texts: &[&str]) {
    for text in texts {
        model.push(ScriptedModel::text(text, usage()));
    }
}

#[tokio::test]
async fn the_same_event_delivered_twice_gives_one_turn() {
    let (channel, _) = channel().await;
    answers(&channel.model, &["Olá!"]);
    let first = channel.deliver(&[text("wamid.A", "oi")]).await;
    let again = channel.deliver(&[text("wamid.A", "oi")]).await;
    assert_eq!((first.recorded, first.duplicates), (1, 0));
    assert_eq!((again.recorded, again.duplicates), (0, 1));
    assert_eq!(channel.inbox.queued().len(), 1, "enqueued once");
    channel.work().await;
    assert_eq!(channel.model_calls(), 1);
    assert_eq!(channel.sender.sent(), [Sent::Text("Olá!".into())]);
    // A third delivery, after the turn: still nothing new.
    channel.deliver(&[text("wamid.A", "oi")]).await;
    assert!(channel.work().await.is_empty());
    assert_eq!(channel.user_texts().await, ["oi"]);
}

#[tokio::test]
async fn a_redelivery_of_a_message_never_enqueued_is_enqueued_then() {
    let (channel, _) = channel().await;
    channel.inbox.fail_next(1);
    let delivery = parse_delivery(&delivery_to(PHONE, &[text("wamid.A", "oi")])).unwrap();
    assert!(
        channel.webhook.accept(&delivery).await.is_err(),
        "500 to Meta"
    );
    assert!(channel.inbox.queued().is_empty());
    let retried = channel.deliver(&[text("wamid.A", "oi")]).await;
    assert_eq!(retried.duplicates, 1);
    assert_eq!(channel.inbox.queued().len(), 1, "enqueued by the retry");
    let record = channel
        .store
        .inbound(&customer(), &WaMessageId::parse("wamid.A").unwrap(), START)
        .await
        .unwrap()
        .unwrap();
    assert!(record.enqueued);
}

#[tokio::test]
async fn an_unknown_phone_number_id_is_dropped_and_counted() {
    let (channel, _) = channel().await;
    let accepted = channel
        .deliver_to("199999999999999", &[text("wamid.A", "oi")])
        .await;
    assert_eq!((accepted.unknown_number, accepted.recorded), (1, 0));
    assert!(channel.inbox.queued().is_empty());
    assert!(
        channel
            .store
            .unhandled(&customer(), START)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_burst_of_three_gives_one_round() {
    let (channel, _) = channel().await;
    answers(&channel.model, &["Claro, que horas?"]);
    for (id, body) in [
        ("m1", "oi"),
        ("m2", "tudo bem?"),
        ("m3", "queria marcar amanhã"),
    ] {
        channel.deliver(&[text(id, body)]).await;
    }
    let results = channel.work().await;
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| matches!(r, Ok(Outcome::Handled))));
    assert_eq!(channel.model_calls(), 1, "one round for the burst");
    assert_eq!(
        channel.user_texts().await,
        ["oi\ntudo bem?\nqueria marcar amanhã"]
    );
    assert_eq!(
        channel.sender.sent(),
        [Sent::Text("Claro, que horas?".into())]
    );
    let (from, to) = channel.sender.routes()[0].clone();
    assert_eq!((from.as_str(), to.as_str()), (PHONE, CUSTOMER));
    assert_eq!(whatsapp_usage(&channel).await, (3, 1), "three in, one out");
}

/// The tenant's WhatsApp messages in and out, as its usage counts them.
async fn whatsapp_usage(channel: &Channel) -> (u64, u64) {
    let ask = &channel.worker.ask;
    let day = (ask.clock)().div_euclid(degrau::metering::DAY);
    let tenant = TenantId::parse(TENANT).unwrap();
    let days = operate_of(ask, &channel.store.core())
        .usage(&tenant, day - 1, day)
        .await
        .unwrap();
    days.iter()
        .fold((0, 0), |(i, o), d| (i + d.whatsapp_in, o + d.whatsapp_out))
}

#[tokio::test]
async fn a_burst_to_two_numbers_of_one_tenant_makes_a_turn_per_number_each_answered_from_it() {
    const SECOND: &str = "100000000000002";
    let (channel, _) = channel().await;
    channel
        .store
        .bind(
            &PhoneNumberId::parse(SECOND).unwrap(),
            &TenantId::parse(TENANT).unwrap(),
        )
        .await
        .unwrap();
    answers(&channel.model, &["Resposta da loja", "Resposta do salão"]);
    channel.deliver(&[text("m1", "oi loja")]).await;
    channel.deliver_to(SECOND, &[text("m2", "oi salão")]).await;
    channel.deliver(&[text("m3", "tudo bem?")]).await;
    let results = channel.work().await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(channel.model_calls(), 2, "a turn per number");
    assert_eq!(
        channel.user_texts().await,
        ["oi loja\ntudo bem?", "oi salão"],
        "each turn holds its own number's messages"
    );
    let routes: Vec<(String, String)> = channel
        .sender
        .routes()
        .into_iter()
        .map(|(from, to)| (from.as_str().to_owned(), to.as_str().to_owned()))
        .collect();
    assert_eq!(
        routes,
        [
            (PHONE.to_owned(), CUSTOMER.to_owned()),
            (SECOND.to_owned(), CUSTOMER.to_owned())
        ],
        "each reply from the number it answers"
    );
}

#[tokio::test(start_paused = true)]
async fn the_worker_waits_out_the_burst_before_taking_it() {
    // The clock follows tokio's paused time, so the debounce's waits move it.
    let started = tokio::time::Instant::now();
    let clock: Clock = Arc::new(move || START + started.elapsed().as_secs() as i64);
    let model = Arc::new(ScriptedModel::default());
    let channel = Arc::new(channel_with(model.clone(), model, clock, 3).await);
    answers(&channel.model, &["Pois não"]);
    channel.deliver(&[text("m1", "oi")]).await;
    let worker = {
        let channel = channel.clone();
        tokio::spawn(async move {
            let first = channel.inbox.queued()[0].clone();
            channel.worker.handle(&first, minute()).await
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    channel.deliver(&[text("m2", "queria um corte")]).await;
    assert!(matches!(worker.await.unwrap(), Ok(Outcome::Handled)));
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "waited 3 s after the second message"
    );
    assert_eq!(channel.user_texts().await, ["oi\nqueria um corte"]);
}

/// A model that, when first called, has a new message arrive for the contact (as if
/// the customer wrote while the round ran), then answers from the script.
struct ArrivesDuringTheRound {
    scripted: Arc<ScriptedModel>,
    webhook: Mutex<Option<WebhookService>>,
}

#[async_trait]
impl Model for ArrivesDuringTheRound {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        let webhook = self.webhook.lock().unwrap().take();
        if let Some(webhook) = webhook {
            let delivery =
                parse_delivery(&delivery_to(PHONE, &[text("m3", "ah, e barba também")])).unwrap();
            webhook.accept(&delivery).await.unwrap();
        }
        self.scripted.create(request, deadline).await
    }
}

#[tokio::test]
async fn a_message_during_a_running_round_joins_the_next_turn() {
    let (_, clock) = test_clock();
    let scripted = Arc::new(ScriptedModel::default());
    let model = Arc::new(ArrivesDuringTheRound {
        scripted: scripted.clone(),
        webhook: Mutex::new(None),
    });
    let channel = channel_with(model.clone(), scripted, clock, 0).await;
    *model.webhook.lock().unwrap() = Some(channel.webhook.clone());
    answers(&channel.model, &["Corte às 10h?", "Barba também, anotado."]);
    channel.deliver(&[text("m1", "oi")]).await;
    channel.deliver(&[text("m2", "queria um corte")]).await;
    let results = channel.work().await;
    assert_eq!(
        results.len(),
        3,
        "m1 (the turn), m2 (handled), m3 (the next turn)"
    );
    assert_eq!(
        channel.user_texts().await,
        ["oi\nqueria um corte", "ah, e barba também"]
    );
    assert_eq!(channel.model_calls(), 2);
    assert_eq!(
        channel.sender.sent(),
        [
            Sent::Text("Corte às 10h?".into()),
            Sent::Text("Barba também, anotado.".into())
        ]
    );
}

#[tokio::test]
async fn a_send_that_fails_is_sent_once_on_redelivery_without_a_second_model_call() {
    let (channel, _) = channel().await;
    answers(&channel.model, &["Feito."]);
    channel
        .sender
        .push(Err(SendError::Unavailable("HTTP 500".into())));
    channel.deliver(&[text("m1", "marca 10h")]).await;
    let first = channel.inbox.queued()[0].clone();
    assert!(matches!(
        channel.worker.handle(&first, minute()).await,
        Err(WorkerError::Send(_))
    ));
    assert!(channel.sender.sent().is_empty());
    // SQS delivers the message again.
    assert!(matches!(
        channel.worker.handle(&first, minute()).await,
        Ok(Outcome::Handled)
    ));
    assert_eq!(channel.sender.sent(), [Sent::Text("Feito.".into())]);
    assert_eq!(channel.model_calls(), 1);
    // And again: nothing more goes out.
    channel.worker.handle(&first, minute()).await.unwrap();
    assert_eq!(channel.sender.sent().len(), 1);
    assert_eq!(whatsapp_usage(&channel).await, (1, 1), "each counted once");
}

/// The in-memory store, whose `settle` fails while `fail` is set: a worker that
/// dies after the ask's commit and before the reply is recorded.
struct SettleFails {
    inner: Arc<MemoryWhatsApp>,
    fail: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl WhatsAppStore for SettleFails {
    async fn binding(&self, phone: &PhoneNumberId) -> Result<Option<TenantId>, StoreError> {
        self.inner.binding(phone).await
    }
    async fn bind(&self, phone: &PhoneNumberId, tenant: &TenantId) -> Result<(), StoreError> {
        self.inner.bind(phone, tenant).await
    }
    async fn record_inbound(
        &self,
        key: &ContactKey,
        message: &NewInbound,
    ) -> Result<Recorded, StoreError> {
        self.inner.record_inbound(key, message).await
    }
    async fn find_inbound(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<(ContactKey, WaMessageId)>, StoreError> {
        self.inner.find_inbound(tenant, incarnation).await
    }
    async fn mark_enqueued(&self, key: &ContactKey, id: &WaMessageId) -> Result<bool, StoreError> {
        self.inner.mark_enqueued(key, id).await
    }
    async fn inbound(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        now: i64,
    ) -> Result<Option<InboundRecord>, StoreError> {
        self.inner.inbound(key, id, now).await
    }
    async fn unhandled(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<InboundRecord>, StoreError> {
        self.inner.unhandled(key, now).await
    }
    async fn take(&self, key: &ContactKey, turn: &TurnRecord) -> Result<bool, StoreError> {
        self.inner.take(key, turn).await
    }
    async fn turn(
        &self,
        key: &ContactKey,
        id: &TurnId,
        now: i64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.inner.turn(key, id, now).await
    }
    async fn settle(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        outgoing: &Outgoing,
    ) -> Result<bool, StoreError> {
        if self.fail.swap(false, Ordering::SeqCst) {
            return Err(StoreError::Unavailable("throttled".into()));
        }
        self.inner.settle(key, turn, outgoing).await
    }
    async fn mark_sent(
        &self,
        key: &ContactKey,
        turn: &TurnId,
        sent: usize,
        done: bool,
    ) -> Result<bool, StoreError> {
        self.inner.mark_sent(key, turn, sent, done).await
    }
    async fn record_delivery(
        &self,
        key: &ContactKey,
        record: &degrau_whatsapp::store::DeliveryRecord,
    ) -> Result<(), StoreError> {
        self.inner.record_delivery(key, record).await
    }
    async fn update_delivery(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        status: &str,
        error_code: Option<i64>,
        now: i64,
    ) -> Result<bool, StoreError> {
        self.inner
            .update_delivery(key, id, status, error_code, now)
            .await
    }
    async fn deliveries(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<degrau_whatsapp::store::DeliveryRecord>, StoreError> {
        self.inner.deliveries(key, now).await
    }
    async fn handoff(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Option<degrau_whatsapp::store::Handoff>, StoreError> {
        self.inner.handoff(key, now).await
    }
    async fn set_handoff(
        &self,
        key: &ContactKey,
        handoff: Option<&degrau_whatsapp::store::Handoff>,
    ) -> Result<(), StoreError> {
        self.inner.set_handoff(key, handoff).await
    }
}

#[tokio::test]
async fn a_turn_resumed_after_its_commit_replays_the_answer_and_sends_once() {
    let (channel, _) = channel().await;
    let failing = Arc::new(SettleFails {
        inner: channel.store.clone(),
        fail: std::sync::atomic::AtomicBool::new(true),
    });
    let worker = Worker {
        store: failing,
        ..channel.worker.clone()
    };
    answers(&channel.model, &["Às 10h, então."]);
    channel.deliver(&[text("m1", "pode ser 10h")]).await;
    let queued = channel.inbox.queued()[0].clone();
    assert!(matches!(
        worker.handle(&queued, minute()).await,
        Err(WorkerError::Store(_))
    ));
    assert_eq!(channel.model_calls(), 1, "the round is stored");
    assert!(channel.sender.sent().is_empty());
    assert!(matches!(
        worker.handle(&queued, minute()).await,
        Ok(Outcome::Handled)
    ));
    assert_eq!(channel.model_calls(), 1, "replayed, no second model call");
    assert_eq!(channel.sender.sent(), [Sent::Text("Às 10h, então.".into())]);
    assert_eq!(channel.user_texts().await, ["pode ser 10h"], "stored once");
}

async fn with_template(channel: &Channel) {
    let settings: ChannelSection = serde_json::from_value(
        json!({"template": {"name": "retomar_conversa", "language": "pt_BR"}}),
    )
    .unwrap();
    channel
        .store
        .put_tenant_config(
            &TenantId::parse(TENANT).unwrap(),
            &TenantConfig {
                whatsapp: Some(settings),
                ..TenantConfig::default()
            },
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn outside_the_24_hour_window_the_template_is_sent_and_the_reply_recorded() {
    let (channel, now) = channel().await;
    with_template(&channel).await;
    answers(&channel.model, &["Desculpe a demora!"]);
    channel.deliver(&[text("m1", "oi")]).await;
    // The worker gets to it a day and a minute later (a long outage).
    now.fetch_add(24 * 3600 + 60, Ordering::SeqCst);
    channel.work().await;
    assert_eq!(
        channel.sender.sent(),
        [Sent::Template("retomar_conversa".into())]
    );
    let page = channel
        .store
        .transcript(&customer(), SessionFilter::All, 10, None)
        .await
        .unwrap();
    assert_eq!(
        page.messages.last().unwrap().to_message().text(),
        "Desculpe a demora!",
        "the reply is in the conversation"
    );
}

#[tokio::test]
async fn outside_the_window_without_a_template_nothing_is_sent() {
    let (channel, now) = channel().await;
    answers(&channel.model, &["Olá"]);
    channel.deliver(&[text("m1", "oi")]).await;
    now.fetch_add(24 * 3600, Ordering::SeqCst);
    let results = channel.work().await;
    assert!(matches!(results[0], Ok(Outcome::Handled)));
    assert!(channel.sender.sent().is_empty());
    assert_eq!(channel.model_calls(), 1);
}

#[tokio::test]
async fn meta_saying_the_window_closed_sends_the_template_instead() {
    let (channel, _) = channel().await;
    with_template(&channel).await;
    answers(&channel.model, &["Olá"]);
    channel.sender.push(Err(SendError::OutsideWindow));
    channel.deliver(&[text("m1", "oi")]).await;
    channel.work().await;
    assert_eq!(
        channel.sender.sent(),
        [Sent::Template("retomar_conversa".into())]
    );
}

#[tokio::test]
async fn a_turn_of_bare_media_gets_the_tenants_short_reply_without_a_model_call() {
    let (channel, _) = channel().await;
    let settings: ChannelSection =
        serde_json::from_value(json!({"media_reply": "Ainda não ouço áudios; pode escrever?"}))
            .unwrap();
    channel
        .store
        .put_tenant_config(
            &TenantId::parse(TENANT).unwrap(),
            &TenantConfig {
                whatsapp: Some(settings),
                ..TenantConfig::default()
            },
        )
        .await
        .unwrap();
    channel.deliver(&[audio("m1")]).await;
    channel.work().await;
    assert_eq!(channel.model_calls(), 0);
    assert_eq!(
        channel.sender.sent(),
        [Sent::Text("Ainda não ouço áudios; pode escrever?".into())]
    );
    // Text with the audio goes to the model, with the note.
    answers(&channel.model, &["Entendi."]);
    channel
        .deliver(&[audio("m2"), text("m3", "é sobre o horário")])
        .await;
    channel.work().await;
    assert_eq!(channel.user_texts().await, ["[audio]\né sobre o horário"]);
}

#[tokio::test]
async fn a_whatsapp_section_that_does_not_read_stops_the_turn_before_the_model() {
    let (channel, _) = channel().await;
    let tenant = TenantId::parse(TENANT).unwrap();
    // Stored before the check (or by hand): the core keeps the section as it is.
    channel
        .store
        .put_config_text(&tenant, r#"{"whatsapp": {"handoff_hours": 0}}"#);
    answers(&channel.model, &["never sent"]);
    channel.deliver(&[text("m1", "oi")]).await;
    let results = channel.work().await;
    let Err(WorkerError::Store(StoreError::InvalidConfig(reason))) = &results[0] else {
        panic!("{results:?}")
    };
    assert!(
        reason.starts_with("whatsapp.handoff_hours: whatsapp.handoff_hours must be 1-168"),
        "{reason}"
    );
    assert_eq!(channel.model_calls(), 0);
    assert!(channel.sender.sent().is_empty());
}

#[tokio::test]
async fn without_a_short_reply_a_media_turn_goes_to_the_model_as_its_note() {
    let (channel, _) = channel().await;
    answers(
        &channel.model,
        &["Não consigo ouvir áudios, pode escrever?"],
    );
    channel.deliver(&[audio("m1")]).await;
    channel.work().await;
    assert_eq!(channel.user_texts().await, ["[audio]"]);
    assert_eq!(channel.sender.sent().len(), 1);
}

#[tokio::test]
async fn a_turn_the_model_refuses_sends_nothing_and_does_not_hold_the_next_one_back() {
    let (channel, _) = channel().await;
    channel.model.push(Ok(degrau::model::scripted::response(
        Vec::new(),
        degrau::model::StopReason::Refusal,
        usage(),
    )));
    answers(&channel.model, &["Posso ajudar com horários."]);
    channel.deliver(&[text("m1", "primeira")]).await;
    channel.work().await;
    assert!(channel.sender.sent().is_empty());
    channel.deliver(&[text("m2", "segunda")]).await;
    channel.work().await;
    assert_eq!(
        channel.sender.sent(),
        [Sent::Text("Posso ajudar com horários.".into())]
    );
}

#[tokio::test]
async fn a_long_burst_makes_turns_within_the_text_limit() {
    let (channel, _) = channel().await;
    answers(&channel.model, &["um", "dois"]);
    let long = "a".repeat(3000);
    for id in ["m1", "m2", "m3"] {
        channel.deliver(&[text(id, &long)]).await;
    }
    channel.work().await;
    let texts = channel.user_texts().await;
    assert_eq!(texts.len(), 2, "8,000 characters hold two of them");
    assert_eq!(texts[0], format!("{long}\n{long}"));
    assert!(
        texts
            .iter()
            .all(|t| t.chars().count() <= degrau::converse::MAX_TEXT_CHARS)
    );
}

#[tokio::test]
async fn erasing_the_contact_removes_the_whatsapp_records_and_its_queued_message_does_nothing() {
    let (channel, now) = channel().await;
    answers(&channel.model, &["Olá"]);
    channel.deliver(&[text("m1", "oi")]).await;
    channel.work().await;
    channel.deliver(&[text("m2", "de novo")]).await;
    let erased = channel
        .store
        .erase_contact(&customer(), START - 1)
        .await
        .unwrap();
    assert!(erased >= 5, "head, two messages, records, turn: {erased}");
    let id = WaMessageId::parse("m1").unwrap();
    assert!(
        channel
            .store
            .inbound(&customer(), &id, START)
            .await
            .unwrap()
            .is_none()
    );
    let queued: QueuedMessage = channel.inbox.queued()[1].clone();
    // Young, it may be a record the index has not caught up with: it comes back.
    assert!(matches!(
        channel.worker.handle(&queued, minute()).await,
        Err(WorkerError::NotIndexed)
    ));
    // Delivered again past the grace: nothing to do.
    now.fetch_add(
        degrau_whatsapp::worker::INDEX_GRACE_SECONDS,
        Ordering::SeqCst,
    );
    assert!(matches!(
        channel.worker.handle(&queued, minute()).await,
        Ok(Outcome::NoRecord)
    ));
    assert_eq!(channel.model_calls(), 1);
    assert!(
        channel
            .store
            .unhandled(&customer(), START)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_delivery_replayed_after_the_contact_was_erased_stores_and_sends_nothing() {
    let (channel, _) = channel().await;
    answers(&channel.model, &["Olá"]);
    let first = channel.deliver(&[text("m1", "oi")]).await;
    assert_eq!(first.recorded, 1);
    channel.work().await;
    channel
        .store
        .erase_contact(&customer(), START - 1)
        .await
        .unwrap();
    let queued = channel.inbox.queued().len();
    // Meta delivers the same signed message again (its own retry, or a replay).
    let replayed = channel.deliver(&[text("m1", "oi")]).await;
    assert_eq!((replayed.recorded, replayed.erased), (0, 1));
    assert_eq!(channel.inbox.queued().len(), queued, "nothing enqueued");
    assert_eq!(channel.store.item_count(&customer()), 0, "nothing stored");
    assert_eq!(channel.model_calls(), 1, "no second answer");
    // A new message of the same customer is a new conversation, answered.
    answers(&channel.model, &["Olá de novo"]);
    let new = channel.deliver(&[text("m2", "oi de novo")]).await;
    assert_eq!(new.recorded, 1);
    channel.work().await;
    assert_eq!(channel.model_calls(), 2);
}

#[tokio::test]
async fn records_move_forward_only() {
    let (channel, _) = channel().await;
    channel.deliver(&[text("m1", "oi")]).await;
    let record = channel.store.unhandled(&customer(), START).await.unwrap()[0].clone();
    assert_eq!(record.state, RecordState::Pending);
    let turn = TurnRecord {
        id: TurnId::of(std::slice::from_ref(&record.message.id)),
        phone_number_id: record.message.phone_number_id.clone(),
        messages: vec![record.message.id.clone()],
        text: "oi".into(),
        bare_notes: false,
        by_person: false,
        voice: None,
        last_inbound_at: START,
        status: degrau_whatsapp::store::TurnStatus::Taken,
        expires_at: START + 3600,
    };
    assert!(channel.store.take(&customer(), &turn).await.unwrap());
    assert!(
        !channel.store.take(&customer(), &turn).await.unwrap(),
        "taken once"
    );
    let nothing = Outgoing::Nothing {
        reason: "test".into(),
    };
    assert!(
        channel
            .store
            .settle(&customer(), &turn, &nothing)
            .await
            .unwrap()
    );
    assert!(
        !channel
            .store
            .settle(&customer(), &turn, &nothing)
            .await
            .unwrap(),
        "settled once"
    );
    let too_many = TurnRecord {
        messages: (0..21)
            .map(|i| WaMessageId::parse(&format!("x{i}")).unwrap())
            .collect(),
        ..turn
    };
    assert!(channel.store.take(&customer(), &too_many).await.is_err());
}

#[tokio::test]
async fn no_queued_message_names_the_contact_or_its_message_id() {
    let (channel, _) = channel().await;
    answers(&channel.model, &["Olá"]);
    channel
        .deliver(&[text("wamid.HBgLMTU1NTAwMDAwMDE=", "oi")])
        .await;
    let queued = channel.inbox.queued();
    assert_eq!(queued.len(), 1);
    let body = serde_json::to_string(&queued[0]).unwrap();
    for named in [CUSTOMER, "wamid", "HBgL"] {
        assert!(!body.contains(named), "{body} names {named}");
    }
    assert_eq!(
        serde_json::from_str::<Value>(&body)
            .unwrap()
            .as_object()
            .unwrap()
            .len(),
        3,
        "the tenant, the record's incarnation and when: {body}"
    );
    // It still finds its record, and makes its turn.
    channel.work().await;
    assert_eq!(channel.sender.sent().len(), 1);
}

/// The barber's config with a transcript retention of `days`.
async fn retention(channel: &Channel, days: u32) {
    let config = TenantConfig {
        transcript_retention_days: Some(days),
        ..TenantConfig::default()
    };
    channel
        .store
        .put_tenant_config(&customer().tenant, &config)
        .await
        .unwrap();
}

/// The customer's inbound record `id`, as read at [`START`].
async fn record_of(channel: &Channel, id: &str) -> InboundRecord {
    let id = WaMessageId::parse(id).unwrap();
    channel
        .store
        .inbound(&customer(), &id, START)
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn records_and_turns_live_the_tenants_retention_when_it_is_shorter_than_eight_days() {
    let (channel, _) = channel().await;
    answers(&channel.model, &["Olá", "Oi de novo"]);
    channel.deliver(&[text("m1", "oi")]).await;
    assert_eq!(
        record_of(&channel, "m1").await.message.expires_at,
        START + degrau_whatsapp::RECORD_TTL_SECONDS
    );

    retention(&channel, 1).await;
    channel.deliver(&[text("m2", "de novo")]).await;
    let id = WaMessageId::parse("m2").unwrap();
    assert_eq!(
        record_of(&channel, "m2").await.message.expires_at,
        START + 86_400,
        "one day, the tenant's"
    );
    channel.work().await;
    let RecordState::Handled(turn) = record_of(&channel, "m2").await.state else {
        panic!("handled");
    };
    let turn = channel
        .store
        .turn(&customer(), &turn, START)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(turn.expires_at, START + 86_400);
    assert!(
        channel
            .store
            .inbound(&customer(), &id, START + 86_400)
            .await
            .unwrap()
            .is_none(),
        "gone after a day"
    );
}

#[tokio::test]
async fn a_message_older_than_its_records_live_is_dropped_and_makes_no_turn() {
    let (channel, _) = channel().await;
    let sent_at = |seconds_ago: i64| {
        move |id: &str| {
            json!({"from": CUSTOMER, "id": id, "timestamp": (START - seconds_ago).to_string(),
                   "type": "text", "text": {"body": "oi"}})
        }
    };
    // Eight days: older than any record lives (a replay after its record went).
    let accepted = channel
        .deliver(&[sent_at(8 * 86_400)("old"), sent_at(60)("fresh")])
        .await;
    assert_eq!((accepted.recorded, accepted.too_old), (1, 1));
    // A tenant keeping a day: a message two days old is too.
    retention(&channel, 1).await;
    let accepted = channel.deliver(&[sent_at(2 * 86_400)("old2")]).await;
    assert_eq!((accepted.recorded, accepted.too_old), (0, 1));
    assert_eq!(channel.inbox.queued().len(), 1, "only the fresh one");
    for old in ["old", "old2"] {
        let id = WaMessageId::parse(old).unwrap();
        assert!(
            channel
                .store
                .inbound(&customer(), &id, START)
                .await
                .unwrap()
                .is_none()
        );
    }
}

fn text_from(from: &str, id: &str, body: &str) -> Value {
    json!({"from": from, "id": id, "timestamp": "1800000000", "type": "text", "text": {"body": body}})
}

#[tokio::test]
async fn a_flood_of_strangers_waits_on_the_numbers_limits_while_the_api_and_known_customers_are_answered()
 {
    let (mut channel, _) = channel().await;
    channel.worker.ask.defaults = Defaults {
        quota: degrau::quota::Limits {
            rounds_per_hour: 2,
            summary_calls_per_hour: 10,
        },
        platform: degrau::platform::Plan {
            whatsapp: degrau::platform::NumberLimits {
                turns_per_hour: Some(5),
                sender_turns_per_minute: Some(3),
                new_senders_per_hour: Some(1),
            },
            ..degrau::platform::Plan::default()
        },
        ..Defaults::default()
    };
    // A customer of the business, known from an earlier conversation (through the
    // API: one of the tenant's two API rounds of the hour).
    answers(&channel.model, &["Olá"]);
    let api = &channel.worker.ask;
    api.ask(&customer(), "oi", None, minute()).await.unwrap();

    // Six strangers write to the public number; one new sender an hour is
    // answered, the others wait in the queue (held, not failed into the DLQ).
    answers(&channel.model, &["Bem-vindo"]);
    for n in 0..6 {
        let from = format!("1555000010{n}");
        channel
            .deliver(&[text_from(&from, &format!("s{n}"), "promo!!!")])
            .await;
    }
    let results = channel.work().await;
    let held = results
        .iter()
        .filter(|r| matches!(r, Err(WorkerError::Held(t)) if t.what == degrau::fairshare::Limited::NewSenders))
        .count();
    assert_eq!(held, 5, "{results:?}");
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().err().is_none_or(|e| e.held_for().is_some()))
    );

    // The known customer writes on WhatsApp: answered (no new sender).
    answers(&channel.model, &["Claro!"]);
    channel.deliver(&[text("c1", "quero marcar")]).await;
    let results = channel.work().await;
    assert!(matches!(results[..], [Ok(Outcome::Handled)]), "{results:?}");

    // The business's own API still answers: the WhatsApp turns spent the number's
    // budget, not the tenant's API rounds (its second of the hour is left).
    answers(&channel.model, &["Pronto"]);
    let other = ContactKey {
        contact: ContactId::parse("crm-7").unwrap(),
        ..customer()
    };
    assert!(api.ask(&other, "status?", None, minute()).await.is_ok());
    // And the business sees how many messages were held.
    let today = START.div_euclid(degrau::metering::DAY);
    let usage = operate_of(api, &channel.store.core())
        .usage(&customer().tenant, today, today)
        .await
        .unwrap();
    assert_eq!(usage[0].whatsapp_held, 5);
}
