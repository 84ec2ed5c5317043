//! A call's checks after its faults, in the real API's order: credentials, body,
//! shape and rules, the context limit; then the cache's accounting and the answer.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;

use super::answered::{Answered, answered};
use super::route::Route;
use crate::StandIn;
use crate::error::ApiError;
use crate::parse::{from_bedrock, parse_request, parse_value};
use crate::prompt::Prompt;

/// Everything after the faults: headers, body, limits, cache, answer and its quirk.
pub(super) fn handle(
    standin: &StandIn,
    route: &Route,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    streamed: bool,
) -> Result<Answered, ApiError> {
    check_credentials(route, headers)?;
    let bytes = body.map_err(|rejection| {
        if rejection.status().as_u16() == 413 {
            ApiError::new(413, "Request exceeds the maximum allowed number of bytes.")
        } else {
            ApiError::invalid(format!("could not read the request body: {rejection}"))
        }
    })?;
    let parsed = match route {
        Route::Messages => parse_request(&bytes)?,
        Route::Bedrock { model, .. } => parse_value(&from_bedrock(&bytes, model)?)?,
    };
    let prompt = Prompt::flatten(&parsed.request, &parsed.prelude);
    let total = prompt.total_tokens();
    let config = standin.config();
    if total > config.context_limit {
        return Err(ApiError::invalid(format!(
            "prompt is too long: {total} tokens > {} maximum",
            config.context_limit
        )));
    }

    let (scripted, cached, number) = standin.with(|state| {
        let now = standin.now_ms_of(state);
        let usage = state
            .cache
            .account(&prompt, now, config.min_cacheable_tokens);
        state.messages += 1;
        (state.script.pop_front(), usage, state.messages)
    });
    Ok(answered(
        standin,
        parsed.request,
        &prompt.fingerprint(),
        scripted,
        cached,
        format!("msg_standin_{number}"),
        streamed,
    ))
}

/// The credentials each route asks for: an API key and a version on the Messages
/// API, a SigV4 signature's shape on Bedrock's.
fn check_credentials(route: &Route, headers: &HeaderMap) -> Result<(), ApiError> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    match route {
        Route::Messages => {
            // The official SDKs send the key as `x-api-key` or (the Python SDK 2.x) as
            // `Authorization: Bearer`: either will do.
            let bearer = header("authorization")
                .and_then(|v| v.strip_prefix("Bearer "))
                .is_some_and(|token| !token.trim().is_empty());
            if header("x-api-key").is_none() && !bearer {
                return Err(ApiError::new(401, "x-api-key header is required"));
            }
            if header("anthropic-version").is_none() {
                return Err(ApiError::invalid("anthropic-version: header is required"));
            }
        }
        Route::Bedrock { .. } => {
            // The stand-in cannot know the secret key, so it checks the signature's
            // shape only; a test recomputes the signature from the log.
            let signed = header("authorization").is_some_and(|auth| {
                auth.starts_with("AWS4-HMAC-SHA256 ")
                    && ["Credential=", "SignedHeaders=", "Signature="]
                        .iter()
                        .all(|part| auth.contains(part))
            });
            if !signed || header("x-amz-date").is_none() {
                let mut error = ApiError::new(403, "Missing Authentication Token");
                "MissingAuthenticationTokenException".clone_into(&mut error.kind);
                return Err(error);
            }
        }
    }
    Ok(())
}
