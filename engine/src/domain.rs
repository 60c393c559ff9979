//! Domain values, checked once when built: an invalid email or slug cannot exist past the edge.
//! They live in `herald-types`, the contract the browser build shares; the engine re-exports them
//! and turns their errors into its own.

pub use herald_types::values::truncate;
pub use herald_types::{BadId, CampaignId, Email, Forbidden, IdentityId, ListId, Role, Slug, TenantId, UserId};
