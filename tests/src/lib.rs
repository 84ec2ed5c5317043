//! Helpers shared by the integration tests (being written).
pub mod moto;
