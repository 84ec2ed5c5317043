//! A bounded soak on loopback: many conversations at once, bursts of concurrent
//! messages on the same contact, several ask instances and the compactor draining
//! the queue meanwhile; then a check of everything DynamoDB holds.
//!
//! What the check proves, per contact (raw Query on its partition):
//! - every acknowledged (2xx) round is stored exactly once: the rounds of the 2xx
//!   answers tile the transcript `1..=last_seq` with no gap and no overlap, each
//!   round's first message is the user text sent and its last is the reply given;
//! - so sequences are dense and nothing was stored that no 2xx acknowledged;
//! - every non-2xx answer was a 409, 429 or 503 and its text is nowhere in storage;
//! - an idempotent retry of a 2xx returns the same bytes, and no idempotency claim is
//!   left in progress;
//! - the head agrees with the transcript, and its summary state is consistent.
//!
//! Loops are bounded twice: by the configured duration or request count, and by
//! [`HARD_CAP_REQUESTS`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use degrau::domain::FactKey;
use degrau::tenant::TenantConfig;
use degrau_bridge::poll_once;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::stack::{FullStack, LocalInvoke, RawMessage, StackOptions, attr_n, attr_s};
use crate::{HttpReply, api_event};

/// The tenant every soak conversation belongs to.
pub const TENANT: &str = "soak";

/// Most first-time requests a soak ever sends, whatever its configuration.
pub const HARD_CAP_REQUESTS: usize = 1_000_000;

/// Non-2xx statuses a soak accepts: a lost race (409), the model or storage asking
/// for a retry (429, 503). Each must have written nothing.
pub const ACCEPTED_ERRORS: [u16; 3] = [409, 429, 503];

/// How a soak runs.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Conversations (contacts) running at once.
    pub contacts: usize,
    /// Messages sent at once on one contact, per burst.
    pub burst: usize,
    /// Stop starting bursts after this long.
    pub duration: Option<Duration>,
    /// Stop after this many first-time requests (idempotent replays come on top).
    pub max_requests: Option<usize>,
    /// Ask instances (processes) serving concurrent invocations.
    pub ask_instances: usize,
    /// Run the compactor through the bridge during the soak, with a threshold low
    /// enough that steps happen.
    pub compaction: bool,
    /// Every n-th message of a contact asks for a tool (slots or a booking).
    pub tool_every: usize,
    /// Every n-th message of a contact carries an `Idempotency-Key`, and each one
    /// answered 2xx is sent again once (a client retry).
    pub idempotent_every: usize,
}

impl Default for SoakConfig {
    fn default() -> Self {
        SoakConfig {
            contacts: 8,
            burst: 3,
            duration: None,
            max_requests: Some(200),
            ask_instances: 3,
            compaction: true,
            tool_every: 5,
            idempotent_every: 4,
        }
    }
}

/// One request of the soak and its answer.
#[derive(Debug, Clone)]
struct Sent {
    contact: String,
    text: String,
    key: Option<String>,
    replay_of: Option<String>,
    reply: Result<HttpReply, String>,
    latency: Duration,
}

impl Sent {
    fn status(&self) -> Option<u16> {
        self.reply.as_ref().ok().map(|r| r.status)
    }

    fn acknowledged(&self) -> bool {
        self.status().is_some_and(|s| (200..300).contains(&s))
    }
}

/// What a soak did and what its check found.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// The configuration it ran with.
    pub contacts: usize,
    /// Messages per burst.
    pub burst: usize,
    /// Ask instances.
    pub ask_instances: usize,
    /// Whether the compactor ran.
    pub compaction: bool,
    /// Every request sent, idempotent replays included.
    pub requests: usize,
    /// Of which idempotent replays.
    pub replays: usize,
    /// From the first request to the last answer.
    pub elapsed: Duration,
    /// Answers by HTTP status.
    pub by_status: BTreeMap<u16, usize>,
    /// Error answers by `error.type`.
    pub by_error: BTreeMap<String, usize>,
    /// Invocations that failed (the function crashed or timed out).
    pub invoke_errors: usize,
    /// Rounds found in DynamoDB.
    pub rounds_stored: usize,
    /// Messages found in DynamoDB.
    pub messages_stored: usize,
    /// Compaction steps applied, from the heads.
    pub steps_applied: u64,
    /// Bridge batches the compactor processed.
    pub compactor_batches: usize,
    /// Latency of the requests, 50th, 95th and 100th percentiles.
    pub latency: [Duration; 3],
    /// What the check found wrong; empty when everything holds.
    pub violations: Vec<String>,
}

