//! The webhook caller against receivers on loopback (no test connects anywhere
//! else: other hosts resolve through a stub, and refused ones are never dialled).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use sha2::Sha256;
use tokio::net::TcpListener;

use degrau::domain::{ContactId, TenantId};
use degrau::store::ContactKey;

use super::resolver::tests::StubLookup;
use super::secrets::StaticSecrets;
use super::*;

const SECRET: &str = "whsec_test_secret";
const PARAMETER: &str = "/degrau/webhooks/shop/calendar";
const DEPLOYMENT_SECRET: &str = "the deployment's pseudonym secret";

/// What the receiver saw of each request.
#[derive(Debug, Clone)]
struct Seen {
    headers: HeaderMap,
    body: Bytes,
}

type Handler = Box<dyn Fn(usize) -> Response + Send + Sync>;

struct Receiver {
    seen: Mutex<Vec<Seen>>,
    calls: AtomicUsize,
    answer: Handler,
}

/// A receiver on 127.0.0.1 answering the n-th call (from 0) with `answer(n)`.
async fn receiver(
    answer: impl Fn(usize) -> Response + Send + Sync + 'static,
) -> (u16, Arc<Receiver>) {
    let state = Arc::new(Receiver {
        seen: Mutex::new(Vec::new()),
        calls: AtomicUsize::new(0),
        answer: Box::new(answer),
    });
    async fn handle(
        State(state): State<Arc<Receiver>>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Response {
        let n = state.calls.fetch_add(1, Ordering::SeqCst);
        state.seen.lock().unwrap().push(Seen { headers, body });
        (state.answer)(n)
    }
    let router = axum::Router::new()
        .route("/{*path}", axum::routing::any(handle))
        .route("/", axum::routing::any(handle))
        .with_state(state.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (port, state)
}

/// The secrets the role could read: the shop's, another tenant's, the API key and
/// the deployment's pseudonym secret.
fn secrets() -> Arc<StaticSecrets> {
    Arc::new(StaticSecrets(HashMap::from([
        (PARAMETER.to_owned(), SECRET.to_owned()),
        (
            "/degrau/webhooks/other-shop/calendar".to_owned(),
            "whsec_other".to_owned(),
        ),
        (
            "/degrau/anthropic-api-key".to_owned(),
            "sk-not-a-signing-secret".to_owned(),
        ),
        (
            DEFAULT_PSEUDONYM_KEY_PARAMETER.to_owned(),
            DEPLOYMENT_SECRET.to_owned(),
        ),
    ])))
}

fn dev() -> WebhookCaller {
    WebhookCaller::new(
        AddressPolicy::PublicAndLoopback,
        secrets(),
        SecretNames::default(),
    )
    .unwrap()
}

fn jwt_with(lookup: Arc<StubLookup>) -> WebhookCaller {
    WebhookCaller::with_lookup(
        AddressPolicy::PublicOnly,
        secrets(),
        SecretNames::default(),
        lookup,
    )
    .unwrap()
}

fn tool(url: &str, timeout_ms: u64) -> WebhookTool {
    serde_json::from_value(json!({
        "name": "book_slot",
        "description": "Books a slot.",
        "input_schema": {"type": "object"},
        "webhook": {"url": url, "secret_parameter": PARAMETER, "timeout_ms": timeout_ms}
    }))
    .unwrap()
}

fn key() -> ContactKey {
    ContactKey {
        tenant: TenantId::parse("shop").unwrap(),
        contact: ContactId::parse("ana").unwrap(),
    }
}

async fn call(caller: &WebhookCaller, tool: &WebhookTool, budget: Duration) -> ToolOutput {
    let key = key();
    let context = CallContext {
        tool_use_id: "toolu_01",
        key: &key,
        deadline: Deadline::after(budget),
    };
    caller
        .call(tool, &json!({"slot": "2026-12-04T10:00"}), &context)
        .await
}

fn ok(body: &'static str) -> Response {
    (AxumStatus::OK, body).into_response()
}

#[tokio::test]
async fn the_call_is_a_signed_post_with_the_pseudonym_and_the_idempotency_key() {
    let (port, seen) = receiver(|_| ok("{\"booked\": true}")).await;
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/hooks/book"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(output, ToolOutput::ok("{\"booked\": true}"));
    let seen = seen.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let Seen { headers, body } = &seen[0];
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "application/json");
    assert_eq!(header("idempotency-key"), "toolu_01");
    assert!(header("user-agent").starts_with("degrau/"));

    let sent: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        sent,
        json!({
            "tool_use_id": "toolu_01",
            "name": "book_slot",
            "input": {"slot": "2026-12-04T10:00"},
            "tenant": "shop",
            "contact": contact_pseudonym(
                &tenant_pseudonym_key(DEPLOYMENT_SECRET.as_bytes(), "shop"),
                PARAMETER,
                "ana"
            ),
        })
    );
    assert!(!String::from_utf8_lossy(body).contains("ana"));

    // The signature, recomputed the way a receiver would, over the raw body.
    let signature = header("degrau-signature");
    let (t, v1) = signature
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    mac.verify_slice(&hex::decode(v1).unwrap()).unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(t.parse().unwrap()) < 60);
}

