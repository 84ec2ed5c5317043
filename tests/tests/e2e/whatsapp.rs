//! The WhatsApp channel through the real `whatsapp-webhook` and `whatsapp-worker`
//! binaries, on moto, with the stand-in as both the model and the Graph API, and
//! the bridge feeding the inbound FIFO queue to the worker. Deliveries are signed
//! here by an HMAC-SHA256 of this file's own (RFC 2104 over `sha2`), never by the
//! code under test.

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::QueueAttributeName;
use degrau::domain::{ContactId, TenantId};
use degrau::store::ContactKey;
use degrau::tenant::TenantConfig;
use degrau_adapters::dynamodb::DynamoStore;
use degrau_adapters::dynamodb::keys::contact_pk;
use degrau_bridge::QueueConfig;
use degrau_tests::lambda::{LocalLambda, binary};
use degrau_tests::serial::{OneAtATime, one_at_a_time};
use degrau_tests::stack::{
    LocalInvoke, drain, function_env, jobs_queues, put_tenant_config, tenant_event,
};
use degrau_tests::{HttpReply, StandIn, api_event, moto};
use degrau_whatsapp::PhoneNumberId;
use degrau_whatsapp::store::WhatsAppStore;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::ClockOffset;

const APP_SECRET: &str = "e2e-app-secret";
const VERIFY_TOKEN: &str = "e2e-verify-token";
pub(crate) const PSEUDONYM_SECRET: &str = "e2e-pseudonym-secret";
pub(crate) const PHONE: &str = "100000000000001";
pub(crate) const TENANT: &str = "barber";

/// In [`Channel::start_with`]'s `worker_env`: the stand-in's URL, once started.
pub(crate) const STANDIN_URL: &str = "<the stand-in's URL>";

/// HMAC-SHA256 (RFC 2104), written out: `H((K ^ opad) || H((K ^ ipad) || m))`.
pub(crate) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

pub(crate) fn signature(body: &str) -> String {
    format!(
        "sha256={}",
        hex::encode(hmac_sha256(APP_SECRET.as_bytes(), body.as_bytes()))
    )
}

#[test]
fn the_independent_hmac_matches_rfc_4231() {
    // RFC 4231, test case 2.
    assert_eq!(
        hex::encode(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

/// A delivery of text messages `(id, text)` from `from` to `phone`.
pub(crate) fn delivery(phone: &str, from: &str, messages: &[(&str, &str)]) -> String {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(id, text)| {
            json!({"from": from, "id": id, "timestamp": "1800000000", "type": "text",
                   "text": {"body": text}})
        })
        .collect();
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550009999", "phone_number_id": phone},
                  "contacts": [{"profile": {"name": "Ana"}, "wa_id": from}],
                  "messages": messages}}]}]})
    .to_string()
}

/// The webhook, the worker and `ask` (for erasure) on one table and queue.
pub(crate) struct Channel {
    pub(crate) webhook: LocalLambda,
    pub(crate) worker: LocalLambda,
    pub(crate) ask: LocalLambda,
    pub(crate) standin: StandIn,
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) table: String,
    pub(crate) queue: QueueConfig,
    pub(crate) dlq_url: String,
    /// The three functions' common environment (to start another beside them).
    pub(crate) env: Vec<(String, String)>,
    _serial: OneAtATime,
}

impl Channel {
    pub(crate) async fn start() -> Channel {
        Channel::start_with(&[]).await
    }

    /// The channel with `worker_env` added to the worker's environment only.
    pub(crate) async fn start_with(worker_env: &[(&str, &str)]) -> Channel {
        Channel::start_full(&[], worker_env).await
    }

