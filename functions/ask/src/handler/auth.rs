//! Who is asking: the tenant (from the verified JWT claim, or `X-Tenant-Id` under
//! `AUTH_MODE=dev`), the scopes an operator route needs (from the token's
//! `SCOPE_CLAIM`, or `X-Scopes`), and the operator's id for a fact's provenance
//! (the token's `sub`, or `X-Operator`).

use std::collections::HashMap;

use degrau::domain::TenantId;
use degrau_adapters::config::{AuthConfig, ScopeConfig};
use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};

use super::{ErrorType, HttpError};

/// Longest operator id kept in a fact's provenance.
pub const MAX_OPERATOR_CHARS: usize = 128;

/// The verified JWT claims API Gateway's authorizer passed, each as text: an HTTP
/// API's JWT authorizer writes them under `authorizer.jwt.claims`, a REST API's
/// Cognito authorizer (the streaming API) under `authorizer.claims`.
fn claims(request: &Request) -> Option<HashMap<String, String>> {
    match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context
            .authorizer
            .as_ref()
            .and_then(|a| a.jwt.as_ref())
            .map(|jwt| jwt.claims.clone()),
        Some(RequestContext::ApiGatewayV1(context)) => {
            let claims = context.authorizer.fields.get("claims")?.as_object()?;
            let text = |value: &serde_json::Value| match value {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            Some(claims.iter().map(|(k, v)| (k.clone(), text(v))).collect())
        }
        _ => None,
    }
}

/// The scopes an HTTP API's authorizer parsed from an access token.
fn parsed_scopes(request: &Request) -> Vec<String> {
    match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context
            .authorizer
            .as_ref()
            .and_then(|a| a.jwt.as_ref())
            .and_then(|jwt| jwt.scopes.clone())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// A header's value as text, when it is one.
fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Refuses the request (403 `forbidden`, nothing read or written) unless its
/// token (or, under `AUTH_MODE=dev`, its `X-Scopes`) carries `scope`.
pub(super) fn require_scope(
    auth: &AuthConfig,
    scopes: &ScopeConfig,
    request: &Request,
    scope: &str,
) -> Result<(), HttpError> {
    let granted: Vec<String> = match auth {
        AuthConfig::Jwt { .. } => {
            let from_claim = claims(request)
                .and_then(|claims| claims.get(&scopes.claim).map(|value| words(value)))
                .unwrap_or_default();
            from_claim
                .into_iter()
                .chain(parsed_scopes(request))
                .collect()
        }
        AuthConfig::Dev => header(request, "x-scopes").map(words).unwrap_or_default(),
    };
    if granted.iter().any(|granted| granted == scope) {
        return Ok(());
    }
    let source = match auth {
        AuthConfig::Jwt { .. } => format!("the token's `{}` claim", scopes.claim),
        AuthConfig::Dev => "X-Scopes".to_owned(),
    };
    Err(HttpError::new(
        ErrorType::Forbidden,
        format!("this route needs the scope `{scope}` in {source}"),
    ))
}

/// Refuses the request (403, nothing read or written) unless it is the platform's:
/// its token carries the platform scope (`SCOPE_PLATFORM_ADMIN`), and, with
/// `JWT_AUDIENCE`, is for one of the deployment's app clients. No tenant claim is
/// needed, and a tenant claim grants nothing here.
pub(super) fn require_platform(
    auth: &AuthConfig,
    scopes: &ScopeConfig,
    request: &Request,
) -> Result<(), HttpError> {
    if let AuthConfig::Jwt { audiences, .. } = auth
        && !audiences.is_empty()
        && !claims(request).is_some_and(|claims| for_audience(&claims, audiences))
    {
        return Err(HttpError::new(
            ErrorType::Unauthenticated,
            "the token is not for this API's audience",
        ));
    }
    require_scope(auth, scopes, request, &scopes.platform_admin)
}

/// The words of a scope claim: space-separated (`scope`), or a list API Gateway
/// wrote as `[a b]` (`cognito:groups`).
fn words(value: &str) -> Vec<String> {
    value
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Who the operator is, for a fact's provenance: the token's `sub`, or under
/// `AUTH_MODE=dev` the `X-Operator` header (`dev` without one). Visible ASCII,
/// at most [`MAX_OPERATOR_CHARS`].
pub(super) fn operator(auth: &AuthConfig, request: &Request) -> Result<String, HttpError> {
    let id = match auth {
        AuthConfig::Jwt { .. } => claims(request).and_then(|mut claims| claims.remove("sub")),
        AuthConfig::Dev => Some(header(request, "x-operator").unwrap_or("dev").to_owned()),
    }
    .ok_or_else(|| HttpError::new(ErrorType::Forbidden, "the token names no operator (`sub`)"))?;
    if id.is_empty()
        || id.chars().count() > MAX_OPERATOR_CHARS
        || !id.chars().all(|c| c.is_ascii_graphic())
    {
        return Err(HttpError::invalid(format!(
            "the operator id must be 1-{MAX_OPERATOR_CHARS} visible ASCII characters"
        )));
    }
    Ok(id)
}

pub(super) fn tenant(auth: &AuthConfig, request: &Request) -> Result<TenantId, HttpError> {
    let unauthenticated = |message: &str| HttpError::new(ErrorType::Unauthenticated, message);
    let value = match auth {
        AuthConfig::Jwt { claim, audiences } => {
            let claims = claims(request);
            if !audiences.is_empty() && !claims.as_ref().is_some_and(|c| for_audience(c, audiences))
            {
                return Err(unauthenticated("the token is not for this API's audience"));
            }
            claims
                .and_then(|mut claims| claims.remove(claim))
                .ok_or_else(|| unauthenticated("no verified tenant claim in the token"))?
        }
        AuthConfig::Dev => request
            .headers()
            .get("x-tenant-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| unauthenticated("AUTH_MODE=dev: send the tenant in X-Tenant-Id"))?,
    };
    TenantId::parse(&value).map_err(|e| unauthenticated(&e.to_string()))
}

/// Whether the token was issued for one of `audiences`: its `aud` (an ID token;
/// HTTP API writes a list as `[a b]`), or its `client_id` when it has no `aud` (a
/// Cognito access token).
fn for_audience(claims: &HashMap<String, String>, audiences: &[String]) -> bool {
    let Some(value) = claims.get("aud").or_else(|| claims.get("client_id")) else {
        return false;
    };
    value
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(|c: char| c == ',' || c.is_whitespace())
        .any(|aud| audiences.iter().any(|wanted| wanted == aud))
}
