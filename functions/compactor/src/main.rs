//! The `compactor` Lambda: SQS FIFO consumer for compaction steps and fact extraction.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, run, service_fn};

async fn handle(_event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
    Ok(SqsBatchResponse::default())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let sdk = aws_config::load_from_env().await;
    let _dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    run(service_fn(handle)).await
}
