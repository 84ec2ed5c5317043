//! degrau: conversation memory for LLM chat agents. This is the core: everything
//! that decides *what the model sees* and *what is stored*, with no AWS, no network
//! and no Lambda in it. The adapters crate (`degrau-adapters`) wires its ports to
//! DynamoDB, SQS and the Anthropic Messages API, and the functions in `functions/`
//! serve it. `docs/DESIGN.md` explains the design and its invariants.
//!
//! # Layout
//!
//! The crate's folder is `shared/` (the deployment's card names it); the crate is
//! `degrau`. Its modules import one another without a circle: each list below only
//! uses the ones before it (`tests/core/layout.rs` checks that, and that no product file
//! grows past about 700 lines). Read in this order:
//!
//! * [`text`], [`usage`], [`deadline`], [`metrics`]: characters that could forge a
//!   line in what the model reads; token accounting; one time budget per request;
//!   CloudWatch Embedded Metric Format lines on stdout; [`metering`]: a tenant's
//!   consumption per day and its price.
//! * [`domain`]: messages and content blocks exactly as the Messages API has them,
//!   the contact's head and facts, and the validated ids that reach storage keys;
//!   [`facts`]: the fact policy; [`session`]: the clock and the idle rule.
//! * [`window`], [`pruning`] and [`step_plan`]: where a window may start; which old
//!   tool results a step prunes; when a step is due and what it folds into the
//!   summary, and the hard cap when a step is late. Pure functions.
//! * [`sendable`]: what the Messages API accepts back of what it sends (the one
//!   rule for text blocks that answers are normalised by). [`cache_ttl`],
//!   [`request`] and [`validate`]: how long a request's cache entries live; the
//!   request laid out for prompt caching; the API's rules every request must pass. [`pause_fold`]: when a pause past the entries' lifetime folds the
//!   window (the expected cost), pure.
//! * The ports: [`store`] (split by caller: `RoundStore`, `JobStore`, `SweepStore`,
//!   `RecordStore`, `OperatorStore`; `Store` is the five), [`model`] (`Model`), [`jobs`] (`Jobs`, the
//!   job messages), [`tools`] (`Tools`, with the built-in demo tools) and [`quota`]
//!   (`Quotas`); [`sweep`]: the sweep's rules (buckets, due time, the decision on a
//!   head, backoff), pure.
//! * [`fairshare`]: each tenant's fair share (a lease per running ask, rates per
//!   minute, a round's tool time) and a public number's limits, over the
//!   `Quotas` port's counters and leases; pure decisions and one call each.
//! * [`platform`]: the platform's policy over its tenants (the deployment's plan,
//!   a tenant's policy item, the policy in force) and the `PolicyStore` port.
//! * [`tenant`]: a tenant's settings over the deployment's defaults, inside the
//!   platform's policy (`tenant::bounds`), its WhatsApp settings, and the
//!   `TenantStore` port that reads them.
//! * The services: [`ask`] (a round, the transcript, the memory view, erasure, and
//!   the operator routes' contacts, facts, tenant configuration and usage) and
//!   [`compactor`] (steps, facts jobs and the session sweep, applying [`step_plan`]
//!   and [`sweep`]).
//! * [`platform_admin`]: the platform's own routes' service (its tenants with
//!   their usage, their policies).
//! * [`fifo`]: one runner for a FIFO queue's batch (the deadline before each
//!   record, a failure holding back its own message group), for the functions
//!   that read one.
//! * [`events`]: events out (`EventsOut`, the port; the event a tenant's events
//!   webhook receives, and the one rule for publishing it after a commit).
//! * [`whatsapp`]: the WhatsApp channel, an edge in front of the `ask` service
//!   (Meta's webhook events, the inbound records, bursts made one turn, the reply
//!   within the customer service window).
//!
//! With the `test-util` feature (tests only): the in-memory adapter of every port
//! ([`memory`]), the scripted model (`model::scripted`), message helpers and a store
//! wrapper that injects failures (`testing`).

pub mod channel;
pub mod compaction;
pub mod converse;
pub mod deadline;
pub mod domain;
pub mod events;
pub mod fairshare;
pub mod fifo;
pub mod jobs;
#[cfg(any(test, feature = "test-util"))]
pub mod memory;
pub mod metering;
pub mod metrics;
pub mod model;
pub mod operate;
pub mod plan;
pub mod platform;
pub mod quota;
pub mod records;
pub mod service;
pub mod store;
pub mod tenant;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod text;
pub mod tools;
pub mod usage;
