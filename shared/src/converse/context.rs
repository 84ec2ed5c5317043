//! Memory for an agent that runs its own loop, the read side: what the contact's
//! next model request should carry (`GET /v1/contacts/{contact}/context`), computed
//! by the code `ask` runs before its first model call: the tenant's settings, the
//! turn with the session rule applied, the window cut where `ask` would cut it (the
//! hard cap of a late step, the context policy), and the request builder's system
//! blocks and breakpoints ([`build_context`]). Nothing here writes.
//!
//! The view names the stored state it was read from with a [`HeadToken`]; the round
//! the client then commits ([`super::rounds`]) must carry it, and is refused with
//! 409 when another round landed, the contact was erased and started again, or the
//! session went idle in between. A compaction step landing in between does not
//! make it stale: a step never conflicts with a round in `ask` either.

use std::fmt;

use serde::Serialize;

use super::round::first_cut;
use super::{AskError, Converse, Turn};
use crate::deadline::Deadline;
use crate::domain::Incarnation;
use crate::plan::request::{BuildError, ContextParts, Lifetimes, ModelContext, build_context};
use crate::store::ContactKey;
use crate::tenant::Settings;

/// Opens every head token: the format's version.
const TOKEN_PREFIX: &str = "h1";

/// The stored state a context was read from, as an opaque token
/// (`h1.{incarnation or -}.{session}.{last_seq}.{0 or 1}`): the head's incarnation,
/// session and `last_seq` (the commit's own condition), and whether the round opens
/// a new session. A contact never seen reads `h1.-.0.0.1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadToken {
    incarnation: Option<Incarnation>,
    session: u32,
    last_seq: u64,
    opens_session: bool,
}

impl HeadToken {
    /// The token of a loaded turn: its head as read, and where the session rule put
    /// the round.
    pub(super) fn of(turn: &Turn) -> HeadToken {
        let head = turn.expected.as_ref();
        HeadToken {
            incarnation: head.and_then(|h| h.incarnation.clone()),
            session: head.map_or(0, |h| h.session),
            last_seq: head.map_or(0, |h| h.last_seq),
            opens_session: head.is_none() || turn.plan.closed_session.is_some(),
        }
    }

    /// Reads a token that `GET .../context` returned.
    pub fn parse(text: &str) -> Result<HeadToken, AskError> {
        let bad = || {
            AskError::InvalidRequest(
                "`head` must be the token that GET /v1/contacts/{contact}/context returned".into(),
            )
        };
        let parts: Vec<&str> = text.split('.').collect();
        let [TOKEN_PREFIX, incarnation, session, last_seq, opens] = parts.as_slice() else {
            return Err(bad());
        };
        let incarnation = match *incarnation {
            "-" => None,
            text => Some(Incarnation::parse(text).map_err(|_| bad())?),
        };
        let number = |text: &str| {
            // Digits only: no sign, no spaces, no leading `+`.
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            text.parse::<u64>().map_err(|_| bad())
        };
        Ok(HeadToken {
            incarnation,
            session: u32::try_from(number(session)?).map_err(|_| bad())?,
            last_seq: number(last_seq)?,
            opens_session: match *opens {
                "0" => false,
                "1" => true,
                _ => return Err(bad()),
            },
        })
    }

    /// Why a round read at `self` cannot be committed on the state now read as
    /// `current`, or `None` when it can (the 409's message).
    pub(super) fn stale_against(&self, current: &HeadToken) -> Option<String> {
        let again = "read the context again and run the round on it";
        // A token read before the contact's first round names no head (session 0):
        // a round creating it is a round that landed, not an erase.
        if self.incarnation != current.incarnation && self.session != 0 {
            return Some(format!(
                "the contact was erased or started again since this head was read; {again}"
            ));
        }
        if (self.session, self.last_seq) != (current.session, current.last_seq)
            || self.incarnation != current.incarnation
        {
            return Some(format!(
                "another round for this contact landed since this head was read; nothing was \
                 stored; {again}"
            ));
        }
        if self.opens_session != current.opens_session {
            return Some(format!(
                "the contact's session changed since this head was read (it went idle, and this \
                 round would open a new one); nothing was stored; {again}"
            ));
        }
        None
    }
}

impl fmt::Display for HeadToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{TOKEN_PREFIX}.{}.{}.{}.{}",
            self.incarnation.as_ref().map_or("-", Incarnation::as_str),
            self.session,
            self.last_seq,
            u8::from(self.opens_session)
        )
    }
}

