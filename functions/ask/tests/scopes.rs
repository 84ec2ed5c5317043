//! The operator routes' scopes under `AUTH_MODE=jwt`: read from the verified
//! token as API Gateway's HTTP API hands it over (the sample event of
//! `events/ask-post-message.json`, its route and claims changed): the `scope`
//! claim of an OAuth access token, the `cognito:groups` list of an ID token, or the
//! authorizer's parsed `scopes`; without the route's scope, 403 and nothing read.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use ask::handler::{App, handle};
use degrau::converse::Converse;
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::session::system_clock;
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau_adapters::config::{AuthConfig, ScopeConfig};
use serde_json::{Value, json};

const EVENT: &str = include_str!("../../../events/ask-post-message.json");

fn app(scope_claim: &str) -> App {
    let store = Arc::new(MemoryStore::new());
    App {
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
            model: Arc::new(ScriptedModel::default()),
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
        scopes: ScopeConfig {
            claim: scope_claim.into(),
            ..ScopeConfig::default()
        },
        ask_timeout: Duration::from_secs(25),
    }
}

/// The sample event as a `GET /v1/contacts` with `claims` added and the
/// authorizer's parsed `scopes`.
fn event(claims: &[(&str, &str)], scopes: Value) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(EVENT).unwrap();
    event["routeKey"] = json!("GET /v1/contacts");
    event["rawPath"] = json!("/v1/contacts");
    event["requestContext"]["http"]["method"] = json!("GET");
    event["requestContext"]["http"]["path"] = json!("/v1/contacts");
    event["requestContext"]["routeKey"] = json!("GET /v1/contacts");
    event["body"] = Value::Null;
    let jwt = &mut event["requestContext"]["authorizer"]["jwt"];
    for (name, value) in claims {
        jwt["claims"][*name] = json!(value);
    }
    jwt["scopes"] = scopes;
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

async fn status(app: &App, request: lambda_http::Request) -> (u16, Value) {
    let response = handle(app, request).await;
    let body: Value = serde_json::from_slice(response.body().as_ref()).unwrap();
    (response.status().as_u16(), body)
}

#[tokio::test]
async fn a_token_without_the_scope_is_refused_and_one_with_it_gets_in() {
    let oauth = app("scope");
    let (code, body) = status(&oauth, event(&[], Value::Null)).await;
    assert_eq!(
        (code, body["error"]["type"].as_str()),
        (403, Some("forbidden"))
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("memory:read")
    );
    let (code, _) = status(
        &oauth,
        event(&[("scope", "openid memory:write")], Value::Null),
    )
    .await;
    assert_eq!(code, 403, "another scope is not this one");
    let (code, body) = status(
        &oauth,
        event(&[("scope", "openid memory:read")], Value::Null),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // The authorizer's own parse of `scope`/`scp`.
    let (code, _) = status(&oauth, event(&[], json!(["memory:read"]))).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn the_template_pools_groups_serve_as_scopes() {
    let groups = app("cognito:groups");
    // API Gateway writes a list claim as `[a b]`.
    let (code, body) = status(
        &groups,
        event(
            &[("cognito:groups", "[tenant:admin memory:read]")],
            Value::Null,
        ),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, _) = status(
        &groups,
        event(&[("cognito:groups", "[memory:write]")], Value::Null),
    )
    .await;
    assert_eq!(code, 403);
    // A `scope` claim is not read when the groups are the scopes.
    let (code, _) = status(&groups, event(&[("scope", "memory:read")], Value::Null)).await;
    assert_eq!(code, 403);
}

/// The sample event as `GET /v1/platform/tenants` with only `claims` and the
/// audience `aud` (the sample's tenant claim removed unless given).
fn platform_event(aud: &str, claims: &[(&str, &str)]) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(EVENT).unwrap();
    let path = "/v1/platform/tenants";
    event["routeKey"] = json!(format!("GET {path}"));
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["method"] = json!("GET");
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["routeKey"] = json!(format!("GET {path}"));
    event["body"] = Value::Null;
    let jwt = &mut event["requestContext"]["authorizer"]["jwt"];
    jwt["claims"] = json!({ "aud": aud });
    for (name, value) in claims {
        jwt["claims"][*name] = json!(value);
    }
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

#[tokio::test]
async fn the_platforms_routes_take_the_platform_group_without_a_tenant_and_refuse_a_tenants_admin()
{
    let groups = app("cognito:groups");
    let ours = "exampleclientid";
    let platform = [("cognito:groups", "[platform:admin]")];
    let (code, body) = status(&groups, platform_event(ours, &platform)).await;
    assert_eq!(code, 200, "no tenant claim needed: {body}");
    for tenant_admin in [
        vec![
            ("cognito:groups", "[tenant:admin memory:read memory:write]"),
            ("custom:tenant_id", "barber"),
        ],
        vec![("cognito:groups", "[tenant:admin]")],
    ] {
        let (code, body) = status(&groups, platform_event(ours, &tenant_admin)).await;
        assert_eq!(
            (code, body["error"]["type"].as_str()),
            (403, Some("forbidden")),
            "{tenant_admin:?}"
        );
    }
    // A token for another app client is not the platform's either.
    let (code, _) = status(&groups, platform_event("someone-else", &platform)).await;
    assert_eq!(code, 401);
}
