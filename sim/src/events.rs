//! What happens in a simulation: a [`Plan`] of events generated from a seed. Each
//! [`Step`] carries a seed of its own for what it decides inside (the model's
//! answers, faults, how operations interleave), so a plan with steps taken out
//! still plays every remaining step the same way: that is what lets a failing plan
//! shrink.

use serde::{Deserialize, Serialize};

/// Contacts a plan plays (each of a tenant by [`crate::world::tenant_of`]).
pub const CONTACTS: usize = 7;

/// A whole simulation: the model's context window and the events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The seed the plan was generated from.
    pub seed: u64,
    /// The model's context window, in estimated tokens.
    pub window: u64,
    /// The events, in order.
    pub steps: Vec<Step>,
}

/// One event and the seed of what it decides inside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Seeds the thread's generator when the step starts.
    pub seed: u64,
    /// What happens.
    pub event: Event,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A message through `POST .../messages`; with an `Idempotency-Key` the client
    /// sends it once more, with the same key, after a failure.
    Ask {
        /// Which contact.
        contact: usize,
        /// With an `Idempotency-Key`.
        idempotent: bool,
        /// Characters of the message.
        chars: usize,
    },
    /// A round the client ran itself: `GET .../context`, then `POST .../rounds`
    /// (with a tool call and its result when `tool`, whatever the tenant's tools).
    Record {
        /// Which contact.
        contact: usize,
        /// With a tool call.
        tool: bool,
        /// Characters of the message.
        chars: usize,
    },
    /// Operations at once, interleaved at the store.
    Together {
        /// The operations (asks, recorded rounds, deliveries, sweeps, erases).
        ops: Vec<Event>,
    },
    /// The event source hands the compactor one batch.
    Deliver,
    /// The scheduled sweep runs.
    Sweep,
    /// An operator corrects the contact's `name` fact (`PUT .../facts/name`).
    Correct {
        /// Which contact.
        contact: usize,
    },
    /// `DELETE /v1/contacts/{contact}`.
    Erase {
        /// Which contact.
        contact: usize,
    },
    /// Time passes.
    Advance {
        /// Seconds.
        seconds: i64,
    },
    /// DynamoDB's TTL deletes some of the expired items, chosen by the step's seed.
    Expire {
        /// How many at most.
        count: usize,
    },
    /// The indexes catch up with the items.
    SyncIndexes,
    /// The compactor stops taking batches, or takes them again.
    Outage {
        /// Out.
        on: bool,
    },
    /// Faults, in percent of calls (0: off).
    Faults {
        /// The model's.
        model: u8,
        /// The store's.
        store: u8,
        /// The queue's.
        queue: u8,
        /// Operations whose process dies at one of its awaits (plans from before
        /// crashes have none).
        #[serde(default)]
        crash: u8,
    },
    /// A tenant's operator changes its configuration while everything runs.
    Reconfigure {
        /// Which tenant ([`crate::world::TENANTS`]).
        tenant: usize,
        /// Its new settings.
        settings: crate::world::Live,
    },
    /// An operator moves the dead-letter queue back into the queue.
    Redrive,
    /// The fragile tenant's configuration is broken by hand, or fixed.
    BreakTenant {
        /// Broken.
        on: bool,
    },
    /// Faults stop and jobs flow; then the liveness invariants are checked.
    Quiesce,
}

/// A plan of `events` events from `seed`, ending with [`Event::Quiesce`].
pub fn generate(seed: u64, events: usize) -> Plan {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut steps = Vec::with_capacity(events + 1);
    // One seed in ten spans months: its silences of an hour or more are weeks.
    let months = seed.is_multiple_of(10);
    for index in 0..events {
        let event = if index > 0 && index % 80 == 0 {
            Event::Quiesce
        } else {
            match event(&mut rng) {
                Event::Advance { seconds } if months && seconds >= 3_600 => Event::Advance {
                    seconds: rng.i64(5 * 86_400..30 * 86_400),
                },
                other => other,
            }
        };
        steps.push(Step {
            seed: rng.u64(..),
            event,
        });
    }
    steps.push(Step {
        seed: rng.u64(..),
        event: Event::Quiesce,
    });
    Plan {
        seed,
        // Sometimes below the hard limit (the model refuses first), sometimes
        // above (the hard cap cuts first).
        window: rng.u64(2_500..9_000),
        steps,
    }
}

