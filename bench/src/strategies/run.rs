//! Plays one scripted conversation through the real functions with one context
//! policy: a fresh [`FullStack`] (its own moto server, table and FIFO queue, the
//! stand-in, the `ask` and `compactor` binaries) whose functions run with
//! `CONTEXT_POLICY` and `CACHE_TTL` set and reach the stand-in through a [`Tap`].
//! After every turn the bridge drains the jobs queue (only the stepped policies
//! queue steps; for the others it finds the queue empty). Before each turn the
//! stand-in's cache clock (manual: only the benchmark moves it) and the functions'
//! clock (`CLOCK_OFFSET_FILE`) advance by the timing profile's gap
//! ([`super::timing`]). Nothing but `CONTEXT_POLICY` and `CACHE_TTL` differs
//! between the runs of one conversation and profile: same tenant config, same
//! stand-in, same gaps, same accounting.

use std::collections::BTreeMap;
use std::time::Instant;

use degrau::tenant::TenantConfig;
use degrau::usage::Usage;
use degrau_tests::stack::{FullStack, StackOptions};
use degrau_tests::{HttpReply, api_event};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::clock::{ClockOffset, advance_clock, sweep_ticks};
use super::policy::Policy;
use super::script::Conversation;
use super::tap::{Call, Caller, Tap};
use super::timing::{Gap, Profile};
use crate::moto::PrivateMoto;

/// Tenant of every run.
pub const TENANT: &str = "bench-barbershop";
/// Contact of every run.
pub const CONTACT: &str = "customer-1";

/// The agent's instructions in every run (`system[0]`).
pub const INSTRUCTIONS: &str = "You are the scheduling assistant of a barber shop. Answer \
briefly, in the customer's language (Portuguese or English). Check availability with \
list_free_slots before offering a time, and book only what the customer confirmed, with \
book_slot. Give the confirmation id after a booking. Remember the customer's preferences \
(professional, time of day, style) and use them when offering times.";

/// Settings shared by every policy of a comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSettings {
    /// `compaction_threshold_tokens` of the tenant.
    pub threshold_tokens: u64,
    /// `window_keep_messages` of the tenant (the sliding window's size too).
    pub keep_messages: usize,
    /// `window_keep_tokens` of the tenant; `None`: degrau's default.
    pub keep_tokens: Option<u64>,
    /// `PAUSE_FOLD_KEEP_MESSAGES` of the functions; `None`: degrau's default.
    pub fold_keep_messages: Option<usize>,
    /// Arguments of the stand-in.
    pub standin_args: Vec<String>,
    /// Whether to check the tap's figures against the stand-in's own log at the end.
    pub check_log: bool,
    /// How much time passes before each turn (on the stand-in's cache clock).
    pub profile: Profile,
}

/// One turn as it went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnRecord {
    /// Seconds the cache clock moved before this turn.
    pub gap_seconds: u64,
    /// HTTP status of the ask function's answer (0: the invocation failed).
    pub status: u16,
    /// Context of the turn's last accepted ask call (what degrau measures).
    pub context_tokens: u64,
    /// Ask calls of the turn (the tool loop makes several; a refusal adds one).
    pub ask_calls: usize,
    /// Whether the model called a tool on this turn.
    pub tool_called: bool,
    /// Whether the script expected a tool call.
    pub tool_expected: bool,
}

/// What the stand-in's own log said, compared with the tap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogCheck {
    /// Calls in the stand-in's log.
    pub logged_calls: usize,
    /// Calls the tap saw.
    pub tapped_calls: usize,
    /// Whether statuses and usage agree call by call.
    pub agrees: bool,
}

/// Everything one policy's run produced.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyRun {
    /// The policy.
    pub policy: Policy,
    /// The timing profile.
    pub profile: Profile,
    /// Turns played.
    pub turns: usize,
    /// Every model call, oldest first.
    pub calls: Vec<Call>,
    /// One record per turn.
    pub per_turn: Vec<TurnRecord>,
    /// `steps` of the memory view at the end.
    pub steps: u64,
    /// Length of the summary at the end, in characters.
    pub summary_chars: usize,
    /// Index of the turn that asked for the planted identifier.
    pub recall_turn: usize,
    /// Compactor invocations that failed (bridge reports).
    pub compactor_failures: usize,
    /// Wall-clock seconds of the run (stack start to last turn).
    pub elapsed_seconds: f64,
    /// The check against the stand-in's log, when made.
    pub log_check: Option<LogCheck>,
    /// What the pause fold jobs did, from the compactor's metrics
    /// ([`fold_outcomes`]): `applied`, or the reason a job was skipped.
    pub fold_outcomes: BTreeMap<String, u64>,
}

