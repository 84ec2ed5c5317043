//! The erasure tombstones of the WhatsApp channel (`WhatsAppStore`, with
//! `RecordStore::erase_contact`): an erase leaves each inbound record's tombstone,
//! outside the contact's partition and naming no one, for as long as the record
//! would have lived; a delivery of the same message recorded again meanwhile is
//! `Erased` and writes nothing; a tombstone past its life refuses nothing.

use degrau::domain::{Incarnation, TenantId};
use degrau::store::RecordStore;
use degrau_whatsapp::keyed::ChannelKeys;
use degrau_whatsapp::store::{NewInbound, Recorded};
use degrau_whatsapp::{PhoneNumberId, WaMessageId};

use super::{Backend, NOW, contact_key};

fn inbound(keys: &ChannelKeys, tenant: &TenantId, id: &str, at: i64) -> NewInbound {
    let id = WaMessageId::parse(id).unwrap();
    NewInbound {
        tombstone: Some(keys.tombstone(tenant, &id)),
        id,
        incarnation: Some(Incarnation::random()),
        phone_number_id: PhoneNumberId::parse("100000000000001").unwrap(),
        text: "oi".into(),
        bare_note: false,
        by_business: false,
        audio: None,
        received_at: at,
        expires_at: NOW + 3600,
    }
}

pub(super) async fn an_erase_leaves_tombstones_that_refuse_a_replayed_message_for_the_records_life(
    backend: impl Backend,
) {
    let store = backend.store();
    let whatsapp = backend.whatsapp();
    let keys = ChannelKeys::derive(b"a contract's pseudonym secret");
    let key = contact_key("acme", "15550000001");
    let first = inbound(&keys, &key.tenant, "wamid.one", NOW);
    assert_eq!(
        whatsapp.record_inbound(&key, &first).await.unwrap(),
        Recorded::New
    );
    let items = store.erase_contact(&key, NOW - 1).await.unwrap();
    assert!(items >= 2, "the record and the arrival counter: {items}");
    assert_eq!(
        backend.raw_item_count(&key).await,
        0,
        "nothing left of the contact"
    );
    // The same message delivered again: recognised, nothing written.
    let replay = inbound(&keys, &key.tenant, "wamid.one", NOW + 60);
    assert_eq!(
        whatsapp.record_inbound(&key, &replay).await.unwrap(),
        Recorded::Erased
    );
    assert_eq!(backend.raw_item_count(&key).await, 0);
    // Another message, or the same one of another tenant, is new.
    let other = inbound(&keys, &key.tenant, "wamid.two", NOW + 60);
    assert_eq!(
        whatsapp.record_inbound(&key, &other).await.unwrap(),
        Recorded::New
    );
    let elsewhere = contact_key("other-clinic", "15550000001");
    let theirs = inbound(&keys, &elsewhere.tenant, "wamid.one", NOW + 60);
    assert_eq!(
        whatsapp.record_inbound(&elsewhere, &theirs).await.unwrap(),
        Recorded::New
    );
    // Past the record's life the tombstone refuses nothing (the webhook drops so
    // old a message anyway: `MessagesTooOld`).
    let late_key = contact_key("acme", "15550000009");
    let late = inbound(&keys, &late_key.tenant, "wamid.one", NOW + 3600);
    assert_eq!(
        whatsapp.record_inbound(&late_key, &late).await.unwrap(),
        Recorded::New
    );
}
