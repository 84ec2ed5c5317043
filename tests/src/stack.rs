//! The whole cycle on one machine: the real `ask` and `compactor` binaries as
//! Lambda runs them, DynamoDB and SQS FIFO on moto, the stand-in as the model, and
//! the bridge playing the SQS event source mapping. Used by the compaction tests
//! and the sawtooth benchmark.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::QueueAttributeName;
use degrau::domain::TenantId;
use degrau::store::TenantStore;
use degrau::store::dynamo::DynamoStore;
use degrau::tenant::TenantConfig;
use degrau_bridge::{BatchReport, Invoke, QueueConfig, poll_once};
use serde_json::{Value, json};

use crate::lambda::{LocalLambda, binary};
use crate::{HttpReply, StandIn, api_event, moto};

/// Invokes a [`LocalLambda`] for the bridge.
pub struct LocalInvoke<'a>(pub &'a LocalLambda);

#[async_trait]
impl Invoke for LocalInvoke<'_> {
    async fn invoke(&self, event: Value) -> Result<Value, String> {
        self.0
            .invoke(event)
            .await
            .map_err(|error| error["errorType"].to_string())
    }
}

/// Both functions, their queue and table, and the stand-in.
pub struct FullStack {
    /// The ask function.
    pub ask: LocalLambda,
    /// The compactor function.
    pub compactor: LocalLambda,
    /// The model stand-in.
    pub standin: StandIn,
    /// DynamoDB on moto.
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// SQS on moto.
    pub sqs: aws_sdk_sqs::Client,
    /// The table.
    pub table: String,
    /// The jobs queue (FIFO).
    pub queue: QueueConfig,
    /// Its dead-letter queue.
    pub dlq_url: String,
}

/// Creates a FIFO queue with a FIFO dead-letter queue after `max_receives`.
pub async fn jobs_queues(sqs: &aws_sdk_sqs::Client, max_receives: u32) -> (String, String) {
    let dlq_url = moto::fresh_fifo_queue(sqs).await;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("DLQ attributes")
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("DLQ ARN");
    let name = format!("{}.fifo", moto::unique_name("degrau-jobs"));
    let url = sqs
        .create_queue()
        .queue_name(&name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .attributes(QueueAttributeName::VisibilityTimeout, "30")
        .attributes(
            QueueAttributeName::RedrivePolicy,
            json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receives}).to_string(),
        )
        .send()
        .await
        .expect("create the jobs queue")
        .queue_url
        .expect("queue URL");
    (url, dlq_url)
}

impl FullStack {
    /// Starts everything; `standin_args` go to the stand-in (e.g. a context limit).
    pub async fn start(standin_args: &[&str]) -> FullStack {
        let dynamodb = moto::dynamodb_client().await;
        let sqs = moto::sqs_client().await;
        let table = moto::fresh_table(&dynamodb).await;
        let (queue_url, dlq_url) = jobs_queues(&sqs, 3).await;
        let standin = StandIn::start_with(standin_args);
        let common: Vec<(String, String)> = [
            ("TABLE_NAME", table.as_str()),
            ("JOBS_QUEUE_URL", queue_url.as_str()),
            ("AWS_ENDPOINT_URL", moto::endpoint().as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("ANTHROPIC_API_KEY", "offline-test-key"),
            ("ANTHROPIC_BASE_URL", standin.url.as_str()),
            ("AUTH_MODE", "dev"),
            ("RUST_LOG", "info"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let ask = LocalLambda::start(binary("ask"), common.clone()).await;
        let compactor = LocalLambda::start(binary("compactor"), common).await;
        let mut queue = QueueConfig::discover(&sqs, &queue_url)
            .await
            .expect("queue ARN");
        queue.wait_time_seconds = 0;
        queue.retry_visibility_seconds = Some(0);
        FullStack {
            ask,
            compactor,
            standin,
            dynamodb,
            sqs,
            table,
            queue,
            dlq_url,
        }
    }

    /// Writes a tenant's config item.
    pub async fn configure(&self, tenant: &str, config: &TenantConfig) {
        DynamoStore::new(self.dynamodb.clone(), self.table.clone())
            .put_tenant_config(&TenantId::parse(tenant).expect("tenant id"), config)
            .await
            .expect("tenant config");
    }

    /// Sends one message through the HTTP API.
    pub async fn post(&self, tenant: &str, contact: &str, text: &str) -> HttpReply {
        let body = json!({ "text": text }).to_string();
        self.call(
            "POST",
            &format!("/v1/contacts/{contact}/messages"),
            tenant,
            Some(&body),
        )
        .await
    }

    /// Any API call.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        tenant: &str,
        body: Option<&str>,
    ) -> HttpReply {
        let event = api_event(
            method,
            path,
            "",
            &[
                ("content-type", "application/json"),
                ("x-tenant-id", tenant),
            ],
            body,
            None,
        );
        HttpReply::from_lambda(&self.ask.invoke(event).await.expect("ask answered"))
    }

    /// The memory view of a contact.
    pub async fn memory(&self, tenant: &str, contact: &str) -> Value {
        self.call(
            "GET",
            &format!("/v1/contacts/{contact}/memory"),
            tenant,
            None,
        )
        .await
        .body
    }

    /// Runs the bridge until the queue is empty; returns the reports.
    pub async fn drain(&self) -> Vec<BatchReport> {
        let mut reports = Vec::new();
        let mut empty = 0;
        for _ in 0..50 {
            let report = poll_once(&self.sqs, &self.queue, &LocalInvoke(&self.compactor))
                .await
                .expect("bridge round");
            if report.received == 0 {
                empty += 1;
                if empty == 2 {
                    break;
                }
            } else {
                empty = 0;
                reports.push(report);
            }
        }
        reports
    }

    /// Sends a raw job body to the queue.
    pub async fn send_job(&self, body: &str, group: &str, dedup: &str) {
        self.sqs
            .send_message()
            .queue_url(&self.queue.queue_url)
            .message_body(body)
            .message_group_id(group)
            .message_deduplication_id(dedup)
            .send()
            .await
            .expect("send a job");
    }

    /// Moves a contact's last activity back by `seconds` (time passing, for sessions).
    pub async fn age_contact(&self, tenant: &str, contact: &str, seconds: i64) {
        self.dynamodb
            .update_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("T#{tenant}#C#{contact}")))
            .key("sk", AttributeValue::S("HEAD".into()))
            .update_expression("SET last_activity = last_activity - :s")
            .expression_attribute_values(":s", AttributeValue::N(seconds.to_string()))
            .send()
            .await
            .expect("age the head");
    }
}

/// The `/v1/messages` calls the stand-in received, with their bodies.
pub fn model_calls(log: &[Value]) -> Vec<&Value> {
    log.iter()
        .filter(|entry| entry.get("body").is_some())
        .collect()
}

/// True when the call was made by the compactor (summary or fact extraction).
pub fn is_compactor_call(entry: &Value) -> bool {
    entry["body"]["system"][0]["text"]
        .as_str()
        .is_some_and(|text| text.starts_with("degrau:"))
}

/// The texts of a request's messages (text blocks only), in order.
pub fn message_texts(entry: &Value) -> Vec<String> {
    entry["body"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}
