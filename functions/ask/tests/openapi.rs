//! `docs/openapi.json` describes the API the handler serves: every route and method
//! of the router's table ([`ROUTES`]) and nothing else, and on every operation every
//! status and error type the handler answers: each [`ErrorType`] (the edge's errors)
//! and the mapping of every service error, enumerated variant by variant.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet};

use ask::handler::{ErrorType, OPENAPI, ROUTES, service_error_type};
use degrau::converse::AskError;
use degrau::model::ModelError;
use degrau::store::StoreError;
use serde_json::Value;

fn doc() -> Value {
    serde_json::from_str(OPENAPI).unwrap()
}

/// Follows a local `$ref`.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(pointer) => doc
            .pointer(pointer.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling $ref {pointer}")),
        None => value,
    }
}

/// Every service error, one of each variant (and of each model and storage error
/// inside one). The match below has no wildcard, so a new variant fails to compile
/// until it is listed; the count check ties the list to the match.
fn every_service_error() -> Vec<AskError> {
    let text = || "x".to_owned();
    let all = vec![
        AskError::InvalidRequest(text()),
        AskError::TooLarge(text()),
        AskError::NotFound(text()),
        AskError::Conflict(text()),
        AskError::InProgress,
        AskError::IdempotencyMismatch,
        AskError::Model(ModelError::InvalidRequest { message: text() }),
        AskError::Model(ModelError::PromptTooLong { message: text() }),
        AskError::Model(ModelError::Authentication { status: 401 }),
        AskError::Model(ModelError::RateLimited { retry_after: None }),
        AskError::Model(ModelError::Unavailable { status: 529 }),
        AskError::Model(ModelError::Timeout),
        AskError::Model(ModelError::Connection(text())),
        AskError::Model(ModelError::Protocol(text())),
        AskError::ToolLoop,
        AskError::EmptyAnswer,
        AskError::Refused,
        AskError::TruncatedToolCall,
        AskError::UnexpectedStop("pause_turn"),
        AskError::Store(StoreError::Conflict(text())),
        AskError::Store(StoreError::Unavailable(text())),
        AskError::Store(StoreError::Corrupt(text())),
        AskError::Store(StoreError::Other(text())),
        AskError::Store(StoreError::InvalidConfig(text())),
        AskError::Internal(text()),
        AskError::TenantConfig(text()),
        AskError::PreconditionFailed(text()),
        AskError::Forbidden(text()),
        AskError::Suspended,
        AskError::Throttled(degrau::fairshare::Throttle {
            what: degrau::fairshare::Limited::Concurrency,
            limit: 2,
            retry_after: 1,
        }),
        AskError::Indeterminate,
        AskError::BrokenWindow(text()),
        AskError::UnsendableRound(text()),
        AskError::QuotaExceeded(degrau::quota::Exhausted {
            kind: degrau::quota::QuotaKind::Rounds,
            limit: 10,
            retry_after: 60,
        }),
    ];
    let variant = |error: &AskError| -> &'static str {
        match error {
            AskError::InvalidRequest(_) => "invalid",
            AskError::TooLarge(_) => "too large",
            AskError::NotFound(_) => "not found",
            AskError::Conflict(_) => "conflict",
            AskError::InProgress => "in progress",
            AskError::IdempotencyMismatch => "mismatch",
            AskError::Model(model) => match model {
                ModelError::InvalidRequest { .. } => "model invalid",
                ModelError::PromptTooLong { .. } => "model too long",
                ModelError::Authentication { .. } => "model auth",
                ModelError::RateLimited { .. } => "model rate",
                ModelError::Unavailable { .. } => "model unavailable",
                ModelError::Timeout => "model timeout",
                ModelError::Connection(_) => "model connection",
                ModelError::Protocol(_) => "model protocol",
            },
            AskError::ToolLoop => "tool loop",
            AskError::EmptyAnswer => "empty",
            AskError::Refused => "refused",
            AskError::TruncatedToolCall => "truncated",
            AskError::UnexpectedStop(_) => "stop",
            AskError::Store(store) => match store {
                StoreError::Conflict(_) => "store conflict",
                StoreError::Unavailable(_) => "store unavailable",
                StoreError::Corrupt(_) => "store corrupt",
                StoreError::Other(_) => "store other",
                StoreError::InvalidConfig(_) => "store config",
            },
            AskError::Internal(_) => "internal",
            AskError::TenantConfig(_) => "tenant config",
            AskError::PreconditionFailed(_) => "precondition",
            AskError::Forbidden(_) => "forbidden",
            AskError::Suspended => "suspended",
            AskError::Throttled(_) => "throttled",
            AskError::Indeterminate => "indeterminate",
            AskError::BrokenWindow(_) => "broken window",
            AskError::UnsendableRound(_) => "unsendable",
            AskError::QuotaExceeded(_) => "quota",
        }
    };
    let distinct: BTreeSet<&str> = all.iter().map(variant).collect();
    assert_eq!(distinct.len(), all.len(), "one of each variant");
    all
}

