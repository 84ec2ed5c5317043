//! The liveness invariants, checked when the simulation quiesces: faults stop,
//! jobs flow, and then no contact is stuck, no message is forgotten, every idle
//! session is swept and every due facts job ran.

use std::collections::BTreeSet;

use degrau::deadline::Deadline;

use crate::client::ask;
use crate::model::{filler, tokens};
use crate::oracle::{Oracle, Told, Violation, user_token};
use crate::world::{self, World};
use crate::{ASK_BUDGET, Stats, UNSTUCK_ATTEMPTS, drain};

/// Faults stop and jobs flow; then the liveness invariants:
///
/// - **No contact is stuck**: each contact's next message answers 200 within
///   [`UNSTUCK_ATTEMPTS`].
/// - **No message is forgotten**: once jobs have flowed, every live message of an
///   open session is in the context its next request carries (the window or the
///   summary).
/// - **Every idle session is swept**: while the clock runs on with a sweep every
///   fifteen minutes, each session that goes idle, of a tenant with a usable
///   configuration, has its facts requested within the sweep's longest backoff.
/// - **Every due facts job ran**: and its extraction done (no facts job left
///   pending) once jobs have flowed.
pub(crate) async fn quiesce(
    world: &World,
    oracle: &mut Oracle,
    stats: &mut Stats,
) -> Result<(), Violation> {
    world.set_faults(0, 0, 0);
    world.model.set_quirks(false);
    world.queue.set_outage(false);
    world.queue.redrive();
    drain(world).await;

    for index in 0..world.contacts.len() {
        if world.unusable(index) {
            continue;
        }
        oracle.checks += 1;
        let mut last = None;
        for _ in 0..UNSTUCK_ATTEMPTS {
            let token = oracle.issue(index, world.now());
            let floor = world.now() + world.retention(index).longest;
            oracle.expires_no_earlier(index, &token, floor);
            stats.messages += 1;
            let text = format!("{token} {}", filler(40));
            let told = ask(world, index, &token, &text, false).await?;
            last = Some(told.clone());
            oracle.tell(index, &token, told);
            if matches!(last, Some(Told::Stored { .. })) {
                stats.rounds += 1;
                break;
            }
        }
        if !matches!(last, Some(Told::Stored { .. })) {
            return Err(Violation::new(
                "a contact is never stuck",
                format!(
                    "contact {index} got no 200 in {UNSTUCK_ATTEMPTS} asks once faults \
                     stopped ({last:?})"
                ),
            ));
        }
    }
    drain(world).await;
    forgotten(world, oracle).await?;
    crate::listing::listed(world, &mut oracle.checks).await?;
    swept(world, oracle).await
}

/// No message is forgotten (see [`quiesce`]).
async fn forgotten(world: &World, oracle: &mut Oracle) -> Result<(), Violation> {
    let now = world.now();
    for (index, key) in world.contacts.iter().enumerate() {
        if world.unusable(index) {
            continue;
        }
        oracle.checks += 1;
        let snapshot = world.memory.snapshot(key);
        let Some(head) = snapshot.head.filter(|head| !head.expired_at(now)) else {
            continue;
        };
        // A session idle past its tenant's timeout (as configured now) is
        // closed: the next request opens another, and the closed one is recall's.
        if now - head.last_activity >= world.idle_seconds(index) {
            continue;
        }
        let context = world
            .ask
            .context(key, Deadline::after(ASK_BUDGET))
            .await
            .map_err(|error| Violation::new("a contact is never stuck", error.to_string()))?;
        let carried: BTreeSet<String> =
            tokens(&serde_json::to_string(&context.context).unwrap_or_default())
                .into_iter()
                .collect();
        for (message, expires) in &snapshot.messages {
            if message.session != head.session
                || expires.is_some_and(|at| at <= now)
                || !head.of_this_life(message.created_at)
            {
                continue;
            }
            if let Some(token) = user_token(message)
                && !carried.contains(&token)
            {
                return Err(Violation::new(
                    crate::oracle::FORGOTTEN,
                    format!(
                        "contact {index}: {token} (session {}, seq {}) is neither in the window \
                         nor in the summary once jobs flowed (summarized_until {}, last_seq {})",
                        message.session, message.seq, head.summarized_until, head.last_seq
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Every idle session is swept (see [`quiesce`]): the clock runs on for the
/// sweep's longest backoff and an idle timeout, a sweep (and the jobs it
/// requests) every fifteen minutes.
async fn swept(world: &World, oracle: &mut Oracle) -> Result<(), Violation> {
    let period = degrau::plan::sweep::SWEEP_RETRY_MIN_SECONDS;
    let span = degrau::plan::sweep::SWEEP_RETRY_MAX_SECONDS + world::MAX_IDLE_MINUTES as i64 * 60;
    for _ in 0..span / period {
        world.advance(period);
        let _ = world
            .compactor
            .sweep(world.queue.as_ref(), world.now())
            .await;
        drain(world).await;
    }
    let now = world.now();
    for (index, key) in world.contacts.iter().enumerate() {
        oracle.checks += 1;
        let Some(head) = world.memory.snapshot(key).head else {
            continue;
        };
        if world.unusable(index) || head.expired_at(now) {
            continue;
        }
        if head.facts_requested != Some(head.session) {
            return Err(Violation::new(
                "every idle session is swept",
                format!(
                    "contact {index}: session {} idle for {} s, its facts not requested",
                    head.session,
                    now - head.last_activity
                ),
            ));
        }
        if let Some(pending) = &head.facts_pending {
            return Err(Violation::new(
                "every due facts job ran",
                format!(
                    "contact {index}: session {} idle for {} s, its facts requested and not \
                     extracted once jobs flowed ({pending:?})",
                    head.session,
                    now - head.last_activity
                ),
            ));
        }
    }
    Ok(())
}
