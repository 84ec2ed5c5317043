//! The requests the adapter sends, built here so that the trait implementations in
//! `mod.rs` read as what they do: the reads (one paging helper, [`Pages`], for every
//! query that may span pages), and the writes (the transaction items of a round, a
//! step, a fact batch and a refresh; the sweep's update; [`UpdateParts`] for the
//! update expressions).
//!
//! Reads are strongly consistent and bounded by the window: facts and head come in
//! one query (`sk BETWEEN "FACT#" AND "HEAD"`), the window in a second, from
//! `summarized_until + 1`. Nothing here scans, and nothing reads summarized messages
//! except the transcript and the facts job's read of a closed session (from its
//! archived `summarized_until`). The two index queries (the sweep's and a job's
//! search for its contact) cannot be strongly consistent: the writes that follow
//! them re-check the head under a condition.
//!
//! One file per concern: [`reads`], [`writes`] (single writes), [`round`] (a round's
//! transaction), [`transactions`] (the other transaction items) and [`update`]
//! (update expressions); the names the adapter calls are re-exported here, so its
//! callers name `queries::…` only.

mod reads;
mod round;
mod transactions;
mod update;
mod writes;

pub use reads::Pages;
pub(super) use round::round_items;
pub(super) use transactions::{
    FactGuard, fact_transactions, index_items, refresh_items, settle_parts, step_items,
};
pub(super) use update::{UpdateParts, update_if};
