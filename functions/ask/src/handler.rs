//! Maps API Gateway HTTP API (payload v2) requests to the ask service and its results
//! back to HTTP. Always returns a response: an `Err` from an HTTP handler becomes a
//! bare 502 at API Gateway.
//!
//! The routes the router serves are one table, [`ROUTES`], and every error the
//! handler answers has one type of [`ErrorType`], with one status each: the OpenAPI
//! description (`docs/openapi.json`, served at `GET /v1/openapi.json`) is checked
//! against both by the tests.

mod events;
mod recall;

use std::time::Duration;

use degrau::ask::{
    AskError, AskOutcome, AskService, PageSize, RoundOutcome, RoundRequest, SessionSelector,
    close_session, format_cursor, parse_cursor,
};
use degrau::deadline::Deadline;
use degrau::domain::{ContactId, IdempotencyKey};
use degrau::model::ModelError;
use degrau::store::{ContactKey, Cursor, StoreError};
use degrau_adapters::config::{AuthConfig, ScopeConfig};
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

pub use routes::{Endpoint, ROUTES, RouteSpec};

/// The memory inspector, served at `GET /v1/inspector`.
pub const INSPECTOR: &str = include_str!("../inspector/index.html");

pub use errors::ErrorType;

/// The handler's dependencies, built once at init.
pub struct App {
    /// The service.
    pub service: AskService,
    /// How the tenant is found.
    pub auth: AuthConfig,
    /// The scopes the operator routes need.
    pub scopes: ScopeConfig,
    /// The platform's routes' service.
    pub platform: degrau::platform_admin::PlatformAdmin,
    /// Who has a WhatsApp conversation (the handoff routes).
    pub whatsapp: std::sync::Arc<dyn degrau_whatsapp::store::WhatsAppStore>,
    /// Where the routes' events go (`degrau::events`).
    pub events: std::sync::Arc<dyn degrau::events::EventsOut>,
    /// `ASK_TIMEOUT_SECONDS`: the longest a request may take, from its arrival to its
    /// answer.
    pub ask_timeout: Duration,
}

