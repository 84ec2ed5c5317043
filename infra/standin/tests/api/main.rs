//! The stand-in over HTTP, served in-process on 127.0.0.1 and driven by reqwest
//! the way degrau's client drives the real API.

mod answers;
mod bedrock;
mod binary;
mod caching;
mod client;
mod control;
mod helpers;
mod quirks;
mod quirks_clients;
mod quirks_control;
mod quirks_props;
mod stream;
mod stream_props;
mod thinking;
mod validation;
mod voice;
