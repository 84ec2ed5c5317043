//! Each tenant's fair share of the deployment, and a public number's limits: the
//! decisions, over the counters and leases of the [`Quotas`] port. The limits are
//! the platform's ([`crate::platform::FairShare`], [`crate::platform::NumberLimits`]);
//! a tenant cannot change them.
//!
//! * **Concurrency.** An ask or a stream holds one of its tenant's leases while it
//!   runs (a conditional write of a lease item with an expiry, given back when the
//!   round ends, whatever its outcome; a lease whose holder crashed stops counting
//!   at its expiry, the request's time budget and a margin). A tenant whose webhook
//!   tool sleeps holds at most its own leases, never the functions' whole
//!   concurrency.
//! * **Rates.** Rounds a tenant starts per minute, turns a contact starts per
//!   minute: a counter per fixed window (the minute), conditionally incremented.
//! * **Tool time.** The tool calls of one round share [`ToolTime`]: each call gets
//!   at most what is left of it, and a call past it is not made (the model reads
//!   why), so a slow tool holds an instance for a bounded time.
//! * **A public WhatsApp number.** Turns one number answers per hour (spent instead
//!   of the tenant's API rounds, so strangers on the number cannot spend the
//!   business's own API), turns one sender starts per minute, and senders with no
//!   conversation yet whose first turn a number answers per hour.
//!
//! A refusal is a [`Throttle`]: what was limited, the limit, and when to retry.
//! Nothing of the round is written: an API request answers 429 `rate_limited` with
//! `Retry-After`; a WhatsApp turn waits in the queue until then.

use std::time::{Duration, Instant};

use crate::deadline::Deadline;
use crate::domain::TenantId;
use crate::platform::{FairShare, NumberLimits};
use crate::quota::{Counter, CounterScope, Quotas};
use crate::store::{ContactKey, StoreError};

/// A minute's window.
pub const MINUTE: i64 = 60;
/// An hour's window.
pub const HOUR: i64 = 3_600;
/// How long a lease outlives its request's time budget before it stops counting:
/// the holder had its chance to give it back.
pub const LEASE_MARGIN_SECONDS: i64 = 5;

/// What a limit refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    /// The tenant's asks and streams running at once.
    Concurrency,
    /// The tenant's rounds per minute.
    TenantRounds,
    /// One contact's turns per minute.
    ContactTurns,
    /// One business number's WhatsApp turns per hour.
    NumberTurns,
    /// One sender's WhatsApp turns per minute.
    SenderTurns,
    /// A number's new senders per hour.
    NewSenders,
}

impl Limited {
    /// A short, stable name (logs, metrics, the counters' names).
    pub fn as_str(self) -> &'static str {
        match self {
            Limited::Concurrency => "concurrency",
            Limited::TenantRounds => "rounds_per_minute",
            Limited::ContactTurns => "contact_turns_per_minute",
            Limited::NumberTurns => "number_turns_per_hour",
            Limited::SenderTurns => "sender_turns_per_minute",
            Limited::NewSenders => "new_senders_per_hour",
        }
    }

    /// What the limit counts, for a message.
    fn describe(self) -> &'static str {
        match self {
            Limited::Concurrency => "asks and streams of this tenant at once",
            Limited::TenantRounds => "rounds of this tenant a minute",
            Limited::ContactTurns => "turns of this contact a minute",
            Limited::NumberTurns => "WhatsApp turns of this number an hour",
            Limited::SenderTurns => "WhatsApp turns of this sender a minute",
            Limited::NewSenders => "new WhatsApp senders of this number an hour",
        }
    }
}

/// A limit refused: what, its value, and the seconds until it may allow again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the platform allows {limit} {} ; nothing was stored, retry in {retry_after} s", .what.describe())]
pub struct Throttle {
    /// What was limited.
    pub what: Limited,
    /// The limit.
    pub limit: u32,
    /// Seconds until it may allow again (at least 1).
    pub retry_after: u64,
}

/// Seconds from `now` to the end of its `window`-long window (at least 1).
pub fn window_left(now: i64, window: i64) -> u64 {
    let start = now.div_euclid(window) * window;
    u64::try_from(start + window - now).unwrap_or(1).max(1)
}

/// Counts one use of `name` in `scope` within the current `window`, under
/// `limit` (none: nothing counted, always allowed).
async fn count(
    quotas: &dyn Quotas,
    (scope, name): (CounterScope, String),
    (what, limit): (Limited, Option<u32>),
    window: i64,
    now: i64,
) -> Result<Result<(), Throttle>, StoreError> {
    let Some(limit) = limit else {
        return Ok(Ok(()));
    };
    let start = now.div_euclid(window) * window;
    let counter = Counter {
        scope,
        name,
        window: start,
    };
    let counted = quotas
        .try_count(&counter, limit, start + 2 * window)
        .await?;
    Ok(match counted {
        true => Ok(()),
        false => Err(Throttle {
            what,
            limit,
            retry_after: window_left(now, window),
        }),
    })
}

