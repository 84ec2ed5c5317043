//! The tools a tenant declares in its `CONFIG` item (`tools`): the names of built-in
//! tools, and webhook tools, each an object
//! `{"name", "description", "input_schema", "webhook": {"url", "secret_parameter",
//! "timeout_ms"}}` that degrau calls over HTTPS with a signed body (the adapter in
//! `degrau-adapters`, `webhook/`).
//!
//! The list is checked when the config is read, like every tenant setting: a config
//! that breaks a rule does not read, and the error names the entry and the field.
//! Unknown fields are refused; names match `^[a-zA-Z0-9_-]{1,64}$` and are unique in
//! the list; a string must name a built-in tool (`recall`, [`super::recall`], only
//! when declared); `input_schema` is a JSON Schema
//! object (`"type": "object"`); `url` parses, uses `https` (or `http`, which the
//! call-time policy allows only to loopback in `AUTH_MODE=dev`) and carries no
//! credentials; `secret_parameter` is an SSM parameter name; `timeout_ms` is from
//! [`MIN_WEBHOOK_TIMEOUT_MS`] to [`MAX_WEBHOOK_TIMEOUT_MS`]
//! ([`DEFAULT_WEBHOOK_TIMEOUT_MS`] when absent).
//!
//! A webhook tool may take a built-in tool's name when the tenant does not also
//! declare that built-in: a business's own `book_slot` replaces the demo's.

use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::demo::BUILT_IN_TOOLS;

/// Shortest webhook timeout accepted, in milliseconds.
pub const MIN_WEBHOOK_TIMEOUT_MS: u64 = 100;
/// Longest webhook timeout accepted, in milliseconds: well inside one ask's budget.
pub const MAX_WEBHOOK_TIMEOUT_MS: u64 = 10_000;
/// A webhook's timeout when its declaration sets none.
pub const DEFAULT_WEBHOOK_TIMEOUT_MS: u64 = 5_000;
/// Longest `secret_parameter` accepted (SSM's limit for a name with its path).
pub const MAX_PARAMETER_NAME_CHARS: usize = 2_048;
/// Longest webhook URL accepted.
pub const MAX_URL_CHARS: usize = 2_048;

/// One tool a tenant declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolDeclaration {
    /// A built-in tool, by name (one of [`BUILT_IN_TOOLS`]).
    BuiltIn(String),
    /// A tool behind the tenant's own webhook.
    Webhook(WebhookTool),
}

impl ToolDeclaration {
    /// The name the model calls it by.
    pub fn name(&self) -> &str {
        match self {
            ToolDeclaration::BuiltIn(name) => name,
            ToolDeclaration::Webhook(tool) => &tool.name,
        }
    }

    /// Every built-in tool, in their stable order: what a tenant without a `tools`
    /// list gets.
    pub fn all_built_in() -> Vec<ToolDeclaration> {
        BUILT_IN_TOOLS
            .iter()
            .map(|name| ToolDeclaration::BuiltIn((*name).to_owned()))
            .collect()
    }
}

/// A webhook tool: what the model sees of it, and where degrau sends its calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookTool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its input (`"type": "object"`).
    pub input_schema: Value,
    /// Where its calls go.
    pub webhook: Webhook,
}

/// The receiving end of a webhook tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// `https://...` (or `http://` to loopback, local runs only).
    pub url: String,
    /// The SSM SecureString holding the signing secret.
    pub secret_parameter: String,
    /// The call's time limit, retry included, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_WEBHOOK_TIMEOUT_MS
}

/// A tenant's `tools`, checked (see the module documentation). Reads from and
/// writes to the config's JSON: strings for built-ins, objects for webhooks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Vec<Value>")]
pub struct ToolDeclarations(Vec<ToolDeclaration>);

impl ToolDeclarations {
    /// The declarations, in the tenant's order.
    pub fn as_slice(&self) -> &[ToolDeclaration] {
        &self.0
    }

