//! The `whatsapp-worker` Lambda's handler, as a library so tests call it directly.

pub mod handler;
