//! The business's day on WhatsApp through the real binaries on moto and the Graph
//! double: the customer sees their message read and "typing…" before the reply;
//! the owner answering from the WhatsApp Business app (an `smb_message_echoes`
//! delivery) takes the conversation over and hands it back.

use degrau_tests::{HttpReply, api_event};
use serde_json::{Value, json};

use crate::whatsapp::{Channel, PHONE, TENANT, delivery};

const CUSTOMER: &str = "5511900000042";

/// An `smb_message_echoes` delivery: the owner's texts `(id, text)` to `to`, as
/// Meta posts what was sent from the WhatsApp Business app on a coexistence number.
pub(crate) fn echoes(to: &str, texts: &[(&str, &str)]) -> String {
    let echoes: Vec<Value> = texts
        .iter()
        .map(|(id, text)| {
            json!({"from": "15550009999", "to": to, "id": id, "timestamp": "1800000000",
                   "type": "text", "text": {"body": text}})
        })
        .collect();
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "smb_message_echoes",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550009999", "phone_number_id": PHONE},
                  "message_echoes": echoes}}]}]})
    .to_string()
}

impl Channel {
    /// The Graph double's read marks.
    async fn reads(&self) -> Vec<Value> {
        reqwest::get(format!("{}/stand-in/graph/reads", self.standin.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Delivers a signed body and works the queue.
    async fn deliver_and_work(&self, body: &str) {
        let reply = self.deliver(body).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        self.work().await;
    }

    /// The contact's stored messages as GET messages answers them.
    async fn messages(&self, contact: &str) -> Vec<Value> {
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
        reply.body["messages"].as_array().unwrap().clone()
    }
}

fn text_of(message: &Value) -> String {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect()
}

#[tokio::test]
async fn the_message_is_marked_read_with_the_typing_indicator_before_the_reply() {
    let channel = Channel::start().await;
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.R1", "oi")]))
        .await;
    let (reads, sent) = (channel.reads().await, channel.sent().await);
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0]["message_id"], "wamid.R1");
    assert_eq!(reads[0]["phone_number_id"], PHONE);
    assert_eq!(reads[0]["typing"], true);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        reads[0]["seq"].as_u64() < sent[0]["seq"].as_u64(),
        "read before the reply: {reads:?} {sent:?}"
    );

