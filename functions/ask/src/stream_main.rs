//! The `ask-stream` Lambda: `POST /v1/contacts/{contact}/messages/stream` behind an
//! API that streams (API Gateway's REST API with response streaming, or a function
//! URL), answered with Lambda's response streaming as the round runs
//! ([`ask::handler::stream`]). Its time budget is `STREAM_TIMEOUT_SECONDS`; a
//! browser page at `CORS_ALLOWED_ORIGIN` may call it.

use std::sync::Arc;
use std::time::Duration;

use ask::handler::stream::{Cors, invocation};
use ask::handler::{App, app};
use degrau::metrics::record_cold_start;
use degrau_adapters::wiring::Dependencies;
use lambda_http::lambda_runtime::{self, service_fn};
use lambda_http::{Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let deps = Dependencies::from_env().await?;
    let timeout = Duration::from_secs(deps.config.stream_timeout_seconds);
    let cors = Arc::new(Cors {
        allowed_origin: deps.config.cors_allowed_origin.clone(),
    });
    let app: Arc<App> = Arc::new(app(deps, timeout));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        record_cold_start("ask-stream");
        let (app, cors) = (app.clone(), cors.clone());
        async move { invocation(app, &cors, event).await }
    }))
    .await
}
