//! A contact's own routes: a message asked, a round recorded, the transcript, the
//! memory view, the context, the session closed or listed, and erasure. The
//! router ([`super::route`]) has found the route, checked its method and resolved
//! the tenant and the contact before any of these runs.

use degrau::converse::{AskOutcome, Converse, RoundOutcome, RoundRequest, close_session};
use degrau::deadline::Deadline;
use degrau::records::{PageSize, SessionSelector, format_cursor, parse_cursor};
use degrau::store::{ContactKey, Cursor};
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    App, Endpoint, ErrorType, HttpError, MAX_BODY_BYTES, MAX_ROUND_BODY_BYTES, OPENAPI, events,
    from_service, handoff, idempotency_key, json_body, json_body_within, json_response, recall,
    replayed,
};

/// Answers a contact's route (`endpoint` with `method`) for `key`.
pub(super) async fn route(
    app: &App,
    (endpoint, method): (Endpoint, &str),
    key: &ContactKey,
    request: &Request,
    deadline: Deadline,
) -> Result<Response<Body>, HttpError> {
    let service = &app.converse;
    match (endpoint, method) {
        (Endpoint::Messages, "POST") => post_message(service, key, request, deadline).await,
        (Endpoint::Messages, _) => get_messages(app, key, request).await,
        (Endpoint::Memory, _) => json_body(&app.records.memory(key).await.map_err(from_service)?),
        (Endpoint::Context, _) => get_context(app, key, deadline).await,
        (Endpoint::Rounds, _) => post_round(service, key, request, deadline).await,
        (Endpoint::Contact, _) => {
            let items = app.records.erase(key).await.map_err(from_service)?;
            events::contact_erased(app, key).await;
            Ok(json_response(
                200,
                json!({"erased": true, "items": items}).to_string(),
            ))
        }
        (Endpoint::Sessions, "POST") => {
            let closed = close_session(service, key, deadline)
                .await
                .map_err(from_service)?;
            json_body(&closed)
        }
        (Endpoint::Sessions, _) => {
            recall::get_sessions(&app.records, key, request.query_string_parameters_ref()).await
        }
        (Endpoint::OpenApi, _) => Ok(json_response(200, OPENAPI.to_owned())),
        // Answered by the router before a contact's routes.
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

/// The transcript, a page (`GET .../messages`), each reply with where its
/// WhatsApp delivery stands.
async fn get_messages(
    app: &App,
    key: &ContactKey,
    request: &Request,
) -> Result<Response<Body>, HttpError> {
    let query = TranscriptQuery::try_from(request.query_string_parameters_ref())?;
    let page = app
        .records
        .transcript(key, query.session, query.limit, query.before)
        .await
        .map_err(from_service)?;
    let deliveries = handoff::deliveries(app, key).await?;
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

/// The context a client's own loop sends (`GET .../context`), with who has the
/// conversation: a client's own loop should not answer while a person has it.
async fn get_context(
    app: &App,
    key: &ContactKey,
    deadline: Deadline,
) -> Result<Response<Body>, HttpError> {
    let view = app
        .converse
        .context(key, deadline)
        .await
        .map_err(from_service)?;
    let mut body = serde_json::to_value(&view)
        .map_err(|e| HttpError::new(ErrorType::InternalError, e.to_string()))?;
    body["handoff"] = handoff::current(app, key).await?;
    Ok(json_response(200, body.to_string()))
}

/// The transcript's query parameters (`session`, `limit`, `before`), parsed at the
/// edge; each bad one is 400 `invalid_request` with its documented message (`limit`
/// is checked first, then `before`, then `session`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TranscriptQuery {
    pub(super) session: SessionSelector,
    pub(super) limit: PageSize,
    pub(super) before: Option<Cursor>,
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

/// The body of `POST .../messages` (and its streamed twin).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PostBody {
    pub(super) text: String,
}

async fn post_message(
    service: &Converse,
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
    service: &Converse,
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
