//! `/settings/api-keys`: keys for the REST API, shown once, listed by prefix, revocable.

use herald_types::{ApiKey, ApiKeyId, Role};
use leptos::prelude::*;

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf, local_time_or};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;

#[server(prefix = "/rpc", endpoint = "list_api_keys")]
pub async fn list_api_keys() -> Result<Vec<ApiKey>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::api_keys;
    let m = require_role(Role::Admin).await?;
    Ok(api_keys::list(&m.state.db, m.tenant).await?)
}

/// Returns the new key; this is the only time it is ever shown. `role` is what the key may do
/// (admin when not given); the key is tied to the member who makes it.
#[server(prefix = "/rpc", endpoint = "create_api_key")]
pub async fn create_api_key(name: String, #[server(default)] role: Option<Role>) -> Result<String, AppError> {
    use crate::ssr::require_role;
    use herald_engine::api_keys;
    let m = require_role(Role::Admin).await?;
    herald_engine::accounts::require_verified_email(&m.state.db, m.user).await?;
    let role = role.unwrap_or(Role::Admin);
    let (_, key) = api_keys::create(&m.state.db, m.tenant, Some(m.user), m.role, &name, role).await?;
    m.audit(
        herald_engine::audit::Action::ApiKeyCreated,
        name.trim(),
        serde_json::json!({ "prefix": key.chars().take(12).collect::<String>(), "role": role.as_str() }),
    )
    .await;
    Ok(key)
}

#[server(prefix = "/rpc", endpoint = "revoke_api_key")]
pub async fn revoke_api_key(key_id: ApiKeyId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::api_keys;
    let m = require_role(Role::Admin).await?;
    let id = key_id;
    api_keys::revoke(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::ApiKeyRevoked, id, serde_json::json!({})).await;
    Ok(())
}

#[component]
pub fn ApiKeysPage() -> impl IntoView {
    let create = ServerAction::<CreateApiKey>::new();
    let revoke = ServerAction::<RevokeApiKey>::new();
    let keys = Resource::new(move || (create.version().get(), revoke.version().get()), |_| list_api_keys());
    let new_key = move || create.value().get().and_then(|r| r.ok());
    view! {
        <SettingsTabs active="/settings/api-keys"/>
        <Card title="Create a key">
            <p class="mb-4 text-sm text-slate-500">
                "Keys act in this workspace through the REST API: send "
                <code class="rounded bg-slate-100 px-1">"Authorization: Bearer <key>"</code>
                " to " <code class="rounded bg-slate-100 px-1">"/api/v1/…"</code> ". "
                <a href="/api/v1/openapi.json" class="text-indigo-600 hover:underline">"OpenAPI document"</a>
            </p>
            <ActionForm action=create attr:class="flex items-end gap-3">
                <div class="flex-1">
                    <label for="key-name" class="label">"Name"</label>
                    <input id="key-name" name="name" required maxlength="80" class="input" placeholder="Website sign-up form"/>
                </div>
                <div>
                    <label for="key-role" class="label">"May"</label>
                    <select id="key-role" name="role" class="input">
                        <option value="admin" selected>"do anything (admin)"</option>
                        <option value="author">"write and send (author)"</option>
                        <option value="viewer">"only read (viewer)"</option>
                    </select>
                </div>
                <button type="submit" class="btn-primary" disabled=move || create.pending().get()>"Create key"</button>
            </ActionForm>
            <ActionError value=create.value()/>
            {move || new_key().map(|k| view! {
                <div class="mt-4 rounded-md border border-emerald-200 bg-emerald-50 p-4" role="status">
                    <p class="text-sm font-medium text-emerald-800">"Copy this key now. It will not be shown again."</p>
                    <code class="mt-2 block break-all rounded bg-white px-2 py-1 font-mono text-sm" data-testid="new-api-key">{k}</code>
                </div>
            })}
        </Card>
        <Card title="Keys">
            <ActionError value=revoke.value()/>
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match keys.await {
                        Ok(list) if list.is_empty() => view! {
                            <p class="text-sm text-slate-500">"No keys yet. Create one above to use the API."</p>
                        }.into_any(),
                        Ok(list) => view! { <KeyTable list=list revoke=revoke/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}

#[component]
fn KeyTable(list: Vec<ApiKey>, revoke: ServerAction<RevokeApiKey>) -> impl IntoView {
    view! {
        <table class="w-full text-left text-sm">
            <thead class="text-xs uppercase text-slate-500">
                <tr><th class="py-2">"Name"</th><th>"Key"</th><th>"Role"</th><th>"Made by"</th><th>"Created"</th><th>"Last used"</th><th></th></tr>
            </thead>
            <tbody class="divide-y divide-slate-100">
                {list.into_iter().map(|k| { let revoked = k.is_revoked(); view! {
                    <tr class:opacity-50=revoked>
                        <td class="py-2 font-medium">{k.name}</td>
                        <td class="font-mono text-xs">{k.prefix} "…"</td>
                        <td>{k.role.as_str()}</td>
                        <td class="text-slate-500">
                            {k.created_by.clone().unwrap_or_else(|| "the operator".into())}
                            {(!k.active && !revoked).then(|| view! {
                                <span class="badge ml-1" title="Its maker is no longer an admin here: the key answers 403.">"inactive"</span>
                            })}
                        </td>
                        <td class="text-slate-500"><LocalTimeOf at=k.created_at/></td>
                        <td class="text-slate-500">{local_time_or(k.last_used_at, "never")}</td>
                        <td class="text-right">
                            {if revoked {
                                view! { <span class="badge">"revoked"</span> }.into_any()
                            } else {
                                view! {
                                    <ActionForm action=revoke>
                                        <input type="hidden" name="key_id" value=k.id.to_string()/>
                                        <button type="submit" class="link-button text-red-600">"Revoke"</button>
                                    </ActionForm>
                                }.into_any()
                            }}
                        </td>
                    </tr>
                }}).collect_view()}
            </tbody>
        </table>
    }
}
