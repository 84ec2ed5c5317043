//! The compaction work of a span of turns, per ask: what the compactor and the
//! event source mapping did between two checkpoints, divided by its asks.

use serde::Serialize;

use super::degrau_run::DegrauRun;
use super::numbers::sum;
use super::prices::Prices;

/// The compaction work of a span of turns, per ask.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Amortized {
    /// First turn of the span (1-based).
    pub from_turn: usize,
    /// Last turn of the span.
    pub to_turn: usize,
    /// Compactor invocations in the span.
    pub invocations: usize,
    /// Per ask: compactor invocations.
    pub invocations_per_ask: f64,
    /// Per ask: compactor wall time as measured here, ms.
    pub duration_ms_per_ask: f64,
    /// Per ask: compactor duration billed, ms (moto's latency replaced, see
    /// [`Prices::billed_ms`]).
    pub billed_ms_per_ask: f64,
    /// Per ask: compactor CPU, ms.
    pub cpu_ms_per_ask: f64,
    /// Per ask: DynamoDB calls of the compactor.
    pub dynamodb_calls_per_ask: f64,
    /// Per ask: read units.
    pub rcu_per_ask: f64,
    /// Per ask: write units.
    pub wcu_per_ask: f64,
    /// Per ask: billed SQS requests of the event source mapping (empty polls
    /// excluded: they run whatever the traffic).
    pub sqs_requests_per_ask: f64,
}

/// The compaction work over turns `from..=to` of `run`, per ask.
pub(super) fn amortize(run: &DegrauRun, from: usize, to: usize, prices: &Prices) -> Amortized {
    let span: Vec<_> = run
        .compactions
        .iter()
        .filter(|c| c.turn >= from && c.turn <= to)
        .collect();
    let asks = span.len().max(1) as f64;
    let invocations: usize = span.iter().map(|c| c.invocations).sum();
    Amortized {
        from_turn: from,
        to_turn: to,
        invocations,
        invocations_per_ask: invocations as f64 / asks,
        duration_ms_per_ask: sum(span.iter().map(|c| c.duration_ms)) / asks,
        billed_ms_per_ask: sum(span.iter().filter(|c| c.invocations > 0).map(|c| {
            prices.billed_ms(
                c.duration_ms,
                c.aws.dynamodb_duration_ms,
                c.aws.dynamodb_calls,
            )
        })) / asks,
        cpu_ms_per_ask: sum(span.iter().map(|c| c.cpu_ms)) / asks,
        dynamodb_calls_per_ask: sum(span.iter().map(|c| c.aws.dynamodb_calls as f64)) / asks,
        rcu_per_ask: sum(span.iter().map(|c| c.aws.rcu)) / asks,
        wcu_per_ask: sum(span.iter().map(|c| c.aws.wcu)) / asks,
        sqs_requests_per_ask: sum(span.iter().map(|c| c.aws.sqs_billed_requests as f64)) / asks,
    }
}
