//! The key layout: one table, `pk`/`sk` strings, and two sparse global secondary
//! indexes. Nothing outside this module writes a key (the tests that read items raw
//! use these functions too).
//!
//! | item | pk | sk |
//! |---|---|---|
//! | tenant config | `T#{tenant}` | `CONFIG` |
//! | contact head | `T#{tenant}#C#{contact}` | `HEAD` |
//! | fact | `T#{tenant}#C#{contact}` | `FACT#{key}` |
//! | message | `T#{tenant}#C#{contact}` | `S#{session:06}#M#{seq:08}` |
//! | closed session's summary and record | `T#{tenant}#C#{contact}` | `SUM#{session:06}` |
//! | closed session's recall index (term counts, search summary) | `T#{tenant}#C#{contact}` | `IDX#{session:06}` |
//! | closed session's text (recall's passages) | `T#{tenant}#C#{contact}` | `TXT#{session:06}` |
//! | idempotency record | `T#{tenant}#C#{contact}` | `REQ#{key}` |
//! | WhatsApp arrival counter | `T#{tenant}#C#{contact}` | `WA#ARRIVALS` |
//! | WhatsApp inbound record | `T#{tenant}#C#{contact}` | `WA#IN#{message id}` |
//! | WhatsApp turn | `T#{tenant}#C#{contact}` | `WA#TURN#{turn id}` |
//! | WhatsApp number binding | `WA#{phone_number_id}` | `BINDING` |
//! | erased WhatsApp message's tombstone | `WA#ERASED#{keyed hash}` | `TOMBSTONE` |
//! | tenant quota count | `T#{tenant}` | `QUOTA#{kind}#{hour start}` |
//! | the platform's policy of a tenant | `T#{tenant}` | `POLICY` |
//! | the platform's list of tenants | `PLATFORM` | `TENANT#{tenant}` |
//! | a tenant's fair-share counter | `T#{tenant}` | `RATE#{name}#{window start}` |
//! | a contact's turn counter | `T#{tenant}#C#{contact}` | `RATE#{name}#{window start}` |
//! | a tenant's leases | `T#{tenant}` | `LEASES` |
//! | a tenant's last erase in one of 64 buckets (a time, naming no one) | `T#{tenant}` | `ERASED#{bucket:02}` |
//!
//! Within a contact's partition the sort keys order as `FACT#… < HEAD < IDX#… <
//! REQ#… < S#… < SUM#… < TXT#… < WA#…`: the facts and the head come in one range query, and no message
//! range reaches an archive. Neither id may hold `#`, so a key never reads two ways.
//!
//! **The sweep index** ([`SWEEP_INDEX`], `by-activity`). Every round writes
//! `sweep_pk` = `OPEN#{bucket}` ([`sweep_pk`]; the bucket is the port's
//! `sweep_bucket`) and `sweep_sk` = the time the head is next due (a number) on the
//! head; the settle of a sweep moves `sweep_sk` or removes both. The sweep reads one
//! bucket with `sweep_pk = :bucket AND sweep_sk <= :now`, earliest first.
//!
//! **The incarnation index** ([`INCARNATION_INDEX`], `by-incarnation`): keys only,
//! hashed on the head's `incarnation`. Only heads carry the attribute and it never
//! changes, so the index is written when a head is created and when it is erased
//! (which takes the entry with it); a job finds its contact through it.
//!
//! **The tenant index** ([`TENANT_INDEX`], `by-tenant`): every round writes
//! `tenant_pk` = `T#{tenant}` ([`tenant_pk`]) and `tenant_sk` = its last activity on
//! the head; the operator's contact listing reads it newest first. Heads last
//! written before the index existed join it with their next round.
//!
//! | tenant usage count | `T#{tenant}` | `USAGE#{day:08}` |
//!
//! (`docs/DESIGN.md`: "Key layout".)

use degrau::domain::{ContactId, FactKey, IdempotencyKey, TenantId};
use degrau::store::{ContactKey, Cursor, SessionFilter, StoreError};

/// The sweep index: a sparse GSI on the heads, `sweep_pk` (hash) and `sweep_sk`
/// (range). Its name in `template.yaml`.
pub const SWEEP_INDEX: &str = "by-activity";

/// The incarnation index: a sparse, keys-only GSI on the heads' `incarnation`.
/// Its name in `template.yaml`.
pub const INCARNATION_INDEX: &str = "by-incarnation";

/// The tenant index: a sparse GSI on the heads, `tenant_pk` (hash, `T#{tenant}`)
/// and `tenant_sk` (range, the head's last activity), projecting what the contact
/// listing shows. Its name in `template.yaml`.
pub const TENANT_INDEX: &str = "by-tenant";

