//! Hostile input at the HTTP edge, generated: raw API Gateway (payload v2) events with
//! malformed JSON, wrong types, huge bodies, odd and percent-encoded contact ids
//! (invalid UTF-8 among them), and headers that try to set the tenant in `jwt` mode.
//! The handler never panics, always answers a documented status with the error
//! envelope, and storage never changes.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

use std::sync::Arc;

use ask::handler::{App, handle};
use degrau::converse::Converse;
use degrau::domain::{ContactId, TenantId};
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::session::system_clock;
use degrau::store::ContactKey;
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau_adapters::config::AuthConfig;
use lambda_http::Body;
use proptest::prelude::*;
use serde_json::{Value, json};

const DOCUMENTED: [u16; 10] = [200, 400, 401, 404, 405, 409, 413, 415, 422, 502];

fn app(auth: AuthConfig) -> (App, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    let service = Converse {
        store: store.clone(),
        records: store.clone(),
        recall: store.clone(),
        usage: store.clone(),
        tenants: store.clone(),
        // An empty script: any request that reaches the model fails, so nothing may
        // ever be written.
        model: Arc::new(ScriptedModel::default()),
        tools: Arc::new(ToolDispatch::built_in_only()),
        jobs: Arc::new(NoJobs),
        quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
        defaults: Defaults::default(),
        clock: system_clock(),
    };
    (
        App {
            whatsapp: degrau_whatsapp::memory::MemoryWhatsApp::on(store.clone()),
            events: std::sync::Arc::new(degrau::events::NoEvents),
            platform: degrau::operate::platform::PlatformAdmin::on(
                store.clone(),
                Defaults::default(),
                system_clock(),
            ),
            records: degrau::records::Records::on(
                store.clone(),
                Defaults::default(),
                system_clock(),
            ),
            operate: degrau::operate::Operate::on(
                store.clone(),
                Defaults::default(),
                system_clock(),
            )
            .checking(ask::handler::channel_checks()),
            converse: service,
            auth,
            scopes: degrau_adapters::config::ScopeConfig::default(),
            ask_timeout: std::time::Duration::from_secs(25),
        },
        store,
    )
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9+_.:@-]{1,20}",
        "\\PC{0,12}",
        "(%[0-9a-fA-F]{2}){1,6}",
        Just("%ff%fe".to_owned()),
        Just("%".to_owned()),
        Just("..".to_owned()),
        Just(String::new()),
        "[a-z]{129,140}",
    ]
}

fn path() -> impl Strategy<Value = String> {
    (
        segment(),
        prop::sample::select(vec!["/messages", "/memory", "", "/messages/x", "/other"]),
        any::<bool>(),
    )
        .prop_map(|(contact, tail, v1)| {
            let prefix = if v1 { "/v1/contacts/" } else { "/v2/contacts/" };
            format!("{prefix}{}{tail}", contact.replace(['/', '?', '#'], "_"))
        })
}

fn body() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        "\\PC{0,40}".prop_map(Some),
        Just(Some("{\"text\": ".to_owned())),
        Just(Some("{\"text\": 5}".to_owned())),
        Just(Some("{\"text\": null}".to_owned())),
        Just(Some("[\"text\"]".to_owned())),
        Just(Some("{\"text\": \"hi\", \"tenant\": \"other\"}".to_owned())),
        Just(Some(json!({"text": "x".repeat(70_000)}).to_string())),
        Just(Some(json!({"text": "y".repeat(8_001)}).to_string())),
        "[ \\n\\t]{0,5}".prop_map(|ws| Some(json!({"text": ws}).to_string())),
        "\\PC{1,30}".prop_map(|t| Some(json!({"text": t}).to_string())),
    ]
}

fn headers() -> impl Strategy<Value = Value> {
    (
        proptest::option::of(prop::sample::select(vec![
            "application/json",
            "text/plain",
            "application/json; charset=utf-8",
            "",
            "multipart/form-data",
        ])),
        proptest::option::of(prop_oneof![
            Just("acme".to_owned()),
            "\\PC{0,10}",
            Just("a#b".to_owned())
        ]),
        proptest::option::of(prop_oneof!["[ -~]{0,300}", Just("ok-key".to_owned())]),
    )
        .prop_map(|(kind, tenant, idem)| {
            let mut headers = serde_json::Map::new();
            if let Some(kind) = kind {
                headers.insert("content-type".into(), json!(kind));
            }
            if let Some(tenant) = tenant {
                headers.insert("x-tenant-id".into(), json!(tenant));
            }
            if let Some(idem) = idem {
                headers.insert("idempotency-key".into(), json!(idem));
            }
            Value::Object(headers)
        })
}