    /// The channel with `env` added to every function's environment and
    /// `worker_env` to the worker's.
    pub(crate) async fn start_full(env: &[(&str, &str)], worker_env: &[(&str, &str)]) -> Channel {
        let moto_url = moto::endpoint();
        let config = moto::sdk_config_at(&moto_url).await;
        let dynamodb = aws_sdk_dynamodb::Client::new(&config);
        let sqs = aws_sdk_sqs::Client::new(&config);
        let table = moto::fresh_table(&dynamodb).await;
        let (queue_url, dlq_url) = jobs_queues(&sqs, 3).await;
        let standin = StandIn::start();
        let serial = one_at_a_time(&moto_url).await;
        let mut common = function_env(&table, None, &moto_url, &standin.url);
        common.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), serial.url().to_owned()));
        let common = degrau_tests::with_env(&common, env);
        let with = |extra: &[(&str, &str)]| degrau_tests::with_env(&common, extra);
        let webhook = LocalLambda::start(
            binary("whatsapp-webhook"),
            with(&[
                ("WHATSAPP_QUEUE_URL", &queue_url),
                ("WHATSAPP_APP_SECRET", APP_SECRET),
                ("WHATSAPP_VERIFY_TOKEN", VERIFY_TOKEN),
                ("PSEUDONYM_KEY", PSEUDONYM_SECRET),
            ]),
        )
        .await;
        let mut worker_vars = vec![
            ("WHATSAPP_ACCESS_TOKEN", "e2e-access-token"),
            ("GRAPH_API_BASE_URL", standin.url.as_str()),
            ("WHATSAPP_DEBOUNCE_SECONDS", "0"),
            ("WHATSAPP_QUEUE_URL", queue_url.as_str()),
            ("WHATSAPP_MAX_RECEIVES", "3"),
        ];
        // A value of `STANDIN_URL` in `worker_env` stands for this stand-in's URL.
        let worker_env = worker_env.iter().map(|(name, value)| match *value {
            STANDIN_URL => (*name, standin.url.as_str()),
            _ => (*name, *value),
        });
        worker_vars.extend(worker_env);
        let worker = LocalLambda::start(binary("whatsapp-worker"), with(&worker_vars)).await;
        let ask = LocalLambda::start(binary("ask"), common.clone()).await;
        let mut queue = QueueConfig::discover(&sqs, &queue_url)
            .await
            .expect("queue ARN");
        queue.wait_time_seconds = 0;
        queue.retry_visibility_seconds = Some(0);
        DynamoStore::new(dynamodb.clone(), &table)
            .bind(
                &PhoneNumberId::parse(PHONE).unwrap(),
                &TenantId::parse(TENANT).unwrap(),
            )
            .await
            .unwrap();
        Channel {
            webhook,
            worker,
            ask,
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

    pub(crate) async fn post(&self, body: &str, signature: Option<&str>) -> HttpReply {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend(signature.map(|s| ("x-hub-signature-256", s)));
        let event = api_event("POST", "/whatsapp/webhook", "", &headers, Some(body), None);
        HttpReply::from_lambda(&self.webhook.invoke(event).await.unwrap())
    }

    pub(crate) async fn deliver(&self, body: &str) -> HttpReply {
        self.post(body, Some(&signature(body))).await
    }

    /// Feeds the queue to the worker until it is empty; panics on a failed record.
    pub(crate) async fn work(&self) {
        for report in drain(&self.sqs, &self.queue, &LocalInvoke(&self.worker)).await {
            assert_eq!(report.failed, 0, "{report:?}\n{:?}", self.worker.output());
        }
    }

    pub(crate) async fn queued(&self) -> u64 {
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.queue.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap();
        attributes
            .attributes()
            .unwrap()
            .values()
            .map(|v| v.parse::<u64>().unwrap())
            .sum()
    }

    /// The sort keys of a contact's items.
    pub(crate) async fn contact_items(&self, contact: &str) -> Vec<String> {
        let key = ContactKey {
            tenant: TenantId::parse(TENANT).unwrap(),
            contact: ContactId::parse(contact).unwrap(),
        };
        self.dynamodb
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(contact_pk(&key)))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .items()
            .iter()
            .filter_map(|item| item.get("sk")?.as_s().ok().cloned())
            .collect()
    }

    /// The bodies of the messages in the inbound queue, left in it.
    pub(crate) async fn queue_bodies(&self) -> Vec<String> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.queue.queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .send()
            .await
            .unwrap();
        received
            .messages()
            .iter()
            .filter_map(|m| m.body().map(str::to_owned))
            .collect()
    }

    /// The messages in the dead-letter queue, left in it.
    pub(crate) async fn dead_letters(&self) -> Vec<String> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.dlq_url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .send()
            .await
            .unwrap();
        received
            .messages()
            .iter()
            .filter_map(|m| m.body().map(str::to_owned))
            .collect()
    }

    pub(crate) async fn sent(&self) -> Vec<Value> {
        reqwest::get(format!("{}/stand-in/graph/sent", self.standin.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Queues Graph API faults; answers how many are queued.
    pub(crate) async fn graph_faults(&self, faults: Value) -> u64 {
        let queued: Value = reqwest::Client::new()
            .post(format!("{}/stand-in/graph/faults", self.standin.url))
            .json(&faults)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        queued["queued"].as_u64().unwrap()
    }

    /// The contact's conversation as `ask` answers it: `(role, text)` of every
    /// message of every session, oldest first.
    pub(crate) async fn transcript(&self, contact: &str) -> Vec<(String, String)> {
        let event = api_event(
            "GET",
            &format!("/v1/contacts/{contact}/messages"),
            "session=all",
            &[("x-tenant-id", TENANT)],
            None,
            None,
        );
        let reply = HttpReply::from_api(&event, &self.ask.invoke(event.clone()).await.unwrap());
        assert_eq!(reply.status, 200, "{}", reply.raw);
        reply.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let text = m["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("");
                (m["role"].as_str().unwrap().to_owned(), text)
            })
            .collect()
    }

    /// Writes the tenant's `whatsapp` settings.
    pub(crate) async fn whatsapp_settings(&self, settings: Value) {
        put_tenant_config(
            &self.dynamodb,
            &self.table,
            TENANT,
            &TenantConfig {
                whatsapp: Some(serde_json::from_value(settings).unwrap()),
                ..TenantConfig::default()
            },
        )
        .await;
    }

    /// Queues model faults (a hang, an error) on the stand-in.
    pub(crate) async fn model_faults(&self, faults: Value) {
        let reply = reqwest::Client::new()
            .post(format!("{}/stand-in/faults", self.standin.url))
            .json(&faults)
            .send()
            .await
            .unwrap();
        assert!(reply.status().is_success(), "{reply:?}");
    }

    /// The sum of the worker's metric `name` over the EMF lines it printed.
    pub(crate) fn worker_metric(&self, name: &str) -> u64 {
        self.worker
            .output()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|event| event[name].as_f64())
            .sum::<f64>() as u64
    }

    /// How many model calls the stand-in received.
    pub(crate) async fn model_calls(&self) -> usize {
        self.standin.requests().await.len()
    }
}

