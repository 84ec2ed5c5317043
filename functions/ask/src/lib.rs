//! The `ask` function as a library, so integration tests can drive its handler
//! in-process as well as through the real binary. (`docs/DESIGN.md`: a round.)
//!
//! # Layout
//!
//! * `main.rs`: tracing, every dependency from the environment
//!   (`degrau_adapters::wiring::Dependencies::from_env`), the `Converse`, run.
//! * [`handler`]: API Gateway (HTTP API, payload v2) in, the service's answer out:
//!   routes, the tenant from the verified claim, typed parameters, the one map
//!   from service errors to statuses, the request's deadline.

pub mod handler;