impl SoakReport {
    /// Requests per second over the soak.
    pub fn throughput(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.requests as f64 / seconds
        } else {
            0.0
        }
    }
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "soak: {} contacts x bursts of {}, {} ask instances, compaction {}",
            self.contacts,
            self.burst,
            self.ask_instances,
            if self.compaction { "on" } else { "off" }
        )?;
        writeln!(
            f,
            "requests: {} ({} idempotent replays) in {:.1} s = {:.1} requests/s",
            self.requests,
            self.replays,
            self.elapsed.as_secs_f64(),
            self.throughput()
        )?;
        let statuses: Vec<String> = self
            .by_status
            .iter()
            .map(|(status, n)| format!("{status}: {n}"))
            .collect();
        writeln!(f, "by status: {}", statuses.join(", "))?;
        let errors: Vec<String> = self
            .by_error
            .iter()
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect();
        writeln!(
            f,
            "by error type: {}",
            if errors.is_empty() {
                "none".to_owned()
            } else {
                errors.join(", ")
            }
        )?;
        writeln!(f, "invocation failures: {}", self.invoke_errors)?;
        writeln!(
            f,
            "stored: {} rounds, {} messages; {} compaction steps over {} compactor batches",
            self.rounds_stored, self.messages_stored, self.steps_applied, self.compactor_batches
        )?;
        writeln!(
            f,
            "latency: p50 {} ms, p95 {} ms, max {} ms",
            self.latency[0].as_millis(),
            self.latency[1].as_millis(),
            self.latency[2].as_millis()
        )?;
        if self.violations.is_empty() {
            write!(
                f,
                "check: every acknowledged round stored exactly once, dense sequences, errors wrote nothing"
            )
        } else {
            writeln!(f, "VIOLATIONS ({}):", self.violations.len())?;
            for violation in self.violations.iter().take(50) {
                writeln!(f, "  - {violation}")?;
            }
            Ok(())
        }
    }
}

/// The tenant config of a soak: the demo tools, a few fact keys and, with
/// compaction, a threshold low enough for steps every few rounds.
fn tenant_config(compaction: bool) -> TenantConfig {
    TenantConfig {
        instructions: Some("You book haircuts for a barber shop. Use the tools.".into()),
        allowed_fact_keys: Some(
            ["name", "preferred_time"]
                .iter()
                .filter_map(|k| FactKey::parse(k).ok())
                .collect(),
        ),
        compaction_threshold_tokens: Some(if compaction { 1_500 } else { 10_000_000 }),
        window_keep_messages: Some(4),
        ..TenantConfig::default()
    }
}

/// Message `n` of a contact: unique text, a tool request every `tool_every`.
fn message(contact: &str, n: usize, tool_every: usize) -> String {
    let day = 1 + n % 9;
    if tool_every > 0 && n.is_multiple_of(tool_every) {
        if (n / tool_every).is_multiple_of(2) {
            format!("soak {contact} m{n}: any free slots on 2026-12-0{day}?")
        } else {
            format!("soak {contact} m{n}: please book 10:30 on 2026-12-0{day}")
        }
    } else {
        format!("soak {contact} m{n}: thanks, noted")
    }
}

/// Takes up to `want` requests from the shared budget.
fn reserve(budget: &AtomicUsize, want: usize) -> usize {
    let mut taken = 0;
    let _ = budget.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
        taken = left.min(want);
        Some(left - taken)
    });
    taken
}