#[tokio::test]
async fn a_signed_message_makes_one_turn_and_one_reply_and_a_redelivery_nothing_more() {
    let channel = Channel::start().await;
    let body = delivery(PHONE, "5511900000001", &[("wamid.E2E1", "oi, tudo bem?")]);
    let reply = channel.deliver(&body).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    channel.work().await;
    let sent = channel.sent().await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (
            sent[0]["to"].as_str(),
            sent[0]["phone_number_id"].as_str(),
            sent[0]["type"].as_str()
        ),
        (Some("5511900000001"), Some(PHONE), Some("text"))
    );
    assert!(
        sent[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("[offline stand-in]"),
        "{sent:?}"
    );
    assert_eq!(channel.model_calls().await, 1);

    // Meta delivers the same event again (after FIFO de-duplication's 5 minutes
    // too, the record makes it once): 200, no second turn, nothing sent again.
    let again = channel.deliver(&body).await;
    assert_eq!(again.status, 200, "{}", again.raw);
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 1);
    assert_eq!(channel.model_calls().await, 1);
}

#[tokio::test]
async fn a_bad_or_missing_signature_gets_401_and_nothing_is_stored_or_enqueued() {
    let channel = Channel::start().await;
    let body = delivery(PHONE, "5511900000002", &[("wamid.E2E2", "oi")]);
    let tampered = body.replace("oi", "tchau");
    for signature in [
        None,
        Some("sha256=".to_owned()),
        Some("sha1=abc".to_owned()),
        Some(signature(&tampered)),
        Some(signature(&body).to_uppercase()),
    ] {
        let reply = channel.post(&body, signature.as_deref()).await;
        assert_eq!(reply.status, 401, "{signature:?}: {}", reply.raw);
        assert_eq!(reply.error_type(), Some("unauthenticated"));
    }
    assert_eq!(channel.queued().await, 0);
    assert!(channel.contact_items("5511900000002").await.is_empty());
    channel.work().await;
    assert!(channel.sent().await.is_empty());
}

