//! The `Tools` port: what the model may call during a round. A tenant declares its
//! tools ([`declared`]): built-in ones, which run here ([`demo`], the scheduling demo
//! that lets the whole path, long tool results included, run locally; [`recall`],
//! which the `ask` service runs over the contact's earlier sessions), and webhook
//! tools, which the `Webhooks` port calls (its adapter, in `degrau-adapters`, signs
//! each call and sends it over HTTPS). [`ToolDispatch`] is the one `Tools` the
//! functions use: it sends each call to the right one and counts it per tool.

pub mod declared;
pub mod demo;
pub mod recall;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;

use crate::deadline::Deadline;
use crate::metrics::{Event, Unit};
use crate::plan::request::ToolDef;
use crate::store::ContactKey;
pub use declared::{ToolDeclaration, ToolDeclarations, Webhook, WebhookTool};

/// Largest tool result kept, in characters.
pub const MAX_TOOL_RESULT_CHARS: usize = 16_000;

/// Largest sum of the results sent in one user message, in characters. Each message
/// is one DynamoDB item and items are refused over 400 KB; at 4 bytes per character
/// at worst, this keeps a message item under 260 KB. Results past the budget are
/// cut to fit (see [`cap_to`]).
pub const MAX_RESULTS_CHARS_PER_MESSAGE: usize = 64_000;

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The result text (JSON for the demo tools).
    pub content: String,
    /// True when the call failed (unknown tool, bad input); the model sees the text.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result, truncated to [`MAX_TOOL_RESULT_CHARS`].
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: cap(content.into()),
            is_error: false,
        }
    }

    /// A failed call, with a message for the model.
    pub fn error(message: impl Into<String>) -> Self {
        ToolOutput {
            content: cap(message.into()),
            is_error: true,
        }
    }
}

/// Truncates a result to [`MAX_TOOL_RESULT_CHARS`], saying so at the end.
pub fn cap(content: String) -> String {
    cap_to(content, MAX_TOOL_RESULT_CHARS)
}

/// Truncates a result to `max` characters, saying so at the end.
pub fn cap_to(content: String, max: usize) -> String {
    let chars = content.chars().count();
    if chars <= max {
        return content;
    }
    let note = format!("\n[truncated by degrau: {chars} characters, {max} kept]");
    let keep = max.saturating_sub(note.chars().count());
    let mut out: String = content.chars().take(keep).collect();
    out.push_str(&note);
    out
}

/// What a tool call knows besides its input: which call it is (a retried round
/// may make the same call again: receivers dedupe on the id), whose conversation,
/// and by when it must be done.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// The `tool_use` block's id.
    pub tool_use_id: &'a str,
    /// The tenant and the contact of the round.
    pub key: &'a ContactKey,
    /// The round's deadline for tools (the request's, less the commit's margin).
    pub deadline: Deadline,
}

/// The tools of a tenant.
#[async_trait]
pub trait Tools: Send + Sync {
    /// Definitions sent to the model for the tenant's `declared` tools, in their
    /// order (they head the cached prefix).
    fn definitions(&self, declared: &[ToolDeclaration]) -> Vec<ToolDef>;

    /// Runs one call of `tool` by the context's deadline. Never fails: an error (a
    /// timeout included) is a result the model reads.
    async fn call(
        &self,
        tool: &ToolDeclaration,
        input: &Value,
        context: &CallContext<'_>,
    ) -> ToolOutput;
}

/// Tools behind a tenant's own webhooks.
#[async_trait]
pub trait Webhooks: Send + Sync {
    /// Calls `tool`'s webhook with `input` by the context's deadline. Never fails:
    /// a refused address, an error status or a timeout is a result the model reads.
    async fn call(
        &self,
        tool: &WebhookTool,
        input: &Value,
        context: &CallContext<'_>,
    ) -> ToolOutput;
}

/// No webhooks: every webhook call is an error the model reads (core tests, and a
/// deployment without the adapter).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoWebhooks;

#[async_trait]
impl Webhooks for NoWebhooks {
    async fn call(
        &self,
        tool: &WebhookTool,
        _input: &Value,
        _context: &CallContext<'_>,
    ) -> ToolOutput {
        ToolOutput::error(format!(
            "the tool `{}` is a webhook, and webhook tools are not available here",
            tool.name
        ))
    }
}

/// The functions' `Tools`: built-in tools run here, webhook tools go to the
/// `Webhooks` port; every call is counted per tool (`ToolCalls`,
/// `ToolErrors`, `ToolLatency`, dimension `Tool`).
#[derive(Clone)]
pub struct ToolDispatch {
    webhooks: Arc<dyn Webhooks>,
}

impl ToolDispatch {
    /// Built-in tools here, webhook tools through `webhooks`.
    pub fn new(webhooks: Arc<dyn Webhooks>) -> Self {
        ToolDispatch { webhooks }
    }

    /// Built-in tools only: a webhook call is an error the model reads.
    pub fn built_in_only() -> Self {
        Self::new(Arc::new(NoWebhooks))
    }
}

impl Default for ToolDispatch {
    fn default() -> Self {
        Self::built_in_only()
    }
}

