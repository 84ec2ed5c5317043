//! The `compactor` function as a library, so tests can drive its handler in-process
//! as well as through the real binary. (`docs/DESIGN.md`: a step, a facts job, the
//! sweep.)
//!
//! # Layout
//!
//! * `main.rs`: tracing, every dependency from the environment
//!   (`degrau_adapters::wiring::Dependencies::from_env`), the `Compactor`, run.
//! * [`handler`]: an SQS FIFO batch in, partial batch failures out (each record
//!   within its job budget, a failed record holding back its own group only); or
//!   the scheduled `{"sweep": true}`, answered with the sweep's report.

pub mod handler;
