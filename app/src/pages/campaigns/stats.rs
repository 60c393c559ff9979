//! `/campaigns/:id/stats`: what happened after the send. First the three figures that matter —
//! delivered (or sent, without delivery reports), unique opens and unique clicks, each as a
//! rate — then the charts, then the other figures (on a phone the first chart is on the first
//! screen). Every figure comes from rollups kept as events arrive (never a scan
//! of the event log), so the page is as quick at a million recipients as at ten. Charts: opens
//! and clicks over time, the funnel, top links (a table for one) and results by recipient
//! domain. Refreshes every 10 seconds while the page is open.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

use crate::components::chart::Chart;
use crate::components::ui::{Card, EmptyState, LoadError, PageHeader};
use crate::error::AppError;
use crate::pages::campaigns::ab_results::AbResultsCard;
use herald_types::{CampaignId, CampaignStatus, TrackingMode};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub label: String,
    pub value: i64,
    /// "12.5 % of delivered", or empty.
    pub rate: String,
    pub testid: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainRow {
    pub domain: String,
    pub sent: i64,
    pub bounced: i64,
    pub open_rate: String,
    pub click_rate: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkRow {
    pub url: String,
    pub clicks: i64,
    pub unique_clicks: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatsView {
    pub name: String,
    pub status: CampaignStatus,
    pub tracking: TrackingMode,
    /// Delivered (or sent), unique opens, unique clicks.
    pub headline: Vec<Figure>,
    pub figures: Vec<Figure>,
    /// Delivery reports arrive (a provider webhook): "delivered" is known.
    pub delivery_reports: bool,
    pub prefetch_opens: i64,
    pub timeline_chart: Option<String>,
    pub funnel_chart: String,
    pub links_chart: Option<String>,
    pub links: Vec<LinkRow>,
    pub domains_chart: Option<String>,
    pub domains: Vec<DomainRow>,
    /// The A/B test's versions side by side, when the campaign has one.
    pub ab: Option<herald_types::AbResults>,
}

#[cfg(feature = "ssr")]
fn percent(part: i64, whole: i64) -> String {
    crate::components::ui::percent_label(herald_types::campaign::rate(part, whole))
}

#[server(prefix = "/rpc", endpoint = "campaign_stats")]
pub async fn campaign_stats(id: CampaignId) -> Result<StatsView, AppError> {
    use crate::charts;
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::stats};
    let m = require_role(Role::Viewer).await?;
    let s = stats::campaign(&m.state.db, m.tenant, id).await?;
    let campaign = herald_engine::campaigns::store::get(&m.state.db, m.tenant, id).await?;
    let ab = crate::pages::campaigns::ab_results::load(&m.state.db, m.tenant, &campaign).await?;
    let c = &s.counters;
    // Delivery reports exist only with a provider webhook; otherwise rates are of messages sent.
    let base = if c.delivered > 0 { c.delivered } else { c.sent };
    let base_name = if c.delivered > 0 { "delivered" } else { "sent" };
    let anonymous = s.tracking == TrackingMode::Anonymous;
    let unique =
        |v: i64| if anonymous { "counts only".to_string() } else { format!("{} of {base_name}", percent(v, base)) };
    let fig = |label: &str, value: i64, rate: String, testid: &str| Figure {
        label: label.into(),
        value,
        rate,
        testid: testid.into(),
    };
    let delivery_reports = c.delivered > 0;
    let opened = if anonymous { c.opens } else { c.unique_opens };
    let clicked = if anonymous { c.clicks } else { c.unique_clicks };
    let headline = vec![
        if delivery_reports {
            fig("Delivered", c.delivered, format!("{} of sent", percent(c.delivered, c.sent)), "headline-delivered")
        } else {
            fig("Sent", c.sent, format!("{} of recipients", percent(c.sent, s.recipients)), "headline-delivered")
        },
        fig("Unique opens", opened, unique(c.unique_opens), "headline-opens"),
        fig("Unique clicks", clicked, unique(c.unique_clicks), "headline-clicks"),
    ];
    let mut figures = vec![
        fig("Recipients", s.recipients, String::new(), "stat-recipients"),
        fig("Sent", c.sent, percent(c.sent, s.recipients), "stat-sent"),
    ];
    if delivery_reports {
        figures.push(fig("Delivered", c.delivered, percent(c.delivered, c.sent), "stat-delivered"));
    }
    figures.extend([
        fig("Hard bounces", c.hard_bounces, percent(c.hard_bounces, c.sent + c.failed), "stat-hard-bounces"),
        fig("Soft bounces", c.soft_bounces, percent(c.soft_bounces, c.sent), "stat-soft-bounces"),
        fig("Complaints", c.complaints, percent(c.complaints, c.sent), "stat-complaints"),
        fig("Unsubscribed", c.unsubscribes, percent(c.unsubscribes, c.sent), "stat-unsubscribes"),
        fig(
            "Unique opens",
            if anonymous { c.opens } else { c.unique_opens },
            unique(c.unique_opens),
            "stat-unique-opens",
        ),
        fig("Total opens", c.opens, String::new(), "stat-opens"),
        fig(
            "Unique clicks",
            if anonymous { c.clicks } else { c.unique_clicks },
            unique(c.unique_clicks),
            "stat-unique-clicks",
        ),
        fig("Total clicks", c.clicks, String::new(), "stat-clicks"),
    ]);
    let timeline_chart = charts::timeline(&s.timeline.iter().map(|p| (p.hour, p.opens, p.clicks)).collect::<Vec<_>>());
    let mut steps = vec![("Sent", c.sent)];
    if c.delivered > 0 {
        steps.push(("Delivered", c.delivered));
    }
    steps.push(("Opened", opened));
    steps.push(("Clicked", clicked));
    let funnel_chart = charts::funnel(steps);
    // One link is a row of a table, not a chart of one bar.
    let links_chart = (s.top_links.len() > 1).then(|| {
        charts::bars(
            s.top_links.iter().map(|l| l.url.clone()).collect(),
            vec![
                ("Clicks", s.top_links.iter().map(|l| l.clicks).collect()),
                ("Unique clicks", s.top_links.iter().map(|l| l.unique_clicks).collect()),
            ],
        )
    });
    let domains_chart = (!s.domains.is_empty()).then(|| {
        charts::bars(
            s.domains.iter().map(|d| d.domain.clone()).collect(),
            vec![
                ("Sent", s.domains.iter().map(|d| d.sent).collect()),
                ("Opened", s.domains.iter().map(|d| d.unique_opens).collect()),
                ("Clicked", s.domains.iter().map(|d| d.unique_clicks).collect()),
                ("Bounced", s.domains.iter().map(|d| d.bounced).collect()),
            ],
        )
    });
    let domains = s
        .domains
        .iter()
        .map(|d| DomainRow {
            domain: d.domain.clone(),
            sent: d.sent,
            bounced: d.bounced,
            open_rate: if anonymous { "—".into() } else { percent(d.unique_opens, d.sent) },
            click_rate: if anonymous { "—".into() } else { percent(d.unique_clicks, d.sent) },
        })
        .collect();
    let links = s
        .top_links
        .iter()
        .map(|l| LinkRow { url: l.url.clone(), clicks: l.clicks, unique_clicks: l.unique_clicks })
        .collect();
    Ok(StatsView {
        name: s.name,
        status: s.status,
        tracking: s.tracking,
        headline,
        figures,
        delivery_reports,
        links,
        prefetch_opens: c.prefetch_opens,
        timeline_chart,
        funnel_chart,
        links_chart,
        domains_chart,
        domains,
        ab,
    })
}

#[component]
pub fn CampaignStatsPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").and_then(|s| s.parse().ok()).unwrap_or(CampaignId::NIL);
    let tick = RwSignal::new(0u32);
    let stats = Resource::new(move || (id(), tick.get()), |(id, _)| campaign_stats(id));
    // Refresh while the page is open (in the browser only): opens and clicks keep coming for days.
    Effect::new(move |_| {
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(10))
        {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match stats.await {
                    Ok(s) => view! { <StatsBody s=s id=id()/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn StatsBody(s: StatsView, id: CampaignId) -> impl IntoView {
    let back = format!("/campaigns/{id}");
    let export = format!("/campaigns/{id}/events.csv");
    let nothing_sent = s.figures.get(1).is_some_and(|f| f.value == 0);
    let delivery_note = (!s.delivery_reports).then_some(
        "Delivered is shown once a provider reports deliveries (Settings → Sending, a provider webhook); until then the rates are of messages sent.",
    );
    view! {
        <PageHeader title=s.name.clone() subtitle="Campaign stats"/>
        <div class="mb-4 flex flex-wrap items-center gap-4 text-sm">
            <a href=back class="text-indigo-600 hover:underline">"← Campaign"</a>
            <a href=export class="text-indigo-600 hover:underline" rel="external" download="">"Export events (CSV)"</a>
            {(s.tracking == TrackingMode::Off).then(|| view! {
                <span class="rounded bg-amber-50 px-2 py-1 text-amber-800">"Open and click tracking was off for this campaign."</span>
            })}
            {(s.tracking == TrackingMode::Anonymous).then(|| view! {
                <span class="rounded bg-slate-100 px-2 py-1 text-slate-700">"Anonymous tracking: counts without readers, so no unique figures."</span>
            })}
        </div>
        {nothing_sent.then(|| view! {
            <EmptyState title="Nothing sent yet" body="Figures appear here as soon as the first messages go out."/>
        })}
        // The three figures lead; on a phone the charts follow on the first screen and the
        // details (ten more figures) come after them, not before.
        <div class="mb-6">
        // On a phone each figure is one compact row (label and rate, the number at the end), so
        // the three take little height and a seven-digit count still fits.
        <div class="grid gap-2 sm:grid-cols-3 sm:gap-3" data-testid="stats-headline">
            {s.headline.into_iter().map(|f| view! {
                <div class="flex min-w-0 items-center justify-between gap-3 rounded-lg border border-slate-200 bg-white px-4 py-2 sm:flex-col sm:items-start sm:justify-start sm:gap-0 sm:p-4">
                    <div class="min-w-0 sm:contents">
                        <p class="text-sm font-medium text-slate-600">{f.label}</p>
                        <p class="text-sm text-slate-600 sm:order-last">{f.rate}</p>
                    </div>
                    <p class="text-2xl font-semibold tabular-nums text-slate-900 sm:mt-1 sm:text-3xl" data-testid=f.testid>{f.value}</p>
                </div>
            }).collect_view()}
        </div>
        {delivery_note.map(|n| view! { <p class="mt-2 text-xs text-slate-600" data-testid="delivery-note">{n}</p> })}
        </div>
        {s.ab.map(|results| view! { <div class="mb-6"><AbResultsCard results=results id=id/></div> })}
        // The cards keep their own space below (Card's margin): the grid adds it only across.
        <div class="grid gap-x-6 lg:grid-cols-2">
            <Card title="Opens and clicks over time">
                {match s.timeline_chart {
                    Some(o) => view! { <Chart option=o label="Opens and clicks per hour" testid="chart-timeline"/> }.into_any(),
                    None => view! { <p class="text-sm text-slate-500">"No opens or clicks yet."</p> }.into_any(),
                }}
            </Card>
            <Card title="Delivery funnel">
                <Chart option=s.funnel_chart label="Sent, delivered, opened and clicked" testid="chart-funnel"/>
            </Card>
            <Card title="Top links">
                {s.links_chart.map(|o| view! { <Chart option=o label="Clicks per link" testid="chart-links"/> })}
                {if s.links.is_empty() {
                    view! { <p class="text-sm text-slate-500">"No clicks on tracked links yet."</p> }.into_any()
                } else {
                    view! {
                        <table class="mt-2 w-full table-fixed text-left text-sm" data-testid="links-table">
                            <thead class="text-xs uppercase text-slate-500">
                                <tr><th class="w-3/5 py-1">"Link"</th><th class="text-right">"Clicks"</th><th class="text-right">"Unique"</th></tr>
                            </thead>
                            <tbody class="divide-y divide-slate-100">
                                {s.links.into_iter().map(|l| view! {
                                    <tr>
                                        <td class="truncate py-1" title=l.url.clone()>{l.url.clone()}</td>
                                        <td class="text-right tabular-nums">{l.clicks}</td>
                                        <td class="text-right tabular-nums">{l.unique_clicks}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                }}
            </Card>
            <Card title="By recipient domain">
                {match s.domains_chart {
                    Some(o) => view! { <Chart option=o label="Results by recipient domain" testid="chart-domains"/> }.into_any(),
                    None => view! { <p class="text-sm text-slate-500">"Shown once messages have gone out."</p> }.into_any(),
                }}
                <table class="mt-4 w-full text-left text-sm">
                    <thead class="text-xs uppercase text-slate-500">
                        <tr><th class="py-1">"Domain"</th><th>"Sent"</th><th>"Bounced"</th><th>"Opened"</th><th>"Clicked"</th></tr>
                    </thead>
                    <tbody class="divide-y divide-slate-100">
                        {s.domains.into_iter().map(|d| view! {
                            <tr><td class="py-1">{d.domain}</td><td>{d.sent}</td><td>{d.bounced}</td><td>{d.open_rate}</td><td>{d.click_rate}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </Card>
        </div>
        <details class="my-6 rounded-lg border border-slate-200 bg-white p-4" open data-testid="stats-details">
            <summary class="cursor-pointer select-none text-sm font-medium text-slate-700">"Details"</summary>
            <dl class="mt-3 grid grid-cols-2 gap-x-6 gap-y-2 text-sm sm:grid-cols-3 lg:grid-cols-5">
                {s.figures.into_iter().map(|f| view! {
                    <div class="flex flex-col">
                        <dt class="text-xs text-slate-600">{f.label}</dt>
                        <dd class="tabular-nums"><span class="font-semibold text-slate-900" data-testid=f.testid>{f.value}</span>
                            {(!f.rate.is_empty()).then(|| view! { <span class="ml-1 text-xs text-slate-600">{format!("· {}", f.rate)}</span> })}
                        </dd>
                    </div>
                }).collect_view()}
            </dl>
        </details>
        <p class="mb-6 text-xs text-slate-500">
            {format!("{} opens by privacy proxies are not counted above. ", s.prefetch_opens)}
            "Apple Mail Privacy Protection loads every image when a message arrives; Herald sets those opens aside where the request shows it, but other proxies cannot be told apart, so open rates are an upper bound. Clicks are the stronger signal."
        </p>
    }
}
