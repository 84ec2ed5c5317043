//! The `Webhooks` port over HTTPS: a tenant's own tools, each called with a signed
//! `POST` (`docs/DESIGN.md` and the README describe the contract a receiver
//! implements).
//!
//! **The secret.** A tool's `secret_parameter` must lie under
//! `{WEBHOOK_SECRETS_PATH}{tenant}/`: a tenant names only its own secrets, never
//! another tenant's, the API key or the pseudonym secret, whatever else the
//! function's role may read. A parameter elsewhere is refused before anything is
//! read.
//!
//! **The call.** `POST url` with the body `{"tool_use_id", "name", "input",
//! "tenant", "contact"}` (`contact` is a pseudonym, see [`signature`]) and the
//! headers `Content-Type: application/json`, `User-Agent: degrau/<version>
//! (webhook tools)`, `Idempotency-Key: <tool_use_id>` (a retried round may call
//! again; the receiver dedupes) and `Degrau-Signature: t=..,v1=..`.
//!
//! **The answer.** A 2xx body (JSON or text) is the tool's result, capped like
//! every result. Anything else is an error result the model reads, never a failed
//! round: a 4xx (its status and the first [`MAX_ERROR_EXCERPT_CHARS`] characters
//! of its body), a 3xx (redirects are not followed), a 5xx (its status), a
//! timeout, a body over [`MAX_BODY_BYTES`] (the read stops there), a refused
//! scheme or address, a secret that cannot be read. A 5xx or a connection failure
//! is tried once more after [`RETRY_PAUSE`], when that fits in the time left: the
//! earlier of the round's deadline and the tool's `timeout_ms`.
//!
//! **Outbound safety.** `https` only; plain `http` only to a loopback IP literal
//! (`http://127.0.0.1:PORT`) and only with `AUTH_MODE=dev`. Every address the host
//! resolves to is checked ([`address`]) by the client's own resolver
//! ([`resolver`]), so the connection goes to a checked address; an IP literal in
//! the URL is checked before the request. No proxy, no redirects.
//!
//! Logs carry the tool's name, the outcome, the status, the attempts and the
//! latency: never the input, the answer or the secret. Calls, errors and latency
//! per tool are counted by the core's `ToolDispatch`.

pub mod address;
pub mod deliver;
pub mod resolver;
pub mod secrets;
pub mod signature;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, HeaderValue, USER_AGENT};
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};

use degrau::deadline::Deadline;
use degrau::tools::{CallContext, ToolOutput, WebhookTool, Webhooks};

use address::AddressPolicy;
use resolver::{CheckedResolver, Lookup, RefusedAddress, SystemLookup, describe};
use secrets::SigningSecrets;
use signature::{SIGNATURE_HEADER, contact_pseudonym, signature_header, tenant_pseudonym_key};

/// Largest answer read, in bytes: the result cap (16,000 characters) at 4 bytes
/// each. The read stops past it and the call is an error.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Characters of a 4xx body shown to the model.
pub const MAX_ERROR_EXCERPT_CHARS: usize = 300;

/// The wait before the one retry.
pub const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Least time left for an attempt to start.
pub const MIN_ATTEMPT: Duration = Duration::from_millis(50);

/// The `User-Agent` of every call.
pub const USER_AGENT_VALUE: &str =
    concat!("degrau/", env!("CARGO_PKG_VERSION"), " (webhook tools)");

/// Where the caller's secrets live: `WEBHOOK_SECRETS_PATH` and
/// `PSEUDONYM_KEY_PARAMETER`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretNames {
    /// The path tenants' signing secrets lie under (`/degrau/webhooks/`): a tool's
    /// `secret_parameter` must start with it and the tenant's id and a `/`.
    pub path: String,
    /// The SSM parameter holding the deployment's pseudonym secret, from which each
    /// tenant's pseudonym key is derived (see [`signature`]).
    pub pseudonym_key: String,
}

impl Default for SecretNames {
    fn default() -> Self {
        SecretNames {
            path: DEFAULT_SECRETS_PATH.to_owned(),
            pseudonym_key: DEFAULT_PSEUDONYM_KEY_PARAMETER.to_owned(),
        }
    }
}

/// `WEBHOOK_SECRETS_PATH` when unset (the template's default).
pub const DEFAULT_SECRETS_PATH: &str = "/degrau/webhooks/";

/// `PSEUDONYM_KEY_PARAMETER` when unset (the template's default).
pub const DEFAULT_PSEUDONYM_KEY_PARAMETER: &str = "/degrau/pseudonym-key";

impl SecretNames {
    /// The prefix every secret of `tenant` must start with.
    pub fn tenant_prefix(&self, tenant: &str) -> String {
        format!("{}{tenant}/", self.path)
    }
}

/// Calls webhook tools (see the module documentation).
pub struct WebhookCaller {
    client: reqwest::Client,
    policy: AddressPolicy,
    secrets: Arc<dyn SigningSecrets>,
    names: SecretNames,
}

