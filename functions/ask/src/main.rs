//! The `ask` Lambda: API Gateway HTTP API (payload v2) in front of degrau's memory.
//! Wires typed config, one SDK config and the clients once, then serves.

use std::convert::Infallible;
use std::sync::Arc;

use ask::handler::{App, handle};
use degrau::ask::AskService;
use degrau::jobs::{Jobs, NoJobs};
use degrau::session::system_clock;
use degrau::tools::demo::DemoTools;
use degrau_adapters::anthropic::{AnthropicConfig, AnthropicModel};
use degrau_adapters::config::Config;
use degrau_adapters::dynamodb::DynamoStore;
use degrau_adapters::sqs::SqsJobs;
use lambda_http::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let sdk = aws_config::load_from_env().await;
    let store = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        config.table_name.clone(),
    ));
    let model = AnthropicModel::new(AnthropicConfig {
        base_url: config.anthropic_base_url.clone(),
        api_key: degrau_adapters::ssm::api_key(
            &config.anthropic_api_key,
            &aws_sdk_ssm::Client::new(&sdk),
        )
        .await?,
        request_timeout: std::time::Duration::from_secs(config.model_timeout_seconds),
        ..AnthropicConfig::default()
    })?;
    let jobs: Arc<dyn Jobs> = match &config.jobs_queue_url {
        Some(url) => Arc::new(SqsJobs::new(aws_sdk_sqs::Client::new(&sdk), url.clone())),
        None => Arc::new(NoJobs),
    };
    let app = Arc::new(App {
        service: AskService {
            store: store.clone(),
            tenants: store,
            model: Arc::new(model),
            tools: Arc::new(DemoTools),
            jobs,
            defaults: config.defaults,
            clock: system_clock(),
        },
        auth: config.auth,
        ask_timeout: std::time::Duration::from_secs(config.ask_timeout_seconds),
    });
    run(service_fn(move |request| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(handle(&app, request).await) }
    }))
    .await
}
