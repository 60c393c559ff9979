//! `/settings…`: the workspace, sending, domains, webhooks, members, API keys and the audit log.

pub mod api_keys;
pub mod audit;
pub mod domains;
pub mod general;
pub mod members;
pub mod sending;
pub mod webhooks;
