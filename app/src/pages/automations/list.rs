//! `/automations`: the workspace's automations with their state, trigger and readers in them;
//! a new one starts from a welcome-mail template.

use herald_types::{Automation, AutomationStatus};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{Card, EmptyState, LoadError, PageHeader};
use crate::error::AppError;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AutomationRow {
    pub automation: Automation,
    pub trigger: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AutomationsView {
    pub rows: Vec<AutomationRow>,
    pub can_create: bool,
}

#[server(prefix = "/rpc", endpoint = "list_automations")]
pub async fn list_automations() -> Result<AutomationsView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::audience::{lists, tags};
    use herald_engine::automations::store;
    let m = require_role(Role::Viewer).await?;
    let db = &m.state.db;
    let lists: Vec<_> = lists::with_counts(db, m.tenant).await?.into_iter().map(|l| (l.list.id, l.list.name)).collect();
    let tags: Vec<_> = tags::list(db, m.tenant).await?.into_iter().map(|t| (t.id, t.name)).collect();
    let rows = store::list(db, m.tenant)
        .await?
        .into_iter()
        .map(|a| AutomationRow { trigger: super::trigger_text(&a.trigger, &lists, &tags), automation: a })
        .collect();
    Ok(AutomationsView { rows, can_create: m.role.can_author() })
}

/// The badge of a state.
pub fn status_badge(s: AutomationStatus) -> (&'static str, &'static str) {
    match s {
        AutomationStatus::Draft => ("Draft", "bg-slate-100 text-slate-700"),
        AutomationStatus::Live => ("Live", "bg-green-100 text-green-800"),
        AutomationStatus::Paused => ("Paused", "bg-amber-100 text-amber-800"),
        AutomationStatus::Archived => ("Archived", "bg-slate-100 text-slate-600"),
    }
}

#[component]
pub fn AutomationsPage() -> impl IntoView {
    let view_data = Resource::new(|| (), |_| list_automations());
    view! {
        <PageHeader title="Automations" subtitle="Mail that goes out on its own: a welcome when someone joins, a sequence over days, a receipt when your app reports an event."/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match view_data.await {
                    Ok(v) if v.rows.is_empty() => view! {
                        <EmptyState title="No automations yet"
                            body="Start with a welcome mail: it goes to every reader the moment they confirm, once each, whatever else is sending."
                            action_href=if v.can_create { "/automations/new" } else { "" } action_label="Make a welcome automation"/>
                    }.into_any(),
                    Ok(v) => view! {
                        {v.can_create.then(|| view! {
                            <div class="mb-4 flex justify-end">
                                <a href="/automations/new" class="btn-primary" data-testid="new-automation">"New automation"</a>
                            </div>
                        })}
                        <Card title="Automations">
                            <ul class="divide-y divide-slate-100" data-testid="automations-list">
                                {v.rows.into_iter().map(|row| {
                                    let a = row.automation;
                                    let (label, class) = status_badge(a.status);
                                    let readers = if a.active == 1 { "1 reader in it".to_string() } else { format!("{} readers in it", a.active) };
                                    let steps = if a.steps.len() == 1 { "1 step".to_string() } else { format!("{} steps", a.steps.len()) };
                                    view! {
                                        <li class="flex flex-wrap items-center justify-between gap-3 py-3" data-testid="automation-row">
                                            <div class="min-w-0">
                                                <a href=format!("/automations/{}", a.id) class="font-medium wrap-anywhere text-indigo-700 hover:underline">{a.name}</a>
                                                <span class=format!("ml-2 rounded-full px-2 py-0.5 text-xs font-medium {class}") data-testid="automation-status">{label}</span>
                                                <p class="mt-1 text-sm text-slate-600 break-words">{row.trigger}" · "{steps}</p>
                                            </div>
                                            <span class="text-sm text-slate-600">{readers}</span>
                                        </li>
                                    }
                                }).collect_view()}
                            </ul>
                        </Card>
                    }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}
