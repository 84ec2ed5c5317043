//! The contract's streaming cases (`Model::stream`): before the stream, the same
//! retries and errors as `create`, and the same deadline. What a stream itself
//! carries (its events, a fault inside it) is checked against the stand-in, which
//! speaks both wires' stream formats (`infra/standin/tests/api/stream.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;

use degrau::deadline::Deadline;
use degrau::model::{Model, ModelError, ModelResponse};

use super::{Canned, Fault, Wire, fast, minute, request, serve, serve_hung};
use crate::retry::RetryPolicy;

/// Streams `request()` on a server scripted with `answers`; the outcome, the
/// pieces handed over and the number of requests the server saw.
async fn stream_call<W: Wire>(
    answers: Vec<Canned>,
) -> (Result<ModelResponse, ModelError>, usize, usize) {
    let (url, script) = serve(answers).await;
    let pieces = AtomicUsize::new(0);
    let outcome = W::model(&url, fast())
        .stream(&request(), minute(), &|_| {
            pieces.fetch_add(1, Ordering::SeqCst);
        })
        .await;
    (outcome, pieces.into_inner(), script.requests())
}

pub async fn a_stream_refused_before_it_begins_is_retried_as_a_call_is<W: Wire>() {
    let (outcome, pieces, requests) =
        stream_call::<W>(vec![W::fault(Fault::Throttled, "slow down")]).await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::RateLimited { retry_after: None }
    );
    assert_eq!(
        (pieces, requests),
        (0, 3),
        "the first attempt and two retries"
    );

    let (outcome, _, requests) =
        stream_call::<W>(vec![W::fault(Fault::ServerError, "Internal")]).await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::Unavailable { status: 500 }
    );
    assert_eq!(requests, 3);
}

pub async fn a_stream_refused_for_good_is_not_retried<W: Wire>() {
    let text = "prompt is too long: 210000 tokens > 200000 maximum";
    let (outcome, _, requests) =
        stream_call::<W>(vec![W::fault(Fault::InvalidRequest, text)]).await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::PromptTooLong {
            message: text.to_owned()
        }
    );
    assert_eq!(requests, 1);
    let (outcome, _, requests) =
        stream_call::<W>(vec![W::fault(Fault::Denied, "not authorized")]).await;
    assert!(matches!(outcome, Err(ModelError::Authentication { .. })));
    assert_eq!(requests, 1);
}

pub async fn a_hung_stream_gets_one_attempt_cut_at_the_deadline<W: Wire>() {
    let (url, accepted) = serve_hung().await;
    let policy = RetryPolicy {
        request_timeout: Duration::from_secs(60),
        ..fast()
    };
    let call = W::model(&url, policy);
    let deadline = Deadline::after(Duration::from_millis(1_500));
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        call.stream(&request(), deadline, &|_| {}),
    )
    .await
    .expect("the streamed call ran past its deadline");
    assert_eq!(outcome.unwrap_err(), ModelError::Timeout);
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

pub async fn a_stream_to_a_refused_connection_is_a_connection_error<W: Wire>() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let error = W::model(&url, fast())
        .stream(&request(), minute(), &|_| {})
        .await
        .unwrap_err();
    let ModelError::Connection(text) = error else {
        panic!("expected a connection error, got {error:?}");
    };
    assert!(!text.contains(W::CREDENTIAL), "{text}");
}
