//! `/transactional…`: the message log, one message, and the templates.

pub mod message;
pub mod overview;
pub mod template;
pub mod templates;
