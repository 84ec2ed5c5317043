//! Maps API Gateway HTTP API (payload v2) requests to the ask service and its results
//! back to HTTP. Always returns a response: an `Err` from an HTTP handler becomes a
//! bare 502 at API Gateway.
//!
//! The routes the router serves are one table, [`ROUTES`], and every error the
//! handler answers has one type of [`ErrorType`], with one status each: the OpenAPI
//! description (`docs/openapi.json`, served at `GET /v1/openapi.json`) is checked
//! against both by the tests.

use std::time::Duration;

use degrau::ask::{
    AskError, AskOutcome, AskService, PageSize, RoundOutcome, RoundRequest, SessionSelector,
    format_cursor, parse_cursor,
};
use degrau::deadline::Deadline;
use degrau::domain::{ContactId, IdempotencyKey, TenantId};
use degrau::model::ModelError;
use degrau::store::{ContactKey, Cursor, StoreError};
use degrau_adapters::config::AuthConfig;
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Context, Request, RequestExt, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::{error, warn};

/// Largest request body accepted, in bytes (the text limit is far below it).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Largest body of a recorded round (`POST .../rounds`), in bytes. A round carries
/// tool results, so it may be larger than a message; this limit keeps the whole
/// round, and so each of its messages, below DynamoDB's 400 KB item limit even if
/// it were one message, and the round's transaction far below DynamoDB's 4 MB, while
/// staying far below API Gateway's 10 MB payload and Lambda's 6 MB. (The tool-result
/// limits, 16,000 characters a result and 64,000 a message, are checked too.)
pub const MAX_ROUND_BODY_BYTES: usize = 256 * 1024;

/// The OpenAPI 3.1 description of this API, served at `GET /v1/openapi.json`.
pub const OPENAPI: &str = include_str!("../../../docs/openapi.json");

/// An endpoint of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST` a message to answer, `GET` the transcript.
    Messages,
    /// The memory view.
    Memory,
    /// What the contact's next model request should carry, for a client's own loop.
    Context,
    /// A round the client ran itself, to commit.
    Rounds,
    /// The contact, to erase.
    Contact,
    /// This API's OpenAPI description (public: it holds no data).
    OpenApi,
}

/// A route: its path as API Gateway writes it (`{contact}` is one path segment),
/// the endpoint, and the methods it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec {
    /// The path template.
    pub path: &'static str,
    /// What it serves.
    pub endpoint: Endpoint,
    /// The methods it answers; any other is 405.
    pub methods: &'static [&'static str],
}

/// Every route the router serves, in one table (`template.yaml` declares the same
/// routes to API Gateway, and `docs/openapi.json` describes them).
pub const ROUTES: &[RouteSpec] = &[
    RouteSpec {
        path: "/v1/contacts/{contact}/messages",
        endpoint: Endpoint::Messages,
        methods: &["GET", "POST"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/memory",
        endpoint: Endpoint::Memory,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/context",
        endpoint: Endpoint::Context,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/rounds",
        endpoint: Endpoint::Rounds,
        methods: &["POST"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}",
        endpoint: Endpoint::Contact,
        methods: &["DELETE"],
    },
    RouteSpec {
        path: "/v1/openapi.json",
        endpoint: Endpoint::OpenApi,
        methods: &["GET"],
    },
];

/// The type of an error envelope, each with its one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// 400: the request is malformed or breaks a rule.
    InvalidRequest,
    /// 401: no tenant.
    Unauthenticated,
    /// 404: no such route, or nothing known about the contact.
    NotFound,
    /// 405: the route does not answer this method.
    MethodNotAllowed,
    /// 409: a race lost, a stale head, or an idempotency key in progress.
    Conflict,
    /// 413: over a documented limit.
    TooLarge,
    /// 415: the body is not JSON.
    UnsupportedMediaType,
    /// 422: an idempotency key used with another body.
    IdempotencyMismatch,
    /// 429: the model is rate limiting, or the tenant's quota for the hour is spent.
    RateLimited,
    /// 500: a bug or a broken tenant configuration.
    InternalError,
    /// 502: the model failed.
    ModelError,
    /// 502: the model declined to answer.
    ModelRefused,
    /// 503: storage is throttled.
    Unavailable,
    /// 504: the model did not answer in time.
    ModelTimeout,
}

