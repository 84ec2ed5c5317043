//! The local stack of [`degrau_tests::stack::FullStack`], with every AWS call of
//! the functions *and* of the event source mapping (the bridge) going through a
//! recording [`degrau_awsproxy`] proxy in front of moto, and the function
//! binaries of the release profile when they are built. The WhatsApp channel's two
//! functions run beside them, with their inbound queue and a bound number. It is built from the same
//! pieces as `FullStack` (`degrau_tests::stack`'s free functions): only the
//! proxy, the binaries and the timed compactor invocations are its own.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use degrau::domain::TenantId;
use degrau::tenant::TenantConfig;
use degrau_adapters::dynamodb::DynamoStore;
use degrau_awsproxy::Running;
use degrau_bridge::{Invoke, QueueConfig};
use degrau_tests::lambda::LocalLambda;
use degrau_tests::stack::{
    drain, function_env, head_incarnation, jobs_queues, memory_event, message_event,
    put_tenant_config, send_job, tenant_event,
};
use degrau_tests::{HttpReply, StandIn, moto};
use degrau_whatsapp::PhoneNumberId;
use degrau_whatsapp::store::WhatsAppStore;
use serde::Serialize;
use serde_json::Value;

/// Which build of the function binaries runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binaries {
    /// `release` or `debug`.
    pub profile: String,
    /// The `ask` binary.
    pub ask: PathBuf,
    /// The `compactor` binary.
    pub compactor: PathBuf,
    /// The `whatsapp-webhook` binary.
    pub whatsapp_webhook: PathBuf,
    /// The `whatsapp-worker` binary.
    pub whatsapp_worker: PathBuf,
    /// A warning, e.g. a release build older than the debug one.
    pub note: Option<String>,
}

impl Binaries {
    /// `target/release/` when all four functions are built there (`cargo build
    /// --release -p ask -p compactor -p whatsapp-webhook -p whatsapp-worker`), else
    /// the debug ones.
    pub fn find() -> Binaries {
        const NAMES: [&str; 4] = ["ask", "compactor", "whatsapp-webhook", "whatsapp-worker"];
        const BUILD: &str =
            "cargo build --release -p ask -p compactor -p whatsapp-webhook -p whatsapp-worker";
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let release = NAMES.map(|name| target.join("release").join(name));
        let debug = NAMES.map(|name| target.join("debug").join(name));
        let [ask, compactor, whatsapp_webhook, whatsapp_worker] =
            if release.iter().all(|p| p.exists()) {
                release.clone()
            } else {
                debug
            };
        let binaries = |profile: &str, note: Option<String>| Binaries {
            profile: profile.into(),
            ask: ask.clone(),
            compactor: compactor.clone(),
            whatsapp_webhook: whatsapp_webhook.clone(),
            whatsapp_worker: whatsapp_worker.clone(),
            note,
        };
        if release.iter().all(|p| p.exists()) {
            let built = release.iter().filter_map(|p| modified(p)).min();
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
            let sources = ["shared", "adapters", "channels", "functions"]
                .iter()
                .filter_map(|dir| newest(&root.join(dir)))
                .max();
            let stale = matches!((built, sources), (Some(built), Some(source)) if source > built);
            binaries(
                "release",
                stale.then(|| {
                    format!(
                        "sources of the functions changed after the release binaries were built: \
                         `{BUILD}` to measure the current code"
                    )
                }),
            )
        } else {
            binaries(
                "debug",
                Some(format!(
                    "debug build: CPU time and init are far above release figures; `{BUILD}` first"
                )),
            )
        }
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of the `.rs` and `Cargo.toml` files under `dir`.
fn newest(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                || path.file_name().is_some_and(|n| n == "Cargo.toml")
            {
                newest = newest.max(modified(&path));
            }
        }
    }
    newest
}

/// Invokes the compactor for the bridge and keeps each invocation's duration.
pub struct TimedInvoke<'a> {
    lambda: &'a LocalLambda,
    /// Wall time of each invocation.
    pub durations: Mutex<Vec<Duration>>,
}