#[tokio::test]
async fn the_verification_handshake_echoes_the_challenge_for_the_right_token_only() {
    let channel = Channel::start().await;
    let handshake = |token: &str| {
        let query = format!("hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444");
        api_event("GET", "/whatsapp/webhook", &query, &[], None, None)
    };
    let ok = HttpReply::from_lambda(
        &channel
            .webhook
            .invoke(handshake(VERIFY_TOKEN))
            .await
            .unwrap(),
    );
    assert_eq!((ok.status, ok.raw.as_str()), (200, "1158201444"));
    assert!(
        ok.headers["content-type"]
            .as_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let wrong = HttpReply::from_lambda(&channel.webhook.invoke(handshake("guess")).await.unwrap());
    assert_eq!(wrong.status, 403, "{}", wrong.raw);
}

#[tokio::test]
async fn a_burst_of_three_gives_one_round_and_one_reply() {
    let channel = Channel::start().await;
    for (id, text) in [
        ("wamid.B1", "oi"),
        ("wamid.B2", "tudo bem?"),
        ("wamid.B3", "queria marcar amanhã"),
    ] {
        let body = delivery(PHONE, "5511900000003", &[(id, text)]);
        assert_eq!(channel.deliver(&body).await.status, 200);
    }
    channel.work().await;
    // One round: every model call of it (the stand-in calls a demo tool for
    // "marcar") opens with the same single user message, the burst joined.
    let requests = channel.standin.requests().await;
    assert!(!requests.is_empty());
    for request in &requests {
        let first = &request["body"]["messages"][0];
        assert_eq!(first["role"], "user");
        assert_eq!(
            first["content"][0]["text"], "oi\ntudo bem?\nqueria marcar amanhã",
            "{request}"
        );
    }
    assert_eq!(channel.sent().await.len(), 1);
}

#[tokio::test]
async fn a_graph_500_then_200_sends_once() {
    let channel = Channel::start().await;
    assert_eq!(channel.graph_faults(json!([{"status": 500}])).await, 1);
    let body = delivery(PHONE, "5511900000004", &[("wamid.G1", "oi")]);
    assert_eq!(channel.deliver(&body).await.status, 200);
    channel.work().await;
    // The 500 was answered (no fault left), then the retry went through, once.
    assert_eq!(channel.graph_faults(json!([])).await, 0);
    assert_eq!(channel.sent().await.len(), 1);
    assert_eq!(channel.model_calls().await, 1);
}

#[tokio::test]
async fn an_unknown_phone_number_id_is_acknowledged_and_dropped() {
    let channel = Channel::start().await;
    let body = delivery("100000000000999", "5511900000005", &[("wamid.U1", "oi")]);
    let reply = channel.deliver(&body).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(channel.queued().await, 0);
    assert!(
        channel
            .webhook
            .output()
            .iter()
            .any(|line| line.contains("UnknownNumber") || line.contains("unknown")),
        "{:?}",
        channel.webhook.output()
    );
    channel.work().await;
    assert!(channel.sent().await.is_empty());
    assert_eq!(channel.model_calls().await, 0);
}

#[tokio::test]
async fn erasing_a_whatsapp_contact_removes_its_records_and_a_queued_message_then_does_nothing() {
    let offset = ClockOffset::new("erase");
    let channel = Channel::start_with(&[("CLOCK_OFFSET_FILE", offset.path())]).await;
    let contact = "5511900000006";
    let body = delivery(PHONE, contact, &[("wamid.D1", "oi")]);
    assert_eq!(channel.deliver(&body).await.status, 200);
    channel.work().await;
    let items = channel.contact_items(contact).await;
    assert!(items.iter().any(|sk| sk.starts_with("WA#")), "{items:?}");

    // A second message is queued, then the contact is erased before the worker runs.
    let body = delivery(PHONE, contact, &[("wamid.D2", "ainda aí?")]);
    assert_eq!(channel.deliver(&body).await.status, 200);
    let erase = tenant_event("DELETE", &format!("/v1/contacts/{contact}"), TENANT, None);
    let erased = HttpReply::from_api(&erase, &channel.ask.invoke(erase.clone()).await.unwrap());
    assert_eq!(erased.status, 200, "{}", erased.raw);
    assert!(channel.contact_items(contact).await.is_empty());
    // The queued message names only the record's incarnation, which went with the
    // erase: delivered past the index's grace (a young one comes back once), it
    // finds no one and does nothing.
    let queued = channel.queue_bodies().await;
    assert_eq!(queued.len(), 1);
    assert!(!queued[0].contains(contact) && !queued[0].contains("wamid"));
    offset.set(degrau_whatsapp::worker::INDEX_GRACE_SECONDS + 1);
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 1);
    assert_eq!(channel.model_calls().await, 1);
    assert!(channel.contact_items(contact).await.is_empty());
}