impl WebhookCaller {
    /// A caller resolving hosts with the system's resolver.
    pub fn new(
        policy: AddressPolicy,
        secrets: Arc<dyn SigningSecrets>,
        names: SecretNames,
    ) -> Result<Self, reqwest::Error> {
        Self::with_lookup(policy, secrets, names, Arc::new(SystemLookup))
    }

    /// A caller resolving hosts with `lookup` (tests use a stub).
    pub fn with_lookup(
        policy: AddressPolicy,
        secrets: Arc<dyn SigningSecrets>,
        names: SecretNames,
        lookup: Arc<dyn Lookup>,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .dns_resolver(CheckedResolver::new(policy, lookup))
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .no_proxy()
            .user_agent(USER_AGENT_VALUE)
            .build()?;
        Ok(WebhookCaller {
            client,
            policy,
            secrets,
            names,
        })
    }

    /// Reads the secret `name` within the time left; `unreadable` is the error to
    /// answer when it cannot be had (the reason is logged, never the secret).
    async fn read(
        &self,
        tool: &str,
        name: &str,
        deadline: Deadline,
        unreadable: CallError,
    ) -> Result<Arc<[u8]>, CallError> {
        match tokio::time::timeout(deadline.remaining(), self.secrets.secret(name)).await {
            Ok(Ok(secret)) => Ok(secret),
            Ok(Err(reason)) => {
                tracing::error!(tool, error = %reason, kind = unreadable.kind(), "webhook secret unavailable");
                Err(unreadable)
            }
            Err(_) => Err(CallError::Timeout),
        }
    }

    /// The checked URL, or why it is refused: its scheme, or an IP literal's class.
    fn target(&self, url: &str) -> Result<Url, CallError> {
        let url =
            Url::parse(url).map_err(|_| CallError::Refused("the URL does not parse".into()))?;
        let literal: Option<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(ip.into()),
            Some(url::Host::Ipv6(ip)) => Some(ip.into()),
            Some(url::Host::Domain(_)) => None,
            None => return Err(CallError::Refused("the URL has no host".into())),
        };
        match url.scheme() {
            "https" => {}
            "http"
                if self.policy == AddressPolicy::PublicAndLoopback
                    && literal.is_some_and(|ip| describe(ip) == "loopback") => {}
            "http" => {
                return Err(CallError::Refused(
                    "plain http is allowed only to a loopback address (http://127.0.0.1:PORT) \
                     in local runs (AUTH_MODE=dev); use https"
                        .into(),
                ));
            }
            other => {
                return Err(CallError::Refused(format!(
                    "the scheme {other:?} is not allowed; use https"
                )));
            }
        }
        if let Some(ip) = literal
            && !self.policy.allows(ip)
        {
            return Err(CallError::Refused(format!(
                "the address {ip} is {}",
                describe(ip)
            )));
        }
        Ok(url)
    }

    /// The whole call: check, sign, send, retry once if worth it.
    async fn run(
        &self,
        tool: &WebhookTool,
        input: &Value,
        context: &CallContext<'_>,
        deadline: Deadline,
        attempts: &mut u32,
    ) -> Result<String, CallError> {
        let url = self.target(&tool.webhook.url)?;
        let (secret, body) = self.signed_body(tool, input, context, deadline).await?;
        loop {
            let left = deadline.remaining();
            if left < MIN_ATTEMPT {
                return Err(CallError::Timeout);
            }
            *attempts += 1;
            let result = self
                .attempt(
                    &url,
                    &secret,
                    &body,
                    context.tool_use_id,
                    left,
                    USER_AGENT_VALUE,
                )
                .await;
            match result {
                Err(error)
                    if error.retryable()
                        && *attempts == 1
                        && deadline.allows(RETRY_PAUSE + MIN_ATTEMPT) =>
                {
                    tracing::warn!(tool = %tool.name, error = error.kind(), "webhook call failed; retrying once");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                other => return other,
            }
        }
    }

    /// The tool's signing secret (under the tenant's prefix only) and the body to
    /// sign: the call's input, the tenant and the contact's pseudonym.
    async fn signed_body(
        &self,
        tool: &WebhookTool,
        input: &Value,
        context: &CallContext<'_>,
        deadline: Deadline,
    ) -> Result<(Arc<[u8]>, Vec<u8>), CallError> {
        let tenant = context.key.tenant.as_str();
        let parameter = &tool.webhook.secret_parameter;
        let prefix = self.names.tenant_prefix(tenant);
        if !parameter.starts_with(&prefix) {
            return Err(CallError::Refused(format!(
                "its secret_parameter must lie under {prefix}"
            )));
        }
        let secret = self
            .read(&tool.name, parameter, deadline, CallError::Secret)
            .await?;
        let deployment = self
            .read(
                &tool.name,
                &self.names.pseudonym_key,
                deadline,
                CallError::PseudonymKey,
            )
            .await?;
        let pseudonym = contact_pseudonym(
            &tenant_pseudonym_key(&deployment, tenant),
            parameter,
            context.key.contact.as_str(),
        );
        let body = serde_json::to_vec(&json!({
            "tool_use_id": context.tool_use_id,
            "name": tool.name,
            "input": input,
            "tenant": tenant,
            "contact": pseudonym,
        }))
        .map_err(|_| CallError::Refused("the input does not encode".into()))?;
        Ok((secret, body))
    }

    /// One signed `POST` within `timeout`, its body read up to the cap.
    async fn attempt(
        &self,
        url: &Url,
        secret: &[u8],
        body: &[u8],
        tool_use_id: &str,
        timeout: Duration,
        agent: &'static str,
    ) -> Result<String, CallError> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut response = self
            .client
            .post(url.clone())
            .timeout(timeout)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(USER_AGENT, HeaderValue::from_static(agent))
            .header(SIGNATURE_HEADER, signature_header(secret, now, body))
            .header("Idempotency-Key", tool_use_id)
            .body(body.to_vec())
            .send()
            .await
            .map_err(CallError::transport)?;
        let status = response.status();
        if response
            .content_length()
            .is_some_and(|length| length > MAX_BODY_BYTES as u64)
        {
            return Err(CallError::TooLarge);
        }
        let mut read = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(CallError::transport)? {
            if read.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(CallError::TooLarge);
            }
            read.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&read).into_owned();
        if status.is_success() {
            Ok(text)
        } else {
            Err(CallError::Status(status, text))
        }
    }
}

