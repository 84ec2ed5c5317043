//! The `events-out` Lambda: the events queue's consumer. Reads its configuration
//! once ([`DeliveryConfig::from_env`]), builds the webhook caller once (SSM for
//! the signing secrets, the address policy of `AUTH_MODE`), then serves.

use std::sync::Arc;

use degrau::metrics::record_cold_start;
use degrau_adapters::config::{AuthConfig, DeliveryConfig};
use degrau_adapters::webhook::WebhookCaller;
use degrau_adapters::webhook::address::AddressPolicy;
use degrau_adapters::webhook::secrets::SsmSecrets;
use degrau_adapters::wiring::sdk_config;
use events_out::handler::{EVENT_BUDGET, handle};
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = DeliveryConfig::from_env()?;
    let sdk = sdk_config().await;
    let policy = match config.auth {
        AuthConfig::Dev => AddressPolicy::PublicAndLoopback,
        AuthConfig::Jwt { .. } => AddressPolicy::PublicOnly,
    };
    let secrets = Arc::new(SsmSecrets::new(aws_sdk_ssm::Client::new(&sdk)));
    let caller = Arc::new(WebhookCaller::new(policy, secrets, config.webhook_secrets)?);
    run(service_fn(move |event| {
        record_cold_start("events-out");
        let caller = caller.clone();
        async move { handle(caller.as_ref(), EVENT_BUDGET, event).await }
    }))
    .await
}
