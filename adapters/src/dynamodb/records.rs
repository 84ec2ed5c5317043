//! The [`RecordStore`] port on DynamoDB: a contact's memory, its transcript, its
//! sessions' recall records, and the erase of everything it left (the erase mark
//! first, then the head, then listing-and-deleting passes until none is left).

use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use degrau::domain::{Fact, Head};
use degrau::plan::recall::{MAX_RECORDS, SessionRecord};
use degrau::plan::session::unix_now;
use degrau::store::{ContactKey, Cursor, RecordStore, SessionFilter, StoreError, TranscriptPage};

use super::DynamoStore;
use super::error::{sdk_error, unless_condition_failed};
use super::items::{ArchiveItem, from_item, message_and_expiry, n, s};
use super::keys::{
    HEAD_SK, MAX_SESSION, archive_sk, contact_pk, erased_sk, message_sk, tenant_pk,
    transcript_range,
};
use super::queries::Pages;

/// Listing-and-deleting passes of an erase before it settles.
const ERASE_PASSES: usize = 4;

#[async_trait]
impl RecordStore for DynamoStore {
    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        let (head, facts) = self.head_and_facts(key, now).await?;
        Ok((head.filter(|head| !head.expired_at(now)), facts))
    }

    async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionFilter,
        limit: usize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, StoreError> {
        let Some((from, to)) = transcript_range(sessions, before) else {
            return Ok(TranscriptPage::default());
        };
        if limit == 0 {
            return Ok(TranscriptPage::default());
        }
        // BETWEEN rather than begins_with: a key condition takes one operator on the
        // sort key, and BETWEEN expresses both the session filter and the exclusive
        // `before` (as the message just before it).
        let query = self
            .query_range(
                key,
                message_sk(from.session, from.seq),
                message_sk(to.session, to.seq),
            )
            .scan_index_forward(false);
        // `transcript` takes no `now`: expired messages are dropped by the system
        // clock. Filtering here rather than with a FilterExpression keeps one
        // definition of "expired" (`expires_at <= now`) for both adapters; the loop
        // below keeps reading until the page is full either way.
        let now = unix_now();
        // One more than asked for tells whether an older page exists.
        let want = limit.saturating_add(1);
        let mut newest_first = Vec::with_capacity(want.min(1000));
        let mut pages = Pages::new(query);
        while newest_first.len() < want {
            let Some(page) = pages.next(Some(want - newest_first.len())).await? else {
                break;
            };
            for item in page {
                let (message, expires_at) = message_and_expiry(item)?;
                if expires_at.is_none_or(|expires| expires > now) {
                    newest_first.push(message);
                }
            }
        }
        Ok(TranscriptPage::from_newest_first(newest_first, limit))
    }

    async fn session_records(
        &self,
        key: &ContactKey,
        limit: usize,
        now: i64,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        // One query of the `SUM#` range, newest first: the bound on archives
        // (`recall::MAX_RECORDS`) bounds it; strongly consistent, so the record a
        // session's first round stored is there for its second (the digest stays
        // the same for the whole session).
        let query = self
            .query_range(key, archive_sk(0), archive_sk(MAX_SESSION))
            .scan_index_forward(false);
        let mut records = Vec::with_capacity(limit.min(MAX_RECORDS as usize));
        let mut pages = Pages::new(query);
        while records.len() < limit {
            let Some(page) = pages.next(Some(limit - records.len())).await? else {
                break;
            };
            for item in page {
                let archive = from_item::<ArchiveItem>(item)?;
                if archive.expires_at > now {
                    records.push(archive.record());
                }
            }
        }
        Ok(records)
    }

    async fn erase_contact(&self, key: &ContactKey, now: i64) -> Result<usize, StoreError> {
        // The tenant's last erase before anything goes: from then on no new head's
        // round begun before it lands (a transaction still in flight would bring
        // the contact back after the passes below). A later erase already
        // recorded stands.
        let mark = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(&key.tenant)))
            .key("sk", s(erased_sk(key)))
            .update_expression("SET erased_at = :now")
            .condition_expression("attribute_not_exists(erased_at) OR erased_at < :now")
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        unless_condition_failed("record the erase", mark)?;
        // The head goes first: from then on a round racing this erase fails its
        // `last_seq = :expected` condition instead of landing between the listing and
        // the deletes below (it would leave messages with no head). A round that
        // committed before the head went is listed by a later pass.
        let head = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|err| sdk_error("delete head", err))?;
        let mut erased = usize::from(head.attributes.is_some_and(|a| !a.is_empty()));
        let query = self
            .query()
            .key_condition_expression("pk = :pk")
            .projection_expression("pk, sk, tombstone, expires_at")
            .expression_attribute_values(":pk", s(contact_pk(key)));
        // Passes until a listing comes back empty; bounded, since after the head is
        // gone nothing but a brand-new first round can add items. Each WhatsApp
        // record's tombstone is written before the record goes, so a delivery of its
        // message replayed later is recognised (`record_inbound`).
        for _ in 0..ERASE_PASSES {
            let mut pages = Pages::new(query.clone());
            let mut found = 0;
            while let Some(items) = pages.next(None).await? {
                found += items.len();
                self.put_items(Self::tombstones_of(&items)?).await?;
                self.delete_keys(items).await?;
            }
            erased += found;
            if found == 0 {
                return Ok(erased);
            }
        }
        Ok(erased)
    }
}
