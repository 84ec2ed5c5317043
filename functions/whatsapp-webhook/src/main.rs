//! The `whatsapp-webhook` Lambda: Meta's webhook on the HTTP API, without the JWT
//! authorizer (Meta signs its deliveries instead). Builds its dependencies once
//! ([`WebhookDependencies::from_env`]: the table, the worker's queue, the app secret,
//! the verify token and the events queue; no model), then serves.

use std::convert::Infallible;
use std::sync::Arc;

use degrau::metrics::record_cold_start;
use degrau::plan::session::system_clock;
use degrau_whatsapp::aws::WebhookDependencies;
use degrau_whatsapp::webhook::{FUNCTION, WebhookService};
use lambda_http::{Error, run, service_fn};
use whatsapp_webhook::handler::{App, handle};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let deps = WebhookDependencies::from_env().await?;
    let app = Arc::new(App {
        service: WebhookService {
            store: deps.store.clone(),
            tenants: deps.store,
            inbox: deps.inbox,
            clock: system_clock(),
            keys: deps.keys,
            events: deps.events,
        },
        app_secret: deps.app_secret,
        verify_token: deps.verify_token,
    });
    run(service_fn(move |request| {
        record_cold_start(FUNCTION);
        let app = app.clone();
        async move { Ok::<_, Infallible>(handle(&app, request).await) }
    }))
    .await
}
