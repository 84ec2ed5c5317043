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
//! FIFO and the compactor's batches), [`oracle`] (the invariants), `operations` (a
//! step's operations at once); this file runs a plan and shrinks a failing one.
//!
//! (`docs/DESIGN.md`, "The simulator"; docs/reliability.md.)

mod client;
pub mod clock;
pub mod counts;
pub mod events;
pub mod faults;
mod listing;
mod liveness;
pub mod model;
mod operations;
pub mod oracle;
pub mod queue;
pub mod tools;
pub mod world;

use std::time::Duration;

pub use events::{Event, Plan, Step, generate};
pub use oracle::Violation;
use oracle::{Oracle, user_token};
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
        world.memory.transactions_landed().await;
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
    oracle.end_event(&world.model.take_carried())?;
    let now = world.now();
    let snapshots: Vec<_> = world
        .contacts
        .iter()
        .map(|key| world.memory.snapshot(key))
        .collect();
    for (session, shown) in world.model.take_facts_read() {
        oracle.facts_read(session, &shown, &snapshots)?;
    }
    for (index, snapshot) in snapshots.iter().enumerate() {
        oracle.check(index, snapshot, world.retention(index), now)?;
    }
    for (job, receives) in world.queue.take_dropped() {
        let heads: Vec<_> = (world.contacts.iter().zip(&snapshots))
            .filter(|(key, _)| key.tenant == *job.tenant())
            .map(|(_, snapshot)| snapshot.head.clone())
            .collect();
        oracle::job_dropped(&job, receives, &heads, now)?;
    }
    Ok(())
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
        Event::Together { ops } => operations::together(world, oracle, ops, stats).await?,
        op => operations::together(world, oracle, std::slice::from_ref(op), stats).await?,
    }
    Ok(())
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
