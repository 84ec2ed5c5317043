//! The safety invariants of one contact, each a step of [`super::Oracle::check`]
//! in the order they are checked (the first broken one is the one reported): where
//! each token's message is stored, what each client was told stored, the head, the
//! archives, the facts.

use std::collections::{BTreeMap, BTreeSet};

use degrau::domain::{Fact, Head, Role, StoredMessage};
use degrau::memory::Snapshot;

use super::{ContactLog, Landed, Sent, Told, Violation, token_number, user_token};
use crate::model::tokens;

/// Where each token's user message is stored (its places among the snapshot's
/// messages).
type Found = BTreeMap<String, Vec<usize>>;

/// Whether an item with TTL `expires` is live at `now`.
fn live(expires: Option<i64>, now: i64) -> bool {
    expires.is_none_or(|at| at > now)
}

/// Each token's user message is stored once, was sent by a client of this contact
/// who was not told it failed, and was not erased: where each is.
pub(super) fn stored_once(log: &ContactLog, snapshot: &Snapshot) -> Result<Found, Violation> {
    let mut found: Found = BTreeMap::new();
    for (index, (message, _)) in snapshot.messages.iter().enumerate() {
        if let Some(token) = user_token(message) {
            found.entry(token).or_default().push(index);
        }
    }
    for (token, places) in &found {
        if places.len() > 1 {
            return Err(Violation::new(
                "stored once",
                format!("{token} is stored {} times", places.len()),
            ));
        }
        if log.erased.contains(token) {
            return Err(Violation::new(
                "erasure is final",
                format!("{token}, erased, is stored again"),
            ));
        }
        let refused = match log.sent.get(token).map(|sent| &sent.told) {
            None => format!("{token} is stored but no client of this contact sent it"),
            Some(Told::Failed(why) | Told::Lost(why)) => {
                format!("{token} is stored but its client was told it failed ({why})")
            }
            Some(Told::TimedOut) => {
                format!("{token} is stored but its client got the gateway's timeout")
            }
            _ => continue,
        };
        return Err(Violation::new("told and stored agree", refused));
    }
    Ok(found)
}

/// Every round a client was told stored is stored, where it was told, and whole,
/// until its retention ran out (noting each message's TTL and life as seen).
pub(super) fn told_stored(
    log: &mut ContactLog,
    snapshot: &Snapshot,
    found: &Found,
    now: i64,
) -> Result<(), Violation> {
    for (token, sent) in &mut log.sent {
        let Told::Stored {
            session,
            first_seq,
            last_seq,
        } = sent.told
        else {
            continue;
        };
        let Some(&index) = found.get(token).and_then(|places| places.first()) else {
            if sent.expires.is_some_and(|at| at <= now)
                || sent.life_ends.is_some_and(|at| at <= now)
            {
                continue;
            }
            return Err(Violation::new(
                "told and stored agree",
                format!(
                    "{token}, told stored at session {session} seq {first_seq}, is not \
                     stored, and had not expired"
                ),
            ));
        };
        let (message, expires) = &snapshot.messages[index];
        seen(sent, message, *expires, snapshot);
        if (message.session, message.seq) != (session, first_seq) {
            return Err(Violation::new(
                "told and stored agree",
                format!(
                    "{token} was told stored at session {session} seq {first_seq} but is at \
                     session {} seq {}",
                    message.session, message.seq
                ),
            ));
        }
        if live(*expires, now) {
            whole_round(token, snapshot, session, first_seq, last_seq)?;
        }
    }
    Ok(())
}

/// Notes the TTL of a told round's user message as seen, and, once a newer life
/// began, that the message's own life ended as last seen.
fn seen(sent: &mut Sent, message: &StoredMessage, expires: Option<i64>, snapshot: &Snapshot) {
    sent.expires = expires;
    // Once a newer life began, the message's own life ended as last seen.
    if let Some(head) = snapshot
        .head
        .as_ref()
        .filter(|head| head.of_this_life(message.created_at))
    {
        sent.life_ends = head.expires_at;
    }
}

