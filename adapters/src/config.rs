//! Typed configuration, read once at init from the environment; a bad or missing
//! value fails fast with a message naming the variable. It names the table, the
//! queue and the endpoints (wiring, not rules): the tenant [`Defaults`] it fills in
//! are the core's, and [`crate::wiring`] turns the rest into clients.

use std::collections::HashMap;

use degrau::tenant::Defaults;

mod defaults;
mod delivery;
mod plan;

pub use delivery::DeliveryConfig;

use crate::ssm::SecretSource;
use crate::webhook::SecretNames;

/// How `ask` finds the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthConfig {
    /// The verified JWT claim (the default).
    Jwt {
        /// `TENANT_CLAIM`.
        claim: String,
        /// `JWT_AUDIENCE` (comma-separated): when set, the token's `aud` (or, in an
        /// access token without one, its `client_id`) must be one of these, beside
        /// API Gateway's own check of the same list. A token of another app client
        /// of the same issuer (one that lets users write the tenant attribute, say)
        /// is then refused even if the authorizer were set up too wide.
        audiences: Vec<String>,
    },
    /// `AUTH_MODE=dev`: the `X-Tenant-Id` header, for local runs only.
    Dev,
}

/// Which scope each operator route needs, and the claim holding a token's scopes
/// (under `AUTH_MODE=dev`, the `X-Scopes` header stands in for the claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeConfig {
    /// `SCOPE_CLAIM`: `scope` (an OAuth access token's, space-separated) by
    /// default; `cognito:groups` for the template's user pool's groups.
    pub claim: String,
    /// `SCOPE_MEMORY_READ`: list contacts, read facts (`memory:read`).
    pub memory_read: String,
    /// `SCOPE_MEMORY_WRITE`: set and delete facts (`memory:write`).
    pub memory_write: String,
    /// `SCOPE_TENANT_ADMIN`: the tenant's configuration and usage (`tenant:admin`).
    pub tenant_admin: String,
    /// `SCOPE_PLATFORM_ADMIN`: the platform's routes over every tenant, their
    /// policies and usage (`platform:admin`); a token with it needs no tenant.
    pub platform_admin: String,
}

impl Default for ScopeConfig {
    fn default() -> Self {
        ScopeConfig {
            claim: "scope".into(),
            memory_read: "memory:read".into(),
            memory_write: "memory:write".into(),
            tenant_admin: "tenant:admin".into(),
            platform_admin: "platform:admin".into(),
        }
    }
}

/// Which service answers the model calls: `MODEL_PROVIDER`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ModelProvider {
    /// The Anthropic Messages API at `ANTHROPIC_BASE_URL`, with an API key (the
    /// default).
    #[default]
    Anthropic,
    /// Claude through Amazon Bedrock Runtime's `InvokeModel`, signed with the
    /// function's role: `MODEL` and `SUMMARY_MODEL` are Bedrock model ids or
    /// inference profiles; no API key. The endpoint is the SDK's (set
    /// `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` to reach the offline stand-in).
    Bedrock,
}

