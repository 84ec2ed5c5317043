//! The events the API's routes publish after their change is committed
//! (`degrau::events`): a fact set or deleted by an operator, an erase, a handoff
//! started or ended. Publishing never changes the answer: a tenant without an
//! events webhook publishes nothing, and an event that cannot be queued is
//! logged and counted by the core.

use degrau::domain::FactKey;
use degrau::events::{EventType, Occurrence, publish};
use degrau::store::{ContactKey, FactRecord};
use degrau_whatsapp::store::Handoff;
use serde_json::{Value, json};

use super::App;

async fn out(app: &App, key: &ContactKey, kind: EventType, at: i64, data: Value) {
    let occurrence = Occurrence {
        tenant: key.tenant.clone(),
        contact: key.contact.clone(),
        kind,
        at,
        data,
    };
    publish(
        app.converse.tenants.as_ref(),
        app.events.as_ref(),
        occurrence,
    )
    .await;
}

/// `fact.set`: the value as stored, set by an operator.
pub(super) async fn fact_set(app: &App, key: &ContactKey, record: &FactRecord) {
    let fact = &record.fact;
    let data = json!({"key": fact.key.as_str(), "value": fact.value, "by": "operator"});
    out(app, key, EventType::FactSet, fact.updated_at, data).await;
}

/// `fact.deleted`: the fact and its history are gone.
pub(super) async fn fact_deleted(app: &App, key: &ContactKey, fact: &FactKey) {
    let now = (app.converse.clock)();
    let data = json!({"key": fact.as_str()});
    out(app, key, EventType::FactDeleted, now, data).await;
}

/// `contact.erased`: every item about the contact went (the pseudonym's last use).
pub(super) async fn contact_erased(app: &App, key: &ContactKey) {
    let now = (app.converse.clock)();
    out(app, key, EventType::ContactErased, now, json!({})).await;
}

/// `handoff.started`: a person has the conversation until `until`.
pub(super) async fn handoff_started(app: &App, key: &ContactKey, handoff: &Handoff) {
    let data = json!({"by": handoff.by.as_str(), "since": handoff.since, "until": handoff.until});
    out(app, key, EventType::HandoffStarted, handoff.since, data).await;
}

/// `handoff.ended`: the agent has the conversation again.
pub(super) async fn handoff_ended(app: &App, key: &ContactKey) {
    let now = (app.converse.clock)();
    out(app, key, EventType::HandoffEnded, now, json!({})).await;
}
