//! Herald's engine: domain types, use cases and queries, mail transport and background jobs.
//!
//! It knows nothing of axum or Leptos: `herald-app` (server functions) and `herald-server`
//! (HTTP API, CLI, workers) call the functions here and map [`Error`] to their own responses.

pub mod accounts;
pub mod api_keys;
pub mod audience;
pub mod audit;
pub mod campaigns;
pub mod db;
pub mod domain;
pub mod egress;
pub mod error;
pub mod feedback;
pub mod invites;
pub mod job_poll;
pub mod jobs;
pub mod lease;
pub mod mail;
pub mod mail_quota;
pub mod migrate;
pub mod password;
pub mod rate_limit;
pub mod sealing;
pub mod sending_domains;
pub mod smtp_client;
pub mod smtp_sink;
pub mod template_sandbox;
pub mod tokens;
pub mod tracking;
pub mod transactional;
pub mod two_factor;
pub mod users;
pub mod webhooks;
pub mod workspaces;

pub use db::Db;
pub use domain::{CampaignId, Email, IdentityId, ListId, Role, Slug, TenantId, UserId};
pub use error::{Error, Result};
