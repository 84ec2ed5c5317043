//! degrau: conversation memory for LLM chat agents.
//!
//! This crate holds everything that decides *what the model sees* — the domain types,
//! where a window may start, when a compaction step is due and what it folds and
//! prunes, the request builder with its prompt-caching layout, usage accounting and
//! fact validation — with no AWS or network in it. The Lambda functions in
//! `functions/` wire it to DynamoDB, SQS and the Anthropic Messages API.

pub mod ask;
pub mod compaction;
pub mod compactor;
pub mod deadline;
pub mod domain;
pub mod facts;
pub mod jobs;
pub mod metrics;
pub mod model;
pub mod pruning;
pub mod request;
pub mod session;
pub mod store;
pub mod tenant;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod tools;
pub mod usage;
pub mod validate;
pub mod window;