/// Everything the functions read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TABLE_NAME`.
    pub table_name: String,
    /// `JOBS_QUEUE_URL` (optional until the compactor is deployed).
    pub jobs_queue_url: Option<String>,
    /// The events queue's URL (`EVENTS_QUEUE_URL`; unset: no events are published).
    pub events_queue_url: Option<String>,
    /// `MODEL_PROVIDER`: `anthropic` (the default) or `bedrock`.
    pub model_provider: ModelProvider,
    /// `ANTHROPIC_API_KEY` (the key itself; the local stack sets a dummy one) or
    /// `ANTHROPIC_API_KEY_PARAMETER` (an SSM SecureString's name), read once at init;
    /// required with the `anthropic` provider, unused (and not required) with
    /// `bedrock`.
    pub anthropic_api_key: Option<SecretSource>,
    /// `ANTHROPIC_BASE_URL`.
    pub anthropic_base_url: String,
    /// `MODEL_TIMEOUT_SECONDS`: the limit of one model call attempt (60 by default).
    pub model_timeout_seconds: u64,
    /// `ASK_TIMEOUT_SECONDS`: the time budget of one ask, from its start to its answer
    /// (25 by default, below API Gateway's 29 s); see [`degrau::converse::COMMIT_MARGIN`].
    pub ask_timeout_seconds: u64,
    /// `STREAM_TIMEOUT_SECONDS`: the time budget of one streamed round (the
    /// streaming route is not cut at API Gateway's 29 s; 120 by default).
    pub stream_timeout_seconds: u64,
    /// `AUTH_MODE` and `TENANT_CLAIM`.
    pub auth: AuthConfig,
    /// `SCOPE_CLAIM` and the operator routes' scopes.
    pub scopes: ScopeConfig,
    /// Model, thresholds and session settings.
    pub defaults: Defaults,
    /// `CORS_ALLOWED_ORIGIN`: the one origin a browser page may call the streaming
    /// function from (`https://chat.example.com`; unset: none).
    pub cors_allowed_origin: Option<String>,
    /// `CLOCK_OFFSET_FILE` (benchmarks only): a file holding seconds to add to the
    /// system clock, read at every reading (see [`crate::wiring`]).
    pub clock_offset_file: Option<String>,
    /// `WEBHOOK_SECRETS_PATH` and `PSEUDONYM_KEY_PARAMETER`: where the webhook
    /// tools' signing secrets lie, and the deployment's pseudonym secret.
    pub webhook_secrets: SecretNames,
}

/// `ASK_TIMEOUT_SECONDS` when unset: an answer leaves the function 25 s after the
/// request reached it at the latest, 4 s before API Gateway gives up (29 s) on the
/// client, which is room for a cold start and the network.
pub const DEFAULT_ASK_TIMEOUT_SECONDS: u64 = 25;

/// `STREAM_TIMEOUT_SECONDS` when unset: a streamed round may run two minutes, room
/// for a tool round's two model calls at their 60 s attempt limit; the template
/// gives the streaming function 150 s.
pub const DEFAULT_STREAM_TIMEOUT_SECONDS: u64 = 120;

/// `CORS_ALLOWED_ORIGIN`, when set and not empty: a scheme and a host (and a
/// port), as a browser sends its `Origin`, with no path and no trailing slash.
fn allowed_origin(vars: &Vars) -> Result<Option<String>, ConfigError> {
    let Some(origin) = vars.get("CORS_ALLOWED_ORIGIN").filter(|o| !o.is_empty()) else {
        return Ok(None);
    };
    let host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    match host {
        Some(host) if !host.is_empty() && !host.contains('/') && host.is_ascii() => {
            Ok(Some(origin.to_owned()))
        }
        _ => Err(ConfigError(format!(
            "CORS_ALLOWED_ORIGIN must be an origin such as https://chat.example.com (a scheme \
             and a host, no path), got {origin:?}"
        ))),
    }
}

