//! Expiry times follow the rules (`docs/DESIGN.md`, "Retention"), checked against
//! what the simulation configured, not against the TTLs the store holds (which the
//! other checks trust to say when a message may be gone):
//!
//! - **Nothing lives past its retention.** Every message, head and archive
//!   expires no later than now plus the longest transcript retention (after the
//!   idle timeout) its tenant was ever configured with, every fact no later than
//!   now plus the fact retention; each carries a TTL.
//! - **Nothing expires before its retention.** A round's message expires no
//!   earlier than the time its round began plus the retention its tenant had
//!   then: a TTL written short would let a client's stored round vanish early,
//!   and the check that it is still stored would take the TTL's word for it.

use degrau::memory::Snapshot;

use super::{ContactLog, Told, Violation, user_token};

/// The invariant's name.
pub const EXPIRY: &str = "expiry times follow the rules";

/// What a contact's tenant was configured with, for the expiry check.
#[derive(Debug, Clone, Copy, Default)]
pub struct Retention {
    /// The longest transcript retention (plus its idle timeout) the tenant ever
    /// had, in seconds.
    pub longest: i64,
    /// The fact retention, in seconds.
    pub facts: i64,
}

/// Checks every TTL of `snapshot` at `now` against the rules.
pub(super) fn check(
    log: &ContactLog,
    snapshot: &Snapshot,
    retention: Retention,
    now: i64,
) -> Result<(), Violation> {
    let ceiling = now.saturating_add(retention.longest);
    let over = |what: String, expires: Option<i64>, ceiling: i64| match expires {
        None => Err(Violation::new(EXPIRY, format!("{what} carries no TTL"))),
        Some(at) if at > ceiling => Err(Violation::new(
            EXPIRY,
            format!(
                "{what} expires at {at}, {} s past now plus the longest retention ({ceiling})",
                at - ceiling
            ),
        )),
        Some(_) => Ok(()),
    };
    if let Some(head) = &snapshot.head {
        over(
            format!("the head (session {})", head.session),
            head.expires_at,
            ceiling,
        )?;
    }
    for (message, expires) in &snapshot.messages {
        let what = format!("message {} of session {}", message.seq, message.session);
        over(what, *expires, ceiling)?;
    }
    for archive in &snapshot.archives {
        let what = format!("the archive of session {}", archive.session);
        over(what, Some(archive.expires_at), ceiling)?;
    }
    for (fact, expires) in &snapshot.facts {
        let what = format!("the fact {:?}", fact.key);
        over(what, *expires, now.saturating_add(retention.facts))?;
    }
    not_early(log, snapshot)
}

/// Each round told stored expires no earlier than its floor.
fn not_early(log: &ContactLog, snapshot: &Snapshot) -> Result<(), Violation> {
    for (message, expires) in &snapshot.messages {
        let Some(token) = user_token(message) else {
            continue;
        };
        let Some(sent) = log.sent.get(&token) else {
            continue;
        };
        let (Told::Stored { .. }, Some(floor), Some(at)) = (&sent.told, sent.floor, *expires)
        else {
            continue;
        };
        if at < floor {
            return Err(Violation::new(
                EXPIRY,
                format!(
                    "{token} expires at {at}, {} s before its round's time plus its \
                     tenant's retention then ({floor})",
                    floor - at
                ),
            ));
        }
    }
    Ok(())
}
