//! The decisions, pure: the context policy's step, fold and window decisions
//! ([`policy`]), what a window holds, what a step prunes and folds, when a
//! pause folds, how long cache entries live, how a request is laid out and the
//! Messages API's rules it must pass, the session and sweep rules, the fact
//! policy, and recall's ranking. No port, no clock read, no I/O: each is a
//! function of what the rooms that act on it (`converse`, `compaction`,
//! `records`, `operate`) read and hand it, and each is tested on its own.
//!
//! The plan names only [`crate::domain`], [`crate::text`] and [`crate::usage`]
//! below it (the layout test checks that no module of it names a room or a port).

pub mod cache_ttl;
pub mod facts;
pub mod pairing;
pub mod pause_fold;
pub mod policy;
pub mod pruning;
pub mod recall;
pub mod request;
pub mod sendable;
pub mod session;
pub mod step_plan;
pub mod sweep;
pub mod validate;
pub mod window;