/// A configuration problem, naming the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(pub String);

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Self::from_map(&std::env::vars().collect())
    }

    /// Reads a map of variables (the environment, or a test's). Each group is read
    /// in turn, so the first bad variable is the one named: the auth mode, the
    /// tenant defaults, then the table, the queue, the key, the model endpoint and
    /// the time limits.
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Config, ConfigError> {
        let vars = Vars(vars);
        let auth = auth(&vars)?;
        let defaults = defaults::defaults(&vars)?;
        let table_name = vars.required("TABLE_NAME", "the DynamoDB table")?;
        let model_provider = model_provider(&vars)?;
        Ok(Config {
            table_name,
            jobs_queue_url: vars.get("JOBS_QUEUE_URL").map(str::to_owned),
            events_queue_url: vars.get("EVENTS_QUEUE_URL").map(str::to_owned),
            model_provider,
            anthropic_api_key: match model_provider {
                ModelProvider::Anthropic => Some(api_key(&vars)?),
                ModelProvider::Bedrock => optional_api_key(&vars),
            },
            anthropic_base_url: vars
                .get("ANTHROPIC_BASE_URL")
                .unwrap_or(crate::anthropic::DEFAULT_BASE_URL)
                .trim_end_matches('/')
                .to_owned(),
            model_timeout_seconds: match vars.number("MODEL_TIMEOUT_SECONDS", 60)? {
                0 => {
                    return Err(ConfigError(
                        "MODEL_TIMEOUT_SECONDS must be at least 1".into(),
                    ));
                }
                seconds => seconds,
            },
            ask_timeout_seconds: match vars
                .number("ASK_TIMEOUT_SECONDS", DEFAULT_ASK_TIMEOUT_SECONDS)?
            {
                seconds if seconds <= degrau::converse::COMMIT_MARGIN.as_secs() => {
                    return Err(ConfigError(format!(
                        "ASK_TIMEOUT_SECONDS must be more than the {} s kept for the commit",
                        degrau::converse::COMMIT_MARGIN.as_secs()
                    )));
                }
                seconds => seconds,
            },
            stream_timeout_seconds: match vars
                .number("STREAM_TIMEOUT_SECONDS", DEFAULT_STREAM_TIMEOUT_SECONDS)?
            {
                seconds if seconds <= degrau::converse::COMMIT_MARGIN.as_secs() => {
                    return Err(ConfigError(format!(
                        "STREAM_TIMEOUT_SECONDS must be more than the {} s kept for the commit",
                        degrau::converse::COMMIT_MARGIN.as_secs()
                    )));
                }
                seconds => seconds,
            },
            auth,
            scopes: scopes(&vars)?,
            defaults,
            cors_allowed_origin: allowed_origin(&vars)?,
            clock_offset_file: vars.get("CLOCK_OFFSET_FILE").map(str::to_owned),
            webhook_secrets: webhook_secrets(&vars)?,
        })
    }
}

/// `WEBHOOK_SECRETS_PATH` (a path of at least one segment, `/` first and last)
/// and `PSEUDONYM_KEY_PARAMETER` (a parameter name outside that path, so that no
/// tenant's `secret_parameter` can name it).
fn webhook_secrets(vars: &Vars<'_>) -> Result<SecretNames, ConfigError> {
    let defaults = SecretNames::default();
    let path = vars.get("WEBHOOK_SECRETS_PATH").unwrap_or(&defaults.path);
    let plain = |text: &str| {
        text.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
    };
    let segments_ok = path
        .strip_prefix('/')
        .and_then(|rest| rest.strip_suffix('/'))
        .is_some_and(|inner| !inner.is_empty() && inner.split('/').all(|s| !s.is_empty()));
    if !segments_ok || !plain(path) {
        return Err(ConfigError(format!(
            "WEBHOOK_SECRETS_PATH must be an SSM path of at least one segment, starting and \
             ending with `/` (like /degrau/webhooks/), got {path:?}"
        )));
    }
    let pseudonym_key = vars
        .get("PSEUDONYM_KEY_PARAMETER")
        .unwrap_or(&defaults.pseudonym_key);
    if !pseudonym_key.starts_with('/') || !plain(pseudonym_key) || pseudonym_key.starts_with(path) {
        return Err(ConfigError(format!(
            "PSEUDONYM_KEY_PARAMETER must be an SSM parameter name outside \
             WEBHOOK_SECRETS_PATH ({path}), got {pseudonym_key:?}"
        )));
    }
    Ok(SecretNames {
        path: path.to_owned(),
        pseudonym_key: pseudonym_key.to_owned(),
    })
}

/// The variables as read: trimmed, an empty one counting as unset.
struct Vars<'a>(&'a HashMap<String, String>);

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn required(&self, name: &str, why: &str) -> Result<String, ConfigError> {
        self.get(name)
            .map(str::to_owned)
            .ok_or_else(|| ConfigError(format!("{name} is not set ({why})")))
    }

    /// A whole number, or `default` when unset.
    fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(text) => text
                .parse()
                .map_err(|_| ConfigError(format!("{name} must be a whole number, got {text:?}"))),
        }
    }
}

