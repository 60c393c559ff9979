//! `/settings/sending`: the workspace's sending policy (frequency cap, how long a message may wait
//! in the queue) and its sending identities: the SMTP servers campaigns go out through, with
//! their limits and DKIM keys, and a button that tests the connection.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;
use crate::pages::settings::{IdentitiesView, list_identities};
use herald_types::{Identity, IdentityId, IdentityInput, identity::trim_float};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyView {
    pub frequency_cap_hours: Option<i32>,
    pub max_queue_age_hours: i32,
    pub can_edit: bool,
}

/// What an SMTP server answered to "Test connection".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionCheck {
    /// The identity tested; empty for the default server.
    pub id: String,
    pub ok: bool,
    pub reply: String,
}

#[server(prefix = "/rpc", endpoint = "sending_policy")]
pub async fn get_sending_policy() -> Result<PolicyView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, workspaces};
    let m = require_role(Role::Viewer).await?;
    let p = workspaces::sending_policy(&m.state.db, m.tenant).await?;
    Ok(PolicyView {
        frequency_cap_hours: p.frequency_cap_hours,
        max_queue_age_hours: p.max_queue_age_hours,
        can_edit: m.role.can_administer(),
    })
}

/// `cap` is `off` or `on`; `cap_hours` only counts with `on`.
#[server(prefix = "/rpc", endpoint = "save_sending_policy")]
pub async fn save_sending_policy(cap: String, cap_hours: String, max_queue_age_hours: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, workspaces};
    let m = require_role(Role::Admin).await?;
    let hours = |raw: &str, what: &str| {
        raw.trim()
            .parse::<i32>()
            .map_err(|_| AppError::invalid(format!("Enter the {what} as a whole number of hours.")).respond())
    };
    let frequency_cap_hours = if cap == "on" { Some(hours(&cap_hours, "frequency cap")?) } else { None };
    let policy = workspaces::SendingPolicy {
        frequency_cap_hours,
        max_queue_age_hours: hours(&max_queue_age_hours, "maximum queue age")?,
    };
    workspaces::set_sending_policy(&m.state.db, m.tenant, m.role, policy).await?;
    m.audit(herald_engine::audit::Action::SendingPolicyChanged, "", serde_json::to_value(policy).unwrap_or_default())
        .await;
    Ok(())
}

/// Creates (`id` empty) or updates an identity. The form's number fields are typed inputs, so
/// the browser refuses what is not a number before it gets here.
#[server(prefix = "/rpc", endpoint = "save_identity")]
pub async fn save_identity(id: String, identity: IdentityInput) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Admin).await?;
    let id: Option<IdentityId> = if id.trim().is_empty() { None } else { Some(id.parse()?) };
    identities::check_destination(&identity.smtp_url, &m.state.egress)?;
    identities::save(&m.state.db, &m.state.signer, m.tenant, m.role, id, &identity).await?;
    m.audit(herald_engine::audit::Action::IdentitySaved, &identity.name, serde_json::json!({ "new": id.is_none() }))
        .await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "delete_identity")]
pub async fn delete_identity(id: IdentityId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Admin).await?;
    identities::delete(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::IdentityDeleted, id, serde_json::json!({})).await;
    Ok(())
}

/// Connects to the identity's server (empty `id`: the server default), greets, authenticates
/// and quits. A failure to connect is an answer, not an error: it is shown as the reply.
#[server(prefix = "/rpc", endpoint = "test_identity")]
pub async fn test_identity(id: String) -> Result<ConnectionCheck, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Author).await?;
    // A suspended account reaches no mail server, not even to greet it.
    herald_engine::account_limits::ensure_not_suspended(&m.state.db, m.tenant).await?;
    let chosen: Option<IdentityId> = if id.trim().is_empty() { None } else { Some(id.parse()?) };
    if let Some(u) = chosen {
        // resolve() falls back to the default for an unknown id; testing asks about this one.
        let known = identities::list(&m.state.db, m.tenant).await?.iter().any(|i| i.id == u);
        if !known {
            return Err(AppError::NotFound.respond());
        }
    }
    let identity =
        identities::resolve(&m.state.db, &m.state.signer, m.tenant, chosen, &m.state.default_identity, &m.state.egress)
            .await?;
    let (ok, reply) = match identities::check_connection(&identity.server).await {
        Ok(reply) => (true, reply),
        Err(error) => (false, error),
    };
    Ok(ConnectionCheck { id, ok, reply })
}

