//! degrau's benchmarks: what the stepped context saves against full history and a
//! sliding window on the same conversations (`strategies`), and what one ask costs
//! in DynamoDB, CPU, cold start and memory as the history grows (`footprint`).

pub mod footprint;
pub mod moto;
pub mod strategies;
