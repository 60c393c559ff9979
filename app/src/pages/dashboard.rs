//! `/`: the workspace's home: a getting-started checklist of what still blocks a first send
//! (gone once done), the audience in numbers with its growth over 30 or 90 days (`?days=`, so the
//! choice survives a reload), the last campaigns' open and click rates, and the bounce and
//! complaint rates of the last 30 days against the thresholds mailbox providers enforce. All
//! from rollups.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};

use crate::components::chart::Chart;
use crate::components::shell::use_current;
use crate::components::ui::{Card, LoadError, PageHeader, percent_label};
use crate::error::AppError;
use herald_types::RecentCampaign;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DashboardSummary {
    pub has_postal_address: bool,
    pub has_sender: bool,
    pub has_verified_domain: bool,
    pub members: usize,
    pub pending_invites: usize,
    /// The growth chart's window: 30 or 90 days.
    pub days: u32,
    /// Subscribes vs unsubscribes per day over `days` (None when there were none).
    pub growth_chart: Option<String>,
    /// Subscribes minus unsubscribes over `days`.
    pub net_growth: i64,
    pub readers: i64,
    pub confirmed: i64,
    pub unconfirmed: i64,
    pub lists: i64,
    pub recent: Vec<RecentCampaign>,
    pub sent_30d: i64,
    pub bounce_rate: f64,
    pub complaint_rate: f64,
}

#[server(prefix = "/rpc", endpoint = "dashboard_summary")]
pub async fn get_dashboard_summary(days: u32) -> Result<DashboardSummary, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, invites, workspaces};
    let m = require_role(Role::Viewer).await?;
    let days = if days == 30 { 30 } else { 90 };
    let ws = workspaces::get(&m.state.db, m.tenant).await?;
    let members = workspaces::members(&m.state.db, m.tenant).await?.len();
    let pending_invites = invites::pending(&m.state.db, m.tenant).await?.len();
    let has_verified_domain =
        herald_engine::sending::domains::list(&m.state.db, m.tenant).await?.iter().any(|d| d.verified_at.is_some());
    let d = herald_engine::campaigns::stats::dashboard(&m.state.db, m.tenant).await?;
    let today = chrono::Utc::now().date_naive();
    let since = today - chrono::Duration::days(i64::from(days));
    let window: Vec<_> = d.growth.iter().filter(|p| p.day > since).collect();
    let net_growth = window.iter().map(|p| p.subscribes - p.unsubscribes).sum();
    // Every day of the window, quiet ones as zero: a line through the days that had events only
    // would join a spike to the next one weeks later (and one such day would be a lone dot).
    let growth_chart = (!window.is_empty()).then(|| {
        let by_day: std::collections::HashMap<_, _> =
            window.iter().map(|p| (p.day, (p.subscribes, p.unsubscribes))).collect();
        let every_day: Vec<chrono::NaiveDate> =
            (1..=i64::from(days)).map(|i| since + chrono::Duration::days(i)).collect();
        let count = |pick: fn(&(i64, i64)) -> i64| every_day.iter().map(|d| by_day.get(d).map_or(0, pick)).collect();
        crate::charts::lines(
            every_day.iter().map(|d| d.format("%b %d").to_string()).collect(),
            vec![("Subscribed", count(|c| c.0)), ("Unsubscribed", count(|c| c.1))],
        )
    });
    let share = |part: i64| if d.sent_30d > 0 { part as f64 / d.sent_30d as f64 } else { 0.0 };
    Ok(DashboardSummary {
        has_postal_address: ws.can_send_campaigns(),
        has_sender: !ws.default_from_email.is_empty(),
        has_verified_domain,
        members,
        pending_invites,
        days,
        growth_chart,
        net_growth,
        readers: d.readers,
        confirmed: d.confirmed,
        unconfirmed: d.unconfirmed,
        lists: d.lists,
        recent: d.recent,
        sent_30d: d.sent_30d,
        bounce_rate: share(d.bounces_30d),
        complaint_rate: share(d.complaints_30d),
    })
}

