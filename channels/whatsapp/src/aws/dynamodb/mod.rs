//! The DynamoDB side of the [`WhatsAppStore`] port. Records, turns and the arrival
//! counter live in the contact's partition (`WA#…` sort keys, after everything
//! else of the contact), so an erase takes them with the rest; a number's binding
//! is an item of its own (`WA#{phone_number_id}`, `BINDING`). Every move of a
//! record or a turn is a conditional write (one transaction when it touches
//! several), so a redelivery or a second worker never moves one twice, and a write
//! after an erase creates nothing.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValue, TransactWriteItem};
use degrau::domain::{Incarnation, TenantId};
use degrau::store::{ContactKey, StoreError};
use degrau_adapters::dynamodb::DynamoStore;
use degrau_adapters::dynamodb::channel::{
    IndexedKey, Item, Pages, TombstoneItem, from_item, n, s, sdk_error, to_item, transact_if,
    unless_condition_failed,
};
use degrau_adapters::dynamodb::keys::{
    BINDING_SK, INCARNATION_INDEX, TOMBSTONE_SK, WA_ARRIVALS_SK, WA_HANDOFF_SK, WA_INBOUND_PREFIX,
    contact_pk, parse_contact_pk,
};

use crate::keyed::Tombstone;
use crate::store::{
    DeliveryRecord, Handoff, InboundRecord, MAX_UNHANDLED, NewInbound, Outgoing, Recorded, TurnId,
    TurnRecord, WhatsAppStore, validate_turn,
};
use crate::{PhoneNumberId, WaMessageId};
use items::*;

mod delivery;
mod items;

#[async_trait]
impl WhatsAppStore for DynamoStore {
    async fn binding(&self, phone: &PhoneNumberId) -> Result<Option<TenantId>, StoreError> {
        self.get(binding_pk(phone), BINDING_SK.to_owned())
            .await?
            .map(|item| from_item::<BindingItem>(item).map(|b| b.tenant))
            .transpose()
    }