    /// The declarations, owned.
    pub fn into_vec(self) -> Vec<ToolDeclaration> {
        self.0
    }
}

impl TryFrom<Vec<ToolDeclaration>> for ToolDeclarations {
    type Error = String;

    /// Checks a list built in code the way a config's is checked.
    fn try_from(tools: Vec<ToolDeclaration>) -> Result<Self, String> {
        let values = tools
            .iter()
            .map(declaration_value)
            .collect::<Result<Vec<_>, _>>()?;
        ToolDeclarations::try_from(values)
    }
}

impl TryFrom<Vec<Value>> for ToolDeclarations {
    type Error = String;

    fn try_from(values: Vec<Value>) -> Result<Self, String> {
        let mut tools: Vec<ToolDeclaration> = Vec::with_capacity(values.len());
        for (index, value) in values.into_iter().enumerate() {
            let tool = declaration(index, value)?;
            if tools.iter().any(|seen| seen.name() == tool.name()) {
                return Err(format!(
                    "tools[{index}]: the name `{}` is declared twice; tool names must be unique",
                    tool.name()
                ));
            }
            tools.push(tool);
        }
        Ok(ToolDeclarations(tools))
    }
}

impl Serialize for ToolDeclarations {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for tool in &self.0 {
            match tool {
                ToolDeclaration::BuiltIn(name) => seq.serialize_element(name)?,
                ToolDeclaration::Webhook(webhook) => seq.serialize_element(webhook)?,
            }
        }
        seq.end()
    }
}

fn declaration_value(tool: &ToolDeclaration) -> Result<Value, String> {
    match tool {
        ToolDeclaration::BuiltIn(name) => Ok(Value::String(name.clone())),
        ToolDeclaration::Webhook(webhook) => {
            serde_json::to_value(webhook).map_err(|e| format!("tools: {e}"))
        }
    }
}

/// One entry of the list: a built-in's name, or a webhook tool.
fn declaration(index: usize, value: Value) -> Result<ToolDeclaration, String> {
    match value {
        Value::String(name)
            if BUILT_IN_TOOLS.contains(&name.as_str())
                || name == crate::plan::recall::TOOL_NAME =>
        {
            Ok(ToolDeclaration::BuiltIn(name))
        }
        Value::String(name) => Err(format!(
            "tools[{index}]: `{name}` is not a built-in tool (built-in: {}, {}); a webhook tool \
             is an object with name, description, input_schema and webhook",
            BUILT_IN_TOOLS.join(", "),
            crate::plan::recall::TOOL_NAME
        )),
        Value::Object(_) => {
            let tool: WebhookTool = serde_json::from_value(value)
                .map_err(|e| format!("tools[{index}]: {}", strip_position(&e)))?;
            check_webhook_tool(&tool).map_err(|problem| {
                format!("tools[{index}] (`{}`): {problem}", printable(&tool.name))
            })?;
            Ok(ToolDeclaration::Webhook(tool))
        }
        _ => Err(format!(
            "tools[{index}] must be a built-in tool's name or a webhook tool object"
        )),
    }
}

/// serde_json's message without its "at line 1 column N" (a value, not a document).
fn strip_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// A name as an error may quote it: at most 64 characters.
fn printable(name: &str) -> String {
    name.chars().take(64).collect()
}

/// The rules of one webhook tool, first broken first.
fn check_webhook_tool(tool: &WebhookTool) -> Result<(), String> {
    if !valid_tool_name(&tool.name) {
        return Err("name must match ^[a-zA-Z0-9_-]{1,64}$".into());
    }
    if tool.description.trim().is_empty() {
        return Err("description must say what the tool does (the model reads it)".into());
    }
    if tool.input_schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("input_schema must be a JSON Schema object with \"type\": \"object\"".into());
    }
    check_webhook(&tool.webhook)
}