/// The head's sort key.
pub const HEAD_SK: &str = "HEAD";
/// The prefix of a fact's sort key.
pub const FACT_PREFIX: &str = "FACT#";
/// The prefix of every message's sort key.
pub const MESSAGE_PREFIX: &str = "S#";
/// The tenant config's sort key.
pub const CONFIG_SK: &str = "CONFIG";
/// The sort key of the platform's policy of a tenant (beside its config).
pub const POLICY_SK: &str = "POLICY";
/// The partition of the platform's list of tenants. It starts with neither `T#`
/// nor `WA#`, so it never reads as a tenant's, a contact's or a number's.
pub const PLATFORM_PK: &str = "PLATFORM";
/// The prefix of a listed tenant's sort key in [`PLATFORM_PK`].
pub const PLATFORM_TENANT_PREFIX: &str = "TENANT#";

/// The prefix of a WhatsApp inbound record's sort key (after every `SUM#…`: `W` >
/// `S`, so no message or archive read reaches it; an erase lists it with the rest
/// of the partition).
pub const WA_INBOUND_PREFIX: &str = "WA#IN#";
/// The sort key of a contact's handoff: a person has the conversation.
pub const WA_HANDOFF_SK: &str = "WA#HANDOFF";
/// The sort key of a contact's WhatsApp arrival counter.
pub const WA_ARRIVALS_SK: &str = "WA#ARRIVALS";
/// The sort key of a number's binding to its tenant.
pub const BINDING_SK: &str = "BINDING";

/// The highest sequence number the sort key can order (8 digits).
pub const MAX_SEQ: u64 = 99_999_999;
/// The highest session number the sort key can order (6 digits).
pub const MAX_SESSION: u32 = 999_999;

/// The partition of every item about a contact.
pub fn contact_pk(key: &ContactKey) -> String {
    format!("T#{}#C#{}", key.tenant, key.contact)
}

/// The contact a partition key names: the inverse of [`contact_pk`]. Neither id
/// may hold `#`, so the split is unambiguous; both are validated again.
pub fn parse_contact_pk(pk: &str) -> Result<ContactKey, StoreError> {
    let corrupt = || StoreError::Corrupt("a sweep index entry's pk is not a contact's".into());
    let (tenant, contact) = pk
        .strip_prefix("T#")
        .and_then(|rest| rest.split_once("#C#"))
        .ok_or_else(corrupt)?;
    Ok(ContactKey {
        tenant: TenantId::parse(tenant).map_err(|_| corrupt())?,
        contact: ContactId::parse(contact).map_err(|_| corrupt())?,
    })
}

/// A WhatsApp inbound record's sort key.
pub fn wa_inbound_sk(id: &str) -> String {
    format!("{WA_INBOUND_PREFIX}{id}")
}

/// The partition of an erased WhatsApp message's tombstone (a keyed hash of its
/// tenant and id, naming no one; see `degrau_whatsapp::keyed`).
pub fn tombstone_pk(tombstone: &str) -> String {
    format!("WA#ERASED#{tombstone}")
}

/// The sort key of a tombstone.
pub const TOMBSTONE_SK: &str = "TOMBSTONE";

/// A WhatsApp turn's sort key.
pub fn wa_turn_sk(id: &str) -> String {
    format!("WA#TURN#{id}")
}

/// The partition of a WhatsApp business number's binding. It starts with `WA#`,
/// never `T#`, so it never reads as a tenant's or a contact's.
pub fn binding_pk(phone: &str) -> String {
    format!("WA#{phone}")
}

/// The sweep index partition of a bucket.
pub fn sweep_pk(bucket: u8) -> String {
    format!("OPEN#{bucket}")
}

/// The partition of a tenant's own items (its config).
pub fn tenant_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}")
}

/// A tenant's entry in the platform's list (in [`PLATFORM_PK`]).
pub fn platform_tenant_sk(tenant: &TenantId) -> String {
    format!("{PLATFORM_TENANT_PREFIX}{tenant}")
}

/// The sort key of a tenant's count of `kind` in the hour starting at `period`
/// (in the tenant's partition, beside its config).
pub fn quota_sk(kind: degrau::quota::QuotaKind, period: i64) -> String {
    format!("QUOTA#{}#{period}", kind.as_str())
}

/// The sort key of a fair-share counter (`RATE#{name}#{window start}`), in its
/// tenant's partition or its contact's. `RATE#` sorts between `HEAD` and `REQ#`:
/// no facts-and-head, message, archive or index range reaches it, and an erase
/// takes a contact's with the rest.
pub fn rate_sk(name: &str, window: i64) -> String {
    format!("RATE#{name}#{window}")
}

/// The sort key of a tenant's leases (one item: each lease and its expiry).
pub const LEASES_SK: &str = "LEASES";

/// The sort key of a tenant's last erase in the contact's bucket (`erased_at`, in
/// the tenant's partition; `degrau::store::erase_bucket`): a new head's round
/// checks it in its transaction (see `RecordStore::erase_contact`).
pub fn erased_sk(key: &ContactKey) -> String {
    format!("ERASED#{:02}", degrau::store::erase_bucket(key))
}

/// A message's sort key: ordered by session, then sequence number.
pub fn message_sk(session: u32, seq: u64) -> String {
    format!("{MESSAGE_PREFIX}{session:06}#M#{seq:08}")
}

/// A fact's sort key.
pub fn fact_sk(key: &FactKey) -> String {
    format!("{FACT_PREFIX}{key}")
}

