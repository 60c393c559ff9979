//! `/campaigns`: every campaign, newest first, with its status, audience size, how far its send
//! got and its open and click rates; a search box and filters by status and date (in the
//! address, `?q=&status=&from=&to=`, so a filtered list survives a reload and can be shared);
//! and the button that starts a new draft.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, LocalTime, PageHeader, percent_label};
use crate::error::AppError;
use herald_types::{CampaignFilter, CampaignId, CampaignStatus};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CampaignRow {
    pub id: CampaignId,
    pub name: String,
    pub subject: String,
    pub status: CampaignStatus,
    pub recipients: i64,
    /// Messages accepted by the SMTP server (`None` before the send starts).
    pub sent: Option<i64>,
    /// Share of the send finished, 0–100, for sending and paused campaigns.
    pub percent: Option<u8>,
    pub created_at: String,
    pub updated_at: String,
    pub scheduled_at: Option<String>,
    pub schedule_tz: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// An author asked for it to be sent; an owner or admin has not answered yet.
    pub awaiting_approval: bool,
    /// Unique opens and clicks over messages sent (`None` before anything was sent).
    pub open_rate: Option<f64>,
    pub click_rate: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CampaignsView {
    pub campaigns: Vec<CampaignRow>,
    pub can_create: bool,
    /// The workspace has no postal address yet: the empty state asks for it (and only then).
    pub postal_address_missing: bool,
}

#[server(prefix = "/rpc", endpoint = "list_campaigns")]
pub async fn list_campaigns(filter: CampaignFilter) -> Result<CampaignsView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::campaigns::{progress, stats, store};
    let m = require_role(Role::Viewer).await?;
    let query = filter.parse()?;
    let list = store::search(&m.state.db, m.tenant, &query).await?;
    let awaiting = herald_engine::campaigns::approval::pending_campaigns(&m.state.db, m.tenant).await?;
    let ids: Vec<CampaignId> = list.iter().map(|c| c.id).collect();
    let engagement = stats::engagement(&m.state.db, m.tenant, &ids).await?;
    let mut campaigns = Vec::with_capacity(list.len());
    for c in list {
        // Counts exist once a send started; drafts and scheduled campaigns have none.
        let (sent, percent) = if c.status.is_editable() {
            (None, None)
        } else {
            let p = progress::view(&m.state.db, m.tenant, c.id).await?;
            let percent = matches!(c.status, CampaignStatus::Sending | CampaignStatus::Paused).then(|| p.percent());
            (Some(p.sent), percent)
        };
        let (delivered, opens, clicks) = engagement.get(&c.id).copied().unwrap_or_default();
        campaigns.push(CampaignRow {
            awaiting_approval: awaiting.contains(&c.id),
            open_rate: herald_types::campaign::rate(opens, delivered),
            click_rate: herald_types::campaign::rate(clicks, delivered),
            id: c.id,
            name: c.name,
            subject: c.subject,
            status: c.status,
            recipients: c.recipients,
            sent,
            percent,
            created_at: c.created_at.to_rfc3339(),
            updated_at: c.updated_at.to_rfc3339(),
            scheduled_at: c.scheduled_at.map(|t| t.to_rfc3339()),
            schedule_tz: c.schedule_tz,
            started_at: c.started_at.map(|t| t.to_rfc3339()),
            finished_at: c.finished_at.map(|t| t.to_rfc3339()),
        });
    }
    // Asked only by the empty state, so only worth a query when there is nothing to list.
    let postal_address_missing =
        campaigns.is_empty() && !herald_engine::workspaces::get(&m.state.db, m.tenant).await?.can_send_campaigns();
    Ok(CampaignsView { campaigns, can_create: m.role.can_author(), postal_address_missing })
}

