//! What the services share: the error a request answers with ([`AskError`], by what
//! the client should do about it; the functions' handlers map it to a status),
//! a store call bounded by the request's deadline ([`by`]), and the tenant's
//! settings read as a service reads them ([`settings`]: a stored configuration
//! that does not read, or cannot be honoured, is the tenant's error, counted).
//!
//! The services are the rooms' own: [`crate::converse::Converse`] (a round),
//! [`crate::records::Records`] (what is kept about a contact),
//! [`crate::operate::Operate`] (the operator's routes) and
//! [`crate::compaction::Compactor`] (the jobs and the sweep). Each holds only the
//! ports it calls.

use tracing::warn;

use crate::deadline::Deadline;
use crate::domain::TenantId;
use crate::model::ModelError;
use crate::store::StoreError;
use crate::tenant::{Defaults, InvalidSettings, Settings, TenantStore, stored_settings};

/// Most tool rounds (model calls answered with `tool_use`) in one round.
pub const MAX_TOOL_ITERATIONS: usize = 8;

/// What can go wrong with a request, by what the client should do about it.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The input is wrong (empty text, bad parameter).
    #[error("{0}")]
    InvalidRequest(String),
    /// The input is over a documented limit.
    #[error("{0}")]
    TooLarge(String),
    /// Nothing is known about the contact.
    #[error("{0}")]
    NotFound(String),
    /// Another request won a race: nothing of this one was stored.
    #[error("{0}")]
    Conflict(String),
    /// An earlier request with this `Idempotency-Key` is still running, or its
    /// commit may still land (to its lease): this one ran nothing, and what became
    /// of the earlier one is not known yet. 409, as a conflict; a retry later gets
    /// the stored answer, or runs the round if the earlier one stored nothing.
    #[error("a request with this Idempotency-Key is still in progress; retry later")]
    InProgress,
    /// The idempotency key was used with another body.
    #[error("this Idempotency-Key was already used with a different request body")]
    IdempotencyMismatch,
    /// The model failed (after retries).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model kept asking for tools.
    #[error(
        "the model asked for tools more than {MAX_TOOL_ITERATIONS} times in one round; nothing was stored"
    )]
    ToolLoop,
    /// The model answered with no content.
    #[error("the model returned an empty answer; nothing was stored")]
    EmptyAnswer,
    /// The model declined to answer (`stop_reason` `refusal`).
    #[error("the model declined to answer this message; nothing was stored")]
    Refused,
    /// A tool call was cut off at `max_tokens`, again after one retry with a larger
    /// budget: its input may be incomplete, so it was not run.
    #[error(
        "the model's tool call was cut off by its output limit, also with a larger one; no tool ran and nothing was stored"
    )]
    TruncatedToolCall,
    /// A stop reason degrau does not continue from (`pause_turn`: degrau defines no
    /// server tools).
    #[error(
        "the model stopped with `{0}`, which degrau does not continue from; nothing was stored"
    )]
    UnexpectedStop(&'static str),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The commit failed in a way that does not tell whether it landed, and the
    /// head could not tell either: the round may be stored. A retry with the same
    /// `Idempotency-Key` gets its answer if it is.
    #[error(
        "storage did not confirm the round, and it may be stored; send it again with the same \
         Idempotency-Key to get its answer"
    )]
    Indeterminate,
    /// The window read breaks a rule of the request (two messages of one role): it
    /// was read while a round was landing. `ask` reads it again; after
    /// [`WINDOW_READS`](crate::converse::WINDOW_READS) reads it answers [`AskError::Conflict`], as for a race lost.
    #[error("the stored window could not be read whole: {0}")]
    BrokenWindow(String),
    /// A request after the model answered broke the Messages API's rules: degrau's
    /// own defect, since every answer is made sendable before it is kept
    /// ([`crate::plan::sendable`]). The round stops there: a tool that ran is never run
    /// again by a re-read of the window, and nothing is stored.
    #[error(
        "the round could not go on: its next request would break the Messages API's rules \
         ({0}); no tool was run twice and nothing was stored"
    )]
    UnsendableRound(String),
    /// A bug: a request that could not be built.
    #[error("internal error: {0}")]
    Internal(String),
    /// The tenant's configuration cannot be honoured: its stored `CONFIG` does not
    /// read, or its settings break a rule (the reason names the field).
    #[error("the tenant's configuration is not usable: {0}")]
    TenantConfig(String),
    /// A conditional change found another version than the one it was made from.
    #[error("{0}")]
    PreconditionFailed(String),
    /// The platform's policy does not allow what was asked (a configuration
    /// outside its bounds: the message names the bound; see
    /// [`crate::tenant::bounds`]).
    #[error("{0}")]
    Forbidden(String),
    /// The platform suspended the tenant ([`crate::platform::TenantPolicy`]): no
    /// round runs, whatever its configuration says.
    #[error("this tenant is suspended by the platform; nothing was stored")]
    Suspended,
    /// A limit of the tenant's fair share refused the round
    /// ([`crate::fairshare`]): 429 with `Retry-After`, nothing written.
    #[error(transparent)]
    Throttled(#[from] crate::fairshare::Throttle),
    /// The tenant's quota for this hour is spent ([`crate::quota`]).
    #[error(
        "this tenant's {} for this hour are spent ({} an hour); nothing was stored, retry \
         in {} s",
        .0.kind.as_str().replace('_', " "), .0.limit, .0.retry_after
    )]
    QuotaExceeded(crate::quota::Exhausted),
}

/// The tenant's settings: the defaults with its config item's overrides, by
/// `deadline`.
pub async fn settings(
    tenants: &dyn TenantStore,
    defaults: &Defaults,
    tenant: &TenantId,
    deadline: Deadline,
) -> Result<Settings, AskError> {
    let stored = stored_settings(tenants, defaults, tenant);
    read_config(by(deadline, stored).await)?.map_err(unusable)
}

/// A tenant whose settings cannot be honoured: a configuration error, answered as
/// `tenant_config_invalid` with its reason, and counted.
pub fn unusable(error: InvalidSettings) -> AskError {
    config_unusable(error.0)
}

/// The error of a tenant whose configuration does not read or cannot be honoured,
/// counted (`TenantConfigInvalid`) so an alarm sees it before the tenant does.
pub fn config_unusable(reason: String) -> AskError {
    warn!(%reason, "the tenant's configuration is not usable");
    crate::metrics::Event::new("ask")
        .count("TenantConfigInvalid", 1)
        .emit();
    AskError::TenantConfig(reason)
}

/// A tenant's config (or settings), read: a stored one that does not read is
/// [`AskError::TenantConfig`].
pub fn read_config<T>(result: Result<T, StoreError>) -> Result<T, AskError> {
    match result {
        Err(StoreError::InvalidConfig(reason)) => Err(config_unusable(reason)),
        other => Ok(other?),
    }
}

/// A store call of a request, by its deadline: one that has not answered by then
/// is unavailable (a write may then have landed or not: the caller decides).
pub async fn by<T>(
    deadline: Deadline,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    deadline.run(call).await.unwrap_or_else(|| {
        Err(StoreError::Unavailable(
            "storage did not answer within the request's time".into(),
        ))
    })
}

/// The answer for a contact nothing is known about.
pub fn not_found() -> AskError {
    AskError::NotFound("no conversation with this contact".into())
}