#[tokio::test]
async fn a_signed_delivery_replayed_after_delete_stores_and_sends_nothing() {
    let channel = Channel::start().await;
    let contact = "5511900000007";
    let body = delivery(PHONE, contact, &[("wamid.R1", "oi")]);
    assert_eq!(channel.deliver(&body).await.status, 200);
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 1);
    let erase = tenant_event("DELETE", &format!("/v1/contacts/{contact}"), TENANT, None);
    let erased = HttpReply::from_api(&erase, &channel.ask.invoke(erase.clone()).await.unwrap());
    assert_eq!(erased.status, 200, "{}", erased.raw);
    assert!(channel.contact_items(contact).await.is_empty());
    // The same signed delivery, replayed (by Meta's retries or by anyone who kept
    // it): acknowledged, and nothing stored, enqueued, asked or sent.
    let replay = channel.deliver(&body).await;
    assert_eq!(replay.status, 200, "{}", replay.raw);
    assert!(channel.contact_items(contact).await.is_empty());
    assert_eq!(channel.queued().await, 0);
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 1);
    assert_eq!(channel.model_calls().await, 1);
    // The tombstone names no one: a keyed hash outside the contact's partition.
    let tombstones: Vec<String> = channel
        .dynamodb
        .scan()
        .table_name(&channel.table)
        .send()
        .await
        .unwrap()
        .items()
        .iter()
        .filter_map(|item| item.get("pk")?.as_s().ok().cloned())
        .filter(|pk| pk.starts_with("WA#ERASED#"))
        .collect();
    assert_eq!(tombstones.len(), 1, "{tombstones:?}");
    assert!(!tombstones[0].contains(contact) && !tombstones[0].contains("wamid"));
}

