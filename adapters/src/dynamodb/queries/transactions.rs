//! The transaction items of a compaction step, a fact batch and a refresh, the
//! sweep's update of a head, and the builders a round's transaction shares with them
//! (a round's own items are in [`super::round`]).

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem, Update,
};
use degrau::domain::{FactKey, Incarnation};
use degrau::store::{
    AppliedStep, ContactKey, FactExpectation, FactRemoval, FactWrite, PendingChange, StoreError,
    SweepSettle,
};

use super::update::UpdateParts;
use crate::dynamodb::items::{FactItem, IndexItem, Item, TextItem, blocks_json, n, s, to_item};
use crate::dynamodb::keys::{HEAD_SK, contact_pk, fact_sk, message_sk};

/// `TransactWriteItems` takes at most this many actions.
pub(super) const MAX_TRANSACTION_ACTIONS: usize = 100;

/// A put in a transaction, with an optional condition; `what` names it in errors.
pub(super) fn put(
    table: &str,
    item: Item,
    condition: Option<&str>,
    what: &str,
) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .set_condition_expression(condition.map(str::to_owned))
        .build()
        .map_err(|err| StoreError::Other(format!("{what} put: {err}")))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The check, in a transaction, that the head of `pk` still has `incarnation`: the
/// same life of the contact (an erased contact who wrote again has another).
pub(super) fn head_check(
    table: &str,
    pk: &str,
    incarnation: &Incarnation,
) -> Result<TransactWriteItem, StoreError> {
    let check = ConditionCheck::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(HEAD_SK))
        .condition_expression("incarnation = :incarnation")
        .expression_attribute_values(":incarnation", s(incarnation.as_str()))
        .build()
        .map_err(|err| StoreError::Other(format!("head check: {err}")))?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// An update of an existing message (the condition keeps it from creating a stray
/// item for an erased contact or a wrong sequence number, or recreating a message
/// TTL deleted: it fails the whole transaction instead).
pub(super) fn message_update(
    table: &str,
    pk: &str,
    session: u32,
    seq: u64,
    set: &str,
    value: (&str, AttributeValue),
    what: &str,
) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(message_sk(session, seq)))
        .update_expression(set)
        .condition_expression("attribute_exists(sk)")
        .expression_attribute_values(value.0, value.1)
        .build()
        .map_err(|err| StoreError::Other(format!("{what} update: {err}")))?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// A compaction step's transaction: the head's summary, `summarized_until` and step
/// count under the condition that the head still has the step's incarnation,
/// session and `summarized_until = :seen`; then the pruned copies.
pub(in crate::dynamodb) fn step_items(
    table: &str,
    key: &ContactKey,
    step: &AppliedStep,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let pk = contact_pk(key);
    let mut head = UpdateParts::default();
    head.set("#summary = :summary")
        .set("#summarized_until = :new")
        .set("#steps = if_not_exists(#steps, :zero) + :one")
        .condition("incarnation = :incarnation")
        .condition("#session = :session")
        .condition("#summarized_until = :seen")
        .name("#summary", "summary")
        .name("#summarized_until", "summarized_until")
        .name("#steps", "steps")
        .name("#session", "session")
        .value(":summary", s(&step.summary))
        .value(":new", n(step.new_summarized_until))
        .value(":zero", n(0))
        .value(":one", n(1))
        .value(":session", n(step.session))
        .value(":seen", n(step.seen_summarized_until))
        .value(":incarnation", s(step.incarnation.as_str()));
    if let Some(last_seq) = step.last_seq {
        head.condition("last_seq = :last_seq")
            .value(":last_seq", n(last_seq));
    }
    let mut items = Vec::with_capacity(1 + step.prune.len());
    items.push(
        TransactWriteItem::builder()
            .update(head.update(table, &pk, HEAD_SK, "step head")?)
            .build(),
    );
    for decision in &step.prune {
        let pruned = s(blocks_json(&decision.pruned)?);
        items.push(message_update(
            table,
            &pk,
            step.session,
            decision.seq,
            "SET pruned = :pruned",
            (":pruned", pruned),
            "prune",
        )?);
    }
    Ok(items)
}

/// A closed session's recall index, and its text when given, written while the
/// head still has `incarnation` (replacing an earlier write of the same session).
pub(in crate::dynamodb) fn index_items(
    table: &str,
    key: &ContactKey,
    incarnation: &Incarnation,
    index: IndexItem,
    text: Option<TextItem>,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let pk = contact_pk(key);
    let mut items = vec![
        head_check(table, &pk, incarnation)?,
        put(table, to_item(&index)?, None, "index")?,
    ];
    if let Some(text) = text {
        items.push(put(table, to_item(&text)?, None, "text")?);
    }
    Ok(items)
}

