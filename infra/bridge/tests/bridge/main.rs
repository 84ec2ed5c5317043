//! Integration tests of degrau-bridge: `poll_once` against queues in moto
//! (`DEGRAU_TEST_AWS_ENDPOINT`) with a scripted fake function, and `HttpInvoke`
//! against a one-shot HTTP server. Each test makes its own FIFO queue and
//! dead-letter queue, so tests never share state.

mod batches;
mod fifo;
mod helpers;
mod http_invoke;
mod redrive;