/// The rules of a webhook's receiving end (a tool's, or a tenant's events
/// webhook), first broken first.
pub fn check_webhook(webhook: &Webhook) -> Result<(), String> {
    check_url(&webhook.url)?;
    check_parameter_name(&webhook.secret_parameter)?;
    let timeout = webhook.timeout_ms;
    if !(MIN_WEBHOOK_TIMEOUT_MS..=MAX_WEBHOOK_TIMEOUT_MS).contains(&timeout) {
        return Err(format!(
            "webhook.timeout_ms must be from {MIN_WEBHOOK_TIMEOUT_MS} to {MAX_WEBHOOK_TIMEOUT_MS}, got {timeout}"
        ));
    }
    Ok(())
}

/// The Messages API's rule for tool names.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_url(text: &str) -> Result<(), String> {
    if text.chars().count() > MAX_URL_CHARS {
        return Err(format!(
            "webhook.url is longer than {MAX_URL_CHARS} characters"
        ));
    }
    let url = url::Url::parse(text).map_err(|e| format!("webhook.url is not a URL: {e}"))?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(format!(
            "webhook.url must use https (or http to a loopback address in AUTH_MODE=dev), got {}",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("webhook.url has no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "webhook.url must not carry credentials; the signature authenticates degrau".into(),
        );
    }
    Ok(())
}

/// An SSM parameter name: letters, digits and `_.-/`; a hierarchical one starts with
/// `/` and has no empty level.
fn check_parameter_name(name: &str) -> Result<(), String> {
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'));
    let levels_ok = !name.contains('/')
        || (name.starts_with('/') && !name.ends_with('/') && !name.contains("//"));
    if name.is_empty() || name.len() > MAX_PARAMETER_NAME_CHARS || !chars_ok || !levels_ok {
        return Err(
            "webhook.secret_parameter must be an SSM parameter name (letters, digits and _.-/, \
             a path starting with /)"
                .into(),
        );
    }
    Ok(())
}

/// A tenant's events webhook (`events_webhook` in its config, `crate::events`): a webhook tool's
/// receiving end, under the same rules (checked when the config is read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Webhook", into = "Webhook")]
pub struct EventsWebhook(Webhook);

impl EventsWebhook {
    /// The receiving end.
    pub fn webhook(&self) -> &Webhook {
        &self.0
    }
}

impl TryFrom<Webhook> for EventsWebhook {
    type Error = String;

    fn try_from(webhook: Webhook) -> Result<Self, String> {
        check_webhook(&webhook)
            .map(|()| EventsWebhook(webhook))
            .map_err(|e| e.replacen("webhook.", "events_webhook.", 1))
    }
}

