//! Bedrock Runtime's `POST /model/{modelId}/invoke`: the Messages API's behaviour
//! behind Bedrock's body, signature and error shape.

use serde_json::{Value, json};

use crate::helpers::{Reply, TestStandIn, body_with, first_text, reply, start};

/// A header of the shape SigV4 writes (the stand-in checks the shape only).
const AUTHORIZATION: &str = "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/bedrock/aws4_request, \
     SignedHeaders=content-type;host;x-amz-date, Signature=00";

/// The Messages body as Bedrock takes it: no `model`, `anthropic_version` in it.
fn bedrock_body(mut body: Value) -> Value {
    let object = body.as_object_mut().expect("a JSON object");
    object.remove("model");
    object.insert("anthropic_version".into(), json!("bedrock-2023-05-31"));
    body
}

fn hello() -> Value {
    body_with(json!([{"role": "user", "content": "hello"}]))
}

async fn invoke(standin: &TestStandIn, path_model: &str, body: &Value, signed: bool) -> Reply {
    let mut request = standin
        .client
        .post(standin.url(&format!("/model/{path_model}/invoke")))
        .header("content-type", "application/json")
        .header("x-amz-date", "20261201T000000Z")
        .body(body.to_string());
    if signed {
        request = request.header("authorization", AUTHORIZATION);
    }
    reply(request.send().await.expect("stand-in answers")).await
}

#[tokio::test]
async fn invoke_answers_like_the_messages_api_with_the_model_from_the_path() {
    let standin = start().await;
    let messages = standin.messages(&hello()).await;
    let bedrock = invoke(
        &standin,
        "us.anthropic.claude-sonnet-5-v1%3A0",
        &bedrock_body(hello()),
        true,
    )
    .await;
    assert_eq!(bedrock.status, 200, "{}", bedrock.body);
    assert_eq!(first_text(&bedrock.body), first_text(&messages.body));
    assert_eq!(bedrock.body["model"], "us.anthropic.claude-sonnet-5-v1:0");
    assert_eq!(
        bedrock.body["usage"]["input_tokens"],
        messages.body["usage"]["input_tokens"]
    );
    assert!(bedrock.headers.contains_key("x-amzn-requestid"));

    let log = standin.logged().await;
    let call = &log[1];
    assert_eq!(
        call["path"],
        "/model/us.anthropic.claude-sonnet-5-v1%3A0/invoke"
    );
    assert_eq!(call["body"], bedrock_body(hello()));
    let signed = &call["signed"];
    assert_eq!(signed["headers"]["authorization"], AUTHORIZATION);
    assert_eq!(signed["body"], bedrock_body(hello()).to_string());
    assert!(
        log[0].get("signed").is_none(),
        "the Messages route logs no raw request"
    );
}

#[tokio::test]
async fn invoke_refuses_a_model_field_a_missing_version_and_an_unsigned_call() {
    let standin = start().await;
    let with_model = {
        let mut body = bedrock_body(hello());
        body["model"] = json!("claude-sonnet-5");
        body
    };
    let without_version = {
        let mut body = bedrock_body(hello());
        body.as_object_mut().unwrap().remove("anthropic_version");
        body
    };
    // A first-party-only field Bedrock's schema does not have.
    let with_service_tier = {
        let mut body = bedrock_body(hello());
        body["service_tier"] = json!("auto");
        body
    };
    for (body, text) in [
        (with_model, "extraneous key [model] is not permitted"),
        (
            with_service_tier,
            "extraneous key [service_tier] is not permitted",
        ),
        (
            without_version,
            "required key [anthropic_version] not found",
        ),
    ] {
        let reply = invoke(&standin, "claude-sonnet-5", &body, true).await;
        assert_eq!(reply.status, 400);
        assert!(
            reply.headers["x-amzn-errortype"]
                .to_str()
                .unwrap()
                .starts_with("ValidationException:")
        );
        let message = reply.body["message"].as_str().unwrap();
        assert!(message.contains(text), "{message}");
        assert_eq!(reply.body.as_object().unwrap().len(), 1, "only `message`");
    }

    let unsigned = invoke(&standin, "claude-sonnet-5", &bedrock_body(hello()), false).await;
    assert_eq!(unsigned.status, 403);
    assert!(
        unsigned.headers["x-amzn-errortype"]
            .to_str()
            .unwrap()
            .starts_with("MissingAuthenticationTokenException")
    );
}

#[tokio::test]
async fn invoke_applies_the_messages_rules_and_answers_them_as_validation_errors() {
    let standin = start().await;
    let broken = bedrock_body(body_with(json!([{"role": "assistant", "content": "hi"}])));
    let reply = invoke(&standin, "claude-sonnet-5", &broken, true).await;
    assert_eq!(reply.status, 400);
    let messages = standin
        .messages(&body_with(json!([{"role": "assistant", "content": "hi"}])))
        .await;
    assert_eq!(reply.body["message"], messages.body["error"]["message"]);
}

#[tokio::test]
async fn invoke_takes_faults_and_scripts_in_bedrocks_shape() {
    let standin = start().await;
    standin
        .control(
            "/stand-in/faults",
            &json!([{"status": 429}, {"status": 529}, {"status": 504},
                    {"status": 429, "type": "ModelNotReadyException"}]),
        )
        .await;
    standin
        .control(
            "/stand-in/script",
            &json!([{"content": [{"type": "text", "text": "scripted"}]}]),
        )
        .await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        let reply = invoke(&standin, "claude-sonnet-5", &bedrock_body(hello()), true).await;
        let kind = reply.headers["x-amzn-errortype"]
            .to_str()
            .unwrap()
            .to_owned();
        seen.push((reply.status, kind.split(':').next().unwrap().to_owned()));
        assert!(reply.body["message"].is_string());
    }
    assert_eq!(
        seen,
        [
            (429, "ThrottlingException".to_owned()),
            (503, "ServiceUnavailableException".to_owned()),
            (408, "ModelTimeoutException".to_owned()),
            (429, "ModelNotReadyException".to_owned()),
        ]
    );
    let reply = invoke(&standin, "claude-sonnet-5", &bedrock_body(hello()), true).await;
    assert_eq!(reply.status, 200);
    assert_eq!(first_text(&reply.body), "scripted");
    let log = standin.logged().await;
    assert_eq!(log.len(), 5);
    assert_eq!(log[1]["status"], 503);
    assert!(log[1]["response"]["message"].is_string());
}

#[tokio::test]
async fn invoke_accounts_the_prompt_cache_like_the_messages_api() {
    let standin = start().await;
    let long = "You schedule haircuts for a barber shop; be brief and kind. ".repeat(100);
    let body = json!({
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 64,
        "system": [{"type": "text", "text": long, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hello"}],
    });
    let first = invoke(&standin, "claude-sonnet-5", &body, true).await;
    let second = invoke(&standin, "claude-sonnet-5", &body, true).await;
    let created = first.body["usage"]["cache_creation_input_tokens"]
        .as_u64()
        .unwrap();
    assert!(created > 0, "{}", first.body);
    assert_eq!(
        second.body["usage"]["cache_read_input_tokens"]
            .as_u64()
            .unwrap(),
        created
    );
}