    // The turn's lines name the tenant, never the customer; its reply latency is
    // the tenant's.
    let output = channel.worker.output();
    let taken = output
        .iter()
        .find(|line| line.contains("turn taken"))
        .expect("the turn's log line");
    assert!(taken.contains(r#""tenant":"barber""#), "{taken}");
    assert!(output.iter().all(|line| !line.contains(CUSTOMER)));
    assert!(
        output
            .iter()
            .any(|line| line.contains(r#""ReplyLatency""#) && line.contains(r#""Tenant":"barber""#)),
        "{output:?}"
    );
}

#[tokio::test]
async fn a_tenant_that_turned_read_receipts_off_gets_no_read_mark_and_a_failed_mark_fails_nothing()
{
    let channel = Channel::start().await;
    channel
        .whatsapp_settings(json!({"read_receipts": false}))
        .await;
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.R2", "oi")]))
        .await;
    assert!(channel.reads().await.is_empty());
    assert_eq!(channel.sent().await.len(), 1);

    // With read receipts on, a Graph API that refuses the mark (a 400: not
    // retried) still leaves the reply to go out, and the failure is counted.
    channel.whatsapp_settings(json!({})).await;
    assert_eq!(channel.graph_faults(json!([{"status": 400}])).await, 1);
    channel
        .deliver_and_work(&delivery(PHONE, "5511900000043", &[("wamid.R3", "oi")]))
        .await;
    assert!(channel.reads().await.is_empty());
    assert_eq!(channel.sent().await.len(), 2);
    assert_eq!(channel.worker_metric("ReadMarkFailures"), 1);
}

#[tokio::test]
async fn an_echo_pauses_the_agent_and_enters_the_transcript_and_the_keyword_hands_back() {
    let channel = Channel::start().await;
    channel
        .whatsapp_settings(json!({"handback_keyword": "voltar"}))
        .await;
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.C1", "oi, tudo bem?")]))
        .await;
    assert_eq!(
        (channel.sent().await.len(), channel.model_calls().await),
        (1, 1)
    );

    // The owner answers from the app: in the transcript as the business's message
    // written by a person; nothing sent, no model call.
    let owner = "Oi, aqui é o João. Amanhã às 10h?";
    channel
        .deliver_and_work(&echoes(CUSTOMER, &[("wamid.E1", owner)]))
        .await;
    let messages = channel.messages(CUSTOMER).await;
    let last = messages.last().unwrap();
    assert_eq!(
        (last["role"].as_str(), text_of(last)),
        (Some("assistant"), owner.into())
    );
    assert_eq!(last["written_by_person"], true, "{last}");
    assert!(
        messages[..messages.len() - 1]
            .iter()
            .all(|m| m["written_by_person"] == false),
        "the model's messages are not marked: {messages:?}"
    );
    assert_eq!(
        (channel.sent().await.len(), channel.model_calls().await),
        (1, 1)
    );

    // While the owner has it, the customer's message is stored and not answered,
    // nor marked read; the owner's next answer takes it into its round.
    let reads_before = channel.reads().await.len();
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.C2", "pode ser")]))
        .await;
    assert_eq!(
        (channel.sent().await.len(), channel.model_calls().await),
        (1, 1)
    );
    assert_eq!(channel.reads().await.len(), reads_before);
    assert!(
        channel
            .contact_items(CUSTOMER)
            .await
            .iter()
            .any(|sk| sk == "WA#IN#wamid.C2"),
        "the waiting message is stored"
    );
    channel
        .deliver_and_work(&echoes(CUSTOMER, &[("wamid.E2", "Confirmado!")]))
        .await;
    let transcript = channel.transcript(CUSTOMER).await;
    let tail: Vec<(&str, &str)> = transcript[transcript.len() - 2..]
        .iter()
        .map(|(role, text)| (role.as_str(), text.as_str()))
        .collect();
    assert_eq!(tail, [("user", "pode ser"), ("assistant", "Confirmado!")]);

    // The hand-back word: the agent answers again; the word is not stored.
    channel
        .deliver_and_work(&echoes(CUSTOMER, &[("wamid.E3", "Voltar")]))
        .await;
    assert_eq!(channel.transcript(CUSTOMER).await.len(), transcript.len());
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.C3", "obrigado")]))
        .await;
    assert_eq!(
        (channel.sent().await.len(), channel.model_calls().await),
        (2, 2)
    );
    assert_eq!(channel.worker_metric("PersonTurns"), 2);
    assert_eq!(channel.worker_metric("Handbacks"), 1);
}

#[tokio::test]
async fn an_echo_redelivered_is_recorded_once_and_a_malformed_one_is_refused_alone() {
    let channel = Channel::start().await;
    let body = echoes(CUSTOMER, &[("wamid.E9", "Bom dia!")]);
    channel.deliver_and_work(&body).await;
    channel.deliver_and_work(&body).await;
    let messages = channel.messages(CUSTOMER).await;
    let texts: Vec<String> = messages.iter().map(text_of).collect();
    assert_eq!(texts, ["[the business wrote first]", "Bom dia!"]);
    let bad = echoes("+55 11", &[("wamid.E10", "x")]);
    channel.deliver_and_work(&bad).await;
    assert_eq!(channel.messages(CUSTOMER).await.len(), 2);
    assert!(channel.sent().await.is_empty());
    assert_eq!(channel.model_calls().await, 0);
}

impl Channel {
    /// Calls a handoff route of `ask` as an operator with `scopes`.
    async fn handoff_route(
        &self,
        method: &str,
        route: &str,
        scopes: &str,
        body: Option<&str>,
    ) -> HttpReply {
        let mut headers = vec![("x-tenant-id", TENANT), ("x-scopes", scopes)];
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        let path = format!("/v1/contacts/{CUSTOMER}/{route}");
        let event = api_event(method, &path, "", &headers, body, None);
        HttpReply::from_api(&event, &self.ask.invoke(event.clone()).await.unwrap())
    }
}

#[tokio::test]
async fn an_operator_hands_off_and_back_and_each_bad_request_changes_nothing() {
    let channel = Channel::start().await;
    let shown = channel
        .handoff_route("GET", "handoff", "memory:read", None)
        .await;
    assert_eq!(shown.status, 200, "{}", shown.raw);
    assert_eq!(
        shown.body,
        json!({"contact": CUSTOMER, "with": "agent", "handoff": null})
    );

    // Each refused request: a 4xx JSON error, and no handoff item written.
    let refused = [
        (
            "POST",
            "handoff",
            "memory:read",
            Some(r#"{"hours": 2}"#),
            403,
        ),
        (
            "POST",
            "handoff",
            "memory:write",
            Some(r#"{"hours": 0}"#),
            400,
        ),
        (
            "POST",
            "handoff",
            "memory:write",
            Some(r#"{"hours": 169}"#),
            400,
        ),
        (
            "POST",
            "handoff",
            "memory:write",
            Some(r#"{"hours": 2, "by": "x"}"#),
            400,
        ),
        ("POST", "handoff", "memory:write", Some("[1]"), 400),
        ("POST", "handback", "memory:read", None, 403),
        ("DELETE", "handoff", "memory:write", None, 405),
    ];
    for (method, route, scopes, body, status) in refused {
        let reply = channel.handoff_route(method, route, scopes, body).await;
        assert_eq!(
            reply.status, status,
            "{method} {route} {body:?}: {}",
            reply.raw
        );
        assert!(reply.body["error"]["type"].is_string(), "{}", reply.raw);
        assert!(
            !channel
                .contact_items(CUSTOMER)
                .await
                .iter()
                .any(|sk| sk == "WA#HANDOFF"),
            "{method} {route} {body:?} wrote a handoff"
        );
    }
    let large = format!(r#"{{"hours": 2, "pad": "{}"}}"#, "x".repeat(70_000));
    let reply = channel
        .handoff_route("POST", "handoff", "memory:write", Some(&large))
        .await;
    assert_eq!(reply.status, 413, "{}", reply.raw);

    // Handed to a person for the longest allowed: the agent answers nothing.
    let reply = channel
        .handoff_route("POST", "handoff", "memory:write", Some(r#"{"hours": 168}"#))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["with"], "person");
    assert_eq!(reply.body["handoff"]["by"], "operator");
    let handoff = &reply.body["handoff"];
    assert_eq!(
        handoff["until"].as_i64().unwrap() - handoff["since"].as_i64().unwrap(),
        168 * 3600
    );
    let context = channel
        .handoff_route("GET", "context", "memory:read", None)
        .await;
    assert_eq!(context.status, 200, "{}", context.raw);
    assert_eq!(
        context.body["handoff"], *handoff,
        "a loop of its own sees it"
    );
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.P1", "tem horário?")]))
        .await;
    assert!(channel.sent().await.is_empty());
    assert_eq!(channel.model_calls().await, 0);
    assert!(
        channel.reads().await.is_empty(),
        "never marked while paused"
    );

    // Handed back: the next message is answered with the one that waited.
    let reply = channel
        .handoff_route("POST", "handback", "memory:write", None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["with"], "agent");
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.P2", "alô?")]))
        .await;
    assert_eq!(channel.sent().await.len(), 1);
    let transcript = channel.transcript(CUSTOMER).await;
    assert_eq!(transcript[0], ("user".into(), "tem horário?\nalô?".into()));
}

/// A delivery of status callbacks `(sent message id, status, error code)` for
/// messages to `to`.
pub(crate) fn statuses(to: &str, callbacks: &[(&str, &str, Option<i64>)]) -> String {
    let statuses: Vec<Value> = callbacks
        .iter()
        .map(|(id, status, code)| {
            let mut callback = json!({"id": id, "status": status, "timestamp": "1800000001",
                                      "recipient_id": to});
            if let Some(code) = code {
                callback["errors"] = json!([{"code": code, "title": "Message undeliverable"}]);
            }
            callback
        })
        .collect();
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550009999", "phone_number_id": PHONE},
                  "statuses": statuses}}]}]})
    .to_string()
}

#[tokio::test]
async fn a_failed_status_shows_on_the_reply_and_a_later_read_does_not_undo_it() {
    let channel = Channel::start().await;
    channel
        .deliver_and_work(&delivery(PHONE, CUSTOMER, &[("wamid.D1", "oi")]))
        .await;
    let sent = channel.sent().await;
    let id = sent[0]["id"].as_str().unwrap().to_owned();
    let reply = |messages: &[Value]| messages.last().unwrap()["delivery"].clone();
    assert_eq!(
        reply(&channel.messages(CUSTOMER).await)["status"],
        "accepted"
    );

    channel
        .deliver_and_work(&statuses(CUSTOMER, &[(&id, "delivered", None)]))
        .await;
    assert_eq!(
        reply(&channel.messages(CUSTOMER).await)["status"],
        "delivered"
    );
    channel
        .deliver_and_work(&statuses(
            CUSTOMER,
            &[
                (&id, "failed", Some(131_026)),
                (&id, "read", None),
                ("wamid.unknown", "failed", Some(1)),
            ],
        ))
        .await;
    let messages = channel.messages(CUSTOMER).await;
    let state = reply(&messages);
    assert_eq!(
        (state["status"].as_str(), state["error_code"].as_i64()),
        (Some("failed"), Some(131_026))
    );
    assert!(
        messages[0]["delivery"].is_null(),
        "the customer's message has none"
    );
    assert_eq!(channel.webhook_metric("DeliveriesUpdated"), 2);
}

impl Channel {
    /// The sum of the webhook's metric `name` over the EMF lines it printed.
    fn webhook_metric(&self, name: &str) -> u64 {
        self.webhook
            .output()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|event| event[name].as_f64())
            .sum::<f64>() as u64
    }
}
