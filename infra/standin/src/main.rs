//! The offline model stand-in (being written).
fn main() {}
