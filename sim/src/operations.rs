//! A step's operations at once: their tokens issued first, then their futures
//! joined in order on the one thread (each process may die at any of its awaits),
//! then what each came to told to the oracle.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use degrau::converse::AskError;

use crate::Stats;
use crate::client::{ask, record};
use crate::events::{self, Event};
use crate::model::filler;
use crate::oracle::{Landed, Oracle, Told, Violation};
use crate::world::{self, World};

/// What one operation of a step came to, for the oracle.
enum Done {
    /// A message and what its client was told.
    Sent {
        contact: usize,
        token: String,
        told: Told,
    },
    /// An erase that succeeded.
    Erased { contact: usize },
    /// An operator's correction and whether it landed.
    Corrected {
        contact: usize,
        token: String,
        landed: Landed,
    },
    /// Nothing the oracle records.
    Nothing,
}

/// Operations at once: their tokens issued first, then the futures joined in
/// order, then what each came to recorded.
/// One operation of a [`together`] burst, boxed to be polled beside the others.
type Operation<'a> = Pin<Box<dyn Future<Output = Result<Done, Violation>> + 'a>>;

pub(crate) async fn together(
    world: &World,
    oracle: &mut Oracle,
    ops: &[Event],
    stats: &mut Stats,
) -> Result<(), Violation> {
    let floors: Vec<u64> = (0..events::CONTACTS)
        .map(|contact| oracle.next_number(contact))
        .collect();
    let tokens: Vec<Option<String>> = ops
        .iter()
        .map(|op| match op {
            Event::Ask { contact, .. } | Event::Record { contact, .. } => {
                stats.messages += 1;
                let token = oracle.issue(*contact, world.now());
                let floor = world.now() + world.retention(*contact).longest;
                oracle.expires_no_earlier(*contact, &token, floor);
                Some(token)
            }
            Event::Correct { contact } => Some(oracle.issue_correction(*contact)),
            _ => None,
        })
        .collect();
    let futures: Vec<Operation<'_>> = ops
        .iter()
        .zip(&tokens)
        .map(|(op, token)| started(world, op, token.clone(), ops.len()))
        .collect();
    let done = join_all(futures).await;
    let mut erased = Vec::new();
    for result in done {
        match result? {
            Done::Sent {
                contact,
                token,
                told,
            } => {
                if matches!(told, Told::Stored { .. }) {
                    stats.rounds += 1;
                }
                oracle.tell(contact, &token, told);
            }
            Done::Erased { contact } => erased.push(contact),
            Done::Corrected {
                contact,
                token,
                landed,
            } => oracle.corrected(contact, &token, landed, floors[contact]),
            Done::Nothing => {}
        }
    }
    for contact in erased {
        let racing: BTreeSet<String> = ops
            .iter()
            .zip(&tokens)
            .filter_map(|(op, token)| match op {
                Event::Ask { contact: c, .. }
                | Event::Record { contact: c, .. }
                | Event::Correct { contact: c }
                    if *c == contact =>
                {
                    token.clone()
                }
                _ => None,
            })
            .collect();
        oracle.erase(contact, &racing);
    }
    Ok(())
}

/// `op` of a burst of `ops`, started when [`start_after`] says.
fn started<'a>(
    world: &'a World,
    op: &'a Event,
    token: Option<String>,
    ops: usize,
) -> Operation<'a> {
    let start = start_after(ops);
    Box::pin(async move {
        tokio::time::sleep(start).await;
        mortal(world, op, token).await
    })
}

/// When an operation of a burst of `ops` starts: at once, or (one in two, when
/// there are several) up to three seconds on, so the clock moves inside the burst
/// and an operation may begin in a later second than another's store call (an
/// erase's passes, a turn's two reads).
fn start_after(ops: usize) -> Duration {
    if ops < 2 || fastrand::bool() {
        return Duration::ZERO;
    }
    Duration::from_millis(fastrand::u64(0..3_000))
}

