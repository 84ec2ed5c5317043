//! Maps Meta's requests to the webhook service and back. Always returns a response
//! (an `Err` from an HTTP handler becomes a bare 502 at API Gateway).
//!
//! | request | answer |
//! |---|---|
//! | `GET /whatsapp/webhook?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…` | 200 with the challenge (`text/plain`) when the token is right; 403 otherwise; 400 when a parameter is missing or the challenge is not a short plain token |
//! | `POST /whatsapp/webhook` signed (`X-Hub-Signature-256`) | 200 once its messages are recorded and enqueued; 401 for a missing or wrong signature, 400 for a body that is no notification, 413 over the limits (nothing written or enqueued for any of them); 500 when storage or the queue failed (Meta delivers it again) |
//! | anything else | 404 / 405 in degrau's error envelope |
//!
//! The signature is checked on the body's exact bytes before anything else is read
//! from it. Logs name the outcome and counts only: no number, no text.

use degrau::metrics::Event;
use degrau_whatsapp::event::{DeliveryError, parse_delivery};
use degrau_whatsapp::signature::{Handshake, handshake, verify_signature};
use degrau_whatsapp::webhook::{FUNCTION, WebhookService};
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::json;
use tracing::{error, warn};

/// Largest body accepted, in bytes (Meta's deliveries are a few KiB).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// The path Meta calls (the callback URL is the API's URL and this path).
pub const PATH: &str = "/whatsapp/webhook";

/// The handler's dependencies, built once at init.
pub struct App {
    /// The service.
    pub service: WebhookService,
    /// The Meta app secret that signs deliveries.
    pub app_secret: String,
    /// The verify token of the handshake.
    pub verify_token: String,
}

fn text(status: u16, content_type: &'static str, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = lambda_http::http::StatusCode::from_u16(status)
        .unwrap_or(lambda_http::http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        "content-type",
        lambda_http::http::HeaderValue::from_static(content_type),
    );
    response
}

fn error_response(status: u16, kind: &str, message: &str) -> Response<Body> {
    let body = json!({"error": {"type": kind, "message": message}}).to_string();
    text(status, "application/json", body)
}

/// Handles one request; never fails.
pub async fn handle(app: &App, request: Request) -> Response<Body> {
    let raw = request.raw_http_path();
    let path = if raw.is_empty() {
        request.uri().path()
    } else {
        raw
    };
    // Under `cargo lambda watch` without its router, paths arrive as /lambda-url/….
    let path = path
        .strip_prefix("/lambda-url/whatsapp-webhook")
        .unwrap_or(path);
    if path.trim_end_matches('/') != PATH {
        return error_response(404, "not_found", "no such route");
    }
    match request.method().as_str() {
        "GET" => verify(app, &request),
        "POST" => receive(app, &request).await,
        _ => error_response(405, "method_not_allowed", "GET or POST only"),
    }
}

/// Meta's verification handshake.
fn verify(app: &App, request: &Request) -> Response<Body> {
    let query = request.query_string_parameters_ref();
    let param = |name: &str| query.and_then(|q| q.first(name));
    match handshake(
        &app.verify_token,
        param("hub.mode"),
        param("hub.verify_token"),
        param("hub.challenge"),
    ) {
        Handshake::Echo(challenge) => text(200, "text/plain", challenge),
        Handshake::Forbidden => {
            warn!("verification refused: wrong mode or token");
            error_response(403, "forbidden", "wrong hub.mode or hub.verify_token")
        }
        Handshake::Invalid(message) => error_response(400, "invalid_request", message),
    }
}

