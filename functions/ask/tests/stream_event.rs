//! The streaming function's entry point (`ask::handler::stream::invocation`) with
//! the events Lambda hands it: the REST API's proxy event with a Cognito
//! authorizer's claims (`events/ask-stream-message.json`, the sample for `cargo
//! lambda invoke`), the same without a tenant claim, and an event that is not a
//! request at all (acknowledged, nothing done). The answer is read as Lambda's
//! response streaming sends it: the prelude's status and headers, then the body.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use ask::handler::App;
use ask::handler::stream::{Cors, invocation};
use degrau::converse::Converse;
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::session::system_clock;
use degrau::store::{RecordStore, SessionFilter};
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use degrau_adapters::config::{AuthConfig, ScopeConfig};
use lambda_http::lambda_runtime::{Context, LambdaEvent, StreamResponse};
use serde_json::{Value, json};

const EVENT: &str = include_str!("../../../events/ask-stream-message.json");

fn app(store: Arc<MemoryStore>, model: Arc<ScriptedModel>) -> Arc<App> {
    Arc::new(App {
        whatsapp: degrau_whatsapp::memory::MemoryWhatsApp::on(store.clone()),
        events: std::sync::Arc::new(degrau::events::NoEvents),
        platform: degrau::operate::platform::PlatformAdmin::on(
            store.clone(),
            Defaults::default(),
            system_clock(),
        ),
        records: degrau::records::Records::on(store.clone(), Defaults::default(), system_clock()),
        operate: degrau::operate::Operate::on(store.clone(), Defaults::default(), system_clock())
            .checking(ask::handler::channel_checks()),
        converse: Converse {
            store: store.clone(),
            records: store.clone(),
            recall: store.clone(),
            usage: store.clone(),
            tenants: store,
            model,
            tools: Arc::new(ToolDispatch::built_in_only()),
            jobs: Arc::new(NoJobs),
            quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
            defaults: Defaults::default(),
            clock: system_clock(),
        },
        auth: AuthConfig::Jwt {
            claim: "custom:tenant_id".into(),
            audiences: vec!["exampleclientid".into()],
        },
        scopes: ScopeConfig::default(),
        ask_timeout: Duration::from_secs(120),
    })
}

/// The prelude's status, its content type, and the body.
async fn read<S>(response: StreamResponse<S>) -> (u16, String, String)
where
    S: futures_core::Stream<Item = Result<String, std::convert::Infallible>> + Unpin,
{
    let prelude = response.metadata_prelude;
    let mut stream = response.stream;
    let mut body = String::new();
    while let Some(piece) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx)).await
    {
        body.push_str(&piece.unwrap());
    }
    let kind = prelude
        .headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (prelude.status_code.as_u16(), kind, body)
}

fn event(payload: Value) -> LambdaEvent<Value> {
    LambdaEvent::new(payload, Context::default())
}

#[tokio::test]
async fn the_rest_apis_event_streams_the_round_for_the_tenant_of_the_cognito_claim() {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    model.push(ScriptedModel::text(
        "Tem sim, às 10h.",
        Usage {
            input_tokens: 50,
            output_tokens: 8,
            ..Usage::default()
        },
    ));
    let payload: Value = serde_json::from_str(EVENT).unwrap();
    let response = invocation(app(store.clone(), model), &Cors::default(), event(payload))
        .await
        .unwrap();
    let (status, kind, body) = read(response).await;
    assert_eq!((status, kind.as_str()), (200, "text/event-stream"));
    let events: Vec<&str> = body
        .lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .collect();
    assert_eq!(events, ["delta", "done"]);
    let done: Value = serde_json::from_str(
        body.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .next_back()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(done["reply"]["text"], json!("Tem sim, às 10h."));

    let key = degrau::store::ContactKey {
        tenant: degrau::domain::TenantId::parse("demo-barbershop").unwrap(),
        contact: degrau::domain::ContactId::parse("demo-contact").unwrap(),
    };
    let page = store
        .transcript(&key, SessionFilter::All, 10, None)
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 2, "stored under the claim's tenant");
}

#[tokio::test]
async fn a_token_without_the_tenant_claim_is_the_json_routes_401_and_nothing_runs() {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let mut payload: Value = serde_json::from_str(EVENT).unwrap();
    payload["requestContext"]["authorizer"]["claims"]
        .as_object_mut()
        .unwrap()
        .remove("custom:tenant_id");
    let response = invocation(app(store, model.clone()), &Cors::default(), event(payload))
        .await
        .unwrap();
    let (status, kind, body) = read(response).await;
    assert_eq!((status, kind.as_str()), (401, "application/json"));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], json!("unauthenticated"));
    assert!(model.requests().is_empty(), "the model was never called");
}

#[tokio::test]
async fn an_event_that_is_not_a_request_is_acknowledged_with_nothing_done() {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let response = invocation(
        app(store, model.clone()),
        &Cors::default(),
        event(json!({"requestContext": {"requestId": "x"}, "status": "COMPLETED"})),
    )
    .await
    .unwrap();
    let (status, _, body) = read(response).await;
    assert_eq!((status, body.as_str()), (200, ""));
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn only_the_allowed_origin_is_answered_with_cors_headers() {
    let cors = Cors {
        allowed_origin: Some("https://chat.example.com".into()),
    };
    for (origin, allowed) in [
        ("https://chat.example.com", true),
        ("https://evil.example.com", false),
    ] {
        let store = Arc::new(MemoryStore::new());
        let model = Arc::new(ScriptedModel::default());
        model.push(ScriptedModel::text("Oi!", Usage::default()));
        let mut payload: Value = serde_json::from_str(EVENT).unwrap();
        payload["headers"]["Origin"] = json!(origin);
        payload["multiValueHeaders"]["Origin"] = json!([origin]);
        let response = invocation(app(store, model), &cors, event(payload))
            .await
            .unwrap();
        let headers = &response.metadata_prelude.headers;
        assert_eq!(
            headers
                .get("access-control-allow-origin")
                .map(|v| v.to_str().unwrap()),
            allowed.then_some("https://chat.example.com"),
            "{origin}"
        );
        assert_eq!(headers.get("vary").unwrap(), "origin");
    }
}