#[tokio::test]
async fn a_flood_from_many_senders_waits_in_the_queue_and_leaves_the_api_and_genuine_customers_answered()
 {
    // Limits of the number (one new sender an hour) and a tenant with one API round
    // an hour: WhatsApp turns spend the number's budget, never the API's.
    let mut channel = Channel::start_with(&[
        ("WHATSAPP_NEW_SENDERS_PER_HOUR", "1"),
        ("WHATSAPP_SENDER_TURNS_PER_MINUTE", "5"),
        ("WHATSAPP_TURNS_PER_HOUR", "50"),
        ("QUOTA_ROUNDS_PER_HOUR", "1"),
    ])
    .await;
    // A held message stays hidden as the worker hid it (the local bridge would
    // otherwise show it again at once).
    channel.queue.retry_visibility_seconds = None;
    let customer = "5511900000010";
    let first = delivery(PHONE, customer, &[("wamid.C1", "oi, quero marcar")]);
    assert_eq!(channel.deliver(&first).await.status, 200);
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 1, "the customer is answered");

    // Twelve strangers write at once.
    for n in 0..12 {
        let from = format!("55119000001{n:02}");
        let body = delivery(PHONE, &from, &[(&format!("wamid.F{n}"), "promo!!!")]);
        assert_eq!(channel.deliver(&body).await.status, 200);
    }
    let reports = drain(&channel.sqs, &channel.queue, &LocalInvoke(&channel.worker)).await;
    let failed: usize = reports.iter().map(|r| r.failed).sum();
    assert_eq!(failed, 12, "held, each: {reports:?}");
    assert_eq!(channel.sent().await.len(), 1, "no stranger answered yet");
    assert_eq!(channel.queued().await, 12, "they wait in the queue");
    assert!(
        channel.dead_letters().await.is_empty(),
        "none spent into the DLQ"
    );

    // The genuine customer writes again: answered at once.
    let again = delivery(PHONE, customer, &[("wamid.C2", "amanhã às 10?")]);
    assert_eq!(channel.deliver(&again).await.status, 200);
    drain(&channel.sqs, &channel.queue, &LocalInvoke(&channel.worker)).await;
    assert_eq!(
        channel.sent().await.len(),
        2,
        "the customer's second answer"
    );

    // The business's own API answers (its one round of the hour is left), and its
    // usage shows the messages held.
    let api = tenant_event(
        "POST",
        "/v1/contacts/crm-1/messages",
        TENANT,
        Some(r#"{"text": "status?"}"#),
    );
    let reply = HttpReply::from_api(&api, &channel.ask.invoke(api.clone()).await.unwrap());
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let mut usage = tenant_event("GET", "/v1/usage", TENANT, None);
    usage["headers"]["x-scopes"] = json!("tenant:admin");
    let usage = HttpReply::from_api(&usage, &channel.ask.invoke(usage.clone()).await.unwrap());
    assert_eq!(usage.status, 200, "{}", usage.raw);
    let held: u64 = usage.body["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|day| day["whatsapp_held"].as_u64().unwrap())
        .sum();
    assert!(held >= 11, "{}", usage.raw);
}

/// Runs `infra/whatsapp.py` (the documented command) with the workspace's venv.
fn whatsapp_py(args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut child = std::process::Command::new(format!("{root}/.venv/bin/python"))
        .arg(format!("{root}/infra/whatsapp.py"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run infra/whatsapp.py (./dev.sh test sets up .venv)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test]
async fn a_number_bound_by_the_documented_command_takes_a_delivery_signed_by_python() {
    let channel = Channel::start().await;
    let phone = "100000000000002";
    let moto_url = moto::endpoint();
    whatsapp_py(
        &[
            "bind",
            "--phone-number-id",
            phone,
            "--tenant",
            "shop",
            "--table",
            &channel.table,
            "--endpoint",
            &moto_url,
        ],
        "",
    );
    let body = delivery(phone, "5511900000007", &[("wamid.P1", "oi")]);
    // The signature from Python's hmac, as `infra/whatsapp.py send` makes it.
    let signature = whatsapp_py(&["sign", "--app-secret", APP_SECRET], &body);
    let reply = channel.post(&body, Some(signature.trim())).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(channel.queued().await, 1);
    channel.work().await;
    let sent = channel.sent().await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["phone_number_id"], phone);
}

#[tokio::test]
async fn statuses_and_reactions_make_no_turn_and_a_failure_is_logged_without_the_number() {
    let channel = Channel::start().await;
    let customer = "5511900000008";
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550009999", "phone_number_id": PHONE},
                  "messages": [{"from": customer, "id": "wamid.R1", "timestamp": "1800000000",
                                "type": "reaction",
                                "reaction": {"message_id": "wamid.X", "emoji": "👍"}}],
                  "statuses": [
                      {"id": "wamid.S1", "status": "delivered", "timestamp": "1800000000",
                       "recipient_id": customer},
                      {"id": "wamid.S2", "status": "failed", "timestamp": "1800000000",
                       "recipient_id": customer,
                       "errors": [{"code": 131026, "title": "Message undeliverable"}]}]}}]}]})
    .to_string();
    let reply = channel.deliver(&body).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(channel.queued().await, 0);
    assert!(channel.contact_items(customer).await.is_empty());
    let output = channel.webhook.output().join("\n");
    assert!(output.contains("131026"), "{output}");
    assert!(!output.contains(customer), "{output}");
    channel.work().await;
    assert!(channel.sent().await.is_empty());
    assert_eq!(channel.model_calls().await, 0);
}