async fn post(stack: &FullStack, contact: &str, text: &str, key: Option<&str>) -> Sent {
    let body = json!({ "text": text }).to_string();
    let mut headers = vec![
        ("content-type", "application/json"),
        ("x-tenant-id", TENANT),
    ];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    let event = api_event(
        "POST",
        &format!("/v1/contacts/{contact}/messages"),
        "",
        &headers,
        Some(&body),
        None,
    );
    let started = Instant::now();
    let answer = stack.ask.invoke(event.clone()).await;
    Sent {
        contact: contact.to_owned(),
        text: text.to_owned(),
        key: key.map(str::to_owned),
        replay_of: None,
        reply: answer
            .map(|response| HttpReply::from_api(&event, &response))
            .map_err(|error| error.to_string()),
        latency: started.elapsed(),
    }
}

/// One conversation: bursts of concurrent messages until the budget or the time
/// runs out, then a replay of each idempotent 2xx.
async fn conversation(
    stack: Arc<FullStack>,
    index: usize,
    config: SoakConfig,
    budget: Arc<AtomicUsize>,
    deadline: Option<Instant>,
) -> Vec<Sent> {
    let contact = format!("+55119{index:08}");
    let mut sent = Vec::new();
    let mut n = 0;
    for _ in 0..HARD_CAP_REQUESTS {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let take = reserve(&budget, config.burst.max(1));
        if take == 0 {
            break;
        }
        let mut burst = JoinSet::new();
        for _ in 0..take {
            n += 1;
            let text = message(&contact, n, config.tool_every);
            let key = (config.idempotent_every > 0 && n.is_multiple_of(config.idempotent_every))
                .then(|| format!("soak-{index}-{n}"));
            let (stack, contact) = (stack.clone(), contact.clone());
            burst.spawn(async move { post(&stack, &contact, &text, key.as_deref()).await });
        }
        let mut answered: Vec<Sent> = burst.join_all().await;
        answered.sort_by(|a, b| a.text.cmp(&b.text));
        for first in &answered {
            if let (Some(key), true) = (&first.key, first.acknowledged()) {
                let mut replay = post(&stack, &contact, &first.text, Some(key)).await;
                replay.replay_of = first.reply.as_ref().ok().map(|r| r.raw.clone());
                sent.push(replay);
            }
        }
        sent.extend(answered);
    }
    sent
}

