//! SDK errors mapped onto [`StoreError`], once for the whole adapter: throttling,
//! 5xx, timeouts and dispatch failures are [`StoreError::Unavailable`]; a failed
//! condition is an answer, not an error (a conflict for a round, `Ok(false)` for a
//! job's write); the rest is [`StoreError::Other`]. A transaction DynamoDB cancelled
//! only because another transaction on one of its items was in flight
//! (`TransactionConflict`) wrote nothing, and is tried again here a few times before
//! it counts as unavailable.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::TransactWriteItem;
use degrau::store::StoreError;

/// Attempts at a transaction cancelled by a `TransactionConflict` (another
/// transaction on one of its items in flight) before it is [`StoreError::Unavailable`]:
/// the backoffs between them add up to well under a second.
const TRANSACTION_CONFLICT_ATTEMPTS: u32 = 4;

/// The error code of a single write whose condition failed.
const CONDITIONAL_CHECK_FAILED: &str = "ConditionalCheckFailedException";

/// Error codes DynamoDB answers when retrying later may succeed.
const TRANSIENT_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
    "ServiceUnavailable",
    "LimitExceededException",
];

/// Runs a transaction. One that DynamoDB cancelled only because another
/// transaction on one of its items was in flight (`TransactionConflict`) wrote
/// nothing and is tried again, up to [`TRANSACTION_CONFLICT_ATTEMPTS`] times
/// with a short jittered backoff; then, or on any other failure, the error is
/// mapped by [`transaction_error`].
pub(super) async fn transact(
    client: &Client,
    items: Vec<TransactWriteItem>,
) -> Result<(), StoreError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = client
            .transact_write_items()
            .set_transact_items(Some(items.clone()))
            .send()
            .await;
        match result {
            Ok(_) => return Ok(()),
            Err(err)
                if attempt < TRANSACTION_CONFLICT_ATTEMPTS && is_transaction_conflict(&err) =>
            {
                tracing::info!(attempt, "transaction conflict: trying again");
                tokio::time::sleep(backoff(attempt)).await;
            }
            Err(err) => return Err(transaction_error(err)),
        }
    }
}

/// Runs a transaction whose failed conditions mean "not now, and nothing
/// written" (a duplicate step, an erased contact): `Ok(false)` then.
pub async fn transact_if(
    client: &Client,
    items: Vec<TransactWriteItem>,
) -> Result<bool, StoreError> {
    match transact(client, items).await {
        Ok(()) => Ok(true),
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(other) => Err(other),
    }
}

/// The output of a conditional single write, `None` when its condition failed
/// (nothing was written), or its mapped error.
pub fn unless_condition_failed<T, E>(
    operation: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
) -> Result<Option<T>, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(output) => Ok(Some(output)),
        Err(SdkError::ServiceError(ctx)) if ctx.err().code() == Some(CONDITIONAL_CHECK_FAILED) => {
            Ok(None)
        }
        Err(err) => Err(sdk_error(operation, err)),
    }
}

/// Exponential backoff with jitter: about 50 ms, 100 ms, … capped near 2 s (the
/// core's, which the in-memory store's simulation waits too).
pub(super) use degrau::store::retry_backoff as backoff;

/// Maps an SDK failure: throttling, 5xx, timeouts and dispatch failures are
/// [`StoreError::Unavailable`]; anything else is [`StoreError::Other`].
pub fn sdk_error<E>(operation: &str, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let transient = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(ctx) => {
            ctx.raw().status().is_server_error()
                || ctx
                    .err()
                    .code()
                    .is_some_and(|code| TRANSIENT_CODES.contains(&code))
        }
        _ => false,
    };
    let message = format!("{operation}: {}", DisplayErrorContext(&err));
    if transient {
        tracing::warn!(operation, "dynamodb unavailable");
        StoreError::Unavailable(message)
    } else {
        StoreError::Other(message)
    }
}

/// Why a transaction was cancelled: its cancellation reasons' codes and its
/// message, which names the reasons too ("… [ConditionalCheckFailed, None]") when
/// they come without codes. `None` when it was not cancelled.
fn cancellation(
    err: &SdkError<TransactWriteItemsError, HttpResponse>,
) -> Option<(Vec<&str>, &str)> {
    let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
        err.as_service_error()
    else {
        return None;
    };
    let codes = cancelled
        .cancellation_reasons()
        .iter()
        .filter_map(|reason| reason.code())
        .collect();
    Some((codes, cancelled.message().unwrap_or_default()))
}

