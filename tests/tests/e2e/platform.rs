//! The platform over its tenants through the real `ask` binary on moto: as
//! `tenant:admin`, raising the quota above the ceiling, lifting a suspension,
//! choosing a model outside the list or a retention over the bound is refused
//! naming the bound and leaves `CONFIG` unchanged; the platform's route (scope
//! `platform:admin`, no tenant) changes them, lists the tenants with their usage,
//! and a tenant's token, whatever its scopes, is refused there. Every answer is
//! held to `docs/openapi.json`.

use degrau_tests::stack::{FullStack, StackOptions, model_calls};
use degrau_tests::{HttpReply, unique};
use serde_json::{Value, json};

const ADMIN: &str = "tenant:admin";
const PLATFORM: &str = "platform:admin";

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
    let mut headers = vec![("x-scopes", scopes)];
    headers.extend_from_slice(extra);
    stack
        .call_with(method, path, query, tenant, &headers, body)
        .await
}

/// The deployment of the issue: five rounds an hour, two priced models, a month
/// of transcripts at most.
async fn stack() -> FullStack {
    let env = [
        ("QUOTA_ROUNDS_PER_HOUR", "5"),
        ("PRICES", "claude-sonnet-5=3/15,claude-haiku-4-5=1/5"),
        ("ALLOWED_MODELS", "claude-sonnet-5,claude-haiku-4-5"),
        ("MAX_TRANSCRIPT_RETENTION_DAYS", "30"),
    ];
    FullStack::start_with(&StackOptions {
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..StackOptions::default()
    })
    .await
}

async fn put_config(stack: &FullStack, tenant: &str, etag: &str, config: Value) -> HttpReply {
    op(
        stack,
        "PUT /v1/tenant/config",
        tenant,
        ADMIN,
        &[("if-match", etag)],
        Some(&config.to_string()),
    )
    .await
}

async fn put_policy(stack: &FullStack, tenant: &str, etag: &str, policy: Value) -> HttpReply {
    op(
        stack,
        &format!("PUT /v1/platform/tenants/{tenant}/policy"),
        "",
        PLATFORM,
        &[("if-match", etag)],
        Some(&policy.to_string()),
    )
    .await
}

#[tokio::test]
async fn a_tenant_admin_cannot_lift_the_platforms_limits_and_the_platform_route_changes_them() {
    let stack = stack().await;
    let tenant = unique("shop");
    let stored = put_config(
        &stack,
        &tenant,
        "\"v0\"",
        json!({"quota": {"rounds_per_hour": 4}}),
    )
    .await;
    assert_eq!(stored.status, 200, "{}", stored.raw);
    assert_eq!(stored.body["etag"], "\"v1\"");
    assert_eq!(stored.body["policy"]["rounds_per_hour"], 5);

    // Each way out of the platform's bounds: 403 naming the bound, CONFIG unchanged.
    for (config, bound) in [
        (
            json!({"quota": {"rounds_per_hour": 4_294_967_295_u64}}),
            "rounds_per_hour",
        ),
        (json!({"model": "claude-opus-5"}), "models"),
        (
            json!({"transcript_retention_days": 400}),
            "max_transcript_retention_days",
        ),
    ] {
        let refused = put_config(&stack, &tenant, "\"v1\"", config.clone()).await;
        assert_eq!(
            (refused.status, refused.error_type()),
            (403, Some("forbidden")),
            "{config}: {}",
            refused.raw
        );
        let message = refused.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(bound), "{message}");
    }
    let view = op(&stack, "GET /v1/tenant/config", &tenant, ADMIN, &[], None).await;
    assert_eq!(view.body["etag"], "\"v1\"", "CONFIG unchanged");
    assert_eq!(
        view.body["config"],
        json!({"quota": {"rounds_per_hour": 4}})
    );

    // A tenant's token reaches nothing of the platform's, whatever its scopes.
    let path = format!("GET /v1/platform/tenants/{tenant}/policy");
    for scopes in [ADMIN, "memory:read memory:write tenant:admin"] {
        let denied = op(&stack, &path, &tenant, scopes, &[], None).await;
        assert_eq!(denied.status, 403, "{}", denied.raw);
    }

    // The platform suspends it: no round, whatever the tenant writes then.
    let suspended = put_policy(&stack, &tenant, "\"v0\"", json!({"suspended": true})).await;
    assert_eq!(suspended.status, 200, "{}", suspended.raw);
    assert_eq!(suspended.body["etag"], "\"v1\"");
    let lift = put_config(
        &stack,
        &tenant,
        "\"v1\"",
        json!({"quota": {"rounds_per_hour": 5}}),
    )
    .await;
    assert_eq!(
        lift.status, 200,
        "inside the ceiling it is stored: {}",
        lift.raw
    );
    assert_eq!(lift.body["policy"]["suspended"], true);
    let refused = stack.post(&tenant, "ana", "oi").await;
    assert_eq!(
        (refused.status, refused.error_type()),
        (403, Some("forbidden"))
    );
    assert!(
        model_calls(&stack.standin.requests().await).is_empty(),
        "no model call"
    );

    // The platform lifts the suspension and gives this tenant a plan of its own:
    // more rounds, another model with its price, a longer retention.
    let plan = json!({
        "rounds_per_hour": 50,
        "models": {"claude-opus-5": {"input": 15, "output": 75}},
        "max_transcript_retention_days": 400
    });
    let set = put_policy(&stack, &tenant, "\"v1\"", plan).await;
    assert_eq!(set.status, 200, "{}", set.raw);
    assert_eq!(set.body["in_force"]["suspended"], false);
    let raised = put_config(
        &stack,
        &tenant,
        "\"v2\"",
        json!({"quota": {"rounds_per_hour": 40}, "model": "claude-opus-5",
               "transcript_retention_days": 400}),
    )
    .await;
    assert_eq!(raised.status, 200, "{}", raised.raw);
    assert_eq!(raised.body["etag"], "\"v3\"", "its own version");
    let answered = stack.post(&tenant, "ana", "oi").await;
    assert_eq!(answered.status, 200, "{}", answered.raw);

    // Usage prices the tenant's model; the platform lists the tenant with it.
    let usage = op(&stack, "GET /v1/usage", &tenant, ADMIN, &[], None).await;
    let day = &usage.body["days"][0];
    assert_eq!(day["tokens"][0]["model"], "claude-opus-5");
    assert!(day["cost_usd"].is_number(), "{}", usage.raw);
    let listed = all_tenants(&stack).await;
    let me = listed
        .iter()
        .find(|t| t["tenant"] == tenant.as_str())
        .expect("the tenant is listed");
    assert_eq!(me["usage"]["rounds"], 1);
    assert_eq!(me["policy_version"], 2);
    assert!(me["usage"]["cost_usd"].is_number());

    // A stale ETag changes nothing.
    let stale = put_policy(&stack, &tenant, "\"v1\"", json!({})).await;
    assert_eq!(stale.status, 412);
}

