//! The `compactor` function as a library, so tests can drive its handler in-process
//! as well as through the real binary.

pub mod handler;
