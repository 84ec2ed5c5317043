//! The WhatsApp channel's integration tests, one binary: the webhook and the worker
//! against the core's in-memory store, the in-memory WhatsApp store, the scripted
//! model and the test doubles of the queue and the Graph API. `helpers` holds what
//! they share with the core's own tests.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

mod helpers;
mod whatsapp;
mod whatsapp_events;
mod whatsapp_handoff;
mod whatsapp_voice;