    async fn bind(&self, phone: &PhoneNumberId, tenant: &TenantId) -> Result<(), StoreError> {
        let item = BindingItem {
            pk: binding_pk(phone),
            sk: BINDING_SK.into(),
            phone_number_id: phone.as_str().to_owned(),
            tenant: tenant.clone(),
        };
        self.client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(to_item(&item)?))
            .send()
            .await
            .map_err(|err| sdk_error("put_item", err))?;
        Ok(())
    }

    async fn record_inbound(
        &self,
        key: &ContactKey,
        message: &NewInbound,
    ) -> Result<Recorded, StoreError> {
        if let Some(tombstone) = &message.tombstone
            && tombstoned(self, tombstone, message.received_at).await?
        {
            return Ok(Recorded::Erased);
        }
        let pk = contact_pk(key);
        let arrival = next_arrival(self, &pk, message.expires_at).await?;
        let item = InboundItem {
            pk: pk.clone(),
            sk: wa_inbound_sk(&message.id),
            id: message.id.clone(),
            incarnation: message.incarnation.clone(),
            phone_number_id: message.phone_number_id.clone(),
            text: message.text.clone(),
            bare_note: message.bare_note,
            by_business: message.by_business,
            audio: message.audio.clone(),
            received_at: message.received_at,
            arrival,
            state: PENDING.into(),
            turn: None,
            enqueued: false,
            expires_at: message.expires_at,
            tombstone: message.tombstone.as_ref().map(|t| t.as_str().to_owned()),
        };
        let put = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(to_item(&item)?))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        if unless_condition_failed("put_item", put)?.is_some() {
            return Ok(Recorded::New);
        }
        // A redelivery. (An erase between the put and this read leaves nothing:
        // then it counts as enqueued, and nothing is.)
        let existing = self.get(pk, wa_inbound_sk(&message.id)).await?;
        let (enqueued, incarnation) = match existing {
            Some(item) => {
                let item = from_item::<InboundItem>(item)?;
                (item.enqueued, item.incarnation)
            }
            None => (true, None),
        };
        Ok(Recorded::Existing {
            enqueued,
            incarnation,
        })
    }

    async fn find_inbound(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<(ContactKey, WaMessageId)>, StoreError> {
        let query = self
            .query_index(INCARNATION_INDEX)
            .key_condition_expression("incarnation = :incarnation")
            .expression_attribute_values(":incarnation", s(incarnation.as_str()));
        for item in Pages::new(query).all().await? {
            let entry: IndexedKey = from_item(item)?;
            let Some(id) = entry.sk.strip_prefix(WA_INBOUND_PREFIX) else {
                continue;
            };
            let key = parse_contact_pk(&entry.pk)?;
            if key.tenant == *tenant {
                let id = WaMessageId::parse(id).map_err(|_| {
                    StoreError::Corrupt("an inbound record's key does not read".into())
                })?;
                return Ok(Some((key, id)));
            }
        }
        Ok(None)
    }

    async fn mark_enqueued(&self, key: &ContactKey, id: &WaMessageId) -> Result<bool, StoreError> {
        let result = self
            .client()
            .update_item()
            .table_name(self.table())
            .key("pk", s(contact_pk(key)))
            .key("sk", s(wa_inbound_sk(id)))
            .update_expression("SET enqueued = :yes")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .send()
            .await;
        Ok(unless_condition_failed("update_item", result)?.is_some())
    }

    async fn inbound(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        now: i64,
    ) -> Result<Option<InboundRecord>, StoreError> {
        let Some(item) = self.get(contact_pk(key), wa_inbound_sk(id)).await? else {
            return Ok(None);
        };
        let record = from_item::<InboundItem>(item)?.into_record()?;
        Ok((record.message.expires_at > now).then_some(record))
    }

    async fn unhandled(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<InboundRecord>, StoreError> {
        // Handled records stay until their TTL: the filter drops them after the
        // read, so a read costs the records of the last few days, not the pending
        // ones only (a small item each).
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .filter_expression("#state <> :handled AND expires_at > :now")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":prefix", s(WA_INBOUND_PREFIX))
            .expression_attribute_values(":handled", s(HANDLED))
            .expression_attribute_values(":now", n(now));
        let mut records = Pages::new(query)
            .all()
            .await?
            .into_iter()
            .map(|item: Item| from_item::<InboundItem>(item)?.into_record())
            .collect::<Result<Vec<_>, _>>()?;
        records.sort_by_key(|r| r.arrival);
        records.truncate(MAX_UNHANDLED);
        Ok(records)
    }

    async fn take(&self, key: &ContactKey, turn: &TurnRecord) -> Result<bool, StoreError> {
        validate_turn(turn)?;
        let pk = contact_pk(key);
        let mut items = Vec::with_capacity(turn.messages.len() + 1);
        for id in &turn.messages {
            items.push(update(
                self.table(),
                &pk,
                wa_inbound_sk(id),
                "SET #state = :taken, turn = :turn",
                "#state = :pending",
                vec![
                    (":taken", s(TAKEN)),
                    (":turn", s(turn.id.as_str())),
                    (":pending", s(PENDING)),
                ],
            )?);
        }
        let item = TurnItem {
            pk: pk.clone(),
            sk: wa_turn_sk(&turn.id),
            id: turn.id.clone(),
            phone_number_id: turn.phone_number_id.clone(),
            messages: turn.messages.clone(),
            text: turn.text.clone(),
            bare_notes: turn.bare_notes,
            by_person: turn.by_person,
            voice: turn.voice,
            last_inbound_at: turn.last_inbound_at,
            status: TAKEN.into(),
            outgoing: None,
            sent: 0,
            expires_at: turn.expires_at,
        };
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(to_item(&item)?))
            .condition_expression("attribute_not_exists(pk)");
        items.push(
            TransactWriteItem::builder()
                .put(built("put", put.build())?)
                .build(),
        );
        transact_if(self.client(), items).await
    }

    async fn turn(
        &self,
        key: &ContactKey,
        id: &TurnId,
        now: i64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let Some(item) = self.get(contact_pk(key), wa_turn_sk(id)).await? else {
            return Ok(None);
        };
        let turn = from_item::<TurnItem>(item)?.into_turn()?;
        Ok((turn.expires_at > now).then_some(turn))
    }

    async fn settle(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        outgoing: &Outgoing,
    ) -> Result<bool, StoreError> {
        validate_turn(turn)?;
        let pk = contact_pk(key);
        let json = serde_json::to_string(outgoing)
            .map_err(|err| StoreError::Other(format!("outgoing: {err}")))?;
        let mut items = Vec::with_capacity(turn.messages.len() + 1);
        for id in &turn.messages {
            items.push(update(
                self.table(),
                &pk,
                wa_inbound_sk(id),
                "SET #state = :handled",
                "#state = :taken AND turn = :turn",
                vec![
                    (":handled", s(HANDLED)),
                    (":taken", s(TAKEN)),
                    (":turn", s(turn.id.as_str())),
                ],
            )?);
        }
        items.push(update(
            self.table(),
            &pk,
            wa_turn_sk(&turn.id),
            "SET #status = :sending, outgoing = :outgoing, sent = :zero",
            "#status = :taken",
            vec![
                (":sending", s(SENDING)),
                (":outgoing", s(json)),
                (":zero", n(0)),
                (":taken", s(TAKEN)),
            ],
        )?);
        transact_if(self.client(), items).await
    }

    async fn record_delivery(
        &self,
        key: &ContactKey,
        record: &DeliveryRecord,
    ) -> Result<(), StoreError> {
        delivery::put_delivery(self, key, record).await
    }

    async fn update_delivery(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        status: &str,
        error_code: Option<i64>,
        now: i64,
    ) -> Result<bool, StoreError> {
        delivery::move_delivery(self, key, id, (status, error_code), now).await
    }

    async fn deliveries(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        delivery::delivery_records(self, key, now).await
    }

    async fn handoff(&self, key: &ContactKey, now: i64) -> Result<Option<Handoff>, StoreError> {
        let Some(item) = self.get(contact_pk(key), WA_HANDOFF_SK.to_owned()).await? else {
            return Ok(None);
        };
        let item: HandoffItem = from_item(item)?;
        Ok((item.until > now).then_some(Handoff {
            by: item.by,
            since: item.since,
            until: item.until,
        }))
    }

    async fn set_handoff(
        &self,
        key: &ContactKey,
        handoff: Option<&Handoff>,
    ) -> Result<(), StoreError> {
        let Some(handoff) = handoff else {
            self.client()
                .delete_item()
                .table_name(self.table())
                .key("pk", s(contact_pk(key)))
                .key("sk", s(WA_HANDOFF_SK))
                .send()
                .await
                .map_err(|err| sdk_error("delete_item", err))?;
            return Ok(());
        };
        let item = HandoffItem {
            pk: contact_pk(key),
            sk: WA_HANDOFF_SK.to_owned(),
            by: handoff.by,
            since: handoff.since,
            until: handoff.until,
            expires_at: handoff.until,
        };
        self.client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(to_item(&item)?))
            .send()
            .await
            .map_err(|err| sdk_error("put_item", err))?;
        Ok(())
    }

    async fn mark_sent(
        &self,
        key: &ContactKey,
        turn: &TurnId,
        sent: usize,
        done: bool,
    ) -> Result<bool, StoreError> {
        let result = self
            .client()
            .update_item()
            .table_name(self.table())
            .key("pk", s(contact_pk(key)))
            .key("sk", s(wa_turn_sk(turn)))
            .update_expression("SET sent = :sent, #status = :status")
            .condition_expression("attribute_exists(pk) AND #status <> :taken")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":sent", n(sent))
            .expression_attribute_values(":status", s(if done { DONE } else { SENDING }))
            .expression_attribute_values(":taken", s(TAKEN))
            .send()
            .await;
        Ok(unless_condition_failed("update_item", result)?.is_some())
    }
}