#[component]
pub fn SendingPage() -> impl IntoView {
    let save_policy = ServerAction::<SaveSendingPolicy>::new();
    let policy = Resource::new(move || save_policy.version().get(), |_| get_sending_policy());
    // Here, not in `Identities`: the webhooks card lists identities too and must follow them.
    let save_identity = ServerAction::<SaveIdentity>::new();
    let delete_identity = ServerAction::<DeleteIdentity>::new();
    let identities_changed = Signal::derive(move || save_identity.version().get() + delete_identity.version().get());
    view! {
        <SettingsTabs active="/settings/sending"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match policy.await {
                    Ok(p) => view! { <PolicyForm p=p save=save_policy/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
        <Identities save=save_identity delete=delete_identity/>
        <crate::pages::settings::webhooks::WebhookSettings identities_changed=identities_changed/>
    }
}

#[component]
fn PolicyForm(p: PolicyView, save: ServerAction<SaveSendingPolicy>) -> impl IntoView {
    let ro = !p.can_edit;
    let cap_on = RwSignal::new(p.frequency_cap_hours.is_some());
    let saved = move || matches!(save.value().get(), Some(Ok(())));
    view! {
        <Card title="Sending policy">
            {ro.then(|| view! {
                <p class="mb-4 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800">"Only owners and admins can change the sending policy."</p>
            })}
            <ActionForm action=save attr:class="space-y-6" attr:data-testid="policy-form">
                <fieldset disabled=ro>
                    <legend class="label">"Frequency cap"</legend>
                    <p class="mb-2 text-xs text-slate-500">"Protects readers on several lists from getting many campaigns in a row. Readers over the cap are skipped, and the report says so. The cap counts campaign mail sent while it is on."</p>
                    <div class="space-y-2 text-sm">
                        <label class="flex items-center gap-2">
                            <input type="radio" name="cap" value="off" checked=p.frequency_cap_hours.is_none()
                                on:change=move |_| cap_on.set(false)/>
                            "Off: every campaign reaches everyone on its lists"
                        </label>
                        <label class="flex flex-wrap items-center gap-2">
                            <input type="radio" name="cap" value="on" checked=p.frequency_cap_hours.is_some()
                                on:change=move |_| cap_on.set(true)/>
                            "At most one campaign per reader every"
                            <input type="number" name="cap_hours" min="1" max="8760" step="1" class="input w-24"
                                aria-label="Frequency cap in hours"
                                value=p.frequency_cap_hours.unwrap_or(24).to_string()
                                disabled=move || ro || !cap_on.get()/>
                            "hours"
                        </label>
                    </div>
                </fieldset>
                <fieldset disabled=ro>
                    <label for="max-queue-age" class="label">"Maximum queue age (hours)"</label>
                    <input id="max-queue-age" type="number" name="max_queue_age_hours" min="1" max="8760" step="1" required
                        class="input w-32" value=p.max_queue_age_hours.to_string()/>
                    <p class="mt-1 text-xs text-slate-500">"A message still queued after this long (a paused or throttled send) expires instead of arriving late. Expired messages are listed in the campaign's report."</p>
                </fieldset>
                {(!ro).then(|| view! {
                    // A disabled cap_hours input is not submitted: keep the field present.
                    <Show when=move || !cap_on.get()>
                        <input type="hidden" name="cap_hours" value=""/>
                    </Show>
                    <div class="flex items-center gap-3">
                        <button type="submit" class="btn-primary" disabled=move || save.pending().get()>"Save policy"</button>
                        <span class="text-sm text-emerald-600" role="status">{move || saved().then_some("Saved")}</span>
                    </div>
                })}
                <ActionError value=save.value()/>
            </ActionForm>
        </Card>
    }
}

#[component]
fn Identities(save: ServerAction<SaveIdentity>, delete: ServerAction<DeleteIdentity>) -> impl IntoView {
    let test = ServerAction::<TestIdentity>::new();
    let editing = RwSignal::new(None::<Identity>);
    let data = Resource::new(move || (save.version().get(), delete.version().get()), |_| list_identities());
    // A successful save closes the edit.
    Effect::new(move |_| {
        if matches!(save.value().get(), Some(Ok(()))) {
            editing.set(None);
        }
    });
    view! {
        <Card title="Sending identities">
            <p class="mb-4 text-sm text-slate-500">
                "The SMTP servers your campaigns go out through. Each campaign picks one in its editor; its limits (connections, messages per second) are shared by every campaign using it. Passwords and DKIM keys are stored encrypted and never shown again."
            </p>
            <ActionError value=delete.value()/>
            <ActionError value=test.value()/>
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(v) => view! { <IdentityTable v=v test=test delete=delete editing=editing/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
        <Suspense>
            {move || Suspend::new(async move {
                data.await.ok().filter(|v| v.can_edit).map(|_| view! { <IdentityEditor save=save editing=editing/> })
            })}
        </Suspense>
    }
}

/// The result of the last connection test, under the row it belongs to.
#[component]
fn TestResult(test: ServerAction<TestIdentity>, id: String) -> impl IntoView {
    let mine = move || {
        let pending_mine = test.input().with(|i| i.as_ref().is_some_and(|i| i.id == id));
        (pending_mine, test.value().get().and_then(|r| r.ok()).filter(|c| c.id == id))
    };
    move || {
        let (pending, result) = mine();
        if pending {
            return Some(view! { <p class="mt-1 text-xs text-slate-500" role="status">"Connecting…"</p> }.into_any());
        }
        result.map(|c| {
            let cls = if c.ok {
                "mt-2 rounded-md bg-emerald-50 px-3 py-2 font-mono text-xs whitespace-pre-wrap text-emerald-800"
            } else {
                "mt-2 rounded-md bg-red-50 px-3 py-2 font-mono text-xs whitespace-pre-wrap text-red-700"
            };
            view! {
                <div class=cls role="status" data-testid="connection-result">
                    <span class="font-sans font-medium">{if c.ok { "Connected. The server said: " } else { "Could not connect: " }}</span>
                    {c.reply}
                </div>
            }
            .into_any()
        })
    }
}

#[component]
fn TestButton(test: ServerAction<TestIdentity>, id: String, label: String) -> impl IntoView {
    view! {
        <button type="button" class="text-xs text-indigo-600 hover:underline disabled:opacity-50"
            aria-label=format!("Test connection of {label}")
            disabled=move || test.pending().get()
            on:click=move |_| { test.dispatch(TestIdentity { id: id.clone() }); }>
            "Test connection"
        </button>
    }
}

#[component]
fn IdentityTable(
    v: IdentitiesView,
    test: ServerAction<TestIdentity>,
    delete: ServerAction<DeleteIdentity>,
    editing: RwSignal<Option<Identity>>,
) -> impl IntoView {
    let can_edit = v.can_edit;
    let confirm_delete = RwSignal::new(None::<IdentityId>);
    view! {
        <table class="w-full text-left text-sm" data-testid="identities-table">
            <thead class="text-xs uppercase text-slate-500">
                <tr><th class="py-2">"Name"</th><th>"Server"</th><th>"Limits"</th><th>"DKIM"</th><th></th></tr>
            </thead>
            <tbody class="divide-y divide-slate-100">
                <tr data-testid="identity-row">
                    <td class="py-3 align-top font-medium">"Default server"<span class="badge ml-2">"built in"</span></td>
                    <td class="py-3 align-top text-slate-500" colspan="3">
                        "The server's own SMTP settings (" <code class="rounded bg-slate-100 px-1 text-xs">"HERALD_SMTP_URL"</code>
                        "), set by whoever runs Herald. Campaigns that choose no identity send through it."
                        <TestResult test=test id=String::new()/>
                    </td>
                    <td class="py-3 text-right align-top"><TestButton test=test id=String::new() label="Default server".into()/></td>
                </tr>
                {v.identities.into_iter().map(|i| {
                    let row = i.clone();
                    let id = i.id.to_string();
                    let id_for_delete = i.id;
                    let dkim = i.dkim_record().unwrap_or_else(|| "—".to_string());
                    let limits = i.limits();
                    view! {
                        <tr data-testid="identity-row">
                            <td class="py-3 align-top">
                                <div class="font-medium">{i.name.clone()}</div>
                                <div class="text-xs text-slate-500">"Added " <LocalTimeOf at=i.created_at/></div>
                            </td>
                            <td class="py-3 align-top">
                                <code class="break-all text-xs">{i.smtp_display.clone()}</code>
                                <TestResult test=test id=id.clone()/>
                            </td>
                            <td class="py-3 align-top text-xs text-slate-600">{limits}</td>
                            <td class="py-3 align-top font-mono text-xs text-slate-600">{dkim}</td>
                            <td class="space-x-3 py-3 text-right align-top whitespace-nowrap">
                                <TestButton test=test id=id.clone() label=i.name.clone()/>
                                {can_edit.then(|| view! {
                                    <button type="button" class="link-button text-indigo-600"
                                        on:click=move |_| editing.set(Some(row.clone()))>"Edit"</button>
                                    <button type="button" class="link-button text-red-600"
                                        on:click=move |_| confirm_delete.set(Some(id_for_delete))>"Delete"</button>
                                })}
                                {
                                    let id = i.id;
                                    let name = i.name.clone();
                                    move || (confirm_delete.get() == Some(id)).then(|| {
                                        view! {
                                            <div class="mt-2 rounded-md bg-red-50 p-2 text-left text-xs text-red-800" role="alert">
                                                {format!("Delete “{name}”? Campaigns using it will send through the default server.")}
                                                <div class="mt-2 flex justify-end gap-2">
                                                    <button type="button" class="btn-secondary px-2 py-1 text-xs" on:click=move |_| confirm_delete.set(None)>"Keep"</button>
                                                    <button type="button" class="btn-primary bg-red-600 px-2 py-1 text-xs hover:bg-red-500"
                                                        on:click=move |_| {
                                                            delete.dispatch(DeleteIdentity { id });
                                                            confirm_delete.set(None);
                                                        }>"Delete identity"</button>
                                                </div>
                                            </div>
                                        }
                                    })
                                }
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn IdentityEditor(save: ServerAction<SaveIdentity>, editing: RwSignal<Option<Identity>>) -> impl IntoView {
    let is_edit = move || editing.with(Option::is_some);
    let get = move |f: fn(&Identity) -> String, default: &'static str| {
        editing.with(|e| e.as_ref().map(f).unwrap_or_else(|| default.to_string()))
    };
    // Bumped after each successful save, so the fields go back to their defaults.
    let generation = RwSignal::new(0u32);
    Effect::new(move |_| {
        if matches!(save.value().get(), Some(Ok(()))) {
            generation.update(|g| *g += 1);
        }
    });
    let field = move |f: fn(&Identity) -> String, default: &'static str| {
        move || {
            generation.track();
            get(f, default)
        }
    };
    let saved = move || matches!(save.value().get(), Some(Ok(()))) && !is_edit();
    view! {
        <Card>
            <h2 class="mb-4 text-lg font-medium text-slate-900">
                {move || if is_edit() { "Edit identity" } else { "Add an identity" }}
            </h2>
            <ActionForm action=save attr:class="space-y-5" attr:data-testid="identity-form">
                <input type="hidden" name="id" prop:value=field(|i| i.id.to_string(), "")/>
                <div class="grid grid-cols-2 gap-4">
                    <div>
                        <label for="identity-name" class="label">"Name"</label>
                        <input id="identity-name" name="identity[name]" required maxlength="80" class="input"
                            placeholder="Amazon SES (eu-west-1)" autocomplete="off"
                            prop:value=field(|i| i.name.clone(), "")/>
                    </div>
                    <div>
                        <label for="identity-url" class="label">"SMTP URL"</label>
                        <input id="identity-url" name="identity[smtp_url]" class="input font-mono text-xs"
                            autocomplete="off" spellcheck="false" aria-describedby="identity-url-hint"
                            placeholder=move || if is_edit() { "Leave empty to keep the current server and password" } else { "smtp://user:password@smtp.example.com:587?tls=required" }
                            prop:value=move || { generation.track(); editing.track(); String::new() }/>
                        <p id="identity-url-hint" class="mt-1 text-xs text-slate-500">
                            "For example " <code class="rounded bg-slate-100 px-1">"smtp://user:password@smtp.example.com:587?tls=required"</code>
                            ", or " <code class="rounded bg-slate-100 px-1">"smtps://…:465"</code>
                            ". Percent-encode special characters in the password. It is never shown back."
                        </p>
                    </div>
                </div>
                <div class="grid grid-cols-3 gap-4">
                    <div>
                        <label for="identity-connections" class="label">"Max connections"</label>
                        <input id="identity-connections" name="identity[max_connections]" type="number" min="1" max="64" step="1" required
                            class="input" value="4" prop:value=field(|i| i.max_connections.to_string(), "4")/>
                        <p class="mt-1 text-xs text-slate-500">"Open at once, across all workers (1–64)."</p>
                    </div>
                    <div>
                        <label for="identity-rate" class="label">"Messages per second"</label>
                        <input id="identity-rate" name="identity[rate_per_second]" type="number" min="0.01" max="100000" step="any" required
                            class="input" value="10" prop:value=field(|i| trim_float(i.rate_per_second), "10")/>
                        <p class="mt-1 text-xs text-slate-500">"Your provider's sending rate."</p>
                    </div>
                    <div>
                        <label for="identity-burst" class="label">"Burst"</label>
                        <input id="identity-burst" name="identity[burst]" type="number" min="1" max="10000" step="1" required
                            class="input" value="20" prop:value=field(|i| i.burst.to_string(), "20")/>
                        <p class="mt-1 text-xs text-slate-500">"Messages allowed at once above the rate."</p>
                    </div>
                </div>
                <fieldset class="rounded-lg border border-slate-200 p-4">
                    <legend class="px-1 text-sm font-medium text-slate-700">"DKIM signing (optional)"</legend>
                    <div class="grid grid-cols-2 gap-4">
                        <div>
                            <label for="identity-dkim-domain" class="label">"Domain"</label>
                            <input id="identity-dkim-domain" name="identity[dkim_domain]" class="input" placeholder="example.com"
                                autocomplete="off" prop:value=field(|i| i.dkim_domain.clone().unwrap_or_default(), "")/>
                        </div>
                        <div>
                            <label for="identity-dkim-selector" class="label">"Selector"</label>
                            <input id="identity-dkim-selector" name="identity[dkim_selector]" class="input" placeholder="herald"
                                autocomplete="off" prop:value=field(|i| i.dkim_selector.clone().unwrap_or_default(), "")/>
                        </div>
                        <div class="col-span-2">
                            <label for="identity-dkim-key" class="label">"Private key (PEM)"</label>
                            <textarea id="identity-dkim-key" name="identity[dkim_private_key]" rows="5" class="input font-mono text-xs"
                                spellcheck="false" autocomplete="off"
                                placeholder=move || if is_edit() { "Leave empty to keep the stored key" } else { "-----BEGIN PRIVATE KEY-----\n…\n-----END PRIVATE KEY-----" }
                                prop:value=move || { generation.track(); editing.track(); String::new() }></textarea>
                            <p class="mt-1 text-xs text-slate-500">
                                "RSA or Ed25519. Publish the public key as a TXT record at "
                                <code class="rounded bg-slate-100 px-1">"selector._domainkey.domain"</code>
                                ". Clearing the domain removes DKIM signing."
                            </p>
                        </div>
                    </div>
                </fieldset>
                <div class="flex items-center gap-3">
                    <button type="submit" class="btn-primary" disabled=move || save.pending().get()>
                        {move || if is_edit() { "Save identity" } else { "Add identity" }}
                    </button>
                    {move || is_edit().then(|| view! {
                        <button type="button" class="btn-secondary" on:click=move |_| editing.set(None)>"Cancel"</button>
                    })}
                    <span class="text-sm text-emerald-600" role="status">{move || saved().then_some("Saved")}</span>
                </div>
                <ActionError value=save.value()/>
            </ActionForm>
        </Card>
    }
}