/// A closed session's archive. `SUM#` sorts after every `S#…` message key (`U` >
/// `#`), so no message range (`BETWEEN S#… AND S#…`) ever reaches it.
pub fn archive_sk(session: u32) -> String {
    format!("SUM#{session:06}")
}

/// A closed session's recall index. `IDX#` sorts between `HEAD` and `REQ#`: no
/// facts-and-head, message or archive range reaches it.
pub fn index_sk(session: u32) -> String {
    format!("IDX#{session:06}")
}

/// A closed session's text for recall's passages. `TXT#` sorts after every `SUM#`
/// and before the WhatsApp items.
pub fn text_sk(session: u32) -> String {
    format!("TXT#{session:06}")
}

/// An idempotency record's sort key.
pub fn request_sk(idempotency: &IdempotencyKey) -> String {
    format!("REQ#{idempotency}")
}

/// The inclusive `(from, to)` positions a transcript query covers, or `None` when
/// nothing can match (`before` is at or before the first possible message).
pub fn transcript_range(
    sessions: SessionFilter,
    before: Option<Cursor>,
) -> Option<(Cursor, Cursor)> {
    let (from, mut to) = match sessions {
        SessionFilter::All => (
            Cursor { session: 0, seq: 0 },
            Cursor {
                session: MAX_SESSION,
                seq: MAX_SEQ,
            },
        ),
        SessionFilter::Only(session) => (
            Cursor { session, seq: 0 },
            Cursor {
                session,
                seq: MAX_SEQ,
            },
        ),
    };
    if let Some(before) = before {
        let just_before = match before.seq {
            0 => Cursor {
                session: before.session.checked_sub(1)?,
                seq: MAX_SEQ,
            },
            seq => Cursor {
                session: before.session,
                seq: (seq - 1).min(MAX_SEQ),
            },
        };
        to = to.min(just_before);
    }
    (from <= to).then_some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lowest idempotency record's sort key.
    fn request_sk_min() -> String {
        "REQ#".to_owned()
    }

    #[test]
    fn message_keys_sort_by_session_then_sequence() {
        assert_eq!(message_sk(2, 15), "S#000002#M#00000015");
        assert!(message_sk(1, 99) < message_sk(2, 1));
        assert!(message_sk(1, 9) < message_sk(1, 10));
        // The facts-and-head query relies on nothing else sorting between them.
        assert!(FACT_PREFIX < HEAD_SK && HEAD_SK < "REQ#" && "REQ#" < MESSAGE_PREFIX);
        // A contact's rate counters sort between the head and the requests.
        assert!(HEAD_SK < rate_sk("turns", 0).as_str() && rate_sk("turns", 9).as_str() < "REQ#");
        // Archives sort after every message, so message ranges never reach them.
        assert!(message_sk(MAX_SESSION, MAX_SEQ) < archive_sk(0));
        assert!(archive_sk(9) < archive_sk(10));
        // The WhatsApp items sort after everything else of the contact.
        assert!(archive_sk(MAX_SESSION).as_str() < WA_ARRIVALS_SK);
        assert!(archive_sk(MAX_SESSION).as_str() < WA_INBOUND_PREFIX);
        // Recall's items: no range of the others reaches them.
        assert!(HEAD_SK < index_sk(0).as_str() && index_sk(MAX_SESSION) < request_sk_min());
        assert!(archive_sk(MAX_SESSION) < text_sk(0));
        assert!(text_sk(MAX_SESSION).as_str() < WA_ARRIVALS_SK);
    }

    #[test]
    fn a_contact_key_reads_back_from_its_partition_key() {
        let key = ContactKey {
            tenant: TenantId::parse("barber.sp").unwrap(),
            contact: ContactId::parse("+55:11@x_y-z.C").unwrap(),
        };
        assert_eq!(parse_contact_pk(&contact_pk(&key)).unwrap(), key);
        for bad in ["T#t", "T#t#X#c", "CONFIG", "T##C#c", "T#t#C#", "T#t#C#a#b"] {
            let err = parse_contact_pk(bad).unwrap_err();
            assert!(matches!(err, StoreError::Corrupt(_)), "{bad}: {err:?}");
        }
        assert_eq!(sweep_pk(7), "OPEN#7");
    }

    #[test]
    fn transcript_ranges_stop_just_before_the_cursor() {
        let at = |session, seq| Cursor { session, seq };
        assert_eq!(
            transcript_range(SessionFilter::Only(2), Some(at(2, 5))),
            Some((at(2, 0), at(2, 4)))
        );
        assert_eq!(
            transcript_range(SessionFilter::All, Some(at(3, 1))),
            Some((at(0, 0), at(3, 0)))
        );
        assert_eq!(
            transcript_range(SessionFilter::Only(2), Some(at(5, 1))),
            Some((at(2, 0), at(2, MAX_SEQ)))
        );
        assert_eq!(
            transcript_range(SessionFilter::Only(2), Some(at(1, 7))),
            None
        );
        assert_eq!(transcript_range(SessionFilter::All, Some(at(0, 0))), None);
    }
}