/// The channel with the worker's clock (only) on a file, and a message from
/// `contact` the webhook took on the real clock; then the worker's clock moves 25
/// hours on and the worker runs: the window is closed when the reply is ready.
async fn reply_a_day_late(channel: &Channel, offset: &ClockOffset, contact: &str) {
    let body = delivery(PHONE, contact, &[("wamid.W1", "oi, ainda atendem?")]);
    assert_eq!(channel.deliver(&body).await.status, 200);
    offset.set(90_000);
    channel.work().await;
    assert_eq!(channel.model_calls().await, 1);
    // The reply is in the conversation all the same.
    let transcript = channel.transcript(contact).await;
    assert_eq!(transcript.len(), 2, "{transcript:?}");
    assert_eq!(
        (transcript[0].0.as_str(), transcript[0].1.as_str()),
        ("user", "oi, ainda atendem?")
    );
    assert_eq!(transcript[1].0, "assistant");
    assert!(
        transcript[1].1.starts_with("[offline stand-in]"),
        "{transcript:?}"
    );
    assert_eq!(channel.worker_metric("RepliesOutsideWindow"), 1);
    assert_eq!(channel.worker_metric("TurnsAnswered"), 1);
    assert_eq!(channel.worker_metric("RepliesSent"), 0);
}

#[tokio::test]
async fn outside_the_24_hour_window_the_template_goes_instead_and_the_reply_is_recorded() {
    let offset = ClockOffset::new("template");
    let channel = Channel::start_with(&[("CLOCK_OFFSET_FILE", offset.path())]).await;
    channel
        .whatsapp_settings(json!({"template": {"name": "retomar_conversa", "language": "pt_BR"}}))
        .await;
    let contact = "5511900000009";
    reply_a_day_late(&channel, &offset, contact).await;
    let sent = channel.sent().await;
    assert_eq!(sent.len(), 1, "the template and no free text: {sent:?}");
    assert_eq!(
        (
            sent[0]["type"].as_str(),
            sent[0]["content"].as_str(),
            sent[0]["to"].as_str(),
            sent[0]["phone_number_id"].as_str()
        ),
        (
            Some("template"),
            Some("retomar_conversa"),
            Some(contact),
            Some(PHONE)
        )
    );
    assert_eq!(channel.worker_metric("TemplatesSent"), 1);

    // A redelivery of the same event sends nothing more.
    let body = delivery(PHONE, contact, &[("wamid.W1", "oi, ainda atendem?")]);
    assert_eq!(channel.deliver(&body).await.status, 200);
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 1);
    assert_eq!(channel.model_calls().await, 1);
}

#[tokio::test]
async fn outside_the_24_hour_window_without_a_template_nothing_is_sent_and_the_reply_is_recorded() {
    let offset = ClockOffset::new("no-template");
    let channel = Channel::start_with(&[("CLOCK_OFFSET_FILE", offset.path())]).await;
    reply_a_day_late(&channel, &offset, "5511900000010").await;
    assert_eq!(channel.sent().await, Vec::<Value>::new());
    assert_eq!(channel.worker_metric("TemplatesSent"), 0);
    assert!(
        channel
            .worker
            .output()
            .iter()
            .any(|line| line.contains("outside_window")),
        "{:?}",
        channel.worker.output()
    );
}

