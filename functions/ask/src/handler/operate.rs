//! The operator routes: the tenant's contacts, a contact's facts (read, set,
//! delete), the tenant's configuration (read; replaced under `If-Match`), its usage
//! per day, who has a WhatsApp conversation (handoff, handback), and the memory
//! inspector page. Each route needs its scope
//! ([`ScopeConfig`](degrau_adapters::config::ScopeConfig)); a request without it is
//! 403 with nothing read or written.

use degrau::domain::{FactKey, TenantId};
use degrau::metering::{DAY, parse_day};
use degrau::operate::{ConfigState, Operate};
use degrau::store::{ContactCursor, ContactKey, FactRecord};
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{operator, require_scope};
use super::handoff::Move;
use super::{
    App, Endpoint, ErrorType, HttpError, INSPECTOR, MAX_BODY_BYTES, contact_id, from_service,
    json_body, json_body_within, json_response,
};

/// Largest `PUT /v1/tenant/config` body, in bytes: instructions and a few webhook
/// tools' schemas fit many times over, and the `CONFIG` item stays far below
/// DynamoDB's 400 KB.
pub const MAX_CONFIG_BODY_BYTES: usize = 64 * 1024;

/// The page, as `text/html`.
pub(super) fn inspector() -> Response<Body> {
    let mut response = Response::new(Body::from(INSPECTOR));
    response.headers_mut().insert(
        "content-type",
        lambda_http::http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // The page loads nothing from elsewhere and runs only its own inline script.
    response.headers_mut().insert(
        "content-security-policy",
        lambda_http::http::HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'",
        ),
    );
    response
}

/// Answers an operator route, or `None` for the others.
pub(super) async fn route(
    app: &App,
    endpoint: Endpoint,
    tenant: &TenantId,
    contact: Option<&str>,
    key: Option<&str>,
    request: &Request,
) -> Option<Result<Response<Body>, HttpError>> {
    let scopes = &app.scopes;
    let (scope, answer) = match endpoint {
        Endpoint::Contacts => (&scopes.memory_read, Op::Contacts),
        Endpoint::Facts => (&scopes.memory_read, Op::Facts),
        Endpoint::Fact if request.method() == "PUT" => (&scopes.memory_write, Op::PutFact),
        Endpoint::Fact => (&scopes.memory_write, Op::DeleteFact),
        Endpoint::TenantConfig if request.method() == "PUT" => {
            (&scopes.tenant_admin, Op::PutConfig)
        }
        Endpoint::TenantConfig => (&scopes.tenant_admin, Op::GetConfig),
        Endpoint::Usage => (&scopes.tenant_admin, Op::Usage),
        Endpoint::Handoff if request.method() == "POST" => {
            (&scopes.memory_write, Op::Handoff(Move::HandOff))
        }
        Endpoint::Handoff => (&scopes.memory_read, Op::Handoff(Move::Show)),
        Endpoint::Handback => (&scopes.memory_write, Op::Handoff(Move::HandBack)),
        _ => return None,
    };
    let result = match require_scope(&app.auth, scopes, request, scope) {
        Err(error) => Err(error),
        Ok(()) => answer.run(app, tenant, contact, key, request).await,
    };
    Some(result)
}

enum Op {
    Contacts,
    Facts,
    PutFact,
    DeleteFact,
    GetConfig,
    PutConfig,
    Usage,
    Handoff(Move),
}