/// True when a transaction was cancelled only because another transaction on one of
/// its items was in flight: a `TransactionConflict` reason and no failed condition.
/// Nothing was written, and trying again may succeed.
fn is_transaction_conflict(err: &SdkError<TransactWriteItemsError, HttpResponse>) -> bool {
    let Some((codes, message)) = cancellation(err) else {
        return false;
    };
    let conflict = codes.contains(&"TransactionConflict")
        || (codes.is_empty() && message.contains("TransactionConflict"));
    let condition_failed =
        codes.contains(&"ConditionalCheckFailed") || message.contains("ConditionalCheckFailed");
    conflict && !condition_failed
}

/// Maps a failed round: any failed condition is a [`StoreError::Conflict`] (someone
/// committed first); a transaction that lost to another or was throttled is
/// [`StoreError::Unavailable`].
fn transaction_error(err: SdkError<TransactWriteItemsError, HttpResponse>) -> StoreError {
    if let Some((codes, message)) = cancellation(&err) {
        if codes.contains(&"ConditionalCheckFailed")
            || (codes.is_empty() && message.contains("ConditionalCheckFailed"))
        {
            return StoreError::Conflict("the contact's head or a message changed".into());
        }
        let transient = [
            "TransactionConflict",
            "ThrottlingError",
            "ProvisionedThroughputExceeded",
        ];
        if codes.iter().any(|code| transient.contains(code))
            || transient.iter().any(|code| message.contains(code))
        {
            return StoreError::Unavailable(format!("transaction cancelled: {codes:?}"));
        }
        return StoreError::Other(format!("transaction cancelled: {codes:?} {message}"));
    }
    sdk_error("transact_write_items", err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16) -> HttpResponse {
        HttpResponse::new(status.try_into().unwrap(), "".into())
    }

    fn cancelled(codes: &[&str]) -> SdkError<TransactWriteItemsError, HttpResponse> {
        use aws_sdk_dynamodb::types::CancellationReason;
        use aws_sdk_dynamodb::types::error::TransactionCanceledException;
        let mut err = TransactionCanceledException::builder().message("Transaction cancelled");
        for code in codes {
            err = err.cancellation_reasons(CancellationReason::builder().code(*code).build());
        }
        SdkError::service_error(
            TransactWriteItemsError::TransactionCanceledException(err.build()),
            response(400),
        )
    }

    #[test]
    fn a_failed_condition_in_a_round_is_a_conflict() {
        let err = transaction_error(cancelled(&["None", "ConditionalCheckFailed", "None"]));
        assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    }

    #[test]
    fn a_round_that_lost_a_race_or_was_throttled_is_unavailable() {
        for code in [
            "TransactionConflict",
            "ThrottlingError",
            "ProvisionedThroughputExceeded",
        ] {
            let err = transaction_error(cancelled(&["None", code]));
            assert!(matches!(err, StoreError::Unavailable(_)), "{code}: {err:?}");
        }
        let err = transaction_error(cancelled(&["ValidationError"]));
        assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    }

    #[test]
    fn only_a_transaction_conflict_without_a_failed_condition_is_tried_again() {
        assert!(is_transaction_conflict(&cancelled(&[
            "None",
            "TransactionConflict"
        ])));
        assert!(!is_transaction_conflict(&cancelled(&[
            "ConditionalCheckFailed",
            "TransactionConflict"
        ])));
        assert!(!is_transaction_conflict(&cancelled(&["ThrottlingError"])));
        let err = transaction_error(cancelled(&["TransactionConflict"]));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    }

    #[test]
    fn throttling_server_errors_and_timeouts_are_unavailable() {
        use aws_sdk_dynamodb::error::ErrorMetadata;
        use aws_sdk_dynamodb::operation::get_item::GetItemError;
        let throttled =
            GetItemError::generic(ErrorMetadata::builder().code("ThrottlingException").build());
        let err = sdk_error(
            "get_item",
            SdkError::service_error(throttled, response(400)),
        );
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let internal = GetItemError::generic(ErrorMetadata::builder().code("Whatever").build());
        let err = sdk_error("get_item", SdkError::service_error(internal, response(503)));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let err = sdk_error::<GetItemError>("get_item", SdkError::timeout_error("slow"));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let invalid =
            GetItemError::generic(ErrorMetadata::builder().code("ValidationException").build());
        let err = sdk_error("get_item", SdkError::service_error(invalid, response(400)));
        assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    }
}
