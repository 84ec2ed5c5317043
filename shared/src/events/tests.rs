use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;
use crate::memory::MemoryStore;
use crate::store::StoreError;
use crate::tenant::{StoredConfig, TenantConfig};
use crate::tools::declared::EventsWebhook;

fn barber() -> TenantId {
    TenantId::parse("barber").unwrap()
}

fn fact_set(contact: &str, at: i64, value: &str) -> Occurrence {
    Occurrence {
        tenant: barber(),
        contact: ContactId::parse(contact).unwrap(),
        kind: EventType::FactSet,
        at,
        data: json!({"key": "name", "value": value, "by": "operator"}),
    }
}

fn receiver() -> Webhook {
    Webhook {
        url: "https://hooks.example.com/degrau".into(),
        secret_parameter: "/degrau/webhooks/barber/events".into(),
        timeout_ms: 5000,
    }
}

#[test]
fn the_id_is_the_same_for_the_same_change_and_another_for_any_other() {
    let one = fact_set("c-1", 100, "Ana");
    assert_eq!(one.id(), fact_set("c-1", 100, "Ana").id());
    assert_eq!(one.id().len(), EVENT_ID_HEX_CHARS);
    assert!(one.id().bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(
        !one.id().contains("c-1"),
        "the id does not name the contact"
    );
    for other in [
        fact_set("c-2", 100, "Ana"),
        fact_set("c-1", 101, "Ana"),
        fact_set("c-1", 100, "Bia"),
        Occurrence {
            kind: EventType::FactDeleted,
            ..fact_set("c-1", 100, "Ana")
        },
    ] {
        assert_ne!(one.id(), other.id());
    }
}

#[test]
fn the_event_sent_carries_the_pseudonym_never_the_contact_id() {
    let occurrence = fact_set("5511999990000", 100, "Ana");
    let event = occurrence.event("0123456789abcdef0123456789abcdef".into());
    let body = serde_json::to_value(&event).unwrap();
    assert_eq!(
        body,
        json!({
            "id": occurrence.id(),
            "type": "fact.set",
            "tenant": "barber",
            "contact": "0123456789abcdef0123456789abcdef",
            "at": 100,
            "data": {"key": "name", "value": "Ana", "by": "operator"},
        })
    );
    assert!(!body.to_string().contains("5511999990000"));
    let back: Event = serde_json::from_value(body).unwrap();
    assert_eq!(back, event);
}

#[test]
fn every_type_reads_back_by_its_documented_name() {
    for kind in EventType::ALL {
        let text = serde_json::to_string(&kind).unwrap();
        assert_eq!(text, format!("\"{}\"", kind.as_str()));
        assert_eq!(serde_json::from_str::<EventType>(&text).unwrap(), kind);
    }
    assert!(serde_json::from_str::<EventType>("\"fact.changed\"").is_err());
}

#[test]
fn an_events_webhook_is_checked_like_a_webhook_tools_when_the_config_is_read() {
    let config: TenantConfig = serde_json::from_value(json!({
        "events_webhook": {"url": "https://hooks.example.com/e", "secret_parameter": "/degrau/webhooks/barber/e"}
    }))
    .unwrap();
    let webhook = config.events_webhook.unwrap();
    assert_eq!(webhook.webhook().timeout_ms, 5000, "the tools' default");
    let refused = serde_json::from_value::<TenantConfig>(json!({
        "events_webhook": {"url": "ftp://hooks.example.com/e", "secret_parameter": "/degrau/webhooks/barber/e"}
    }))
    .unwrap_err()
    .to_string();
    assert!(refused.contains("events_webhook.url"), "{refused}");
    let refused = serde_json::from_value::<TenantConfig>(json!({
        "events_webhook": {"url": "https://h.example.com/e", "secret_parameter": "/a//b", "timeout_ms": 5000}
    }))
    .unwrap_err()
    .to_string();
    assert!(refused.contains("secret_parameter"), "{refused}");
}

async fn store_with_events_webhook() -> MemoryStore {
    let store = MemoryStore::new();
    let config = TenantConfig {
        events_webhook: Some(EventsWebhook::try_from(receiver()).unwrap()),
        ..TenantConfig::default()
    };
    store.put_tenant_config(&barber(), &config).await.unwrap();
    store
}

#[tokio::test]
async fn a_tenant_with_an_events_webhook_has_its_events_published_in_order() {
    let store = store_with_events_webhook().await;
    let out = MemoryEvents::default();
    for (at, value) in [(1, "Ana"), (2, "Bia"), (3, "Cris")] {
        publish(&store, &out, fact_set("c-1", at, value)).await;
    }
    let published = out.published();
    assert_eq!(published.len(), 3);
    assert!(published.iter().all(|(webhook, _)| *webhook == receiver()));
    let values: Vec<_> = published
        .iter()
        .map(|(_, o)| o.data["value"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(values, ["Ana", "Bia", "Cris"]);
}

#[tokio::test]
async fn a_tenant_without_an_events_webhook_publishes_nothing() {
    let store = MemoryStore::new();
    let out = MemoryEvents::default();
    publish(&store, &out, fact_set("c-1", 1, "Ana")).await;
    store
        .put_tenant_config(&barber(), &TenantConfig::default())
        .await
        .unwrap();
    publish(&store, &out, fact_set("c-1", 2, "Ana")).await;
    assert!(out.published().is_empty());
}

/// A tenant store that counts its reads and holds no config.
#[derive(Default)]
struct CountingTenants(AtomicUsize);

#[async_trait]
impl TenantStore for CountingTenants {
    async fn stored_config(&self, _: &TenantId) -> Result<Option<StoredConfig>, StoreError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(None)
    }

    async fn put_tenant_config(&self, _: &TenantId, _: &TenantConfig) -> Result<(), StoreError> {
        Ok(())
    }

    async fn replace_config(
        &self,
        _: &TenantId,
        _: &TenantConfig,
        _: u64,
    ) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }
}

#[tokio::test]
async fn without_a_queue_not_even_the_config_is_read() {
    let tenants = CountingTenants::default();
    publish(&tenants, &NoEvents, fact_set("c-1", 1, "Ana")).await;
    assert_eq!(tenants.0.load(Ordering::SeqCst), 0);
    publish(
        &tenants,
        &MemoryEvents::default(),
        fact_set("c-1", 1, "Ana"),
    )
    .await;
    assert_eq!(tenants.0.load(Ordering::SeqCst), 1);
}

/// A queue that refuses every event.
struct Refusing;

#[async_trait]
impl EventsOut for Refusing {
    async fn publish(&self, _: &Webhook, _: &Occurrence) -> Result<(), PublishError> {
        Err(PublishError("the queue is down".into()))
    }
}

#[tokio::test]
async fn a_queue_that_refuses_is_logged_and_counted_not_returned() {
    let store = store_with_events_webhook().await;
    // Returns (); the change it follows stands.
    publish(&store, &Refusing, fact_set("c-1", 1, "Ana")).await;
}