#[async_trait]
impl Webhooks for WebhookCaller {
    async fn call(
        &self,
        tool: &WebhookTool,
        input: &Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        let started = Instant::now();
        let deadline = context
            .deadline
            .earlier(Deadline::after(Duration::from_millis(
                tool.webhook.timeout_ms,
            )));
        let mut attempts = 0;
        let result = self
            .run(tool, input, context, deadline, &mut attempts)
            .await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(text) => {
                tracing::info!(tool = %tool.name, attempts, latency_ms, "webhook answered");
                ToolOutput::ok(text)
            }
            Err(error) => {
                tracing::warn!(
                    tool = %tool.name,
                    attempts,
                    latency_ms,
                    error = error.kind(),
                    status = error.status(),
                    "webhook call failed"
                );
                ToolOutput::error(error.for_model(tool.webhook.timeout_ms, attempts))
            }
        }
    }
}

/// Why a call has no result.
#[derive(Debug)]
enum CallError {
    /// The URL's scheme or address is not allowed.
    Refused(String),
    /// The signing secret could not be read.
    Secret,
    /// The deployment's pseudonym secret could not be read.
    PseudonymKey,
    /// No answer in time.
    Timeout,
    /// No connection, or it broke.
    Connection,
    /// More than [`MAX_BODY_BYTES`].
    TooLarge,
    /// A non-2xx answer and its body.
    Status(StatusCode, String),
}

impl CallError {
    fn transport(error: reqwest::Error) -> CallError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(current) = source {
            if let Some(refused) = current.downcast_ref::<RefusedAddress>() {
                return CallError::Refused(refused.to_string());
            }
            source = current.source();
        }
        if error.is_timeout() {
            CallError::Timeout
        } else {
            CallError::Connection
        }
    }

    fn retryable(&self) -> bool {
        match self {
            CallError::Connection => true,
            CallError::Status(status, _) => status.is_server_error(),
            _ => false,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            CallError::Refused(_) => "refused",
            CallError::Secret => "secret",
            CallError::PseudonymKey => "pseudonym_key",
            CallError::Timeout => "timeout",
            CallError::Connection => "connection",
            CallError::TooLarge => "too_large",
            CallError::Status(..) => "status",
        }
    }

    fn status(&self) -> Option<u16> {
        match self {
            CallError::Status(status, _) => Some(status.as_u16()),
            _ => None,
        }
    }

    /// What the model reads: short, and never the secret.
    fn for_model(&self, timeout_ms: u64, attempts: u32) -> String {
        let tries = if attempts > 1 { " (tried twice)" } else { "" };
        match self {
            CallError::Refused(why) => format!("the tool's webhook was not called: {why}"),
            CallError::Secret => {
                "the tool's webhook was not called: its signing secret could not be read".into()
            }
            CallError::PseudonymKey => {
                "the tool's webhook was not called: degrau's pseudonym key could not be read".into()
            }
            CallError::Timeout => {
                format!("the tool's webhook did not answer in time (within {timeout_ms} ms){tries}")
            }
            CallError::Connection => format!("the tool's webhook could not be reached{tries}"),
            CallError::TooLarge => format!(
                "the tool's webhook answered more than {MAX_BODY_BYTES} bytes; nothing was kept"
            ),
            CallError::Status(status, body) if status.is_client_error() => {
                let excerpt: String = body.chars().take(MAX_ERROR_EXCERPT_CHARS).collect();
                format!("the tool's webhook answered {status}: {excerpt}")
            }
            CallError::Status(status, _) if status.is_redirection() => {
                format!("the tool's webhook answered {status} (redirects are not followed)")
            }
            CallError::Status(status, _) => format!("the tool's webhook answered {status}{tries}"),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

#[cfg(test)]
mod tests;
