//! The `ask` function as a library, so integration tests can drive its handler
//! in-process as well as through the real binary.

pub mod handler;