impl ErrorType {
    /// Every type, in status order.
    pub const ALL: [ErrorType; 14] = [
        ErrorType::InvalidRequest,
        ErrorType::Unauthenticated,
        ErrorType::NotFound,
        ErrorType::MethodNotAllowed,
        ErrorType::Conflict,
        ErrorType::TooLarge,
        ErrorType::UnsupportedMediaType,
        ErrorType::IdempotencyMismatch,
        ErrorType::RateLimited,
        ErrorType::InternalError,
        ErrorType::ModelError,
        ErrorType::ModelRefused,
        ErrorType::Unavailable,
        ErrorType::ModelTimeout,
    ];

    /// The `type` of the envelope.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::InvalidRequest => "invalid_request",
            ErrorType::Unauthenticated => "unauthenticated",
            ErrorType::NotFound => "not_found",
            ErrorType::MethodNotAllowed => "method_not_allowed",
            ErrorType::Conflict => "conflict",
            ErrorType::TooLarge => "too_large",
            ErrorType::UnsupportedMediaType => "unsupported_media_type",
            ErrorType::IdempotencyMismatch => "idempotency_mismatch",
            ErrorType::RateLimited => "rate_limited",
            ErrorType::InternalError => "internal_error",
            ErrorType::ModelError => "model_error",
            ErrorType::ModelRefused => "model_refused",
            ErrorType::Unavailable => "unavailable",
            ErrorType::ModelTimeout => "model_timeout",
        }
    }

    /// The HTTP status.
    pub fn status(self) -> u16 {
        match self {
            ErrorType::InvalidRequest => 400,
            ErrorType::Unauthenticated => 401,
            ErrorType::NotFound => 404,
            ErrorType::MethodNotAllowed => 405,
            ErrorType::Conflict => 409,
            ErrorType::TooLarge => 413,
            ErrorType::UnsupportedMediaType => 415,
            ErrorType::IdempotencyMismatch => 422,
            ErrorType::RateLimited => 429,
            ErrorType::InternalError => 500,
            ErrorType::ModelError | ErrorType::ModelRefused => 502,
            ErrorType::Unavailable => 503,
            ErrorType::ModelTimeout => 504,
        }
    }
}

/// The handler's dependencies, built once at init.
pub struct App {
    /// The service.
    pub service: AskService,
    /// How the tenant is found.
    pub auth: AuthConfig,
    /// `ASK_TIMEOUT_SECONDS`: the longest a request may take, from its arrival to its
    /// answer.
    pub ask_timeout: Duration,
}

/// A request's deadline: `budget` from now, or the invocation's own deadline (the
/// Lambda context's) when that comes first. A context without one (built by hand, as
/// tests and some local runners do) leaves the budget alone.
pub fn request_deadline(budget: Duration, context: Option<&Context>) -> Deadline {
    let own = Deadline::after(budget);
    match context.and_then(|c| Deadline::from_epoch_millis(c.deadline)) {
        Some(invocation) => own.earlier(invocation),
        None => own,
    }
}