/// What the compactor's fold jobs did, counted from its EMF lines (one per job,
/// `Kind` `fold`): `applied` for each fold applied, the `Reason` of each one
/// skipped (`does_not_pay`, `not_due`, `alive`, `resumed`, …), `failed:<code>`
/// for each that failed.
pub fn fold_outcomes(lines: &[String]) -> BTreeMap<String, u64> {
    let mut outcomes = BTreeMap::new();
    for line in lines {
        let Ok(Value::Object(event)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event.get("Kind").and_then(Value::as_str) != Some("fold") {
            continue;
        }
        let count = |name: &str| event.get(name).and_then(Value::as_f64).map(|n| n as u64);
        let outcome = if let Some(n) = count("StepsApplied") {
            ("applied".to_owned(), n)
        } else if let Some(n) = count("JobsSkipped") {
            let reason = event.get("Reason").and_then(Value::as_str).unwrap_or("?");
            (reason.to_owned(), n)
        } else if let Some(n) = count("JobFailures") {
            let code = event.get("Error").and_then(Value::as_str).unwrap_or("?");
            (format!("failed:{code}"), n)
        } else {
            continue;
        };
        *outcomes.entry(outcome.0).or_insert(0) += outcome.1;
    }
    outcomes
}

/// Plays `conversation` with `policy`. Panics (with a message) when the local
/// stack cannot start: a benchmark without its stack has nothing to say.
pub async fn run_strategy(
    conversation: &Conversation,
    policy: Policy,
    settings: &RunSettings,
) -> StrategyRun {
    let started = Instant::now();
    let moto = PrivateMoto::start().await.expect("start a moto server");
    let tap = Tap::start().await.expect("start the tap");
    let gaps = settings
        .profile
        .gaps(conversation.turns.len(), conversation.seed);
    // The functions' clock moves with the stand-in's: the gaps a round records
    // for `CACHE_TTL=auto` are the profile's.
    let mut clock = ClockOffset::new();
    let stack = start_stack(policy, settings, &tap, &moto, &clock).await;
    let played = play(
        &stack,
        conversation,
        policy,
        &gaps,
        &tap,
        &mut clock,
        started,
    )
    .await;
    let total = conversation.turns.len();
    let memory = stack.memory(TENANT, CONTACT).await;
    let steps = memory["session"]["steps"].as_u64().unwrap_or(0);
    let fold_outcomes = fold_outcomes(&stack.compactor.output());
    if policy.pause_fold() == "on" {
        let outcomes: Vec<String> = fold_outcomes
            .iter()
            .map(|(outcome, n)| format!("{outcome} {n}"))
            .collect();
        eprintln!(
            "  [{} {total}] pause folds requested by the sweep: {} ({}; steps in all, folds applied included: {steps})",
            policy.name(),
            played.folds,
            outcomes.join(", ")
        );
    }
    let summary_chars = memory["session"]["summary"]
        .as_str()
        .map_or(0, |s| s.chars().count());
    let elapsed_seconds = started.elapsed().as_secs_f64();
    let calls = tap.calls();
    let log_check = if settings.check_log {
        Some(check_log(&stack.standin.url, &calls).await)
    } else {
        None
    };
    let per_turn = per_turn(conversation, &gaps, &calls, &played.statuses);
    drop(stack);
    drop(moto);
    StrategyRun {
        policy,
        profile: settings.profile,
        turns: total,
        calls,
        per_turn,
        steps,
        summary_chars,
        recall_turn: conversation.recall_turn,
        compactor_failures: played.compactor_failures,
        elapsed_seconds,
        log_check,
        fold_outcomes,
    }
}

/// A fresh stack on its own moto, its functions under `policy`'s settings and
/// reaching the stand-in through `tap`, the tenant configured. The benchmark
/// alone moves the stand-in's cache clock: the same gaps give the same expiries
/// however long each turn takes on this machine.
async fn start_stack(
    policy: Policy,
    settings: &RunSettings,
    tap: &Tap,
    moto: &PrivateMoto,
    clock: &ClockOffset,
) -> FullStack {
    let standin_args: Vec<&str> = ["--clock", "manual"]
        .into_iter()
        .chain(settings.standin_args.iter().map(String::as_str))
        .collect();
    let stack = FullStack::start_with(&StackOptions {
        standin_args: &standin_args,
        env: vec![
            ("CONTEXT_POLICY".to_owned(), policy.env_value().to_owned()),
            ("CACHE_TTL".to_owned(), policy.cache_ttl().to_owned()),
            ("PAUSE_FOLD".to_owned(), policy.pause_fold().to_owned()),
            ("CLOCK_OFFSET_FILE".to_owned(), clock.path_string()),
            ("ANTHROPIC_BASE_URL".to_owned(), tap.url.clone()),
        ]
        .into_iter()
        .chain(
            settings
                .fold_keep_messages
                .map(|keep| ("PAUSE_FOLD_KEEP_MESSAGES".to_owned(), keep.to_string())),
        )
        .collect(),
        moto_endpoint: Some(moto.url.clone()),
        ..StackOptions::default()
    })
    .await;
    tap.set_upstream(&stack.standin.url);
    stack
        .configure(
            TENANT,
            &TenantConfig {
                instructions: Some(INSTRUCTIONS.to_owned()),
                compaction_threshold_tokens: Some(settings.threshold_tokens),
                window_keep_messages: Some(settings.keep_messages),
                window_keep_tokens: settings.keep_tokens,
                ..TenantConfig::default()
            },
        )
        .await;
    stack
}

/// What playing the turns left: each turn's status, the compactor invocations
/// that failed, the pause folds the sweep requested.
struct Played {
    statuses: Vec<u16>,
    compactor_failures: usize,
    folds: usize,
}

/// Plays every turn: the gap before it (the sweep's ticks within it, for the
/// policies with the pause fold), the message, the jobs drained after it.
async fn play(
    stack: &FullStack,
    conversation: &Conversation,
    policy: Policy,
    gaps: &[Gap],
    tap: &Tap,
    clock: &mut ClockOffset,
    started: Instant,
) -> Played {
    let total = conversation.turns.len();
    let mut statuses = Vec::with_capacity(total);
    let mut compactor_failures = 0;
    let mut folds = 0;
    for (index, turn) in conversation.turns.iter().enumerate() {
        let watch = (index == conversation.recall_turn).then_some(conversation.identifier.as_str());
        // The turn's calls, the pause fold's during the gap before it included.
        tap.begin_turn(index, watch);
        let mut left = gaps[index].seconds;
        if policy.pause_fold() == "on" {
            for tick in sweep_ticks(clock.seconds, left) {
                let step = tick - clock.seconds;
                advance_clock(&stack.standin.url, step).await;
                clock.advance(step);
                left -= step;
                let (failed, requested) = sweep(stack).await;
                compactor_failures += failed;
                folds += requested;
            }
        }
        if left > 0 {
            advance_clock(&stack.standin.url, left).await;
            clock.advance(left);
        }
        let (status, raw) = post(stack, &turn.text).await;
        if status != 200 {
            eprintln!(
                "  [{} {total}] turn {index}: status {status} {}",
                policy.name(),
                raw.chars().take(200).collect::<String>()
            );
        }
        statuses.push(status);
        for report in stack.drain().await {
            compactor_failures += report.failed;
        }
        if (index + 1).is_multiple_of(100) && index + 1 < total {
            eprintln!(
                "  [{} {total}] turn {}/{total}, {:.0} s",
                policy.name(),
                index + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    Played {
        statuses,
        compactor_failures,
        folds,
    }
}

/// Runs the compactor's scheduled sweep, then the jobs it queued (a pause
/// fold); returns the compactor invocations that failed and the folds the
/// sweep requested.
async fn sweep(stack: &FullStack) -> (usize, usize) {
    let requested = match stack
        .compactor
        .invoke(serde_json::json!({"sweep": true}))
        .await
    {
        Ok(report) => report["folds"].as_u64().unwrap_or(0) as usize,
        Err(error) => {
            eprintln!("  sweep failed: {error}");
            return (1, 0);
        }
    };
    let failed = stack.drain().await.iter().map(|report| report.failed).sum();
    (failed, requested)
}

/// Sends one message; an invocation that fails (the local Runtime API gives up after
/// 60 s on a loaded machine) is status 0 with the error, not a panic, so that a long
/// run keeps its figures and reports the failed turn.
async fn post(stack: &FullStack, text: &str) -> (u16, String) {
    let body = serde_json::json!({ "text": text }).to_string();
    let event = api_event(
        "POST",
        &format!("/v1/contacts/{CONTACT}/messages"),
        "",
        &[
            ("content-type", "application/json"),
            ("x-tenant-id", TENANT),
        ],
        Some(&body),
        None,
    );
    match stack.ask.invoke(event).await {
        Ok(response) => {
            let reply = HttpReply::from_lambda(&response);
            (reply.status, reply.raw)
        }
        Err(error) => (0, error.to_string()),
    }
}

/// Groups the calls by turn.
fn per_turn(
    conversation: &Conversation,
    gaps: &[Gap],
    calls: &[Call],
    statuses: &[u16],
) -> Vec<TurnRecord> {
    let mut records: Vec<TurnRecord> = conversation
        .turns
        .iter()
        .zip(gaps)
        .zip(statuses)
        .map(|((turn, gap), &status)| TurnRecord {
            gap_seconds: gap.seconds,
            status,
            context_tokens: 0,
            ask_calls: 0,
            tool_called: false,
            tool_expected: turn.expects_tool(),
        })
        .collect();
    for call in calls.iter().filter(|c| c.caller == Caller::Ask) {
        let Some(record) = records.get_mut(call.turn) else {
            continue;
        };
        record.ask_calls += 1;
        if let Some(usage) = call.usage {
            record.context_tokens = usage.context_tokens();
        }
        record.tool_called |= !call.tools_called.is_empty();
    }
    records
}

/// One entry of the stand-in's log, without its bodies. Its usage is the one the
/// response carried, with the cache-creation split, as the tap read it.
#[derive(Deserialize)]
struct LoggedLean {
    status: u16,
    #[serde(default)]
    usage: Option<Usage>,
}

/// Reads the stand-in's log (bodies skipped, not kept) and compares it with the
/// tap's record, call by call.
async fn check_log(standin_url: &str, calls: &[Call]) -> LogCheck {
    let bytes = match reqwest::get(format!("{standin_url}/stand-in/requests")).await {
        Ok(response) => response.bytes().await.unwrap_or_default(),
        Err(_) => Default::default(),
    };
    let logged: Vec<LoggedLean> = serde_json::from_slice(&bytes).unwrap_or_default();
    let agrees = logged.len() == calls.len()
        && logged
            .iter()
            .zip(calls)
            .all(|(l, c)| l.status == c.status && l.usage == c.usage);
    LogCheck {
        logged_calls: logged.len(),
        tapped_calls: calls.len(),
        agrees,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_outcomes_are_counted_from_the_compactors_metrics_lines() {
        let lines: Vec<String> = [
            r#"{"_aws":{},"Kind":"fold","StepsApplied":1.0,"MessagesPruned":0.0}"#,
            r#"{"_aws":{},"Kind":"fold","Reason":"does_not_pay","JobsSkipped":1.0}"#,
            r#"{"_aws":{},"Kind":"fold","StepsApplied":1.0,"MessagesPruned":2.0}"#,
            r#"{"_aws":{},"Kind":"fold","Reason":"not_due","JobsSkipped":1.0}"#,
            r#"{"_aws":{},"Kind":"fold","Reason":"does_not_pay","JobsSkipped":1.0}"#,
            r#"{"_aws":{},"Kind":"fold","Error":"store_unavailable","JobFailures":1.0}"#,
            // Steps, a log line, and what is not JSON: not folds.
            r#"{"_aws":{},"Kind":"step","StepsApplied":1.0}"#,
            r#"{"level":"INFO","fields":{"message":"pause fold applied"}}"#,
            "compactor: listening",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        let outcomes = fold_outcomes(&lines);
        let expected: BTreeMap<String, u64> = [
            ("applied", 2),
            ("does_not_pay", 2),
            ("not_due", 1),
            ("failed:store_unavailable", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(outcomes, expected);
    }
}
