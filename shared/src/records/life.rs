//! Reads of one life of a contact. A head's [`born_at`](crate::domain::Head::born_at)
//! dates its life; the contact's partition may still hold items of an earlier life
//! whose head expired before them (its tenant lowered the retention or the idle
//! timeout after they were written, so they were given a longer life than their
//! head). No read shows them: the transcript and the session records are of the
//! live head's life only (nothing at all once the head is gone), and this life's
//! writes replace them (the round's condition, `created_at < born_at`), so a
//! contact who comes back after the head expired starts over at once, never
//! wedged on a sequence number an older message still holds.

use std::time::Duration;

use super::Records;
use crate::domain::Head;
use crate::plan::recall::{MAX_RECORDS, SessionRecord};
use crate::service::AskError;
use crate::store::{ContactKey, RecordStore, StoreError, TranscriptPage};

/// When the life being read began: the live head's, or `now` for a contact with
/// none (the next round starts a new life; nothing stored before is of it).
pub fn born_of(head: Option<&Head>, now: i64) -> Option<i64> {
    match head {
        Some(head) => head.born_at,
        None => Some(now),
    }
}

/// The page without the messages of an earlier life.
pub(super) fn page_of_life(mut page: TranscriptPage, born: Option<i64>) -> TranscriptPage {
    if let Some(born) = born {
        page.messages.retain(|message| message.created_at >= born);
    }
    page
}

/// How long an erase's answer waits after the erase, so the second it dated its
/// contact's erase bucket with is over (see [`Records::erase`]).
pub const ERASE_SETTLES: Duration = Duration::from_secs(1);

impl Records {
    /// Erases every item about the contact; idempotent. Returns how many went.
    /// The erase dates the contact's erase bucket with this second, and a new
    /// head's round begun in it or before is refused (see
    /// [`RecordStore::erase_contact`]);
    /// the answer waits the second out, so a message the client sends once it is
    /// answered begins the contact's new life instead of meeting that refusal.
    pub async fn erase(&self, key: &ContactKey) -> Result<usize, AskError> {
        let erased = self.store.erase_contact(key, (self.clock)()).await?;
        tokio::time::sleep(ERASE_SETTLES).await;
        Ok(erased)
    }
}

/// The contact's session records of the life begun at `born`, newest first, at
/// most `limit`: one read of `limit` records, and a second of every record
/// only when the first held some of an earlier life.
pub async fn records_of_life(
    store: &dyn RecordStore,
    key: &ContactKey,
    limit: usize,
    now: i64,
    born: Option<i64>,
) -> Result<Vec<SessionRecord>, StoreError> {
    let of_life = |record: &SessionRecord| born.is_none_or(|born| record.ended_at >= born);
    let records = store.session_records(key, limit, now).await?;
    if records.iter().all(of_life) {
        return Ok(records);
    }
    let all = store
        .session_records(key, MAX_RECORDS as usize, now)
        .await?;
    Ok(all.into_iter().filter(of_life).take(limit).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contact_without_a_live_head_has_no_life_to_show_and_an_undated_head_shows_all() {
        assert_eq!(born_of(None, 50), Some(50));
        let undated = Head::default();
        assert_eq!(born_of(Some(&undated), 50), None);
        let dated = Head {
            born_at: Some(20),
            ..Head::default()
        };
        assert_eq!(born_of(Some(&dated), 50), Some(20));
        assert!(dated.of_this_life(20) && !dated.of_this_life(19));
    }
}
