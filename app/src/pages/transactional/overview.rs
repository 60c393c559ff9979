//! `/transactional`: the messages applications sent through `POST /api/v1/messages`, newest
//! first, with their status and what happened to them; a search by recipient or idempotency key;
//! and the workspace's transactional sending settings.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, EmptyState, LoadError, LocalTimeOf, TabbedHeader};
use crate::error::AppError;
use crate::pages::transactional::{StatusBadge, TABS};
use herald_types::{Message, MessageStatus};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MessagesView {
    pub rows: Vec<Message>,
    /// (status, count) over the last 24 hours.
    pub counts: Vec<(MessageStatus, i64)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TxSettingsView {
    pub identities: Vec<(String, String)>,
    pub identity_id: String,
    pub from_name: String,
    pub from_email: String,
    pub can_edit: bool,
    /// Why the bounce and complaint guard paused the stream (`None` while it sends).
    pub paused_reason: Option<String>,
}

#[server(prefix = "/rpc", endpoint = "list_messages")]
pub async fn list_messages(q: String, status: String) -> Result<MessagesView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::transactional::messages::{self, MessageFilter};
    let m = require_role(Role::Viewer).await?;
    let filter = MessageFilter {
        status: (!status.is_empty()).then_some(status),
        q: (!q.trim().is_empty()).then_some(q),
        limit: Some(100),
        ..Default::default()
    };
    let rows = messages::list(&m.state.db, m.tenant, &filter).await?;
    Ok(MessagesView { rows, counts: messages::counts_last_day(&m.state.db, m.tenant).await? })
}

#[server(prefix = "/rpc", endpoint = "transactional_settings")]
pub async fn transactional_settings() -> Result<TxSettingsView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::sending::identities;
    use herald_engine::transactional::settings;
    let m = require_role(Role::Viewer).await?;
    let s = settings::get(&m.state.db, m.tenant).await?;
    let identities =
        identities::list(&m.state.db, m.tenant).await?.into_iter().map(|i| (i.id.to_string(), i.name)).collect();
    Ok(TxSettingsView {
        identities,
        identity_id: s.identity_id.map(|i| i.to_string()).unwrap_or_default(),
        from_name: s.from_name,
        from_email: s.from_email,
        can_edit: m.role.can_administer(),
        paused_reason: herald_engine::transactional::guard::paused_reason(&m.state.db, m.tenant).await?,
    })
}

/// Resumes a transactional stream the bounce and complaint guard paused.
#[server(prefix = "/rpc", endpoint = "resume_transactional")]
pub async fn resume_transactional() -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    let m = require_role(Role::Admin).await?;
    if herald_engine::transactional::guard::resume(&m.state.db, m.tenant, m.role).await? {
        m.audit(herald_engine::audit::Action::TransactionalResumed, "transactional", serde_json::json!({})).await;
    }
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "save_transactional_settings")]
pub async fn save_transactional_settings(
    identity_id: String,
    from_name: String,
    from_email: String,
) -> Result<(), AppError> {
    use crate::ssr::{parse_id, require_role};
    use herald_engine::Role;
    use herald_engine::transactional::settings::{self, TransactionalSettings};
    let m = require_role(Role::Admin).await?;
    let identity_id = if identity_id.is_empty() { None } else { Some(parse_id(&identity_id)?) };
    settings::save(&m.state.db, m.tenant, m.role, &TransactionalSettings { identity_id, from_name, from_email })
        .await?;
    Ok(())
}

