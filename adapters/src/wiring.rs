//! One constructor of every dependency, from the configuration: what both
//! functions' `main.rs` call once at init, so that the clients are built once per
//! process and the two functions cannot be wired differently by accident.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use degrau::events::{EventsOut, NoEvents};
use degrau::jobs::{Jobs, NoJobs};
use degrau::model::{Model, ModelError};
use degrau::plan::session::{Clock, system_clock, unix_now};
use degrau::tools::ToolDispatch;
use degrau::tools::Tools;

use crate::anthropic::{AnthropicConfig, AnthropicModel};
use crate::bedrock::BedrockModel;
use crate::config::{AuthConfig, Config, ConfigError, ModelProvider};
use crate::dynamodb::DynamoStore;
use crate::events::SqsEvents;
use crate::retry::RetryPolicy;
use crate::sqs::SqsJobs;
use crate::webhook::WebhookCaller;
use crate::webhook::address::AddressPolicy;
use crate::webhook::secrets::SsmSecrets;

/// Everything a function needs, built once at init.
pub struct Dependencies {
    /// The configuration everything was built from (the handler needs its auth mode
    /// and time limits).
    pub config: Config,
    /// Conversation storage and tenant configuration: one DynamoDB table.
    pub store: Arc<DynamoStore>,
    /// Claude: the Messages API (or the offline stand-in at `ANTHROPIC_BASE_URL`),
    /// or Bedrock Runtime with `MODEL_PROVIDER=bedrock`.
    pub model: Arc<dyn Model>,
    /// The compactor's queue; [`NoJobs`] without `JOBS_QUEUE_URL` (nothing is
    /// enqueued, and the sweep says so).
    pub jobs: Arc<dyn Jobs>,
    /// The events queue; [`NoEvents`] without `EVENTS_QUEUE_URL` (nothing is
    /// published, and no tenant's config is read for it).
    pub events: Arc<dyn EventsOut>,
    /// The tools the model may call: the built-in demo tools, and each tenant's
    /// webhook tools (public addresses only; loopback too with `AUTH_MODE=dev`).
    pub tools: Arc<dyn Tools>,
    /// The system clock (moved by `CLOCK_OFFSET_FILE` in benchmarks).
    pub clock: Clock,
}

/// Init failed: the message names the variable or the client at fault.
#[derive(thiserror::Error)]
pub enum WiringError {
    /// A variable is missing or wrong, or the SSM parameter cannot be read.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The model's HTTP client cannot be built (a bad base URL or key).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The webhooks' HTTP client cannot be built.
    #[error("the webhook client: {0}")]
    Webhooks(String),
}

// What a failed `main` prints is the error's `Debug`: the inner error's, as before
// the wiring moved here.
impl fmt::Debug for WiringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WiringError::Config(error) => fmt::Debug::fmt(error, f),
            WiringError::Model(error) => fmt::Debug::fmt(error, f),
            WiringError::Webhooks(error) => f.write_str(error),
        }
    }
}

/// The addresses webhooks (and the WhatsApp media's URLs) may reach: public ones,
/// and loopback too with `AUTH_MODE=dev`.
pub fn address_policy(auth: &AuthConfig) -> AddressPolicy {
    match auth {
        AuthConfig::Dev => AddressPolicy::PublicAndLoopback,
        AuthConfig::Jwt { .. } => AddressPolicy::PublicOnly,
    }
}

/// How long one DynamoDB, SQS or SSM call may take: its connection, each attempt,
/// and the whole operation with the SDK's retries. `ask` bounds its own calls by
/// the request's deadline besides; the compactor, the sweep and the WhatsApp
/// functions rely on these, so a call that hangs (a lost connection, throttling
/// under retries) fails in seconds instead of holding the function to its timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// One attempt's limit (a Query page, a transaction of 100 items).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole operation's limit, retries and their backoff included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(12);

/// The SDK configuration every AWS client of degrau is built from: the SDK's
/// standard variables (endpoints, region, credentials) with the timeouts above.
pub async fn sdk_config() -> aws_config::SdkConfig {
    with_timeouts(&aws_config::load_from_env().await)
}

/// `sdk` with degrau's timeouts ([`CONNECT_TIMEOUT`], [`ATTEMPT_TIMEOUT`],
/// [`OPERATION_TIMEOUT`]).
pub fn with_timeouts(sdk: &aws_config::SdkConfig) -> aws_config::SdkConfig {
    sdk.to_builder()
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        )
        .build()
}

