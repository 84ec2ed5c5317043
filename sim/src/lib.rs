//! degrau's simulator: a deterministic, seeded simulation of the whole memory under
//! faults, in the manner of FoundationDB's simulation and TigerBeetle's VOPR. A
//! seed generates a [`Plan`] (weeks of events over a few contacts of three
//! tenants); the plan runs the core's `ask`, recorded rounds, steps, facts jobs,
//! the sweep and erasure over the in-memory store with DynamoDB's semantics turned
//! on (TTL deleting in any order, indexes that lag, Queries that see part of a
//! transaction), a simulated model, a simulated SQS FIFO queue and one clock; and
//! after every event the [`oracle`] checks the invariants. A failing plan is shrunk
//! to the shortest list of events that still fails, and can be replayed exactly.
//!
//! Everything runs on one thread under tokio's paused clock: operations "at once"
//! are futures joined in order, interleaving wherever the store yields, so the
//! seed decides every interleaving and every timeout.
//!
//! Layout: [`events`] (the plan), [`world`] (the deployment), [`model`] (the
//! simulated Messages API), [`faults`] (the store's failures), [`queue`] (SQS
//! FIFO and the compactor's batches), [`oracle`] (the invariants); this file runs a
//! plan and shrinks a failing one.
//!
//! (`docs/DESIGN.md`, "The simulator"; docs/reliability.md.)

mod client;
pub mod events;
pub mod faults;
mod liveness;
pub mod model;
pub mod oracle;
pub mod queue;
pub mod tools;
pub mod world;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use client::{ask, record};
use degrau::converse::AskError;

pub use events::{Event, Plan, Step, generate};
use model::filler;
pub use oracle::Violation;
use oracle::{Landed, Oracle, Told, user_token};
use world::World;

/// `ask`'s own time budget (`ASK_TIMEOUT_SECONDS`).
const ASK_BUDGET: Duration = Duration::from_secs(25);
/// API Gateway's: the client gets a 503 after this, whatever the function does.
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(29);
/// Asks a contact gets, once faults stop, to answer 200.
const UNSTUCK_ATTEMPTS: usize = 3;

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events played.
    pub events: u64,
    /// Invariant checks made (one per contact per event, and each liveness check).
    pub checks: u64,
    /// Messages the clients sent.
    pub messages: u64,
    /// Rounds stored (told so).
    pub rounds: u64,
    /// Model calls.
    pub model_calls: u64,
    /// Simulated seconds.
    pub seconds: i64,
    /// Operations whose process died at an await.
    pub crashes: u64,
    /// Writes that landed after their caller was told they failed.
    pub late_writes: u64,
    /// Store calls refused or whose answers were lost.
    pub store_faults: u64,
    /// Model answers with a quirk of the corpus.
    pub quirks: u64,
    /// Live changes of a tenant's configuration.
    pub config_changes: u64,
}

impl Stats {
    /// `other` added to these.
    pub fn add(&mut self, other: &Stats) {
        self.events += other.events;
        self.checks += other.checks;
        self.messages += other.messages;
        self.rounds += other.rounds;
        self.model_calls += other.model_calls;
        self.seconds += other.seconds;
        self.crashes += other.crashes;
        self.late_writes += other.late_writes;
        self.store_faults += other.store_faults;
        self.quirks += other.quirks;
        self.config_changes += other.config_changes;
    }
}

/// A plan that broke an invariant.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The index of the step after which the invariant was found broken.
    pub step: usize,
    /// What broke.
    pub violation: Violation,
    /// Every contact's head and messages when it broke, one line each, to read
    /// beside the events.
    pub state: String,
}

/// Runs `plan`, checking the invariants after every step.
pub fn run(plan: &Plan) -> Result<Stats, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(play(plan))
}

