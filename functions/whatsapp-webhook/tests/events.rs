//! The sample events for `sam local invoke WhatsAppWebhookFunction`:
//! `events/whatsapp-webhook-delivery.json` (a text message from Meta, signed with the
//! local stack's app secret) and `events/whatsapp-webhook-verify.json` (the
//! subscription handshake with the local verify token) are HTTP API requests the
//! real handler accepts: the delivery is recorded and enqueued, the challenge echoed.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use degrau::domain::TenantId;
use degrau_whatsapp::PhoneNumberId;
use degrau_whatsapp::memory::MemoryWhatsApp;
use degrau_whatsapp::store::WhatsAppStore;
use degrau_whatsapp::testing::RecordingInbox;
use degrau_whatsapp::webhook::WebhookService;
use whatsapp_webhook::handler::{App, handle};

const DELIVERY: &str = include_str!("../../../events/whatsapp-webhook-delivery.json");
const VERIFY: &str = include_str!("../../../events/whatsapp-webhook-verify.json");

/// The local stack's secrets (infra/stack.sh, infra/whatsapp.py).
fn webhook(app_secret: &str) -> (App, Arc<RecordingInbox>, Arc<MemoryWhatsApp>) {
    let store = MemoryWhatsApp::new();
    let inbox = Arc::new(RecordingInbox::default());
    let app = App {
        service: WebhookService {
            store: store.clone(),
            tenants: store.core(),
            inbox: inbox.clone(),
            clock: Arc::new(|| 1_796_290_200),
            keys: std::sync::Arc::new(degrau_whatsapp::keyed::ChannelKeys::derive(
                b"a test's pseudonym secret",
            )),
            events: Arc::new(degrau::events::NoEvents),
        },
        app_secret: app_secret.into(),
        verify_token: "degrau-local-verify-token".into(),
    };
    (app, inbox, store)
}

#[tokio::test]
async fn the_sample_delivery_is_signed_recorded_and_enqueued() {
    let (app, inbox, store) = webhook("degrau-local-app-secret");
    store
        .bind(
            &PhoneNumberId::parse("100000000000001").unwrap(),
            &TenantId::parse("demo-barbershop").unwrap(),
        )
        .await
        .unwrap();
    let response = handle(&app, lambda_http::request::from_str(DELIVERY).unwrap()).await;
    assert_eq!(response.status().as_u16(), 200);
    let queued = inbox.queued();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].tenant.as_str(), "demo-barbershop");

    // Under another secret the same bytes are refused: the sample's signature is real.
    let (app, inbox, _) = webhook("another-secret");
    let response = handle(&app, lambda_http::request::from_str(DELIVERY).unwrap()).await;
    assert_eq!(response.status().as_u16(), 401);
    assert!(inbox.queued().is_empty());
}

#[tokio::test]
async fn the_sample_handshake_gets_its_challenge_back() {
    let (app, _, _) = webhook("degrau-local-app-secret");
    let response = handle(&app, lambda_http::request::from_str(VERIFY).unwrap()).await;
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.body().as_ref(), b"1158201444");
}