impl Dependencies {
    /// Reads the environment ([`Config::from_env`]) and builds everything from it.
    pub async fn from_env() -> Result<Dependencies, WiringError> {
        Self::from_config(Config::from_env()?).await
    }

    /// Builds everything from `config`: one SDK configuration (endpoints and region
    /// from the SDK's standard variables), one client per AWS service, the API key
    /// (read from SSM when the configuration names a parameter), the model client.
    pub async fn from_config(config: Config) -> Result<Dependencies, WiringError> {
        let sdk = sdk_config().await;
        let store = Arc::new(DynamoStore::new(
            aws_sdk_dynamodb::Client::new(&sdk),
            config.table_name.clone(),
        ));
        let ssm = aws_sdk_ssm::Client::new(&sdk);
        let model = model(&config, &sdk, &ssm).await?;
        let clock = clock(config.clock_offset_file.as_deref());
        let jobs: Arc<dyn Jobs> = match &config.jobs_queue_url {
            Some(url) => Arc::new(SqsJobs::new(aws_sdk_sqs::Client::new(&sdk), url.clone())),
            None => Arc::new(NoJobs),
        };
        let policy = address_policy(&config.auth);
        let secrets = Arc::new(SsmSecrets::new(ssm));
        let events: Arc<dyn EventsOut> = match &config.events_queue_url {
            Some(url) => Arc::new(SqsEvents::new(
                aws_sdk_sqs::Client::new(&sdk),
                url.clone(),
                secrets.clone(),
                config.webhook_secrets.clone(),
            )),
            None => Arc::new(NoEvents),
        };
        let webhooks = WebhookCaller::new(policy, secrets, config.webhook_secrets.clone())
            .map_err(|e| WiringError::Webhooks(e.to_string()))?;
        Ok(Dependencies {
            config,
            store,
            model,
            jobs,
            events,
            tools: Arc::new(ToolDispatch::new(Arc::new(webhooks))),
            clock,
        })
    }
}

/// The model client of the configured provider: the Messages API with its key (read
/// from SSM when the configuration names a parameter), or Bedrock Runtime on the
/// SDK configuration (the function's role signs; no key is read).
async fn model(
    config: &Config,
    sdk: &aws_config::SdkConfig,
    ssm: &aws_sdk_ssm::Client,
) -> Result<Arc<dyn Model>, WiringError> {
    let request_timeout = Duration::from_secs(config.model_timeout_seconds);
    match (config.model_provider, &config.anthropic_api_key) {
        (ModelProvider::Bedrock, _) => Ok(Arc::new(BedrockModel::new(
            aws_sdk_bedrockruntime::config::Builder::from(sdk).build(),
            RetryPolicy {
                request_timeout,
                ..RetryPolicy::default()
            },
        ))),
        (ModelProvider::Anthropic, Some(source)) => {
            let api_key = source
                .read("ANTHROPIC_API_KEY", ssm)
                .await
                .map_err(ConfigError)?;
            Ok(Arc::new(AnthropicModel::new(AnthropicConfig {
                base_url: config.anthropic_base_url.clone(),
                api_key,
                request_timeout,
                ..AnthropicConfig::default()
            })?))
        }
        (ModelProvider::Anthropic, None) => Err(ConfigError(
            "neither ANTHROPIC_API_KEY nor ANTHROPIC_API_KEY_PARAMETER is set".into(),
        )
        .into()),
    }
}

/// The system clock; with `CLOCK_OFFSET_FILE` (benchmarks only), the system clock
/// plus the whole seconds that file holds, read at every reading (a file missing
/// or unreadable counts as 0). The strategies benchmark moves the functions' clock
/// together with the model stand-in's cache clock, so that a week of pauses plays
/// in minutes and each round sees the gap the benchmark meant.
pub fn clock(offset_file: Option<&str>) -> Clock {
    let Some(path) = offset_file.map(str::to_owned) else {
        return system_clock();
    };
    Arc::new(move || {
        let offset = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| text.trim().parse::<i64>().ok())
            .unwrap_or(0);
        unix_now().saturating_add(offset)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_file_moves_the_clock_at_every_reading() {
        assert!((clock(None)() - unix_now()).abs() <= 1);
        let dir = std::env::temp_dir().join(format!("degrau-clock-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("offset");
        let moved = clock(file.to_str());
        assert!((moved() - unix_now()).abs() <= 1, "no file yet: no offset");
        std::fs::write(&file, "86400\n").unwrap();
        assert!((moved() - unix_now() - 86_400).abs() <= 1);
        std::fs::write(&file, "90000").unwrap();
        assert!((moved() - unix_now() - 90_000).abs() <= 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
