//! Webhook tools end to end: the real `ask` binary (`AUTH_MODE=dev`, so plain http
//! to loopback is allowed), moto (DynamoDB, and SSM holding the signing secret),
//! the stand-in as the model, and the example tool server (`infra/toolserver.py`),
//! which checks every signature with Python's own `hmac` — an implementation
//! independent of degrau's.

use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use degrau_tests::moto;
use degrau_tests::stack::{FullStack, RawMessage, StackOptions};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::tool_server::{ToolServer, put_parameter, put_secret, webhook_tools};

const TENANT: &str = "barbershop";

/// Reads a SecureString of moto's SSM.
async fn parameter_value(name: &str) -> String {
    let ssm = aws_sdk_ssm::Client::new(&moto::sdk_config().await);
    ssm.get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .expect("read the parameter")
        .parameter
        .and_then(|p| p.value)
        .unwrap()
}

/// A stack whose deployment pseudonym secret is its own (fresh, under a unique
/// name), with the default `WEBHOOK_SECRETS_PATH`; returns the secret too.
pub(crate) async fn stack_with_pseudonym_key() -> (FullStack, String) {
    let name = format!("/degrau-test/{}/pseudonym-key", moto::unique_name("key"));
    let key = moto::unique_name("pseudonym-secret");
    put_parameter(&name, &key).await;
    let stack = FullStack::start_with(&StackOptions {
        env: vec![("PSEUDONYM_KEY_PARAMETER".to_owned(), name)],
        ..StackOptions::default()
    })
    .await;
    (stack, key)
}

