//! The transcript view: which sessions, how many messages, from where. Its query
//! parameters are parsed at the edge into these typed values (the handler's
//! `TranscriptQuery`), so the service never sees a raw string; each parse answers
//! the documented 400 message.

use super::{DEFAULT_PAGE, MAX_PAGE, Records};
use crate::service::{AskError, not_found};
use crate::store::{ContactKey, Cursor, SessionFilter, TranscriptPage};

/// Which sessions a transcript page covers (`session=current|all|N`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionSelector {
    /// The head's session (the default).
    #[default]
    Current,
    /// Every session.
    All,
    /// One session, by number (1 or more).
    Only(u32),
}

impl SessionSelector {
    /// Reads `current`, `all` or a session number.
    pub fn parse(text: &str) -> Result<Self, AskError> {
        match text {
            "all" => Ok(SessionSelector::All),
            "current" => Ok(SessionSelector::Current),
            number => match number.parse::<u32>() {
                Ok(n) if n > 0 => Ok(SessionSelector::Only(n)),
                _ => Err(AskError::InvalidRequest(
                    "`session` must be `current`, `all` or a session number".into(),
                )),
            },
        }
    }
}

/// How many messages a transcript page holds: 1 to [`MAX_PAGE`], [`DEFAULT_PAGE`]
/// when none is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSize(usize);

impl PageSize {
    /// Reads a whole number from 1 to [`MAX_PAGE`].
    pub fn parse(text: &str) -> Result<Self, AskError> {
        match text.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(PageSize(n)),
            _ => Err(AskError::InvalidRequest(format!(
                "`limit` must be a whole number from 1 to {MAX_PAGE}"
            ))),
        }
    }

    /// The number of messages.
    pub fn get(self) -> usize {
        self.0
    }
}

impl Default for PageSize {
    fn default() -> Self {
        PageSize(DEFAULT_PAGE)
    }
}

/// Reads a cursor from a URL (`{session}.{seq}`, as [`format_cursor`] writes it).
pub fn parse_cursor(text: &str) -> Result<Cursor, AskError> {
    let bad =
        || AskError::InvalidRequest("`before` must be a cursor returned by a previous page".into());
    let (session, seq) = text.split_once('.').ok_or_else(bad)?;
    Ok(Cursor {
        session: session.parse().map_err(|_| bad())?,
        seq: seq.parse().map_err(|_| bad())?,
    })
}

/// Formats a cursor for a URL.
pub fn format_cursor(cursor: &Cursor) -> String {
    format!("{}.{}", cursor.session, cursor.seq)
}

impl Records {
    /// A page of the transcript: `limit` messages of the selected sessions before
    /// the cursor `before` (a previous page's `next_before`), oldest first. The
    /// current session of a contact never seen is 404.
    pub async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionSelector,
        limit: PageSize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, AskError> {
        // Only the live head's life shows (see `life`): nothing once it is gone.
        let now = (self.clock)();
        let (head, _) = self.store.load_memory(key, now).await?;
        let filter = match (sessions, &head) {
            (SessionSelector::Current, None) => return Err(not_found()),
            (_, None) => return Ok(TranscriptPage::default()),
            (SessionSelector::All, _) => SessionFilter::All,
            (SessionSelector::Only(n), _) => SessionFilter::Only(n),
            (SessionSelector::Current, Some(head)) => SessionFilter::Only(head.session),
        };
        let page = self
            .store
            .transcript(key, filter, limit.get(), before)
            .await?;
        Ok(super::life::page_of_life(
            page,
            super::life::born_of(head.as_ref(), now),
        ))
    }
}
