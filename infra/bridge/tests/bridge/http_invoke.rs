//! `HttpInvoke` against a one-shot HTTP server that answers like `cargo lambda
//! watch` (or the real Invoke API) would.

use std::time::Duration;

use degrau_bridge::{HttpInvoke, Invoke};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A request as the server saw it.
struct Seen {
    head: String,
    body: Value,
}

/// Serves one request with `status`, extra `headers` (CRLF-terminated lines) and
/// `answer`; returns its base URL and the request it got.
async fn answer_once(
    status: &'static str,
    headers: &'static str,
    answer: &'static str,
) -> (String, JoinHandle<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = Vec::new();
        let mut chunk = [0u8; 4096];
        let (head, body) = loop {
            let n = socket.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the client closed before sending a request");
            request.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    break (head.to_owned(), body.to_owned());
                }
            }
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        );
        socket.write_all(response.as_bytes()).await.expect("write");
        socket.shutdown().await.ok();
        Seen {
            head,
            body: serde_json::from_str(&body).unwrap_or(Value::Null),
        }
    });
    (base, server)
}

fn invoker(base: &str) -> HttpInvoke {
    HttpInvoke::new(base, "compactor", Duration::from_secs(30)).expect("an HTTP client")
}

#[tokio::test]
async fn http_invoke_posts_the_event_to_the_invoke_path_and_returns_the_answer() {
    let (base, server) = answer_once(
        "200 OK",
        "",
        r#"{"batchItemFailures":[{"itemIdentifier":"m-2"}]}"#,
    )
    .await;
    let event = json!({"Records": [{"messageId": "m-1"}]});

    let answer = invoker(&base).invoke(event.clone()).await.unwrap();

    assert_eq!(
        answer,
        json!({"batchItemFailures": [{"itemIdentifier": "m-2"}]})
    );
    let seen = server.await.unwrap();
    assert!(
        seen.head
            .starts_with("POST /2015-03-31/functions/compactor/invocations HTTP/1.1"),
        "{}",
        seen.head
    );
    assert_eq!(seen.body, event);
}

#[tokio::test]
async fn a_function_error_is_an_invoke_error_naming_its_type_but_not_its_message() {
    // cargo lambda watch answers an unhandled error with 500 and the error body.
    let (base, _server) = answer_once(
        "500 Internal Server Error",
        "",
        r#"{"errorType":"Timeout","errorMessage":"contact said: something private"}"#,
    )
    .await;

    let error = invoker(&base).invoke(json!({})).await.unwrap_err();

    assert!(error.contains("Timeout"), "{error}");
    assert!(!error.contains("private"), "{error}");
}

#[tokio::test]
async fn the_function_error_header_of_the_invoke_api_is_an_invoke_error() {
    let (base, _server) = answer_once(
        "200 OK",
        "x-amz-function-error: Unhandled\r\n",
        r#"{"errorType":"Panic","errorMessage":"boom"}"#,
    )
    .await;

    let error = invoker(&base).invoke(json!({})).await.unwrap_err();

    assert!(
        error.contains("Unhandled") && error.contains("Panic"),
        "{error}"
    );
}

#[tokio::test]
async fn an_init_error_relayed_with_200_is_an_invoke_error() {
    let (base, _server) = answer_once(
        "200 OK",
        "",
        r#"{"errorType":"Runtime.InitError","errorMessage":"no TABLE_NAME"}"#,
    )
    .await;

    let error = invoker(&base).invoke(json!({})).await.unwrap_err();

    assert!(error.contains("Runtime.InitError"), "{error}");
}

#[tokio::test]
async fn an_unreachable_endpoint_is_an_invoke_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);

    let error = invoker(&base).invoke(json!({})).await.unwrap_err();

    assert!(error.starts_with("invoke http://127.0.0.1:"), "{error}");
}