/// A message's length: mostly short, a few long, and one in forty a pasted text
/// (a few thousand characters: two of them among a window's last messages pass
/// the smaller windows, so a retry after "prompt is too long" must cut by what
/// the API said, not only to the usual overflow cut).
fn chars(rng: &mut fastrand::Rng) -> usize {
    match rng.u8(0..40) {
        0 => rng.usize(3_000..5_500),
        1..=4 => rng.usize(600..2_000),
        5..=16 => rng.usize(150..600),
        _ => rng.usize(10..150),
    }
}

fn operation(rng: &mut fastrand::Rng, contact: usize) -> Event {
    match rng.u8(0..20) {
        0..=11 => Event::Ask {
            contact,
            idempotent: rng.bool(),
            chars: chars(rng),
        },
        12..=14 => Event::Record {
            contact,
            tool: rng.bool(),
            chars: chars(rng),
        },
        15..=16 => Event::Deliver,
        17 => Event::Correct { contact },
        18 => Event::Sweep,
        _ => Event::Erase { contact },
    }
}

/// An erase amid messages to the same contact: idempotent asks (whose keys an
/// erase's later pass may take while they run) and recorded rounds (fast enough
/// to begin the contact's next life while another operation is between its two
/// reads), in any order; each starts a moment apart (see `operations`).
fn erase_burst(rng: &mut fastrand::Rng, contact: usize) -> Event {
    let mut ops = vec![Event::Erase { contact }];
    for _ in 0..rng.usize(2..=4) {
        ops.push(if rng.bool() {
            Event::Ask {
                contact,
                idempotent: rng.u8(0..4) > 0,
                chars: chars(rng),
            }
        } else {
            Event::Record {
                contact,
                tool: rng.bool(),
                chars: chars(rng),
            }
        });
    }
    rng.shuffle(&mut ops);
    Event::Together { ops }
}

fn event(rng: &mut fastrand::Rng) -> Event {
    let contact = rng.usize(..CONTACTS);
    match rng.u16(0..1000) {
        0..=329 => Event::Ask {
            contact,
            idempotent: rng.u8(0..3) == 0,
            chars: chars(rng),
        },
        330..=419 => Event::Record {
            contact,
            tool: rng.u8(0..3) == 0,
            chars: chars(rng),
        },
        420..=509 => {
            // Several at once, mostly on one contact (a burst), sometimes with a
            // job or an erase in between.
            let ops = (0..rng.usize(2..=4))
                .map(|_| {
                    let who = if rng.u8(0..3) == 0 {
                        rng.usize(..CONTACTS)
                    } else {
                        contact
                    };
                    operation(rng, who)
                })
                .collect();
            Event::Together { ops }
        }
        510..=624 => Event::Deliver,
        625..=649 => erase_burst(rng, contact),
        650..=669 => Event::Sweep,
        670..=679 => Event::Erase { contact },
        680..=839 => Event::Advance {
            seconds: match rng.u8(0..100) {
                0..=64 => rng.i64(5..120),
                65..=89 => rng.i64(300..2_700),
                90..=97 => rng.i64(3_600..6 * 3_600),
                _ => rng.i64(86_400..3 * 86_400),
            },
        },
        885..=899 => Event::Correct { contact },
        840..=884 => Event::Expire {
            count: rng.usize(1..6),
        },
        900..=929 => Event::SyncIndexes,
        930..=949 => Event::Outage { on: rng.bool() },
        950..=979 => Event::Faults {
            model: if rng.bool() { rng.u8(0..30) } else { 0 },
            store: if rng.bool() { rng.u8(0..12) } else { 0 },
            queue: if rng.bool() { rng.u8(0..20) } else { 0 },
            crash: if rng.bool() { rng.u8(0..25) } else { 0 },
        },
        980..=984 => Event::Redrive,
        985..=989 => Event::Reconfigure {
            tenant: rng.usize(..crate::world::TENANTS.len()),
            settings: crate::world::Live::drawn(rng),
        },
        _ => Event::BreakTenant { on: rng.bool() },
    }
}
