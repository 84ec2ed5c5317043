//! The whole cycle on one machine: the real `ask` and `compactor` binaries as
//! Lambda runs them, DynamoDB and SQS FIFO on moto, the stand-in as the model, and
//! the bridge playing the SQS event source mapping. Used by the end-to-end tests
//! and the benchmarks; the pieces any such stack needs (the functions'
//! environment, the API events, draining the queue, a tenant's config, raw reads of
//! the head) are free functions here, so the benchmark's proxied stack uses the same
//! ones.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::QueueAttributeName;
use degrau::domain::TenantId;
use degrau::store::ContactKey;
use degrau::tenant::{TenantConfig, TenantStore};
use degrau_adapters::dynamodb::DynamoStore;
use degrau_adapters::dynamodb::keys::{HEAD_SK, MESSAGE_PREFIX, contact_pk};
use degrau_bridge::{BatchReport, Invoke, QueueConfig, poll_once};
use serde_json::{Value, json};

use crate::lambda::{LocalLambda, binary};
use crate::serial::{OneAtATime, one_at_a_time};
use crate::{HttpReply, StandIn, api_event, moto};

/// The compactor's function timeout in `template.yaml`.
pub const COMPACTOR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

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
    /// The functions' environment, to start another function of the same stack
    /// ([`FullStack::start_function`]).
    pub env: Vec<(String, String)>,
    /// The forwarder that serialises the functions' DynamoDB calls, when no other
    /// endpoint was given (see [`crate::serial::OneAtATime`]).
    _serial: Option<OneAtATime>,
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

/// The variable that picks the model provider of the end-to-end stacks:
/// `anthropic` (unset) or `bedrock`. `./dev.sh test` runs the main ask and
/// compaction modules a second time with `bedrock`.
pub const PROVIDER_VAR: &str = "DEGRAU_TEST_MODEL_PROVIDER";

/// Every variable [`Provider::env`] may set.
const PROVIDER_VARS: [&str; 4] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "MODEL_PROVIDER",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
];

/// The model provider of this run's stacks ([`PROVIDER_VAR`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// The Messages API: the stand-in at `ANTHROPIC_BASE_URL`, a dummy key.
    Anthropic,
    /// Bedrock Runtime: the stand-in at `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, calls
    /// signed with the stack's dummy AWS credentials, no API key.
    Bedrock,
}

impl Provider {
    /// This run's provider; anything but `bedrock` is the Messages API.
    pub fn from_env() -> Provider {
        match std::env::var(PROVIDER_VAR).as_deref() {
            Ok("bedrock") => Provider::Bedrock,
            _ => Provider::Anthropic,
        }
    }

