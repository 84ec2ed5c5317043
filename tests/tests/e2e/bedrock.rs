//! Claude through Amazon Bedrock, offline: the real `ask` with
//! `MODEL_PROVIDER=bedrock` calls the stand-in's `POST /model/{modelId}/invoke`
//! through `aws-sdk-bedrockruntime`. The request is SigV4-signed (botocore, an
//! independent implementation, recomputes the signature of the logged request with
//! the stack's dummy credentials), and its body is the one the Messages API path
//! sends for the same conversation, less `model`, plus `anthropic_version`.
//! (The main ask and compaction modules run a second time under Bedrock in
//! `./dev.sh test`: `DEGRAU_TEST_MODEL_PROVIDER=bedrock`.)

use std::io::Write;
use std::process::{Command, Stdio};

use degrau::tenant::TenantConfig;
use degrau_tests::stack::{FullStack, Provider, StackOptions, model_calls};
use serde_json::{Value, json};

use crate::helpers::{BOOKING_INSTRUCTIONS, env};

const TENANT: &str = "barber";
/// An inference profile id: its `:` is percent-encoded in the path (and encoded
/// again in the canonical request), the case a signer most easily gets wrong.
const PROFILE: &str = "us.anthropic.claude-sonnet-5-v1:0";

async fn stack(provider: Provider) -> FullStack {
    let stack = FullStack::start_with(&StackOptions {
        provider: Some(provider),
        env: env(&[("MODEL", PROFILE)]),
        ..StackOptions::default()
    })
    .await;
    stack
        .configure(
            TENANT,
            &TenantConfig {
                instructions: Some(BOOKING_INSTRUCTIONS.into()),
                ..TenantConfig::default()
            },
        )
        .await;
    stack
}

/// The same conversation on a stack: a plain turn, then a booking (two model
/// calls around a tool); the model calls' log.
async fn converse(stack: &FullStack) -> Vec<Value> {
    for text in ["hello there", "please book 10:30 on 2026-12-03"] {
        let reply = stack.post(TENANT, "ana", text).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
    }
    model_calls(&stack.standin.requests().await)
        .into_iter()
        .cloned()
        .collect()
}

/// botocore's verdict on one logged request.
fn botocore_verdict(signed: &Value) -> Value {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut child = Command::new(format!("{root}/.venv/bin/python"))
        .arg(format!("{root}/infra/check_sigv4.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run infra/check_sigv4.py (./dev.sh test sets up .venv)");
    let input = json!({
        "request": signed,
        "access_key": "test",
        "secret_key": "test",
        "region": "us-east-1",
        "service": "bedrock",
    });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !stdout.trim().is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

#[tokio::test]
async fn a_bedrock_call_is_sigv4_signed_as_botocore_signs_it() {
    let stack = stack(Provider::Bedrock).await;
    let calls = converse(&stack).await;
    assert_eq!(calls.len(), 3, "a turn, then a tool round of two calls");
    for call in &calls {
        assert_eq!(call["status"], 200, "{call}");
        assert_eq!(
            call["path"],
            "/model/us.anthropic.claude-sonnet-5-v1%3A0/invoke"
        );
        let signed = &call["signed"];
        let auth = signed["headers"]["authorization"].as_str().unwrap();
        assert!(
            auth.contains("Credential=test/") && auth.contains("/us-east-1/bedrock/aws4_request"),
            "{auth}"
        );
        assert!(signed["headers"].get("x-api-key").is_none(), "no API key");
        let verdict = botocore_verdict(signed);
        assert_eq!(verdict["match"], true, "{verdict}");
        assert_eq!(verdict["payload_hash_ok"], true, "{verdict}");
        let signed_headers = verdict["signed_headers"].as_array().unwrap();
        for name in ["host", "x-amz-date", "content-type"] {
            assert!(signed_headers.contains(&json!(name)), "{verdict}");
        }
    }
    // The check can fail: one byte more in the body is another signature.
    let mut tampered = calls[0]["signed"].clone();
    tampered["body"] = json!(format!("{} ", tampered["body"].as_str().unwrap()));
    assert_eq!(botocore_verdict(&tampered)["match"], false);
}

#[tokio::test]
async fn the_bedrock_body_is_the_messages_body_less_model_plus_anthropic_version() {
    let (anthropic, bedrock) = tokio::join!(stack(Provider::Anthropic), stack(Provider::Bedrock));
    let (messages, invoked) = tokio::join!(converse(&anthropic), converse(&bedrock));
    assert_eq!(messages.len(), invoked.len());
    for (index, (sent, signed)) in messages.iter().zip(&invoked).enumerate() {
        assert_eq!(sent["path"], "/v1/messages");
        assert_eq!(
            sent["body"]["model"], PROFILE,
            "the id goes in the body there"
        );
        let mut expected = sent["body"].as_object().unwrap().clone();
        expected.remove("model");
        expected.insert("anthropic_version".into(), json!("bedrock-2023-05-31"));
        assert_eq!(signed["body"], Value::Object(expected), "call {index}");
        assert!(
            serde_json::to_string(&signed["body"])
                .unwrap()
                .contains("cache_control"),
            "breakpoints go through"
        );
        assert_eq!(
            signed["usage"], sent["usage"],
            "call {index}: the same cache accounting"
        );
    }
}

#[tokio::test]
async fn the_stacks_of_this_run_use_the_provider_the_run_names() {
    let stack = FullStack::start(&[]).await;
    let reply = stack.post(TENANT, "ana", "hello there").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let log = stack.standin.requests().await;
    let path = log[0]["path"].as_str().unwrap();
    match Provider::from_env() {
        Provider::Anthropic => assert_eq!(path, "/v1/messages"),
        Provider::Bedrock => {
            assert!(
                path.starts_with("/model/") && path.ends_with("/invoke"),
                "{path}"
            );
            assert!(log[0]["signed"]["headers"].get("x-api-key").is_none());
        }
    }
}

#[tokio::test]
async fn a_streamed_round_through_bedrock_is_signed_and_arrives_in_pieces() {
    let stack = stack(Provider::Bedrock).await;
    let streaming = stack.start_function("ask-stream", &[]).await;
    stack.standin.pace(10).await;
    let event = degrau_tests::api_event(
        "POST",
        "/v1/contacts/ana/messages/stream",
        "",
        &[
            ("content-type", "application/json"),
            ("x-tenant-id", TENANT),
        ],
        Some(r#"{"text": "hello there, who are you?"}"#),
        None,
    );
    let mut pieces = streaming.invoke_streaming(event);
    let reply =
        degrau_tests::streamed::read(&mut pieces, std::time::Duration::from_secs(60), |_| false)
            .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let names = reply.names();
    assert!(
        names.iter().filter(|n| **n == "delta").count() >= 2,
        "{names:?}"
    );
    let done = reply.end().unwrap();
    assert_eq!(done.name, "done", "{}", reply.raw);
    assert_eq!(reply.text(), done.data["reply"]["text"].as_str().unwrap());

    let calls = model_calls(&stack.standin.requests().await)
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]["path"],
        "/model/us.anthropic.claude-sonnet-5-v1%3A0/invoke-with-response-stream"
    );
    let verdict = botocore_verdict(&calls[0]["signed"]);
    assert_eq!(verdict["match"], true, "{verdict}");
}
