//! degrau's adapters: the ports of the core crate (`degrau`) wired to the outside
//! world. Everything that knows a table, a queue, an endpoint or a credential lives
//! here; the core decides what the model sees and what is stored, and knows none of
//! it. (`docs/DESIGN.md` explains the whole design.)
//!
//! # Layout
//!
//! Read in this order:
//!
//! * [`config`]: the typed environment configuration, read once at init
//!   (`Config::from_env`); tenant defaults are the core's `tenant::Defaults`.
//! * [`wiring`]: one constructor of every dependency from that configuration,
//!   [`wiring::Dependencies::from_env`], which both functions' `main.rs` call.
//! * The adapters, one per port or outside service:
//!   * [`dynamodb`]: the `Store` and `TenantStore` ports on one DynamoDB table —
//!     `keys` (the key layout, which nothing else knows), `items` (item types and
//!     their conversions), `queries` (query builders and the one paging helper),
//!     `error` (SDK error mapping and the transaction-conflict retry), and the trait
//!     implementations in `mod.rs`; `channel`, what a channel crate's own DynamoDB
//!     adapter uses of it (`degrau-whatsapp`'s `aws` feature: WhatsApp's records,
//!     its inbound queue, the Graph API client and its functions' constructors).
//!   * [`sqs`]: the `Jobs` port on an SQS FIFO queue.
//!   * [`sqs_batch`]: an SQS batch event read as [`degrau::fifo`]'s records, and
//!     its partial batch response (the compactor's, the WhatsApp worker's and
//!     events-out's handlers).
//!   * [`events`]: the `EventsOut` port on an SQS FIFO queue (events to a tenant's
//!     events webhook, the contact as its pseudonym); `webhook::deliver` sends
//!     them, for the `events-out` function.
//!   * [`anthropic`]: the `Model` port on the Anthropic Messages API, over `reqwest`.
//!   * [`bedrock`]: the `Model` port on Claude through Amazon Bedrock Runtime's
//!     `InvokeModel` (`MODEL_PROVIDER=bedrock`), signed with the function's role.
//!   * [`model_stream`]: a streamed answer read as it arrives (the SSE parser and
//!     the event assembler both model adapters use).
//!   * `model_contract` (tests only): the `Model` port's contract, one set of
//!     cases run against both model adapters, each on its own fake server.
//!   * [`retry`]: the one budgeted retry loop the model adapters share (each
//!     attempt's timeout from the time left, no retry that does not fit).
//!   * [`ssm`]: secrets: `SecretSource` (a value from the environment or an SSM
//!     SecureString, read once at init: the API key, the WhatsApp secrets) and the
//!     one read of a decrypted parameter, which the webhook tools' secrets use too.
//!   * [`webhook`]: the `Webhooks` port: a tenant's own tools behind signed HTTPS
//!     calls — `address` (which addresses may be reached, a pure function),
//!     `resolver` (the client's resolver, returning only those), `signature` (the
//!     `Degrau-Signature` header and the contact's pseudonym), `secrets` (the
//!     signing secrets from SSM, cached).
//!
//! Adapters still to come go beside these, one module (or folder) each, and into
//! [`wiring`] when a setting selects them.

pub mod anthropic;
pub mod bedrock;
pub mod config;
pub mod dynamodb;
pub mod events;
#[cfg(test)]
mod model_contract;
pub mod model_stream;
pub mod retry;
pub mod sqs;
pub mod sqs_batch;
pub mod ssm;
pub mod webhook;
pub mod wiring;