/// Polls every future in order until all are ready: one thread, one order.
async fn join_all<'a, T>(mut futures: Vec<Pin<Box<dyn Future<Output = T> + 'a>>>) -> Vec<T> {
    let mut results: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|context| {
        for (future, result) in futures.iter_mut().zip(results.iter_mut()) {
            if result.is_none()
                && let Poll::Ready(value) = future.as_mut().poll(context)
            {
                *result = Some(value);
            }
        }
        if results.iter().all(Option::is_some) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

/// Whether the next operation's process dies, and after how long: the chance
/// the plan set, at a moment drawn over the time an operation takes.
fn dies(world: &World) -> Option<Duration> {
    let percent = world
        .crash_percent
        .load(std::sync::atomic::Ordering::Relaxed);
    (percent > 0 && fastrand::u64(0..100) < percent)
        .then(|| Duration::from_millis(fastrand::u64(0..8_000)))
}

/// `op`, whose process may die at any of its awaits: what it left (claims,
/// leases, a half-done round, a batch in flight) stays as it is, and its client
/// gets no answer.
async fn mortal(world: &World, op: &Event, token: Option<String>) -> Result<Done, Violation> {
    let Some(after) = dies(world).filter(|_| !matches!(op, Event::Erase { .. })) else {
        return operate(world, op, token).await;
    };
    match tokio::time::timeout(after, operate(world, op, token.clone())).await {
        Ok(done) => done,
        Err(_) => {
            world::Counts::bump(&world.counts.crashes);
            Ok(match (op, token) {
                (Event::Ask { contact, .. } | Event::Record { contact, .. }, Some(token)) => {
                    Done::Sent {
                        contact: *contact,
                        token,
                        told: Told::Unknown("its process died".into()),
                    }
                }
                (Event::Correct { contact }, Some(token)) => Done::Corrected {
                    contact: *contact,
                    token,
                    landed: Landed::Unknown,
                },
                _ => Done::Nothing,
            })
        }
    }
}

/// One operation, to its end: what it came to.
async fn operate(world: &World, op: &Event, token: Option<String>) -> Result<Done, Violation> {
    match (op, token) {
        (
            Event::Ask {
                contact,
                idempotent,
                chars,
            },
            Some(token),
        ) => {
            let text = format!("{token} {}", filler(*chars));
            let told = ask(world, *contact, &token, &text, *idempotent).await?;
            Ok(Done::Sent {
                contact: *contact,
                token,
                told,
            })
        }
        (
            Event::Record {
                contact,
                tool,
                chars,
            },
            Some(token),
        ) => {
            let text = format!("{token} {}", filler(*chars));
            let told = record(world, *contact, &token, &text, *tool).await?;
            Ok(Done::Sent {
                contact: *contact,
                token,
                told,
            })
        }
        (Event::Correct { contact }, Some(token)) => Ok(correct(world, *contact, token).await),
        (Event::Deliver, _) => {
            world.queue.deliver(&world.compactor).await;
            Ok(Done::Nothing)
        }
        (Event::Sweep, _) => {
            // A failed sweep is logged and retried by the schedule: nothing to record.
            let _ = world
                .compactor
                .sweep(world.queue.as_ref(), world.now())
                .await;
            Ok(Done::Nothing)
        }
        (Event::Erase { contact }, _) => erase(world, *contact).await,
        _ => Ok(Done::Nothing),
    }
}

/// An operator's correction of the contact's `name` fact to `token`, and whether
/// it landed.
async fn correct(world: &World, contact: usize, token: String) -> Done {
    let name = degrau::domain::FactKey::parse("name").expect("a valid key");
    let landed = match world
        .operate
        .set_fact(&world.contacts[contact], &name, &token, "operator")
        .await
    {
        Ok(record) => Landed::Yes {
            expires_at: record.expires_at.unwrap_or(i64::MAX),
        },
        // The store failed around the write: it may have landed.
        Err(AskError::Store(_)) => Landed::Unknown,
        // No contact yet, a race lost, a broken tenant: nothing written.
        Err(_) => Landed::No,
    };
    Done::Corrected {
        contact,
        token,
        landed,
    }
}

/// An erase of the contact, retried until it answers.
async fn erase(world: &World, contact: usize) -> Result<Done, Violation> {
    // A client retries an erase until it answers, a second or so apart: it is
    // idempotent. An attempt's process may die half-way.
    for attempt in 0..20 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(500..2_000))).await;
        }
        let attempt = world.records.erase(&world.contacts[contact]);
        let answered = match dies(world) {
            Some(after) => match tokio::time::timeout(after, attempt).await {
                Ok(answer) => answer,
                Err(_) => {
                    world::Counts::bump(&world.counts.crashes);
                    continue;
                }
            },
            None => attempt.await,
        };
        if answered.is_ok() {
            return Ok(Done::Erased { contact });
        }
    }
    Err(Violation::new(
        "a contact is never stuck",
        format!("contact {contact} could not be erased in 20 attempts"),
    ))
}
