//! `/settings/webhooks` and `/settings/webhooks/:id`: where the workspace's events are sent
//! (outbound webhooks, see `herald_engine::outbound_webhooks`). An admin adds an endpoint (its
//! signing secret is shown once), sees each endpoint's recent deliveries, sends a test event,
//! redelivers, turns it off or on, rotates its secret and deletes it.

use herald_types::uuid::Uuid;
use herald_types::webhook::EVENT_TYPES;
use herald_types::{WebhookDeliveries, WebhookEndpoint, WebhookEndpointWithSecret};
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf, PageHeader};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;

#[cfg(feature = "ssr")]
async fn change(m: &crate::ssr::Member) -> herald_engine::outbound_webhooks::Change<'_> {
    herald_engine::outbound_webhooks::Change {
        db: &m.state.db,
        signer: &m.state.signer,
        egress: &m.state.egress,
        jobs: &m.state.jobs,
        tenant: m.tenant,
        role: m.role,
        actor: herald_engine::audit::Actor::User { id: m.user, ip: crate::ssr::client_ip().await },
    }
}

#[server(prefix = "/rpc", endpoint = "list_webhook_endpoints")]
pub async fn list_webhook_endpoints() -> Result<Vec<WebhookEndpoint>, AppError> {
    use crate::ssr::require_role;
    let m = require_role(herald_engine::Role::Admin).await?;
    Ok(herald_engine::outbound_webhooks::list(&m.state.db, m.tenant).await?)
}

/// `event_types` come from the form's checkboxes (`event_types[i]`); none checked is refused
/// beside the field.
#[server(prefix = "/rpc", endpoint = "create_webhook_endpoint")]
pub async fn create_webhook_endpoint(
    url: String,
    #[server(default)] description: String,
    #[server(default)] event_types: Vec<String>,
) -> Result<WebhookEndpointWithSecret, AppError> {
    use crate::ssr::require_role;
    let m = require_role(herald_engine::Role::Admin).await?;
    let input = herald_types::WebhookEndpointInput { url, description, event_types, enabled: true };
    Ok(herald_engine::outbound_webhooks::create(&change(&m).await, &input).await?)
}

#[server(prefix = "/rpc", endpoint = "load_webhook_endpoint")]
pub async fn load_webhook_endpoint(id: Uuid) -> Result<(WebhookEndpoint, WebhookDeliveries), AppError> {
    use crate::ssr::require_role;
    use herald_engine::outbound_webhooks as hooks;
    let m = require_role(herald_engine::Role::Admin).await?;
    let endpoint = hooks::get(&m.state.db, m.tenant, id).await?;
    let deliveries = hooks::deliveries(&m.state.db, m.tenant, id, None, 50).await?;
    Ok((endpoint, deliveries))
}

#[server(prefix = "/rpc", endpoint = "send_webhook_test")]
pub async fn send_webhook_test(id: Uuid) -> Result<String, AppError> {
    use crate::ssr::require_role;
    let m = require_role(herald_engine::Role::Admin).await?;
    Ok(herald_engine::outbound_webhooks::send_test(&m.state.db, m.tenant, m.role, id).await?)
}

#[server(prefix = "/rpc", endpoint = "redeliver_webhook")]
pub async fn redeliver_webhook(id: Uuid, event_id: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    let m = require_role(herald_engine::Role::Admin).await?;
    Ok(herald_engine::outbound_webhooks::redeliver(&m.state.db, m.tenant, m.role, id, &event_id).await?)
}

/// Turns the endpoint on or off, keeping what it receives.
#[server(prefix = "/rpc", endpoint = "set_webhook_enabled")]
pub async fn set_webhook_enabled(id: Uuid, enabled: bool) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::outbound_webhooks as hooks;
    let m = require_role(herald_engine::Role::Admin).await?;
    let now = hooks::get(&m.state.db, m.tenant, id).await?;
    let input = herald_types::WebhookEndpointInput {
        url: now.url,
        description: now.description,
        event_types: now.event_types,
        enabled,
    };
    hooks::update(&change(&m).await, id, &input).await?;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "rotate_webhook_secret")]
