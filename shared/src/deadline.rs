//! One time budget per request: a [`Deadline`] is the point in time by which a piece
//! of work must be done, handed down from the function's handler to every model call,
//! retry, wait and tool call of the request.
//!
//! It lives on [`tokio::time::Instant`], so tests run under `tokio::time::pause()`
//! and nothing in them sleeps for real. A Lambda invocation's deadline arrives as a
//! wall-clock time ([`Deadline::from_system_time`]); it is turned into an instant
//! once, when the invocation starts, and everything after that reads the monotonic
//! clock.
//!
//! (`docs/DESIGN.md`: "The time budget".)

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// The point in time by which some work must be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline at `instant`.
    pub fn at(instant: Instant) -> Self {
        Deadline(instant)
    }

    /// The deadline `budget` from now.
    pub fn after(budget: Duration) -> Self {
        Deadline(Instant::now() + budget)
    }

    /// A wall-clock deadline (the Lambda context's), read against the system clock
    /// now. A time already past is a deadline now.
    pub fn from_system_time(at: SystemTime) -> Self {
        let left = at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        Deadline::after(left)
    }

    /// The deadline a Lambda context carries, in milliseconds since the Unix epoch
    /// (`Lambda-Runtime-Deadline-Ms`), read when the invocation starts. `None` when it
    /// carries none that can be true: 0 (a context built by hand, in tests), or a time
    /// already past, which Lambda never hands out but local runners do (`cargo lambda
    /// watch` sends a fixed 600000, ten minutes into 1970).
    pub fn from_epoch_millis(millis: u64) -> Option<Self> {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(millis);
        (millis > 0 && at > SystemTime::now()).then(|| Deadline::from_system_time(at))
    }

    /// The instant itself.
    pub fn instant(&self) -> Instant {
        self.0
    }

    /// Time left; zero once past.
    pub fn remaining(&self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// True once the deadline has come.
    pub fn is_past(&self) -> bool {
        Instant::now() >= self.0
    }

    /// The earlier of the two.
    pub fn earlier(self, other: Deadline) -> Deadline {
        self.min(other)
    }

    /// The deadline `margin` before this one (work that must leave `margin` for what
    /// comes after it).
    pub fn before(self, margin: Duration) -> Deadline {
        Deadline(
            self.0
                .checked_sub(margin)
                .unwrap_or(self.0.min(Instant::now())),
        )
    }

    /// True when at least `needed` is left.
    pub fn allows(&self, needed: Duration) -> bool {
        self.remaining() >= needed
    }

    /// Runs `work` until it is done or the deadline comes, whichever is first;
    /// `None` when the deadline came first (the work is dropped where it stood).
    pub async fn run<F: std::future::Future>(self, work: F) -> Option<F::Output> {
        tokio::time::timeout_at(self.0, work).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remaining_time_runs_down_with_the_clock() {
        let deadline = Deadline::after(Duration::from_secs(10));
        assert_eq!(deadline.remaining(), Duration::from_secs(10));
        assert!(!deadline.is_past());
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(deadline.remaining(), Duration::from_secs(6));
        assert!(deadline.allows(Duration::from_secs(6)));
        assert!(!deadline.allows(Duration::from_secs(7)));
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert_eq!(deadline.remaining(), Duration::ZERO);
        assert!(deadline.is_past());
    }

    #[tokio::test(start_paused = true)]
    async fn earlier_and_before_combine_budgets() {
        let long = Deadline::after(Duration::from_secs(25));
        let short = Deadline::after(Duration::from_secs(8));
        assert_eq!(long.earlier(short), short);
        assert_eq!(short.earlier(long), short);
        assert_eq!(
            long.before(Duration::from_secs(2)).remaining(),
            Duration::from_secs(23)
        );
        assert!(short.before(Duration::from_secs(30)).remaining().is_zero());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wall_clock_deadline_becomes_the_time_left_now() {
        let in_a_minute = SystemTime::now() + Duration::from_secs(60);
        let deadline = Deadline::from_system_time(in_a_minute);
        let left = deadline.remaining();
        assert!(
            left <= Duration::from_secs(60) && left > Duration::from_secs(59),
            "{left:?}"
        );
        let gone = Deadline::from_system_time(SystemTime::UNIX_EPOCH);
        assert!(gone.is_past());
        assert_eq!(Deadline::from_epoch_millis(0), None);
        assert_eq!(
            Deadline::from_epoch_millis(600_000),
            None,
            "cargo lambda watch's fixed value is no deadline"
        );
        let millis = in_a_minute
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let from_millis = Deadline::from_epoch_millis(millis).unwrap();
        assert!(from_millis.remaining() > Duration::from_secs(59));
    }
}
