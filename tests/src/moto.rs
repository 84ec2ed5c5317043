//! Connecting the integration tests to the local moto server: SDK clients for its
//! endpoint, and a fresh table (or queue) per test so tests never share state.
//!
//! The endpoint comes from `DEGRAU_TEST_AWS_ENDPOINT`, which `./dev.sh test` sets
//! after starting moto (`infra/moto.sh start`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TableStatus, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;

/// The variable holding the moto endpoint, e.g. `http://127.0.0.1:5005`.
pub const ENDPOINT_VAR: &str = "DEGRAU_TEST_AWS_ENDPOINT";

/// The moto endpoint; panics with directions when it is not set.
pub fn endpoint() -> String {
    match std::env::var(ENDPOINT_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "{ENDPOINT_VAR} is not set: these tests need the local moto server. Run \
             `./dev.sh test`, or `bash infra/setup.sh && bash infra/moto.sh start` and then \
             `{ENDPOINT_VAR}=$(bash infra/moto.sh url) cargo test ...`"
        ),
    }
}

/// SDK configuration for moto: region us-east-1 and dummy credentials.
pub async fn sdk_config() -> SdkConfig {
    sdk_config_at(&endpoint()).await
}

/// [`sdk_config`] for the moto server at `endpoint` (a benchmark's own moto).
pub async fn sdk_config_at(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "degrau-test",
            "degrau-test",
            None,
            None,
            "degrau-tests",
        ))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// A DynamoDB client talking to moto.
pub async fn dynamodb_client() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&sdk_config().await)
}

/// An SQS client talking to moto.
pub async fn sqs_client() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk_config().await)
}

/// A name no other test of this or a concurrent run uses.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}-{:08x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        fastrand::u32(..)
    )
}

/// Creates a new, uniquely named table with degrau's schema (`pk`/`sk` strings,
/// on-demand, TTL on `expires_at`, the sparse sweep index `by-activity` on
/// `sweep_pk`/`sweep_sk` projecting `session`, the sparse tenant index `by-tenant`,
/// and the sparse, keys-only `by-incarnation` index, as in `template.yaml`) and returns its name.
pub async fn fresh_table(client: &aws_sdk_dynamodb::Client) -> String {
    let table = unique_name("degrau-test");
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema element")
    };
    let attribute = |name: &str, kind| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(kind)
            .build()
            .expect("attribute definition")
    };
    let sweep_index = GlobalSecondaryIndex::builder()
        .index_name(degrau_adapters::dynamodb::SWEEP_INDEX)
        .key_schema(key("sweep_pk", KeyType::Hash))
        .key_schema(key("sweep_sk", KeyType::Range))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::Include)
                .non_key_attributes("session")
                .build(),
        )
        .build()
        .expect("sweep index");
    let incarnation_index = GlobalSecondaryIndex::builder()
        .index_name(degrau_adapters::dynamodb::INCARNATION_INDEX)
        .key_schema(key("incarnation", KeyType::Hash))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .expect("incarnation index");
    let tenant_index = GlobalSecondaryIndex::builder()
        .index_name(degrau_adapters::dynamodb::TENANT_INDEX)
        .key_schema(key("tenant_pk", KeyType::Hash))
        .key_schema(key("tenant_sk", KeyType::Range))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::Include)
                .non_key_attributes("session")
                .non_key_attributes("last_seq")
                .non_key_attributes("last_activity")
                .non_key_attributes("expires_at")
                .build(),
        )
        .build()
        .expect("tenant index");
    client
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .attribute_definitions(attribute("pk", ScalarAttributeType::S))
        .attribute_definitions(attribute("sk", ScalarAttributeType::S))
        .attribute_definitions(attribute("sweep_pk", ScalarAttributeType::S))
        .attribute_definitions(attribute("sweep_sk", ScalarAttributeType::N))
        .attribute_definitions(attribute("incarnation", ScalarAttributeType::S))
        .attribute_definitions(attribute("tenant_pk", ScalarAttributeType::S))
        .attribute_definitions(attribute("tenant_sk", ScalarAttributeType::N))
        .global_secondary_indexes(sweep_index)
        .global_secondary_indexes(tenant_index)
        .global_secondary_indexes(incarnation_index)
        .send()
        .await
        .unwrap_or_else(|err| panic!("create table {table}: {err:?}"));
    // moto creates tables active at once; real DynamoDB takes a few seconds.
    for _ in 0..100 {
        let described = client
            .describe_table()
            .table_name(&table)
            .send()
            .await
            .unwrap_or_else(|err| panic!("describe table {table}: {err:?}"));
        if described.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
        .update_time_to_live()
        .table_name(&table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name("expires_at")
                .build()
                .expect("ttl specification"),
        )
        .send()
        .await
        .unwrap_or_else(|err| panic!("enable TTL on {table}: {err:?}"));
    table
}

/// Creates a new, uniquely named FIFO queue (content-based de-duplication off, as
/// the jobs queue) and returns its URL.
pub async fn fresh_fifo_queue(client: &aws_sdk_sqs::Client) -> String {
    let name = format!("{}.fifo", unique_name("degrau-test"));
    client
        .create_queue()
        .queue_name(&name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await
        .unwrap_or_else(|err| panic!("create queue {name}: {err:?}"))
        .queue_url
        .unwrap_or_else(|| panic!("create queue {name}: no URL in the answer"))
}
