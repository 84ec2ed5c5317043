//! The ask handler called directly with API Gateway requests over the in-memory
//! store and the scripted model: routes, the tenant from the dev header or the
//! claim, the documented error for each bad input, model errors' statuses, a
//! client's own loop, and the request's deadline.

use std::sync::Arc;

use degrau::domain::TenantId;
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::session::system_clock;
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;

use super::*;
use degrau::model::ModelError;
use degrau::records::{PageSize, SessionSelector};
use degrau::store::Cursor;
use lambda_http::aws_lambda_events::query_map::QueryMap;
use serde_json::Value;

#[test]
fn transcript_queries_are_typed_at_the_edge_with_the_documented_errors() {
    let query = |pairs: &[(&str, &str)]| {
        QueryMap::from(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<std::collections::HashMap<String, String>>(),
        )
    };
    assert_eq!(
        TranscriptQuery::try_from(None).unwrap(),
        TranscriptQuery {
            session: SessionSelector::Current,
            limit: PageSize::default(),
            before: None,
        }
    );
    let all = query(&[("session", "all"), ("limit", "7"), ("before", "2.5")]);
    assert_eq!(
        TranscriptQuery::try_from(Some(&all)).unwrap(),
        TranscriptQuery {
            session: SessionSelector::All,
            limit: PageSize::parse("7").unwrap(),
            before: Some(Cursor { session: 2, seq: 5 }),
        }
    );
    let limit = "`limit` must be a whole number from 1 to 200";
    let before = "`before` must be a cursor returned by a previous page";
    let session = "`session` must be `current`, `all` or a session number";
    for (pairs, message) in [
        (&[("limit", "0")][..], limit),
        (
            &[("limit", "201"), ("before", "x"), ("session", "x")][..],
            limit,
        ),
        (&[("before", "3")][..], before),
        (&[("before", "1.x"), ("session", "0")][..], before),
        (&[("session", "0")][..], session),
        (&[("session", "-1")][..], session),
    ] {
        let error = TranscriptQuery::try_from(Some(&query(pairs))).unwrap_err();
        assert_eq!((error.status, error.kind), (400, "invalid_request"));
        assert_eq!(error.message, message, "{pairs:?}");
    }
}

fn app(auth: AuthConfig) -> (App, Arc<MemoryStore>, Arc<ScriptedModel>) {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let service = Converse {
        store: store.clone(),
        records: store.clone(),
        recall: store.clone(),
        usage: store.clone(),
        tenants: store.clone(),
        model: model.clone(),
        tools: Arc::new(ToolDispatch::built_in_only()),
        jobs: Arc::new(NoJobs),
        quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
        defaults: Defaults::default(),
        clock: system_clock(),
    };
    (
        App {
            whatsapp: degrau_whatsapp::memory::MemoryWhatsApp::on(store.clone()),
            events: std::sync::Arc::new(degrau::events::NoEvents),
            platform: degrau::operate::platform::PlatformAdmin::on(
                store.clone(),
                Defaults::default(),
                system_clock(),
            ),
            records: degrau::records::Records::on(
                store.clone(),
                Defaults::default(),
                system_clock(),
            ),
            operate: degrau::operate::Operate::on(
                store.clone(),
                Defaults::default(),
                system_clock(),
            )
            .checking(super::channel_checks()),
            converse: service,
            auth,
            scopes: degrau_adapters::config::ScopeConfig::default(),
            ask_timeout: Duration::from_secs(25),
        },
        store,
        model,
    )
}

fn request(
    method: &str,
    path: &str,
    headers: Value,
    body: Option<&str>,
    claims: Option<Value>,
) -> Request {
    let mut context = json!({
        "accountId": "0", "apiId": "a", "domainName": "d", "domainPrefix": "d", "requestId": "r",
        "routeKey": "$default", "stage": "$default", "time": "t", "timeEpoch": 0,
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "t"}
    });
    if let Some(claims) = claims {
        context["authorizer"] = json!({"jwt": {"claims": claims}});
    }
    let event = json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
        "headers": headers, "requestContext": context, "isBase64Encoded": false, "body": body
    });
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

