//! The fair share under load, on the local stack (issue 39): four tenants on one
//! deployment of `ask` instances (the real binary, as Lambda runs it: one
//! invocation per instance at a time, a queue when all are busy) over moto and the
//! stand-in. One tenant floods (many clients, as fast as they can), one has a
//! webhook tool that takes 9.9 s, two are quiet (one client each, a message every
//! 300 ms). The two quiet tenants run alone first, then beside the other two with the
//! fair share on (each tenant's concurrency, rounds per minute, a contact's turns
//! per minute, a round's tool time), then with it off; each run prints every
//! tenant's requests, answers by status, and latency percentiles, side by side.
//! Figures are printed, never asserted: the machine is shared.
//!
//! It also measures what one `whatsapp-webhook` instance refuses a second of
//! unsigned posts (the sizing of the webhook route's throttle, docs/deploy.md).
//!
//! `DEGRAU_TEST_AWS_ENDPOINT=http://127.0.0.1:5005 cargo run -p degrau-bench --bin
//! fairness [-- --seconds 30 --instances 8]` (binaries built first: `cargo build
//! --workspace --bins`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use degrau::tenant::TenantConfig;
use degrau_tests::lambda::{LocalLambda, binary};
use degrau_tests::stack::{FullStack, StackOptions, message_event};
use degrau_tests::{HttpReply, api_event, moto};
use serde_json::json;
use tokio::sync::Mutex;

/// The tenants and what each does.
const FLOODER: &str = "flooder";
const SLOW: &str = "slow-tools";
const QUIET: [&str; 2] = ["quiet-a", "quiet-b"];
/// Concurrent clients of the flooding tenant, and of the slow one.
const FLOOD_CLIENTS: usize = 6;
const SLOW_CLIENTS: usize = 6;
/// A quiet client's pause between its messages.
const QUIET_PAUSE: Duration = Duration::from_millis(300);
/// A flooding client's pause: far above its fair share (five rounds a second), yet
/// leaving the machine's two cores to the functions, moto and the stand-in, which
/// on Lambda would not share them.
const FLOOD_PAUSE: Duration = Duration::from_millis(50);
/// How long the slow tenant's webhook tool takes.
const SLOW_TOOL: Duration = Duration::from_millis(9_900);

/// One answer: the tenant, its status (0: no answer), and how long it took.
type Sample = (&'static str, u16, Duration);

struct Args {
    seconds: u64,
    instances: usize,
}

fn args() -> Args {
    let mut args = Args {
        seconds: 30,
        instances: 8,
    };
    let given: Vec<String> = std::env::args().skip(1).collect();
    for pair in given.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        match (pair[0].as_str(), value) {
            ("--seconds", Some(v)) => args.seconds = v,
            ("--instances", Some(v)) => args.instances = v as usize,
            _ => eprintln!("ignored: {pair:?} (--seconds N, --instances N)"),
        }
    }
    args
}

/// The plan's fair share, as the template sets it (rates sized so a quiet tenant's
/// client, 200 rounds a minute, stays under them).
const FAIR_SHARE: [(&str, &str); 4] = [
    ("TENANT_CONCURRENCY", "2"),
    ("TENANT_ROUNDS_PER_MINUTE", "300"),
    ("CONTACT_TURNS_PER_MINUTE", "300"),
    ("TOOL_SECONDS_PER_ROUND", "15"),
];

#[tokio::main]
async fn main() {
    let args = args();
    let tool = slow_tool_server().await;
    let alone = run(&args, &tool, false, true).await;
    let shared = run(&args, &tool, true, false).await;
    let unshared = run(&args, &tool, false, false).await;
    println!(
        "\nfairness: {} s a run, {} ask instances",
        args.seconds, args.instances
    );
    println!("(fair share: {FAIR_SHARE:?})\n");
    report("quiet tenants alone", &alone);
    report("all four, fair share on", &shared);
    report("all four, fair share off", &unshared);
    for tenant in QUIET {
        let p99 = |samples: &[Sample]| percentile(&latencies(samples, tenant), 0.99);
        let (alone, on, off) = (p99(&alone), p99(&shared), p99(&unshared));
        println!(
            "{tenant}: p99 {:.0} ms alone, {:.0} ms beside the others with the fair share \
             ({:.1}x), {:.0} ms without ({:.1}x)",
            ms(alone),
            ms(on),
            ms(on) / ms(alone).max(1.0),
            ms(off),
            ms(off) / ms(alone).max(1.0)
        );
    }
    webhook_refusals().await;
}