#[component]
pub fn TransactionalPage() -> impl IntoView {
    let query = use_query_map();
    let q = move || query.with(|q| q.get("q")).unwrap_or_default();
    let status = move || query.with(|q| q.get("status")).unwrap_or_default();
    let tick = RwSignal::new(0u32);
    let data = Resource::new(move || (q(), status(), tick.get()), |(q, s, _)| list_messages(q, s));
    // Messages move from queued to sent and collect events within seconds: keep the list fresh.
    Effect::new(move |_| {
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(3))
        {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <TabbedHeader title="Transactional" subtitle="Receipts, password resets and other mail your application sends through the API, one message at a time."
            tabs=TABS active="/transactional"/>
        <Card>
            <form method="get" class="mb-4 flex flex-wrap gap-2" role="search">
                <input name="q" class="input max-w-sm" placeholder="Recipient or idempotency key" prop:value=q
                    aria-label="Search by recipient or idempotency key"/>
                <select name="status" class="input max-w-[10rem]" aria-label="Status" prop:value=status>
                    <option value="">"Any status"</option>
                    {MessageStatus::ALL.iter().map(|s| view! {
                        <option value=s.as_str()>{s.as_str()}</option>
                    }).collect_view()}
                </select>
                <button type="submit" class="btn-secondary">"Search"</button>
            </form>
            <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(v) => view! { <Messages v=v searching=!q().is_empty() || !status().is_empty()/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </Card>
        <SettingsCard/>
        <Card title="Send from your application">
            <p class="mb-2 text-sm text-slate-600">"Create an API key in Settings → API keys, then:"</p>
            <pre tabindex="0" class="overflow-x-auto rounded-md bg-slate-900 p-4 text-xs text-slate-100">{r#"curl -X POST https://your-herald/api/v1/messages \
    -H "Authorization: Bearer $HERALD_KEY" \
    -H "Idempotency-Key: order-1234-receipt" \
    -H "Content-Type: application/json" \
    -d '{"to": "ada@example.com", "template": "receipt", "variables": {"order": 1234}}'"#}</pre>
            <p class="mt-2 text-xs text-slate-500">"The same key with the same body returns the first message and never sends twice; the same key with a different body is refused (409)."</p>
        </Card>
    }
}

#[component]
fn Messages(v: MessagesView, searching: bool) -> impl IntoView {
    if v.rows.is_empty() {
        return if searching {
            view! { <p class="py-6 text-center text-sm text-slate-500">"No message matches."</p> }.into_any()
        } else {
            view! {
                <EmptyState title="No transactional messages yet"
                    body="Messages your application sends through POST /api/v1/messages appear here with their status and events. Start with a template."
                    action_href="/transactional/templates" action_label="Create a template"/>
            }
            .into_any()
        };
    }
    view! {
        <div class="mb-4 flex flex-wrap gap-2 text-xs" data-testid="message-counts">
            <span class="text-slate-500">"Last 24 hours:"</span>
            {v.counts.into_iter().map(|(s, n)| view! { <span class="badge">{format!("{n} {s}")}</span> }).collect_view()}
        </div>
        <table class="w-full text-left text-sm" data-testid="messages-table">
            <thead class="text-xs uppercase text-slate-500">
                <tr><th class="py-2">"Recipient"</th><th>"Subject"</th><th>"Status"</th><th>"Events"</th><th>"Template"</th><th>"Queued"</th></tr>
            </thead>
            <tbody class="divide-y divide-slate-100">
                {v.rows.into_iter().map(|r| {
                    let href = format!("/transactional/messages/{}", r.id);
                    let (outcome, template) = (r.outcome().unwrap_or_default(), r.template_label());
                    view! {
                        <tr data-testid="message-row">
                            <td class="py-2"><a href=href class="text-indigo-600 hover:underline">{r.to_email}</a>
                                <div class="font-mono text-[11px] text-slate-500" title="Idempotency key">{r.idempotency_key}</div></td>
                            <td class="max-w-xs truncate" title=r.subject.clone()>{r.subject.clone()}</td>
                            <td><StatusBadge status=r.status/></td>
                            <td class="text-slate-600" data-testid="message-outcome">{outcome}</td>
                            <td class="text-slate-500">{template}</td>
                            <td class="text-slate-500"><LocalTimeOf at=r.created_at/></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn SettingsCard() -> impl IntoView {
    let save = ServerAction::<SaveTransactionalSettings>::new();
    let resume = ServerAction::<ResumeTransactional>::new();
    let data = Resource::new(move || (save.version().get(), resume.version().get()), |_| transactional_settings());
    view! {
        <Card title="Sending">
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(s) => view! {
                            {s.paused_reason.clone().map(|why| view! {
                                <div role="alert" class="mb-4 rounded-md border border-amber-300 bg-amber-50 p-3 text-sm text-amber-900"
                                    data-testid="transactional-paused">
                                    <p>{why}</p>
                                    {s.can_edit.then(|| view! {
                                        <ActionForm action=resume attr:class="mt-2">
                                            <button type="submit" class="btn-secondary">"Resume transactional sending"</button>
                                        </ActionForm>
                                    })}
                                </div>
                            })}
                            <ActionForm action=save attr:class="grid gap-3 sm:grid-cols-3">
                                <label class="text-sm">"Sending identity"
                                    <select name="identity_id" class="input mt-1" disabled=!s.can_edit>
                                        <option value="" selected=s.identity_id.is_empty()>"Server default"</option>
                                        {s.identities.iter().map(|(id, name)| view! {
                                            <option value=id.clone() selected=*id == s.identity_id>{name.clone()}</option>
                                        }).collect_view()}
                                    </select>
                                </label>
                                <label class="text-sm">"Default sender name"
                                    <input name="from_name" class="input mt-1" value=s.from_name.clone() disabled=!s.can_edit/></label>
                                <label class="text-sm">"Default sender address"
                                    <input name="from_email" type="email" class="input mt-1" value=s.from_email.clone()
                                        placeholder="noreply@yourdomain.com" disabled=!s.can_edit/></label>
                                <p class="text-xs text-slate-500 sm:col-span-2">"Transactional mail has its own rate bucket and sending loops, so a large campaign never delays a password reset. It ignores the frequency cap and unsubscribes; bounced and complained addresses are refused."</p>
                                {s.can_edit.then(|| view! { <div class="text-right"><button type="submit" class="btn-secondary">"Save"</button></div> })}
                            </ActionForm>
                            <ActionError value=save.value()/>
                        }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}
