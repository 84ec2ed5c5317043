//! The session rules `ask` and the compactor share: the clock they read, and when a
//! session is idle. A contact's session closes after the tenant's idle timeout
//! without messages; `ask` then opens a new one (see `ask`'s turn plan) and the
//! sweep requests the closed one's facts (see `compactor`). Both decide with
//! [`idle_since`], so they never disagree about which sessions are closed.
//! (`docs/DESIGN.md`: "The flows", sessions and the sweep.)

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::domain::Head;

/// A source of the current time (seconds since the Unix epoch); injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(unix_now)
}

/// The system time in seconds since the Unix epoch (0 before it, saturating far
/// after it).
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

/// True when a session last active at `last_activity` is closed at `now` under the
/// tenant's idle timeout (`session_idle_minutes`): the one rule `ask` and the sweep
/// share.
pub fn idle_since(last_activity: i64, now: i64, idle_minutes: u64) -> bool {
    now.saturating_sub(last_activity) >= idle_seconds(idle_minutes)
}

/// True when the head's session is closed at `now` ([`idle_since`] of its last
/// activity). A session that holds no message (one a close on request just
/// opened, `ask/close.rs`) never goes idle: there is nothing to close.
pub fn idle(head: &Head, now: i64, idle_minutes: u64) -> bool {
    head.last_seq > 0 && idle_since(head.last_activity, now, idle_minutes)
}

/// An idle timeout in seconds, saturating.
pub fn idle_seconds(minutes: u64) -> i64 {
    i64::try_from(minutes.saturating_mul(60)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_goes_idle_after_the_timeout_unless_it_holds_no_message() {
        let head = |last_seq| Head {
            session: 2,
            last_seq,
            last_activity: 1_000,
            ..Head::default()
        };
        assert!(!idle(&head(4), 1_000 + 30 * 60 - 1, 30));
        assert!(idle(&head(4), 1_000 + 30 * 60, 30));
        // A session a close on request opened: nothing to close, however long.
        assert!(!idle(&head(0), 1_000 + 365 * 24 * 3600, 30));
    }
}
