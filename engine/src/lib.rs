//! Herald's engine: domain types, use cases and queries, mail transport and background jobs.
//!
//! It knows nothing of axum or Leptos: `herald-app` (server functions) and `herald-server`
//! (HTTP API, CLI, workers) call the functions here and map [`Error`] to their own responses.

pub mod account_limits;
pub mod accounts;
pub mod api_keys;
pub mod api_requests;
pub mod audience;
pub mod audit;
pub mod automations;
pub mod campaigns;
pub mod domain;
pub mod error;
pub mod events;
pub mod feedback;
pub mod infra;
pub mod invites;
pub mod jobs;
pub mod media;
pub mod outbound_webhooks;
pub mod sending;
pub mod suspension;
pub mod tracking;
pub mod transactional;
pub mod two_factor;
pub mod users;
pub mod webhooks;
pub mod worker;
pub mod workspaces;

pub use domain::{CampaignId, Email, IdentityId, ListId, Role, Slug, TenantId, UserId};
pub use error::{Error, Result};
pub use infra::db::Db;