#[tokio::test]
async fn the_platforms_routes_need_its_scope_and_refuse_bad_input_changing_nothing() {
    let stack = stack().await;
    let tenant = unique("shop");
    let none = op(&stack, "GET /v1/platform/tenants", "", "", &[], None).await;
    assert_eq!(none.status, 403);
    let path = format!("PUT /v1/platform/tenants/{tenant}/policy");
    for (body, etag, status) in [
        (json!({"suspended": true}), None, 428),
        (
            json!({"fair_share": {"concurrency": 0}}),
            Some("\"v0\""),
            400,
        ),
        (json!({"plan": "gold"}), Some("\"v0\""), 400),
        (json!({"suspended": true}), Some("v0"), 400),
    ] {
        let extra: Vec<(&str, &str)> = etag.map(|e| ("if-match", e)).into_iter().collect();
        let reply = op(&stack, &path, "", PLATFORM, &extra, Some(&body.to_string())).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.raw);
    }
    let view = op(
        &stack,
        &format!("GET /v1/platform/tenants/{tenant}/policy"),
        "",
        PLATFORM,
        &[],
        None,
    )
    .await;
    assert_eq!(view.status, 200, "{}", view.raw);
    assert_eq!(view.body["policy"], Value::Null, "nothing stored");
    assert_eq!(view.body["etag"], "\"v0\"");
    assert_eq!(view.body["in_force"]["rounds_per_hour"], 5);
    let bad = op(
        &stack,
        "GET /v1/platform/tenants?limit=0",
        "",
        PLATFORM,
        &[],
        None,
    )
    .await;
    assert_eq!(bad.status, 400);
}

/// Every tenant the platform lists (the table is this test's own).
async fn all_tenants(stack: &FullStack) -> Vec<Value> {
    let mut tenants = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = cursor.map_or_else(String::new, |c| format!("?cursor={c}"));
        let page = op(
            stack,
            &format!("GET /v1/platform/tenants{query}"),
            "",
            PLATFORM,
            &[],
            None,
        )
        .await;
        assert_eq!(page.status, 200, "{}", page.raw);
        tenants.extend(page.body["tenants"].as_array().unwrap().iter().cloned());
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return tenants,
        }
    }
}