/// A delivery: the signature, then the body, then the service.
async fn receive(app: &App, request: &Request) -> Response<Body> {
    let body: &[u8] = match request.body() {
        Body::Empty => &[],
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => &[],
    };
    if body.len() > MAX_BODY_BYTES {
        return error_response(
            413,
            "too_large",
            &format!("the body is over {MAX_BODY_BYTES} bytes"),
        );
    }
    let signature = request
        .headers()
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok());
    if let Err(refused) = verify_signature(app.app_secret.as_bytes(), body, signature) {
        warn!(reason = refused.code(), "delivery refused: bad signature");
        Event::new(FUNCTION)
            .dimension("Reason", refused.code())
            .rollup()
            .count("SignaturesRefused", 1)
            .emit();
        return error_response(401, "unauthenticated", &refused.to_string());
    }
    let delivery = match parse_delivery(body) {
        Ok(delivery) => delivery,
        Err(error @ DeliveryError::Malformed(_)) => {
            return error_response(400, "invalid_request", &error.to_string());
        }
        Err(error @ DeliveryError::TooLarge(_)) => {
            return error_response(413, "too_large", &error.to_string());
        }
    };
    match app.service.accept(&delivery).await {
        Ok(_) => text(200, "application/json", "{}".into()),
        Err(failure) => {
            error!(error = %failure, "delivery not accepted; Meta delivers it again");
            error_response(500, "internal_error", "not accepted; deliver again")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;
    use std::sync::Arc;

    use degrau::domain::TenantId;
    use degrau_whatsapp::PhoneNumberId;
    use degrau_whatsapp::memory::MemoryWhatsApp;
    use degrau_whatsapp::store::WhatsAppStore;
    use degrau_whatsapp::testing::RecordingInbox;
    use hmac::{KeyInit, Mac};
    use lambda_http::http;

    use super::*;

    const SECRET: &str = "app-secret";

    fn app() -> (App, Arc<MemoryWhatsApp>, Arc<RecordingInbox>) {
        let store = MemoryWhatsApp::new();
        let inbox = Arc::new(RecordingInbox::default());
        let app = App {
            service: WebhookService {
                store: store.clone(),
                tenants: store.core(),
                inbox: inbox.clone(),
                clock: Arc::new(|| 1_800_000_000),
                keys: std::sync::Arc::new(degrau_whatsapp::keyed::ChannelKeys::derive(
                    b"a test's pseudonym secret",
                )),
                events: Arc::new(degrau::events::NoEvents),
            },
            app_secret: SECRET.into(),
            verify_token: "verify-me".into(),
        };
        (app, store, inbox)
    }

    fn sign(body: &str) -> String {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(body.as_bytes());
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    fn post(body: &str, signature: Option<&str>) -> Request {
        let mut builder = http::Request::builder()
            .method("POST")
            .uri("https://api.example/whatsapp/webhook");
        if let Some(signature) = signature {
            builder = builder.header("x-hub-signature-256", signature);
        }
        builder.body(Body::from(body.to_owned())).unwrap()
    }

    fn get(query: &[(&str, &str)]) -> Request {
        let map: HashMap<String, String> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        http::Request::builder()
            .method("GET")
            .uri("https://api.example/whatsapp/webhook")
            .body(Body::Empty)
            .unwrap()
            .with_query_string_parameters(map)
    }

    const DELIVERY: &str = r#"{"object":"whatsapp_business_account","entry":[{"id":"0","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"100000000000001"},"messages":[{"from":"15550000001","id":"wamid.A","type":"text","text":{"body":"oi"}}]}}]}]}"#;

    #[tokio::test]
    async fn a_bad_or_missing_signature_gets_401_and_enqueues_nothing() {
        let (app, store, inbox) = app();
        store
            .bind(
                &PhoneNumberId::parse("100000000000001").unwrap(),
                &TenantId::parse("barber").unwrap(),
            )
            .await
            .unwrap();
        let wrong = sign("another body");
        for signature in [None, Some("sha256=00"), Some(wrong.as_str())] {
            let response = handle(&app, post(DELIVERY, signature)).await;
            assert_eq!(response.status(), 401);
        }
        assert!(inbox.queued().is_empty());
        let right = sign(DELIVERY);
        let response = handle(&app, post(DELIVERY, Some(&right))).await;
        assert_eq!(response.status(), 200);
        assert_eq!(inbox.queued().len(), 1);
    }

    #[tokio::test]
    async fn bad_bodies_get_clear_errors_and_change_nothing() {
        let (app, _, inbox) = app();
        let body = r#"{"object":"page","entry":[]}"#;
        let response = handle(&app, post(body, Some(&sign(body)))).await;
        assert_eq!(response.status(), 400);
        let huge = "x".repeat(MAX_BODY_BYTES + 1);
        let response = handle(&app, post(&huge, Some(&sign(&huge)))).await;
        assert_eq!(response.status(), 413);
        assert!(inbox.queued().is_empty());
    }

    #[tokio::test]
    async fn the_handshake_answers_the_right_token_only() {
        let (app, _, _) = app();
        let ok = handle(
            &app,
            get(&[
                ("hub.mode", "subscribe"),
                ("hub.verify_token", "verify-me"),
                ("hub.challenge", "1158201444"),
            ]),
        )
        .await;
        assert_eq!(ok.status(), 200);
        assert_eq!(ok.headers()["content-type"], "text/plain");
        assert_eq!(ok.body(), &Body::from("1158201444"));
        let wrong = handle(
            &app,
            get(&[
                ("hub.mode", "subscribe"),
                ("hub.verify_token", "guess"),
                ("hub.challenge", "1"),
            ]),
        )
        .await;
        assert_eq!(wrong.status(), 403);
        let missing = handle(&app, get(&[("hub.mode", "subscribe")])).await;
        assert_eq!(missing.status(), 400);
    }
}