/// The handler's dependencies from the function's wiring, with `timeout` as the
/// time budget of a request.
pub fn app(deps: degrau_adapters::wiring::Dependencies, timeout: Duration) -> App {
    App {
        whatsapp: deps.store.clone(),
        events: deps.events,
        platform: degrau::platform_admin::PlatformAdmin {
            policies: deps.store.clone(),
            usage: deps.store.clone(),
            defaults: deps.config.defaults.clone(),
            clock: deps.clock.clone(),
        },
        service: AskService {
            store: deps.store.clone(),
            quotas: deps.store.clone(),
            tenants: deps.store,
            model: deps.model,
            tools: deps.tools,
            jobs: deps.jobs,
            defaults: deps.config.defaults,
            clock: deps.clock,
        },
        auth: deps.config.auth,
        scopes: deps.config.scopes,
        ask_timeout: timeout,
    }
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
        AskError::Forbidden(message) => HttpError::new(ErrorType::Forbidden, message),
        error @ AskError::Suspended => HttpError::new(ErrorType::Forbidden, error.to_string()),
        AskError::PreconditionFailed(message) => {
            HttpError::new(ErrorType::PreconditionFailed, message)
        }
        error @ AskError::TenantConfig(_) => {
            HttpError::new(ErrorType::TenantConfigInvalid, error.to_string())
        }
        AskError::Store(StoreError::InvalidConfig(reason)) => HttpError::new(
            ErrorType::TenantConfigInvalid,
            format!("the tenant's configuration is not usable: {reason}"),
        ),
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
        AskError::Throttled(throttle) => HttpError {
            retry_after: Some(throttle.retry_after),
            ..HttpError::new(ErrorType::RateLimited, throttle.to_string())
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
        | AskError::UnsendableRound(_)
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

pub(crate) fn json_response(status: u16, body: String) -> Response<Body> {
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

/// Handles one request; never fails. Every answer carries `Request-Id`, the
/// invocation's id, which the function's log lines carry too: a client error
/// names it, and an operator finds the request's logs by it.
pub async fn handle(app: &App, request: Request) -> Response<Body> {
    let deadline = request_deadline(app.ask_timeout, request.lambda_context_ref());
    let mut response = match route(app, &request, deadline).await {
        Ok(response) => response,
        Err(error) => error_response(error),
    };
    let id = request.lambda_context_ref().map(|c| c.request_id.as_str());
    if let Some(Ok(value)) = id
        .filter(|id| !id.is_empty())
        .map(lambda_http::http::HeaderValue::from_str)
    {
        response.headers_mut().insert("request-id", value);
    }
    response
}

/// A matched route and its path segments.
struct Matched<'a> {
    spec: &'static RouteSpec,
    contact: Option<&'a str>,
    key: Option<&'a str>,
    tenant: Option<&'a str>,
}

/// The request's path as the client sent it: HTTP API's raw path, else the URI's.
/// The streaming REST API's resources start below its stage (`v1`), so its raw
/// path lacks the `/v1` the client sent; the URI's has it (lambda_http adds the
/// stage), and one base URL serves both APIs.
fn request_path(request: &Request) -> &str {
    let raw = request.raw_http_path();
    let rest_api = matches!(
        request.request_context_ref(),
        Some(RequestContext::ApiGatewayV1(_))
    );
    if raw.is_empty() || rest_api {
        request.uri().path()
    } else {
        raw
    }
}

/// The route of a path (without stage), and its `{contact}` and `{key}` segments
/// when it has them.
fn parse_route(path: &str) -> Option<Matched<'_>> {
    // Under `cargo lambda watch` without a router, paths arrive as
    // /lambda-url/{function}/...
    let path = match path.strip_prefix("/lambda-url/") {
        Some(rest) => rest.find('/').map_or("/", |at| &rest[at..]),
        None => path,
    };
    let segments: Vec<&str> = path.split('/').collect();
    ROUTES.iter().find_map(|spec| {
        let template: Vec<&str> = spec.path.split('/').collect();
        if template.len() != segments.len() {
            return None;
        }
        let (mut contact, mut key, mut tenant) = (None, None, None);
        for (want, got) in template.iter().zip(&segments) {
            match *want {
                "{contact}" => contact = Some(*got),
                "{key}" => key = Some(*got),
                "{tenant}" => tenant = Some(*got),
                fixed if fixed == *got => {}
                _ => return None,
            }
        }
        Some(Matched {
            spec,
            contact,
            key,
            tenant,
        })
    })
}

async fn route(
    app: &App,
    request: &Request,
    deadline: Deadline,
) -> Result<Response<Body>, HttpError> {
    let path = request_path(request);
    let Matched {
        spec,
        contact,
        key,
        tenant,
    } = parse_route(path).ok_or_else(|| {
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
    if spec.endpoint == Endpoint::MessageStream {
        // The streaming API streams it; here (an API that cannot stream) the same
        // events come in one piece once the round ended.
        return Ok(stream::answer(app, request, deadline)
            .await
            .buffered()
            .await);
    }
    if spec.endpoint == Endpoint::Inspector {
        // Public: the page holds no data; it calls the routes with the
        // operator's own credentials.
        return Ok(operate::inspector());
    }
    // The platform's own routes: its scope, and no tenant claim.
    if let Some(answer) = platform::route(app, spec.endpoint, tenant, request).await {
        return answer;
    }
    let tenant = auth::tenant(&app.auth, request)?;
    if let Some(answer) = operate::route(app, spec.endpoint, &tenant, contact, key, request).await {
        return answer;
    }
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
            let deliveries = handoff::deliveries(app, &key).await?;
            let body = json!({
                "messages": page.messages.iter().map(|m| json!({
                    "session": m.session,
                    "seq": m.seq,
                    "role": m.role,
                    "content": m.content,
                    "created_at": m.created_at,
                    "pruned": m.pruned.is_some(),
                    "usage": m.usage,
                    "written_by_person": m.written_by_person,
                    "transcribed": m.transcribed,
                    "delivery": deliveries.get(&(m.session, m.seq)),
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
            // A client's own loop should not answer while a person has the
            // conversation: the context says who has it.
            let mut body = serde_json::to_value(&view)
                .map_err(|e| HttpError::new(ErrorType::InternalError, e.to_string()))?;
            body["handoff"] = handoff::current(app, &key).await?;
            Ok(json_response(200, body.to_string()))
        }
        (Endpoint::Rounds, _) => post_round(service, &key, request, deadline).await,
        (Endpoint::Contact, _) => {
            let items = service.erase(&key).await.map_err(from_service)?;
            events::contact_erased(app, &key).await;
            Ok(json_response(
                200,
                json!({"erased": true, "items": items}).to_string(),
            ))
        }
        (Endpoint::Sessions, "POST") => {
            let closed = close_session(service, &key, deadline)
                .await
                .map_err(from_service)?;
            json_body(&closed)
        }
        (Endpoint::Sessions, _) => {
            recall::get_sessions(service, &key, request.query_string_parameters_ref()).await
        }
        (Endpoint::OpenApi, _) => Ok(json_response(200, OPENAPI.to_owned())),
        // Answered above.
        (
            Endpoint::Contacts
            | Endpoint::Facts
            | Endpoint::Fact
            | Endpoint::TenantConfig
            | Endpoint::Usage
            | Endpoint::Inspector
            | Endpoint::MessageStream
            | Endpoint::PlatformTenants
            | Endpoint::PlatformPolicy
            | Endpoint::Handoff
            | Endpoint::Handback,
            _,
        ) => Err(HttpError::new(
            ErrorType::InternalError,
            "unrouted operator route",
        )),
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

/// The contact id of a path segment, percent-decoded (`%40` is `@`). A `%` that does
/// not start a valid escape (`%+4`, `%zz`) stays as it is, and no contact id may
/// hold a `%`, so it is refused.
fn contact_id(segment: &str) -> Result<ContactId, HttpError> {
    let decoded = percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| HttpError::invalid("the contact id is not valid UTF-8"))?;
    ContactId::parse(&decoded).map_err(|e| HttpError::invalid(e.to_string()))
}

mod auth;
mod errors;
mod handoff;
mod operate;
mod platform;
mod routes;
pub mod stream;

#[cfg(test)]
mod tests;
