//! The operator routes through the real `ask` binary on moto: scopes, the contact
//! listing from the tenant index, facts an operator corrects (and the next model
//! request carrying the correction), the tenant configuration under `If-Match`, a
//! stored configuration that no longer reads, the usage counts, and bad input on
//! every route answered with a documented 4xx that changes nothing. Every answer is
//! held to `docs/openapi.json` (`HttpReply::from_api`).

use aws_sdk_dynamodb::types::AttributeValue;
use degrau_tests::stack::{FullStack, StackOptions};
use degrau_tests::{HttpReply, unique};
use serde_json::{Value, json};

const READ: &str = "memory:read";
const WRITE: &str = "memory:write";
const ADMIN: &str = "tenant:admin";

/// A call with dev scopes: `request` is `METHOD path[?query]`.
async fn op(
    stack: &FullStack,
    request: &str,
    tenant: &str,
    scopes: &str,
    extra: &[(&str, &str)],
    body: Option<&str>,
) -> HttpReply {
    let (method, target) = request.split_once(' ').expect("METHOD path");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = vec![("x-scopes", scopes), ("x-operator", "ops-7")];
    headers.extend_from_slice(extra);
    stack
        .call_with(method, path, query, tenant, &headers, body)
        .await
}

fn contacts_of(reply: &HttpReply) -> Vec<String> {
    reply.body["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["contact"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_operator_lists_corrects_and_deletes_what_the_agent_remembers() {
    let stack = FullStack::start(&[]).await;
    let tenant = unique("shop");
    assert_eq!(stack.post(&tenant, "ana", "Hi, I'm Rira").await.status, 200);
    // A second apart: moto pages an index past two entries with the same sort key
    // wrongly (it breaks the tie by the table's sort key, `HEAD` for both; DynamoDB
    // by the whole table key).
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    assert_eq!(stack.post(&tenant, "bia", "Hello").await.status, 200);
    assert_eq!(stack.post("other-shop", "caio", "Hello").await.status, 200);

    // Without the scope: 403, nothing read.
    let refused = op(&stack, "GET /v1/contacts", &tenant, "", &[], None).await;
    assert_eq!(
        (refused.status, refused.error_type()),
        (403, Some("forbidden"))
    );
    let listed = op(&stack, "GET /v1/contacts", &tenant, READ, &[], None).await;
    assert_eq!(listed.status, 200, "{}", listed.raw);
    assert_eq!(
        contacts_of(&listed),
        vec!["bia", "ana"],
        "newest first, this tenant's only"
    );
    let page = op(&stack, "GET /v1/contacts?limit=1", &tenant, READ, &[], None).await;
    assert_eq!(contacts_of(&page).len(), 1);
    let cursor = page.body["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let rest = op(
        &stack,
        &format!("GET /v1/contacts?limit=1&cursor={cursor}"),
        &tenant,
        READ,
        &[],
        None,
    )
    .await;
    assert_eq!(
        [contacts_of(&page), contacts_of(&rest)].concat(),
        vec!["bia", "ana"]
    );
    assert_eq!(rest.body["next_cursor"], Value::Null);

    // Reading is not writing.
    let body = json!({"value": "Rita"}).to_string();
    let path = "/v1/contacts/ana/facts/name";
    let denied = op(
        &stack,
        &format!("PUT {path}"),
        &tenant,
        READ,
        &[],
        Some(&body),
    )
    .await;
    assert_eq!(denied.status, 403);
    let set = op(
        &stack,
        &format!("PUT {path}"),
        &tenant,
        WRITE,
        &[],
        Some(&body),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.raw);
    assert_eq!(set.body["set_by"]["kind"], "operator");
    assert_eq!(set.body["set_by"]["by"], "ops-7");
    // A value the policy refuses: 400 naming the rule, never the value; the
    // stored fact is unchanged.
    let cpf = json!({"value": "CPF 529.982.247-25"}).to_string();
    let refused = op(
        &stack,
        &format!("PUT {path}"),
        &tenant,
        WRITE,
        &[],
        Some(&cpf),
    )
    .await;
    assert_eq!(
        (refused.status, refused.error_type()),
        (400, Some("invalid_request"))
    );
    assert!(
        refused.raw.contains("cpf") && !refused.raw.contains("529"),
        "{}",
        refused.raw
    );
    let facts = op(
        &stack,
        "GET /v1/contacts/ana/facts",
        &tenant,
        READ,
        &[],
        None,
    )
    .await;
    assert_eq!(facts.body["facts"][0]["value"], "Rita");

    // The next request to the model carries the correction.
    stack.standin.reset().await;
    assert_eq!(
        stack
            .post(&tenant, "ana", "Can I book tomorrow?")
            .await
            .status,
        200
    );
    let requests = stack.standin.requests().await;
    let sent = serde_json::to_string(&requests.last().unwrap()["body"]["system"]).unwrap();
    assert!(sent.contains("Rita"), "{sent}");

    // Correcting again keeps the earlier value in the history.
    let again = json!({"value": "Rita Souza"}).to_string();
    let set = op(
        &stack,
        &format!("PUT {path}"),
        &tenant,
        WRITE,
        &[],
        Some(&again),
    )
    .await;
    assert_eq!(set.body["history"][0]["value"], "Rita");

    let deleted = op(&stack, &format!("DELETE {path}"), &tenant, WRITE, &[], None).await;
    assert_eq!(deleted.body, json!({"deleted": true, "key": "name"}));
    let gone = op(&stack, &format!("DELETE {path}"), &tenant, WRITE, &[], None).await;
    assert_eq!((gone.status, gone.error_type()), (404, Some("not_found")));
    let facts = op(
        &stack,
        "GET /v1/contacts/ana/facts",
        &tenant,
        READ,
        &[],
        None,
    )
    .await;
    assert_eq!(facts.body["facts"], json!([]));

    // An erased contact leaves the listing.
    assert_eq!(
        stack
            .call("DELETE", "/v1/contacts/ana", &tenant, None)
            .await
            .status,
        200
    );
    let listed = op(&stack, "GET /v1/contacts", &tenant, READ, &[], None).await;
    assert_eq!(contacts_of(&listed), vec!["bia"]);
}

#[tokio::test]
async fn the_tenant_config_is_checked_in_full_and_replaced_only_from_the_version_read() {
    let stack = FullStack::start(&[]).await;
    let tenant = unique("shop");
    let get = || op(&stack, "GET /v1/tenant/config", &tenant, ADMIN, &[], None);
    let first = get().await;
    assert_eq!(first.body["etag"], "\"v0\"");
    assert_eq!(first.body["config"], Value::Null);
    assert_eq!(first.headers["etag"], "\"v0\"");

    let put = |if_match: Option<&'static str>, body: String| {
        let tenant = tenant.clone();
        let stack = &stack;
        async move {
            let headers: Vec<(&str, &str)> =
                if_match.map(|m| ("if-match", m)).into_iter().collect();
            op(
                stack,
                "PUT /v1/tenant/config",
                &tenant,
                ADMIN,
                &headers,
                Some(&body),
            )
            .await
        }
    };
    let good = json!({"session_idle_minutes": 30, "allowed_fact_keys": ["name"]}).to_string();
    let missing = put(None, good.clone()).await;
    assert_eq!(
        (missing.status, missing.error_type()),
        (428, Some("precondition_required"))
    );
    let bad_schema = json!({"tools": [{
        "name": "lookup", "description": "Looks up.",
        "input_schema": {"type": "object", "properties": {"id": {"type": "nonsense"}}},
        "webhook": {"url": "https://tools.example.com/lookup", "secret_parameter": "/degrau/x"}
    }]})
    .to_string();
    for (body, names) in [
        (bad_schema, "tools[0].input_schema"),
        (
            json!({"transcript_retention_days": 0}).to_string(),
            "transcript_retention_days",
        ),
        (
            json!({"session_idle_minutes": "soon"}).to_string(),
            "session_idle_minutes",
        ),
        (
            json!({"whatsapp": {"media_reply": ""}}).to_string(),
            "whatsapp.media_reply",
        ),
        (json!(["not", "an", "object"]).to_string(), "JSON object"),
    ] {
        let refused = put(Some("\"v0\""), body).await;
        assert_eq!(refused.status, 400, "{}", refused.raw);
        assert!(refused.raw.contains(names), "{names}: {}", refused.raw);
    }
    assert_eq!(get().await.body["etag"], "\"v0\"", "nothing stored");
    let admin_only = op(&stack, "GET /v1/tenant/config", &tenant, WRITE, &[], None).await;
    assert_eq!(admin_only.status, 403);

    let stored = put(Some("\"v0\""), good.clone()).await;
    assert_eq!(stored.status, 200, "{}", stored.raw);
    assert_eq!(stored.body["etag"], "\"v1\"");
    let stale = put(
        Some("\"v0\""),
        json!({"session_idle_minutes": 45}).to_string(),
    )
    .await;
    assert_eq!(
        (stale.status, stale.error_type()),
        (412, Some("precondition_failed"))
    );
    let now = get().await;
    assert_eq!(now.body["config"]["session_idle_minutes"], 30);
    assert_eq!(now.body["valid"], true);
}

