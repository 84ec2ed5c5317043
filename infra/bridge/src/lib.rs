//! degrau-bridge: the local stand-in for the Lambda SQS event source mapping.
//! (`docs/DESIGN.md` describes the jobs it delivers.)
//!
//! # Layout
//!
//! [`poll`] (one round: [`poll_once`]) → [`event`] (the SQS event as Lambda builds
//! it) → [`invoke`] (the function, over HTTP or in-process) → [`response`] (the
//! partial batch failures); [`cli`] for the binary's flags.
//!
//! In AWS, an event source mapping polls the compaction jobs queue and invokes the
//! compactor with batches; locally, `cargo lambda watch` runs the function but
//! polls nothing, so this crate does the mapping's part ([`poll_once`], looped by
//! the `degrau-bridge` binary):
//!
//! 1. ReceiveMessage, up to [`QueueConfig::batch_size`] (≤ 10, as for FIFO event
//!    sources) with every system attribute;
//! 2. build the SQS event exactly as Lambda does ([`event::sqs_event`]) and invoke
//!    the function ([`Invoke`]; [`HttpInvoke`] posts to the invoke endpoint of
//!    `cargo lambda watch`);
//! 3. read the answer as Lambda reads a `ReportBatchItemFailures` response
//!    ([`response::items_to_retry`]): delete every message not listed as failed,
//!    leave the listed ones in the queue. A function error (crash, timeout) deletes
//!    nothing.
//!
//! Messages left in the queue come back when their visibility timeout runs out, as
//! in AWS. Locally the queue's timeout is long (the template's 720 s), so
//! [`QueueConfig::retry_visibility_seconds`] brings the messages to retry back
//! sooner (ChangeMessageVisibility): a local-only shortcut, AWS has no such knob.
//!
//! ## Redrive to the dead-letter queue
//!
//! That is the queue's job (its RedrivePolicy), not the mapping's, and moto does it:
//! when a ReceiveMessage meets a visible message whose receive count has reached
//! `maxReceiveCount`, moto moves it to the dead-letter queue instead of returning
//! it (moto 5.2.5, `SQSBackend.receive_message`), which is what SQS does. So the
//! bridge has no redrive code of its own; the `redrive` tests check that moto
//! keeps doing it.
//!
//! ## FIFO groups
//!
//! The bridge relies on the queue for ordering, as the mapping does. moto, like
//! SQS, does not deliver a message while another message of its group is in
//! flight (received, neither deleted nor visible again); one ReceiveMessage may
//! still return several messages of one group, in order, and messages of other
//! groups keep flowing. Within one batch the function must stop at the first
//! failure and report it and every later message (the bridge, like Lambda, just
//! follows the report).
//!
//! moto deviates in one case: when several in-flight messages of one group become
//! visible again because their visibility timeout ran out (naturally or after a
//! ChangeMessageVisibility to a non-zero value), it redelivers the *last* of them
//! first, alone, and the others after it is settled (`c`, then `a b`, for a
//! batch `a b c`; its receive loop checks each message against a stale set of
//! in-flight groups). A visibility set to 0 does not trigger it. So the retry
//! shortcut holds the messages to retry and then releases them with visibility 0,
//! in order ([`poll_once`]); without the shortcut, a batch that times out in moto
//! comes back out of order, which SQS would not do.

pub mod cli;
pub mod event;
pub mod invoke;
pub mod poll;
pub mod response;

pub use invoke::{HttpInvoke, Invoke};
pub use poll::{BatchReport, BridgeError, QueueConfig, poll_once};
