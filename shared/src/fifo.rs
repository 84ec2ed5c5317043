//! One runner for a batch of a FIFO queue, for the functions that read one (the
//! compactor's jobs, the WhatsApp worker's inbound messages). A function maps its
//! event to [`Record`]s, hands [`run`] the work of one record, and maps the
//! [`Outcome`] back to its partial batch response; the rules of a batch live here
//! once, with no AWS type in them.
//!
//! Records run in order, each within its own time budget, bounded by the
//! invocation's deadline. FIFO order holds per message group (one conversation):
//! when a record fails, it and every later record *of its group* are reported, so
//! the queue delivers them again in the same order, while the other groups' records
//! go on. One poison record thus holds back its own conversation only. Records
//! without a group (a FIFO queue always sets one) count as one group.
//!
//! A body the work cannot read is a failure like any other: reported on every
//! receive, it ends in the dead-letter queue after the queue's `maxReceiveCount`,
//! where it can be inspected. The same goes for a failure that cannot succeed on a
//! retry: the DLQ is where it belongs.
//!
//! **The invocation's deadline.** Before each record after the first, the runner
//! checks the time left of the invocation: when less than one record budget is
//! left, that record and every later one are reported, to come back in a later
//! batch, instead of the whole batch timing out. The first record always runs
//! (within the invocation's deadline when that comes first), so a function timeout
//! shorter than one budget, a misconfiguration, still makes progress.

use std::collections::HashSet;
use std::time::Duration;

use tracing::{Instrument, info_span, warn};

use crate::deadline::Deadline;

/// One message of a batch, as the function's event carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The queue's id for it: what a partial batch response names.
    pub id: String,
    /// Its message group (one conversation); `None` when the event has none.
    pub group: Option<String>,
    /// The body as it was sent, not yet read.
    pub body: String,
    /// How many times the queue has delivered it, 1 the first time.
    pub receives: u32,
}

/// What a batch left to report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The ids of the records to report, in batch order: failed, held back or not
    /// started. The queue delivers them again; every other record is done.
    pub reported: Vec<String>,
    /// How many of them waited behind an earlier failure of their group.
    pub held_back: usize,
    /// How many of them were not started for lack of time.
    pub out_of_time: usize,
}

/// Runs `records` in order by the rules of the module documentation: `work` runs
/// one record by the deadline it is given and returns true when the record is done
/// (nothing to do included). `budget` is one record's time; `invocation` the
/// invocation's deadline, if it has a true one.
pub async fn run(
    records: &[Record],
    budget: Duration,
    invocation: Option<Deadline>,
    mut work: impl AsyncFnMut(&Record, Deadline) -> bool,
) -> Outcome {
    let mut outcome = Outcome::default();
    let mut held_groups: HashSet<Option<&str>> = HashSet::new();
    for (index, record) in records.iter().enumerate() {
        let group = record.group.as_deref();
        let left = invocation.map(|invocation| invocation.remaining());
        if outcome.out_of_time > 0 {
            outcome.out_of_time += 1;
        } else if held_groups.contains(&group) {
            // An earlier record of this group failed: FIFO order within it.
            outcome.held_back += 1;
        } else if index > 0
            && let Some(left) = left.filter(|left| *left < budget)
        {
            warn!(
                left_ms = millis(left),
                budget_ms = millis(budget),
                "less than one record budget is left; the rest of the batch comes back later"
            );
            outcome.out_of_time = 1;
        } else {
            let own = Deadline::after(budget);
            let deadline = invocation.map_or(own, |invocation| own.earlier(invocation));
            let span = info_span!("record", message_id = record.id.as_str());
            if deadline < own {
                // Only the first record gets here.
                span.in_scope(|| {
                    warn!(
                        left_ms = millis(deadline.remaining()),
                        "the invocation has less than one record budget: the first record runs with what is left"
                    );
                });
            }
            if work(record, deadline).instrument(span).await {
                continue;
            }
            held_groups.insert(group);
        }
        outcome.reported.push(record.id.clone());
    }
    outcome
}

/// A duration in whole milliseconds, for a log field.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
