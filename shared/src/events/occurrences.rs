//! The events the compactor publishes, and [`of`], what every producer builds its
//! [`Occurrence`] with: the `data` of each [`EventType`] (`docs/events.md`). The
//! WhatsApp functions' own are beside them (`crate::whatsapp::events`).

use serde_json::json;

use super::{EventType, Occurrence};
use crate::domain::Fact;
use crate::store::ContactKey;

/// `kind` of the contact `key` at `at` (unix seconds), with its `data`.
pub fn of(key: &ContactKey, kind: EventType, at: i64, data: serde_json::Value) -> Occurrence {
    Occurrence {
        tenant: key.tenant.clone(),
        contact: key.contact.clone(),
        kind,
        at,
        data,
    }
}

/// `fact.set` of `fact` as stored: `by` is `operator` when an operator set it,
/// `model` when an extraction did (as `GET .../facts` shows its `set_by.kind`).
pub fn fact_set(key: &ContactKey, fact: &Fact) -> Occurrence {
    let by = match fact.operator {
        Some(_) => "operator",
        None => "model",
    };
    let data = json!({"key": fact.key.as_str(), "value": fact.value, "by": by});
    of(key, EventType::FactSet, fact.updated_at, data)
}

/// The facts of `written` whose value is new: a key `existing` did not hold, or
/// held with another value. A write that only moves a fact's source or time
/// changes nothing the receiver knows.
pub fn changed_facts<'a>(
    existing: &[Fact],
    written: impl IntoIterator<Item = &'a Fact>,
) -> Vec<&'a Fact> {
    written
        .into_iter()
        .filter(|fact| {
            !existing
                .iter()
                .any(|old| old.key == fact.key && old.value == fact.value)
        })
        .collect()
}

/// `session.closed`: `session` of the contact closed and was indexed for recall,
/// with its search summary (`null` when none was written for it).
pub fn session_closed(
    key: &ContactKey,
    session: u32,
    summary: Option<&str>,
    at: i64,
) -> Occurrence {
    let data = json!({"session": session, "summary": summary});
    of(key, EventType::SessionClosed, at, data)
}