#[component]
pub fn DashboardPage() -> impl IntoView {
    let info = use_current();
    let ws = info.current.clone().map(|w| w.name).unwrap_or_default();
    let query = use_query_map();
    let days = move || query.with(|q| q.get("days").and_then(|d| d.parse().ok()).unwrap_or(90u32));
    let summary = Resource::new(days, get_dashboard_summary);
    view! {
        <PageHeader title=ws subtitle="Dashboard"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match summary.await {
                    Ok(s) => view! { <Checklist s=s.clone()/> <Audience s=s.clone()/> <Engagement s=s/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// What still stands between the workspace and its first send, each with where to fix it; the
/// card goes away once nothing does.
#[component]
fn Checklist(s: DashboardSummary) -> impl IntoView {
    let steps = [
        (
            s.has_verified_domain,
            "Verify a sending domain",
            "Mail goes out from an address at a domain you prove is yours (DNS records; Herald checks them).",
            "/settings/domains",
        ),
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
        (s.lists > 0, "Make a first list", "Readers join lists; campaigns go to lists.", "/audience"),
    ];
    let done = steps.iter().filter(|s| s.0).count();
    (done < steps.len()).then(|| view! {
        <Card title="Getting started">
            <p class="mb-4 text-sm text-slate-500" data-testid="checklist-progress">{format!("{done} of {} done", steps.len())}</p>
            <div class="mb-5 h-2 w-full rounded-full bg-slate-100" role="progressbar" aria-label="Getting started"
                aria-valuemin="0" aria-valuemax=steps.len() aria-valuenow=done>
                <div class="h-2 rounded-full bg-indigo-500" style=format!("width: {}%", done * 100 / steps.len())></div>
            </div>
            <ul class="divide-y divide-slate-100" data-testid="checklist">
                {steps.into_iter().map(|(ok, title, body, href)| view! {
                    <li class="flex items-start gap-3 py-3" data-done=ok.to_string()>
                        <span class=if ok { "mt-0.5 text-emerald-600" } else { "mt-0.5 text-slate-300" } aria-hidden="true">{if ok { "●" } else { "○" }}</span>
                        <div class="flex-1">
                            <a href=href class="font-medium text-slate-800 hover:text-indigo-600">{title}</a>
                            <span class="sr-only">{if ok { " (done)" } else { " (to do)" }}</span>
                            <p class="text-sm text-slate-500">{body}</p>
                        </div>
                    </li>
                }).collect_view()}
            </ul>
        </Card>
    })
}

/// The audience in numbers, and its growth over the chosen window.
#[component]
fn Audience(s: DashboardSummary) -> impl IntoView {
    let figure = |label: &'static str, value: String, testid: &'static str| {
        view! {
            <div>
                <p class="text-xs font-medium uppercase tracking-wide text-slate-500">{label}</p>
                <p class="mt-1 text-2xl font-semibold tabular-nums text-slate-900" data-testid=testid>{value}</p>
            </div>
        }
    };
    let net = if s.net_growth > 0 { format!("+{}", s.net_growth) } else { s.net_growth.to_string() };
    let days = s.days;
    let window = move |d: u32| {
        let current = days == d;
        view! {
            <a href=format!("/?days={d}") aria-current=current.then_some("page")
                class=if current { "inline-flex min-h-11 items-center rounded-md bg-indigo-50 px-3 text-sm font-medium text-indigo-700" }
                      else { "inline-flex min-h-11 items-center rounded-md px-3 text-sm text-slate-600 hover:bg-slate-50" }>
                {format!("{d} days")}
            </a>
        }
    };
    view! {
        <div class="grid gap-x-6 lg:grid-cols-3">
            <Card title="Audience">
                <div class="grid grid-cols-2 gap-4" data-testid="audience-figures">
                    {figure("Readers", s.readers.to_string(), "readers-count")}
                    {figure(if s.days == 30 { "Net growth, 30 days" } else { "Net growth, 90 days" }, net, "net-growth")}
                    {figure("Confirmed", s.confirmed.to_string(), "confirmed-subscriptions")}
                    {figure("Unconfirmed", s.unconfirmed.to_string(), "unconfirmed-subscriptions")}
                </div>
                <p class="mt-3 text-xs text-slate-500">"Confirmed and unconfirmed count subscriptions over every list."</p>
                <p class="mt-2 text-sm"><a href="/audience" class="text-indigo-600 hover:underline">"Open Audience →"</a></p>
            </Card>
            <div class="lg:col-span-2">
                <Card title="Reader growth">
                    <nav class="mb-3 flex gap-1" aria-label="Growth window">{window(30)}{window(90)}</nav>
                    {match s.growth_chart {
                        Some(o) => view! { <Chart option=o label="Subscriptions gained and lost per day" testid="chart-growth"/> }.into_any(),
                        None => view! { <p class="text-sm text-slate-500" data-testid="growth-empty">"No subscriptions in this window yet. Share your sign-up page from Audience."</p> }.into_any(),
                    }}
                </Card>
            </div>
        </div>
    }
}

/// Growth, recent campaigns, and reputation against the providers' limits: Gmail and Yahoo
/// require a spam rate under 0.3 % (aim for 0.1 %); Amazon SES reviews accounts at 5 % bounces
/// or 0.1 % complaints.
#[component]
fn Engagement(s: DashboardSummary) -> impl IntoView {
    let gauge = |label: &'static str, value: f64, warn: f64, limit: f64, note: &'static str, testid: &'static str| {
        let (class, verdict) = if value >= limit {
            ("text-red-700", "over the limit")
        } else if value >= warn {
            ("text-amber-700", "close to the limit")
        } else {
            ("text-emerald-700", "healthy")
        };
        view! {
            <div>
                <p class="text-xs font-medium uppercase tracking-wide text-slate-500">{label}</p>
                <p class=format!("mt-1 text-2xl font-semibold {class}") data-testid=testid>{format!("{:.2} %", value * 100.0)}</p>
                <p class="text-xs text-slate-500">{format!("{verdict} · {note}")}</p>
            </div>
        }
    };
    view! {
        <div class="grid gap-x-6 lg:grid-cols-2">
            <Card title="Team">
                <p class="text-3xl font-semibold text-slate-900" data-testid="member-count">{s.members}</p>
                <p class="text-sm text-slate-500">{format!("members · {} pending invites", s.pending_invites)}</p>
                <a href="/settings/members" class="mt-3 inline-block text-sm text-indigo-600 hover:underline">"Invite your team →"</a>
            </Card>
            <Card title="Sending health (30 days)">
                <p class="mb-4 text-sm text-slate-500">{format!("{} campaign messages sent", s.sent_30d)}</p>
                <div class="grid grid-cols-2 gap-4">
                    {gauge("Bounce rate", s.bounce_rate, 0.02, 0.05, "SES reviews at 5 %", "health-bounce-rate")}
                    {gauge("Complaint rate", s.complaint_rate, 0.001, 0.003, "Gmail limit 0.3 %", "health-complaint-rate")}
                </div>
            </Card>
        </div>
        <Card title="Recent campaigns">
            {if s.recent.is_empty() {
                view! { <p class="text-sm text-slate-500">"Nothing sent yet."</p> }.into_any()
            } else {
                view! {
                    <table class="w-full text-left text-sm" data-testid="recent-campaigns">
                        <thead class="text-xs uppercase text-slate-500">
                            <tr><th class="py-1">"Campaign"</th><th>"Sent"</th><th>"Opened"</th><th>"Clicked"</th></tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100">
                            {s.recent.into_iter().map(|c| view! {
                                <tr>
                                    <td class="py-1"><a class="text-indigo-600 hover:underline" href=format!("/campaigns/{}/stats", c.id)>{c.name.clone()}</a></td>
                                    <td>{c.sent}</td><td>{percent_label(c.open_rate())}</td><td>{percent_label(c.click_rate())}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </Card>
    }
}
