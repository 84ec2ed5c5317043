//! degrau: conversation memory for LLM chat agents. This is the core: everything
//! that decides *what the model sees* and *what is stored*, with no AWS, no network
//! and no Lambda in it. The adapters crate (`degrau-adapters`) wires its ports to
//! DynamoDB, SQS and the Anthropic Messages API, and the functions in `functions/`
//! serve it. `docs/DESIGN.md` explains the design and its invariants.
//!
//! # Layout
//!
//! Read in this order:
//!
//! * [`domain`]: messages and content blocks exactly as the Messages API has them,
//!   the contact's head and facts, and the validated ids that reach storage keys.
//! * [`window`]: where a window of recent messages may start (a text-only user
//!   message; after the last hole).
//! * [`compaction`] and [`pruning`]: when a step is due, what it folds into the
//!   summary and which old tool results it prunes; the hard cap when a step is late.
//! * [`request`] and [`validate`]: the request laid out for prompt caching, and the
//!   API's rules every request must pass; [`cache_ttl`]: how long its cache
//!   entries live (the tenant's `cache_ttl` policy and the gaps `auto` reads).
//! * [`usage`], [`facts`] and [`tenant`]: token accounting, the fact policy, and a
//!   tenant's settings over the deployment's defaults; [`text`]: the characters
//!   that could forge a line in what the model reads.
//! * [`session`] and [`deadline`]: the clock and the idle rule; one time budget per
//!   request.
//! * The ports: [`store`] (`Store`, `TenantStore`), [`model`] (`Model`), [`jobs`]
//!   (`Jobs`, the job messages), [`tools`] (`Tools`, with the built-in demo tools)
//!   and [`quota`] (`Quotas`, each tenant's rounds and summary calls per hour).
//! * The services: [`ask`] (a round, the transcript, the memory view, erasure) and
//!   [`compactor`] (steps, facts jobs and the session sweep).
//! * [`metrics`]: CloudWatch Embedded Metric Format lines on stdout.
//! * [`fifo`]: one runner for a FIFO queue's batch, for the functions that read one.
//! * [`whatsapp`]: the WhatsApp channel, an edge in front of the `ask` service
//!   (Meta's webhook events, the inbound records, bursts made one turn, the reply
//!   within the customer service window).
//!
//! With the `test-util` feature (tests only): the in-memory store
//! (`store::memory`), the scripted model (`model::scripted`) and message helpers
//! (`testing`).

pub mod ask;
pub mod cache_ttl;
pub mod compaction;
pub mod compactor;
pub mod deadline;
pub mod domain;
pub mod facts;
pub mod fifo;
pub mod jobs;
pub mod metrics;
pub mod model;
pub mod pruning;
pub mod quota;
pub mod request;
pub mod session;
pub mod store;
pub mod tenant;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod text;
pub mod tools;
pub mod usage;
pub mod validate;
pub mod whatsapp;
pub mod window;
