//! The proxy against moto, with the AWS SDK pointed at it: calls are forwarded
//! and recorded with DynamoDB's sizes and units; queued faults reach the SDK as
//! DynamoDB's own errors and only hit the operation they name.
//!
//! Needs moto: `bash infra/moto.sh start` and
//! `DEGRAU_TEST_AWS_ENDPOINT=$(bash infra/moto.sh url) cargo test -p degrau-awsproxy`.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, Put,
    ScalarAttributeType, TransactWriteItem, Update,
};
use degrau_awsproxy::{Call, DropPoint, Fault, Running, Summary, spawn};
use serde_json::{Value, json};

fn moto() -> String {
    match std::env::var("DEGRAU_TEST_AWS_ENDPOINT") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "DEGRAU_TEST_AWS_ENDPOINT is not set: run `bash infra/moto.sh start` and then \
             `DEGRAU_TEST_AWS_ENDPOINT=$(bash infra/moto.sh url) cargo test -p degrau-awsproxy`"
        ),
    }
}

/// SDK configuration for `endpoint`, with one attempt per call: no retry hides a
/// fault.
async fn sdk(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "proxy-test",
            "proxy-test",
            None,
            None,
            "awsproxy-tests",
        ))
        .endpoint_url(endpoint)
        .retry_config(RetryConfig::standard().with_max_attempts(1))
        .load()
        .await
}

struct Fixture {
    proxy: Running,
    /// Through the proxy.
    dynamodb: aws_sdk_dynamodb::Client,
    /// Straight to moto, to check what was really written.
    direct: aws_sdk_dynamodb::Client,
    table: String,
}

async fn fixture() -> Fixture {
    let upstream = moto();
    let proxy = spawn(upstream.clone()).await;
    let direct = aws_sdk_dynamodb::Client::new(&sdk(&upstream).await);
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk(proxy.url()).await);
    let table = format!("awsproxy-{}-{:08x}", std::process::id(), fastrand());
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .unwrap()
    };
    let string = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    direct
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .attribute_definitions(string("pk"))
        .attribute_definitions(string("sk"))
        .send()
        .await
        .unwrap();
    Fixture {
        proxy,
        dynamodb,
        direct,
        table,
    }
}

/// A pseudo-random number from the clock (no extra dependency).
fn fastrand() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    nanos ^ (std::process::id() << 16)
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

impl Fixture {
    async fn stored(
        &self,
        pk: &str,
        sk: &str,
    ) -> Option<std::collections::HashMap<String, AttributeValue>> {
        self.direct
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
    }

