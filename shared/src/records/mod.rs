//! What is kept about a contact, read and removed: the memory view (the session
//! state and the facts), the transcript page by page, the list and search of
//! earlier sessions, and erasure. Every read is of the contact's live life only
//! (`life`). The service, [`Records`], holds the record and recall reads and the
//! tenant's settings (the idle timeout the memory view's `open` is told by).
//!
//! (`docs/DESIGN.md`: "The HTTP API", "Recall over earlier sessions", "Erasure".)

mod life;
mod sessions;
pub mod transcript;

use std::sync::Arc;

use serde::Serialize;

use crate::domain::Fact;
use crate::plan::session::{Clock, idle};
use crate::service::{AskError, not_found, read_config, unusable};
use crate::store::{ContactKey, RecallStore, RecordStore};
use crate::tenant::{Defaults, TenantStore, stored_settings};
pub use life::{ERASE_SETTLES, born_of, records_of_life};
pub use sessions::{Closing, DEFAULT_RECORDS, RecallQuery, RecordLimit, SessionsView, search};
pub use transcript::{PageSize, SessionSelector, format_cursor, parse_cursor};

/// Largest transcript page.
pub const MAX_PAGE: usize = 200;
/// Transcript page size when none is asked for.
pub const DEFAULT_PAGE: usize = 50;

/// The records service: what is kept about a contact, and the ports it reads.
#[derive(Clone)]
pub struct Records {
    /// The memory view's, the transcript's and erasure's reads and writes.
    pub store: Arc<dyn RecordStore>,
    /// The session indexes and texts the search reads.
    pub recall: Arc<dyn RecallStore>,
    /// Tenant configuration (the idle timeout).
    pub tenants: Arc<dyn TenantStore>,
    /// Service-wide defaults.
    pub defaults: Defaults,
    /// The clock.
    pub clock: Clock,
}

/// The memory view of a contact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryView {
    /// Current session state.
    pub session: SessionView,
    /// Facts with their sources.
    pub facts: Vec<Fact>,
}

/// Session state, as the memory view shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionView {
    /// Session number.
    pub number: u32,
    /// False once the session went idle: the next message opens a new one.
    pub open: bool,
    /// The summary of the folded messages.
    pub summary: Option<String>,
    /// Messages up to this sequence number are folded into the summary.
    pub summarized_until: u64,
    /// Last committed sequence number.
    pub last_seq: u64,
    /// Context size of the last request.
    pub last_context_tokens: u64,
    /// Compaction steps applied in this session.
    pub steps: u32,
    /// Time of the last round, seconds since the Unix epoch.
    pub last_activity: i64,
}

impl Records {
    /// The service on one store holding every port it calls (the DynamoDB
    /// adapter's, or the in-memory one).
    pub fn on<S: RecordStore + RecallStore + TenantStore + 'static>(
        store: Arc<S>,
        defaults: Defaults,
        clock: Clock,
    ) -> Records {
        Records {
            store: store.clone(),
            recall: store.clone(),
            tenants: store,
            defaults,
            clock,
        }
    }

    /// The contact's memory: session state and facts.
    pub async fn memory(&self, key: &ContactKey) -> Result<MemoryView, AskError> {
        let now = (self.clock)();
        let (head, facts) = self.store.load_memory(key, now).await?;
        let head = head.ok_or_else(not_found)?;
        let stored = stored_settings(self.tenants.as_ref(), &self.defaults, &key.tenant);
        let settings = read_config(stored.await)?.map_err(unusable)?;
        Ok(MemoryView {
            session: SessionView {
                number: head.session,
                open: !idle(&head, now, settings.session_idle_minutes),
                summary: head.summary.clone(),
                summarized_until: head.summarized_until,
                last_seq: head.last_seq,
                last_context_tokens: head.last_context_tokens,
                steps: head.steps,
                last_activity: head.last_activity,
            },
            // The memory view shows who set each fact; the earlier values are the
            // operator's facts route's.
            facts: facts
                .into_iter()
                .map(|fact| Fact {
                    history: Vec::new(),
                    ..fact
                })
                .collect(),
        })
    }
}