impl<'a> TimedInvoke<'a> {
    /// Wraps `lambda`.
    pub fn new(lambda: &'a LocalLambda) -> Self {
        TimedInvoke {
            lambda,
            durations: Mutex::default(),
        }
    }

    /// The durations so far.
    pub fn take(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.durations.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[async_trait]
impl Invoke for TimedInvoke<'_> {
    async fn invoke(&self, event: Value) -> Result<Value, String> {
        let started = Instant::now();
        let result = self.lambda.invoke(event).await;
        self.durations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(started.elapsed());
        result.map_err(|error| error["errorType"].to_string())
    }
}

/// Both functions behind the proxy, their table and queue, and the stand-in.
pub struct ProxiedStack {
    /// The recording proxy in front of moto.
    pub proxy: Running,
    /// The ask function.
    pub ask: LocalLambda,
    /// The compactor function.
    pub compactor: LocalLambda,
    /// The model stand-in.
    pub standin: StandIn,
    /// DynamoDB on moto, directly (set-up only: not recorded).
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// SQS through the proxy: the bridge's calls are recorded as the event source
    /// mapping's.
    pub sqs: aws_sdk_sqs::Client,
    /// The table.
    pub table: String,
    /// The jobs queue.
    pub queue: QueueConfig,
    /// Its dead-letter queue's URL.
    pub dlq_url: String,
    /// SQS on moto, directly (set-up and clean-up only).
    pub direct_sqs: aws_sdk_sqs::Client,
    /// Which binaries run.
    pub binaries: Binaries,
    /// The WhatsApp webhook function.
    pub webhook: LocalLambda,
    /// The WhatsApp worker function.
    pub worker: LocalLambda,
    /// The WhatsApp inbound queue.
    pub whatsapp_queue: QueueConfig,
    /// Its dead-letter queue's URL.
    pub whatsapp_dlq_url: String,
}

/// The WhatsApp business number the stack's webhook knows (bound to [`WHATSAPP_TENANT`]).
pub const WHATSAPP_PHONE: &str = "100000000000001";
/// The tenant of the WhatsApp number.
pub const WHATSAPP_TENANT: &str = "footprint-whatsapp";
/// The Meta app secret the stack's webhook checks deliveries against.
pub const WHATSAPP_APP_SECRET: &str = "footprint-app-secret";

impl ProxiedStack {
    /// Starts the proxy, a fresh table and queue on moto, the stand-in and both
    /// functions (`AWS_ENDPOINT_URL` = the proxy).
    pub async fn start(binaries: Binaries) -> ProxiedStack {
        let upstream = moto::endpoint();
        let proxy = degrau_awsproxy::spawn(upstream.clone()).await;
        let dynamodb = moto::dynamodb_client().await;
        let direct_sqs = moto::sqs_client().await;
        let table = moto::fresh_table(&dynamodb).await;
        let (queue_url, dlq_url) = jobs_queues(&direct_sqs, 3).await;
        let standin = StandIn::start_with(&[]);
        let (whatsapp_queue_url, whatsapp_dlq_url) = jobs_queues(&direct_sqs, 3).await;
        let env = function_env(&table, Some(&queue_url), proxy.url(), &standin.url);
        let ask = LocalLambda::start(binaries.ask.clone(), env.clone()).await;
        let with = |extra: &[(&str, &str)]| degrau_tests::with_env(&env, extra);
        let webhook = LocalLambda::start(
            binaries.whatsapp_webhook.clone(),
            with(&[
                ("WHATSAPP_QUEUE_URL", &whatsapp_queue_url),
                ("WHATSAPP_APP_SECRET", WHATSAPP_APP_SECRET),
                ("WHATSAPP_VERIFY_TOKEN", "footprint-verify-token"),
                ("PSEUDONYM_KEY", "footprint-pseudonym-secret"),
            ]),
        )
        .await;
        let worker = LocalLambda::start(
            binaries.whatsapp_worker.clone(),
            with(&[
                ("WHATSAPP_ACCESS_TOKEN", "footprint-access-token"),
                ("GRAPH_API_BASE_URL", &standin.url),
                ("WHATSAPP_DEBOUNCE_SECONDS", "0"),
            ]),
        )
        .await;
        DynamoStore::new(dynamodb.clone(), &table)
            .bind(
                &PhoneNumberId::parse(WHATSAPP_PHONE).expect("a phone number id"),
                &TenantId::parse(WHATSAPP_TENANT).expect("a tenant id"),
            )
            .await
            .expect("bind the WhatsApp number");
        let mut whatsapp_queue = QueueConfig::discover(&direct_sqs, &whatsapp_queue_url)
            .await
            .expect("queue ARN");
        whatsapp_queue.wait_time_seconds = 0;
        whatsapp_queue.retry_visibility_seconds = Some(0);
        let mut compactor = LocalLambda::start(binaries.compactor.clone(), env).await;
        compactor.set_timeout(degrau_tests::stack::COMPACTOR_TIMEOUT);
        let sqs = aws_sdk_sqs::Client::new(&moto::sdk_config_at(proxy.url()).await);
        let mut queue = QueueConfig::discover(&direct_sqs, &queue_url)
            .await
            .expect("queue ARN");
        queue.wait_time_seconds = 0;
        queue.retry_visibility_seconds = Some(0);
        ProxiedStack {
            proxy,
            ask,
            compactor,
            standin,
            dynamodb,
            sqs,
            table,
            queue,
            dlq_url,
            direct_sqs,
            binaries,
            webhook,
            worker,
            whatsapp_queue,
            whatsapp_dlq_url,
        }
    }