impl From<EventsWebhook> for Webhook {
    fn from(events: EventsWebhook) -> Webhook {
        events.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn webhook(name: &str) -> Value {
        json!({
            "name": name,
            "description": "Books a slot in the shop's own calendar.",
            "input_schema": {"type": "object", "properties": {"day": {"type": "string"}}},
            "webhook": {"url": "https://tools.example.com/book", "secret_parameter": "/degrau/webhooks/shop"}
        })
    }

    fn parse(values: Value) -> Result<ToolDeclarations, String> {
        serde_json::from_value(values).map_err(|e| e.to_string())
    }

    #[test]
    fn built_in_names_and_webhook_objects_read_in_order_and_write_back_the_same() {
        let config = json!(["list_free_slots", webhook("book_slot")]);
        let tools = parse(config.clone()).unwrap();
        let names: Vec<&str> = tools.as_slice().iter().map(ToolDeclaration::name).collect();
        assert_eq!(names, ["list_free_slots", "book_slot"]);
        let ToolDeclaration::Webhook(book) = &tools.as_slice()[1] else {
            panic!("a webhook");
        };
        assert_eq!(book.webhook.timeout_ms, DEFAULT_WEBHOOK_TIMEOUT_MS);
        let mut written = config;
        written[1]["webhook"]["timeout_ms"] = json!(DEFAULT_WEBHOOK_TIMEOUT_MS);
        assert_eq!(serde_json::to_value(&tools).unwrap(), written);
        assert_eq!(
            ToolDeclarations::try_from(tools.clone().into_vec()).unwrap(),
            tools
        );
    }

    #[test]
    fn every_broken_rule_is_refused_naming_the_entry_and_the_field() {
        let with = |field: &str, value: Value| {
            let mut tool = webhook("book_slot");
            let mut at = &mut tool;
            let parts: Vec<&str> = field.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                at = &mut at[*part];
            }
            at[parts[parts.len() - 1]] = value;
            tool
        };
        let cases = [
            (
                json!(["cancel_everything"]),
                "tools[0]: `cancel_everything` is not a built-in",
            ),
            (
                json!([42]),
                "tools[0] must be a built-in tool's name or a webhook",
            ),
            (
                json!(["book_slot", "book_slot"]),
                "tools[1]: the name `book_slot` is declared twice",
            ),
            (
                json!(["book_slot", webhook("book_slot")]),
                "tools[1]: the name `book_slot` is declared twice",
            ),
            (
                json!([with("name", json!("book slot"))]),
                "tools[0] (`book slot`): name must match",
            ),
            (
                json!([with("name", json!("x".repeat(65)))]),
                "name must match",
            ),
            (
                json!([with("description", json!(" "))]),
                "description must say",
            ),
            (
                json!([with("input_schema", json!({"type": "string"}))]),
                "input_schema must be",
            ),
            (
                json!([with("input_schema", json!([]))]),
                "input_schema must be",
            ),
            (
                json!([with("webhook.url", json!("not a url"))]),
                "webhook.url is not a URL",
            ),
            (
                json!([with("webhook.url", json!("ftp://tools.example.com"))]),
                "must use https",
            ),
            (
                json!([with(
                    "webhook.url",
                    json!("https://user:pw@tools.example.com")
                )]),
                "must not carry credentials",
            ),
            (
                json!([with("webhook.secret_parameter", json!("degrau/webhooks"))]),
                "secret_parameter must be",
            ),
            (
                json!([with("webhook.secret_parameter", json!("/degrau//x"))]),
                "secret_parameter must be",
            ),
            (
                json!([with("webhook.secret_parameter", json!("/degrau/x y"))]),
                "secret_parameter must be",
            ),
            (
                json!([with("webhook.secret_parameter", json!(""))]),
                "secret_parameter must be",
            ),
            (
                json!([with("webhook.timeout_ms", json!(99))]),
                "webhook.timeout_ms must be from 100 to 10000, got 99",
            ),
            (
                json!([with("webhook.timeout_ms", json!(10_001))]),
                "got 10001",
            ),
            (
                json!([with("webhook.retries", json!(3))]),
                "tools[0]: unknown field `retries`",
            ),
            (
                json!([with("colour", json!("red"))]),
                "tools[0]: unknown field `colour`",
            ),
        ];
        for (config, expected) in cases {
            let error = parse(config.clone()).unwrap_err();
            assert!(error.contains(expected), "{config}: {error}");
        }
    }

    #[test]
    fn http_urls_and_plain_parameter_names_are_left_to_the_call_time_policy() {
        let mut tool = webhook("book_slot");
        tool["webhook"]["url"] = json!("http://127.0.0.1:4020/tools/book_slot");
        tool["webhook"]["secret_parameter"] = json!("shop-secret");
        tool["webhook"]["timeout_ms"] = json!(100);
        assert!(parse(json!([tool])).is_ok());
    }

    #[test]
    fn a_webhook_may_take_a_built_in_name_the_tenant_does_not_declare() {
        let tools = parse(json!([webhook("list_free_slots"), webhook("book_slot")])).unwrap();
        assert!(
            tools
                .as_slice()
                .iter()
                .all(|t| matches!(t, ToolDeclaration::Webhook(_)))
        );
    }
}