/// One run of `seconds`: the quiet tenants, and unless `quiet_only` the flooding
/// and the slow one; the fair share on or off.
async fn run(args: &Args, tool: &str, fair: bool, quiet_only: bool) -> Vec<Sample> {
    let mut env: Vec<(String, String)> = vec![("PSEUDONYM_KEY_PARAMETER".into(), KEY.into())];
    if fair {
        env.extend(FAIR_SHARE.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    }
    let moto_url = moto::endpoint();
    let stack = FullStack::start_with(&StackOptions {
        env,
        ask_instances: args.instances,
        // Straight to moto: the one-at-a-time forwarder would make every tenant
        // queue behind every other at the table, which Lambda does not. Each
        // client writes its own contact, so no transaction races another.
        dynamodb_endpoint: Some(moto_url.clone()),
        ..StackOptions::default()
    })
    .await;
    configure_slow_tenant(&stack, tool).await;
    let stack = Arc::new(stack);
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for tenant in QUIET {
        clients.push(client(&stack, &samples, &stop, tenant, 0, QUIET_PAUSE));
    }
    if !quiet_only {
        for n in 0..FLOOD_CLIENTS {
            clients.push(client(&stack, &samples, &stop, FLOODER, n, FLOOD_PAUSE));
        }
        for n in 0..SLOW_CLIENTS {
            clients.push(client(&stack, &samples, &stop, SLOW, n, Duration::ZERO));
        }
    }
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        let _ = client.await;
    }
    samples.lock().await.clone()
}

/// One client of `tenant` sending to its own contact until `stop`, pausing
/// `pause` between messages (and after a 429, its `Retry-After`, at most a second).
fn client(
    stack: &Arc<FullStack>,
    samples: &Arc<Mutex<Vec<Sample>>>,
    stop: &Arc<AtomicBool>,
    tenant: &'static str,
    n: usize,
    pause: Duration,
) -> tokio::task::JoinHandle<()> {
    let (stack, samples, stop) = (stack.clone(), samples.clone(), stop.clone());
    tokio::spawn(async move {
        let contact = format!("client-{n}");
        let text = match tenant {
            SLOW => "which slots are free on 2026-12-04?",
            _ => "hello, just checking in",
        };
        while !stop.load(Ordering::SeqCst) {
            let event = message_event(tenant, &contact, text);
            let started = Instant::now();
            let reply = stack.ask.invoke(event).await;
            let took = started.elapsed();
            let status = reply
                .as_ref()
                .map(|r| HttpReply::from_lambda(r).status)
                .unwrap_or(0);
            samples.lock().await.push((tenant, status, took));
            let wait = if status == 429 {
                Duration::from_secs(1)
            } else {
                pause
            };
            tokio::time::sleep(wait).await;
        }
    })
}

/// The deployment's pseudonym secret's parameter (a webhook tool's call needs it).
const KEY: &str = "/degrau-bench/fairness/pseudonym-key";

/// The slow tenant's `list_free_slots` is its own webhook, taking [`SLOW_TOOL`]
/// (beside the built-in `book_slot`: the stand-in calls the scheduling tools when
/// both are there).
async fn configure_slow_tenant(stack: &FullStack, tool: &str) {
    let ssm = aws_sdk_ssm::Client::new(&moto::sdk_config().await);
    let secret = format!("/degrau/webhooks/{SLOW}/slots");
    for (name, value) in [(KEY, "a bench's pseudonym secret"), (secret.as_str(), "s")] {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
            .overwrite(true)
            .send()
            .await
            .expect("put a parameter");
    }
    let config: TenantConfig = serde_json::from_value(json!({"tools": [{
        "name": "list_free_slots",
        "description": "Free slots of a day.",
        "input_schema": {"type": "object", "properties": {"day": {"type": "string"}}},
        "webhook": {"url": tool, "secret_parameter": secret, "timeout_ms": 10_000}
    }, "book_slot"]}))
    .expect("the slow tenant's config");
    stack.configure(SLOW, &config).await;
}