/// The per-minute rates of a round of `key`'s: the tenant's rounds, then the
/// contact's turns.
pub async fn rates(
    quotas: &dyn Quotas,
    key: &ContactKey,
    fair: &FairShare,
    now: i64,
) -> Result<Result<(), Throttle>, StoreError> {
    let tenant = CounterScope::Tenant(key.tenant.clone());
    let rounds = (Limited::TenantRounds, fair.rounds_per_minute);
    if let Err(throttle) = count(quotas, (tenant, "rounds".into()), rounds, MINUTE, now).await? {
        return Ok(Err(throttle));
    }
    let contact = CounterScope::Contact(key.clone());
    let turns = (Limited::ContactTurns, fair.contact_turns_per_minute);
    count(quotas, (contact, "turns".into()), turns, MINUTE, now).await
}

/// A lease held by an ask or a stream, to give back when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    tenant: TenantId,
    id: String,
}

/// Takes one of the tenant's leases for a request answered by `deadline` (none
/// needed without a concurrency limit).
pub async fn lease(
    quotas: &dyn Quotas,
    tenant: &TenantId,
    fair: &FairShare,
    now: i64,
    deadline: Deadline,
) -> Result<Result<Option<Lease>, Throttle>, StoreError> {
    let Some(limit) = fair.concurrency else {
        return Ok(Ok(None));
    };
    let id = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let budget = i64::try_from(deadline.remaining().as_secs()).unwrap_or(i64::MAX);
    let expires_at = now
        .saturating_add(budget)
        .saturating_add(LEASE_MARGIN_SECONDS);
    let taken = quotas
        .acquire_lease(tenant, &id, limit, now, expires_at)
        .await?;
    Ok(match taken {
        true => Ok(Some(Lease {
            tenant: tenant.clone(),
            id,
        })),
        // A lease frees when a round ends: a second is a fair guess.
        false => Err(Throttle {
            what: Limited::Concurrency,
            limit,
            retry_after: 1,
        }),
    })
}

/// Gives a lease back; one that cannot be (storage failing) stops counting at its
/// expiry, which the caller logs.
pub async fn release(quotas: &dyn Quotas, lease: &Lease) -> Result<(), StoreError> {
    quotas.release_lease(&lease.tenant, &lease.id).await
}

/// The limits of a WhatsApp turn of `key` on the business number `phone` (its
/// `phone_number_id`, digits: a business's, never a person's): the
/// sender's rate, a new sender's allowance (when `known` is false: the tenant has
/// no conversation with it), then the number's hourly budget.
pub async fn whatsapp_turn(
    quotas: &dyn Quotas,
    key: &ContactKey,
    phone: &str,
    limits: &NumberLimits,
    known: bool,
    now: i64,
) -> Result<Result<(), Throttle>, StoreError> {
    let sender = CounterScope::Contact(key.clone());
    let turns = (Limited::SenderTurns, limits.sender_turns_per_minute);
    if let Err(throttle) = count(quotas, (sender, "wa_turns".into()), turns, MINUTE, now).await? {
        return Ok(Err(throttle));
    }
    let tenant = || CounterScope::Tenant(key.tenant.clone());
    if !known {
        let new = (Limited::NewSenders, limits.new_senders_per_hour);
        let name = format!("wa_new#{phone}");
        if let Err(throttle) = count(quotas, (tenant(), name), new, HOUR, now).await? {
            return Ok(Err(throttle));
        }
    }
    let budget = (Limited::NumberTurns, limits.turns_per_hour);
    let name = format!("wa_turns#{phone}");
    count(quotas, (tenant(), name), budget, HOUR, now).await
}

/// The tool time of one round: each call gets at most what is left, and none is
/// made once it is spent.
#[derive(Debug, Clone, Copy)]
pub struct ToolTime {
    left: Option<Duration>,
}

impl ToolTime {
    /// `seconds` for the round's tool calls in all (none: no limit).
    pub fn new(seconds: Option<u32>) -> ToolTime {
        ToolTime {
            left: seconds.map(|s| Duration::from_secs(u64::from(s))),
        }
    }

    /// The deadline of the next call: `deadline`, or sooner when less tool time is
    /// left; `None` when none is (the call is not made).
    pub fn deadline(&self, deadline: Deadline) -> Option<Deadline> {
        match self.left {
            None => Some(deadline),
            Some(left) if left.is_zero() => None,
            Some(left) => Some(deadline.earlier(Deadline::after(left))),
        }
    }