/// An HTTP error: status, type and message, rendered as the error envelope.
#[derive(Debug)]
struct HttpError {
    status: u16,
    kind: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl HttpError {
    fn new(kind: ErrorType, message: impl Into<String>) -> Self {
        HttpError {
            status: kind.status(),
            kind: kind.as_str(),
            message: message.into(),
            retry_after: None,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorType::InvalidRequest, message)
    }
}

/// The status and envelope type a service error is answered with (what the OpenAPI
/// test enumerates).
pub fn service_error_type(error: AskError) -> (u16, &'static str) {
    let error = from_service(error);
    (error.status, error.kind)
}

/// The one place a service error becomes an HTTP status.
fn from_service(error: AskError) -> HttpError {
    match error {
        AskError::InvalidRequest(message) => HttpError::invalid(message),
        AskError::TooLarge(message) => HttpError::new(ErrorType::TooLarge, message),
        AskError::NotFound(message) => HttpError::new(ErrorType::NotFound, message),
        AskError::Conflict(message) => HttpError::new(ErrorType::Conflict, message),
        error @ AskError::BrokenWindow(_) => {
            warn!(%error, "window read broken");
            HttpError::new(
                ErrorType::Conflict,
                "the conversation was being written while it was read; nothing was stored, send \
                 it again",
            )
        }
        error @ AskError::Indeterminate => {
            warn!("commit outcome not known");
            HttpError {
                retry_after: Some(1),
                ..HttpError::new(ErrorType::Unavailable, error.to_string())
            }
        }
        error @ AskError::IdempotencyMismatch => {
            HttpError::new(ErrorType::IdempotencyMismatch, error.to_string())
        }
        AskError::Model(ModelError::RateLimited { retry_after }) => HttpError {
            retry_after: Some(retry_after.unwrap_or(10)),
            ..HttpError::new(
                ErrorType::RateLimited,
                "the model is rate limiting; nothing was stored, retry later",
            )
        },
        error @ AskError::QuotaExceeded(exhausted) => HttpError {
            retry_after: Some(exhausted.retry_after),
            ..HttpError::new(ErrorType::RateLimited, error.to_string())
        },
        AskError::Model(ModelError::Timeout) => HttpError::new(
            ErrorType::ModelTimeout,
            "the model did not answer in time; nothing was stored",
        ),
        AskError::Model(error) => {
            warn!(%error, "model error");
            let message = match error {
                ModelError::Unavailable { .. } | ModelError::Connection(_) => {
                    "the model is unavailable; nothing was stored, retry later"
                }
                ModelError::PromptTooLong { .. } => {
                    "the conversation is too long for the model; nothing was stored"
                }
                _ => "the model call failed; nothing was stored",
            };
            HttpError::new(ErrorType::ModelError, message)
        }
        error @ AskError::Refused => HttpError::new(ErrorType::ModelRefused, error.to_string()),
        error @ (AskError::ToolLoop
        | AskError::EmptyAnswer
        | AskError::TruncatedToolCall
        | AskError::UnexpectedStop(_)) => HttpError::new(ErrorType::ModelError, error.to_string()),
        AskError::Store(StoreError::Unavailable(detail)) => {
            warn!(%detail, "storage unavailable");
            HttpError {
                retry_after: Some(1),
                ..HttpError::new(
                    ErrorType::Unavailable,
                    "storage is busy; nothing was stored, retry shortly",
                )
            }
        }
        AskError::Store(StoreError::Conflict(_)) => HttpError::new(
            ErrorType::Conflict,
            "another request for this contact changed it at the same time; retry",
        ),
        error @ (AskError::Store(_) | AskError::Internal(_)) => {
            error!(%error, "internal error");
            HttpError::new(
                ErrorType::InternalError,
                "internal error; nothing was stored",
            )
        }
    }
}

fn json_response(status: u16, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = http_status(status);
    response.headers_mut().insert(
        "content-type",
        lambda_http::http::HeaderValue::from_static("application/json"),
    );
    response
}

fn http_status(status: u16) -> lambda_http::http::StatusCode {
    lambda_http::http::StatusCode::from_u16(status)
        .unwrap_or(lambda_http::http::StatusCode::INTERNAL_SERVER_ERROR)
}

fn error_response(error: HttpError) -> Response<Body> {
    let body = json!({"error": {"type": error.kind, "message": error.message}}).to_string();
    let mut response = json_response(error.status, body);
    if let Some(seconds) = error.retry_after
        && let Ok(value) = lambda_http::http::HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert("retry-after", value);
    }
    response
}

/// Handles one request; never fails.
pub async fn handle(app: &App, request: Request) -> Response<Body> {
    let deadline = request_deadline(app.ask_timeout, request.lambda_context_ref());
    match route(app, &request, deadline).await {
        Ok(response) => response,
        Err(error) => error_response(error),
    }
}

/// The route of a path (without stage), and its `{contact}` segment when it has
/// one.
fn parse_route(path: &str) -> Option<(&'static RouteSpec, Option<&str>)> {
    // Under `cargo lambda watch` without a router, paths arrive as /lambda-url/ask/...
    let path = path.strip_prefix("/lambda-url/ask").unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    ROUTES.iter().find_map(|spec| {
        let template: Vec<&str> = spec.path.split('/').collect();
        if template.len() != segments.len() {
            return None;
        }
        let mut contact = None;
        for (want, got) in template.iter().zip(&segments) {
            match *want {
                "{contact}" => contact = Some(*got),
                fixed if fixed == *got => {}
                _ => return None,
            }
        }
        Some((spec, contact))
    })
}

