//! The platform's routes (`/v1/platform/tenants…`): every tenant with its usage,
//! and each tenant's policy (read; replaced under `If-Match`). They need the
//! platform scope ([`ScopeConfig::platform_admin`]) and no tenant claim: a
//! platform operator acts on every tenant, and a tenant's token, whatever scopes
//! its tenant gave it, is refused (403) with nothing read or written.
//!
//! [`ScopeConfig::platform_admin`]: degrau_adapters::config::ScopeConfig::platform_admin

use degrau::domain::TenantId;
use degrau::metering::{format_day, parse_day};
use degrau::operate::platform::{PlatformAdmin, PolicyState};
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::{Value, json};

use super::auth::require_platform;
use super::operate::{etag, if_match};
use super::{App, Endpoint, HttpError, from_service, json_body_within, json_response};

/// Largest `PUT …/policy` body, in bytes.
pub const MAX_POLICY_BODY_BYTES: usize = 16 * 1024;

/// Answers a platform route, or `None` for the others.
pub(super) async fn route(
    app: &App,
    endpoint: Endpoint,
    tenant: Option<&str>,
    request: &Request,
) -> Option<Result<Response<Body>, HttpError>> {
    if !matches!(
        endpoint,
        Endpoint::PlatformTenants | Endpoint::PlatformPolicy
    ) {
        return None;
    }
    if let Err(error) = require_platform(&app.auth, &app.scopes, request) {
        return Some(Err(error));
    }
    let admin = &app.platform;
    Some(match endpoint {
        Endpoint::PlatformTenants => tenants(admin, request).await,
        _ => {
            let tenant = match TenantId::parse(tenant.unwrap_or_default()) {
                Ok(tenant) => tenant,
                Err(error) => return Some(Err(HttpError::invalid(error.to_string()))),
            };
            match request.method().as_str() {
                "PUT" => put_policy(admin, &tenant, request).await,
                _ => admin
                    .policy(&tenant)
                    .await
                    .map(|state| policy_response(&tenant, &state))
                    .map_err(from_service),
            }
        }
    })
}

async fn tenants(admin: &PlatformAdmin, request: &Request) -> Result<Response<Body>, HttpError> {
    let query = request.query_string_parameters_ref();
    let param = |name: &str| query.and_then(|q| q.first(name));
    let limit = param("limit")
        .map(|text| {
            text.parse::<usize>()
                .map_err(|_| HttpError::invalid("`limit` must be a whole number from 1 to 100"))
        })
        .transpose()?;
    let after = param("cursor")
        .map(|text| {
            TenantId::parse(text).map_err(|_| {
                HttpError::invalid("`cursor` is not a cursor this API gave (`next_cursor`)")
            })
        })
        .transpose()?;
    let day = |name: &str| -> Result<Option<i64>, HttpError> {
        param(name)
            .map(|text| {
                parse_day(text).ok_or_else(|| {
                    HttpError::invalid(format!("`{name}` must be a date, YYYY-MM-DD"))
                })
            })
            .transpose()
    };
    let today = (admin.clock)().div_euclid(degrau::metering::DAY);
    let to = day("to")?.unwrap_or(today);
    let from = day("from")?.unwrap_or(to);
    let (tenants, next) = admin
        .tenants(limit, after.as_ref(), Some((from, to)))
        .await
        .map_err(from_service)?;
    let body = json!({
        "from": format_day(from),
        "to": format_day(to),
        "tenants": tenants,
        "next_cursor": next.as_ref().map(TenantId::as_str),
    });
    Ok(json_response(200, body.to_string()))
}

async fn put_policy(
    admin: &PlatformAdmin,
    tenant: &TenantId,
    request: &Request,
) -> Result<Response<Body>, HttpError> {
    let read = format!("GET /v1/platform/tenants/{tenant}/policy");
    let expected = if_match(request, &read)?;
    let bytes = json_body_within(request, MAX_POLICY_BODY_BYTES)?;
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| HttpError::invalid(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(HttpError::invalid("the policy must be a JSON object"));
    }
    let state = admin
        .replace_policy(tenant, &value.to_string(), expected)
        .await
        .map_err(from_service)?;
    Ok(policy_response(tenant, &state))
}

fn policy_response(tenant: &TenantId, state: &PolicyState) -> Response<Body> {
    let stored: Value = state
        .stored
        .as_ref()
        .map(|stored| {
            serde_json::from_str(&stored.text).unwrap_or(Value::String(stored.text.clone()))
        })
        .unwrap_or(Value::Null);
    let tag = etag(state.version());
    let body = json!({
        "tenant": tenant.as_str(),
        "policy": stored,
        "etag": tag,
        "valid": state.problem.is_none(),
        "problem": state.problem,
        "in_force": state.policy,
    });
    let mut response = json_response(200, body.to_string());
    if let Ok(value) = lambda_http::http::HeaderValue::from_str(&tag) {
        response.headers_mut().insert("etag", value);
    }
    response
}
