//! The `whatsapp-worker` Lambda: the inbound FIFO queue's consumer. Builds the ask
//! service's dependencies ([`Dependencies::from_env`]) and the Graph API client
//! ([`WorkerDependencies::from_env`]) once, then serves.

// A turn's future holds the ask's commit (a person's answer recorded as a round)
// nested several async layers deep: its layout needs more than the default 128.
#![recursion_limit = "256"]

use std::sync::Arc;
use std::time::Duration;

use degrau::converse::Converse;
use degrau::metrics::record_cold_start;
use degrau_adapters::wiring::{Dependencies, address_policy};
use degrau_whatsapp::aws::WorkerDependencies;
use degrau_whatsapp::worker::{FUNCTION, Worker};
use lambda_runtime::{Error, run, service_fn};
use whatsapp_worker::handler::{Holding, handle_batch, record_budget};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let deps = Dependencies::from_env().await?;
    let whatsapp = WorkerDependencies::from_env(address_policy(&deps.config.auth)).await?;
    let worker = Arc::new(Worker {
        store: deps.store.clone(),
        ask: Converse {
            store: deps.store.clone(),
            records: deps.store.clone(),
            recall: deps.store.clone(),
            usage: deps.store.clone(),
            quotas: deps.store.clone(),
            tenants: deps.store,
            model: deps.model,
            tools: deps.tools,
            jobs: deps.jobs,
            defaults: deps.config.defaults,
            clock: deps.clock.clone(),
        },
        sender: whatsapp.sender,
        clock: deps.clock,
        debounce: Duration::from_secs(whatsapp.config.debounce_seconds),
        ask_timeout: Duration::from_secs(deps.config.ask_timeout_seconds),
        voice: whatsapp.voice,
        events: deps.events,
    });
    let budget = record_budget(&worker);
    let (hold, max_receives) = (whatsapp.hold, whatsapp.config.max_receives);
    run(service_fn(move |event| {
        record_cold_start(FUNCTION);
        let (worker, hold) = (worker.clone(), hold.clone());
        async move {
            let holding = Holding {
                hold: hold.as_ref(),
                max_receives,
            };
            handle_batch(&worker, budget, &holding, event).await
        }
    }))
    .await
}
