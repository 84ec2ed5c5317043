//! The transaction items of a round, a compaction step, a fact batch and a refresh,
//! and the sweep's update of a head.

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem, Update,
};
use degrau::domain::{FactKey, Incarnation};
use degrau::store::{
    AppliedStep, ContactKey, FactExpectation, FactRemoval, FactWrite, PendingChange, RoundCommit,
    StoreError, SweepSettle,
};

use super::update::UpdateParts;
use crate::dynamodb::items::{
    ArchiveItem, FactItem, IndexItem, Item, MessageItem, RequestItem, TextItem, blocks_json, n, s,
    to_item,
};
use crate::dynamodb::keys::{
    HEAD_SK, contact_pk, erased_sk, fact_sk, message_sk, sweep_pk, tenant_pk,
};

/// `TransactWriteItems` takes at most this many actions.
const MAX_TRANSACTION_ACTIONS: usize = 100;

/// A put in a transaction, with an optional condition; `what` names it in errors.
fn put(
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

/// A put in a transaction that creates its item, or replaces one past its TTL
/// (`expires_at <= now`), or one written before `stale` (see
/// [`RoundCommit::stale_before`]): never one still live.
fn put_unless_live(
    table: &str,
    item: Item,
    now: i64,
    stale: Option<i64>,
    what: &str,
) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .expression_attribute_values(":now", n(now));
    let put = match stale {
        Some(stale) => put
            .condition_expression(
                "attribute_not_exists(sk) OR expires_at <= :now OR created_at < :stale",
            )
            .expression_attribute_values(":stale", n(stale)),
        None => put.condition_expression("attribute_not_exists(sk) OR expires_at <= :now"),
    };
    let put = put
        .build()
        .map_err(|err| StoreError::Other(format!("{what} put: {err}")))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The check, in a transaction, that the head of `pk` still has `incarnation`: the
/// same life of the contact (an erased contact who wrote again has another).
fn head_check(
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

/// The check, in a new head's transaction, that its round began after the
/// tenant's last erase: a round's transaction still in flight when an erase ran
/// (its caller told it failed, or gone) must not land after it and bring the
/// erased contact back. The item names no one; it is absent until the tenant's
/// first erase.
fn erase_check(table: &str, commit: &RoundCommit) -> Result<TransactWriteItem, StoreError> {
    let born = commit.head.born_at.unwrap_or(commit.head.last_activity);
    let check = ConditionCheck::builder()
        .table_name(table)
        .key("pk", s(tenant_pk(&commit.key.tenant)))
        .key("sk", s(erased_sk(&commit.key)))
        .condition_expression("attribute_not_exists(erased_at) OR erased_at < :born")
        .expression_attribute_values(":born", n(born))
        .build()
        .map_err(|err| StoreError::Other(format!("erase check: {err}")))?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// An update of an existing message (the condition keeps it from creating a stray
/// item for an erased contact or a wrong sequence number, or recreating a message
/// TTL deleted: it fails the whole transaction instead).
fn message_update(
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

/// A round's transaction: the head update, a conditional put of each message (a
/// sequence number is never reused), the completed idempotency record, the
/// archive of a session this round closed, and the new TTL of the window messages
/// that would expire before the session can close.
pub(in crate::dynamodb) fn round_items(
    table: &str,
    commit: &RoundCommit,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let actions = 1
        + usize::from(commit.expected.is_none())
        + commit.messages.len()
        + usize::from(commit.idempotency.is_some())
        + usize::from(commit.archive.is_some())
        + commit.refresh.len();
    if actions > MAX_TRANSACTION_ACTIONS {
        return Err(StoreError::Other(format!(
            "a round of {} messages does not fit one transaction",
            commit.messages.len()
        )));
    }
    let pk = contact_pk(&commit.key);
    let mut items = Vec::with_capacity(actions);
    items.push(
        TransactWriteItem::builder()
            .update(head_update(table, &pk, commit)?)
            .build(),
    );
    if commit.expected.is_none() {
        items.push(erase_check(table, commit)?);
    }
    // A sequence number is never reused, but for an item past its TTL that
    // DynamoDB has not deleted yet (of a life of the contact whose memory expired).
    let now = commit.head.last_activity;
    for message in &commit.messages {
        let item = MessageItem::new(&pk, message, Some(commit.messages_expire_at))?;
        items.push(put_unless_live(
            table,
            to_item(&item)?,
            now,
            commit.stale_before(),
            "message",
        )?);
    }
    if let Some(done) = &commit.idempotency {
        // Over nothing or a claim in progress (it has a lease), never over a key
        // another attempt completed: that round stands, and this one would store
        // the message twice (an erase may have taken the claim meanwhile).
        let record = RequestItem::completed(&pk, done);
        items.push(put(
            table,
            to_item(&record)?,
            Some("attribute_not_exists(pk) OR attribute_exists(lease_until)"),
            "request",
        )?);
    }
    if let Some(archive) = &commit.archive {
        // Unconditional: the head's condition already lets only one round close
        // a session, and an erased contact starts over from session 1 with no
        // archive left to collide with.
        let item = ArchiveItem::new(&pk, archive);
        items.push(put(table, to_item(&item)?, None, "archive")?);
    }
    // The window's TTL, in the same transaction: each message must still exist (a
    // message TTL deleted meanwhile fails the round, which is then read again).
    for &seq in &commit.refresh {
        items.push(message_update(
            table,
            &pk,
            commit.head.session,
            seq,
            "SET expires_at = :expires_at",
            (":expires_at", n(commit.messages_expire_at)),
            "refresh",
        )?);
    }
    Ok(items)
}

/// The head's part of a round: an update of only the fields `ask` owns, so that a
/// compaction step applied since the head was loaded survives; a new session also
/// resets the summary fields. Its condition: the head is as loaded (session,
/// `last_seq`, incarnation), or absent for a new contact. Long because it lists every
/// attribute a round owns, one clause each.
fn head_update(table: &str, pk: &str, commit: &RoundCommit) -> Result<Update, StoreError> {
    let head = &commit.head;
    let mut parts = UpdateParts::default();
    parts
        .set("#session = :session")
        .set("#last_seq = :last_seq")
        .set("#last_context_tokens = :last_context_tokens")
        .set("#last_activity = :last_activity")
        // Back into the sweep index, due when the round says.
        .set("sweep_pk = :sweep_pk")
        .set("sweep_sk = :sweep_sk")
        // In the tenant index, newest first.
        .set("tenant_pk = :tenant_pk")
        .set("tenant_sk = :last_activity")
        .name("#session", "session")
        .name("#last_seq", "last_seq")
        .name("#last_context_tokens", "last_context_tokens")
        .name("#last_activity", "last_activity")
        .value(":session", n(head.session))
        .value(":last_seq", n(head.last_seq))
        .value(":last_context_tokens", n(head.last_context_tokens))
        .value(":last_activity", n(head.last_activity))
        .value(":sweep_pk", s(sweep_pk(commit.sweep.bucket)))
        .value(":sweep_sk", n(commit.sweep.due))
        .value(":tenant_pk", s(tenant_pk(&commit.key.tenant)));
    if let Some(expires_at) = head.expires_at {
        parts
            .set("expires_at = :expires_at")
            .value(":expires_at", n(expires_at));
    }
    if let Some(round) = &head.last_round {
        parts
            .set("last_round = :last_round")
            .value(":last_round", s(round));
    }
    parts.set_or_remove("facts_requested", head.facts_requested.map(n));
    parts.set_or_remove("hard_cap_at", head.hard_cap_at.map(n));
    parts.set_or_remove(
        "cache_hour",
        head.cache_hour.then_some(AttributeValue::Bool(true)),
    );
    parts.set_or_remove(
        "recent_gaps",
        (!head.recent_gaps.is_empty())
            .then(|| AttributeValue::L(head.recent_gaps.iter().copied().map(n).collect())),
    );
    if let Some(pending) = head.facts_pending {
        parts.pending(pending);
    }
    let new_session = commit
        .expected
        .as_ref()
        .is_none_or(|expected| expected.session != head.session);
    if new_session {
        parts
            .set("#summarized_until = :zero")
            .set("#steps = :zero")
            .remove("#summary")
            .name("#summarized_until", "summarized_until")
            .name("#steps", "steps")
            .name("#summary", "summary")
            .value(":zero", n(0));
    }
    // The incarnation is written once: by the round that creates the head, or by
    // the first round of a head from before incarnations. A loaded head's must
    // still be there: an erase and a new first round in between make another.
    let expected_incarnation = commit
        .expected
        .as_ref()
        .and_then(|e| e.incarnation.as_ref());
    if let (None, Some(incarnation)) = (expected_incarnation, &head.incarnation) {
        parts
            .set("incarnation = :incarnation")
            .value(":incarnation", s(incarnation.as_str()));
    }
    match (&commit.expected, expected_incarnation) {
        (None, _) => {
            // A new head, or one over a head past its TTL: none of the old one's
            // state stays (its pending extraction is of another life), and the new
            // life is dated.
            parts
                .condition("(attribute_not_exists(pk) OR expires_at <= :now)")
                .value(":now", n(head.last_activity));
            parts.set_or_remove("born_at", head.born_at.map(n));
            if head.facts_pending.is_none() {
                parts.remove_pending();
            }
        }
        (Some(expected), incarnation) => {
            parts
                .condition("#session = :expected_session")
                .condition("#last_seq = :expected_last_seq")
                .value(":expected_session", n(expected.session))
                .value(":expected_last_seq", n(expected.last_seq));
            match incarnation {
                Some(incarnation) => parts
                    .condition("incarnation = :expected_incarnation")
                    .value(":expected_incarnation", s(incarnation.as_str())),
                None => parts.condition("attribute_not_exists(incarnation)"),
            };
        }
    }
    parts.update(table, pk, HEAD_SK, "head")
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
