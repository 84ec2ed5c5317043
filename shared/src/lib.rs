//! degrau: conversation memory for LLM chat agents. This is the core: everything
//! that decides *what the model sees* and *what is stored*, with no AWS, no network
//! and no Lambda in it. The adapters crate (`degrau-adapters`) wires its ports to
//! DynamoDB, SQS and the Anthropic Messages API, and the functions in `functions/`
//! serve it. `docs/DESIGN.md` explains the design and its invariants.
//!
//! # Layout
//!
//! The crate's folder is `shared/` (the deployment's card names it); the crate is
//! `degrau`. It is cut by use case: one room per use case, each owning its service,
//! holding only the ports it calls; the pure decisions in one room below them all.
//! Its modules import one another without a circle: each list below only uses the
//! ones before it (`tests/core/layout.rs` checks that, that [`plan`] names only
//! itself, [`domain`], [`text`] and [`usage`], and that no product file is over 500
//! lines nor function over 70). Read in this order:
//!
//! * [`text`], [`usage`], [`deadline`], [`metrics`]: characters that could forge a
//!   line in what the model reads; token accounting; one time budget per request;
//!   CloudWatch Embedded Metric Format lines on stdout; [`metering`]: a tenant's
//!   consumption per day and its price.
//! * [`domain`]: messages and content blocks exactly as the Messages API has them,
//!   the contact (its key, head and facts), and the validated ids that reach
//!   storage keys.
//! * [`plan`]: the decisions, pure: the window, pruning and the step plan, the pause
//!   fold, cache lifetimes, the request laid out for prompt caching and the API's
//!   rules it must pass, what the API accepts back (`sendable`), tool pairing, the
//!   session and sweep rules, the fact policy, recall's ranking.
//! * The ports: [`store`] (split by caller: `RoundStore`, `JobStore`, `SweepStore`,
//!   `RecordStore`, `OperatorStore`, `UsageStore`, `RecallStore`; `Store` is the
//!   seven, as an adapter implements them), [`model`] (`Model`), [`jobs`] (`Jobs`,
//!   the job messages), [`tools`] (`Tools`, with the built-in demo tools) and
//!   [`quota`] (`Quotas`).
//! * [`fairshare`]: each tenant's fair share (a lease per running ask, rates per
//!   minute, a round's tool time) and a public number's limits, over the
//!   `Quotas` port's counters and leases; pure decisions and one call each.
//! * [`platform`]: the platform's policy over its tenants (the deployment's plan,
//!   a tenant's policy item, the policy in force) and the `PolicyStore` port.
//! * [`tenant`]: a tenant's settings over the deployment's defaults, inside the
//!   platform's policy (`tenant::bounds`), its WhatsApp settings, and the
//!   `TenantStore` port that reads them.
//! * [`events`]: events out (`EventsOut`, the port; the event a tenant's events
//!   webhook receives, and the one rule for publishing it after a commit).
//! * [`service`]: what the services share (the error a request answers with, a
//!   store call by its deadline, the tenant's settings read).
//! * The rooms, each with its service: [`records`] (`Records`: the memory view,
//!   the transcript, the sessions listed and searched, erasure); [`converse`]
//!   (`Converse`: a round asked, streamed, recorded or closed, and the context a
//!   client's own loop reads); [`operate`] (`Operate`: the operator routes'
//!   contacts, facts, configuration and usage; `operate::platform`: the
//!   platform's own routes); [`compaction`] (`Compactor`: steps, pause folds,
//!   facts and index jobs, the session sweep).
//! * [`channel`]: the channel port, what a messaging channel gives a turn and
//!   takes back (WhatsApp is the crate `degrau-whatsapp`, beside the core).
//! * [`fifo`]: one runner for a FIFO queue's batch (the deadline before each
//!   record, a failure holding back its own message group), for the functions
//!   that read one.
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