/// The round of `token` is stored whole: every sequence number it was told, its
/// roles alternating, an answer last.
fn whole_round(
    token: &str,
    snapshot: &Snapshot,
    session: u32,
    first_seq: u64,
    last_seq: u64,
) -> Result<(), Violation> {
    let round: Vec<&StoredMessage> = snapshot
        .messages
        .iter()
        .map(|(message, _)| message)
        .filter(|m| m.session == session && (first_seq..=last_seq).contains(&m.seq))
        .collect();
    let whole = round.len() as u64 == last_seq - first_seq + 1
        && round.last().is_some_and(|m| m.role == Role::Assistant)
        && round.windows(2).all(|pair| pair[0].role != pair[1].role);
    if !whole {
        return Err(Violation::new(
            "told and stored agree",
            format!(
                "the round of {token} (session {session}, {first_seq}..={last_seq}) is \
                 not stored whole: {} messages",
                round.len()
            ),
        ));
    }
    Ok(())
}

/// The erased token `text` holds, if any.
fn erased_in(log: &ContactLog, text: &str) -> Option<String> {
    tokens(text).into_iter().find(|t| log.erased.contains(t))
}

/// The head is consistent, its live session dense, its summary holds nothing
/// erased and everything folded into it.
pub(super) fn head(
    log: &ContactLog,
    head: &Head,
    snapshot: &Snapshot,
    now: i64,
) -> Result<(), Violation> {
    if head.summarized_until > head.last_seq {
        return Err(Violation::new(
            "the head is consistent",
            format!(
                "summarized_until {} is past last_seq {}",
                head.summarized_until, head.last_seq
            ),
        ));
    }
    if let Some((beyond, _)) = snapshot.messages.iter().find(|(m, expires)| {
        m.session == head.session
            && m.seq > head.last_seq
            && live(*expires, now)
            && head.of_this_life(m.created_at)
    }) {
        return Err(Violation::new(
            "the head is consistent",
            format!(
                "message {} of session {} lies past last_seq {}",
                beyond.seq, head.session, head.last_seq
            ),
        ));
    }
    if !head.expired_at(now) {
        dense(head, snapshot, now)?;
    }
    let summary = head.summary.as_deref().unwrap_or("");
    if let Some(token) = erased_in(log, summary) {
        return Err(Violation::new(
            "erasure is final",
            format!("the summary holds {token}, erased"),
        ));
    }
    if !head.expired_at(now) {
        folded_kept(head, summary, snapshot, now)?;
    }
    Ok(())
}

/// Nothing folded is lost: every live user message of the head's session and life
/// at or before `summarized_until` has its token in the summary.
fn folded_kept(head: &Head, summary: &str, snapshot: &Snapshot, now: i64) -> Result<(), Violation> {
    let kept: BTreeSet<String> = tokens(summary).into_iter().collect();
    for (message, expires) in &snapshot.messages {
        if message.session != head.session
            || message.seq > head.summarized_until
            || !live(*expires, now)
            || !head.of_this_life(message.created_at)
        {
            continue;
        }
        if let Some(token) = user_token(message)
            && !kept.contains(&token)
        {
            return Err(Violation::new(
                "nothing folded is lost",
                format!(
                    "{token} (seq {}) is at or before summarized_until {} but not \
                     in the summary",
                    message.seq, head.summarized_until
                ),
            ));
        }
    }
    Ok(())
}