/// Whether a live tombstone holds `tombstone` at `now` (its contact erased).
async fn tombstoned(
    store: &DynamoStore,
    tombstone: &Tombstone,
    now: i64,
) -> Result<bool, StoreError> {
    let Some(item) = store
        .get(tombstone_pk(tombstone), TOMBSTONE_SK.to_owned())
        .await?
    else {
        return Ok(false);
    };
    Ok(from_item::<TombstoneItem>(item)?.expires_at > now)
}

/// The contact's next arrival number (the counter in partition `pk`, living until
/// `expires_at`); a redelivery burns one, which only leaves a gap.
async fn next_arrival(store: &DynamoStore, pk: &str, expires_at: i64) -> Result<u64, StoreError> {
    let counted = store
        .client()
        .update_item()
        .table_name(store.table())
        .key("pk", s(pk))
        .key("sk", s(WA_ARRIVALS_SK))
        .update_expression("ADD arrivals :one SET expires_at = :expires")
        .expression_attribute_values(":one", n(1))
        .expression_attribute_values(":expires", n(expires_at))
        .return_values(ReturnValue::UpdatedNew)
        .send()
        .await
        .map_err(|err| sdk_error("update_item", err))?;
    Ok(
        match counted.attributes.as_ref().and_then(|a| a.get("arrivals")) {
            Some(AttributeValue::N(number)) => number.parse().unwrap_or(0),
            _ => 0,
        },
    )
}