async fn play(plan: &Plan) -> Result<Stats, Failure> {
    degrau::metrics::set_muted(true);
    let mut world = World::new(plan.window, events::CONTACTS).await;
    let mut oracle = Oracle::new(events::CONTACTS);
    let mut stats = Stats::default();
    for (index, step) in plan.steps.iter().enumerate() {
        fastrand::seed(step.seed);
        let mut result = play_step(&mut world, &mut oracle, &step.event, &mut stats).await;
        if result.is_ok() {
            // The indexes usually catch up within the event; sometimes not.
            if fastrand::u8(0..10) < 8 {
                world.memory.sync_indexes();
            }
            result = check_all(&world, &mut oracle);
        }
        if let Err(violation) = result {
            return Err(Failure {
                step: index,
                violation,
                state: describe(&world),
            });
        }
        stats.events += 1;
    }
    stats.checks = oracle.checks;
    stats.model_calls = world.model.calls();
    stats.seconds = world.now() - world::START;
    [
        stats.crashes,
        stats.late_writes,
        stats.store_faults,
        stats.quirks,
        stats.config_changes,
    ] = world.counts.read();
    Ok(stats)
}

/// Every contact's head and messages (`seq:role:token?:expires-in`), one line
/// each.
fn describe(world: &World) -> String {
    let now = world.now();
    let mut lines = vec![format!(
        "now {now}, queue {:?}, outage {}",
        world.queue.depth(),
        world.queue.outage()
    )];
    for (index, key) in world.contacts.iter().enumerate() {
        let snapshot = world.memory.snapshot(key);
        let head = snapshot.head.as_ref().map(|head| {
            format!(
                "session {} last_seq {} summarized_until {} hard_cap_at {:?} context {} \
                 expires_in {:?} requested {:?} pending {:?} summary {:?}",
                head.session,
                head.last_seq,
                head.summarized_until,
                head.hard_cap_at,
                head.last_context_tokens,
                head.expires_at.map(|at| at - now),
                head.facts_requested,
                head.facts_pending,
                head.summary
            )
        });
        let messages: Vec<String> = snapshot
            .messages
            .iter()
            .map(|(message, expires)| {
                format!(
                    "{}.{}{}{}{}",
                    message.session,
                    message.seq,
                    match message.role {
                        degrau::domain::Role::User => "u",
                        degrau::domain::Role::Assistant => "a",
                    },
                    user_token(message).map_or(String::new(), |t| format!(":{t}")),
                    expires.map_or(String::new(), |at| format!("@{}", at - now))
                )
            })
            .collect();
        lines.push(format!(
            "contact {index} ({}): head {head:?}\n    messages {}",
            key.tenant,
            messages.join(" ")
        ));
    }
    lines.push(format!(
        "last deliveries:\n    {}",
        world.queue.log().join("\n    ")
    ));
    lines.join("\n")
}

/// The safety invariants over every contact, and what the model saw.
fn check_all(world: &World, oracle: &mut Oracle) -> Result<(), Violation> {
    if let Some((invariant, seen)) = world.model.take_violations().into_iter().next() {
        return Err(Violation::new(invariant, seen));
    }
    let now = world.now();
    for (index, key) in world.contacts.iter().enumerate() {
        oracle.check(index, &world.memory.snapshot(key), now)?;
    }
    Ok(())
}

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

async fn play_step(
    world: &mut World,
    oracle: &mut Oracle,
    event: &Event,
    stats: &mut Stats,
) -> Result<(), Violation> {
    world.model.set_quirks(true);
    match event {
        Event::Advance { seconds } => world.advance(*seconds),
        Event::Expire { count } => {
            let expired = world.memory.expired_items(world.now());
            for _ in 0..*count {
                if expired.is_empty() {
                    break;
                }
                let (key, item) = &expired[fastrand::usize(..expired.len())];
                world.memory.ttl_delete(key, item);
            }
        }
        Event::SyncIndexes => world.memory.sync_indexes(),
        Event::Outage { on } => world.queue.set_outage(*on),
        Event::Faults {
            model,
            store,
            queue,
            crash,
        } => {
            world.set_faults(*model, *store, *queue);
            world.set_crashes(*crash);
        }
        Event::Reconfigure { tenant, settings } => world.reconfigure(*tenant, *settings).await,
        Event::Redrive => {
            world.queue.redrive();
        }
        Event::BreakTenant { on } => world.break_tenant(*on).await,
        Event::Quiesce => liveness::quiesce(world, oracle, stats).await?,
        Event::Together { ops } => together(world, oracle, ops, stats).await?,
        op => together(world, oracle, std::slice::from_ref(op), stats).await?,
    }
    Ok(())
}