/// The `tool_result` blocks stored for a contact.
fn tool_results(messages: &[RawMessage]) -> Vec<Value> {
    messages
        .iter()
        .flat_map(|m| m.content.as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .collect()
}

/// The pseudonym by Python's `hmac`: what the receiver should have been sent. The
/// tenant's key is derived from the deployment's secret, and the receiver is named
/// by its secret's parameter.
fn pseudonym_by_python(deployment: &str, tenant: &str, receiver: &str, contact: &str) -> String {
    let output = Command::new("python3")
        .args([
            "-c",
            "import hmac, hashlib, sys; \
             k = hmac.new(sys.argv[1].encode(), b'degrau pseudonym v1\\n' + sys.argv[2].encode(), \
             hashlib.sha256).digest(); \
             print(hmac.new(k, f'{sys.argv[3]}\\n{sys.argv[4]}'.encode(), hashlib.sha256).hexdigest()[:32])",
            deployment,
            tenant,
            receiver,
            contact,
        ])
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// What the pseudonym was before it had a key of degrau's own: the receiver's
/// signing secret keyed it, so the receiver could recompute it for any number.
fn pseudonym_under_the_receivers_secret(secret: &str, tenant: &str, contact: &str) -> String {
    let output = Command::new("python3")
        .args([
            "-c",
            "import hmac, hashlib, sys; print(hmac.new(sys.argv[1].encode(), \
             f'{sys.argv[2]}\\n{sys.argv[3]}'.encode(), hashlib.sha256).hexdigest()[:32])",
            secret,
            tenant,
            contact,
        ])
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Configures `tenant` the way `./dev.sh up` configures the demo tenant
/// (`infra/demo_tenant.py`: the secret into SSM, the CONFIG item naming the tools).
fn configure_like_the_local_stack(stack: &FullStack, tenant: &str, tools_url: &str, secret: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(root.join(".venv/bin/python"))
        .arg(root.join("infra/demo_tenant.py"))
        .args(["--endpoint", &moto::endpoint(), "--table", &stack.table])
        .args(["--tenant", tenant, "--tools-url", tools_url])
        .args(["--secret-env", "TOOLSERVER_TEST_SECRET"])
        .env("TOOLSERVER_TEST_SECRET", secret)
        .status()
        .expect("run infra/demo_tenant.py");
    assert!(status.success());
}

#[tokio::test]
async fn a_booking_through_the_example_server_is_committed_with_its_round() {
    let secret = format!("whsec_{}", moto::unique_name("e2e"));
    let server = ToolServer::start(&secret);
    // As `./dev.sh up` runs it: the local secrets path and pseudonym key.
    let stack = FullStack::start_with(&StackOptions {
        env: vec![
            (
                "WEBHOOK_SECRETS_PATH".to_owned(),
                "/degrau/local/webhooks/".to_owned(),
            ),
            (
                "PSEUDONYM_KEY_PARAMETER".to_owned(),
                "/degrau/local/pseudonym-key".to_owned(),
            ),
        ],
        ..StackOptions::default()
    })
    .await;
    configure_like_the_local_stack(&stack, TENANT, &format!("{}/", server.url), &secret);
    let deployment = parameter_value("/degrau/local/pseudonym-key").await;

    let reply = stack
        .post(TENANT, "ana", "please book 10:30 on 2026-12-03")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);

    // The server booked it: it verified the signature with Python's hmac first.
    let bookings = server.bookings().await;
    assert_eq!(bookings.len(), 1, "{bookings:?}");
    let booking = &bookings[0];
    assert_eq!(booking["day"], "2026-12-03");
    assert_eq!(booking["time"], "10:30");
    assert_eq!(booking["confirmation_id"], "TS-0001");
    assert_eq!(
        booking["contact"],
        pseudonym_by_python(
            &deployment,
            TENANT,
            &format!("/degrau/local/webhooks/{TENANT}/toolserver"),
            "ana"
        ),
        "the contact is the pseudonym, never the id"
    );
    assert_ne!(
        booking["contact"],
        pseudonym_under_the_receivers_secret(&secret, TENANT, "ana"),
        "the receiver's own secret does not key it"
    );

    // The round committed the call and the server's answer.
    let messages = stack.stored_messages(TENANT, "ana").await;
    let results = tool_results(&messages);
    assert_eq!(results.len(), 1, "{messages:?}");
    assert!(!results[0]["is_error"].as_bool().unwrap_or(false));
    let content: Value = serde_json::from_str(results[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["confirmation_id"], "TS-0001");
    assert_eq!(content["status"], "confirmed");
    let tool_use = messages
        .iter()
        .flat_map(|m| m.content.as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_use")
        .unwrap();
    assert_eq!(booking["tool_use_id"], tool_use["id"]);
    assert_eq!(messages.last().unwrap().role, "assistant");

    // The same round's call again (a retried round): the server dedupes it.
    let retried = json!({
        "tool_use_id": tool_use["id"], "name": "book_slot", "input": tool_use["input"],
        "tenant": TENANT, "contact": booking["contact"],
    });
    let (status, again) = server
        .post(&secret, now(), tool_use["id"].as_str().unwrap(), &retried)
        .await;
    assert_eq!(status, 200);
    assert_eq!(again["confirmation_id"], "TS-0001");
    assert_eq!(server.bookings().await.len(), 1);
}

#[tokio::test]
async fn the_example_server_refuses_a_stale_timestamp_and_a_wrong_secret() {
    let secret = "whsec_refusals";
    let server = ToolServer::start(secret);
    let call = json!({
        "tool_use_id": "toolu_1", "name": "list_free_slots", "input": {"day": "2026-12-03"},
        "tenant": TENANT, "contact": "0123456789abcdef0123456789abcdef",
    });
    let (status, body) = server.post(secret, now() - 600, "k-stale", &call).await;
    assert_eq!((status, &body["error"]), (401, &json!("stale timestamp")));
    let (status, body) = server.post(secret, now() + 600, "k-future", &call).await;
    assert_eq!((status, &body["error"]), (401, &json!("stale timestamp")));
    let (status, body) = server.post("whsec_other", now(), "k-wrong", &call).await;
    assert_eq!((status, &body["error"]), (401, &json!("bad signature")));
    let (status, body) = server.post(secret, now(), "k-fresh", &call).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["slots"].as_array().unwrap().len(), 60);
}

#[tokio::test]
async fn a_hung_webhook_is_an_error_result_and_the_round_still_commits() {
    // A receiver that accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let parameter = put_secret(TENANT, "whsec_hung").await;
    let (stack, _) = stack_with_pseudonym_key().await;
    stack
        .configure(TENANT, &webhook_tools(&url, &parameter, 500))
        .await;

    let reply = stack
        .post(TENANT, "bia", "please book 10:30 on 2026-12-03")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let results = tool_results(&stack.stored_messages(TENANT, "bia").await);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(
        results[0]["content"],
        "the tool's webhook did not answer in time (within 500 ms)"
    );
}

#[tokio::test]
async fn a_webhook_whose_secret_is_missing_is_an_error_result_and_nothing_is_sent() {
    let server = ToolServer::start("whsec_unused");
    let (stack, _) = stack_with_pseudonym_key().await;
    stack
        .configure(
            TENANT,
            &webhook_tools(
                &server.url,
                &format!("/degrau/webhooks/{TENANT}/never-written"),
                2_000,
            ),
        )
        .await;
    let reply = stack
        .post(TENANT, "caio", "please book 10:30 on 2026-12-03")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let results = tool_results(&stack.stored_messages(TENANT, "caio").await);
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(
        results[0]["content"],
        "the tool's webhook was not called: its signing secret could not be read"
    );
    assert!(server.bookings().await.is_empty());
}

#[tokio::test]
async fn a_tool_naming_another_tenants_secret_is_never_called_and_the_round_commits() {
    // The role may read every secret under the path; the tenant may name only its own.
    let secret = "whsec_other_tenant";
    let server = ToolServer::start(secret);
    let foreign = put_secret("another-shop", secret).await;
    let (stack, _) = stack_with_pseudonym_key().await;
    stack
        .configure(TENANT, &webhook_tools(&server.url, &foreign, 2_000))
        .await;
    let reply = stack
        .post(TENANT, "duda", "please book 10:30 on 2026-12-03")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let results = tool_results(&stack.stored_messages(TENANT, "duda").await);
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(
        results[0]["content"],
        format!(
            "the tool's webhook was not called: its secret_parameter must lie under \
             /degrau/webhooks/{TENANT}/"
        )
    );
    assert!(server.bookings().await.is_empty());
}

#[tokio::test]
async fn the_example_server_refuses_a_call_for_another_tenant() {
    let secret = "whsec_one_tenant";
    let server = ToolServer::start_for(secret, Some(TENANT));
    let call = |tenant: &str| {
        json!({
            "tool_use_id": "toolu_1", "name": "list_free_slots", "input": {"day": "2026-12-03"},
            "tenant": tenant, "contact": "0123456789abcdef0123456789abcdef",
        })
    };
    let (status, body) = server
        .post(secret, now(), "k-1", &call("another-shop"))
        .await;
    assert_eq!(
        (status, &body["error"]),
        (403, &json!("not this receiver's tenant"))
    );
    let (status, _) = server.post(secret, now(), "k-2", &call(TENANT)).await;
    assert_eq!(status, 200);
}