/// Creates a draft and opens its editor. An empty name becomes "Untitled campaign".
#[server(prefix = "/rpc", endpoint = "create_campaign")]
pub async fn create_campaign(name: String) -> Result<CampaignId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::campaigns::store::{self, CampaignInput};
    let m = require_role(Role::Author).await?;
    let name = if name.trim().is_empty() { "Untitled campaign".to_string() } else { name };
    // New campaigns start in the block editor with a starter document in the workspace's brand
    //; the API's default stays Markdown.
    let start = herald_engine::campaigns::templates::Start::Blank;
    let start = herald_engine::campaigns::templates::start_document(&m.state.db, m.tenant, start).await?;
    let input = CampaignInput { name, body_format: start.body_format, body: start.body, ..Default::default() };
    let c = store::create(&m.state.db, m.tenant, m.role, &input).await?;
    leptos_axum::redirect(&format!("/campaigns/{}", c.id));
    Ok(c.id)
}

/// The colour of a campaign status: draft grey, scheduled blue, sending amber, paused orange,
/// sent green, cancelled slate, recurring indigo.
pub fn status_class(status: CampaignStatus) -> &'static str {
    match status {
        CampaignStatus::Scheduled => "badge bg-blue-50 text-blue-700 ring-blue-200",
        CampaignStatus::Sending => "badge bg-amber-50 text-amber-800 ring-amber-200",
        CampaignStatus::Paused => "badge bg-orange-50 text-orange-700 ring-orange-200",
        CampaignStatus::Sent => "badge bg-emerald-50 text-emerald-700 ring-emerald-200",
        CampaignStatus::Cancelled => "badge bg-slate-200 text-slate-600 ring-slate-300",
        CampaignStatus::Recurring => "badge bg-indigo-50 text-indigo-700 ring-indigo-200",
        CampaignStatus::Draft => "badge bg-slate-100 text-slate-600 ring-slate-200",
    }
}

/// A campaign's status as a coloured badge; a sending one shows how far it got.
#[component]
pub fn CampaignStatusBadge(status: CampaignStatus, #[prop(optional)] percent: Option<u8>) -> impl IntoView {
    let sending = status == CampaignStatus::Sending;
    view! {
        <span class=status_class(status) data-testid="status-badge">
            {sending.then(|| view! { <span class="mr-1.5 inline-block h-1.5 w-1.5 animate-pulse rounded-full bg-amber-500" aria-hidden="true"></span> })}
            {status.label()}
            {percent.filter(|_| sending).map(|p| view! { <span class="ml-1 tabular-nums">{format!("{p}%")}</span> })}
        </span>
    }
}

/// The filter in the page's address.
fn filter_from_query() -> impl Fn() -> CampaignFilter + Copy {
    let query = use_query_map();
    move || {
        query.with(|q| CampaignFilter {
            q: q.get("q").unwrap_or_default(),
            status: q.get("status").unwrap_or_default(),
            from: q.get("from").unwrap_or_default(),
            to: q.get("to").unwrap_or_default(),
            limit: None,
            cursor: None,
        })
    }
}