/// What a fact batch is checked against besides each fact's own expectation: the
/// head's incarnation (the rule), or, for a contact whose head is gone while its
/// facts live, one live fact as read (the operator's routes).
pub(in crate::dynamodb) enum FactGuard<'a> {
    /// The head still has this incarnation.
    Head(&'a Incarnation),
    /// This fact is still as read (its `updated_at`); none when the batch's own
    /// expectations guard it whole.
    Fact(Option<(&'a FactKey, i64)>),
}

/// A fact batch's transactions: the puts and deletes, each part checking the guard
/// first. A tenant's fact keys are a short closed list, so one transaction is the
/// rule; a longer batch is split, each part re-checking the guard. Without changes,
/// the check alone still answers whether the head exists.
pub(in crate::dynamodb) fn fact_transactions(
    table: &str,
    key: &ContactKey,
    guard: FactGuard<'_>,
    writes: &[FactWrite],
    removals: &[FactRemoval],
) -> Result<Vec<Vec<TransactWriteItem>>, StoreError> {
    let pk = contact_pk(key);
    let mut actions = Vec::with_capacity(writes.len() + removals.len());
    for write in writes {
        actions.push(fact_put(table, &pk, write)?);
    }
    for removal in removals {
        actions.push(fact_delete(table, &pk, removal)?);
    }
    let check = match guard {
        FactGuard::Head(incarnation) => head_check(table, &pk, incarnation)?,
        FactGuard::Fact(None) => return Ok(vec![actions]),
        FactGuard::Fact(Some((fact, at))) => {
            let check = ConditionCheck::builder()
                .table_name(table)
                .key("pk", s(&pk))
                .key("sk", s(fact_sk(fact)))
                .condition_expression("updated_at = :anchor")
                .expression_attribute_values(":anchor", n(at))
                .build()
                .map_err(|err| StoreError::Other(format!("fact check: {err}")))?;
            TransactWriteItem::builder().condition_check(check).build()
        }
    };
    if actions.is_empty() {
        return Ok(vec![vec![check]]);
    }
    Ok(actions
        .chunks(MAX_TRANSACTION_ACTIONS - 1)
        .map(|chunk| {
            let mut items = Vec::with_capacity(chunk.len() + 1);
            items.push(check.clone());
            items.extend_from_slice(chunk);
            items
        })
        .collect())
}

/// A fact's delete, under its expectation: the fact read (its `updated_at`), or
/// anything.
fn fact_delete(
    table: &str,
    pk: &str,
    removal: &FactRemoval,
) -> Result<TransactWriteItem, StoreError> {
    let delete = Delete::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(fact_sk(&removal.key)));
    let delete = match removal.expect {
        FactExpectation::UpdatedAt(at) => delete
            .condition_expression("updated_at = :removed")
            .expression_attribute_values(":removed", n(at)),
        FactExpectation::Anything | FactExpectation::Absent => delete,
    };
    let delete = delete
        .build()
        .map_err(|err| StoreError::Other(format!("fact delete: {err}")))?;
    Ok(TransactWriteItem::builder().delete(delete).build())
}

/// A fact's put, under its expectation: none, no live fact under the key (one past
/// its TTL counts as gone), or the fact read (its `updated_at`).
fn fact_put(table: &str, pk: &str, write: &FactWrite) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(to_item(&FactItem::new(pk, write))?));
    let put = match write.expect {
        FactExpectation::Anything => put,
        FactExpectation::Absent => put
            .condition_expression("attribute_not_exists(sk) OR expires_at <= :now")
            .expression_attribute_values(":now", n(write.fact.updated_at)),
        FactExpectation::UpdatedAt(at) => put
            .condition_expression("updated_at = :replaced")
            .expression_attribute_values(":replaced", n(at)),
    };
    let put = put
        .build()
        .map_err(|err| StoreError::Other(format!("fact put: {err}")))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// A refresh's transaction: the head's incarnation checked, then each message's
/// `expires_at` set.
pub(in crate::dynamodb) fn refresh_items(
    table: &str,
    key: &ContactKey,
    incarnation: &Incarnation,
    session: u32,
    seqs: &[u64],
    expires_at: i64,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let pk = contact_pk(key);
    let mut items = Vec::with_capacity(seqs.len() + 1);
    items.push(head_check(table, &pk, incarnation)?);
    for seq in seqs {
        items.push(message_update(
            table,
            &pk,
            session,
            *seq,
            "SET expires_at = :expires_at",
            (":expires_at", n(expires_at)),
            "refresh",
        )?);
    }
    Ok(items)
}

/// What the sweep writes on a head, under the condition that it is as the sweep
/// read it (see [`SweepSettle`]).
pub(in crate::dynamodb) fn settle_parts(settle: &SweepSettle) -> UpdateParts {
    let mut parts = UpdateParts::default();
    parts
        .condition("incarnation = :incarnation")
        .condition("last_activity = :last_activity")
        .condition("sweep_sk = :due")
        .value(":incarnation", s(settle.incarnation.as_str()))
        .value(":last_activity", n(settle.last_activity))
        .value(":due", n(settle.due));
    match settle.pending_since {
        Some(since) => parts
            .condition("facts_pending_since = :pending_since")
            .value(":pending_since", n(since)),
        None => parts.condition("attribute_not_exists(facts_pending)"),
    };
    if let Some(session) = settle.facts_requested {
        parts
            .set("facts_requested = :facts_requested")
            .value(":facts_requested", n(session));
    }
    match settle.pending {
        PendingChange::Keep => {}
        PendingChange::Set(pending) => {
            parts.pending(pending);
        }
        PendingChange::Clear => {
            parts.remove_pending();
        }
    }
    match settle.next_due {
        Some(due) => parts.set("sweep_sk = :next_due").value(":next_due", n(due)),
        None => parts.remove("sweep_pk").remove("sweep_sk"),
    };
    parts
}