/// `SCOPE_CLAIM` and `SCOPE_MEMORY_READ`, `SCOPE_MEMORY_WRITE`, `SCOPE_TENANT_ADMIN`:
/// each a single word (a scope holds no space).
fn scopes(vars: &Vars<'_>) -> Result<ScopeConfig, ConfigError> {
    let defaults = ScopeConfig::default();
    let word = |name: &str, default: String| -> Result<String, ConfigError> {
        match vars.get(name) {
            None => Ok(default),
            Some(value) if !value.is_empty() && !value.contains(char::is_whitespace) => {
                Ok(value.to_owned())
            }
            Some(_) => Err(ConfigError(format!(
                "{name} must be one word without spaces"
            ))),
        }
    };
    Ok(ScopeConfig {
        claim: word("SCOPE_CLAIM", defaults.claim)?,
        memory_read: word("SCOPE_MEMORY_READ", defaults.memory_read)?,
        memory_write: word("SCOPE_MEMORY_WRITE", defaults.memory_write)?,
        tenant_admin: word("SCOPE_TENANT_ADMIN", defaults.tenant_admin)?,
        platform_admin: word("SCOPE_PLATFORM_ADMIN", defaults.platform_admin)?,
    })
}

/// Whether the process runs on AWS Lambda itself: `AWS_LAMBDA_FUNCTION_NAME` and
/// `LAMBDA_TASK_ROOT` are both set. Lambda reserves both (a function's
/// configuration cannot set or unset them); the local runners (`cargo lambda
/// watch`, the tests' Runtime API) set the first only.
pub fn on_lambda(vars: &HashMap<String, String>) -> bool {
    let set = |name: &str| vars.get(name).is_some_and(|v| !v.trim().is_empty());
    set("AWS_LAMBDA_FUNCTION_NAME") && set("LAMBDA_TASK_ROOT")
}

/// `AUTH_MODE` and `TENANT_CLAIM`. `dev` (the tenant from a header anyone can
/// send) is refused on Lambda ([`on_lambda`]): it is for local runs only.
fn auth(vars: &Vars<'_>) -> Result<AuthConfig, ConfigError> {
    if vars.get("AUTH_MODE") == Some("dev") && on_lambda(vars.0) {
        return Err(ConfigError(
            "AUTH_MODE=dev is refused on AWS Lambda (AWS_LAMBDA_FUNCTION_NAME and              LAMBDA_TASK_ROOT are set): it takes the tenant from a header anyone can send;              deploy with AUTH_MODE=jwt"
                .into(),
        ));
    }
    match vars.get("AUTH_MODE").unwrap_or("jwt") {
        "jwt" => Ok(AuthConfig::Jwt {
            claim: vars
                .get("TENANT_CLAIM")
                .unwrap_or("custom:tenant_id")
                .to_owned(),
            audiences: vars
                .get("JWT_AUDIENCE")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
        }),
        "dev" => Ok(AuthConfig::Dev),
        other => Err(ConfigError(format!(
            "AUTH_MODE must be `jwt` or `dev`, got {other:?}"
        ))),
    }
}

/// `MODEL_PROVIDER`: `anthropic` when unset.
fn model_provider(vars: &Vars<'_>) -> Result<ModelProvider, ConfigError> {
    match vars.get("MODEL_PROVIDER").unwrap_or("anthropic") {
        "anthropic" => Ok(ModelProvider::Anthropic),
        "bedrock" => Ok(ModelProvider::Bedrock),
        other => Err(ConfigError(format!(
            "MODEL_PROVIDER must be `anthropic` or `bedrock`, got {other:?}"
        ))),
    }
}

/// The key's source when one is set, for a provider that does not need it.
fn optional_api_key(vars: &Vars<'_>) -> Option<SecretSource> {
    SecretSource::from_vars(vars.0, "ANTHROPIC_API_KEY")
}

/// `ANTHROPIC_API_KEY` (the key itself), else `ANTHROPIC_API_KEY_PARAMETER` (an SSM
/// parameter's name); one is required.
fn api_key(vars: &Vars<'_>) -> Result<SecretSource, ConfigError> {
    optional_api_key(vars).ok_or_else(|| {
        ConfigError(
            "neither ANTHROPIC_API_KEY nor ANTHROPIC_API_KEY_PARAMETER is set (the local stack \
             sets a dummy key for the offline stand-in)"
                .into(),
        )
    })
}

#[cfg(test)]
mod tests;
