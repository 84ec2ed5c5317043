//! Test support: messages as the store keeps them, a clock the test moves and the
//! conversation service on the in-memory store, for the crate's own unit tests
//! and, behind the `test-util` feature, other crates' tests (one copy of each
//! helper, not one per test module: the core's tests and the channels' share them).

pub mod hooked;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::converse::Converse;
use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Message, Role, StoredMessage};
use crate::jobs::Jobs;
use crate::memory::MemoryStore;
use crate::model::Model;
use crate::plan::session::Clock;
use crate::tenant::Defaults;
use crate::tools::Tools;

/// The time every test starts at (seconds since the epoch, in 2027).
pub const START: i64 = 1_800_000_000;

/// A deadline no test reaches.
pub fn minute() -> Deadline {
    Deadline::after(std::time::Duration::from_secs(60))
}

/// A clock at [`START`] that the test moves, and the service clock reading it.
pub fn test_clock() -> (Arc<AtomicI64>, Clock) {
    let clock = Arc::new(AtomicI64::new(START));
    let now = clock.clone();
    (clock, Arc::new(move || now.load(Ordering::SeqCst)))
}

/// The conversation service on the in-memory store (also its tenant store), with
/// no quota stored yet.
pub fn converse_on(
    store: &Arc<MemoryStore>,
    model: Arc<dyn Model>,
    tools: Arc<dyn Tools>,
    jobs: Arc<dyn Jobs>,
    defaults: Defaults,
    clock: Clock,
) -> Converse {
    Converse {
        store: store.clone(),
        records: store.clone(),
        recall: store.clone(),
        usage: store.clone(),
        tenants: store.clone(),
        model,
        tools,
        jobs,
        quotas: Arc::new(crate::quota::memory::MemoryQuotas::new()),
        defaults,
        clock,
    }
}

/// A stored message of session 1 with no pruned copy, usage or time.
pub fn msg(seq: u64, role: Role, content: Vec<ContentBlock>) -> StoredMessage {
    StoredMessage {
        session: 1,
        seq,
        role,
        content,
        pruned: None,
        usage: None,
        created_at: 0,
        written_by_person: false,
        transcribed: false,
    }
}

/// `message` stored at `seq` of session 1 (see [`msg`]).
pub fn stored(seq: u64, message: Message) -> StoredMessage {
    msg(seq, message.role, message.content)
}

/// `messages` stored one after another from `first_seq` (see [`msg`]).
pub fn stored_from(
    first_seq: u64,
    messages: impl IntoIterator<Item = Message>,
) -> Vec<StoredMessage> {
    messages
        .into_iter()
        .zip(first_seq..)
        .map(|(message, seq)| stored(seq, message))
        .collect()
}