impl Op {
    async fn run(
        self,
        app: &App,
        tenant: &TenantId,
        contact: Option<&str>,
        key: Option<&str>,
        request: &Request,
    ) -> Result<Response<Body>, HttpError> {
        let service = &app.operate;
        let contact_key = || -> Result<ContactKey, HttpError> {
            Ok(ContactKey {
                tenant: tenant.clone(),
                contact: contact_id(contact.unwrap_or_default())?,
            })
        };
        let fact_key = || -> Result<FactKey, HttpError> {
            FactKey::parse(key.unwrap_or_default()).map_err(|e| HttpError::invalid(e.to_string()))
        };
        match self {
            Op::Contacts => contacts(service, tenant, request).await,
            Op::Facts => {
                let records = service.facts(&contact_key()?).await.map_err(from_service)?;
                let facts: Vec<Value> = records.iter().map(fact_json).collect();
                Ok(json_response(200, json!({ "facts": facts }).to_string()))
            }
            Op::PutFact => {
                let (key, fact) = (contact_key()?, fact_key()?);
                let bytes = json_body_within(request, MAX_BODY_BYTES)?;
                let body: FactBody = serde_json::from_slice(bytes).map_err(|e| {
                    HttpError::invalid(format!(
                        "the body must be a JSON object {{\"value\": \"...\"}}: {e}"
                    ))
                })?;
                let operator = operator(&app.auth, request)?;
                let record = service
                    .set_fact(&key, &fact, &body.value, &operator)
                    .await
                    .map_err(from_service)?;
                super::events::fact_set(app, &key, &record).await;
                Ok(json_response(200, fact_json(&record).to_string()))
            }
            Op::DeleteFact => {
                let (key, fact) = (contact_key()?, fact_key()?);
                service
                    .delete_fact(&key, &fact)
                    .await
                    .map_err(from_service)?;
                super::events::fact_deleted(app, &key, &fact).await;
                Ok(json_response(
                    200,
                    json!({"deleted": true, "key": fact.as_str()}).to_string(),
                ))
            }
            Op::GetConfig => {
                let state = service.config_state(tenant).await.map_err(from_service)?;
                Ok(config_response(&state))
            }
            Op::PutConfig => put_config(service, tenant, request).await,
            Op::Usage => usage(service, tenant, request).await,
            Op::Handoff(how) => super::handoff::answer(app, &contact_key()?, how, request).await,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FactBody {
    value: String,
}

async fn contacts(
    service: &Operate,
    tenant: &TenantId,
    request: &Request,
) -> Result<Response<Body>, HttpError> {
    let query = request.query_string_parameters_ref();
    let param = |name: &str| query.and_then(|q| q.first(name));
    let limit = param("limit")
        .map(|text| {
            text.parse::<usize>()
                .map_err(|_| HttpError::invalid("`limit` must be a whole number from 1 to 100"))
        })
        .transpose()?;
    let cursor = param("cursor")
        .map(|text| {
            ContactCursor::parse(text).ok_or_else(|| {
                HttpError::invalid("`cursor` is not a cursor this API gave (`next_cursor`)")
            })
        })
        .transpose()?;
    let page = service
        .contacts(tenant, limit, cursor.as_ref())
        .await
        .map_err(from_service)?;
    let contacts: Vec<Value> = page
        .contacts
        .iter()
        .map(|c| {
            json!({
                "contact": c.contact.as_str(),
                "session": c.session,
                "last_activity": c.last_activity,
                "messages": c.messages,
                "facts": c.facts,
            })
        })
        .collect();
    let body = json!({
        "contacts": contacts,
        "next_cursor": page.next.as_ref().map(ContactCursor::format),
    });
    Ok(json_response(200, body.to_string()))
}

/// Who set a value, as the API shows it.
fn set_by(source: degrau::domain::FactSource, operator: Option<&str>) -> Value {
    match operator {
        Some(by) => {
            json!({"kind": "operator", "by": by, "session": source.session, "seq": source.seq})
        }
        None => json!({"kind": "model", "session": source.session, "seq": source.seq}),
    }
}

fn fact_json(record: &FactRecord) -> Value {
    let fact = &record.fact;
    json!({
        "key": fact.key.as_str(),
        "value": fact.value,
        "set_by": set_by(fact.source, fact.operator.as_deref()),
        "updated_at": fact.updated_at,
        "expires_at": record.expires_at,
        "history": fact.history.iter().map(|revision| json!({
            "value": revision.value,
            "set_by": set_by(revision.source, revision.operator.as_deref()),
            "updated_at": revision.updated_at,
            "replaced_at": revision.replaced_at,
        })).collect::<Vec<Value>>(),
    })
}

/// `"v{version}"`, quoted as an ETag is.
pub(super) fn etag(version: u64) -> String {
    format!("\"v{version}\"")
}

fn config_response(state: &ConfigState) -> Response<Body> {
    let config: Value = state
        .stored
        .as_ref()
        .map(|stored| {
            serde_json::from_str(&stored.text).unwrap_or(Value::String(stored.text.clone()))
        })
        .unwrap_or(Value::Null);
    let tag = etag(state.version());
    let body = json!({
        "config": config,
        "etag": tag,
        "valid": state.problem.is_none(),
        "problem": state.problem,
        "clamped": state.clamped,
        "policy": bounds_json(&state.policy),
    });
    let mut response = json_response(200, body.to_string());
    if let Ok(value) = lambda_http::http::HeaderValue::from_str(&tag) {
        response.headers_mut().insert("etag", value);
    }
    response
}

/// What of the platform's policy a tenant's configuration lives in, as the
/// configuration's view shows it to the tenant.
fn bounds_json(policy: &degrau::platform::Policy) -> Value {
    json!({
        "suspended": policy.suspended,
        "rounds_per_hour": policy.rounds_per_hour,
        "summary_calls_per_hour": policy.summary_calls_per_hour,
        "models": policy.models,
        "max_thinking_budget_tokens": policy.max_thinking_budget_tokens,
        "max_compaction_threshold_tokens": policy.max_compaction_threshold_tokens,
        "max_transcript_retention_days": policy.max_transcript_retention_days,
        "max_fact_retention_days": policy.max_fact_retention_days,
        "max_webhook_tools": policy.max_webhook_tools,
    })
}

async fn put_config(
    service: &Operate,
    tenant: &TenantId,
    request: &Request,
) -> Result<Response<Body>, HttpError> {
    let expected = if_match(request, "GET /v1/tenant/config")?;
    let bytes = json_body_within(request, MAX_CONFIG_BODY_BYTES)?;
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| HttpError::invalid(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(HttpError::invalid(
            "the configuration must be a JSON object",
        ));
    }
    check_tool_schemas(&value)?;
    let state = service
        .replace_config(tenant, &value.to_string(), expected)
        .await
        .map_err(from_service)?;
    Ok(config_response(&state))
}

/// The version `If-Match` names (`"v3"`; `"v0"`: none stored): 428 without one,
/// 400 for one this API did not give. `read` names the route that gives it.
pub(super) fn if_match(request: &Request, read: &str) -> Result<u64, HttpError> {
    let Some(if_match) = request.headers().get("if-match") else {
        return Err(HttpError::new(
            ErrorType::PreconditionRequired,
            format!(
                "send If-Match with the ETag of the version this replaces ({read}; \"v0\" when \
                 none is stored)"
            ),
        ));
    };
    if_match
        .to_str()
        .ok()
        .map(|text| text.trim().trim_start_matches("W/"))
        .and_then(|text| {
            text.strip_prefix("\"v")?
                .strip_suffix('"')?
                .parse::<u64>()
                .ok()
        })
        .ok_or_else(|| HttpError::invalid("If-Match must be an ETag this API gave, such as \"v3\""))
}

/// Each webhook tool's `input_schema` must be a valid JSON Schema (checked
/// against the draft 2020-12 meta-schema by the `jsonschema` crate): the model
/// would be given it, and the Messages API refuses a tool whose schema is not.
fn check_tool_schemas(config: &Value) -> Result<(), HttpError> {
    let Some(tools) = config.get("tools").and_then(Value::as_array) else {
        return Ok(());
    };
    for (index, tool) in tools.iter().enumerate() {
        let Some(schema) = tool.get("input_schema") else {
            continue;
        };
        if let Err(error) = jsonschema::meta::validate(schema) {
            return Err(HttpError::invalid(format!(
                "config: tools[{index}].input_schema is not a valid JSON Schema: {error} (at {})",
                error.instance_path()
            )));
        }
    }
    Ok(())
}

async fn usage(
    service: &Operate,
    tenant: &TenantId,
    request: &Request,
) -> Result<Response<Body>, HttpError> {
    let query = request.query_string_parameters_ref();
    let day = |name: &str| -> Result<Option<i64>, HttpError> {
        query
            .and_then(|q| q.first(name))
            .map(|text| {
                parse_day(text).ok_or_else(|| {
                    HttpError::invalid(format!("`{name}` must be a date, YYYY-MM-DD"))
                })
            })
            .transpose()
    };
    let today = (service.clock)().div_euclid(DAY);
    let to = day("to")?.unwrap_or(today);
    let from = day("from")?.unwrap_or(to - 6);
    let days = service
        .usage(tenant, from, to)
        .await
        .map_err(from_service)?;
    json_body(&json!({
        "from": degrau::metering::format_day(from),
        "to": degrau::metering::format_day(to),
        "days": days,
    }))
}
