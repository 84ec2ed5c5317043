//! The WhatsApp items of the adapters' table as `serde_dynamo` reads and writes
//! them (a number's binding, an inbound record, a turn, a handoff), their keys
//! (the layout is the adapters' `keys`) and the one conditional update of a
//! contact's item in a transaction.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use degrau::domain::{Incarnation, TenantId};
use degrau::store::StoreError;
use degrau_adapters::dynamodb::channel::s;
use degrau_adapters::dynamodb::keys;
use serde::{Deserialize, Serialize};

use crate::keyed::Tombstone;
use crate::store::{
    HandoffBy, InboundRecord, NewInbound, Outgoing, RecordState, TurnId, TurnRecord, TurnStatus,
};
use crate::voice::{AudioRef, VoiceTurn};
use crate::{PhoneNumberId, WaMessageId};

/// The partition of a number's binding (the key layout is the adapters' `keys`).
pub(super) fn binding_pk(phone: &PhoneNumberId) -> String {
    keys::binding_pk(phone.as_str())
}

/// An inbound record's sort key.
pub(super) fn wa_inbound_sk(id: &WaMessageId) -> String {
    keys::wa_inbound_sk(id.as_str())
}

/// A turn's sort key.
pub(super) fn wa_turn_sk(id: &TurnId) -> String {
    keys::wa_turn_sk(id.as_str())
}

/// The partition of an erased message's tombstone.
pub(super) fn tombstone_pk(tombstone: &Tombstone) -> String {
    keys::tombstone_pk(tombstone.as_str())
}

pub(super) const PENDING: &str = "pending";
pub(super) const TAKEN: &str = "taken";
pub(super) const HANDLED: &str = "handled";
pub(super) const SENDING: &str = "sending";
pub(super) const DONE: &str = "done";

#[derive(Serialize, Deserialize)]
pub(super) struct BindingItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) phone_number_id: String,
    pub(super) tenant: TenantId,
}

#[derive(Serialize, Deserialize)]
pub(super) struct InboundItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) id: WaMessageId,
    /// The record's incarnation, the key of its entry in the incarnation index
    /// (beside the heads'): what its queue message names it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) incarnation: Option<Incarnation>,
    pub(super) phone_number_id: PhoneNumberId,
    pub(super) text: String,
    pub(super) bare_note: bool,
    /// An echo of the business's app; absent on records from before echoes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) by_business: bool,
    /// A voice note's media id and type (never its bytes); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) audio: Option<AudioRef>,
    pub(super) received_at: i64,
    pub(super) arrival: u64,
    pub(super) state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) turn: Option<TurnId>,
    #[serde(default)]
    pub(super) enqueued: bool,
    pub(super) expires_at: i64,
    /// The record's tombstone (64 hex digits), what an erase leaves of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tombstone: Option<String>,
}

/// A person has the contact's conversation (`WA#HANDOFF`); it lives until then.
#[derive(Serialize, Deserialize)]
pub(super) struct HandoffItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) by: HandoffBy,
    pub(super) since: i64,
    pub(super) until: i64,
    pub(super) expires_at: i64,
}

impl InboundItem {
    pub(super) fn into_record(self) -> Result<InboundRecord, StoreError> {
        let state = match (self.state.as_str(), self.turn) {
            (PENDING, _) => RecordState::Pending,
            (TAKEN, Some(turn)) => RecordState::Taken(turn),
            (HANDLED, Some(turn)) => RecordState::Handled(turn),
            _ => {
                return Err(StoreError::Corrupt(
                    "a WhatsApp record's state does not read".into(),
                ));
            }
        };
        Ok(InboundRecord {
            message: NewInbound {
                id: self.id,
                incarnation: self.incarnation,
                phone_number_id: self.phone_number_id,
                text: self.text,
                bare_note: self.bare_note,
                by_business: self.by_business,
                audio: self.audio,
                received_at: self.received_at,
                expires_at: self.expires_at,
                tombstone: self.tombstone.as_deref().and_then(Tombstone::parse),
            },
            arrival: self.arrival,
            state,
            enqueued: self.enqueued,
        })
    }
}

#[derive(Serialize, Deserialize)]
pub(super) struct TurnItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) id: TurnId,
    pub(super) phone_number_id: PhoneNumberId,
    pub(super) messages: Vec<WaMessageId>,
    pub(super) text: String,
    pub(super) bare_notes: bool,
    /// A person turn; absent on the agent's turns and on turns from before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) by_person: bool,
    /// What its voice notes came to; absent without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) voice: Option<VoiceTurn>,
    pub(super) last_inbound_at: i64,
    pub(super) status: String,
    /// What it sends, as JSON, once settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) outgoing: Option<String>,
    #[serde(default)]
    pub(super) sent: u64,
    pub(super) expires_at: i64,
}

impl TurnItem {
    pub(super) fn into_turn(self) -> Result<TurnRecord, StoreError> {
        let outgoing = || -> Result<Outgoing, StoreError> {
            let json = self
                .outgoing
                .as_deref()
                .ok_or_else(|| StoreError::Corrupt("a settled turn has no outgoing".into()))?;
            serde_json::from_str(json).map_err(|err| StoreError::Corrupt(err.to_string()))
        };
        let status = match self.status.as_str() {
            TAKEN => TurnStatus::Taken,
            SENDING => TurnStatus::Sending {
                outgoing: outgoing()?,
                sent: usize::try_from(self.sent).unwrap_or(usize::MAX),
            },
            DONE => TurnStatus::Done {
                outgoing: outgoing()?,
            },
            _ => return Err(StoreError::Corrupt("a turn's status does not read".into())),
        };
        Ok(TurnRecord {
            id: self.id,
            phone_number_id: self.phone_number_id,
            messages: self.messages,
            text: self.text,
            bare_notes: self.bare_notes,
            by_person: self.by_person,
            voice: self.voice,
            last_inbound_at: self.last_inbound_at,
            status,
            expires_at: self.expires_at,
        })
    }
}

pub(super) fn built<T, E: std::fmt::Display>(
    what: &str,
    result: Result<T, E>,
) -> Result<T, StoreError> {
    result.map_err(|err| StoreError::Other(format!("{what}: {err}")))
}

/// An update of one item of the contact in a transaction, under `condition`.
pub(super) fn update(
    table: &str,
    pk: &str,
    sk: String,
    expression: &str,
    condition: &str,
    values: Vec<(&str, AttributeValue)>,
) -> Result<TransactWriteItem, StoreError> {
    let mut update = Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .update_expression(expression)
        .condition_expression(condition);
    // DynamoDB refuses a name the expressions do not use.
    for (name, attribute) in [("#state", "state"), ("#status", "status")] {
        if expression.contains(name) || condition.contains(name) {
            update = update.expression_attribute_names(name, attribute);
        }
    }
    for (name, value) in values {
        update = update.expression_attribute_values(name, value);
    }
    Ok(TransactWriteItem::builder()
        .update(built("update", update.build())?)
        .build())
}
