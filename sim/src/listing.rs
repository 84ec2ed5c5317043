//! Every contact is listed, once, at quiescence: paged through one contact at a
//! time (`GET /v1/contacts?limit=1`, each page after the last one's cursor, so
//! every contact is a page boundary), a tenant's listing holds each of its
//! contacts whose head lives, exactly once, most recently active first, with
//! the head's session and activity, and none erased or expired.

use std::collections::BTreeMap;

use degrau::store::ContactCursor;

use crate::oracle::Violation;
use crate::world::{TENANTS, World, tenant_id, tenant_of};

/// The invariant's name.
pub const LISTED: &str = "every contact is listed once";

/// Checks every tenant's listing against the heads (indexes caught up).
pub(crate) async fn listed(world: &World, checks: &mut u64) -> Result<(), Violation> {
    world.memory.sync_indexes();
    let now = world.now();
    for tenant in TENANTS {
        *checks += 1;
        let mut expected = BTreeMap::new();
        for (index, key) in world.contacts.iter().enumerate() {
            if tenant_of(index) != tenant {
                continue;
            }
            if let Some(head) = world
                .memory
                .snapshot(key)
                .head
                .filter(|h| !h.expired_at(now))
            {
                expected.insert(
                    key.contact.as_str().to_owned(),
                    (head.session, head.last_activity),
                );
            }
        }
        let listed = pages(world, tenant).await?;
        let order_broken = listed.windows(2).any(|pair| pair[0].1.1 < pair[1].1.1);
        let mut seen = BTreeMap::new();
        for (contact, found) in &listed {
            if seen.insert(contact.clone(), *found).is_some() {
                return Err(Violation::new(
                    LISTED,
                    format!("{tenant}: {contact} listed twice"),
                ));
            }
        }
        if seen != expected || order_broken {
            return Err(Violation::new(
                LISTED,
                format!("{tenant}: listed {listed:?}, the live heads are {expected:?}"),
            ));
        }
    }
    Ok(())
}

/// A tenant's contacts, a page of one at a time: (contact, (session, activity)).
async fn pages(world: &World, tenant: &str) -> Result<Vec<(String, (u32, i64))>, Violation> {
    let id = tenant_id(tenant);
    let mut listed = Vec::new();
    let mut after: Option<ContactCursor> = None;
    for _ in 0..=world.contacts.len() + 1 {
        let page = world
            .operate
            .contacts(&id, Some(1), after.as_ref())
            .await
            .map_err(|error| Violation::new(LISTED, format!("{tenant}: {error}")))?;
        for entry in &page.contacts {
            listed.push((
                entry.contact.as_str().to_owned(),
                (entry.session, entry.last_activity),
            ));
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(listed),
        }
    }
    Err(Violation::new(
        LISTED,
        format!("{tenant}: its listing never ends ({listed:?})"),
    ))
}