#[tokio::test]
async fn a_stored_config_that_no_longer_reads_answers_its_own_error_until_an_operator_fixes_it() {
    let stack = FullStack::start(&[]).await;
    let tenant = unique("shop");
    // Written by hand into the table, as an operator with console access might.
    stack
        .dynamodb
        .put_item()
        .table_name(&stack.table)
        .item("pk", AttributeValue::S(format!("T#{tenant}")))
        .item("sk", AttributeValue::S("CONFIG".into()))
        .item(
            "config",
            AttributeValue::S(r#"{"session_idle_minutes": "soon"}"#.into()),
        )
        .send()
        .await
        .unwrap();
    stack.standin.reset().await;
    let answer = stack.post(&tenant, "ana", "Hi").await;
    assert_eq!(
        (answer.status, answer.error_type()),
        (500, Some("tenant_config_invalid"))
    );
    assert!(
        answer.raw.contains("session_idle_minutes"),
        "{}",
        answer.raw
    );
    assert!(stack.standin.requests().await.is_empty(), "no model call");

    let view = op(&stack, "GET /v1/tenant/config", &tenant, ADMIN, &[], None).await;
    assert_eq!(view.body["valid"], false);
    assert_eq!(
        view.body["etag"], "\"v1\"",
        "an item from before versions reads as v1"
    );
    assert!(
        view.body["problem"]
            .as_str()
            .unwrap()
            .contains("session_idle_minutes")
    );
    let fixed = op(
        &stack,
        "PUT /v1/tenant/config",
        &tenant,
        ADMIN,
        &[("if-match", "\"v1\"")],
        Some(r#"{"session_idle_minutes": 30}"#),
    )
    .await;
    assert_eq!(fixed.status, 200, "{}", fixed.raw);
    assert_eq!(fixed.body["etag"], "\"v2\"");
    assert_eq!(stack.post(&tenant, "ana", "Hi").await.status, 200);
}

#[tokio::test]
async fn usage_is_counted_per_day_and_priced_at_the_deployments_table() {
    let stack = FullStack::start_with(&StackOptions {
        env: vec![("PRICES".into(), "claude-sonnet-5=3/15".into())],
        ..StackOptions::default()
    })
    .await;
    let tenant = unique("shop");
    for text in ["Hi", "Any slot tomorrow?"] {
        assert_eq!(stack.post(&tenant, "ana", text).await.status, 200);
    }
    let usage = op(&stack, "GET /v1/usage", &tenant, ADMIN, &[], None).await;
    assert_eq!(usage.status, 200, "{}", usage.raw);
    let days = usage.body["days"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{}", usage.raw);
    let day = &days[0];
    assert_eq!(day["rounds"], 2);
    assert!(day["model_calls"].as_u64().unwrap() >= 2);
    let tokens = &day["tokens"][0];
    let model = tokens["model"].as_str().unwrap();
    let input = tokens["input"].as_u64().unwrap();
    assert!(input > 0, "{}", usage.raw);
    if model == "claude-sonnet-5" {
        assert!(day["cost_usd"].as_f64().unwrap() > 0.0, "{}", usage.raw);
    }
    // Another tenant sees none of it.
    let other = op(&stack, "GET /v1/usage", "other-shop", ADMIN, &[], None).await;
    assert_eq!(other.body["days"], json!([]));
}

#[tokio::test]
async fn bad_input_on_every_operator_route_is_a_documented_4xx_and_changes_nothing() {
    let stack = FullStack::start(&[]).await;
    let tenant = unique("shop");
    assert_eq!(stack.post(&tenant, "ana", "Hi").await.status, 200);
    let all = "memory:read memory:write tenant:admin";
    let value = json!({"value": "Ana"}).to_string();
    for (method, path, query, extra, body, status) in [
        ("GET", "/v1/contacts", "limit=0", None, None, 400),
        ("GET", "/v1/contacts", "limit=101", None, None, 400),
        ("GET", "/v1/contacts", "limit=ten", None, None, 400),
        ("GET", "/v1/contacts", "cursor=zz", None, None, 400),
        ("GET", "/v1/contacts/nobody/facts", "", None, None, 404),
        (
            "PUT",
            "/v1/contacts/ana/facts/Bad-Key",
            "",
            None,
            Some(value.as_str()),
            400,
        ),
        (
            "PUT",
            "/v1/contacts/ana/facts/name",
            "",
            None,
            Some("{\"value\": 3}"),
            400,
        ),
        (
            "PUT",
            "/v1/contacts/ana/facts/name",
            "",
            None,
            Some("{\"value\": \"\"}"),
            400,
        ),
        (
            "PUT",
            "/v1/contacts/ana/facts/name",
            "",
            None,
            Some("{\"value\": \"a\", \"x\": 1}"),
            400,
        ),
        (
            "PUT",
            "/v1/contacts/ana/facts/name",
            "",
            None,
            Some("not json"),
            400,
        ),
        (
            "PUT",
            "/v1/contacts/nobody/facts/name",
            "",
            None,
            Some(value.as_str()),
            404,
        ),
        (
            "PATCH",
            "/v1/contacts/ana/facts/name",
            "",
            None,
            Some(value.as_str()),
            405,
        ),
        (
            "PUT",
            "/v1/tenant/config",
            "",
            Some(("if-match", "v1")),
            Some("{}"),
            400,
        ),
        (
            "PUT",
            "/v1/tenant/config",
            "",
            Some(("if-match", "\"v0\"")),
            Some("{"),
            400,
        ),
        ("GET", "/v1/usage", "from=2026-13-01", None, None, 400),
        (
            "GET",
            "/v1/usage",
            "from=2026-01-01&to=2026-12-01",
            None,
            None,
            400,
        ),
        (
            "GET",
            "/v1/usage",
            "from=2026-12-02&to=2026-12-01",
            None,
            None,
            400,
        ),
    ] {
        let extra: Vec<(&str, &str)> = extra.into_iter().collect();
        let request = format!("{method} {path}?{query}");
        let reply = op(&stack, &request, &tenant, all, &extra, body).await;
        assert_eq!(
            reply.status, status,
            "{method} {path}?{query}: {}",
            reply.raw
        );
    }
    let facts = op(
        &stack,
        "GET /v1/contacts/ana/facts",
        &tenant,
        all,
        &[],
        None,
    )
    .await;
    assert_eq!(facts.body["facts"], json!([]), "no fact stored");
    let config = op(&stack, "GET /v1/tenant/config", &tenant, all, &[], None).await;
    assert_eq!(config.body["etag"], "\"v0\"", "no config stored");
    // The page is public and says nothing of any tenant.
    let page = stack
        .call_with("GET", "/v1/inspector", "", "", &[], None)
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.headers["content-type"]
            .as_str()
            .unwrap()
            .starts_with("text/html")
    );
}