/// A webhook tool that answers after [`SLOW_TOOL`]; its URL.
async fn slow_tool_server() -> String {
    let app = axum::Router::new().fallback(|| async {
        tokio::time::sleep(SLOW_TOOL).await;
        axum::Json(json!({"slots": ["10:00", "15:30"]}))
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the tool server");
    let url = format!("http://{}/slots", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn latencies(samples: &[Sample], tenant: &str) -> Vec<Duration> {
    let mut all: Vec<Duration> = samples
        .iter()
        .filter(|(t, status, _)| *t == tenant && *status == 200)
        .map(|(_, _, took)| *took)
        .collect();
    all.sort();
    all
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let at = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[at]
}

/// Prints a run: per tenant, requests, answers by status, the quiet tenants'
/// error rate, and latency of its 200s.
fn report(title: &str, samples: &[Sample]) {
    println!("{title}");
    println!(
        "  {:<11} {:>8} {:>6} {:>6} {:>7} {:>9} {:>8} {:>8} {:>8}",
        "tenant", "requests", "200", "429", "other", "errors %", "p50 ms", "p99 ms", "max ms"
    );
    let mut tenants: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for sample in samples {
        tenants.entry(sample.0).or_default().push(sample);
    }
    for (tenant, answers) in tenants {
        let count = |status: u16| answers.iter().filter(|s| s.1 == status).count();
        let other = answers.len() - count(200) - count(429);
        let sorted = latencies(samples, tenant);
        println!(
            "  {:<11} {:>8} {:>6} {:>6} {:>7} {:>9.1} {:>8.0} {:>8.0} {:>8.0}",
            tenant,
            answers.len(),
            count(200),
            count(429),
            other,
            100.0 * (answers.len() - count(200)) as f64 / answers.len().max(1) as f64,
            ms(percentile(&sorted, 0.5)),
            ms(percentile(&sorted, 0.99)),
            ms(sorted.last().copied().unwrap_or_default()),
        );
    }
}

/// Unsigned posts one webhook instance refuses a second (401, nothing written).
async fn webhook_refusals() {
    let config = moto::sdk_config().await;
    let table = moto::fresh_table(&aws_sdk_dynamodb::Client::new(&config)).await;
    let env =
        degrau_tests::stack::function_env(&table, None, &moto::endpoint(), "http://127.0.0.1:9");
    let webhook = LocalLambda::start(
        binary("whatsapp-webhook"),
        degrau_tests::with_env(
            &env,
            &[
                ("WHATSAPP_QUEUE_URL", "http://127.0.0.1:9/queue"),
                ("WHATSAPP_APP_SECRET", "a bench's app secret"),
                ("WHATSAPP_VERIFY_TOKEN", "a bench's verify token"),
                ("PSEUDONYM_KEY", "a bench's pseudonym secret"),
                ("RUST_LOG", "warn"),
            ],
        ),
    )
    .await;
    let body = json!({"object": "whatsapp_business_account", "entry": []}).to_string();
    let posts = 400;
    let started = Instant::now();
    let mut refused = 0;
    for _ in 0..posts {
        let headers = [
            ("content-type", "application/json"),
            ("x-hub-signature-256", "sha256=00"),
        ];
        let event = api_event("POST", "/whatsapp/webhook", "", &headers, Some(&body), None);
        if let Ok(reply) = webhook.invoke(event).await
            && HttpReply::from_lambda(&reply).status == 401
        {
            refused += 1;
        }
    }
    let took = started.elapsed();
    println!(
        "\nwhatsapp-webhook: {refused} of {posts} unsigned posts refused (401) by one instance in \
         {:.2} s: {:.0} a second, {:.2} ms each, the local Runtime API's round trip included",
        took.as_secs_f64(),
        f64::from(refused) / took.as_secs_f64(),
        ms(took) / f64::from(posts)
    );
}