/// What the handler can answer with an error, type by type: its own edge errors
/// (every [`ErrorType`]) and the mapping of every service error.
fn answered_errors() -> BTreeMap<&'static str, u16> {
    let mut errors: BTreeMap<&'static str, u16> = ErrorType::ALL
        .iter()
        .map(|kind| (kind.as_str(), kind.status()))
        .collect();
    for error in every_service_error() {
        let (status, kind) = service_error_type(error);
        assert_eq!(
            errors.insert(kind, status).unwrap_or(status),
            status,
            "{kind} has one status"
        );
    }
    errors
}

#[test]
fn the_openapi_document_describes_every_route_status_and_error_type_the_handler_answers() {
    let doc = doc();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();

    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .flat_map(|route| {
            route
                .methods
                .iter()
                .map(|m| (route.path.to_owned(), m.to_lowercase()))
        })
        .collect();
    let described: BTreeSet<(String, String)> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "patch", "delete"].contains(&k.as_str()))
                .map(|m| (path.clone(), m.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        described, served,
        "the document's operations are the router's"
    );

    let errors = answered_errors();
    let envelope_types: BTreeSet<&str> = doc
        .pointer("/components/schemas/Error/properties/error/properties/type/enum")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        envelope_types,
        errors.keys().copied().collect(),
        "the envelope's `type` enum"
    );

    for (path, method) in &served {
        let operation = &paths[path][method];
        let responses = operation["responses"].as_object().unwrap();
        assert!(responses.contains_key("200"), "{method} {path}: 200");
        // The public description answers only itself, or 405.
        let expected: Vec<(&str, u16)> = if path == "/v1/openapi.json" || path == "/v1/inspector" {
            vec![("method_not_allowed", 405)]
        } else {
            errors.iter().map(|(k, s)| (*k, *s)).collect()
        };
        for (kind, status) in expected {
            let response = responses
                .get(&status.to_string())
                .map(|r| resolve(&doc, r))
                .unwrap_or_else(|| panic!("{method} {path} does not describe {status}"));
            let types = response["x-error-types"].as_array().unwrap();
            assert!(
                types.iter().any(|t| t == kind),
                "{method} {path} {status} does not list {kind}"
            );
            assert_eq!(
                response["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/Error"
            );
        }
        for status in responses.keys().filter(|s| *s != "200") {
            let status: u16 = status.parse().unwrap();
            assert!(
                errors.values().any(|s| *s == status),
                "{method} {path} describes {status}, which the handler never answers"
            );
        }
    }
}

#[test]
fn every_error_type_has_one_status_and_the_list_holds_each_once() {
    let kinds: BTreeSet<&str> = ErrorType::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(kinds.len(), ErrorType::ALL.len());
    for kind in ErrorType::ALL {
        assert!((400..600).contains(&kind.status()), "{kind:?}");
    }
}

/// `x-degrau-retry`, the clients' one retry policy, decides every error type the
/// handler answers once, and never retries one whose answer says retrying cannot
/// help.
#[test]
fn the_retry_policy_decides_every_error_type_once() {
    let doc = doc();
    let policy = &doc["x-degrau-retry"];
    let decided: BTreeMap<&str, bool> = policy["error_types"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(kind, retry)| (kind.as_str(), retry.as_bool().unwrap()))
        .collect();
    let answered = answered_errors();
    assert_eq!(
        decided.keys().copied().collect::<BTreeSet<_>>(),
        answered.keys().copied().collect::<BTreeSet<_>>(),
        "one decision per error type"
    );
    for kind in [
        ErrorType::RateLimited,
        ErrorType::Unavailable,
        ErrorType::InternalError,
        ErrorType::ModelTimeout,
    ] {
        assert!(decided[kind.as_str()], "{kind:?} is retried");
    }
    for kind in [
        ErrorType::Conflict,
        ErrorType::TenantConfigInvalid,
        ErrorType::ModelError,
        ErrorType::InvalidRequest,
    ] {
        assert!(!decided[kind.as_str()], "{kind:?} is not retried");
    }
    for field in [
        "max_retries",
        "deadline_seconds",
        "initial_backoff_seconds",
        "max_backoff_seconds",
    ] {
        assert!(policy[field].as_f64().unwrap() > 0.0, "{field}");
    }
}
