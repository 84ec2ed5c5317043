//! Maps API Gateway HTTP API (payload v2) requests to the ask service and its results
//! back to HTTP. Always returns a response: an `Err` from an HTTP handler becomes a
//! bare 502 at API Gateway.

use std::time::Duration;

use degrau::ask::{
    AskError, AskOutcome, AskService, PageSize, SessionSelector, format_cursor, parse_cursor,
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
    fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        HttpError {
            status,
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request", message)
    }
}

/// The one place a service error becomes an HTTP status.
fn from_service(error: AskError) -> HttpError {
    match error {
        AskError::InvalidRequest(message) => HttpError::invalid(message),
        AskError::TooLarge(message) => HttpError::new(413, "too_large", message),
        AskError::NotFound(message) => HttpError::new(404, "not_found", message),
        AskError::Conflict(message) => HttpError::new(409, "conflict", message),
        error @ AskError::IdempotencyMismatch => {
            HttpError::new(422, "idempotency_mismatch", error.to_string())
        }
        AskError::Model(ModelError::RateLimited { retry_after }) => HttpError {
            retry_after: Some(retry_after.unwrap_or(10)),
            ..HttpError::new(
                429,
                "rate_limited",
                "the model is rate limiting; nothing was stored, retry later",
            )
        },
        AskError::Model(ModelError::Timeout) => HttpError::new(
            504,
            "model_timeout",
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
            HttpError::new(502, "model_error", message)
        }
        error @ AskError::Refused => HttpError::new(502, "model_refused", error.to_string()),
        error @ (AskError::ToolLoop
        | AskError::EmptyAnswer
        | AskError::TruncatedToolCall
        | AskError::UnexpectedStop(_)) => HttpError::new(502, "model_error", error.to_string()),
        AskError::Store(StoreError::Unavailable(detail)) => {
            warn!(%detail, "storage unavailable");
            HttpError {
                retry_after: Some(1),
                ..HttpError::new(
                    503,
                    "unavailable",
                    "storage is busy; nothing was stored, retry shortly",
                )
            }
        }
        AskError::Store(StoreError::Conflict(_)) => HttpError::new(
            409,
            "conflict",
            "another request for this contact changed it at the same time; retry",
        ),
        error @ (AskError::Store(_) | AskError::Internal(_)) => {
            error!(%error, "internal error");
            HttpError::new(500, "internal_error", "internal error; nothing was stored")
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

/// The routes, from the path without stage.
enum Route {
    Messages(String),
    Memory(String),
    Contact(String),
}

fn parse_route(path: &str) -> Option<Route> {
    // Under `cargo lambda watch` without a router, paths arrive as /lambda-url/ask/...
    let path = path.strip_prefix("/lambda-url/ask").unwrap_or(path);
    let rest = path.strip_prefix("/v1/contacts/")?;
    let segments: Vec<&str> = rest.split('/').collect();
    match segments.as_slice() {
        [contact, "messages"] => Some(Route::Messages((*contact).to_owned())),
        [contact, "memory"] => Some(Route::Memory((*contact).to_owned())),
        [contact] => Some(Route::Contact((*contact).to_owned())),
        _ => None,
    }
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
    let route = parse_route(path).ok_or_else(|| {
        HttpError::new(
            404,
            "not_found",
            format!("no route for {} {}", request.method(), path),
        )
    })?;
    let method = request.method().as_str();
    let allowed = match &route {
        Route::Messages(_) => "GET, POST",
        Route::Memory(_) => "GET",
        Route::Contact(_) => "DELETE",
    };
    if !allowed.split(", ").any(|m| m == method) {
        return Err(HttpError::new(
            405,
            "method_not_allowed",
            format!("{method} is not allowed here; use {allowed}"),
        ));
    }
    let tenant = tenant(&app.auth, request)?;
    let contact = match &route {
        Route::Messages(c) | Route::Memory(c) | Route::Contact(c) => contact_id(c)?,
    };
    let key = ContactKey { tenant, contact };
    let service = &app.service;
    match (route, method) {
        (Route::Messages(_), "POST") => post_message(service, &key, request, deadline).await,
        (Route::Messages(_), _) => {
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
        (Route::Memory(_), _) => {
            let view = service.memory(&key).await.map_err(from_service)?;
            let body = serde_json::to_string(&view)
                .map_err(|e| HttpError::new(500, "internal_error", e.to_string()))?;
            Ok(json_response(200, body))
        }
        (Route::Contact(_), _) => {
            let items = service.erase(&key).await.map_err(from_service)?;
            Ok(json_response(
                200,
                json!({"erased": true, "items": items}).to_string(),
            ))
        }
    }
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
    if let Some(kind) = request.headers().get("content-type") {
        let kind = kind.to_str().unwrap_or_default().to_ascii_lowercase();
        if !kind.starts_with("application/json") {
            return Err(HttpError::new(
                415,
                "unsupported_media_type",
                "send the body as application/json",
            ));
        }
    }
    let bytes: &[u8] = request.body().as_ref();
    if bytes.len() > MAX_BODY_BYTES {
        return Err(HttpError::new(
            413,
            "too_large",
            format!(
                "the body has {} bytes; the limit is {MAX_BODY_BYTES}",
                bytes.len()
            ),
        ));
    }
    let body: PostBody = serde_json::from_slice(bytes).map_err(|e| {
        HttpError::invalid(format!(
            "the body must be a JSON object {{\"text\": \"...\"}}: {e}"
        ))
    })?;
    let idempotency = match request.headers().get("idempotency-key") {
        None => None,
        Some(value) => {
            let text = value
                .to_str()
                .map_err(|_| HttpError::invalid("Idempotency-Key must be visible ASCII"))?;
            Some(IdempotencyKey::parse(text).map_err(|e| HttpError::invalid(e.to_string()))?)
        }
    };
    match service
        .ask(key, &body.text, idempotency.as_ref(), deadline)
        .await
        .map_err(from_service)?
    {
        AskOutcome::Answered(response) => {
            let body = serde_json::to_string(&response)
                .map_err(|e| HttpError::new(500, "internal_error", e.to_string()))?;
            Ok(json_response(200, body))
        }
        AskOutcome::Replayed(body) => {
            let mut response = json_response(200, body);
            response.headers_mut().insert(
                "idempotent-replayed",
                lambda_http::http::HeaderValue::from_static("true"),
            );
            Ok(response)
        }
    }
}

fn tenant(auth: &AuthConfig, request: &Request) -> Result<TenantId, HttpError> {
    let unauthenticated = |message: &str| HttpError::new(401, "unauthenticated", message);
    let value = match auth {
        AuthConfig::Jwt { claim } => match request.request_context_ref() {
            Some(RequestContext::ApiGatewayV2(context)) => context
                .authorizer
                .as_ref()
                .and_then(|a| a.jwt.as_ref())
                .and_then(|jwt| jwt.claims.get(claim))
                .cloned(),
            _ => None,
        }
        .ok_or_else(|| unauthenticated("no verified tenant claim in the token"))?,
        AuthConfig::Dev => request
            .headers()
            .get("x-tenant-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| unauthenticated("AUTH_MODE=dev: send the tenant in X-Tenant-Id"))?,
    };
    TenantId::parse(&value).map_err(|e| unauthenticated(&e.to_string()))
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
    use degrau::model::scripted::ScriptedModel;
    use degrau::session::system_clock;
    use degrau::store::memory::MemoryStore;
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
        assert!(
            matches!(parse_route("/v1/contacts/x/messages"), Some(Route::Messages(c)) if c == "x")
        );
        assert!(matches!(
            parse_route("/lambda-url/ask/v1/contacts/x/memory"),
            Some(Route::Memory(_))
        ));
        assert!(matches!(
            parse_route("/v1/contacts/x"),
            Some(Route::Contact(_))
        ));
        assert!(parse_route("/v1/contacts/x/messages/extra").is_none());
        assert!(
            parse_route("/v1/contacts/")
                .is_some_and(|r| matches!(r, Route::Contact(c) if c.is_empty()))
        );
    }
}
