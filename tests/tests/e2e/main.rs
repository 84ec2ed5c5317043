//! The workspace's integration tests, one binary: the real function binaries as
//! Lambda runs them, against moto (`DEGRAU_TEST_AWS_ENDPOINT`), the stand-in and the
//! bridge, through the helpers of the `degrau-tests` library; the store contract
//! against both adapters; the local provisioning against `template.yaml`; what a
//! release is made of.
//! `helpers` holds what several of these modules share.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

mod ask_api;
mod bedrock;
mod budget;
mod cache_ttl;
mod compaction;
mod deployment;
mod docs;
mod events_out;
mod first_run;
mod floods;
mod helpers;
mod lifecycle;
mod model_answers;
mod observability;
mod operate;
mod own_loop;
mod pause_fold;
mod platform;
mod provisioning;
mod recall;
mod recorded_usage;
mod release;
mod reliability;
mod session_close;
mod store_contract;
mod streaming;
mod sweep;
mod tool_server;
mod webhooks;
mod whatsapp;
mod whatsapp_handoff;
mod whatsapp_voice;