/// The text of the last user message of a logged model call.
pub(crate) fn last_user_text(request: &Value) -> String {
    let messages = request["body"]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{request}");
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_message_that_arrives_while_a_round_runs_makes_the_next_turn() {
    let channel = Channel::start().await;
    let contact = "5511900000011";
    // The first round's model call hangs long enough for a second delivery.
    channel.model_faults(json!([{"hang_ms": 5000}])).await;
    let first = delivery(PHONE, contact, &[("wamid.N1", "oi, tudo bem?")]);
    assert_eq!(channel.deliver(&first).await.status, 200);
    let second_arrives = async {
        // Once the first turn is taken (its model call under way), the second
        // message comes in.
        let mut taken = false;
        for _ in 0..2000 {
            let items = channel.contact_items(contact).await;
            if items.iter().any(|sk| sk.starts_with("WA#TURN#")) {
                taken = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(taken, "the first turn was never taken");
        let second = delivery(PHONE, contact, &[("wamid.N2", "ainda está aí?")]);
        assert_eq!(channel.deliver(&second).await.status, 200);
        // It arrived while the first round ran: nothing was sent yet.
        assert_eq!(channel.sent().await, Vec::<Value>::new());
    };
    tokio::join!(channel.work(), second_arrives);
    // Whatever the queue still holds (the second message, if the drain ended
    // before it was queued).
    channel.work().await;

    // Two rounds: the first of the first message alone, the second of the
    // second message alone, after the first round's reply.
    let requests = channel.standin.requests().await;
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(last_user_text(&requests[0]), "oi, tudo bem?");
    assert_eq!(requests[0]["body"]["messages"].as_array().unwrap().len(), 1);
    assert_eq!(last_user_text(&requests[1]), "ainda está aí?");
    assert_eq!(requests[1]["body"]["messages"].as_array().unwrap().len(), 3);
    // Each answered once, in order.
    let sent = channel.sent().await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent.iter()
            .all(|m| m["to"] == contact && m["type"] == "text")
    );
    let transcript = channel.transcript(contact).await;
    let roles: Vec<&str> = transcript.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "{transcript:?}"
    );
    assert_eq!(transcript[0].1, "oi, tudo bem?");
    assert_eq!(transcript[2].1, "ainda está aí?");
    assert_eq!(sent[0]["content"].as_str(), Some(transcript[1].1.as_str()));
    assert_eq!(sent[1]["content"].as_str(), Some(transcript[3].1.as_str()));
    assert_eq!(channel.worker_metric("TurnsAnswered"), 2);

    // Redeliveries of both make nothing more.
    for body in [
        &first,
        &delivery(PHONE, contact, &[("wamid.N2", "ainda está aí?")]),
    ] {
        assert_eq!(channel.deliver(body).await.status, 200);
    }
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 2);
    assert_eq!(channel.standin.requests().await.len(), 2);
}

#[tokio::test]
async fn no_message_in_the_whatsapp_queue_names_the_contact_or_its_message() {
    let channel = Channel::start().await;
    let contact = "5511900000009";
    let body = delivery(
        PHONE,
        contact,
        &[("wamid.HBgNNTUxMTkwMDAwMDAwORUCABIYFg", "oi")],
    );
    assert_eq!(channel.deliver(&body).await.status, 200);
    let queued = channel.queue_bodies().await;
    assert_eq!(queued.len(), 1);
    for named in [contact, "wamid", "HBgN"] {
        assert!(!queued[0].contains(named), "{} names {named}", queued[0]);
    }
    let fields: Value = serde_json::from_str(&queued[0]).unwrap();
    assert_eq!(fields["tenant"], TENANT);
    // The worker finds the record through the index, and answers once.
    channel.work().await;
    assert_eq!(channel.sent().await.len(), 1);
}

#[tokio::test]
async fn a_signed_delivery_older_than_its_records_live_makes_no_turn_and_no_reply() {
    let channel = Channel::start().await;
    let contact = "5511900000010";
    let nine_days_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 9 * 86_400;
    let body = delivery(PHONE, contact, &[("wamid.OLD1", "oi")])
        .replace("\"1800000000\"", &format!("\"{nine_days_ago}\""));
    assert!(body.contains(&nine_days_ago.to_string()));
    let reply = channel.deliver(&body).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(channel.queued().await, 0);
    assert!(channel.contact_items(contact).await.is_empty());
    channel.work().await;
    assert!(channel.sent().await.is_empty());
    assert_eq!(channel.model_calls().await, 0);
}
