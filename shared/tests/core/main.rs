//! The core's integration tests, one binary: the ask service, its limits, its cache
//! TTL policy, the compactor and the sweep against the in-memory store and the
//! strict scripted model, the FIFO batch runner, and property tests over generated
//! conversations.
//! `helpers` holds what they share.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

mod ask_limits;
mod ask_service;
mod cache_ttl;
mod commit_outcome;
mod compactor;
mod compactor_events;
mod fairshare;
mod fifo;
mod helpers;
mod layout;
mod model_answers;
mod operate;
mod own_loop;
mod pause_fold;
mod platform;
mod properties;
mod quota;
mod streaming;
mod structure;
mod sweep;
mod tools;