#[tokio::test]
async fn a_500_then_a_200_is_retried_once_and_two_500s_are_an_error_after_two_attempts() {
    let (port, seen) = receiver(|n| match n {
        0 => AxumStatus::INTERNAL_SERVER_ERROR.into_response(),
        _ => ok("{\"slots\": []}"),
    })
    .await;
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(output, ToolOutput::ok("{\"slots\": []}"));
    let seen = seen.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body, seen[1].body, "the same body, signed afresh");
    assert_eq!(
        seen[1].headers.get("idempotency-key").unwrap(),
        "toolu_01",
        "the receiver can dedupe the retry"
    );

    let (port, seen) =
        receiver(|_| (AxumStatus::SERVICE_UNAVAILABLE, "down for maintenance").into_response())
            .await;
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "the tool's webhook answered 503 Service Unavailable (tried twice)"
    );
    assert_eq!(seen.calls.load(Ordering::SeqCst), 2, "one retry, not more");
}

#[tokio::test]
async fn a_4xx_is_an_error_with_an_excerpt_of_its_body_and_is_not_retried() {
    let long = format!("no such slot: {}", "x".repeat(1_000));
    let (port, seen) =
        receiver(move |_| (AxumStatus::UNPROCESSABLE_ENTITY, long.clone()).into_response()).await;
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert!(output.is_error);
    let prefix = "the tool's webhook answered 422 Unprocessable Entity: no such slot: ";
    assert!(output.content.starts_with(prefix), "{}", output.content);
    assert_eq!(
        output.content.chars().count(),
        prefix.chars().count() - "no such slot: ".len() + MAX_ERROR_EXCERPT_CHARS
    );
    assert_eq!(seen.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_hung_webhook_is_an_error_within_its_timeout_and_the_rounds_deadline() {
    // A receiver that accepts and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            open.push(socket);
        }
    });

    // The tool's own timeout binds.
    let started = Instant::now();
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{hung}/"), 300),
        Duration::from_secs(20),
    )
    .await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "the tool's webhook did not answer in time (within 300 ms)"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "a timeout is not retried"
    );

    // The round's deadline binds when it is earlier.
    let started = Instant::now();
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{hung}/"), 10_000),
        Duration::from_millis(300),
    )
    .await;
    assert!(output.is_error);
    assert!(output.content.contains("did not answer in time"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_body_over_the_cap_is_an_error_and_a_long_one_under_it_is_capped() {
    let (port, _) = receiver(|_| ok_owned("y".repeat(MAX_BODY_BYTES + 1))).await;
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert!(output.is_error);
    assert!(
        output.content.contains("more than 65536 bytes"),
        "{}",
        output.content
    );

    let (port, _) = receiver(|_| ok_owned("z".repeat(20_000))).await;
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert!(!output.is_error);
    assert_eq!(
        output.content.chars().count(),
        degrau::tools::MAX_TOOL_RESULT_CHARS
    );
}

fn ok_owned(body: String) -> Response {
    (AxumStatus::OK, body).into_response()
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let (target, landed) = receiver(|_| ok("{\"secret\": \"internal\"}")).await;
    let (port, _) = receiver(move |_| {
        (
            AxumStatus::FOUND,
            [("location", format!("http://127.0.0.1:{target}/"))],
        )
            .into_response()
    })
    .await;
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "the tool's webhook answered 302 Found (redirects are not followed)"
    );
    assert_eq!(landed.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_connection_failure_is_retried_once_then_an_error() {
    // A port nothing listens on: bound, then closed.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let output = call(
        &dev(),
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "the tool's webhook could not be reached (tried twice)"
    );
}

#[tokio::test]
async fn in_jwt_mode_loopback_private_and_metadata_addresses_are_never_dialled() {
    let (port, seen) = receiver(|_| ok("{}")).await;
    let lookup = StubLookup::of(&[
        ("tools.example.com", &["127.0.0.1"]),
        ("metadata.example.com", &["169.254.169.254"]),
        ("mapped.example.com", &["::ffff:127.0.0.1", "10.0.0.7"]),
    ]);
    let caller = jwt_with(lookup);
    for (url, expected) in [
        (
            format!("http://127.0.0.1:{port}/"),
            "the tool's webhook was not called: plain http is allowed only to a loopback \
             address (http://127.0.0.1:PORT) in local runs (AUTH_MODE=dev); use https",
        ),
        (
            format!("https://127.0.0.1:{port}/"),
            "the tool's webhook was not called: the address 127.0.0.1 is loopback",
        ),
        (
            format!("https://[::ffff:127.0.0.1]:{port}/"),
            "the tool's webhook was not called: the address ::ffff:127.0.0.1 is loopback",
        ),
        (
            format!("https://[::1]:{port}/"),
            "the tool's webhook was not called: the address ::1 is loopback",
        ),
        (
            "https://169.254.169.254/latest/meta-data/".to_owned(),
            "the tool's webhook was not called: the address 169.254.169.254 is link-local",
        ),
        (
            "https://10.1.2.3/".to_owned(),
            "the tool's webhook was not called: the address 10.1.2.3 is private",
        ),
        (
            format!("https://tools.example.com:{port}/"),
            "the tool's webhook was not called: tools.example.com resolves to no allowed \
             address (127.0.0.1 is loopback)",
        ),
        (
            "https://metadata.example.com/".to_owned(),
            "the tool's webhook was not called: metadata.example.com resolves to no allowed \
             address (169.254.169.254 is link-local)",
        ),
        (
            format!("https://mapped.example.com:{port}/"),
            "the tool's webhook was not called: mapped.example.com resolves to no allowed \
             address (::ffff:127.0.0.1 is loopback)",
        ),
        (
            "ftp://tools.example.com/".to_owned(),
            "the tool's webhook was not called: the scheme \"ftp\" is not allowed; use https",
        ),
    ] {
        let output = call(&caller, &tool(&url, 2_000), Duration::from_secs(5)).await;
        assert!(output.is_error, "{url}");
        assert_eq!(output.content, expected, "{url}");
    }
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0, "nothing was dialled");
}

#[tokio::test]
async fn in_dev_mode_plain_http_goes_only_to_a_loopback_literal() {
    let lookup = StubLookup::of(&[
        ("localhost", &["127.0.0.1"]),
        ("tools.example.com", &["93.184.216.34"]),
    ]);
    let caller = WebhookCaller::with_lookup(
        AddressPolicy::PublicAndLoopback,
        secrets(),
        SecretNames::default(),
        lookup,
    )
    .unwrap();
    for url in [
        "http://localhost:1/",
        "http://tools.example.com/",
        "http://10.0.0.1/",
    ] {
        let output = call(&caller, &tool(url, 2_000), Duration::from_secs(5)).await;
        assert!(output.is_error, "{url}");
        assert!(
            output
                .content
                .contains("plain http is allowed only to a loopback address"),
            "{url}: {}",
            output.content
        );
    }
}

#[tokio::test]
async fn a_secret_that_cannot_be_read_means_no_call() {
    let (port, seen) = receiver(|_| ok("{}")).await;
    let mut missing = tool(&format!("http://127.0.0.1:{port}/"), 2_000);
    missing.webhook.secret_parameter = "/degrau/webhooks/shop/absent".into();
    let output = call(&dev(), &missing, Duration::from_secs(5)).await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "the tool's webhook was not called: its signing secret could not be read"
    );
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_secret_outside_the_tenants_own_path_is_never_read_nor_called_with() {
    let (port, seen) = receiver(|_| ok("{}")).await;
    for parameter in [
        "/degrau/webhooks/other-shop/calendar",
        "/degrau/anthropic-api-key",
        DEFAULT_PSEUDONYM_KEY_PARAMETER,
        "/degrau/webhooks/shop",
        "/degrau/webhooks/shopping/calendar",
    ] {
        let mut foreign = tool(&format!("http://127.0.0.1:{port}/"), 2_000);
        foreign.webhook.secret_parameter = parameter.into();
        let output = call(&dev(), &foreign, Duration::from_secs(5)).await;
        assert!(output.is_error, "{parameter}");
        assert_eq!(
            output.content,
            "the tool's webhook was not called: its secret_parameter must lie under \
             /degrau/webhooks/shop/",
            "{parameter}"
        );
    }
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn without_the_pseudonym_secret_no_call_is_made() {
    let (port, seen) = receiver(|_| ok("{}")).await;
    let caller = WebhookCaller::new(
        AddressPolicy::PublicAndLoopback,
        secrets(),
        SecretNames {
            pseudonym_key: "/degrau/never-written".into(),
            ..SecretNames::default()
        },
    )
    .unwrap();
    let output = call(
        &caller,
        &tool(&format!("http://127.0.0.1:{port}/"), 2_000),
        Duration::from_secs(5),
    )
    .await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "the tool's webhook was not called: degrau's pseudonym key could not be read"
    );
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0);
}

