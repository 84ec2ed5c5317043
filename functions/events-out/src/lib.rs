//! The `events-out` function as a library, so tests can drive its handler
//! in-process as well as through the real binary (`docs/events.md`).
//!
//! # Layout
//!
//! * `main.rs`: tracing, the delivery configuration, one SSM client and the
//!   webhook caller (the webhook tools' address checks and signing), run.
//! * [`handler`]: an SQS FIFO batch of events in, partial batch failures out:
//!   each event one signed `POST`; a failed one holds back its contact's later
//!   events only, and comes back until the queue dead-letters it.

pub mod handler;
