//! `/settings…`: the workspace, sending, domains, webhooks, members, API keys and the audit log.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::TabbedHeader;
use crate::error::AppError;

pub mod api_keys;
pub mod audit;
pub mod domains;
pub mod general;
pub mod members;
pub mod sending;
pub mod webhooks;

/// The tabs above every settings page.
#[component]
pub fn SettingsTabs(active: &'static str) -> impl IntoView {
    const TABS: &[(&str, &str)] = &[
        ("/settings", "General"),
        ("/settings/sending", "Sending"),
        ("/settings/domains", "Domains"),
        ("/settings/members", "Members"),
        ("/settings/api-keys", "API keys"),
        ("/settings/audit", "Audit log"),
    ];
    view! { <TabbedHeader title="Settings" tabs=TABS active=active/> }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdentityRow {
    pub id: String,
    pub name: String,
    /// The SMTP URL without its password.
    pub smtp_display: String,
    pub max_connections: i32,
    pub rate_per_second: f64,
    pub burst: i32,
    pub dkim_domain: String,
    pub dkim_selector: String,
    pub created_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdentitiesView {
    pub identities: Vec<IdentityRow>,
    pub can_edit: bool,
}

/// The workspace's identities (no secrets). Every member may see them: the campaign editor's
/// sender picker lists them.
#[server(prefix = "/rpc", endpoint = "list_identities")]
pub async fn list_identities() -> Result<IdentitiesView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Viewer).await?;
    let identities = identities::list(&m.state.db, m.tenant)
        .await?
        .into_iter()
        .map(|i| IdentityRow {
            id: i.id.to_string(),
            name: i.name,
            smtp_display: i.smtp_display,
            max_connections: i.max_connections,
            rate_per_second: i.rate_per_second,
            burst: i.burst,
            dkim_domain: i.dkim_domain.unwrap_or_default(),
            dkim_selector: i.dkim_selector.unwrap_or_default(),
            created_at: i.created_at.to_rfc3339(),
        })
        .collect();
    Ok(IdentitiesView { identities, can_edit: m.role.can_administer() })
}
