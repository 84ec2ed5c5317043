//! The `ask` Lambda: HTTP API (payload v2) in front of degrau's memory.

use lambda_http::{Body, Error, Request, Response, run, service_fn};

async fn handle(_request: Request) -> Result<Response<Body>, Error> {
    let body = serde_json::json!({"error": {"type": "unavailable", "message": "the ask service is not wired yet"}});
    Ok(Response::builder()
        .status(503)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let sdk = aws_config::load_from_env().await;
    let _dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let _sqs = aws_sdk_sqs::Client::new(&sdk);
    run(service_fn(handle)).await
}
