//! The FIFO batch runner with work that writes down what it ran: records run in
//! order, a failure holds back its own group only, a body the work cannot read is a
//! failure, and the invocation's deadline cuts the batch before a record that no
//! longer fits, never before the first. The clock is paused: nothing sleeps.

use std::time::Duration;

use degrau::deadline::Deadline;
use degrau::fifo::{Outcome, Record, run};

const BUDGET: Duration = Duration::from_secs(30);

/// A record of `group` (none when empty) whose body is `body`.
fn record(id: &str, group: &str, body: &str) -> Record {
    Record {
        id: id.to_owned(),
        group: (!group.is_empty()).then(|| group.to_owned()),
        body: body.to_owned(),
        receives: 1,
    }
}

/// `count` records that succeed, "1", "2"…, each in a group of its own.
fn apart(count: usize) -> Vec<Record> {
    (1..=count)
        .map(|n| record(&n.to_string(), &format!("g{n}"), "2"))
        .collect()
}

/// Work that reads a body as a number and fails on an odd one or one that is not
/// a number, taking `per_record` of the clock; returns the ids it ran, in order.
async fn run_reading(
    records: &[Record],
    invocation: Option<Deadline>,
    per_record: Duration,
) -> (Outcome, Vec<String>) {
    let mut ran = Vec::new();
    let outcome = run(records, BUDGET, invocation, async |record, _deadline| {
        ran.push(record.id.clone());
        tokio::time::sleep(per_record).await;
        serde_json::from_str::<u32>(&record.body).is_ok_and(|number| number % 2 == 0)
    })
    .await;
    (outcome, ran)
}

/// Work that succeeds in 10 s of the clock; returns the time each record was given.
async fn time_given(records: &[Record], invocation: Option<Deadline>) -> (Outcome, Vec<Duration>) {
    let mut given = Vec::new();
    let outcome = run(records, BUDGET, invocation, async |_record, deadline| {
        given.push(deadline.remaining());
        tokio::time::sleep(Duration::from_secs(10)).await;
        true
    })
    .await;
    (outcome, given)
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_succeeds_runs_every_record_in_order_and_reports_none() {
    let records = [
        record("1", "a", "2"),
        record("2", "b", "4"),
        record("3", "a", "6"),
    ];
    let (outcome, ran) = run_reading(&records, None, Duration::from_secs(1)).await;
    assert_eq!(outcome, Outcome::default());
    assert_eq!(ran, ["1", "2", "3"]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_record_holds_back_only_its_own_group() {
    let records = [
        record("1", "a", "1"),
        record("2", "b", "2"),
        record("3", "a", "2"),
        record("4", "b", "4"),
        record("5", "a", "4"),
    ];
    let (outcome, ran) = run_reading(&records, None, Duration::ZERO).await;
    assert_eq!(outcome.reported, ["1", "3", "5"], "in batch order");
    assert_eq!(outcome.held_back, 2);
    assert_eq!(outcome.out_of_time, 0);
    assert_eq!(ran, ["1", "2", "4"], "group a's later records never ran");
}

#[tokio::test(start_paused = true)]
async fn records_without_a_group_count_as_one_group() {
    let records = [
        record("1", "", "2"),
        record("2", "", "3"),
        record("3", "", "2"),
        record("4", "b", "2"),
    ];
    let (outcome, ran) = run_reading(&records, None, Duration::ZERO).await;
    assert_eq!(outcome.reported, ["2", "3"]);
    assert_eq!(ran, ["1", "2", "4"]);
}

#[tokio::test(start_paused = true)]
async fn a_body_the_work_cannot_read_is_a_failure_that_holds_back_its_group() {
    let records = [
        record("bad", "a", "not a number"),
        record("other", "b", "2"),
        record("later", "a", "2"),
    ];
    let (outcome, ran) = run_reading(&records, None, Duration::ZERO).await;
    assert_eq!(outcome.reported, ["bad", "later"]);
    assert_eq!(outcome.held_back, 1);
    assert_eq!(ran, ["bad", "other"]);
}

#[tokio::test(start_paused = true)]
async fn a_record_that_no_longer_fits_the_invocation_is_reported_with_every_later_one() {
    // 50 s: after one 25 s record, less than one budget (30 s) is left.
    let invocation = Deadline::after(Duration::from_secs(50));
    let records = apart(3);
    let (outcome, ran) = run_reading(&records, Some(invocation), Duration::from_secs(25)).await;
    assert_eq!(
        outcome,
        Outcome {
            reported: vec!["2".into(), "3".into()],
            held_back: 0,
            out_of_time: 2,
        }
    );
    assert_eq!(ran, ["1"]);
}

#[tokio::test(start_paused = true)]
async fn records_run_while_a_whole_budget_is_left() {
    let invocation = Deadline::after(Duration::from_secs(70));
    let records = apart(4);
    let (outcome, ran) = run_reading(&records, Some(invocation), Duration::from_secs(20)).await;
    assert_eq!(
        ran,
        ["1", "2", "3"],
        "30 s left after two records: one budget"
    );
    assert_eq!(outcome.reported, ["4"]);
    assert_eq!(outcome.out_of_time, 1);
}

#[tokio::test(start_paused = true)]
async fn a_held_back_record_is_counted_so_even_when_time_is_short() {
    let invocation = Deadline::after(Duration::from_secs(40));
    let records = [
        record("1", "a", "1"),
        record("2", "a", "2"),
        record("3", "b", "2"),
        record("4", "a", "2"),
    ];
    let (outcome, ran) = run_reading(&records, Some(invocation), Duration::from_secs(20)).await;
    assert_eq!(ran, ["1"]);
    assert_eq!(outcome.reported, ["1", "2", "3", "4"]);
    assert_eq!((outcome.held_back, outcome.out_of_time), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn the_first_record_always_runs_by_the_invocations_deadline_when_that_comes_first() {
    let invocation = Deadline::after(Duration::from_secs(20));
    let (outcome, given) = time_given(&apart(2), Some(invocation)).await;
    assert_eq!(
        given,
        [Duration::from_secs(20)],
        "the first ran, by the invocation's deadline"
    );
    assert_eq!(outcome.reported, ["2"]);
    assert_eq!(outcome.out_of_time, 1);
}

#[tokio::test(start_paused = true)]
async fn each_record_gets_a_whole_budget_of_its_own() {
    let invocation = Deadline::after(Duration::from_secs(75));
    let (outcome, given) = time_given(&apart(3), Some(invocation)).await;
    assert!(outcome.reported.is_empty());
    assert_eq!(given, [BUDGET; 3], "not what is left of the invocation");

    // Without an invocation deadline (a context built by hand), one budget each.
    let (_, given) = time_given(&apart(3), None).await;
    assert_eq!(given, [BUDGET; 3]);
}