fn event(
    method: &str,
    path: &str,
    headers: Value,
    body: Option<String>,
    claims: Option<Value>,
) -> lambda_http::Request {
    let mut context = json!({
        "accountId": "0", "apiId": "a", "domainName": "d", "domainPrefix": "d", "requestId": "r",
        "routeKey": "$default", "stage": "$default", "time": "t", "timeEpoch": 0,
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "fuzz"}
    });
    if let Some(claims) = claims {
        context["authorizer"] = json!({"jwt": {"claims": claims}});
    }
    let event = json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
        "headers": headers, "requestContext": context, "isBase64Encoded": false, "body": body
    });
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

fn read(response: &lambda_http::Response<Body>) -> Value {
    match response.body() {
        Body::Text(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        Body::Binary(bytes) => serde_json::from_slice(bytes).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn dev_mode_answers_a_documented_status_and_never_writes(
        method in prop::sample::select(vec!["GET", "POST", "DELETE", "PUT", "PATCH"]),
        path in path(), headers in headers(), body in body(),
    ) {
        let (app, store) = app(AuthConfig::Dev);
        let response = runtime().block_on(handle(&app, event(method, &path, headers, body, None)));
        let status = response.status().as_u16();
        prop_assert!(DOCUMENTED.contains(&status), "{method} {path}: {status}");
        let json = read(&response);
        if status >= 400 {
            prop_assert!(json["error"]["type"].as_str().is_some_and(|t| !t.is_empty()), "envelope: {json}");
            prop_assert!(json["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
        prop_assert!(status != 200 || method != "POST", "no model answer, so no successful round");
        let key = ContactKey { tenant: TenantId::parse("acme").unwrap(), contact: ContactId::parse("bob").unwrap() };
        prop_assert_eq!(store.item_count(&key), 0);
    }

    #[test]
    fn jwt_mode_never_takes_the_tenant_from_a_header(
        method in prop::sample::select(vec!["GET", "POST", "DELETE"]),
        contact in "[a-z]{1,10}", headers in headers(), body in body(),
        tail in prop::sample::select(vec!["/messages", "/memory", ""]),
    ) {
        let (app, _) = app(AuthConfig::Jwt {
            claim: "custom:tenant_id".into(),
            audiences: Vec::new(),
        });
        let path = format!("/v1/contacts/{contact}{tail}");
        let allowed = matches!((method, tail), ("GET", "/messages") | ("POST", "/messages") | ("GET", "/memory") | ("DELETE", ""));
        // No claim (or a claim under another name): whatever the headers say, 401.
        for claims in [None, Some(json!({"tenant_id": "acme", "sub": "x"}))] {
            let response = runtime().block_on(handle(&app, event(method, &path, headers.clone(), body.clone(), claims)));
            let status = response.status().as_u16();
            prop_assert_eq!(status, if allowed { 401 } else { 405 }, "{} {}", method, path);
        }
    }
}

#[tokio::test]
async fn a_valid_claim_is_the_only_way_in_and_it_scopes_every_key() {
    let (app, store) = app(AuthConfig::Jwt {
        claim: "custom:tenant_id".into(),
        audiences: Vec::new(),
    });
    let headers = json!({"content-type": "application/json", "x-tenant-id": "evil"});
    let claims = Some(json!({"custom:tenant_id": "acme"}));
    let response = handle(
        &app,
        event("DELETE", "/v1/contacts/bob", headers, None, claims),
    )
    .await;
    assert_eq!(response.status().as_u16(), 200);
    let key = ContactKey {
        tenant: TenantId::parse("acme").unwrap(),
        contact: ContactId::parse("bob").unwrap(),
    };
    assert_eq!(store.item_count(&key), 0);
}