    /// Writes a tenant's config item (directly on moto).
    pub async fn configure(&self, tenant: &str, config: &TenantConfig) {
        put_tenant_config(&self.dynamodb, &self.table, tenant, config).await;
    }

    /// Any API call to the ask function; a failed invocation is status 0 with the
    /// error as its body.
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

    /// Sends one message.
    pub async fn post(&self, tenant: &str, contact: &str, text: &str) -> HttpReply {
        self.invoke_ask(message_event(tenant, contact, text)).await
    }

    async fn invoke_ask(&self, event: Value) -> HttpReply {
        match self.ask.invoke(event).await {
            Ok(answer) => HttpReply::from_lambda(&answer),
            Err(error) => HttpReply {
                status: 0,
                headers: serde_json::Map::new(),
                body: error.clone(),
                raw: error.to_string(),
            },
        }
    }

    /// The incarnation of a contact's head, read raw: what a job about it carries
    /// instead of its id.
    pub async fn incarnation(&self, tenant: &str, contact: &str) -> String {
        head_incarnation(&self.dynamodb, &self.table, tenant, contact).await
    }

    /// The memory view of a contact.
    pub async fn memory(&self, tenant: &str, contact: &str) -> Value {
        self.invoke_ask(memory_event(tenant, contact)).await.body
    }

    /// Runs the bridge with `invoke` until the queue is empty twice in a row;
    /// returns how many batches it delivered.
    pub async fn drain(&self, invoke: &TimedInvoke<'_>) -> usize {
        drain(&self.sqs, &self.queue, invoke).await.len()
    }

    /// The same for the WhatsApp inbound queue (`invoke`: the worker's).
    pub async fn drain_whatsapp(&self, invoke: &TimedInvoke<'_>) -> usize {
        drain(&self.sqs, &self.whatsapp_queue, invoke).await.len()
    }

    /// Deletes the table and the queues on moto (directly), which keeps a shared
    /// moto from growing run after run (it never frees what tests leave).
    pub async fn clean_up(&self) {
        let _ = self
            .dynamodb
            .delete_table()
            .table_name(&self.table)
            .send()
            .await;
        for url in [
            &self.queue.queue_url,
            &self.dlq_url,
            &self.whatsapp_queue.queue_url,
            &self.whatsapp_dlq_url,
        ] {
            let _ = self.direct_sqs.delete_queue().queue_url(url).send().await;
        }
    }

    /// Sends a job body to the queue through the proxy.
    pub async fn send_job(&self, body: &str, group: &str, dedup: &str) {
        send_job(&self.sqs, &self.queue.queue_url, body, group, dedup).await;
    }
}
