//! One forwarded call from start to end: its service and operation, the queued
//! fault, the upstream's answer, and what the call moved (DynamoDB's sizes and
//! units, SQS's messages and billed requests), recorded as one [`Call`].

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::answers::{dropped_response, error_response};
use crate::dynamodb::{self, Outcome, ReadBack, Usage};
use crate::record::SQS_BILLING_CHUNK_BYTES;
use crate::{Call, DropPoint, Fault, MAX_BODY_BYTES, Proxy, lock, size};

/// Headers that belong to one connection, not to the message.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "content-length",
];

/// Service and operation of a request.
fn classify(headers: &HeaderMap, method: &str, uri: &Uri, body: &[u8]) -> (String, String) {
    if let Some(target) = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.split_once('.'))
    {
        let service = match target.0 {
            "DynamoDB_20120810" => "dynamodb",
            "AmazonSQS" => "sqs",
            _ => "other",
        };
        return (service.to_owned(), target.1.to_owned());
    }
    // The query protocol: `Action=...` in the form body or the query string.
    let form = std::str::from_utf8(body).unwrap_or_default();
    let action = form
        .split('&')
        .chain(uri.query().unwrap_or_default().split('&'))
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "Action")
        .map(|(_, v)| v.to_owned());
    (
        "other".to_owned(),
        action.unwrap_or_else(|| format!("{method} {}", uri.path())),
    )
}

/// The short error type of an AWS JSON error answer.
fn error_type(headers: &HeaderMap, body: &Value) -> Option<String> {
    let raw = body
        .get("__type")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            headers
                .get("x-amzn-errortype")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.split(':').next().unwrap_or(v).to_owned())
        })?;
    Some(raw.rsplit('#').next().unwrap_or(&raw).to_owned())
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// One forwarded call from start to end: read the body, classify it, apply a queued
/// fault, forward it, account and record it, answer. Each step fills its part of
/// the one [`Call`] record, which is recorded once, on whichever path ends the call.
pub(crate) async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let started = Instant::now();
    let seq = proxy.0.next_seq.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(err) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("degrau-awsproxy: request body: {err}"),
            )
                .into_response();
        }
    };
    let (service, operation) = classify(&parts.headers, parts.method.as_str(), &parts.uri, &body);
    let fault = lock(&proxy.0.faults).take(&service, &operation, &body);
    let mut call = Call {
        seq,
        service: service.clone(),
        operation: operation.clone(),
        request_bytes: body.len() as u64,
        fault: fault.clone(),
        ..Call::default()
    };
    let request_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    call.resource = resource(&service, &request_json);

    if let Some(fault) = &fault {
        match inject(fault, call, started).await {
            Injected::Answer(call, answer) => {
                proxy.record(call);
                return answer;
            }
            Injected::Forward(unchanged) => call = unchanged,
        }
    }

    let upstream = match ask_upstream(&proxy, &parts, &body).await {
        Ok(upstream) => upstream,
        Err(failure) => return upstream_failed(&proxy, call, failure, started),
    };
    let response_json = upstream.read_into(&mut call);
    match service.as_str() {
        "dynamodb" => {
            let outcome = Outcome::of(call.status, call.error_type.as_deref());
            call.usage = dynamodb_usage(
                &proxy,
                &parts.headers,
                outcome,
                &operation,
                &request_json,
                &response_json,
            )
            .await;
        }
        "sqs" => {
            call.sqs_billed_requests = (body.len() as u64).div_ceil(SQS_BILLING_CHUNK_BYTES).max(1);
            if upstream.status.is_success() {
                call.messages = sqs_messages(&operation, &request_json, &response_json);
            }
        }
        _ => {}
    }
    call.duration_ms = millis(started);
    proxy.record(call);
    upstream.answer(fault.as_ref().and_then(|f| f.drop))
}

/// The resource a call names: a DynamoDB table, or the SQS queue at the end of
/// its URL.
fn resource(service: &str, request_json: &Value) -> Option<String> {
    match service {
        "dynamodb" => dynamodb::table_of(request_json),
        "sqs" => request_json
            .get("QueueUrl")
            .and_then(Value::as_str)
            .and_then(|url| url.rsplit('/').next())
            .map(str::to_owned),
        _ => None,
    }
}

