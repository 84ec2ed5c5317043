//! A tenant's declared tools through the ask service: webhook tools defined for the
//! model and called with the round's context, undeclared names refused, and a
//! failed webhook stored as an error result the model read.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::store::{RecordStore, SessionFilter};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::{CallContext, ToolDispatch, ToolOutput, WebhookTool, Webhooks};
use degrau::usage::Usage;
use serde_json::{Value, json};

use crate::helpers::{answered, ask_service, key, minute, test_clock};

/// What a webhook call carried besides the tool.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    tool: String,
    input: Value,
    tool_use_id: String,
    tenant: String,
    contact: String,
}

/// Webhooks that record every call and answer `reply`.
struct RecordingWebhooks {
    calls: Mutex<Vec<Seen>>,
    reply: ToolOutput,
}

#[async_trait]
impl Webhooks for RecordingWebhooks {
    async fn call(
        &self,
        tool: &WebhookTool,
        input: &Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        self.calls.lock().unwrap().push(Seen {
            tool: tool.name.clone(),
            input: input.clone(),
            tool_use_id: context.tool_use_id.to_owned(),
            tenant: context.key.tenant.as_str().to_owned(),
            contact: context.key.contact.as_str().to_owned(),
        });
        self.reply.clone()
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    webhooks: Arc<RecordingWebhooks>,
    service: degrau::converse::Converse,
}

async fn harness(tools: Value, reply: ToolOutput) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let config: TenantConfig = serde_json::from_value(json!({ "tools": tools })).unwrap();
    store
        .put_tenant_config(&key().tenant, &config)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::default());
    let webhooks = Arc::new(RecordingWebhooks {
        calls: Mutex::default(),
        reply,
    });
    let (_, clock) = test_clock();
    let service = ask_service(
        &store,
        model.clone(),
        Arc::new(ToolDispatch::new(webhooks.clone())),
        Arc::new(NoJobs),
        Defaults::default(),
        clock,
    );
    Harness {
        store,
        model,
        webhooks,
        service,
    }
}

fn check_order() -> Value {
    json!({
        "name": "check_order",
        "description": "Looks an order up in the shop's system.",
        "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}},
        "webhook": {"url": "https://tools.example.com/orders", "secret_parameter": "/degrau/webhooks/shop"}
    })
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    }
}

/// The stored tool results of the contact's transcript, as (content, is_error).
async fn stored_results(h: &Harness) -> Vec<(String, bool)> {
    let page = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    let json = serde_json::to_value(&page.messages).unwrap();
    json.as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            (
                b["content"].as_str().unwrap_or_default().to_owned(),
                b["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_tenants_webhook_tool_is_defined_for_the_model_and_called_with_the_rounds_context() {
    let h = harness(
        json!(["list_free_slots", check_order()]),
        ToolOutput::ok(r#"{"status": "shipped"}"#),
    )
    .await;
    h.model.push(ScriptedModel::tool_call(
        "9",
        "check_order",
        json!({"order": "A-17"}),
        usage(),
    ));
    h.model
        .push(ScriptedModel::text("Your order has shipped.", usage()));
    let response = answered(
        h.service
            .ask(&key(), "Where is order A-17?", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!((response.round.first_seq, response.round.last_seq), (1, 4));
    let defined: Vec<(String, String)> = h.model.requests()[0]
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.description.clone()))
        .collect();
    assert_eq!(defined[0].0, "list_free_slots");
    assert_eq!(
        defined[1],
        (
            "check_order".to_owned(),
            "Looks an order up in the shop's system.".to_owned()
        )
    );
    assert_eq!(
        *h.webhooks.calls.lock().unwrap(),
        [Seen {
            tool: "check_order".into(),
            input: json!({"order": "A-17"}),
            tool_use_id: "toolu_9".into(), // the scripted model prefixes `toolu_`
            tenant: key().tenant.as_str().into(),
            contact: key().contact.as_str().into(),
        }]
    );
    assert_eq!(
        stored_results(&h).await,
        [(r#"{"status": "shipped"}"#.to_owned(), false)]
    );
}

#[tokio::test]
async fn a_tool_the_tenant_did_not_declare_is_an_error_the_model_reads_and_nothing_runs() {
    let h = harness(json!([check_order()]), ToolOutput::ok("never")).await;
    h.model.push(ScriptedModel::tool_call(
        "toolu_1",
        "book_slot",
        json!({"day": "2026-12-04", "time": "10:30", "service": "haircut"}),
        usage(),
    ));
    h.model
        .push(ScriptedModel::text("I cannot book that.", usage()));
    h.service
        .ask(&key(), "book 10:30 on 2026-12-04", None, minute())
        .await
        .unwrap();
    assert!(h.webhooks.calls.lock().unwrap().is_empty());
    let names: Vec<String> = h.model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["check_order"], "only what the tenant declared");
    assert_eq!(
        stored_results(&h).await,
        [("unknown tool `book_slot`".to_owned(), true)]
    );
}

#[tokio::test]
async fn a_failed_webhook_is_an_error_result_and_the_round_is_still_stored() {
    let h = harness(
        json!([check_order()]),
        ToolOutput::error("the webhook answered 503"),
    )
    .await;
    h.model.push(ScriptedModel::tool_call(
        "toolu_2",
        "check_order",
        json!({"order": "A-17"}),
        usage(),
    ));
    h.model.push(ScriptedModel::text(
        "The order system is down; try again later.",
        usage(),
    ));
    let response = answered(
        h.service
            .ask(&key(), "Where is order A-17?", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!(response.round.last_seq, 4);
    assert_eq!(
        stored_results(&h).await,
        [("the webhook answered 503".to_owned(), true)]
    );
    let second = &h.model.requests()[1];
    let sent = serde_json::to_string(&second.messages).unwrap();
    assert!(
        sent.contains(r#""is_error":true"#),
        "the model read the error: {sent}"
    );
}
