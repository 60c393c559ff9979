//! `/settings…`: the workspace, sending, domains, webhooks, members, API keys and the audit log.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::TabbedHeader;
use crate::error::AppError;
use herald_types::Identity;

pub mod api_keys;
pub mod audit;
pub mod brand;
pub mod domains;
pub mod general;
pub mod members;
pub mod sending;
pub mod webhook_endpoints;
pub mod webhooks;

/// The tabs above every settings page.
#[component]
pub fn SettingsTabs(active: &'static str) -> impl IntoView {
    const TABS: &[(&str, &str)] = &[
        ("/settings", "General"),
        ("/settings/sending", "Sending"),
        ("/settings/domains", "Domains"),
        ("/settings/brand", "Brand"),
        ("/settings/members", "Members"),
        ("/settings/api-keys", "API keys"),
        ("/settings/webhooks", "Webhooks"),
        ("/settings/audit", "Audit log"),
    ];
    view! { <TabbedHeader title="Settings" tabs=TABS active=active/> }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdentitiesView {
    pub identities: Vec<Identity>,
    pub can_edit: bool,
}

/// The workspace's identities (no secrets). Every member may see them: the campaign editor's
/// sender picker lists them.
#[server(prefix = "/rpc", endpoint = "list_identities")]
pub async fn list_identities() -> Result<IdentitiesView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Viewer).await?;
    let identities = identities::list(&m.state.db, m.tenant).await?;
    Ok(IdentitiesView { identities, can_edit: m.role.can_administer() })
}