pub async fn rotate_webhook_secret(id: Uuid) -> Result<String, AppError> {
    use crate::ssr::require_role;
    let m = require_role(herald_engine::Role::Admin).await?;
    let rotated = herald_engine::outbound_webhooks::rotate_secret(&change(&m).await, id, &Default::default()).await?;
    Ok(rotated.secret)
}

#[server(prefix = "/rpc", endpoint = "delete_webhook_endpoint")]
pub async fn delete_webhook_endpoint(id: Uuid) -> Result<(), AppError> {
    use crate::ssr::require_role;
    let m = require_role(herald_engine::Role::Admin).await?;
    herald_engine::outbound_webhooks::delete(&change(&m).await, id).await?;
    leptos_axum::redirect("/settings/webhooks");
    Ok(())
}

/// The secret, once, with what to do with it.
#[component]
fn SecretOnce(secret: String) -> impl IntoView {
    view! {
        <div class="mt-4 rounded-md border border-emerald-200 bg-emerald-50 p-4" role="status">
            <p class="text-sm font-medium text-emerald-800">
                "Copy this signing secret now. It will not be shown again. Verify each delivery with a Standard Webhooks library."
            </p>
            <code class="mt-2 block break-all rounded bg-white px-2 py-1 font-mono text-sm" data-testid="endpoint-secret">{secret}</code>
        </div>
    }
}

