//! Transactional mail (seed 001): single messages an application sends through the API
//! (password resets, receipts), each accepted exactly once per idempotency key and delivered
//! through the campaign engine's sending machinery on a stream of its own.

pub mod delivery;
pub mod guard;
pub mod messages;
pub mod settings;
pub mod templates;
