//! The `compactor` Lambda: SQS FIFO consumer for compaction steps and fact
//! extraction, and the scheduled session sweep. Wires typed config, one SDK config
//! and the clients once, then serves.

use std::sync::Arc;

use compactor::handler::{handle, job_budget};
use degrau::compactor::Compactor;
use degrau::jobs::{Jobs, NoJobs};
use degrau::session::system_clock;
use degrau_adapters::anthropic::{AnthropicConfig, AnthropicModel};
use degrau_adapters::config::Config;
use degrau_adapters::dynamodb::DynamoStore;
use degrau_adapters::sqs::SqsJobs;
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
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
    // The queue for the sweep's facts jobs and a capped step's next step; without
    // one, nothing is enqueued (a sweep says so).
    let jobs: Arc<dyn Jobs> = match &config.jobs_queue_url {
        Some(url) => Arc::new(SqsJobs::new(aws_sdk_sqs::Client::new(&sdk), url.clone())),
        None => Arc::new(NoJobs),
    };
    let compactor = Arc::new(Compactor {
        store: store.clone(),
        tenants: store,
        model: Arc::new(model),
        defaults: config.defaults,
        clock: system_clock(),
        jobs: jobs.clone(),
    });
    let job_budget = job_budget(std::time::Duration::from_secs(config.model_timeout_seconds));
    run(service_fn(move |event| {
        let (compactor, jobs) = (compactor.clone(), jobs.clone());
        async move { handle(&compactor, jobs.as_ref(), job_budget, event).await }
    }))
    .await
}
