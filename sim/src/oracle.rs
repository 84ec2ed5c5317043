//! What every client was told, and the invariants checked against the store after
//! every event. Each message a client sends carries a token of its own, so the
//! oracle can find it wherever it is stored (or must not be): in the transcript,
//! in a summary, in a fact.
//!
//! The safety invariants, after every event:
//!
//! - **Told and stored agree.** A round a client was told succeeded is stored once,
//!   whole, at the sequence numbers it was told, until its retention ran out; a
//!   round a client was told failed (or that the gateway timed out) is not stored;
//!   a round whose outcome the client could not know (the store failed around the
//!   commit) is stored at most once. Nothing is stored that no client sent.
//! - **Erasure is final.** Nothing of a round told before an erase is readable
//!   again: not in a message, a summary, an archive (its recall record
//!   included) or a fact.
//! - **The head is consistent.** `summarized_until ≤ last_seq`, and no live
//!   message of the head's session lies past `last_seq`.
//! - **Nothing folded is lost.** Every live message of the head's session at or
//!   before `summarized_until` is in the summary.
//! - **Facts cite what supports them.** A fact's value came from the message its
//!   source names, or from an operator's correction (and then says so).
//! - **An operator's correction stands.** Once a correction landed, and while its
//!   fact lives, the `name` fact is the operator's, or a value the model read from
//!   a message sent after it: never one from a message sent before.
//!
//! The liveness invariants (no message forgotten, no contact stuck, every idle
//! session swept) are checked when the simulation quiesces (see `crate::run`).

use std::collections::{BTreeMap, BTreeSet};

use degrau::domain::{ContentBlock, Head, Role, StoredMessage};
use degrau::memory::Snapshot;

