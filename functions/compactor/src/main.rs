//! The `compactor` Lambda: SQS FIFO consumer for compaction steps and fact
//! extraction, and the scheduled session sweep. Builds every dependency once
//! ([`Dependencies::from_env`]), then serves.

use std::sync::Arc;
use std::time::Duration;

use compactor::handler::{handle, job_budget};
use degrau::compaction::{Compactor, Wiring};
use degrau::metrics::record_cold_start;
use degrau_adapters::wiring::Dependencies;
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let deps = Dependencies::from_env().await?;
    // The queue serves the sweep's facts jobs and a capped step's next step; without
    // one, nothing is enqueued (a sweep says so).
    let jobs = deps.jobs;
    let compactor = Arc::new(Compactor::on(
        deps.store.clone(),
        Wiring {
            tenants: deps.store,
            model: deps.model,
            defaults: deps.config.defaults,
            clock: deps.clock,
            jobs: jobs.clone(),
            // An extraction's facts and a closed session's summary, to the tenant's
            // events webhook (`EVENTS_QUEUE_URL`; unset: none).
            events: deps.events,
        },
    ));
    let job_budget = job_budget(Duration::from_secs(deps.config.model_timeout_seconds));
    run(service_fn(move |event| {
        record_cold_start("compactor");
        let (compactor, jobs) = (compactor.clone(), jobs.clone());
        async move { handle(&compactor, jobs.as_ref(), job_budget, event).await }
    }))
    .await
}
