//! An A/B test's versions side by side — test readers, sent, unique opens and clicks with their
//! rates — with the leader or the winner marked, on the campaign page (where an author may pick
//! the winner before the window ends) and the stats page.

use leptos::prelude::*;

use crate::components::ui::{Card, ConfirmDialog, LocalTimeOf, percent_label};
use crate::error::AppError;
use herald_types::ab_test::variant_label;
use herald_types::{AbMetric, AbResults, CampaignId};

/// Chooses `variant` as the winner now: the readers held for it are queued with it.
#[server(prefix = "/rpc", endpoint = "pick_ab_winner")]
pub async fn pick_ab_winner(id: CampaignId, variant: u8) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::ab_test};
    let m = require_role(Role::Author).await?;
    ab_test::pick_winner(&m.state.db, &m.state.jobs, m.tenant, m.role, id, Some(variant)).await?;
    m.audit(herald_engine::audit::Action::WinnerPicked, id, serde_json::json!({ "winner": variant })).await;
    Ok(())
}

/// The test's results for a campaign that has one (`None` otherwise), for the pages' loaders.
#[cfg(feature = "ssr")]
pub async fn load(
    db: &herald_engine::Db,
    tenant: herald_engine::TenantId,
    c: &herald_types::Campaign,
) -> Result<Option<AbResults>, AppError> {
    if c.ab_test.is_none() {
        return Ok(None);
    }
    Ok(Some(herald_engine::campaigns::ab_test::results(db, tenant, c.id).await?))
}

/// The table; `pick` (for authors, before a winner) adds a "Send this to the rest" button per
/// version.
#[component]
pub fn AbResultsCard(
    results: AbResults,
    id: CampaignId,
    #[prop(default = None)] pick: Option<ServerAction<PickAbWinner>>,
) -> impl IntoView {
    let metric = results.metric;
    let leader = results.clear_leader();
    let decided = results.winner;
    let held = results.held;
    let rate = move |n: i64, sent: i64| percent_label(herald_types::campaign::rate(n, sent));
    let status = match (decided, results.decide_at) {
        (Some(w), _) => view! {
            {format!("Version {} won", variant_label(w as usize))}
            {results.decided_at.map(|t| view! { " on " <LocalTimeOf at=t/> })}
            {format!("; {} went to the rest of the audience.", if results.test_percent >= 100 { "nothing more" } else { "it" })}
        }
        .into_any(),
        (None, Some(at)) => view! {
            {format!("{} readers wait for the winner, chosen by {} on ", results.held, metric.label().to_lowercase())}
            <LocalTimeOf at=at/>
            {match leader {
                Some(l) => format!(". Version {} leads.", variant_label(l as usize)),
                None if results.variants.iter().all(|v| v.sent == 0) => ". Nothing is sent yet.".to_string(),
                None => ". No version leads yet.".to_string(),
            }}
        }
        .into_any(),
        (None, None) => format!("Starts with the send: {} % of the audience tests the versions.", results.test_percent).into_any(),
    };
    view! {
        <Card title="A/B test">
            <p class="mb-3 text-sm text-slate-600" data-testid="ab-status">{status}</p>
            <div class="overflow-x-auto">
                <table class="w-full text-left text-sm" data-testid="ab-results">
                    <thead class="text-xs uppercase text-slate-500">
                        <tr>
                            <th class="py-2">"Version"</th><th class="hidden sm:table-cell">"Subject"</th><th class="text-right">"Sent"</th>
                            <th class="text-right">"Opened"</th><th class="text-right">"Clicked"</th>
                            {pick.is_some().then(|| view! { <th><span class="sr-only">"Pick"</span></th> })}
                        </tr>
                    </thead>
                    <tbody class="divide-y divide-slate-100">
                        {results.variants.into_iter().map(|v| {
                            let label = variant_label(v.variant as usize);
                            let won = decided == Some(v.variant);
                            let leads = decided.is_none() && leader == Some(v.variant) && v.sent > 0;
                            let strong = |m: AbMetric| if m == metric { "font-semibold text-slate-900" } else { "text-slate-600" };
                            view! {
                                <tr data-testid=format!("ab-row-{label}") class=if won { "bg-emerald-50" } else { "" }>
                                    <td class="py-2 pr-3 font-medium whitespace-nowrap">
                                        {label.to_string()}
                                        {won.then(|| view! { <span class="badge ml-2 bg-emerald-100 text-emerald-800 ring-emerald-200" data-testid="ab-winner">"Winner"</span> })}
                                        {leads.then(|| view! { <span class="badge ml-2 bg-indigo-50 text-indigo-700 ring-indigo-200">"Leads"</span> })}
                                    </td>
                                    <td class="hidden max-w-xs truncate pr-3 text-slate-700 sm:table-cell" title=v.subject.clone()>{v.subject.clone()}</td>
                                    <td class="text-right tabular-nums">{v.sent}</td>
                                    <td class=format!("text-right tabular-nums {}", strong(AbMetric::Opens))>
                                        {format!("{} ({})", v.unique_opens, rate(v.unique_opens, v.sent))}
                                    </td>
                                    <td class=format!("text-right tabular-nums {}", strong(AbMetric::Clicks))>
                                        {format!("{} ({})", v.unique_clicks, rate(v.unique_clicks, v.sent))}
                                    </td>
                                    {pick.map(|pick| {
                                        // It cannot be undone: the held readers get this version.
                                        let ask = RwSignal::new(false);
                                        let subject = v.subject.clone();
                                        view! {
                                            <td class="pl-3 text-right">
                                                <button type="button" class="btn-secondary whitespace-nowrap text-xs"
                                                    data-testid=format!("ab-pick-{label}") disabled=move || pick.pending().get()
                                                    on:click=move |_| ask.set(true)>
                                                    {format!("Send {label} to the rest")}
                                                </button>
                                                <div class="text-left whitespace-normal">
                                                    <ConfirmDialog open=ask title=format!("Send version {label} to the rest?")
                                                        confirm_label=format!("Send {label} now")
                                                        on_confirm=move |()| { pick.dispatch(PickAbWinner { id, variant: v.variant }); }>
                                                        <p data-testid="ab-pick-summary">
                                                            {format!(
                                                                "The {held} reader{} still waiting get version {label} (“{subject}”) now, and the test ends: \
                                                                 this cannot be undone.",
                                                                if held == 1 { "" } else { "s" },
                                                            )}
                                                        </p>
                                                    </ConfirmDialog>
                                                </div>
                                            </td>
                                        }
                                    })}
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            <p class="mt-3 text-xs text-slate-500">
                "Rates are of the messages sent to each version's test readers. Opens by privacy proxies are not counted."
            </p>
        </Card>
    }
}