#[component]
pub fn WebhookEndpointsPage() -> impl IntoView {
    let create = ServerAction::<CreateWebhookEndpoint>::new();
    let endpoints = Resource::new(move || create.version().get(), |_| list_webhook_endpoints());
    let made = move || create.value().get().and_then(|r| r.ok());
    view! {
        <SettingsTabs active="/settings/webhooks"/>
        <Card title="Add an endpoint">
            <p class="mb-4 text-sm text-slate-500">
                "Herald sends this workspace's events to your endpoints as signed JSON (Standard Webhooks), "
                "retrying for a day until they answer 2xx. An endpoint receiving reader events receives readers' "
                "addresses: every admin is mailed when one is added or changed."
            </p>
            <ActionForm action=create attr:class="space-y-4" attr:data-testid="add-endpoint">
                <div>
                    <label for="endpoint-url" class="label">"Endpoint URL"</label>
                    <input id="endpoint-url" name="url" type="url" required maxlength="2000" class="input font-mono text-sm"
                        placeholder="https://example.com/herald-events"/>
                </div>
                <div>
                    <label for="endpoint-description" class="label">"Description (optional)"</label>
                    <input id="endpoint-description" name="description" maxlength="500" class="input" placeholder="CRM sync"/>
                </div>
                <fieldset>
                    <legend class="label">"Events to send"</legend>
                    <div class="grid gap-1 sm:grid-cols-2">
                        {EVENT_TYPES.iter().enumerate().map(|(i, (name, what))| view! {
                            <label class="flex items-start gap-2 text-sm">
                                <input type="checkbox" name=format!("event_types[{i}]") value=*name class="mt-1"/>
                                <span><code class="text-xs">{*name}</code><span class="block text-slate-500">{*what}</span></span>
                            </label>
                        }).collect_view()}
                    </div>
                </fieldset>
                <button type="submit" class="btn-primary" disabled=move || create.pending().get()>"Add endpoint"</button>
            </ActionForm>
            <ActionError value=create.value()/>
            {move || made().map(|m| view! {
                <SecretOnce secret=m.secret/>
                <a href=format!("/settings/webhooks/{}", m.endpoint.id) class="mt-2 inline-block text-sm text-indigo-600 hover:underline">
                    "Open the endpoint to send a test event →"
                </a>
            })}
        </Card>
        <Card title="Endpoints">
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match endpoints.await {
                        Ok(list) if list.is_empty() => view! {
                            <p class="text-sm text-slate-500">"No endpoints yet. Add one above to receive this workspace's events."</p>
                        }.into_any(),
                        Ok(list) => view! { <EndpointTable list=list/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}

#[component]
fn EndpointTable(list: Vec<WebhookEndpoint>) -> impl IntoView {
    view! {
        <table class="w-full text-left text-sm" data-testid="endpoints-table">
            <thead class="text-xs uppercase text-slate-500">
                <tr><th class="py-2">"URL"</th><th>"Events"</th><th>"Status"</th><th>"Waiting"</th><th>"Added"</th></tr>
            </thead>
            <tbody class="divide-y divide-slate-100">
                {list.into_iter().map(|e| view! {
                    <tr>
                        <td class="py-2">
                            <a href=format!("/settings/webhooks/{}", e.id) class="break-all font-mono text-xs text-indigo-600 hover:underline">{e.url.clone()}</a>
                            {(!e.description.is_empty()).then(|| view! { <span class="block text-slate-500">{e.description.clone()}</span> })}
                        </td>
                        <td class="text-slate-600">{e.event_types.join(", ")}</td>
                        <td><EndpointStatus endpoint=e.clone()/></td>
                        <td>{e.pending}</td>
                        <td class="text-slate-500"><LocalTimeOf at=e.created_at/></td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn EndpointStatus(endpoint: WebhookEndpoint) -> impl IntoView {
    if endpoint.enabled {
        view! { <span class="badge bg-emerald-100 text-emerald-800">"on"</span> }.into_any()
    } else {
        view! { <span class="badge" title=endpoint.disabled_reason.unwrap_or_default()>"off"</span> }.into_any()
    }
}

#[component]
pub fn WebhookEndpointPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").and_then(|s| Uuid::parse_str(&s).ok()).unwrap_or(Uuid::nil());
    let test = ServerAction::<SendWebhookTest>::new();
    let redeliver = ServerAction::<RedeliverWebhook>::new();
    let toggle = ServerAction::<SetWebhookEnabled>::new();
    let rotate = ServerAction::<RotateWebhookSecret>::new();
    let delete = ServerAction::<DeleteWebhookEndpoint>::new();
    // Deliveries move on their own (attempts, retries): the log refreshes every 2 s.
    let tick = RwSignal::new(0u32);
    let data = Resource::new(
        move || (id(), tick.get(), test.version().get(), redeliver.version().get(), toggle.version().get()),
        |(id, ..)| load_webhook_endpoint(id),
    );
    Effect::new(move |_| {
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(2))
        {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <PageHeader title="Webhook endpoint" subtitle="Deliveries of this workspace's events"/>
        <a href="/settings/webhooks" class="mb-4 inline-block text-sm text-indigo-600 hover:underline">"← Endpoints"</a>
        <ActionError value=test.value()/>
        <ActionError value=redeliver.value()/>
        <ActionError value=toggle.value()/>
        <ActionError value=rotate.value()/>
        <ActionError value=delete.value()/>
        {move || rotate.value().get().and_then(|r| r.ok()).map(|secret| view! { <SecretOnce secret=secret/> })}
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok((endpoint, deliveries)) => view! {
                        <EndpointBody endpoint=endpoint deliveries=deliveries test=test redeliver=redeliver
                            toggle=toggle rotate=rotate delete=delete/>
                    }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn EndpointBody(
    endpoint: WebhookEndpoint,
    deliveries: WebhookDeliveries,
    test: ServerAction<SendWebhookTest>,
    redeliver: ServerAction<RedeliverWebhook>,
    toggle: ServerAction<SetWebhookEnabled>,
    rotate: ServerAction<RotateWebhookSecret>,
    delete: ServerAction<DeleteWebhookEndpoint>,
) -> impl IntoView {
    let id = endpoint.id;
    view! {
        <Card title="Endpoint">
            <dl class="grid grid-cols-4 gap-x-3 gap-y-2 text-sm">
                <dt class="text-slate-500">"URL"</dt><dd class="col-span-3 break-all font-mono text-xs" data-testid="endpoint-url">{endpoint.url.clone()}</dd>
                <dt class="text-slate-500">"Events"</dt><dd class="col-span-3">{endpoint.event_types.join(", ")}</dd>
                <dt class="text-slate-500">"Status"</dt>
                <dd class="col-span-3">
                    <EndpointStatus endpoint=endpoint.clone()/>
                    {endpoint.disabled_reason.clone().map(|r| view! { <span class="ml-2 text-slate-600">{r}</span> })}
                </dd>
                {endpoint.previous_secret_until.map(|t| view! {
                    <dt class="text-slate-500">"Old secret"</dt><dd class="col-span-3">"still signs until " <LocalTimeOf at=t/></dd>
                })}
            </dl>
            <div class="mt-4 flex flex-wrap gap-3">
                <ActionForm action=test>
                    <input type="hidden" name="id" value=id.to_string()/>
                    <button type="submit" class="btn-primary" disabled=move || test.pending().get()>"Send a test event"</button>
                </ActionForm>
                <ActionForm action=toggle>
                    <input type="hidden" name="id" value=id.to_string()/>
                    <input type="hidden" name="enabled" value=(!endpoint.enabled).to_string()/>
                    <button type="submit" class="btn-secondary">{if endpoint.enabled { "Turn off" } else { "Turn on" }}</button>
                </ActionForm>
                <ActionForm action=rotate>
                    <input type="hidden" name="id" value=id.to_string()/>
                    <button type="submit" class="btn-secondary" title="The old secret keeps signing beside the new one for 24 hours">"Rotate secret"</button>
                </ActionForm>
                <ActionForm action=delete>
                    <input type="hidden" name="id" value=id.to_string()/>
                    <button type="submit" class="link-button text-red-600">"Delete endpoint"</button>
                </ActionForm>
            </div>
        </Card>
        <Card title="Recent deliveries">
            {if deliveries.items.is_empty() {
                view! { <p class="text-sm text-slate-500">"Nothing sent yet. Send a test event to try the endpoint."</p> }.into_any()
            } else {
                view! {
                    <table class="w-full text-left text-sm" data-testid="deliveries-table">
                        <thead class="text-xs uppercase text-slate-500">
                            <tr><th class="py-2">"Event"</th><th>"State"</th><th>"Attempts"</th><th>"Answer"</th><th>"Latency"</th><th>"Last attempt"</th><th></th></tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100">
                            {deliveries.items.into_iter().map(|d| view! {
                                <tr data-testid="delivery">
                                    <td class="py-2"><code class="text-xs">{d.event_type.clone()}</code><span class="block font-mono text-xs text-slate-500">{d.event_id.clone()}</span></td>
                                    <td><span class="badge" data-testid="delivery-state">{d.state.clone()}</span></td>
                                    <td>{d.attempts}</td>
                                    <td>
                                        {d.last_status.map(|s| s.to_string()).or(d.last_error.clone()).unwrap_or_default()}
                                        {d.last_response.clone().filter(|r| !r.is_empty()).map(|r| view! {
                                            <details class="text-xs"><summary class="cursor-pointer text-slate-500">"body"</summary>
                                                <pre class="mt-1 max-w-md overflow-x-auto whitespace-pre-wrap rounded bg-slate-50 p-2">{r}</pre></details>
                                        })}
                                    </td>
                                    <td>{d.last_latency_ms.map(|ms| format!("{ms} ms")).unwrap_or_default()}</td>
                                    <td class="text-slate-500">{d.last_attempt_at.map(|t| view! { <LocalTimeOf at=t/> })}</td>
                                    <td class="text-right">
                                        <ActionForm action=redeliver>
                                            <input type="hidden" name="id" value=id.to_string()/>
                                            <input type="hidden" name="event_id" value=d.event_id.clone()/>
                                            <button type="submit" class="link-button">"Redeliver"</button>
                                        </ActionForm>
                                    </td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </Card>
    }
}
