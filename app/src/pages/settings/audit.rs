//! `/settings/audit`: the workspace's audit log, newest first, for owners and admins. The
//! filters and the page live in the URL (`?action=…&actor=…&before=…`), so a reload or a shared
//! link shows the same entries.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{Card, LoadError, LocalTimeOf};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;
use herald_types::{ActorKind, AuditAction, AuditEntry};

/// Entries per page.
#[cfg(feature = "ssr")]
const PAGE: i64 = 50;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AuditView {
    pub entries: Vec<AuditEntry>,
    /// The `before` of the next (older) page, when there is one.
    pub older: Option<i64>,
}

#[server(prefix = "/rpc", endpoint = "audit_log")]
pub async fn audit_log(action: String, actor: String, before: String) -> Result<AuditView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audit};
    let m = require_role(Role::Admin).await?;
    let filter = audit::Filter {
        action: audit::Action::parse(action.trim()),
        actor: Some(actor).filter(|a| !a.trim().is_empty()),
        before: before.trim().parse().ok(),
        limit: PAGE + 1,
    };
    let mut entries = audit::list(&m.state.db, m.tenant, &filter).await?;
    let older = (entries.len() as i64 > PAGE).then(|| {
        entries.truncate(PAGE as usize);
        entries.last().map(|e| e.id)
    });
    Ok(AuditView { entries, older: older.flatten() })
}

#[component]
pub fn AuditLogPage() -> impl IntoView {
    let query = use_query_map();
    let param = move |name: &'static str| query.with(|q| q.get(name)).unwrap_or_default();
    let data = Resource::new(
        move || (param("action"), param("actor"), param("before")),
        |(action, actor, before)| audit_log(action, actor, before),
    );
    view! {
        <SettingsTabs active="/settings/audit"/>
        <Card>
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(v) => view! { <AuditBody v=v action=param("action") actor=param("actor")/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}

#[component]
fn AuditBody(v: AuditView, action: String, actor: String) -> impl IntoView {
    let older_href = v.older.map(|id| {
        let mut href = format!("/settings/audit?before={id}");
        for (k, val) in [("action", &action), ("actor", &actor)] {
            if !val.is_empty() {
                href.push_str(&format!("&{k}={}", encode_query_value(val)));
            }
        }
        href
    });
    let filtered = !action.is_empty() || !actor.is_empty();
    view! {
        <form method="get" class="mb-4 flex flex-wrap items-end gap-3" role="search">
            <div>
                <label for="audit-action" class="label">"Action"</label>
                <select id="audit-action" name="action" class="input">
                    <option value="">"Every action"</option>
                    {AuditAction::ALL.iter().map(|a| {
                        let selected = a.as_str() == action;
                        view! { <option value=a.as_str() selected=selected>{a.label()}</option> }
                    }).collect_view()}
                </select>
            </div>
            <div>
                <label for="audit-actor" class="label">"Who"</label>
                <input id="audit-actor" name="actor" class="input" placeholder="Email or key name" value=actor.clone()/>
            </div>
            <button type="submit" class="btn-secondary">"Filter"</button>
            {filtered.then(|| view! { <a href="/settings/audit" class="text-sm text-indigo-600 hover:underline">"Clear"</a> })}
        </form>
        {if v.entries.is_empty() {
            view! {
                <p class="py-6 text-center text-sm text-slate-500" data-testid="audit-empty">
                    {if filtered { "No entries match." } else {
                        "Nothing recorded yet. Sends, schedules, settings, members, API keys, imports, exports and erasures appear here."
                    }}
                </p>
            }.into_any()
        } else {
            view! {
                <ol class="divide-y divide-slate-100" data-testid="audit-log">
                    {v.entries.into_iter().map(|r| view! { <AuditRow r=r/> }).collect_view()}
                </ol>
                {older_href.map(|href| view! {
                    <div class="mt-4 text-right"><a href=href class="btn-secondary">"Older entries"</a></div>
                })}
            }.into_any()
        }}
    }
}

/// One entry as a sentence ("anna@example.com paused “Spring issue”"), when and from where,
/// and the raw object and detail folded away for whoever investigates.
#[component]
fn AuditRow(r: AuditEntry) -> impl IntoView {
    let detail = r.detail_text();
    let raw = !r.object.is_empty() || !detail.is_empty();
    view! {
        <li class="flex flex-col gap-1 py-3 sm:flex-row sm:items-baseline sm:gap-4" data-testid="audit-row" data-action=r.action.as_str()>
            <span class="shrink-0 text-xs text-slate-500 sm:w-36"><LocalTimeOf at=r.at/></span>
            <div class="min-w-0 flex-1 text-sm">
                <p class="break-words text-slate-800" data-testid="audit-sentence">
                    {match r.actor_name.clone() {
                        Some(name) => view! {
                            <span class="font-medium">{name}</span>
                            <span class="text-slate-500">{format!(" ({})", r.actor)}</span>
                        }.into_any(),
                        None => view! { <span class="font-medium">{r.actor.clone()}</span> }.into_any(),
                    }}
                    {(r.actor_kind == ActorKind::ApiKey).then(|| view! { <span class="badge ml-1">"API"</span> })}
                    " " {r.sentence()}
                </p>
                {raw.then(|| view! {
                    <details class="mt-1 text-xs text-slate-500">
                        <summary class="cursor-pointer select-none">"Details"</summary>
                        <dl class="mt-1 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 font-mono">
                            {(!r.object.is_empty()).then(|| view! { <dt>"object"</dt><dd class="break-all">{r.object.clone()}</dd> })}
                            {(!detail.is_empty()).then(|| view! { <dt>"detail"</dt><dd class="break-all">{detail.clone()}</dd> })}
                        </dl>
                    </details>
                })}
            </div>
            <span class="shrink-0 text-xs text-slate-500">{r.ip.clone()}</span>
        </li>
    }
}

/// Percent-encodes a query value. Written here because the app crate (built for wasm too) has
/// no URL crate, and a dozen lines beat adding one for a link.
fn encode_query_value(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