async fn call(app: &App, request: Request) -> (u16, Value) {
    let response = handle(app, request).await;
    let status = response.status().as_u16();
    let body = match response.body() {
        Body::Text(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        Body::Binary(bytes) => serde_json::from_slice(bytes).unwrap_or(Value::Null),
        Body::Empty => Value::Null,
        _ => Value::Null,
    };
    (status, body)
}

fn dev_headers() -> Value {
    json!({"content-type": "application/json", "x-tenant-id": "acme"})
}

#[tokio::test]
async fn posts_a_message_and_reads_it_back() {
    let (app, _, model) = app(AuthConfig::Dev);
    model.push(ScriptedModel::text("Hi there", Usage::default()));
    let (status, body) = call(
        &app,
        request(
            "POST",
            "/v1/contacts/ana%40example.com/messages",
            dev_headers(),
            Some(r#"{"text":"hello"}"#),
            None,
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"]["text"], "Hi there");
    assert_eq!(body["round"], json!({"first_seq": 1, "last_seq": 2}));
    assert_eq!(body["compaction_queued"], false);

    let (status, body) = call(
        &app,
        request(
            "GET",
            "/v1/contacts/ana@example.com/messages",
            dev_headers(),
            None,
            None,
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["messages"].as_array().unwrap().len(), 2);
    assert_eq!(body["messages"][0]["content"][0]["text"], "hello");

    let (status, body) = call(
        &app,
        request(
            "GET",
            "/v1/contacts/ana@example.com/memory",
            dev_headers(),
            None,
            None,
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["session"]["number"], 1);
    assert_eq!(body["session"]["open"], true);
}

#[tokio::test]
async fn jwt_mode_reads_the_claim_and_ignores_the_dev_header() {
    let (app, store, model) = app(AuthConfig::Jwt {
        claim: "custom:tenant_id".into(),
        audiences: Vec::new(),
    });
    let (status, body) = call(
        &app,
        request(
            "POST",
            "/v1/contacts/bob/messages",
            dev_headers(),
            Some(r#"{"text":"hi"}"#),
            None,
        ),
    )
    .await;
    assert_eq!(
        (status, body["error"]["type"].as_str()),
        (401, Some("unauthenticated"))
    );
    assert!(model.requests().is_empty());

    model.push(ScriptedModel::text("ok", Usage::default()));
    let claims = Some(json!({"custom:tenant_id": "acme", "sub": "u1"}));
    let (status, _) = call(
        &app,
        request(
            "POST",
            "/v1/contacts/bob/messages",
            dev_headers(),
            Some(r#"{"text":"hi"}"#),
            claims,
        ),
    )
    .await;
    assert_eq!(status, 200);
    let key = ContactKey {
        tenant: TenantId::parse("acme").unwrap(),
        contact: ContactId::parse("bob").unwrap(),
    };
    assert_eq!(
        store.item_count(&key),
        3,
        "head and two messages under the claim's tenant"
    );
}

#[tokio::test]
async fn with_an_audience_pinned_only_its_tokens_carrying_the_claim_get_in() {
    let (app, store, model) = app(AuthConfig::Jwt {
        claim: "custom:tenant_id".into(),
        audiences: vec!["safe-client".into()],
    });
    let post = |claims: Value| {
        request(
            "POST",
            "/v1/contacts/bob/messages",
            json!({"content-type": "application/json"}),
            Some(r#"{"text":"hi"}"#),
            Some(claims),
        )
    };
    for (claims, message) in [
        (
            json!({"custom:tenant_id": "acme", "aud": "client-users-may-write"}),
            "the token is not for this API's audience",
        ),
        (
            json!({"custom:tenant_id": "acme"}),
            "the token is not for this API's audience",
        ),
        (
            json!({"aud": "safe-client", "sub": "u1"}),
            "no verified tenant claim in the token",
        ),
        (
            json!({"custom:tenant_id": "", "aud": "safe-client"}),
            "must not be empty",
        ),
    ] {
        let (status, body) = call(&app, post(claims.clone())).await;
        assert_eq!(
            (status, body["error"]["type"].as_str()),
            (401, Some("unauthenticated")),
            "{claims}"
        );
        assert!(
            body["error"]["message"].as_str().unwrap().contains(message),
            "{claims}: {body}"
        );
    }
    assert!(model.requests().is_empty(), "no model call");
    model.push(ScriptedModel::text("ok", Usage::default()));
    model.push(ScriptedModel::text("ok", Usage::default()));
    for claims in [
        json!({"custom:tenant_id": "acme", "aud": "safe-client"}),
        json!({"custom:tenant_id": "acme", "client_id": "safe-client"}),
    ] {
        let (status, body) = call(&app, post(claims)).await;
        assert_eq!(status, 200, "{body}");
    }
    let key = ContactKey {
        tenant: TenantId::parse("acme").unwrap(),
        contact: ContactId::parse("bob").unwrap(),
    };
    assert_eq!(
        store.item_count(&key),
        5,
        "two rounds under the claim's tenant"
    );
}

#[tokio::test]
async fn bad_input_gets_the_documented_error_and_changes_nothing() {
    let (app, store, model) = app(AuthConfig::Dev);
    let long = json!({"text": "x".repeat(8001)}).to_string();
    let huge = json!({"text": "x".repeat(70_000)}).to_string();
    let cases: Vec<(Request, u16, &str)> = vec![
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                dev_headers(),
                Some("{not json"),
                None,
            ),
            400,
            "invalid_request",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                dev_headers(),
                Some(r#"{"text": 5}"#),
                None,
            ),
            400,
            "invalid_request",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                dev_headers(),
                Some(r#"{"text": "hi", "x": 1}"#),
                None,
            ),
            400,
            "invalid_request",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                dev_headers(),
                Some(r#"{"text": "  "}"#),
                None,
            ),
            400,
            "invalid_request",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                dev_headers(),
                Some(&long),
                None,
            ),
            413,
            "too_large",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                dev_headers(),
                Some(&huge),
                None,
            ),
            413,
            "too_large",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bo%23b/messages",
                dev_headers(),
                Some(r#"{"text":"hi"}"#),
                None,
            ),
            400,
            "invalid_request",
        ),
        (
            request(
                "POST",
                "/v1/contacts/%ff/messages",
                dev_headers(),
                Some(r#"{"text":"hi"}"#),
                None,
            ),
            400,
            "invalid_request",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                json!({"content-type": "application/json"}),
                Some(r#"{"text":"hi"}"#),
                None,
            ),
            401,
            "unauthenticated",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                json!({"content-type": "text/plain", "x-tenant-id": "acme"}),
                Some("hi"),
                None,
            ),
            415,
            "unsupported_media_type",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                json!({"content-type": "application/json", "x-tenant-id": "a#b"}),
                Some(r#"{"text":"hi"}"#),
                None,
            ),
            401,
            "unauthenticated",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/messages",
                json!({"content-type": "application/json", "x-tenant-id": "acme", "idempotency-key": "has space"}),
                Some(r#"{"text":"hi"}"#),
                None,
            ),
            400,
            "invalid_request",
        ),
        (
            request("GET", "/v2/anything", dev_headers(), None, None),
            404,
            "not_found",
        ),
        (
            request(
                "PUT",
                "/v1/contacts/bob/messages",
                dev_headers(),
                None,
                None,
            ),
            405,
            "method_not_allowed",
        ),
        (
            request(
                "GET",
                "/v1/contacts/bob/messages",
                dev_headers(),
                None,
                None,
            ),
            404,
            "not_found",
        ),
        (
            request("GET", "/v1/contacts/bob/memory", dev_headers(), None, None),
            404,
            "not_found",
        ),
    ];
    for (request, status, kind) in cases {
        let path = request.uri().to_string();
        let (got, body) = call(&app, request).await;
        assert_eq!(
            (got, body["error"]["type"].as_str()),
            (status, Some(kind)),
            "{path}: {body}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    assert!(model.requests().is_empty());
    let key = ContactKey {
        tenant: TenantId::parse("acme").unwrap(),
        contact: ContactId::parse("bob").unwrap(),
    };
    assert_eq!(store.item_count(&key), 0);
}

#[tokio::test]
async fn model_errors_map_to_their_statuses_with_retry_after_where_it_helps() {
    let (app, _, model) = app(AuthConfig::Dev);
    let post = || {
        request(
            "POST",
            "/v1/contacts/bob/messages",
            dev_headers(),
            Some(r#"{"text":"hi"}"#),
            None,
        )
    };
    for (error, status, kind) in [
        (
            ModelError::RateLimited {
                retry_after: Some(7),
            },
            429,
            "rate_limited",
        ),
        (ModelError::Timeout, 504, "model_timeout"),
        (ModelError::Unavailable { status: 529 }, 502, "model_error"),
        (
            ModelError::InvalidRequest {
                message: "secret detail".into(),
            },
            502,
            "model_error",
        ),
    ] {
        model.push(Err(error));
        let response = handle(&app, post()).await;
        assert_eq!(response.status().as_u16(), status);
        let text = match response.body() {
            Body::Text(t) => t.clone(),
            _ => String::new(),
        };
        assert!(text.contains(kind), "{text}");
        assert!(
            !text.contains("secret detail"),
            "API texts stay in the logs"
        );
        if status == 429 {
            assert_eq!(response.headers()["retry-after"], "7");
        }
    }
}

#[tokio::test]
async fn a_refusal_is_502_model_refused_and_a_cut_off_tool_call_502_model_error() {
    use degrau::domain::ContentBlock;
    use degrau::model::StopReason;
    use degrau::model::scripted::response;
    let (app, store, model) = app(AuthConfig::Dev);
    let post = || {
        request(
            "POST",
            "/v1/contacts/bob/messages",
            dev_headers(),
            Some(r#"{"text":"hi"}"#),
            None,
        )
    };
    model.push(Ok(response(
        vec![ContentBlock::text("I can't help with that.")],
        StopReason::Refusal,
        Usage::default(),
    )));
    let (status, body) = call(&app, post()).await;
    assert_eq!(
        (status, body["error"]["type"].as_str()),
        (502, Some("model_refused"))
    );
    let cut = || {
        Ok(response(
            vec![ContentBlock::tool_use("t", "book_slot", json!({}))],
            StopReason::MaxTokens,
            Usage::default(),
        ))
    };
    model.push(cut());
    model.push(cut());
    let (status, body) = call(&app, post()).await;
    assert_eq!(
        (status, body["error"]["type"].as_str()),
        (502, Some("model_error"))
    );
    let key = ContactKey {
        tenant: TenantId::parse("acme").unwrap(),
        contact: ContactId::parse("bob").unwrap(),
    };
    assert_eq!(store.item_count(&key), 0);
}

fn round_body(head: &str, question: &str, id: &str) -> String {
    json!({
        "head": head,
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": id, "name": "list_free_slots", "input": {"day": "2026-12-04"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "[]"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Nothing free."}]}],
        "usage": {"input_tokens": 40, "output_tokens": 9, "cache_read_input_tokens": 900, "cache_creation_input_tokens": null}
    })
    .to_string()
}

#[tokio::test]
async fn a_clients_own_loop_reads_the_context_and_commits_its_round_idempotently() {
    let (app, store, model) = app(AuthConfig::Dev);
    let get = || request("GET", "/v1/contacts/ana/context", dev_headers(), None, None);
    let (status, view) = call(&app, get()).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (&view["session"], &view["head"], &view["opens_session"]),
        (&json!(1), &json!("h1.-.0.0.1"), &json!(true))
    );
    assert_eq!(view["messages"], json!([]));
    assert_eq!(
        view["system"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );

    let body = round_body(
        view["head"].as_str().unwrap(),
        "Free on the 4th?",
        "toolu_1",
    );
    let headers = json!({"content-type": "application/json", "x-tenant-id": "acme", "idempotency-key": "r-1"});
    let post = || {
        request(
            "POST",
            "/v1/contacts/ana/rounds",
            headers.clone(),
            Some(&body),
            None,
        )
    };
    let (status, recorded) = call(&app, post()).await;
    assert_eq!(status, 200, "{recorded}");
    assert_eq!(
        recorded,
        json!({"session": 1, "round": {"first_seq": 1, "last_seq": 4},
               "usage": {"input_tokens": 40, "cache_read_input_tokens": 900,
                         "cache_creation_input_tokens": 0, "output_tokens": 9, "context_tokens": 940},
               "compaction_queued": false, "usage_estimated": false})
    );
    let replay = handle(&app, post()).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");

    let (_, view) = call(&app, get()).await;
    assert_eq!(view["opens_session"], false);
    assert_eq!(view["messages"].as_array().unwrap().len(), 4);
    assert_eq!(
        view["messages"][2]["content"][0]["cache_control"],
        json!({"type": "ephemeral"}),
        "the previous request's end"
    );
    assert!(model.requests().is_empty(), "degrau called no model");
    let key = ContactKey {
        tenant: TenantId::parse("acme").unwrap(),
        contact: ContactId::parse("ana").unwrap(),
    };
    assert_eq!(
        store.item_count(&key),
        6,
        "head, 4 messages, the idempotency record"
    );
}

#[tokio::test]
async fn bad_rounds_get_the_documented_4xx_and_change_nothing() {
    let (app, store, _) = app(AuthConfig::Dev);
    let (_, view) = call(
        &app,
        request("GET", "/v1/contacts/bob/context", dev_headers(), None, None),
    )
    .await;
    let head = view["head"].as_str().unwrap().to_owned();
    let (status, _) = call(
        &app,
        request(
            "POST",
            "/v1/contacts/bob/rounds",
            dev_headers(),
            Some(&round_body(&head, "first", "toolu_1")),
            None,
        ),
    )
    .await;
    assert_eq!(status, 200);
    let key = ContactKey {
        tenant: TenantId::parse("acme").unwrap(),
        contact: ContactId::parse("bob").unwrap(),
    };
    let items = store.item_count(&key);
    let (_, view) = call(
        &app,
        request("GET", "/v1/contacts/bob/context", dev_headers(), None, None),
    )
    .await;
    let fresh = view["head"].as_str().unwrap().to_owned();
    let mut orphan: Value = serde_json::from_str(&round_body(&fresh, "q", "toolu_2")).unwrap();
    orphan["messages"][2]["content"][0]["tool_use_id"] = json!("toolu_nobody");
    let mut two_users: Value = serde_json::from_str(&round_body(&fresh, "q", "toolu_3")).unwrap();
    two_users["messages"][1] = json!({"role": "user", "content": "again"});
    let huge = round_body(&fresh, &"x".repeat(MAX_ROUND_BODY_BYTES), "toolu_4");
    let post = |body: &str, headers: Value| {
        request("POST", "/v1/contacts/bob/rounds", headers, Some(body), None)
    };
    let cases: Vec<(Request, u16, &str)> = vec![
        (post("{not json", dev_headers()), 400, "invalid_request"),
        (
            post(&orphan.to_string(), dev_headers()),
            400,
            "invalid_request",
        ),
        (
            post(&two_users.to_string(), dev_headers()),
            400,
            "invalid_request",
        ),
        (
            post(&round_body("h1.x", "q", "toolu_5"), dev_headers()),
            400,
            "invalid_request",
        ),
        (
            post(&round_body(&head, "stale", "toolu_6"), dev_headers()),
            409,
            "conflict",
        ),
        (post(&huge, dev_headers()), 413, "too_large"),
        (
            post(
                &round_body(&fresh, "q", "toolu_7"),
                json!({"content-type": "text/plain", "x-tenant-id": "acme"}),
            ),
            415,
            "unsupported_media_type",
        ),
        (
            post(
                &round_body(&fresh, "q", "toolu_8"),
                json!({"content-type": "application/json"}),
            ),
            401,
            "unauthenticated",
        ),
        (
            request("GET", "/v1/contacts/bob/rounds", dev_headers(), None, None),
            405,
            "method_not_allowed",
        ),
        (
            request(
                "POST",
                "/v1/contacts/bob/context",
                dev_headers(),
                Some("{}"),
                None,
            ),
            405,
            "method_not_allowed",
        ),
    ];
    for (request, status, kind) in cases {
        let (got, body) = call(&app, request).await;
        assert_eq!(
            (got, body["error"]["type"].as_str()),
            (status, Some(kind)),
            "{body}"
        );
        assert!(!body["error"]["message"].as_str().unwrap_or("").is_empty());
    }
    assert_eq!(store.item_count(&key), items, "nothing changed");
}

#[tokio::test]
async fn the_openapi_description_is_served_without_a_tenant() {
    let (app, _, _) = app(AuthConfig::Jwt {
        claim: "custom:tenant_id".into(),
        audiences: Vec::new(),
    });
    let response = handle(
        &app,
        request("GET", "/v1/openapi.json", json!({}), None, None),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let Body::Text(text) = response.body() else {
        panic!("a text body");
    };
    assert_eq!(text, OPENAPI);
    let (status, body) = call(
        &app,
        request("POST", "/v1/openapi.json", json!({}), Some("{}"), None),
    )
    .await;
    assert_eq!(
        (status, body["error"]["type"].as_str()),
        (405, Some("method_not_allowed"))
    );
}

#[test]
fn request_deadlines_take_the_earlier_of_the_budget_and_the_invocation() {
    let budget = Duration::from_secs(25);
    assert!(request_deadline(budget, None).remaining() > Duration::from_secs(24));
    let mut context = Context::default();
    assert!(
        request_deadline(budget, Some(&context)).remaining() > Duration::from_secs(24),
        "no deadline in the context: the budget alone"
    );
    context.deadline = 600_000;
    assert!(
        request_deadline(budget, Some(&context)).remaining() > Duration::from_secs(24),
        "cargo lambda watch's fixed, long past deadline: the budget alone"
    );
    let in_five_seconds = std::time::SystemTime::now() + Duration::from_secs(5);
    context.deadline = in_five_seconds
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(request_deadline(budget, Some(&context)).remaining() <= Duration::from_secs(5));
}

#[test]
fn a_malformed_escape_in_the_contact_id_is_never_decoded() {
    // `%+4` is no escape (a sign is not a hex digit): it stays as it is, and `%` is
    // not allowed in a contact id.
    for malformed in ["ana%+40x", "%+4", "%-1", "%zz", "%", "ana%4"] {
        let error = contact_id(malformed).unwrap_err();
        assert_eq!(error.status, 400);
        assert!(
            error.message.contains(r#"(found "%")"#),
            "{malformed}: {}",
            error.message
        );
    }
    assert_eq!(contact_id("a%2Bb%40c").unwrap().as_str(), "a+b@c");
    assert_eq!(
        contact_id("ana%40example.com").unwrap().as_str(),
        "ana@example.com"
    );
    let error = contact_id("%ff%fe").unwrap_err();
    assert!(error.message.contains("UTF-8"), "{}", error.message);
}

#[test]
fn routes_parse_with_and_without_the_local_prefix() {
    let endpoint = |path| parse_route(path).map(|m| (m.spec.endpoint, m.contact));
    assert_eq!(
        endpoint("/v1/contacts/x/messages"),
        Some((Endpoint::Messages, Some("x")))
    );
    assert_eq!(
        endpoint("/lambda-url/ask/v1/contacts/x/memory"),
        Some((Endpoint::Memory, Some("x")))
    );
    assert_eq!(
        endpoint("/v1/contacts/x"),
        Some((Endpoint::Contact, Some("x")))
    );
    assert_eq!(
        endpoint("/v1/contacts/x/context"),
        Some((Endpoint::Context, Some("x")))
    );
    assert_eq!(
        endpoint("/v1/contacts/x/rounds"),
        Some((Endpoint::Rounds, Some("x")))
    );
    assert_eq!(
        endpoint("/v1/openapi.json"),
        Some((Endpoint::OpenApi, None))
    );
    assert_eq!(endpoint("/v1/contacts/x/messages/extra"), None);
    assert_eq!(
        endpoint("/v1/contacts/"),
        Some((Endpoint::Contact, Some("")))
    );
}

#[tokio::test]
async fn the_routes_publish_their_events_after_the_change_and_only_for_a_tenant_with_an_events_webhook()
 {
    use degrau::events::{EventType, MemoryEvents};
    use degrau::tenant::{TenantConfig, TenantStore};

    let (mut app, store, model) = app(AuthConfig::Dev);
    let events = Arc::new(MemoryEvents::default());
    app.events = events.clone();
    let headers = json!({"content-type": "application/json", "x-tenant-id": "acme",
                         "x-scopes": "memory:read memory:write", "x-operator": "ops-1"});
    let run = |method: &'static str, path: &'static str, body: Option<&'static str>| {
        let app = &app;
        let headers = headers.clone();
        async move { call(app, request(method, path, headers, body, None)).await }
    };
    model.push(ScriptedModel::text("Hi", Usage::default()));
    assert_eq!(
        run(
            "POST",
            "/v1/contacts/ana/messages",
            Some(r#"{"text":"hi"}"#)
        )
        .await
        .0,
        200
    );
    // Without an events webhook: nothing.
    let (status, _) = run(
        "PUT",
        "/v1/contacts/ana/facts/name",
        Some(r#"{"value":"Ana"}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert!(events.published().is_empty());

    let config: TenantConfig = serde_json::from_value(json!({"events_webhook": {
        "url": "https://crm.example.com/e", "secret_parameter": "/degrau/webhooks/acme/e"}}))
    .unwrap();
    let acme = degrau::domain::TenantId::parse("acme").unwrap();
    store.put_tenant_config(&acme, &config).await.unwrap();
    // A refused change publishes nothing.
    let (status, _) = run("DELETE", "/v1/contacts/ana/facts/city", None).await;
    assert_eq!(status, 404);
    for (method, path, body) in [
        (
            "PUT",
            "/v1/contacts/ana/facts/name",
            Some(r#"{"value":"Ana Maria"}"#),
        ),
        ("POST", "/v1/contacts/ana/handoff", None),
        ("POST", "/v1/contacts/ana/handback", None),
        ("POST", "/v1/contacts/ana/handback", None),
        ("DELETE", "/v1/contacts/ana/facts/name", None),
        ("DELETE", "/v1/contacts/ana", None),
    ] {
        let (status, body) = run(method, path, body).await;
        assert_eq!(status, 200, "{method} {path}: {body}");
    }
    let published = events.published();
    let kinds: Vec<EventType> = published.iter().map(|(_, o)| o.kind).collect();
    assert_eq!(
        kinds,
        [
            EventType::FactSet,
            EventType::HandoffStarted,
            EventType::HandoffEnded,
            EventType::FactDeleted,
            EventType::ContactErased
        ],
        "a handback with no handoff in force ends nothing"
    );
    assert!(published.iter().all(|(webhook, o)| {
        webhook.secret_parameter == "/degrau/webhooks/acme/e" && o.contact.as_str() == "ana"
    }));
    assert_eq!(published[0].1.data["value"], "Ana Maria");
    assert_eq!(published[0].1.data["by"], "operator");
}

#[tokio::test]
async fn a_config_with_a_bad_whatsapp_section_is_400_naming_the_field_and_stores_nothing() {
    use degrau::tenant::TenantStore;
    let (app, store, _) = app(AuthConfig::Dev);
    let put = |body: &'static str| {
        let mut headers = dev_headers();
        headers["if-match"] = json!("\"v0\"");
        headers["x-scopes"] = json!("tenant:admin");
        request("PUT", "/v1/tenant/config", headers, Some(body), None)
    };
    for (body, names) in [
        (
            r#"{"whatsapp": {"template": {"name": "Bad Name", "language": "pt_BR"}}}"#,
            "config: whatsapp.template.name: whatsapp.template.name must be",
        ),
        (
            r#"{"whatsapp": {"handoff_hours": 0}}"#,
            "config: whatsapp.handoff_hours: whatsapp.handoff_hours must be 1-168",
        ),
        (
            r#"{"whatsapp": {"templat": null}}"#,
            "config: whatsapp.templat: unknown field `templat`",
        ),
    ] {
        let (status, error) = call(&app, put(body)).await;
        assert_eq!(
            (status, error["error"]["type"].as_str()),
            (400, Some("invalid_request")),
            "{body}: {error}"
        );
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(names), "{body}: {message}");
    }
    let tenant = TenantId::parse("acme").unwrap();
    assert_eq!(store.tenant_config(&tenant).await.unwrap(), None);
    let (status, _) = call(&app, put(r#"{"whatsapp": {"handoff_hours": 2}}"#)).await;
    assert_eq!(status, 200);
    let config = store.tenant_config(&tenant).await.unwrap().unwrap();
    let settings = degrau_whatsapp::settings::WhatsAppSettings::of(Some(&config)).unwrap();
    assert_eq!(settings.handoff_seconds(), 7200);
}
