//! `events/ask-post-message.json`, the sample event for `sam local invoke
//! AskFunction`, is what API Gateway's HTTP API hands the function (payload 2.0 with
//! the JWT authorizer's claims) and the real handler answers it: 200 with a reply.

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
use degrau::usage::Usage;
use degrau_adapters::config::AuthConfig;
use serde_json::Value;

const EVENT: &str = include_str!("../../../events/ask-post-message.json");

#[tokio::test]
async fn the_sample_event_is_an_http_api_request_the_handler_answers() {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    model.push(ScriptedModel::text("We have 10:30 free.", Usage::default()));
    let app = App {
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
            model: model.clone(),
            tools: Arc::new(ToolDispatch::built_in_only()),
            jobs: Arc::new(NoJobs),
            defaults: Defaults::default(),
            quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
            clock: system_clock(),
        },
        // The template's default TenantClaim: the tenant comes from the verified claim
        // of an ID token of the stack's own app client (JWT_AUDIENCE).
        auth: AuthConfig::Jwt {
            claim: "custom:tenant_id".into(),
            audiences: vec!["exampleclientid".into()],
        },
        scopes: degrau_adapters::config::ScopeConfig::default(),
        ask_timeout: Duration::from_secs(25),
    };
    let request = lambda_http::request::from_str(EVENT).unwrap();
    let response = handle(&app, request).await;
    let status = response.status().as_u16();
    let body: Value = serde_json::from_slice(response.body().as_ref()).unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"]["text"], "We have 10:30 free.");
    assert_eq!(body["round"]["last_seq"], 2);
    // The user's text reached the model, under the tenant of the claim.
    let sent = serde_json::to_string(&model.requests()[0]).unwrap();
    assert!(sent.contains("Any free slot on 2026-12-04?"), "{sent}");
}