    /// Counts a call that started at `started` against what is left.
    pub fn spend(&mut self, started: Instant) {
        if let Some(left) = &mut self.left {
            *left = left.saturating_sub(started.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ContactId;
    use crate::quota::memory::MemoryQuotas;

    fn key(contact: &str) -> ContactKey {
        ContactKey {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse(contact).unwrap(),
        }
    }

    #[tokio::test]
    async fn rates_count_per_minute_and_refuse_past_the_limit_until_the_next() {
        let quotas = MemoryQuotas::new();
        let fair = FairShare {
            rounds_per_minute: Some(3),
            contact_turns_per_minute: Some(2),
            ..FairShare::default()
        };
        let now = 1_800_000_010;
        for _ in 0..2 {
            assert!(
                rates(&quotas, &key("ana"), &fair, now)
                    .await
                    .unwrap()
                    .is_ok()
            );
        }
        let contact = rates(&quotas, &key("ana"), &fair, now).await.unwrap();
        assert_eq!(
            contact.unwrap_err(),
            Throttle {
                what: Limited::ContactTurns,
                limit: 2,
                retry_after: 50
            }
        );
        // The refused round counted as the tenant's third of the minute (a round
        // refused by the contact's rate is still one the tenant started): none more.
        let tenant = rates(&quotas, &key("bia"), &fair, now).await.unwrap();
        assert_eq!(tenant.unwrap_err().what, Limited::TenantRounds);
        assert!(
            rates(&quotas, &key("ana"), &fair, now + 50)
                .await
                .unwrap()
                .is_ok()
        );
        let none = FairShare::default();
        for _ in 0..100 {
            assert!(
                rates(&quotas, &key("ana"), &none, now)
                    .await
                    .unwrap()
                    .is_ok()
            );
        }
    }

    #[tokio::test]
    async fn leases_are_held_to_the_limit_given_back_and_an_expired_one_no_longer_counts() {
        let quotas = MemoryQuotas::new();
        let tenant = TenantId::parse("barber").unwrap();
        let fair = FairShare {
            concurrency: Some(2),
            ..FairShare::default()
        };
        let now = 1_800_000_000;
        let ten = Deadline::after(Duration::from_secs(10));
        let a = lease(&quotas, &tenant, &fair, now, ten)
            .await
            .unwrap()
            .unwrap();
        let b = lease(&quotas, &tenant, &fair, now, ten)
            .await
            .unwrap()
            .unwrap();
        let refused = lease(&quotas, &tenant, &fair, now, ten).await.unwrap();
        assert_eq!(refused.unwrap_err().what, Limited::Concurrency);
        release(&quotas, &a.unwrap()).await.unwrap();
        assert!(
            lease(&quotas, &tenant, &fair, now, ten)
                .await
                .unwrap()
                .is_ok()
        );
        // The holders crash: their leases stop counting once expired.
        let later = now + 10 + LEASE_MARGIN_SECONDS;
        assert!(
            lease(&quotas, &tenant, &fair, later, ten)
                .await
                .unwrap()
                .is_ok()
        );
        assert!(b.is_some());
        // Another tenant is not held by these.
        let other = TenantId::parse("florist").unwrap();
        assert!(
            lease(&quotas, &other, &fair, now, ten)
                .await
                .unwrap()
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_new_sender_spends_the_numbers_new_sender_allowance_and_a_known_one_does_not() {
        let quotas = MemoryQuotas::new();
        let phone = "100000000000001";
        let limits = NumberLimits {
            turns_per_hour: Some(3),
            sender_turns_per_minute: Some(1),
            new_senders_per_hour: Some(1),
        };
        let now = 1_800_000_000;
        let turn = |contact: &str, known| {
            let key = key(contact);
            let (quotas, limits) = (&quotas, &limits);
            async move { whatsapp_turn(quotas, &key, phone, limits, known, now).await }
        };
        assert!(turn("15550000001", false).await.unwrap().is_ok());
        let stranger = turn("15550000002", false).await.unwrap();
        assert_eq!(stranger.unwrap_err().what, Limited::NewSenders);
        let again = turn("15550000001", true).await.unwrap();
        assert_eq!(again.unwrap_err().what, Limited::SenderTurns);
        assert!(turn("15550000003", true).await.unwrap().is_ok());
        assert!(turn("15550000004", true).await.unwrap().is_ok());
        let spent = turn("15550000005", true).await.unwrap().unwrap_err();
        assert_eq!(
            (spent.what, spent.retry_after),
            (Limited::NumberTurns, 3_600)
        );
    }

    #[test]
    fn tool_time_gives_each_call_what_is_left_and_no_call_once_spent() {
        let deadline = Deadline::after(Duration::from_secs(20));
        assert_eq!(ToolTime::new(None).deadline(deadline), Some(deadline));
        let mut time = ToolTime::new(Some(5));
        let first = time.deadline(deadline).unwrap();
        assert!(first < deadline);
        time.left = Some(Duration::ZERO);
        assert_eq!(time.deadline(deadline), None);
        let mut untouched = ToolTime::new(Some(5));
        untouched.spend(Instant::now());
        assert!(untouched.deadline(deadline).is_some());
    }
}
