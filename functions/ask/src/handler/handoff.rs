//! Who has a WhatsApp conversation, and the routes that hand it over
//! (`degrau_whatsapp::handoff`): `GET /v1/contacts/{contact}/handoff` (scope
//! `memory:read`) shows it; `POST .../handoff` (optionally `{"hours": n}`, 1–168,
//! the tenant's `whatsapp.handoff_hours` by default) hands it to a person, for an
//! operator or a back office that answers the customer through its own systems;
//! `POST .../handback` gives it back to the agent at once (both scope
//! `memory:write`). Each answers the state after it, and a bad body is 400 with
//! nothing written.

use std::collections::HashMap;

use degrau::domain::TenantId;
use degrau::store::{ContactKey, StoreError};
use degrau_whatsapp::settings::{HandoffHours, MAX_HANDOFF_HOURS, WhatsAppSettings};
use degrau_whatsapp::store::{Handoff, HandoffBy};
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{App, HttpError, MAX_BODY_BYTES, from_service, json_body_within, json_response};

/// What the route does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Move {
    /// Shows who has it.
    Show,
    /// Hands it to a person.
    HandOff,
    /// Gives it back to the agent.
    HandBack,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HandoffBody {
    #[serde(default)]
    hours: Option<HandoffHours>,
}

/// Runs `how` for the contact `key` and answers the state after it.
pub(super) async fn answer(
    app: &App,
    key: &ContactKey,
    how: Move,
    request: &Request,
) -> Result<Response<Body>, HttpError> {
    let now = (app.converse.clock)();
    match how {
        Move::Show => {}
        Move::HandOff => {
            let hours = requested_hours(request)?;
            let seconds = match hours {
                Some(hours) => i64::from(hours.get()) * 3600,
                None => tenant_handoff_seconds(app, &key.tenant).await?,
            };
            let handoff = Handoff {
                by: HandoffBy::Operator,
                since: now,
                until: now.saturating_add(seconds),
            };
            app.whatsapp
                .set_handoff(key, Some(&handoff))
                .await
                .map_err(|e| from_service(e.into()))?;
            super::events::handoff_started(app, key, &handoff).await;
        }
        Move::HandBack => {
            let had = app
                .whatsapp
                .handoff(key, now)
                .await
                .map_err(|e| from_service(e.into()))?;
            app.whatsapp
                .set_handoff(key, None)
                .await
                .map_err(|e| from_service(e.into()))?;
            // Only a handoff that was in force ends.
            if had.is_some() {
                super::events::handoff_ended(app, key).await;
            }
        }
    }
    let handoff = current(app, key).await?;
    let body = json!({
        "contact": key.contact.as_str(),
        "with": if handoff.is_null() { "agent" } else { "person" },
        "handoff": handoff,
    });
    Ok(json_response(200, body.to_string()))
}

/// The contact's handoff as the API shows it: `{"by", "since", "until"}`, or null
/// when the agent has the conversation.
pub(super) async fn current(app: &App, key: &ContactKey) -> Result<Value, HttpError> {
    let now = (app.converse.clock)();
    let handoff = app
        .whatsapp
        .handoff(key, now)
        .await
        .map_err(|e| from_service(e.into()))?;
    Ok(handoff.map_or(
        Value::Null,
        |h| json!({"by": h.by.as_str(), "since": h.since, "until": h.until}),
    ))
}

/// The contact's WhatsApp replies' delivery state, by the transcript message each
/// carries (`GET .../messages` shows it on the reply).
pub(super) async fn deliveries(
    app: &App,
    key: &ContactKey,
) -> Result<HashMap<(u32, u64), Value>, HttpError> {
    let now = (app.converse.clock)();
    let records = app
        .whatsapp
        .deliveries(key, now)
        .await
        .map_err(|e| from_service(e.into()))?;
    Ok(records
        .into_iter()
        .map(|d| {
            let shown =
                json!({"status": d.status, "error_code": d.error_code, "updated_at": d.updated_at});
            ((d.session, d.seq), shown)
        })
        .collect())
}

/// The body's `hours`, if any; an empty body asks for the tenant's default.
fn requested_hours(request: &Request) -> Result<Option<HandoffHours>, HttpError> {
    let bytes = json_body_within(request, MAX_BODY_BYTES)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let refused = || {
        HttpError::invalid(format!(
            "the body must be empty or a JSON object {{\"hours\": n}} with n from 1 to {MAX_HANDOFF_HOURS}"
        ))
    };
    // Read as a value first: serde would take `[1]` for the struct's fields too.
    let value: Value = serde_json::from_slice(bytes).map_err(|_| refused())?;
    if !value.is_object() {
        return Err(refused());
    }
    let body: HandoffBody = serde_json::from_value(value).map_err(|_| refused())?;
    Ok(body.hours)
}

async fn tenant_handoff_seconds(app: &App, tenant: &TenantId) -> Result<i64, HttpError> {
    let config = app
        .converse
        .tenants
        .tenant_config(tenant)
        .await
        .map_err(|e| from_service(e.into()))?;
    let settings = WhatsAppSettings::of(config.as_ref())
        .map_err(|reason| from_service(StoreError::InvalidConfig(reason).into()))?;
    Ok(settings.handoff_seconds())
}