/// The answer of `GET .../context`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextView {
    /// The session the next round belongs to.
    pub session: u32,
    /// The [`HeadToken`] to send back with the round.
    pub head: String,
    /// True when the next round opens a new session (a contact never seen, or a
    /// session gone idle): the context then holds the facts, no summary and no
    /// window.
    pub opens_session: bool,
    /// `system` and `messages`, with degrau's breakpoints.
    #[serde(flatten)]
    pub context: ModelContext,
}

impl Converse {
    /// What the contact's next model request should carry, and the head token its
    /// round must be committed with, read by `deadline`. A contact never seen gets
    /// a new session's context (no 404): its first round creates it. A window that
    /// cannot be read whole while rounds land answers as a race lost (409).
    pub async fn context(
        &self,
        key: &ContactKey,
        deadline: Deadline,
    ) -> Result<ContextView, AskError> {
        let settings = self.settings(&key.tenant, deadline).await?;
        let turn = self.load_turn(key, &settings, deadline).await?;
        let context = served(&settings, &turn)?;
        let head = HeadToken::of(&turn);
        Ok(ContextView {
            session: turn.plan.session,
            opens_session: head.opens_session,
            head: head.to_string(),
            context,
        })
    }
}

/// The context served for `turn`: the system blocks and the window where `ask`
/// would cut it, with the lifetimes the tenant's policy chooses.
pub(super) fn served(settings: &Settings, turn: &Turn) -> Result<ModelContext, AskError> {
    let cut = first_cut(settings, turn);
    let plan = &turn.plan;
    // The client's tools are not known here: the sizes the cache TTL policy
    // weighs leave them out (a client whose tools are long may get five
    // minutes where `ask` would give an hour; never the other way round).
    let mut context = build_context(&ContextParts {
        instructions: &settings.instructions,
        facts: &turn.facts,
        summary: plan.summary.as_deref(),
        last_session: turn.digest.as_deref(),
        window: &plan.window[cut.start..],
        lifetimes: Lifetimes::FiveMinutes,
    })
    .map_err(|e| match e {
        BuildError::EmptyInstructions => AskError::Internal(e.to_string()),
        window => AskError::Conflict(format!(
            "the conversation was being written while it was read ({window}); read it again"
        )),
    })?;
    context.set_lifetimes(settings.cache_ttl.lifetimes(&plan.gaps, context.sizes()));
    Ok(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_token_round_trips_and_refuses_anything_else() {
        let token = HeadToken {
            incarnation: Some(Incarnation::parse("0123456789abcdef0123456789abcdef").unwrap()),
            session: 3,
            last_seq: 18,
            opens_session: false,
        };
        let text = token.to_string();
        assert_eq!(text, "h1.0123456789abcdef0123456789abcdef.3.18.0");
        assert_eq!(HeadToken::parse(&text).unwrap(), token);
        let new = HeadToken::parse("h1.-.0.0.1").unwrap();
        assert_eq!(new.to_string(), "h1.-.0.0.1");
        for bad in [
            "",
            "h1",
            "h2.-.0.0.1",
            "h1.-.0.0.2",
            "h1.-.-1.0.1",
            "h1.-.+1.0.1",
            "h1.-.0. 1.1",
            "h1.-.4294967296.0.1",
            "h1.XYZ.0.0.1",
            "h1.-.0.0.1.extra",
            "h1.-.0.99999999999999999999.1",
        ] {
            let error = HeadToken::parse(bad).unwrap_err();
            assert!(
                matches!(&error, AskError::InvalidRequest(m) if m.starts_with("`head` must be")),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn staleness_names_what_changed() {
        let read = HeadToken::parse("h1.aa.2.10.0").unwrap();
        assert_eq!(read.stale_against(&read), None);
        let other_life = HeadToken::parse("h1.bb.2.10.0").unwrap();
        assert!(read.stale_against(&other_life).unwrap().contains("erased"));
        let landed = HeadToken::parse("h1.aa.2.12.0").unwrap();
        assert!(
            read.stale_against(&landed)
                .unwrap()
                .contains("another round")
        );
        let idle = HeadToken::parse("h1.aa.2.10.1").unwrap();
        assert!(read.stale_against(&idle).unwrap().contains("went idle"));
        let never_seen = HeadToken::parse("h1.-.0.0.1").unwrap();
        let created = HeadToken::parse("h1.aa.1.2.0").unwrap();
        assert!(
            never_seen
                .stale_against(&created)
                .unwrap()
                .contains("another round")
        );
        assert!(read.stale_against(&never_seen).unwrap().contains("erased"));
    }
}
