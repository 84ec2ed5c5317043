//! A forwarder to moto that passes one DynamoDB call at a time, so concurrent
//! transactions behave as DynamoDB's do (see [`OneAtATime`]).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A forwarder to moto that passes one call at a time.
///
/// Why: moto's server runs each request on its own thread with no lock around a
/// transaction. Its `TransactWriteItems` checks the conditions and then writes, and
/// rolls a failed one back by restoring a copy of the whole table taken before it
/// started; so two concurrent transactions can both pass `last_seq = :expected`, and
/// one's rollback can undo the other's writes (a lost message, a head ahead of its
/// transcript). Conditional puts race the same way. DynamoDB does none of this, so
/// the soak reaches DynamoDB through this forwarder: what it checks is degrau's
/// concurrency control, not moto's. (Without it, a soak on moto reports lost and
/// duplicated rounds within seconds.)
pub struct OneAtATime {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl OneAtATime {
    /// Its URL, for `AWS_ENDPOINT_URL_DYNAMODB`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for OneAtATime {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Forwarder {
    upstream: String,
    http: reqwest::Client,
    turn: tokio::sync::Mutex<()>,
}

/// Headers of one connection, not of the message.
const HOP_BY_HOP: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "expect",
];

async fn forward_one(State(forwarder): State<Arc<Forwarder>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    let mut headers = parts.headers.clone();
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    let url = format!(
        "{}{}",
        forwarder.upstream,
        parts.uri.path_and_query().map_or("/", |pq| pq.as_str())
    );
    let _turn = forwarder.turn.lock().await;
    let answer = forwarder
        .http
        .request(parts.method.clone(), url)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let status = answer.status();
    let mut headers = answer.headers().clone();
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// Serves a [`OneAtATime`] forwarder to `upstream` on an ephemeral loopback port.
pub async fn one_at_a_time(upstream: &str) -> OneAtATime {
    let forwarder = Arc::new(Forwarder {
        upstream: upstream.trim_end_matches('/').to_owned(),
        http: reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap_or_default(),
        turn: tokio::sync::Mutex::new(()),
    });
    let app = Router::new().fallback(forward_one).with_state(forwarder);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the forwarder");
    let url = format!(
        "http://{}",
        listener.local_addr().expect("the forwarder's address")
    );
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    OneAtATime { url, task }
}
