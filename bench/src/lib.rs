//! degrau's benchmarks: what the stepped context saves against full history and a
//! sliding window on the same conversations (`strategies`), and what one ask costs
//! in DynamoDB, CPU, cold start and memory as the history grows (`footprint`).
//! Their results are in `results/`; `docs/DESIGN.md` says what they decided.
//!
//! # Layout
//!
//! * [`strategies`] (binary `src/bin/strategies/`): the scripted conversations
//!   (`script`), played through the real functions with a tap on the model calls
//!   (`run`, `tap`), reported as tables and charts (`report`, `svg`).
//! * [`footprint`] (binary `src/bin/footprint.rs`): the stack behind the recording
//!   proxy (`stack`), degrau's and LangChain's runs (`degrau_run`, `langchain`),
//!   cold starts and memory (`cold`, `procfs`), the report (`report`).
//! * [`recall`] (binary `src/bin/recall.rs`): long conversations of returning
//!   customers (`generate`), degrau's recall beside plain BM25 and recency.
//! * [`moto`]: a moto server of one benchmark run.

pub mod footprint;
pub mod moto;
pub mod recall;
pub mod strategies;
