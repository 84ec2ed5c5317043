//! The `ask` Lambda: API Gateway HTTP API (payload v2) in front of degrau's memory.
//! Builds every dependency once ([`Dependencies::from_env`]), then serves.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use ask::handler::{app, handle};
use degrau::metrics::record_cold_start;
use degrau_adapters::wiring::Dependencies;
use lambda_http::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let deps = Dependencies::from_env().await?;
    let timeout = Duration::from_secs(deps.config.ask_timeout_seconds);
    let app = Arc::new(app(deps, timeout));
    run(service_fn(move |request| {
        record_cold_start("ask");
        let app = app.clone();
        async move { Ok::<_, Infallible>(handle(&app, request).await) }
    }))
    .await
}