/// What a queued fault did to a call.
enum Injected {
    /// The fault answered in the upstream's place: record the call, send this.
    Answer(Call, Response),
    /// The call goes on to the upstream (after the fault's delay, if any).
    Forward(Call),
}

/// Applies `fault` before the upstream: its delay, then its error answer or its
/// drop before forwarding, if it has one.
async fn inject(fault: &Fault, mut call: Call, started: Instant) -> Injected {
    if let Some(delay) = fault.delay_ms {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if let Some(status) = fault.status {
        let kind = fault.qualified_type(&call.service);
        let body = json!({"__type": kind, "message": fault.message_text()}).to_string();
        call.status = status;
        call.error_type = kind.rsplit('#').next().map(str::to_owned);
        call.response_bytes = body.len() as u64;
        call.duration_ms = millis(started);
        return Injected::Answer(call, error_response(status, body));
    }
    if fault.drop == Some(DropPoint::Before) {
        call.duration_ms = millis(started);
        return Injected::Answer(
            call,
            dropped_response(StatusCode::OK, HeaderMap::new(), Bytes::new()),
        );
    }
    Injected::Forward(call)
}

/// The upstream's answer, read whole, hop-by-hop headers removed.
struct Upstream {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Upstream {
    /// Fills the call's status, answer size and error type; returns the answer as
    /// JSON (null for a service other than DynamoDB and SQS, or not JSON).
    fn read_into(&self, call: &mut Call) -> Value {
        call.status = self.status.as_u16();
        call.response_bytes = self.body.len() as u64;
        let response_json: Value = if call.service == "other" {
            Value::Null
        } else {
            serde_json::from_slice(&self.body).unwrap_or(Value::Null)
        };
        if !self.status.is_success() {
            call.error_type = error_type(&self.headers, &response_json);
        }
        response_json
    }

    /// The answer passed on unchanged, or broken halfway when the fault says
    /// [`DropPoint::After`].
    fn answer(self, drop: Option<DropPoint>) -> Response {
        if drop == Some(DropPoint::After) {
            return dropped_response(self.status, self.headers, self.body);
        }
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }
}

/// Why the upstream gave no answer to pass on: its `__type` (after the proxy's
/// namespace) and message.
struct UpstreamFailure {
    kind: &'static str,
    message: String,
}

/// Forwards the request unchanged (hop-by-hop headers aside) and reads the answer.
async fn ask_upstream(
    proxy: &Proxy,
    parts: &Parts,
    body: &Bytes,
) -> Result<Upstream, UpstreamFailure> {
    let upstream = format!(
        "{}{}",
        proxy.0.config.upstream,
        parts.uri.path_and_query().map_or("/", |pq| pq.as_str())
    );
    let mut headers = parts.headers.clone();
    strip_hop_by_hop(&mut headers);
    let answer = proxy
        .0
        .http
        .request(parts.method.clone(), &upstream)
        .headers(headers)
        .body(body.clone())
        .send()
        .await
        .map_err(|err| UpstreamFailure {
            kind: "UpstreamUnreachable",
            message: format!("degrau-awsproxy: {upstream}: {err}"),
        })?;
    let status = answer.status();
    let mut response_headers = answer.headers().clone();
    strip_hop_by_hop(&mut response_headers);
    let response_body = answer.bytes().await.map_err(|err| UpstreamFailure {
        kind: "UpstreamBodyError",
        message: format!("degrau-awsproxy: reading the answer: {err}"),
    })?;
    Ok(Upstream {
        status,
        headers: response_headers,
        body: response_body,
    })
}

/// Records a call the upstream did not answer and answers 502 in its place.
fn upstream_failed(
    proxy: &Proxy,
    mut call: Call,
    failure: UpstreamFailure,
    started: Instant,
) -> Response {
    call.status = 502;
    call.error_type = Some(failure.kind.into());
    call.duration_ms = millis(started);
    proxy.record(call);
    error_response(
        502,
        json!({
            "__type": format!("com.amazonaws.degrau.awsproxy#{}", failure.kind),
            "message": failure.message,
        })
        .to_string(),
    )
}

/// DynamoDB's sizes and units of a call, with the updated items read back
/// upstream first when the call went through and shadow reads are on.
async fn dynamodb_usage(
    proxy: &Proxy,
    headers: &HeaderMap,
    outcome: Outcome,
    operation: &str,
    request_json: &Value,
    response_json: &Value,
) -> Usage {
    let read_backs = if outcome == Outcome::Done && proxy.0.config.shadow_reads {
        dynamodb::read_backs(operation, request_json)
    } else {
        Vec::new()
    };
    let mut sizes = Vec::with_capacity(read_backs.len());
    for read_back in &read_backs {
        sizes.push((
            read_back.index,
            shadow_read(proxy, headers, read_back).await,
        ));
    }
    dynamodb::account(operation, request_json, response_json, outcome, &|index| {
        sizes
            .iter()
            .find(|(i, _)| *i == index)
            .and_then(|(_, size)| *size)
    })
}

/// Messages an SQS call moved.
fn sqs_messages(operation: &str, request: &Value, response: &Value) -> u64 {
    let count = |value: &Value, field: &str| {
        value
            .get(field)
            .and_then(Value::as_array)
            .map_or(0, |a| a.len() as u64)
    };
    match operation {
        "SendMessage" | "DeleteMessage" | "ChangeMessageVisibility" => 1,
        "SendMessageBatch" | "DeleteMessageBatch" | "ChangeMessageVisibilityBatch" => {
            count(response, "Successful")
        }
        "ReceiveMessage" => count(response, "Messages"),
        _ => count(request, "Entries"),
    }
}

/// Reads an updated item back upstream (consistently) and returns its size;
/// `None` when the read failed or found nothing.
async fn shadow_read(proxy: &Proxy, original: &HeaderMap, read_back: &ReadBack) -> Option<u64> {
    let mut headers = HeaderMap::new();
    // moto takes the region (and so the backend) from the credential scope.
    for name in [
        header::AUTHORIZATION,
        header::HOST,
        HeaderName::from_static("x-amz-date"),
    ] {
        if let Some(value) = original.get(&name) {
            headers.insert(name, value.clone());
        }
    }
    headers.insert(
        HeaderName::from_static("x-amz-target"),
        HeaderValue::from_static("DynamoDB_20120810.GetItem"),
    );
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    let body = json!({
        "TableName": read_back.table,
        "Key": read_back.key,
        "ConsistentRead": true,
    });
    let answer = proxy
        .0
        .http
        .post(format!("{}/", proxy.0.config.upstream))
        .headers(headers)
        .body(body.to_string())
        .send()
        .await
        .ok()?;
    if !answer.status().is_success() {
        return None;
    }
    let value: Value = serde_json::from_slice(&answer.bytes().await.ok()?).ok()?;
    value.get("Item").map(size::item_size)
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn requests_are_classified_by_their_target() {
        let mut headers = HeaderMap::new();
        let uri: Uri = "/".parse().unwrap();
        headers.insert(
            "x-amz-target",
            HeaderValue::from_static("DynamoDB_20120810.Query"),
        );
        assert_eq!(
            classify(&headers, "POST", &uri, b"{}"),
            ("dynamodb".into(), "Query".into())
        );
        headers.insert(
            "x-amz-target",
            HeaderValue::from_static("AmazonSQS.SendMessage"),
        );
        assert_eq!(
            classify(&headers, "POST", &uri, b"{}"),
            ("sqs".into(), "SendMessage".into())
        );
        let form = HeaderMap::new();
        assert_eq!(
            classify(&form, "POST", &uri, b"Action=ListQueues&Version=2012-11-05"),
            ("other".into(), "ListQueues".into())
        );
        assert_eq!(
            classify(&form, "GET", &"/moto-api/".parse().unwrap(), b""),
            ("other".into(), "GET /moto-api/".into())
        );
    }

    #[test]
    fn error_types_lose_their_namespace() {
        let body =
            json!({"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"});
        assert_eq!(
            error_type(&HeaderMap::new(), &body).unwrap(),
            "ConditionalCheckFailedException"
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-amzn-errortype",
            HeaderValue::from_static("ResourceNotFoundException:http://internal"),
        );
        assert_eq!(
            error_type(&headers, &Value::Null).unwrap(),
            "ResourceNotFoundException"
        );
    }
}
