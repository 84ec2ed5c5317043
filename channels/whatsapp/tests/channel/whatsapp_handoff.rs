//! Human handoff on the in-memory store, on a clock the test moves: a person's
//! answer pauses the agent for the tenant's hours and no longer; while it is paused
//! nothing is marked read or asked; the time running out hands the conversation
//! back; an erase takes the handoff with the contact.

use std::sync::atomic::Ordering;

use degrau::store::RecordStore;
use degrau::tenant::{TenantConfig, TenantStore};
use degrau_whatsapp::event::parse_delivery;
use degrau_whatsapp::store::WhatsAppStore;
use degrau_whatsapp::testing::Sent;
use degrau_whatsapp::worker::Outcome;
use serde_json::json;

use crate::helpers::START;
use crate::whatsapp::{CUSTOMER, PHONE, answers, channel, customer, text};

fn echo(id: &str, body: &str) -> Vec<u8> {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "smb_message_echoes",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550000000", "phone_number_id": PHONE},
                  "message_echoes": [{"from": "15550000000", "to": CUSTOMER, "id": id,
                                      "timestamp": "1800000000", "type": "text",
                                      "text": {"body": body}}]}}]}]})
    .to_string()
    .into_bytes()
}

fn outcomes(results: &[Result<Outcome, degrau_whatsapp::worker::WorkerError>]) -> Vec<String> {
    results.iter().map(|r| format!("{r:?}")).collect()
}

#[tokio::test]
async fn a_person_pauses_the_agent_for_the_tenants_hours_and_then_it_answers_again() {
    let (channel, now) = channel().await;
    let config = TenantConfig {
        whatsapp: Some(serde_json::from_value(json!({"handoff_hours": 2})).unwrap()),
        ..TenantConfig::default()
    };
    channel
        .store
        .put_tenant_config(&customer().tenant, &config)
        .await
        .unwrap();
    let owner = parse_delivery(&echo("wamid.E1", "Oi, aqui é a Rita")).unwrap();
    channel.webhook.accept(&owner).await.unwrap();
    assert_eq!(outcomes(&channel.work().await), ["Ok(Handled)"]);
    let handoff = channel.store.handoff(&customer(), START).await.unwrap();
    assert_eq!(handoff.map(|h| h.until - h.since), Some(2 * 3600));

    // Within the two hours: stored, not asked, not marked read, nothing sent.
    now.store(START + 2 * 3600 - 1, Ordering::SeqCst);
    channel.deliver(&[text("wamid.C1", "e amanhã?")]).await;
    assert_eq!(outcomes(&channel.work().await), ["Ok(Paused)"]);
    assert_eq!(channel.model_calls(), 0);
    assert!(channel.sender.reads().is_empty() && channel.sender.sent().is_empty());

    // Past them: the agent answers the message that waited with the new one.
    now.store(START + 2 * 3600, Ordering::SeqCst);
    answers(&channel.model, &["Amanhã às 10h está livre."]);
    channel.deliver(&[text("wamid.C2", "alô?")]).await;
    assert_eq!(outcomes(&channel.work().await), ["Ok(Handled)"]);
    assert_eq!(channel.model_calls(), 1);
    assert_eq!(
        channel.user_texts().await,
        ["[the business wrote first]", "e amanhã?\nalô?"]
    );
    assert_eq!(
        channel.sender.sent(),
        [Sent::Text("Amanhã às 10h está livre.".into())]
    );
    assert_eq!(
        channel.sender.reads().len(),
        1,
        "marked read before the answer"
    );
}

#[tokio::test]
async fn an_erase_takes_the_handoff_with_the_contact() {
    let (channel, _) = channel().await;
    let owner = parse_delivery(&echo("wamid.E1", "Oi")).unwrap();
    channel.webhook.accept(&owner).await.unwrap();
    channel.work().await;
    assert!(
        channel
            .store
            .handoff(&customer(), START)
            .await
            .unwrap()
            .is_some()
    );
    channel
        .store
        .erase_contact(&customer(), START - 1)
        .await
        .unwrap();
    assert!(
        channel
            .store
            .handoff(&customer(), START)
            .await
            .unwrap()
            .is_none()
    );
}