use crate::model::tokens;

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant (a short stable name).
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl Violation {
    /// A violation of `invariant`.
    pub fn new(invariant: &'static str, detail: impl Into<String>) -> Self {
        Violation {
            invariant,
            detail: detail.into(),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// What a client was told about its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// 200: the round is stored at these sequence numbers.
    Stored {
        /// Its session.
        session: u32,
        /// The user's message.
        first_seq: u64,
        /// The answer.
        last_seq: u64,
    },
    /// An error that says nothing was stored.
    Failed(String),
    /// An error after which the client cannot know (the store failed around the
    /// commit, or an erase raced it).
    Unknown(String),
    /// No answer: the gateway's timeout.
    TimedOut,
}

impl Told {
    /// What a client knows after a first attempt and a retry with the same
    /// `Idempotency-Key`.
    pub fn after_retry(first: Told, retry: Told) -> Told {
        match (first, retry) {
            (_, stored @ Told::Stored { .. }) => stored,
            (Told::Unknown(why), _) | (_, Told::Unknown(why)) => Told::Unknown(why),
            (Told::TimedOut, _) | (_, Told::TimedOut) => Told::Unknown("timed out once".into()),
            (_, failed) => failed,
        }
    }
}

#[derive(Debug, Clone)]
struct Sent {
    told: Told,
    /// The TTL of its user message when last seen.
    expires: Option<i64>,
    /// When the life it was stored in ends: its head's TTL when last seen
    /// beside it. A head that expires first (its tenant lowered the retention
    /// since) ends the life, and the next life's writes replace what is left.
    life_ends: Option<i64>,
}

/// Whether an operator's correction landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landed {
    /// Stored, living until `expires_at`.
    Yes {
        /// The fact's TTL.
        expires_at: i64,
    },
    /// Not stored.
    No,
    /// Not known (the store failed around the write).
    Unknown,
}

/// One contact's messages, as its clients know them.
#[derive(Debug, Default)]
pub struct ContactLog {
    next: u64,
    sent: BTreeMap<String, Sent>,
    erased: BTreeSet<String>,
    /// Operators' corrections by token.
    corrections: BTreeMap<String, Landed>,
    /// The last correction known to have landed in this life: its token's number
    /// (messages of lower numbers were sent before it) and its fact's TTL.
    corrected: Option<(u64, i64)>,
}

/// What every client was told.
#[derive(Debug, Default)]
pub struct Oracle {
    contacts: Vec<ContactLog>,
    /// Invariant checks made.
    pub checks: u64,
}

impl Oracle {
    /// An oracle for `contacts` contacts.
    pub fn new(contacts: usize) -> Self {
        Oracle {
            contacts: (0..contacts).map(|_| ContactLog::default()).collect(),
            checks: 0,
        }
    }

    /// A new token for a message of `contact`.
    pub fn issue(&mut self, contact: usize) -> String {
        let log = &mut self.contacts[contact];
        log.next += 1;
        let token = crate::model::token(contact, log.next);
        log.sent.insert(
            token.clone(),
            Sent {
                told: Told::Unknown("in flight".into()),
                expires: None,
                life_ends: None,
            },
        );
        token
    }

    /// A new token for an operator's correction of `contact`'s `name` fact.
    pub fn issue_correction(&mut self, contact: usize) -> String {
        let log = &mut self.contacts[contact];
        log.next += 1;
        let token = crate::model::token(contact, log.next);
        log.corrections.insert(token.clone(), Landed::Unknown);
        token
    }

    /// The number the contact's next token will have: every message of a lower
    /// number was sent before an operation issued from here on.
    pub fn next_number(&self, contact: usize) -> u64 {
        self.contacts[contact].next + 1
    }

    /// Records whether a correction landed. `sent_before` is the lowest token
    /// number of the burst it ran in: messages of lower numbers were answered
    /// before it began, those of its burst ran beside it (the core orders them by
    /// time, and either order is right).
    pub fn corrected(&mut self, contact: usize, token: &str, landed: Landed, sent_before: u64) {
        let log = &mut self.contacts[contact];
        log.corrections.insert(token.to_owned(), landed);
        if let Landed::Yes { expires_at } = landed {
            log.corrected = Some(log.corrected.map_or((sent_before, expires_at), |before| {
                before.max((sent_before, expires_at))
            }));
        }
    }

    /// Records what the client was told about `token`.
    pub fn tell(&mut self, contact: usize, token: &str, told: Told) {
        if let Some(sent) = self.contacts[contact].sent.get_mut(token) {
            sent.told = told;
        }
    }

    /// What the client was told about `token`.
    pub fn told(&self, contact: usize, token: &str) -> Option<&Told> {
        self.contacts[contact]
            .sent
            .get(token)
            .map(|sent| &sent.told)
    }

    /// An erase of `contact` succeeded: every round sent before it is gone for
    /// good, but those of `racing` (sent at the same time as the erase), which
    /// may have landed before it or after.
    pub fn erase(&mut self, contact: usize, racing: &BTreeSet<String>) {
        let log = &mut self.contacts[contact];
        log.corrected = None;
        for (token, landed) in std::mem::take(&mut log.corrections) {
            if racing.contains(&token) {
                // It may have landed on the contact's next life.
                log.corrections.insert(token, Landed::Unknown);
            } else if landed != Landed::No {
                log.erased.insert(token);
            }
        }
        let sent = std::mem::take(&mut log.sent);
        for (token, mut entry) in sent {
            if racing.contains(&token) {
                if !matches!(entry.told, Told::Failed(_)) {
                    entry.told = Told::Unknown("raced an erase".into());
                }
                log.sent.insert(token, entry);
            } else {
                log.erased.insert(token);
            }
        }
    }

    /// Checks the safety invariants on `contact`'s items at `now`.
    pub fn check(
        &mut self,
        contact: usize,
        snapshot: &Snapshot,
        now: i64,
    ) -> Result<(), Violation> {
        self.checks += 1;
        let log = &mut self.contacts[contact];
        let live = |expires: Option<i64>| expires.is_none_or(|at| at > now);
        // Where each token's user message is stored.
        let mut found: BTreeMap<String, Vec<usize>> = BTreeMap::new();
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
            match log.sent.get(token).map(|sent| &sent.told) {
                None => {
                    return Err(Violation::new(
                        "told and stored agree",
                        format!("{token} is stored but no client of this contact sent it"),
                    ));
                }
                Some(Told::Failed(why)) => {
                    return Err(Violation::new(
                        "told and stored agree",
                        format!("{token} is stored but its client was told it failed ({why})"),
                    ));
                }
                Some(Told::TimedOut) => {
                    return Err(Violation::new(
                        "told and stored agree",
                        format!("{token} is stored but its client got the gateway's timeout"),
                    ));
                }
                _ => {}
            }
        }
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
            sent.expires = *expires;
            // Once a newer life began, the message's own life ended as last seen.
            if let Some(head) = snapshot
                .head
                .as_ref()
                .filter(|head| head.of_this_life(message.created_at))
            {
                sent.life_ends = head.expires_at;
            }
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
            if !live(*expires) {
                continue;
            }
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
        }
        let erased_in = |text: &str| tokens(text).into_iter().find(|t| log.erased.contains(t));
        if let Some(head) = &snapshot.head {
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
                    && live(*expires)
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
            if let Some(token) = erased_in(summary) {
                return Err(Violation::new(
                    "erasure is final",
                    format!("the summary holds {token}, erased"),
                ));
            }
            if !head.expired_at(now) {
                let kept: BTreeSet<String> = tokens(summary).into_iter().collect();
                for (message, expires) in &snapshot.messages {
                    if message.session != head.session
                        || message.seq > head.summarized_until
                        || !live(*expires)
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
            }
        }
        for archive in &snapshot.archives {
            // The summary and the session's record for recall (its excerpt and ids).
            let texts = archive
                .summary
                .iter()
                .chain(std::iter::once(&archive.excerpt))
                .chain(&archive.ids);
            if let Some(token) = texts.filter_map(|text| erased_in(text)).next() {
                return Err(Violation::new(
                    "erasure is final",
                    format!(
                        "the archive of session {} holds {token}, erased",
                        archive.session
                    ),
                ));
            }
        }
        for (fact, expires) in &snapshot.facts {
            if !live(*expires) {
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
            if let (Some((corrected, expires_at)), Some(number)) =
                (log.corrected, token_number(&token))
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
            match log.sent.get(&token).map(|sent| &sent.told) {
                Some(Told::Stored {
                    session, first_seq, ..
                }) if (*session, *first_seq) != (fact.source.session, fact.source.seq) => {
                    return Err(Violation::new(
                        "facts cite what supports them",
                        format!(
                            "the fact {} holds {token}, said at session {session} seq \
                             {first_seq}, but cites session {} seq {}",
                            fact.key, fact.source.session, fact.source.seq
                        ),
                    ));
                }
                Some(Told::Stored { .. } | Told::Unknown(_)) => {}
                _ => {
                    return Err(Violation::new(
                        "facts cite what supports them",
                        format!("the fact {} holds {token}, which is not stored", fact.key),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The token of a user message of text (the contact's own words).
pub fn user_token(message: &StoredMessage) -> Option<String> {
    if message.role != Role::User {
        return None;
    }
    message.content.iter().find_map(|block| match block {
        ContentBlock::Text { text } => tokens(text).into_iter().next(),
        _ => None,
    })
}

/// The number of a token (`tok{contact}x{number}`): the order it was issued in.
fn token_number(token: &str) -> Option<u64> {
    token.rsplit_once('x')?.1.parse().ok()
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
