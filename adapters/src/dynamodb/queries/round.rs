//! A round's transaction: the head's update of the fields `ask` owns under the
//! condition that the head is as loaded, the check against the tenant's last erase,
//! the conditional put of each message, the idempotency record, the archive of a
//! closed session and the window's new TTL.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem, Update};
use degrau::store::{RoundCommit, StoreError};

use super::transactions::{MAX_TRANSACTION_ACTIONS, message_update, put};
use super::update::UpdateParts;
use crate::dynamodb::items::{ArchiveItem, Item, MessageItem, RequestItem, n, s, to_item};
use crate::dynamodb::keys::{HEAD_SK, contact_pk, erased_sk, sweep_pk, tenant_pk};

/// A round's transaction: the head update, a conditional put of each message (a
/// sequence number is never reused), the completed idempotency record, the
/// archive of a session this round closed, and the new TTL of the window messages
/// that would expire before the session can close.
pub(in crate::dynamodb) fn round_items(
    table: &str,
    commit: &RoundCommit,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let actions = round_actions(commit)?;
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
    message_puts(table, &pk, commit, &mut items)?;
    record_puts(table, &pk, commit, &mut items)?;
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

/// How many actions the round's transaction takes, refused past DynamoDB's limit.
fn round_actions(commit: &RoundCommit) -> Result<usize, StoreError> {
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
    Ok(actions)
}

/// The conditional put of each of the round's messages.
fn message_puts(
    table: &str,
    pk: &str,
    commit: &RoundCommit,
    items: &mut Vec<TransactWriteItem>,
) -> Result<(), StoreError> {
    // A sequence number is never reused, but for an item past its TTL that
    // DynamoDB has not deleted yet (of a life of the contact whose memory expired).
    let now = commit.head.last_activity;
    for message in &commit.messages {
        let item = MessageItem::new(pk, message, Some(commit.messages_expire_at))?;
        items.push(put_unless_live(
            table,
            to_item(&item)?,
            now,
            commit.stale_before(),
            "message",
        )?);
    }
    Ok(())
}

/// The completed idempotency record and the archive of a session the round closed,
/// when it has them.
fn record_puts(
    table: &str,
    pk: &str,
    commit: &RoundCommit,
    items: &mut Vec<TransactWriteItem>,
) -> Result<(), StoreError> {
    if let Some(done) = &commit.idempotency {
        // Over nothing or a claim in progress (it has a lease), never over a key
        // another attempt completed: that round stands, and this one would store
        // the message twice (an erase may have taken the claim meanwhile).
        let record = RequestItem::completed(pk, done);
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
        let item = ArchiveItem::new(pk, archive);
        items.push(put(table, to_item(&item)?, None, "archive")?);
    }
    Ok(())
}

/// The head's part of a round: an update of only the fields `ask` owns, so that a
/// compaction step applied since the head was loaded survives; a new session also
/// resets the summary fields. Its condition: the head is as loaded (session,
/// `last_seq`, incarnation), or absent for a new contact.
fn head_update(table: &str, pk: &str, commit: &RoundCommit) -> Result<Update, StoreError> {
    let mut parts = UpdateParts::default();
    round_fields(&mut parts, commit);
    let head = &commit.head;
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
    incarnation_and_condition(&mut parts, commit);
    parts.update(table, pk, HEAD_SK, "head")
}

/// The fields a round owns on the head, one clause each: its place in the session,
/// its activity (and so its place in the sweep and tenant indexes), and what it
/// leaves for the compactor.
fn round_fields(parts: &mut UpdateParts, commit: &RoundCommit) {
    let head = &commit.head;
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
        "client_round",
        head.client_round.then_some(AttributeValue::Bool(true)),
    );
    parts.set_or_remove(
        "recent_gaps",
        (!head.recent_gaps.is_empty())
            .then(|| AttributeValue::L(head.recent_gaps.iter().copied().map(n).collect())),
    );
    if let Some(pending) = head.facts_pending {
        parts.pending(pending);
    }
}

/// The head's incarnation, written once, and the round's condition: a new head (or
/// one over a head past its TTL), or the head as loaded.
fn incarnation_and_condition(parts: &mut UpdateParts, commit: &RoundCommit) {
    let head = &commit.head;
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