fn delivery(url: &str, parameter: &str) -> degrau::events::Delivery {
    degrau::events::Delivery {
        webhook: degrau::tools::Webhook {
            url: url.to_owned(),
            secret_parameter: parameter.to_owned(),
            timeout_ms: 2_000,
        },
        event: serde_json::from_value(json!({
            "id": "0123456789abcdef0123456789abcdef",
            "type": "handoff.ended",
            "tenant": "shop",
            "contact": "fedcba9876543210fedcba9876543210",
            "at": 1_700_000_000,
            "data": {},
        }))
        .unwrap(),
    }
}

#[tokio::test]
async fn an_event_is_one_signed_post_with_its_id_as_the_idempotency_key_and_no_retry() {
    let (port, seen) = receiver(|n| match n {
        0 => AxumStatus::INTERNAL_SERVER_ERROR.into_response(),
        _ => ok(""),
    })
    .await;
    let event = delivery(&format!("http://127.0.0.1:{port}/events"), PARAMETER);
    let deadline = || Deadline::after(Duration::from_secs(5));
    let failure = dev().deliver(&event, deadline()).await.unwrap_err();
    assert_eq!(failure.to_string(), "status 500");
    assert_eq!(
        seen.calls.load(Ordering::SeqCst),
        1,
        "the queue retries, not the call"
    );
    dev().deliver(&event, deadline()).await.unwrap();

    let seen = seen.seen.lock().unwrap().clone();
    let Seen { headers, body } = &seen[1];
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(
        header("idempotency-key"),
        "0123456789abcdef0123456789abcdef"
    );
    assert!(header("user-agent").ends_with("(events)"));
    let sent: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(sent, serde_json::to_value(&event.event).unwrap());
    let signature = header("degrau-signature");
    let (t, v1) = signature
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    mac.verify_slice(&hex::decode(v1).unwrap()).unwrap();
}

#[tokio::test]
async fn an_event_goes_only_where_a_tools_call_may_and_signs_only_with_its_tenants_secret() {
    let (port, seen) = receiver(|_| ok("")).await;
    let url = format!("http://127.0.0.1:{port}/events");
    let deadline = || Deadline::after(Duration::from_secs(5));
    let other = delivery(&url, "/degrau/webhooks/other-shop/calendar");
    let failure = dev().deliver(&other, deadline()).await.unwrap_err();
    assert_eq!(failure.kind, "refused");
    let key = delivery(&url, "/degrau/anthropic-api-key");
    assert_eq!(
        dev().deliver(&key, deadline()).await.unwrap_err().kind,
        "refused"
    );
    let production = jwt_with(StubLookup::of(&[]));
    let loopback = delivery(&url, PARAMETER);
    let failure = production.deliver(&loopback, deadline()).await.unwrap_err();
    assert_eq!(failure.kind, "refused");
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0);
}
