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
//! - **A session's facts come from that session.** Every customer message a fact
//!   extraction was shown is stored in the session whose job asked, at the
//!   sequence number shown (the model learns the job's session from the queue:
//!   `crate::model::serving`); not the next session's window, read after a round
//!   opened it.
//! - **No job of a living contact is dropped.** A job the compactor skipped as
//!   erased belongs to a life that is gone: no live head holds its incarnation
//!   (a job that finds no head while the index lags is left for redelivery).
//!
//! The liveness invariants (no message forgotten, no contact stuck, every idle
//! session swept) are checked when the simulation quiesces (see `crate::run`).

use std::collections::{BTreeMap, BTreeSet};

use degrau::domain::{ContentBlock, Head, Role, StoredMessage};
use degrau::jobs::Job;
use degrau::memory::Snapshot;

mod checks;
mod expiry;
mod requests;

pub use expiry::{EXPIRY, Retention};
pub use requests::FORGOTTEN;

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
    /// A race lost (409 "this one was not stored"): nothing of the message is
    /// stored, whatever became of an earlier attempt with its `Idempotency-Key`.
    /// A race is only lost after the attempt claimed the key, and a claim answers
    /// with the stored reply when an earlier attempt stored one (a key still
    /// claimed answers [`degrau::converse::AskError::InProgress`] instead).
    Lost(String),
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
            (_, lost @ Told::Lost(_)) => lost,
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
    /// The earliest its user message may expire: the time its round began plus
    /// the retention its tenant had then (none: not known).
    floor: Option<i64>,
    /// The event it was issued in, and when.
    issued_in: u64,
    began: i64,
    /// The event it was told stored in.
    told_in: Option<u64>,
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
    /// The longest transcript retention its tenant was ever configured with.
    longest: i64,
}

/// What every client was told.
#[derive(Debug, Default)]
pub struct Oracle {
    contacts: Vec<ContactLog>,
    /// Invariant checks made.
    pub checks: u64,
    /// Events played (see [`Oracle::end_event`]).
    events: u64,
}

impl Oracle {
    /// An oracle for `contacts` contacts.
    pub fn new(contacts: usize) -> Self {
        Oracle {
            contacts: (0..contacts).map(|_| ContactLog::default()).collect(),
            checks: 0,
            events: 0,
        }
    }

    /// A new token for a message of `contact`, sent `now`.
    pub fn issue(&mut self, contact: usize, now: i64) -> String {
        let log = &mut self.contacts[contact];
        log.next += 1;
        let token = crate::model::token(contact, log.next);
        log.sent.insert(
            token.clone(),
            Sent {
                told: Told::Unknown("in flight".into()),
                expires: None,
                life_ends: None,
                floor: None,
                issued_in: self.events,
                began: now,
                told_in: None,
            },
        );
        token
    }

    /// The message of `token` may expire no earlier than `floor` if stored: its
    /// round began now, under a retention ending then.
    pub fn expires_no_earlier(&mut self, contact: usize, token: &str, floor: i64) {
        if let Some(sent) = self.contacts[contact].sent.get_mut(token) {
            sent.floor = Some(floor);
        }
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
            if matches!(told, Told::Stored { .. }) {
                sent.told_in = Some(self.events);
            }
            sent.told = told;
        }
    }

    /// Checks what every round's request carried (see `requests.rs`), once
    /// the event's clients were told; the event ends.
    pub fn end_event(&mut self, carried: &[crate::model::Carried]) -> Result<(), Violation> {
        self.events += 1;
        for request in carried {
            self.checks += 1;
            requests::check(&self.contacts, request)?;
        }
        Ok(())
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
                if !matches!(entry.told, Told::Failed(_) | Told::Lost(_)) {
                    entry.told = Told::Unknown("raced an erase".into());
                }
                log.sent.insert(token, entry);
            } else {
                log.erased.insert(token);
            }
        }
    }

    /// Checks the safety invariants on `contact`'s items at `now`, under the
    /// retention its tenant was configured with.
    pub fn check(
        &mut self,
        contact: usize,
        snapshot: &Snapshot,
        retention: Retention,
        now: i64,
    ) -> Result<(), Violation> {
        self.checks += 1;
        let log = &mut self.contacts[contact];
        log.longest = log.longest.max(retention.longest);
        let retention = Retention {
            longest: log.longest,
            ..retention
        };
        let found = checks::stored_once(log, snapshot)?;
        checks::told_stored(log, snapshot, &found, now)?;
        if let Some(head) = &snapshot.head {
            checks::head(log, head, snapshot, now)?;
        }
        checks::archives(log, snapshot)?;
        checks::facts(log, snapshot, now)?;
        expiry::check(log, snapshot, retention, now)
    }
}

/// The invariant of fact extractions (checked after every event).
pub const FACTS_OF_THEIR_SESSION: &str = "a session's facts come from that session";
/// The invariant of the jobs (checked after every event).
pub const NO_LIVING_JOB_DROPPED: &str = "no job of a living contact is dropped";

impl Oracle {
    /// A session's facts come from that session: every customer message the
    /// extraction of `session` was shown (its sequence number and token) is
    /// stored in `session` at that sequence number, as the contacts' `snapshots`
    /// hold it or, gone from them (TTL), as its client was told.
    pub fn facts_read(
        &mut self,
        session: u32,
        shown: &[(u64, String)],
        snapshots: &[Snapshot],
    ) -> Result<(), Violation> {
        self.checks += 1;
        for (seq, token) in shown {
            let Some(contact) = crate::model::token_contact(token) else {
                continue;
            };
            let stored = snapshots.get(contact).and_then(|snapshot| {
                snapshot.messages.iter().find_map(|(message, _)| {
                    (user_token(message).as_ref() == Some(token))
                        .then_some((message.session, message.seq))
                })
            });
            let told = match self
                .contacts
                .get(contact)
                .and_then(|_| self.told(contact, token))
            {
                Some(Told::Stored {
                    session, first_seq, ..
                }) => Some((*session, *first_seq)),
                _ => None,
            };
            if let Some((at_session, at_seq)) = stored.or(told)
                && (at_session, at_seq) != (session, *seq)
            {
                return Err(Violation::new(
                    FACTS_OF_THEIR_SESSION,
                    format!(
                        "the fact extraction of session {session} was shown {token} as seq \
                         {seq}, stored at session {at_session} seq {at_seq}"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// No job of a living contact is dropped: a job the compactor skipped as erased
/// (at its `receives`th receive) belongs to a life that is gone, no live head of
/// `heads` (its tenant's contacts' heads now) holding its incarnation.
pub fn job_dropped(
    job: &Job,
    receives: u32,
    heads: &[Option<Head>],
    now: i64,
) -> Result<(), Violation> {
    let living = heads
        .iter()
        .flatten()
        .any(|head| head.incarnation.as_ref() == Some(job.incarnation()) && !head.expired_at(now));
    if living {
        return Err(Violation::new(
            NO_LIVING_JOB_DROPPED,
            format!(
                "a {} job of session {} was skipped as erased at its receive {receives}, \
                 and its contact's life lives",
                job.kind(),
                job.session()
            ),
        ));
    }
    Ok(())
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