#[async_trait]
impl Tools for ToolDispatch {
    fn definitions(&self, declared: &[ToolDeclaration]) -> Vec<ToolDef> {
        declared
            .iter()
            .filter_map(|tool| match tool {
                ToolDeclaration::BuiltIn(name) if name == crate::plan::recall::TOOL_NAME => {
                    Some(recall::definition())
                }
                ToolDeclaration::BuiltIn(name) => demo::definition(name),
                ToolDeclaration::Webhook(webhook) => Some(ToolDef {
                    name: webhook.name.clone(),
                    description: webhook.description.clone(),
                    input_schema: webhook.input_schema.clone(),
                }),
            })
            .collect()
    }

    async fn call(
        &self,
        tool: &ToolDeclaration,
        input: &Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        let started = Instant::now();
        let output = match tool {
            // The built-ins answer at once, from memory: no deadline can bind.
            ToolDeclaration::BuiltIn(name) => demo::run(name, input),
            ToolDeclaration::Webhook(webhook) => self.webhooks.call(webhook, input, context).await,
        };
        Event::new("ask")
            .dimension("Tool", tool.name())
            .count("ToolCalls", 1)
            .count("ToolErrors", u64::from(output.is_error))
            .metric(
                "ToolLatency",
                started.elapsed().as_secs_f64() * 1000.0,
                Unit::Milliseconds,
            )
            .emit();
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ContactId, TenantId};
    use serde_json::json;
    use std::sync::Mutex;
    use std::time::Duration;

    fn webhook_tool(name: &str) -> WebhookTool {
        serde_json::from_value(json!({
            "name": name,
            "description": "The shop's own calendar.",
            "input_schema": {"type": "object"},
            "webhook": {"url": "https://tools.example.com", "secret_parameter": "/degrau/webhooks/shop"}
        }))
        .unwrap()
    }

    fn key() -> ContactKey {
        ContactKey {
            tenant: TenantId::parse("shop").unwrap(),
            contact: ContactId::parse("ana").unwrap(),
        }
    }

    /// Webhooks that record what they were asked.
    #[derive(Default)]
    struct Recording(Mutex<Vec<(String, Value, String, String)>>);

    #[async_trait]
    impl Webhooks for Recording {
        async fn call(
            &self,
            tool: &WebhookTool,
            input: &Value,
            context: &CallContext<'_>,
        ) -> ToolOutput {
            self.0.lock().unwrap().push((
                tool.name.clone(),
                input.clone(),
                context.tool_use_id.to_owned(),
                context.key.contact.as_str().to_owned(),
            ));
            ToolOutput::ok("{\"booked\": true}")
        }
    }

    #[test]
    fn definitions_follow_the_declared_order_built_ins_and_webhooks_alike() {
        let declared = vec![
            ToolDeclaration::Webhook(webhook_tool("book_slot")),
            ToolDeclaration::BuiltIn("list_free_slots".into()),
        ];
        let definitions = ToolDispatch::built_in_only().definitions(&declared);
        let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["book_slot", "list_free_slots"]);
        assert_eq!(definitions[0].description, "The shop's own calendar.");
        assert_eq!(definitions[0].input_schema, json!({"type": "object"}));
        let all = ToolDispatch::built_in_only().definitions(&ToolDeclaration::all_built_in());
        let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, demo::BUILT_IN_TOOLS);
        assert!(ToolDispatch::built_in_only().definitions(&[]).is_empty());
    }

    #[tokio::test]
    async fn built_ins_run_here_and_webhooks_go_to_the_port_with_the_call_context() {
        let recording = Arc::new(Recording::default());
        let tools = ToolDispatch::new(recording.clone());
        let key = key();
        let context = CallContext {
            tool_use_id: "toolu_7",
            key: &key,
            deadline: Deadline::after(Duration::from_secs(5)),
        };
        let input = json!({"day": "2026-12-04"});
        let built_in = tools
            .call(
                &ToolDeclaration::BuiltIn("list_free_slots".into()),
                &input,
                &context,
            )
            .await;
        assert_eq!(built_in, demo::run("list_free_slots", &input));
        assert!(recording.0.lock().unwrap().is_empty());
        let hooked = tools
            .call(
                &ToolDeclaration::Webhook(webhook_tool("book_slot")),
                &input,
                &context,
            )
            .await;
        assert_eq!(hooked, ToolOutput::ok("{\"booked\": true}"));
        assert_eq!(
            *recording.0.lock().unwrap(),
            [(
                "book_slot".to_owned(),
                input.clone(),
                "toolu_7".to_owned(),
                "ana".to_owned()
            )]
        );
        let without = ToolDispatch::built_in_only()
            .call(
                &ToolDeclaration::Webhook(webhook_tool("book_slot")),
                &input,
                &context,
            )
            .await;
        assert!(without.is_error && without.content.contains("`book_slot` is a webhook"));
    }

    #[test]
    fn long_results_are_cut_to_the_cap_and_say_so() {
        let out = ToolOutput::ok("x".repeat(MAX_TOOL_RESULT_CHARS + 10));
        assert_eq!(out.content.chars().count(), MAX_TOOL_RESULT_CHARS);
        assert!(out.content.ends_with("16010 characters, 16000 kept]"));
        assert_eq!(ToolOutput::ok("short").content, "short");
        assert_eq!(cap_to("é".repeat(100), 60).chars().count(), 60);
    }
}