async fn route(
    app: &App,
    request: &Request,
    deadline: Deadline,
) -> Result<Response<Body>, HttpError> {
    let raw = request.raw_http_path();
    let path = if raw.is_empty() {
        request.uri().path()
    } else {
        raw
    };
    let (spec, contact) = parse_route(path).ok_or_else(|| {
        HttpError::new(
            ErrorType::NotFound,
            format!("no route for {} {}", request.method(), path),
        )
    })?;
    let method = request.method().as_str();
    if !spec.methods.contains(&method) {
        let allowed = spec.methods.join(", ");
        return Err(HttpError::new(
            ErrorType::MethodNotAllowed,
            format!("{method} is not allowed here; use {allowed}"),
        ));
    }
    if spec.endpoint == Endpoint::OpenApi {
        // Public (no tenant): the description of the API holds no data.
        return Ok(json_response(200, OPENAPI.to_owned()));
    }
    let tenant = tenant(&app.auth, request)?;
    let contact = contact_id(contact.unwrap_or_default())?;
    let key = ContactKey { tenant, contact };
    let service = &app.service;
    match (spec.endpoint, method) {
        (Endpoint::Messages, "POST") => post_message(service, &key, request, deadline).await,
        (Endpoint::Messages, _) => {
            let query = TranscriptQuery::try_from(request.query_string_parameters_ref())?;
            let page = service
                .transcript(&key, query.session, query.limit, query.before)
                .await
                .map_err(from_service)?;
            let body = json!({
                "messages": page.messages.iter().map(|m| json!({
                    "session": m.session,
                    "seq": m.seq,
                    "role": m.role,
                    "content": m.content,
                    "created_at": m.created_at,
                })).collect::<Vec<Value>>(),
                "next_before": page.next_before.as_ref().map(format_cursor),
            });
            Ok(json_response(200, body.to_string()))
        }
        (Endpoint::Memory, _) => {
            let view = service.memory(&key).await.map_err(from_service)?;
            json_body(&view)
        }
        (Endpoint::Context, _) => {
            let view = service
                .context(&key, deadline)
                .await
                .map_err(from_service)?;
            json_body(&view)
        }
        (Endpoint::Rounds, _) => post_round(service, &key, request, deadline).await,
        (Endpoint::Contact, _) => {
            let items = service.erase(&key).await.map_err(from_service)?;
            Ok(json_response(
                200,
                json!({"erased": true, "items": items}).to_string(),
            ))
        }
        (Endpoint::OpenApi, _) => Ok(json_response(200, OPENAPI.to_owned())),
    }
}

/// A 200 with `value` as its JSON body.
fn json_body(value: &impl serde::Serialize) -> Result<Response<Body>, HttpError> {
    let body = serde_json::to_string(value)
        .map_err(|e| HttpError::new(ErrorType::InternalError, e.to_string()))?;
    Ok(json_response(200, body))
}

/// The transcript's query parameters (`session`, `limit`, `before`), parsed at the
/// edge; each bad one is 400 `invalid_request` with its documented message (`limit`
/// is checked first, then `before`, then `session`).
#[derive(Debug, PartialEq, Eq)]
struct TranscriptQuery {
    session: SessionSelector,
    limit: PageSize,
    before: Option<Cursor>,
}

impl TryFrom<Option<&QueryMap>> for TranscriptQuery {
    type Error = HttpError;

