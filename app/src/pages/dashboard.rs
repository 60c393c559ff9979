//! `/`: the workspace's home, with a getting-started checklist until the basics are done.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::shell::use_current;
use crate::components::ui::{Card, LoadError, PageHeader};
use crate::error::AppError;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DashboardSummary {
    pub has_postal_address: bool,
    pub has_sender: bool,
    pub members: usize,
    pub pending_invites: usize,
}

#[server(prefix = "/rpc", endpoint = "dashboard_summary")]
pub async fn get_dashboard_summary() -> Result<DashboardSummary, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, invites, workspaces};
    let m = require_role(Role::Viewer).await?;
    let ws = workspaces::get(&m.state.db, m.tenant).await?;
    let members = workspaces::members(&m.state.db, m.tenant).await?.len();
    let pending_invites = invites::pending(&m.state.db, m.tenant).await?.len();
    Ok(DashboardSummary {
        has_postal_address: ws.can_send_campaigns(),
        has_sender: !ws.default_from_email.is_empty(),
        members,
        pending_invites,
    })
}

#[component]
pub fn DashboardPage() -> impl IntoView {
    let info = use_current();
    let ws = info.current.clone().map(|w| w.name).unwrap_or_default();
    let summary = Resource::new(|| (), |_| get_dashboard_summary());
    view! {
        <PageHeader title=ws subtitle="Dashboard"/>
        <Suspense fallback=|| view! { <p class="text-slate-400">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match summary.await {
                    Ok(s) => view! { <Checklist s=s/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Checklist(s: DashboardSummary) -> impl IntoView {
    let steps = [
        (
            s.has_postal_address,
            "Add your postal address",
            "The law (CAN-SPAM) requires it in every campaign; Herald will not send without it.",
            "/settings",
        ),
        (
            s.has_sender,
            "Set a default sender",
            "The name and address your readers will see in their inbox.",
            "/settings",
        ),
        (
            s.members > 1 || s.pending_invites > 0,
            "Invite your team",
            "Authors write and send; viewers read the numbers.",
            "/settings/members",
        ),
    ];
    let done = steps.iter().filter(|s| s.0).count();
    view! {
        <Card title="Getting started">
            <p class="mb-4 text-sm text-slate-500">{format!("{done} of {} done", steps.len())}</p>
            <div class="mb-5 h-2 w-full rounded-full bg-slate-100" role="progressbar"
                aria-valuemin="0" aria-valuemax=steps.len() aria-valuenow=done>
                <div class="h-2 rounded-full bg-indigo-500" style=format!("width: {}%", done * 100 / steps.len())></div>
            </div>
            <ul class="divide-y divide-slate-100">
                {steps.into_iter().map(|(ok, title, body, href)| view! {
                    <li class="flex items-start gap-3 py-3">
                        <span class=if ok { "mt-0.5 text-emerald-600" } else { "mt-0.5 text-slate-300" }>{if ok { "●" } else { "○" }}</span>
                        <div class="flex-1">
                            <a href=href class="font-medium text-slate-800 hover:text-indigo-600">{title}</a>
                            <p class="text-sm text-slate-500">{body}</p>
                        </div>
                    </li>
                }).collect_view()}
            </ul>
        </Card>
        <div class="grid grid-cols-2 gap-6">
            <Card title="Team">
                <p class="text-3xl font-semibold text-slate-900" data-testid="member-count">{s.members}</p>
                <p class="text-sm text-slate-500">{format!("members · {} pending invites", s.pending_invites)}</p>
            </Card>
            <Card title="Readers">
                <p class="text-sm text-slate-500">"Create lists, share your hosted sign-up page and manage readers under Audience."</p>
                <a href="/audience" class="mt-3 inline-block text-sm text-indigo-600 hover:underline">"Open Audience →"</a>
            </Card>
        </div>
    }
}