    /// The functions' environment that selects this provider, with the stand-in at
    /// `standin_url` as the model.
    pub fn env(self, standin_url: &str) -> Vec<(String, String)> {
        let pairs = match self {
            Provider::Anthropic => [
                ("ANTHROPIC_API_KEY", "offline-test-key".to_owned()),
                ("ANTHROPIC_BASE_URL", standin_url.to_owned()),
            ],
            Provider::Bedrock => [
                ("MODEL_PROVIDER", "bedrock".to_owned()),
                ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", standin_url.to_owned()),
            ],
        };
        pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

/// The environment of both functions on a local stack: the table (and the jobs
/// queue, when there is one), every AWS service at `aws_endpoint` (moto, or a proxy
/// in front of it), the stand-in at `standin_url` as the model (the Messages API
/// with a dummy key, or Bedrock Runtime: [`Provider::from_env`]), dev auth (the
/// tenant in `X-Tenant-Id`) and info logs.
pub fn function_env(
    table: &str,
    jobs_queue_url: Option<&str>,
    aws_endpoint: &str,
    standin_url: &str,
) -> Vec<(String, String)> {
    let mut env = vec![("TABLE_NAME", table)];
    env.extend(jobs_queue_url.map(|url| ("JOBS_QUEUE_URL", url)));
    env.extend([
        ("AWS_ENDPOINT_URL", aws_endpoint),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AUTH_MODE", "dev"),
        ("RUST_LOG", "info"),
    ]);
    let mut env: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    env.extend(Provider::from_env().env(standin_url));
    env
}

/// An API Gateway event for `ask` from `tenant` (dev auth), with a JSON body.
pub fn tenant_event(method: &str, path: &str, tenant: &str, body: Option<&str>) -> Value {
    api_event(
        method,
        path,
        "",
        &[
            ("content-type", "application/json"),
            ("x-tenant-id", tenant),
        ],
        body,
        None,
    )
}

/// The event of one message from `contact` through the HTTP API.
pub fn message_event(tenant: &str, contact: &str, text: &str) -> Value {
    let body = json!({ "text": text }).to_string();
    tenant_event(
        "POST",
        &format!("/v1/contacts/{contact}/messages"),
        tenant,
        Some(&body),
    )
}

/// The event of a contact's memory view.
pub fn memory_event(tenant: &str, contact: &str) -> Value {
    tenant_event(
        "GET",
        &format!("/v1/contacts/{contact}/memory"),
        tenant,
        None,
    )
}

/// Runs the bridge with `invoke` until the queue is empty twice in a row (at most
/// 50 polls); returns the reports of the batches it delivered.
pub async fn drain(
    sqs: &aws_sdk_sqs::Client,
    queue: &QueueConfig,
    invoke: &dyn Invoke,
) -> Vec<BatchReport> {
    let mut reports = Vec::new();
    let mut empty = 0;
    for _ in 0..50 {
        let report = poll_once(sqs, queue, invoke).await.expect("bridge round");
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
pub async fn send_job(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    body: &str,
    group: &str,
    dedup: &str,
) {
    sqs.send_message()
        .queue_url(queue_url)
        .message_body(body)
        .message_group_id(group)
        .message_deduplication_id(dedup)
        .send()
        .await
        .expect("send a job");
}

/// Writes a tenant's config item.
pub async fn put_tenant_config(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    tenant: &str,
    config: &TenantConfig,
) {
    DynamoStore::new(dynamodb.clone(), table)
        .put_tenant_config(&TenantId::parse(tenant).expect("tenant id"), config)
        .await
        .expect("tenant config");
}

/// The key of a contact's head, as the DynamoDB adapter lays it out.
fn head_key(tenant: &str, contact: &str) -> (AttributeValue, AttributeValue) {
    let key = ContactKey {
        tenant: TenantId::parse(tenant).expect("tenant id"),
        contact: degrau::domain::ContactId::parse(contact).expect("contact id"),
    };
    (
        AttributeValue::S(contact_pk(&key)),
        AttributeValue::S(HEAD_SK.into()),
    )
}

/// The incarnation of a contact's head, read raw: what a job about the contact
/// carries instead of its id. Panics when there is no head or it has none.
pub async fn head_incarnation(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    tenant: &str,
    contact: &str,
) -> String {
    let (pk, sk) = head_key(tenant, contact);
    let head = dynamodb
        .get_item()
        .table_name(table)
        .consistent_read(true)
        .key("pk", pk)
        .key("sk", sk)
        .send()
        .await
        .expect("read the head")
        .item
        .unwrap_or_default();
    let incarnation = attr_s(&head, "incarnation");
    assert!(!incarnation.is_empty(), "the head has no incarnation");
    incarnation
}

/// How [`FullStack::start_with`] starts the stack; the default is [`FullStack::start`]'s.
#[derive(Debug, Clone, Default)]
pub struct StackOptions<'a> {
    /// Arguments of the stand-in (`--context-limit N`, ...).
    pub standin_args: &'a [&'a str],
    /// Extra environment of both functions; a name given here replaces the default.
    pub env: Vec<(String, String)>,
    /// The endpoint both functions reach DynamoDB at (`AWS_ENDPOINT_URL_DYNAMODB`),
    /// e.g. a fault-injecting proxy in front of moto; `None` is moto itself, through
    /// a forwarder that passes one call at a time (moto's transactions are not safe
    /// under concurrency; DynamoDB's are).
    pub dynamodb_endpoint: Option<String>,
    /// How many ask instances serve concurrent invocations (0 counts as 1).
    pub ask_instances: usize,
    /// The model provider of this stack; `None` is this run's
    /// ([`Provider::from_env`]).
    pub provider: Option<Provider>,
    /// The moto server of this stack; `None` is the shared one
    /// ([`moto::ENDPOINT_VAR`]). A long benchmark gives each run its own, so that
    /// moto's memory goes away with the run.
    pub moto_endpoint: Option<String>,
}

impl FullStack {
    /// Starts everything; `standin_args` go to the stand-in (e.g. a context limit).
    pub async fn start(standin_args: &[&str]) -> FullStack {
        Self::start_with(&StackOptions {
            standin_args,
            ..StackOptions::default()
        })
        .await
    }

    /// Like [`FullStack::start`] with the [`StackOptions`]: extra environment for
    /// both functions, several ask instances, or DynamoDB reached through another
    /// endpoint (a fault-injecting proxy) while the test's own clients read moto.
    pub async fn start_with(options: &StackOptions<'_>) -> FullStack {
        let moto_url = options.moto_endpoint.clone().unwrap_or_else(moto::endpoint);
        let config = moto::sdk_config_at(&moto_url).await;
        let dynamodb = aws_sdk_dynamodb::Client::new(&config);
        let sqs = aws_sdk_sqs::Client::new(&config);
        let table = moto::fresh_table(&dynamodb).await;
        let (queue_url, dlq_url) = jobs_queues(&sqs, 3).await;
        let standin = StandIn::start_with(options.standin_args);
        let mut common = function_env(&table, Some(&queue_url), &moto_url, &standin.url);
        let serial = match &options.dynamodb_endpoint {
            Some(_) => None,
            None => Some(one_at_a_time(&moto_url).await),
        };
        let endpoint = options
            .dynamodb_endpoint
            .clone()
            .or_else(|| serial.as_ref().map(|s| s.url().to_owned()));
        if let Some(endpoint) = endpoint {
            common.push(("AWS_ENDPOINT_URL_DYNAMODB".to_owned(), endpoint));
        }
        if let Some(provider) = options.provider {
            common.retain(|(k, _)| !PROVIDER_VARS.contains(&k.as_str()));
            common.extend(provider.env(&standin.url));
        }
        for (name, value) in &options.env {
            common.retain(|(k, _)| k != name);
            common.push((name.clone(), value.clone()));
        }
        let ask = LocalLambda::start_instances(
            binary("ask"),
            common.clone(),
            options.ask_instances.max(1),
        )
        .await;
        let mut compactor = LocalLambda::start(binary("compactor"), common.clone()).await;
        // The template's: a batch's records start only while a job budget is left.
        compactor.set_timeout(COMPACTOR_TIMEOUT);
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
            env: common,
            _serial: serial,
        }
    }

    /// Starts another function binary of the workspace (`ask-stream`) with the
    /// stack's environment and `extra` after it.
    pub async fn start_function(&self, name: &str, extra: &[(&str, &str)]) -> LocalLambda {
        LocalLambda::start(binary(name), crate::with_env(&self.env, extra)).await
    }

    /// Any API call, with extra headers (an `Idempotency-Key`) and a query string.
    pub async fn call_with(
        &self,
        method: &str,
        path: &str,
        query: &str,
        tenant: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> HttpReply {
        let mut all = vec![
            ("content-type", "application/json"),
            ("x-tenant-id", tenant),
        ];
        all.extend_from_slice(headers);
        let event = api_event(method, path, query, &all, body, None);
        let response = self.ask.invoke(event.clone()).await.expect("ask answered");
        HttpReply::from_api(&event, &response)
    }

    /// Writes a tenant's config item.
    pub async fn configure(&self, tenant: &str, config: &TenantConfig) {
        put_tenant_config(&self.dynamodb, &self.table, tenant, config).await;
    }

    /// Sends one message through the HTTP API.
    pub async fn post(&self, tenant: &str, contact: &str, text: &str) -> HttpReply {
        self.invoke_ask(message_event(tenant, contact, text)).await
    }

    /// Any API call.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        tenant: &str,
        body: Option<&str>,
    ) -> HttpReply {
        self.invoke_ask(tenant_event(method, path, tenant, body))
            .await
    }

    /// The memory view of a contact.
    pub async fn memory(&self, tenant: &str, contact: &str) -> Value {
        self.invoke_ask(memory_event(tenant, contact)).await.body
    }

    async fn invoke_ask(&self, event: Value) -> HttpReply {
        let response = self.ask.invoke(event.clone()).await.expect("ask answered");
        HttpReply::from_api(&event, &response)
    }

    /// Runs the bridge until the queue is empty; returns the reports.
    pub async fn drain(&self) -> Vec<BatchReport> {
        drain(&self.sqs, &self.queue, &LocalInvoke(&self.compactor)).await
    }

    /// Sends a raw job body to the queue.
    pub async fn send_job(&self, body: &str, group: &str, dedup: &str) {
        send_job(&self.sqs, &self.queue.queue_url, body, group, dedup).await;
    }

    /// Moves a contact's last activity back by `seconds` (time passing, for
    /// sessions), and the start of its life with it (`born_at`: what a session
    /// closed since must end after).
    pub async fn age_contact(&self, tenant: &str, contact: &str, seconds: i64) {
        self.dynamodb
            .update_item()
            .table_name(&self.table)
            .key("pk", head_key(tenant, contact).0)
            .key("sk", head_key(tenant, contact).1)
            .update_expression("SET last_activity = last_activity - :s, born_at = born_at - :s")
            .expression_attribute_values(":s", AttributeValue::N(seconds.to_string()))
            .send()
            .await
            .expect("age the head");
    }

    /// Like [`FullStack::age_contact`], and moves the head's sweep index entry
    /// (`sweep_sk`, when it is due) back with it, as if the time had passed since
    /// the round. The head must be in the index.
    pub async fn age_indexed_contact(&self, tenant: &str, contact: &str, seconds: i64) {
        self.dynamodb
            .update_item()
            .table_name(&self.table)
            .key("pk", head_key(tenant, contact).0)
            .key("sk", head_key(tenant, contact).1)
            .update_expression(
                "SET last_activity = last_activity - :s, sweep_sk = sweep_sk - :s, \
                 born_at = born_at - :s",
            )
            .condition_expression("attribute_exists(sweep_sk)")
            .expression_attribute_values(":s", AttributeValue::N(seconds.to_string()))
            .send()
            .await
            .expect("age the head and its sweep index entry");
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

/// One item as DynamoDB holds it.
pub type RawItem = std::collections::HashMap<String, AttributeValue>;

/// A message item read raw from the table.
#[derive(Debug, Clone, PartialEq)]
pub struct RawMessage {
    /// Session number.
    pub session: u64,
    /// Sequence number within the session.
    pub seq: u64,
    /// `user` or `assistant`.
    pub role: String,
    /// The content blocks (the stored JSON, parsed).
    pub content: Value,
}

impl RawMessage {
    /// The text of its text blocks, joined.
    pub fn text(&self) -> String {
        self.content
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("")
    }

    /// True for a user message made only of text (where a round starts).
    pub fn is_user_text(&self) -> bool {
        self.role == "user"
            && self
                .content
                .as_array()
                .is_some_and(|blocks| blocks.iter().all(|b| b["type"] == "text"))
    }
}

/// The string attribute `name` of a raw item ("" when absent).
pub fn attr_s(item: &RawItem, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// The number attribute `name` of a raw item (0 when absent).
pub fn attr_n(item: &RawItem, name: &str) -> u64 {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl FullStack {
    /// Every item of a contact's partition (`pk = T#{tenant}#C#{contact}`), raw and
    /// sorted by `sk`: one strongly consistent Query, paginated.
    pub async fn contact_items(&self, tenant: &str, contact: &str) -> Vec<RawItem> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", head_key(tenant, contact).0)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("query a contact's items");
            items.extend(page.items().iter().cloned());
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        items.sort_by_key(|item| attr_s(item, "sk"));
        items
    }

    /// A contact's message items, in (session, seq) order.
    pub async fn stored_messages(&self, tenant: &str, contact: &str) -> Vec<RawMessage> {
        let mut messages: Vec<RawMessage> = self
            .contact_items(tenant, contact)
            .await
            .iter()
            .filter(|item| attr_s(item, "sk").starts_with(MESSAGE_PREFIX))
            .map(|item| RawMessage {
                session: attr_n(item, "session"),
                seq: attr_n(item, "seq"),
                role: attr_s(item, "role"),
                content: serde_json::from_str(&attr_s(item, "content")).unwrap_or(Value::Null),
            })
            .collect();
        messages.sort_by_key(|m| (m.session, m.seq));
        messages
    }

    /// A contact's head item, raw, if there is one.
    pub async fn raw_head(&self, tenant: &str, contact: &str) -> Option<RawItem> {
        self.contact_items(tenant, contact)
            .await
            .into_iter()
            .find(|item| attr_s(item, "sk") == HEAD_SK)
    }

    /// The incarnation of a contact's head, read raw: what a job about the
    /// contact carries instead of its id. Panics when there is no head or it has
    /// none.
    pub async fn incarnation(&self, tenant: &str, contact: &str) -> String {
        head_incarnation(&self.dynamodb, &self.table, tenant, contact).await
    }
}
