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

use degrau::channel::ChannelChecks;
use degrau::converse::Converse;
use degrau::deadline::Deadline;
use degrau::domain::{ContactId, IdempotencyKey};
use degrau::operate::Operate;
use degrau::records::Records;
use degrau::store::ContactKey;
use degrau_adapters::config::{AuthConfig, ScopeConfig};
use degrau_whatsapp::settings::WhatsAppSettingsCheck;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Context, Request, RequestExt, Response};
use serde_json::json;

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

use contact::PostBody;
#[cfg(test)]
use contact::TranscriptQuery;
pub use errors::{ErrorType, service_error_type};
use errors::{HttpError, from_service};

/// The handler's dependencies, built once at init.
pub struct App {
    /// The conversation service (messages, rounds, context, sessions closed).
    pub converse: Converse,
    /// What is kept about a contact (memory, transcript, sessions, erasure).
    pub records: Records,
    /// The operator routes' service.
    pub operate: Operate,
    /// How the tenant is found.
    pub auth: AuthConfig,
    /// The scopes the operator routes need.
    pub scopes: ScopeConfig,
    /// The platform's routes' service.
    pub platform: degrau::operate::platform::PlatformAdmin,
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
        platform: degrau::operate::platform::PlatformAdmin {
            policies: deps.store.clone(),
            usage: deps.store.clone(),
            defaults: deps.config.defaults.clone(),
            clock: deps.clock.clone(),
        },
        records: Records::on(
            deps.store.clone(),
            deps.config.defaults.clone(),
            deps.clock.clone(),
        ),
        operate: Operate::on(
            deps.store.clone(),
            deps.config.defaults.clone(),
            deps.clock.clone(),
        )
        .checking(channel_checks()),
        converse: Converse {
            store: deps.store.clone(),
            records: deps.store.clone(),
            recall: deps.store.clone(),
            usage: deps.store.clone(),
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

/// The channels' settings checks this function registers, so a config write with
/// a bad channel section is refused (400) as one with any bad field is: WhatsApp's
/// (`degrau_whatsapp::settings`). A new channel adds its own here.
pub fn channel_checks() -> ChannelChecks {
    ChannelChecks::default().with(std::sync::Arc::new(WhatsAppSettingsCheck))
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
    contact::route(app, (spec.endpoint, method), &key, request, deadline).await
}

/// A 200 with `value` as its JSON body.
fn json_body(value: &impl serde::Serialize) -> Result<Response<Body>, HttpError> {
    let body = serde_json::to_string(value)
        .map_err(|e| HttpError::new(ErrorType::InternalError, e.to_string()))?;
    Ok(json_response(200, body))
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
mod contact;
mod errors;
mod handoff;
mod operate;
mod platform;
mod routes;
pub mod stream;

#[cfg(test)]
mod tests;
