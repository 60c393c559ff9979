//! `/settings`: the workspace's name, postal address and default sender.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkspaceSettings {
    pub name: String,
    pub slug: String,
    pub postal_address: String,
    pub default_from_name: String,
    pub default_from_email: String,
    pub can_edit: bool,
}

#[server(prefix = "/rpc", endpoint = "workspace_settings")]
pub async fn get_workspace_settings() -> Result<WorkspaceSettings, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, workspaces};
    let m = require_role(Role::Viewer).await?;
    let ws = workspaces::get(&m.state.db, m.tenant).await?;
    Ok(WorkspaceSettings {
        name: ws.name,
        slug: ws.slug,
        postal_address: ws.postal_address,
        default_from_name: ws.default_from_name,
        default_from_email: ws.default_from_email,
        can_edit: m.role.can_administer(),
    })
}

#[server(prefix = "/rpc", endpoint = "update_workspace_settings")]
pub async fn update_workspace_settings(
    name: String,
    postal_address: String,
    default_from_name: String,
    default_from_email: String,
) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, workspaces};
    let m = require_role(Role::Admin).await?;
    let update = workspaces::SettingsUpdate { name, postal_address, default_from_name, default_from_email };
    let ws = workspaces::update_settings(&m.state.db, m.tenant, update).await?;
    m.audit(
        herald_engine::audit::Action::SettingsChanged,
        &ws.name,
        serde_json::json!({ "default_from": format!("{} <{}>", ws.default_from_name, ws.default_from_email) }),
    )
    .await;
    Ok(())
}

#[component]
pub fn SettingsPage() -> impl IntoView {
    let save = ServerAction::<UpdateWorkspaceSettings>::new();
    let settings = Resource::new(move || save.version().get(), |_| get_workspace_settings());
    view! {
        <SettingsTabs active="/settings"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match settings.await {
                    Ok(s) => view! { <SettingsForm s=s save=save/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn SettingsForm(s: WorkspaceSettings, save: ServerAction<UpdateWorkspaceSettings>) -> impl IntoView {
    let ro = !s.can_edit;
    let saved = move || matches!(save.value().get(), Some(Ok(())));
    view! {
        <Card title="Workspace">
            {ro.then(|| view! {
                <p class="mb-4 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800">"Only owners and admins can change these settings."</p>
            })}
            <ActionForm action=save attr:class="space-y-5">
                <div>
                    <label for="name" class="label">"Name"</label>
                    <input id="name" name="name" required maxlength="80" class="input" value=s.name disabled=ro/>
                    <p class="mt-1 text-xs text-slate-500">"Address: /s/" {s.slug}</p>
                </div>
                <div>
                    <label for="postal_address" class="label">"Postal address"</label>
                    <textarea id="postal_address" name="postal_address" rows="3" maxlength="500" class="input" disabled=ro
                        placeholder="Acme Ltd, 1 Main Street, Springfield, USA">{s.postal_address.clone()}</textarea>
                    <p class="mt-1 text-xs text-slate-500">"Required before any campaign can be sent: anti-spam law (CAN-SPAM) wants a physical address in every message."</p>
                </div>
                <div class="grid grid-cols-2 gap-4">
                    <div>
                        <label for="default_from_name" class="label">"Default sender name"</label>
                        <input id="default_from_name" name="default_from_name" maxlength="100" class="input" value=s.default_from_name disabled=ro/>
                    </div>
                    <div>
                        <label for="default_from_email" class="label">"Default sender email"</label>
                        <input id="default_from_email" name="default_from_email" type="email" class="input" value=s.default_from_email disabled=ro/>
                    </div>
                </div>
                {(!ro).then(|| view! {
                    <div class="flex items-center gap-3">
                        <button type="submit" class="btn-primary" disabled=move || save.pending().get()>"Save changes"</button>
                        <span class="text-sm text-emerald-600" role="status">{move || saved().then_some("Saved")}</span>
                    </div>
                })}
                <ActionError value=save.value()/>
            </ActionForm>
        </Card>
    }
}