#[component]
pub fn CampaignsPage() -> impl IntoView {
    let create = ServerAction::<CreateCampaign>::new();
    let filter = filter_from_query();
    let data = Resource::new(filter, list_campaigns);
    view! {
        <div class="flex items-start justify-between gap-6">
            <PageHeader title="Campaigns" subtitle="Write, schedule and send"/>
            <Suspense>
                {move || Suspend::new(async move {
                    data.await.ok().filter(|v| v.can_create).map(|_| view! {
                        <div class="flex flex-wrap items-end justify-end gap-2">
                            <a href="/campaigns/templates" class="btn-secondary min-h-11 inline-flex items-center">"Start from a template"</a>
                            <NewCampaignForm create=create/>
                        </div>
                    })
                })}
            </Suspense>
        </div>
        <ActionError value=create.value()/>
        <Filters filter=filter/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    // The filter is read untracked: after an await there is no reactive context
                    // (the resource already follows the filter).
                    Ok(v) if v.campaigns.is_empty() && untrack(filter).is_set() => view! { <NoMatch/> }.into_any(),
                    Ok(v) if v.campaigns.is_empty() => {
                        view! { <NoCampaigns can_create=v.can_create postal_address_missing=v.postal_address_missing/> }.into_any()
                    }
                    Ok(v) => view! { <CampaignTable rows=v.campaigns/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Search and filters: a plain GET form, so the choice lands in the address (reload-proof).
#[component]
fn Filters(filter: impl Fn() -> CampaignFilter + Copy + Send + Sync + 'static) -> impl IntoView {
    // The form's first values, read once (the page reloads with a new address on submit).
    let current = untrack(filter);
    view! {
        <form method="get" action="/campaigns" role="search" aria-label="Filter campaigns" data-testid="campaign-filters"
            class="mb-4 grid gap-3 rounded-xl border border-slate-200 bg-white p-4 sm:grid-cols-2 lg:grid-cols-[2fr_1fr_1fr_1fr_auto] lg:items-end">
            <div>
                <label for="campaign-search" class="label">"Search"</label>
                <input id="campaign-search" name="q" type="search" class="input w-full" value=current.q.clone()
                    placeholder="Name or subject" autocomplete="off"/>
            </div>
            <div>
                <label for="campaign-status" class="label">"Status"</label>
                <select id="campaign-status" name="status" class="input w-full">
                    <option value="" selected=current.status.is_empty()>"Any status"</option>
                    {CampaignStatus::ALL.iter().map(|s| view! {
                        <option value=s.as_str() selected=current.status == s.as_str()>{s.label()}</option>
                    }).collect_view()}
                </select>
            </div>
            <div>
                <label for="campaign-from" class="label">"From"</label>
                <input id="campaign-from" name="from" type="date" class="input w-full" value=current.from.clone()/>
            </div>
            <div>
                <label for="campaign-to" class="label">"To"</label>
                <input id="campaign-to" name="to" type="date" class="input w-full" value=current.to.clone()/>
            </div>
            <div class="flex items-center gap-2">
                <button type="submit" class="btn-secondary min-h-11">"Filter"</button>
                {current.is_set().then(|| view! {
                    <a href="/campaigns" class="inline-flex min-h-11 items-center px-2 text-sm text-indigo-600 hover:underline">"Clear"</a>
                })}
            </div>
        </form>
    }
}

#[component]
fn NoMatch() -> impl IntoView {
    view! {
        <div class="rounded-xl border-2 border-dashed border-slate-200 bg-white px-6 py-12 text-center" data-testid="campaigns-no-match">
            <h2 class="text-lg font-medium text-slate-900">"No campaign matches"</h2>
            <p class="mx-auto mt-2 max-w-md text-sm text-slate-500">
                "Try other words or a wider range of days, or "
                <a href="/campaigns" class="text-indigo-600 hover:underline">"see every campaign"</a>"."
            </p>
        </div>
    }
}

#[component]
fn NewCampaignForm(create: ServerAction<CreateCampaign>) -> impl IntoView {
    view! {
        <ActionForm action=create attr:class="flex items-end gap-2" attr:aria-label="New campaign">
            <div>
                <label for="new-campaign-name" class="sr-only">"Campaign name"</label>
                <input id="new-campaign-name" name="name" maxlength="200" class="input w-64"
                    placeholder="Untitled campaign" autocomplete="off"/>
            </div>
            <button type="submit" class="btn-primary" disabled=move || create.pending().get()>
                {move || if create.pending().get() { "Creating…" } else { "New campaign" }}
            </button>
        </ActionForm>
    }
}

#[component]
fn NoCampaigns(can_create: bool, postal_address_missing: bool) -> impl IntoView {
    let body = if can_create {
        "A campaign is one email to one or more of your lists. Name it above and press “New campaign”: the editor saves as you type, shows a live preview, and sends a test before the real thing."
    } else {
        "Authors and admins write campaigns here. Once one is sent, you can follow its progress and report from this page."
    };
    view! {
        <div class="rounded-xl border-2 border-dashed border-slate-200 bg-white px-6 py-12 text-center" data-testid="campaigns-empty">
            <h2 class="text-lg font-medium text-slate-900">"No campaigns yet"</h2>
            <p class="mx-auto mt-2 max-w-md text-sm text-slate-500">{body}</p>
            {can_create.then(|| view! {
                <p class="mt-4 text-xs text-slate-500" data-testid="campaigns-before-first-send">
                    {postal_address_missing.then(|| view! {
                        "Before the first send: add your postal address in "
                        <a href="/settings" class="text-indigo-600 hover:underline">"Settings"</a>
                        ". "
                    })}
                    "Readers come from your lists in "
                    <a href="/audience" class="text-indigo-600 hover:underline">"Audience"</a>"."
                </p>
            })}
        </div>
    }
}

/// The date worth showing for a campaign in its current state: what it says, and the instant.
fn when(r: &CampaignRow) -> (&'static str, Option<String>) {
    match r.status {
        CampaignStatus::Scheduled => ("Sends", r.scheduled_at.clone()),
        CampaignStatus::Sending | CampaignStatus::Paused => ("Started", r.started_at.clone()),
        CampaignStatus::Sent => ("Sent", r.finished_at.clone().or_else(|| r.started_at.clone())),
        CampaignStatus::Cancelled => ("Stopped", r.finished_at.clone().or_else(|| r.started_at.clone())),
        _ => ("Edited", Some(r.updated_at.clone())),
    }
}

#[component]
fn CampaignTable(rows: Vec<CampaignRow>) -> impl IntoView {
    view! {
        <Card>
            <table class="w-full text-left text-sm" data-testid="campaigns-table">
                <thead class="text-xs uppercase text-slate-500">
                    <tr>
                        <th class="py-2">"Campaign"</th>
                        <th>"Status"</th>
                        <th class="hidden text-right sm:table-cell">"Recipients"</th>
                        <th class="hidden text-right sm:table-cell">"Sent"</th>
                        <th class="hidden text-right md:table-cell">"Opened"</th>
                        <th class="hidden text-right md:table-cell">"Clicked"</th>
                        <th class="hidden pl-6 sm:table-cell">"Date"</th>
                    </tr>
                </thead>
                <tbody class="divide-y divide-slate-100">
                    {rows.into_iter().map(|r| {
                        let href = format!("/campaigns/{}", r.id);
                        let (when_label, when_value) = when(&r);
                        let recipients = if r.recipients > 0 || r.sent.is_some() { r.recipients.to_string() } else { "—".into() };
                        let sent = r.sent.map(|n| n.to_string()).unwrap_or_else(|| "—".into());
                        let subject = if r.subject.is_empty() { "No subject yet".to_string() } else { r.subject.clone() };
                        view! {
                            <tr data-testid="campaign-row">
                                <td class="max-w-xs py-3 pr-4">
                                    <a href=href class="block truncate font-medium text-slate-800 hover:text-indigo-600" title=r.name.clone()>{r.name.clone()}</a>
                                    <div class="truncate text-xs text-slate-500" title=subject.clone()>{subject.clone()}</div>
                                </td>
                                <td>
                                    <CampaignStatusBadge status=r.status percent=r.percent.unwrap_or(0)/>
                                    {r.awaiting_approval.then(|| view! {
                                        <span class="badge ml-1 bg-amber-100 text-amber-800" data-testid="awaiting-approval">"Awaiting approval"</span>
                                    })}
                                    {r.percent.filter(|_| matches!(r.status, CampaignStatus::Sending | CampaignStatus::Paused)).map(|p| view! {
                                        <div class="mt-1 h-1 w-24 rounded-full bg-slate-100" aria-hidden="true">
                                            <div class="h-1 rounded-full bg-amber-400" style=format!("width: {p}%")></div>
                                        </div>
                                    })}
                                </td>
                                <td class="hidden text-right tabular-nums sm:table-cell">{recipients}</td>
                                <td class="hidden text-right tabular-nums sm:table-cell">{sent}</td>
                                <td class="hidden text-right tabular-nums md:table-cell" data-testid="open-rate">{percent_label(r.open_rate)}</td>
                                <td class="hidden text-right tabular-nums md:table-cell" data-testid="click-rate">{percent_label(r.click_rate)}</td>
                                <td class="hidden pl-6 text-slate-500 sm:table-cell">
                                    <span class="text-xs text-slate-500">{when_label}" "</span>{when_value.map(|at| view! { <LocalTime at=at/> })}
                                </td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </Card>
    }
}