    fn calls(&self, operation: &str) -> Vec<Call> {
        self.proxy
            .log()
            .into_iter()
            .filter(|c| c.operation == operation)
            .collect()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[tokio::test]
async fn calls_are_forwarded_and_recorded_with_dynamodb_sizes_and_units() {
    let f = fixture().await;
    // pk "conv" (2+4) + sk "m1" (2+2) + body 2000 bytes (4+2000) + n 42 (1+2) = 2017 bytes.
    let body = "x".repeat(2000);
    f.dynamodb
        .put_item()
        .table_name(&f.table)
        .item("pk", s("conv"))
        .item("sk", s("m1"))
        .item("body", s(&body))
        .item("n", AttributeValue::N("42".into()))
        .send()
        .await
        .unwrap();
    let put = &f.calls("PutItem")[0];
    assert_eq!(put.service, "dynamodb");
    assert_eq!(put.status, 200);
    assert_eq!(put.resource.as_deref(), Some(f.table.as_str()));
    assert_eq!(put.usage.items_written, 1);
    assert_eq!(put.usage.bytes_written, 2017);
    assert!(close(put.usage.wcu, 2.0), "2017 bytes: two 1 KB units");
    assert!(f.stored("conv", "m1").await.is_some(), "forwarded to moto");

    // A second, small item; then a strongly consistent query returning both.
    f.dynamodb
        .put_item()
        .table_name(&f.table)
        .item("pk", s("conv"))
        .item("sk", s("m2"))
        .send()
        .await
        .unwrap();
    let page = f
        .dynamodb
        .query()
        .table_name(&f.table)
        .consistent_read(true)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s("conv"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.items().len(), 2, "the answer comes back unchanged");
    let query = &f.calls("Query")[0];
    assert_eq!(query.usage.items_read, 2);
    assert_eq!(query.usage.bytes_read, 2017 + 10);
    assert!(close(query.usage.rcu, 1.0), "2027 bytes in one 4 KB unit");
    assert!(!query.usage.estimated);

    // An eventually consistent GetItem costs half a unit.
    f.dynamodb
        .get_item()
        .table_name(&f.table)
        .key("pk", s("conv"))
        .key("sk", s("m1"))
        .send()
        .await
        .unwrap();
    let get = &f.calls("GetItem")[0];
    assert_eq!(get.usage.bytes_read, 2017);
    assert!(close(get.usage.rcu, 0.5));

    // A transaction: a put of 1,100 bytes and an update of the 2 KB item, read
    // back after the update to size it.
    let update = Update::builder()
        .table_name(&f.table)
        .key("pk", s("conv"))
        .key("sk", s("m1"))
        .update_expression("SET n = :n")
        .expression_attribute_values(":n", AttributeValue::N("43".into()))
        .build()
        .unwrap();
    let put = Put::builder()
        .table_name(&f.table)
        .item("pk", s("conv"))
        .item("sk", s("m3"))
        .item("body", s(&"y".repeat(1084)))
        .condition_expression("attribute_not_exists(sk)")
        .build()
        .unwrap();
    f.dynamodb
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(update).build())
        .transact_items(TransactWriteItem::builder().put(put).build())
        .send()
        .await
        .unwrap();
    let transaction = &f.calls("TransactWriteItems")[0];
    assert_eq!(transaction.status, 200);
    assert_eq!(transaction.usage.items_written, 2);
    // m3: 6 + 4 + (4 + 1084) = 1098 bytes → 2 units; m1 after the update: 2017 → 2 units.
    assert_eq!(transaction.usage.bytes_written, 2017 + 1098);
    assert!(
        close(transaction.usage.wcu, 2.0 * (2.0 + 2.0)),
        "transactions cost double"
    );
    assert!(!transaction.usage.estimated, "the update was read back");
    let n = f.stored("conv", "m1").await.unwrap()["n"].clone();
    assert_eq!(n, AttributeValue::N("43".into()));

    let summary = Summary::of(&f.proxy.log());
    assert_eq!(summary.dynamodb_calls, 5);
    assert_eq!(summary.items_written, 4);
    assert!(close(summary.wcu, 2.0 + 1.0 + 8.0));
    assert!(close(summary.rcu, 1.5));
}

#[tokio::test]
async fn a_throttling_fault_reaches_the_sdk_and_nothing_is_written() {
    let f = fixture().await;
    f.proxy
        .faults([Fault {
            service: Some("dynamodb".into()),
            operation: Some("TransactWriteItems".into()),
            status: Some(400),
            kind: Some("ProvisionedThroughputExceededException".into()),
            message: Some("slow down".into()),
            ..Fault::default()
        }])
        .unwrap();
    let put = Put::builder()
        .table_name(&f.table)
        .item("pk", s("conv"))
        .item("sk", s("throttled"))
        .build()
        .unwrap();
    let err = f
        .dynamodb
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .send()
        .await
        .unwrap_err();
    let service_error = err.as_service_error().expect("a service error");
    assert_eq!(
        service_error.code(),
        Some("ProvisionedThroughputExceededException")
    );
    assert_eq!(service_error.message(), Some("slow down"));
    assert!(
        f.stored("conv", "throttled").await.is_none(),
        "the call never reached moto"
    );
    let call = &f.calls("TransactWriteItems")[0];
    assert_eq!(call.status, 400);
    assert_eq!(
        call.error_type.as_deref(),
        Some("ProvisionedThroughputExceededException")
    );
    assert!(call.fault.is_some());
    assert_eq!(
        call.usage,
        Default::default(),
        "a refused call costs nothing"
    );
    assert!(f.proxy.pending_faults().is_empty(), "used up");
}

#[tokio::test]
async fn a_500_fault_is_an_internal_server_error_and_the_next_call_goes_through() {
    let f = fixture().await;
    f.proxy
        .faults([Fault {
            service: Some("dynamodb".into()),
            operation: Some("Query".into()),
            status: Some(500),
            kind: Some("InternalServerError".into()),
            ..Fault::default()
        }])
        .unwrap();
    let query = || {
        f.dynamodb
            .query()
            .table_name(&f.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s("conv"))
            .send()
    };
    let err = query().await.unwrap_err();
    assert_eq!(
        err.as_service_error().and_then(|e| e.code()),
        Some("InternalServerError")
    );
    assert!(query().await.is_ok(), "one fault, one call");
    let statuses: Vec<u16> = f.calls("Query").iter().map(|c| c.status).collect();
    assert_eq!(statuses, [500, 200]);
}

#[tokio::test]
async fn faults_only_hit_the_operation_they_name() {
    let f = fixture().await;
    f.proxy
        .faults([Fault {
            service: Some("dynamodb".into()),
            operation: Some("Query".into()),
            status: Some(400),
            kind: Some("ThrottlingException".into()),
            ..Fault::default()
        }])
        .unwrap();
    f.dynamodb
        .put_item()
        .table_name(&f.table)
        .item("pk", s("conv"))
        .item("sk", s("a"))
        .send()
        .await
        .unwrap();
    f.dynamodb
        .get_item()
        .table_name(&f.table)
        .key("pk", s("conv"))
        .key("sk", s("a"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        f.proxy.pending_faults().len(),
        1,
        "still waiting for a Query"
    );
    let err = f
        .dynamodb
        .query()
        .table_name(&f.table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s("conv"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err.as_service_error().and_then(|e| e.code()),
        Some("ThrottlingException")
    );
    assert!(f.proxy.pending_faults().is_empty());
}

#[tokio::test]
async fn a_delay_is_forwarded_late_and_a_drop_after_leaves_the_write_done_but_unanswered() {
    let f = fixture().await;
    f.proxy
        .faults([
            Fault {
                operation: Some("GetItem".into()),
                delay_ms: Some(300),
                ..Fault::default()
            },
            Fault {
                operation: Some("PutItem".into()),
                drop: Some(DropPoint::After),
                ..Fault::default()
            },
        ])
        .unwrap();
    let started = Instant::now();
    f.dynamodb
        .get_item()
        .table_name(&f.table)
        .key("pk", s("conv"))
        .key("sk", s("none"))
        .send()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    let result = f
        .dynamodb
        .put_item()
        .table_name(&f.table)
        .item("pk", s("conv"))
        .item("sk", s("dropped"))
        .send()
        .await;
    assert!(result.is_err(), "the answer was cut: {result:?}");
    assert!(
        f.stored("conv", "dropped").await.is_some(),
        "the write took effect upstream"
    );
    let put = &f.calls("PutItem")[0];
    assert_eq!(put.status, 200);
    assert_eq!(put.fault.as_ref().unwrap().drop, Some(DropPoint::After));

    // Dropped before forwarding: the client fails and nothing is written.
    f.proxy
        .faults([Fault {
            operation: Some("PutItem".into()),
            drop: Some(DropPoint::Before),
            ..Fault::default()
        }])
        .unwrap();
    let result = f
        .dynamodb
        .put_item()
        .table_name(&f.table)
        .item("pk", s("conv"))
        .item("sk", s("never"))
        .send()
        .await;
    assert!(result.is_err(), "the connection broke: {result:?}");
    assert!(f.stored("conv", "never").await.is_none());
}

#[tokio::test]
async fn sqs_calls_are_recorded_with_their_messages() {
    let upstream = moto();
    let proxy = spawn(upstream).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk(proxy.url()).await);
    let name = format!("awsproxy-{}-{:08x}.fifo", std::process::id(), fastrand());
    let url = sqs
        .create_queue()
        .queue_name(&name)
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    sqs.send_message()
        .queue_url(&url)
        .message_body("job")
        .message_group_id("g")
        .message_deduplication_id("d1")
        .send()
        .await
        .unwrap();
    let received = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap();
    assert_eq!(received.messages().len(), 1);
    let log = proxy.log();
    let send = log.iter().find(|c| c.operation == "SendMessage").unwrap();
    assert_eq!(send.service, "sqs");
    assert_eq!(send.messages, 1);
    assert_eq!(send.sqs_billed_requests, 1);
    assert_eq!(send.resource.as_deref(), Some(name.as_str()));
    let receive = log
        .iter()
        .find(|c| c.operation == "ReceiveMessage")
        .unwrap();
    assert_eq!(receive.messages, 1);
    let summary = Summary::of(&log);
    assert_eq!(summary.sqs_calls, 3);
    assert_eq!(summary.sqs_message_calls, 2, "CreateQueue moved no message");
}

#[tokio::test]
async fn the_binary_serves_the_control_endpoints() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_degrau-awsproxy"))
        .args(["--port", "0", "--upstream", &moto()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.starts_with("degrau-awsproxy listening on http://127.0.0.1:"),
        "{line}"
    );
    let url = line.split_whitespace().nth(3).unwrap().to_owned();
    let http = reqwest::Client::new();

    let bad = http
        .post(format!("{url}/proxy/faults"))
        .body(r#"[{"operation": "Query", "status": 200}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let queued: Value = http
        .post(format!("{url}/proxy/faults"))
        .body(
            json!([{"service": "dynamodb", "operation": "ListTables", "status": 503,
                    "type": "ServiceUnavailable", "message": "later"}])
            .to_string(),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(queued, json!({"queued": 1, "pending": 1}));
    let pending: Value = http
        .get(format!("{url}/proxy/faults"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pending[0]["operation"], "ListTables");

    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk(&url).await);
    let err = dynamodb.list_tables().send().await.unwrap_err();
    assert_eq!(
        err.as_service_error().and_then(|e| e.code()),
        Some("ServiceUnavailable")
    );
    dynamodb.list_tables().send().await.unwrap();

    let log: Vec<Call> = http
        .get(format!("{url}/proxy/log"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].status, 503);
    assert_eq!(log[1].status, 200);
    let later: Vec<Call> = http
        .get(format!("{url}/proxy/log?since={}", log[1].seq))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    let summary: Summary = http
        .get(format!("{url}/proxy/summary"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(summary.errors, 1);
    assert_eq!(summary.faulted, 1);
    http.post(format!("{url}/proxy/reset"))
        .send()
        .await
        .unwrap();
    let empty: Vec<Call> = http
        .get(format!("{url}/proxy/log"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(empty.is_empty());
    let _ = child.kill();
    let _ = child.wait();
}