/// Runs the bridge until `stop`; returns the batches processed and what went wrong.
async fn compactor_loop(stack: Arc<FullStack>, stop: Arc<AtomicBool>) -> (usize, Vec<String>) {
    let mut batches = 0;
    let mut problems = Vec::new();
    let invoke = LocalInvoke(&stack.compactor);
    for _ in 0..HARD_CAP_REQUESTS {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        match poll_once(&stack.sqs, &stack.queue, &invoke).await {
            Ok(report) if report.received == 0 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(report) => {
                batches += 1;
                if let Some(error) = report.invoke_error.or(report.bad_response) {
                    problems.push(format!("a compactor batch failed: {error}"));
                }
            }
            Err(error) => problems.push(format!("the bridge failed: {error}")),
        }
    }
    (batches, problems)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Runs a soak on a fresh local stack (moto must be running; see
/// [`crate::moto::ENDPOINT_VAR`]) and checks storage afterwards.
pub async fn soak(config: SoakConfig) -> SoakReport {
    let stack = Arc::new(
        FullStack::start_with(&StackOptions {
            ask_instances: config.ask_instances.max(1),
            ..StackOptions::default()
        })
        .await,
    );
    stack
        .configure(TENANT, &tenant_config(config.compaction))
        .await;
    let budget = Arc::new(AtomicUsize::new(
        config
            .max_requests
            .unwrap_or(HARD_CAP_REQUESTS)
            .min(HARD_CAP_REQUESTS),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = config
        .compaction
        .then(|| tokio::spawn(compactor_loop(stack.clone(), stop.clone())));

    let started = Instant::now();
    let deadline = config.duration.map(|d| started + d);
    let mut conversations = JoinSet::new();
    for index in 0..config.contacts.max(1) {
        conversations.spawn(conversation(
            stack.clone(),
            index,
            config.clone(),
            budget.clone(),
            deadline,
        ));
    }
    let sent: Vec<Sent> = conversations.join_all().await.concat();
    let elapsed = started.elapsed();

    stop.store(true, Ordering::SeqCst);
    let mut report = SoakReport {
        contacts: config.contacts.max(1),
        burst: config.burst.max(1),
        ask_instances: config.ask_instances.max(1),
        compaction: config.compaction,
        elapsed,
        ..SoakReport::default()
    };
    if let Some(task) = compactor {
        match task.await {
            Ok((batches, problems)) => {
                report.compactor_batches = batches;
                report.violations.extend(problems);
            }
            Err(error) => report
                .violations
                .push(format!("the compactor loop panicked: {error}")),
        }
        // The jobs still queued run now, so the check sees their effect too.
        report.compactor_batches += stack.drain().await.len();
    }

    tally(&sent, &mut report);
    check(&stack, &sent, &mut report).await;
    report
}

fn tally(sent: &[Sent], report: &mut SoakReport) {
    report.requests = sent.len();
    report.replays = sent.iter().filter(|s| s.replay_of.is_some()).count();
    for request in sent {
        match &request.reply {
            Ok(reply) => {
                *report.by_status.entry(reply.status).or_default() += 1;
                if let Some(kind) = reply.error_type() {
                    *report.by_error.entry(kind.to_owned()).or_default() += 1;
                }
            }
            Err(_) => report.invoke_errors += 1,
        }
    }
    let mut latencies: Vec<Duration> = sent.iter().map(|s| s.latency).collect();
    latencies.sort();
    report.latency = [
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.95),
        percentile(&latencies, 1.0),
    ];
}

/// Checks one request's answer on its own (status, replay bytes).
fn check_answer(request: &Sent, violations: &mut Vec<String>) {
    let reply = match &request.reply {
        Ok(reply) => reply,
        Err(error) => {
            violations.push(format!(
                "{:?}: the invocation failed: {error}",
                request.text
            ));
            return;
        }
    };
    if let Some(original) = &request.replay_of {
        let replayed = reply
            .headers
            .get("idempotent-replayed")
            .and_then(Value::as_str)
            == Some("true");
        if reply.status != 200 || &reply.raw != original || !replayed {
            violations.push(format!(
                "{:?}: the idempotent retry answered {} (replayed: {replayed}) instead of the stored response",
                request.text, reply.status
            ));
        }
    } else if !request.acknowledged() && !ACCEPTED_ERRORS.contains(&reply.status) {
        violations.push(format!(
            "{:?}: unexpected status {}: {}",
            request.text, reply.status, reply.raw
        ));
    }
}

/// Checks a contact's storage against its answers: see the module documentation.
async fn check(stack: &FullStack, sent: &[Sent], report: &mut SoakReport) {
    let mut contacts: Vec<&str> = sent.iter().map(|s| s.contact.as_str()).collect();
    contacts.sort_unstable();
    contacts.dedup();
    for request in sent {
        check_answer(request, &mut report.violations);
    }
    for contact in contacts {
        let items = stack.contact_items(TENANT, contact).await;
        let messages = stack.stored_messages(TENANT, contact).await;
        report.messages_stored += messages.len();
        let mine: Vec<&Sent> = sent.iter().filter(|s| s.contact == contact).collect();
        let mut acked: Vec<(u64, u64, &Sent)> = mine
            .iter()
            .filter(|s| s.replay_of.is_none() && s.acknowledged())
            .filter_map(|s| {
                let body = &s.reply.as_ref().ok()?.body;
                Some((
                    body["round"]["first_seq"].as_u64()?,
                    body["round"]["last_seq"].as_u64()?,
                    *s,
                ))
            })
            .collect();
        acked.sort_by_key(|(first, _, _)| *first);
        report.rounds_stored += messages.iter().filter(|m| m.is_user_text()).count();
        check_tiling(contact, &messages, &acked, &mut report.violations);

        for request in mine
            .iter()
            .filter(|s| s.replay_of.is_none() && !s.acknowledged())
        {
            if messages.iter().any(|m| m.text() == request.text) {
                report.violations.push(format!(
                    "{contact}: {:?} answered {:?} yet is stored",
                    request.text,
                    request.status()
                ));
            }
        }
        let keyed = acked.iter().filter(|(_, _, s)| s.key.is_some()).count();
        let claims: Vec<String> = items
            .iter()
            .filter(|i| attr_s(i, "sk").starts_with("REQ#"))
            .map(|i| attr_s(i, "status"))
            .collect();
        if claims.iter().any(|status| status != "completed") || claims.len() != keyed {
            report.violations.push(format!(
                "{contact}: idempotency records {claims:?} for {keyed} acknowledged keyed requests"
            ));
        }
        match items.iter().find(|i| attr_s(i, "sk") == "HEAD") {
            None if messages.is_empty() => {}
            None => report
                .violations
                .push(format!("{contact}: messages without a head")),
            Some(head) => {
                report.steps_applied += attr_n(head, "steps");
                check_head(contact, head, &messages, &mut report.violations);
            }
        }
    }
    match stack
        .sqs
        .receive_message()
        .queue_url(&stack.dlq_url)
        .max_number_of_messages(10)
        .send()
        .await
    {
        Ok(dead) if dead.messages().is_empty() => {}
        Ok(dead) => report.violations.push(format!(
            "{} job(s) in the dead-letter queue",
            dead.messages().len()
        )),
        Err(error) => report
            .violations
            .push(format!("cannot read the dead-letter queue: {error}")),
    }
}

/// The acknowledged rounds tile the transcript exactly: dense, each round whole and
/// matching its answer, nothing stored that no 2xx acknowledged.
fn check_tiling(
    contact: &str,
    messages: &[RawMessage],
    acked: &[(u64, u64, &Sent)],
    violations: &mut Vec<String>,
) {
    for (i, message) in messages.iter().enumerate() {
        if message.seq != i as u64 + 1 || message.session != 1 {
            violations.push(format!(
                "{contact}: message {i} is session {} seq {}: not dense",
                message.session, message.seq
            ));
            return;
        }
    }
    let mut next = 1;
    for (first, last, request) in acked {
        if *first != next {
            violations.push(format!(
                "{contact}: round {first}..{last} of {:?} follows {}: a gap, an overlap or an unacknowledged round",
                request.text,
                next - 1
            ));
        }
        let body = request
            .reply
            .as_ref()
            .map(|r| r.body.clone())
            .unwrap_or_default();
        let opening = messages.get(*first as usize - 1);
        if !opening.is_some_and(|m| m.is_user_text() && m.text() == request.text) {
            violations.push(format!(
                "{contact}: message {first} is not {:?}: {opening:?}",
                request.text
            ));
        }
        let closing = messages.get(*last as usize - 1);
        if !closing.is_some_and(|m| m.role == "assistant" && m.content == body["reply"]["content"])
        {
            violations.push(format!(
                "{contact}: message {last} is not the reply to {:?}",
                request.text
            ));
        }
        let inner = messages
            .get(*first as usize..(*last as usize).saturating_sub(1))
            .unwrap_or_default();
        if inner.iter().any(RawMessage::is_user_text) {
            violations.push(format!("{contact}: round {first}..{last} is interleaved"));
        }
        next = last + 1;
    }
    if next - 1 != messages.len() as u64 {
        violations.push(format!(
            "{contact}: {} messages stored, acknowledged rounds cover 1..{}",
            messages.len(),
            next - 1
        ));
    }
}

fn check_head(
    contact: &str,
    head: &crate::stack::RawItem,
    messages: &[RawMessage],
    violations: &mut Vec<String>,
) {
    let (last_seq, until, steps) = (
        attr_n(head, "last_seq"),
        attr_n(head, "summarized_until"),
        attr_n(head, "steps"),
    );
    if last_seq != messages.len() as u64 {
        violations.push(format!(
            "{contact}: head last_seq {last_seq}, {} messages",
            messages.len()
        ));
    }
    if until > last_seq
        || (steps > 0) != (until > 0)
        || (steps > 0 && attr_s(head, "summary").is_empty())
    {
        violations.push(format!(
            "{contact}: head summarized_until {until}, steps {steps}, last_seq {last_seq}: inconsistent"
        ));
    }
    if let Some(next) = messages.get(until as usize)
        && !next.is_user_text()
    {
        violations.push(format!(
            "{contact}: the window starts at {} which is not a user text",
            next.seq
        ));
    }
}
