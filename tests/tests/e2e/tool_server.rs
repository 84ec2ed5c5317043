//! The example tool server (`infra/toolserver.py`) as the end-to-end tests run it:
//! a webhook receiver that checks every signature with Python's own `hmac` and
//! lists what it booked and every call it received; the signing secret in moto's
//! SSM under a tenant's own path; the demo barbershop's tools behind it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use degrau::tenant::TenantConfig;
use degrau_adapters::webhook::signature::signature_header;
use degrau_tests::moto;
use serde_json::{Value, json};

/// The example tool server, on a port of its own; stopped when dropped.
pub struct ToolServer {
    child: Child,
    /// Where it listens.
    pub url: String,
}

impl ToolServer {
    pub fn start(secret: &str) -> ToolServer {
        Self::start_for(secret, None)
    }

    /// A server that serves `tenant` only, when one is given.
    pub fn start_for(secret: &str, tenant: Option<&str>) -> ToolServer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/toolserver.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--port", "0", "--secret-env", "TOOLSERVER_TEST_SECRET"])
            .args(tenant.map(|t| ["--tenant", t]).into_iter().flatten())
            .env("TOOLSERVER_TEST_SECRET", secret)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start infra/toolserver.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("toolserver listening on ")
            .unwrap_or_else(|| panic!("toolserver said {line:?}"))
            .to_owned();
        ToolServer { child, url }
    }

    /// Every signed call received, repeats included: `{"name", "tool_use_id", "key"}`.
    pub async fn calls(&self) -> Vec<Value> {
        let body: Value = reqwest::get(format!("{}/calls", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["calls"].as_array().unwrap().clone()
    }

    /// What it booked.
    pub async fn bookings(&self) -> Vec<Value> {
        let body: Value = reqwest::get(format!("{}/bookings", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["bookings"].as_array().unwrap().clone()
    }

    /// A `POST` signed at `t` with `secret`, as degrau signs it.
    pub async fn post(&self, secret: &str, t: u64, key: &str, body: &Value) -> (u16, Value) {
        let raw = body.to_string();
        let response = reqwest::Client::new()
            .post(format!("{}/", self.url))
            .header("content-type", "application/json")
            .header(
                "degrau-signature",
                signature_header(secret.as_bytes(), t, raw.as_bytes()),
            )
            .header("idempotency-key", key)
            .body(raw)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }
}

impl Drop for ToolServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `value` into moto's SSM as a SecureString under `name`.
pub async fn put_parameter(name: &str, value: &str) {
    let ssm = aws_sdk_ssm::Client::new(&moto::sdk_config().await);
    ssm.put_parameter()
        .name(name)
        .value(value)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .overwrite(true)
        .send()
        .await
        .expect("put the parameter");
}

/// Writes `secret` into moto's SSM as a SecureString under `tenant`'s own path;
/// returns its name.
pub async fn put_secret(tenant: &str, secret: &str) -> String {
    let name = format!("/degrau/webhooks/{tenant}/{}", moto::unique_name("shop"));
    put_parameter(&name, secret).await;
    name
}

/// The demo barbershop's tools, both behind `url`.
pub fn webhook_tools(url: &str, parameter: &str, timeout_ms: u64) -> TenantConfig {
    let webhook = json!({"url": url, "secret_parameter": parameter, "timeout_ms": timeout_ms});
    serde_json::from_value(json!({"tools": [
        {
            "name": "list_free_slots",
            "description": "List the free 30-minute slots of one day, for every professional.",
            "input_schema": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]},
            "webhook": webhook,
        },
        {
            "name": "book_slot",
            "description": "Book a free slot.",
            "input_schema": {"type": "object", "properties": {
                "day": {"type": "string"}, "time": {"type": "string"},
                "service": {"type": "string"}, "professional": {"type": "string"}
            }, "required": ["day", "time", "service"]},
            "webhook": webhook,
        }
    ]}))
    .unwrap()
}