/// Operations at once: their tokens issued first, then the futures joined in
/// order, then what each came to recorded.
/// One operation of a [`together`] burst, boxed to be polled beside the others.
type Operation<'a> = Pin<Box<dyn Future<Output = Result<Done, Violation>> + 'a>>;

async fn together(
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
                Some(oracle.issue(*contact))
            }
            Event::Correct { contact } => Some(oracle.issue_correction(*contact)),
            _ => None,
        })
        .collect();
    let futures: Vec<Operation<'_>> = ops
        .iter()
        .zip(&tokens)
        .map(|(op, token)| Box::pin(mortal(world, op, token.clone())) as Operation<'_>)
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
        (Event::Correct { contact }, Some(token)) => {
            let name = degrau::domain::FactKey::parse("name").expect("a valid key");
            let landed = match world
                .operate
                .set_fact(&world.contacts[*contact], &name, &token, "operator")
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
            Ok(Done::Corrected {
                contact: *contact,
                token,
                landed,
            })
        }
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
        (Event::Erase { contact }, _) => {
            // A client retries an erase until it answers: it is idempotent. An
            // attempt's process may die half-way.
            for _ in 0..20 {
                let attempt = world.records.erase(&world.contacts[*contact]);
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
                    return Ok(Done::Erased { contact: *contact });
                }
            }
            Err(Violation::new(
                "a contact is never stuck",
                format!("contact {contact} could not be erased in 20 attempts"),
            ))
        }
        _ => Ok(Done::Nothing),
    }
}

/// Jobs flow until the queue is empty (moving the clock to the next visible job
/// when every job left is in flight).
pub(crate) async fn drain(world: &World) {
    for _ in 0..200 {
        world.memory.sync_indexes();
        if world.queue.any_deliverable() {
            world.queue.deliver(&world.compactor).await;
        } else if let Some(next) = world.queue.next_visible() {
            world.advance((next - world.now()).max(1));
        } else {
            return;
        }
    }
}

/// The shortest plan found (within `budget` runs) that still breaks the same
/// invariant as `failure`, and its failure: steps are taken out in chunks, halving
/// the chunk until single steps (delta debugging).
pub fn shrink(plan: &Plan, failure: &Failure, budget: usize) -> (Plan, Failure) {
    let mut best = plan.clone();
    best.steps.truncate(failure.step + 1);
    let mut best_failure = failure.clone();
    let mut runs = 0;
    let mut chunks = 2usize;
    while best.steps.len() > 1 && runs < budget {
        let len = best.steps.len();
        let size = len.div_ceil(chunks);
        let mut shrunk = false;
        for start in (0..len).step_by(size) {
            if runs >= budget {
                break;
            }
            let mut candidate = best.clone();
            candidate.steps.drain(start..(start + size).min(len));
            if candidate.steps.is_empty() {
                continue;
            }
            runs += 1;
            if let Err(found) = run(&candidate)
                && found.violation.invariant == failure.violation.invariant
            {
                candidate.steps.truncate(found.step + 1);
                best = candidate;
                best_failure = found;
                chunks = (chunks - 1).max(2);
                shrunk = true;
                break;
            }
        }
        if !shrunk {
            if size == 1 {
                break;
            }
            chunks = (chunks * 2).min(len);
        }
    }
    (best, best_failure)
}
