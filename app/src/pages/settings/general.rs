//! `/settings`: the workspace's name, postal address, default sender and time zone.

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
    pub time_zone: String,
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
        time_zone: ws.time_zone,
        can_edit: m.role.can_administer(),
    })
}

#[server(prefix = "/rpc", endpoint = "update_workspace_settings")]
pub async fn update_workspace_settings(
    name: String,
    postal_address: String,
    default_from_name: String,
    default_from_email: String,
    /// Left out (an older form, a script): the workspace keeps its zone.
    #[server(default)]
    time_zone: Option<String>,
) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, workspaces};
    let m = require_role(Role::Admin).await?;
    let time_zone = time_zone.filter(|z| !z.trim().is_empty());
    let update = workspaces::SettingsUpdate { name, postal_address, default_from_name, default_from_email, time_zone };
    let ws = workspaces::update_settings(&m.state.db, m.tenant, update).await?;
    m.audit(
        herald_engine::audit::Action::SettingsChanged,
        &ws.name,
        serde_json::json!({
            "default_from": format!("{} <{}>", ws.default_from_name, ws.default_from_email),
            "time_zone": ws.time_zone,
        }),
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
    // The zones offered: a short list while rendering on the server, every zone the browser
    // knows once it is here; the saved one is always among them.
    let zone = s.time_zone.clone();
    let with_saved = move |mut zones: Vec<String>| {
        if !zones.contains(&zone) {
            zones.insert(0, zone.clone());
        }
        zones
    };
    let zones = RwSignal::new(with_saved.clone()(crate::components::timezone::common_time_zones()));
    Effect::new(move |_| zones.set(with_saved(crate::components::timezone::known_time_zones())));
    let saved_zone = s.time_zone.clone();
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
                <div>
                    <label for="time_zone" class="label">"Time zone"</label>
                    <select id="time_zone" name="time_zone" class="input" disabled=ro>
                        {move || zones.get().into_iter().map(|z| {
                            let selected = z == saved_zone;
                            view! { <option value=z.clone() selected=selected>{z.clone()}</option> }
                        }).collect_view()}
                    </select>
                    <p class="mt-1 text-xs text-slate-500">"Where an automation's “wait until Monday 09:00” falls for readers without a zone of their own."</p>
                </div>
                <div class="grid gap-4 sm:grid-cols-2">
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