    fn try_from(query: Option<&QueryMap>) -> Result<Self, HttpError> {
        let param = |name: &str| query.and_then(|q| q.first(name));
        let limit = param("limit")
            .map(PageSize::parse)
            .transpose()
            .map_err(from_service)?
            .unwrap_or_default();
        let before = param("before")
            .map(parse_cursor)
            .transpose()
            .map_err(from_service)?;
        let session = param("session")
            .map(SessionSelector::parse)
            .transpose()
            .map_err(from_service)?
            .unwrap_or_default();
        Ok(TranscriptQuery {
            session,
            limit,
            before,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostBody {
    text: String,
}

async fn post_message(
    service: &AskService,
    key: &ContactKey,
    request: &Request,
    deadline: Deadline,
) -> Result<Response<Body>, HttpError> {
    let bytes = json_body_within(request, MAX_BODY_BYTES)?;
    let body: PostBody = serde_json::from_slice(bytes).map_err(|e| {
        HttpError::invalid(format!(
            "the body must be a JSON object {{\"text\": \"...\"}}: {e}"
        ))
    })?;
    let idempotency = idempotency_key(request)?;
    match service
        .ask(key, &body.text, idempotency.as_ref(), deadline)
        .await
        .map_err(from_service)?
    {
        AskOutcome::Answered(response) => json_body(&response),
        AskOutcome::Replayed(body) => Ok(replayed(body)),
    }
}

/// Commits a round the client ran itself (`POST .../rounds`).
async fn post_round(
    service: &AskService,
    key: &ContactKey,
    request: &Request,
    deadline: Deadline,
) -> Result<Response<Body>, HttpError> {
    let bytes = json_body_within(request, MAX_ROUND_BODY_BYTES)?;
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| HttpError::invalid(format!("the body is not valid JSON: {e}")))?;
    let round = RoundRequest::parse(&value).map_err(from_service)?;
    let idempotency = idempotency_key(request)?;
    match service
        .record_round(key, &round, idempotency.as_ref(), deadline)
        .await
        .map_err(from_service)?
    {
        RoundOutcome::Recorded(recorded) => json_body(&recorded),
        RoundOutcome::Replayed(body) => Ok(replayed(body)),
    }
}

/// The body of a JSON request, when it is declared JSON (or not declared) and
/// within `limit` bytes.
fn json_body_within(request: &Request, limit: usize) -> Result<&[u8], HttpError> {
    if let Some(kind) = request.headers().get("content-type") {
        let kind = kind.to_str().unwrap_or_default().to_ascii_lowercase();
        if !kind.starts_with("application/json") {
            return Err(HttpError::new(
                ErrorType::UnsupportedMediaType,
                "send the body as application/json",
            ));
        }
    }
    let bytes: &[u8] = request.body().as_ref();
    if bytes.len() > limit {
        return Err(HttpError::new(
            ErrorType::TooLarge,
            format!("the body has {} bytes; the limit is {limit}", bytes.len()),
        ));
    }
    Ok(bytes)
}

/// The `Idempotency-Key` header, parsed, when there is one.
fn idempotency_key(request: &Request) -> Result<Option<IdempotencyKey>, HttpError> {
    let Some(value) = request.headers().get("idempotency-key") else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| HttpError::invalid("Idempotency-Key must be visible ASCII"))?;
    IdempotencyKey::parse(text)
        .map(Some)
        .map_err(|e| HttpError::invalid(e.to_string()))
}

/// An idempotent replay: the stored body, marked.
fn replayed(body: String) -> Response<Body> {
    let mut response = json_response(200, body);
    response.headers_mut().insert(
        "idempotent-replayed",
        lambda_http::http::HeaderValue::from_static("true"),
    );
    response
}

fn tenant(auth: &AuthConfig, request: &Request) -> Result<TenantId, HttpError> {
    let unauthenticated = |message: &str| HttpError::new(ErrorType::Unauthenticated, message);
    let value = match auth {
        AuthConfig::Jwt { claim, audiences } => {
            let claims = match request.request_context_ref() {
                Some(RequestContext::ApiGatewayV2(context)) => context
                    .authorizer
                    .as_ref()
                    .and_then(|a| a.jwt.as_ref())
                    .map(|jwt| &jwt.claims),
                _ => None,
            };
            if !audiences.is_empty() && !claims.is_some_and(|c| for_audience(c, audiences)) {
                return Err(unauthenticated("the token is not for this API's audience"));
            }
            claims
                .and_then(|claims| claims.get(claim))
                .cloned()
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
fn for_audience(claims: &std::collections::HashMap<String, String>, audiences: &[String]) -> bool {
    let Some(value) = claims.get("aud").or_else(|| claims.get("client_id")) else {
        return false;
    };
    value
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(|c: char| c == ',' || c.is_whitespace())
        .any(|aud| audiences.iter().any(|wanted| wanted == aud))
}

/// The contact id of a path segment, percent-decoded (`%40` is `@`). A `%` that does
/// not start a valid escape (`%+4`, `%zz`) stays as it is, and no contact id may
/// hold a `%`, so it is refused.
fn contact_id(segment: &str) -> Result<ContactId, HttpError> {
    let decoded = percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| HttpError::invalid("the contact id is not valid UTF-8"))?;
    ContactId::parse(&decoded).map_err(|e| HttpError::invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use degrau::jobs::NoJobs;
    use degrau::memory::MemoryStore;
    use degrau::model::scripted::ScriptedModel;
    use degrau::session::system_clock;
    use degrau::tenant::Defaults;
    use degrau::tools::ToolDispatch;
    use degrau::usage::Usage;

    use super::*;

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
        let service = AskService {
            store: store.clone(),
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
                service,
                auth,
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
                   "compaction_queued": false})
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
        let mut two_users: Value =
            serde_json::from_str(&round_body(&fresh, "q", "toolu_3")).unwrap();
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
        let endpoint = |path| parse_route(path).map(|(spec, contact)| (spec.endpoint, contact));
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
}