/// Sequences are dense: the live messages of the head's session and life hold
/// every sequence number from the first of them to the head's `last_seq` (TTL takes
/// a session's oldest messages first; a round writes the numbers after `last_seq`
/// and nothing else).
fn dense(head: &Head, snapshot: &Snapshot, now: i64) -> Result<(), Violation> {
    let seqs: BTreeSet<u64> = snapshot
        .messages
        .iter()
        .filter(|(m, expires)| {
            m.session == head.session
                && expires.is_none_or(|at| at > now)
                && head.of_this_life(m.created_at)
        })
        .map(|(m, _)| m.seq)
        .collect();
    let Some(&first) = seqs.first() else {
        return Ok(());
    };
    match (first..=head.last_seq).find(|seq| !seqs.contains(seq)) {
        Some(missing) => Err(Violation::new(
            "sequences are dense",
            format!(
                "session {} holds messages {first}..={} but not {missing}",
                head.session, head.last_seq
            ),
        )),
        None => Ok(()),
    }
}

/// No archive (its summary, and the session's record for recall: its excerpt and
/// ids) holds an erased token.
pub(super) fn archives(log: &ContactLog, snapshot: &Snapshot) -> Result<(), Violation> {
    for archive in &snapshot.archives {
        // The summary and the session's record for recall (its excerpt and ids).
        let texts = archive
            .summary
            .iter()
            .chain(std::iter::once(&archive.excerpt))
            .chain(&archive.ids);
        if let Some(token) = texts.filter_map(|text| erased_in(log, text)).next() {
            return Err(Violation::new(
                "erasure is final",
                format!(
                    "the archive of session {} holds {token}, erased",
                    archive.session
                ),
            ));
        }
    }
    Ok(())
}

/// Every live fact holding a token: not erased, not older than an operator's
/// correction that stands, and citing what supports it.
pub(super) fn facts(log: &ContactLog, snapshot: &Snapshot, now: i64) -> Result<(), Violation> {
    for (fact, expires) in &snapshot.facts {
        if !live(*expires, now) {
            continue;
        }
        let Some(token) = tokens(&fact.value).into_iter().next() else {
            continue;
        };
        if log.erased.contains(&token) {
            return Err(Violation::new(
                "erasure is final",
                format!("the fact {} holds {token}, erased", fact.key),
            ));
        }
        correction_stands(log, fact, &token, now)?;
        if let Some(landed) = log.corrections.get(&token) {
            if fact.operator.is_none() || *landed == Landed::No {
                return Err(Violation::new(
                    "facts cite what supports them",
                    format!(
                        "the fact {} holds the correction {token} ({landed:?}) but says \
                         it is {:?}'s",
                        fact.key, fact.operator
                    ),
                ));
            }
            continue;
        }
        cites_its_message(log, fact, &token)?;
    }
    Ok(())
}

/// An operator's correction stands: while it lives, no fact of the model's holds
/// a token sent before it.
fn correction_stands(
    log: &ContactLog,
    fact: &Fact,
    token: &str,
    now: i64,
) -> Result<(), Violation> {
    if let (Some((corrected, expires_at)), Some(number)) = (log.corrected, token_number(token))
        && fact.operator.is_none()
        && number < corrected
        && now < expires_at
    {
        return Err(Violation::new(
            "an operator's correction stands",
            format!(
                "the fact {} holds {token}, sent before the operator's correction \
                 (token {corrected}) replaced it",
                fact.key
            ),
        ));
    }
    Ok(())
}

/// A fact of the model's cites the message its token was said in, which is (or
/// may be) stored.
fn cites_its_message(log: &ContactLog, fact: &Fact, token: &str) -> Result<(), Violation> {
    match log.sent.get(token).map(|sent| &sent.told) {
        Some(Told::Stored {
            session, first_seq, ..
        }) if (*session, *first_seq) != (fact.source.session, fact.source.seq) => {
            Err(Violation::new(
                "facts cite what supports them",
                format!(
                    "the fact {} holds {token}, said at session {session} seq \
                     {first_seq}, but cites session {} seq {}",
                    fact.key, fact.source.session, fact.source.seq
                ),
            ))
        }
        Some(Told::Stored { .. } | Told::Unknown(_)) => Ok(()),
        _ => Err(Violation::new(
            "facts cite what supports them",
            format!("the fact {} holds {token}, which is not stored", fact.key),
        )),
    }
}
