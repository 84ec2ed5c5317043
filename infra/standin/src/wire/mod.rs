//! The Messages API's JSON in the stand-in's own types, written from the API's
//! documentation (`NOTES-ANTHROPIC.md`), not borrowed from degrau's core: a field
//! the core serialises wrongly must not be read back by the code that wrote it.
//!
//! [`request`] holds what a client sends (read by [`crate::parse`], which refuses
//! what the API refuses), [`response`] what the stand-in answers (and what a
//! scripted answer may hold).

pub mod request;
pub mod response;

pub use request::{
    Block, Content, Message, MessagesRequest, Role, SystemBlock, Thinking, Tool, ToolChoice,
    ToolResultContent, Ttl,
};
pub use response::{CacheCreation, MessagesResponse, ResponseBlock, StopReason, Usage};
