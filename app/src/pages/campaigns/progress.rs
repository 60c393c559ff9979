//! The campaign page once a send started: a live progress bar and counts (polled every two
//! seconds while it sends), pause, resume, cancel and retry, and the report: failures with their
//! reasons, and why readers were skipped.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, ConfirmDialog, LoadError, LocalTimeOf, human_duration};
use crate::error::AppError;
use crate::pages::campaigns::ab_results::{AbResultsCard, PickAbWinner};
use crate::pages::campaigns::detail::CampaignDetail;
use crate::pages::campaigns::list::CampaignStatusBadge;
use crate::pages::campaigns::preview::{PreviewPanel, PreviewView, ReaderPick};
use crate::pages::campaigns::resend::ResendLinks;
use herald_types::{CampaignId, CampaignStatus, Report};

/// The engine's report, and whether this member may act on it (pause, resume, cancel, retry).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportView {
    pub report: Report,
    pub can_act: bool,
    /// The A/B test's versions side by side, when the campaign has one.
    pub ab: Option<herald_types::AbResults>,
}

#[server(prefix = "/rpc", endpoint = "campaign_report")]
pub async fn campaign_report(id: CampaignId) -> Result<ReportView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::progress};
    let m = require_role(Role::Viewer).await?;
    let report = progress::report(&m.state.db, m.tenant, id).await?;
    let campaign = herald_engine::campaigns::store::get(&m.state.db, m.tenant, id).await?;
    let ab = crate::pages::campaigns::ab_results::load(&m.state.db, m.tenant, &campaign).await?;
    Ok(ReportView { report, can_act: m.role.can_author(), ab })
}

#[server(prefix = "/rpc", endpoint = "pause_campaign")]
pub async fn pause_campaign(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::lifecycle, users};
    let m = require_role(Role::Author).await?;
    let who = users::get_user(&m.state.db, m.user).await.map(|u| u.email).unwrap_or_else(|_| "a member".into());
    lifecycle::pause(&m.state.db, m.tenant, m.role, id, &format!("Paused by {who}.")).await?;
    m.audit(herald_engine::audit::Action::CampaignPaused, id, serde_json::json!({})).await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "resume_campaign")]
pub async fn resume_campaign(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::lifecycle};
    let m = require_role(Role::Author).await?;
    lifecycle::resume(&m.state.db, &m.state.jobs, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::CampaignResumed, id, serde_json::json!({})).await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "cancel_campaign")]
pub async fn cancel_campaign(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::lifecycle};
    let m = require_role(Role::Author).await?;
    lifecycle::cancel(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::CampaignCancelled, id, serde_json::json!({})).await;
    Ok(())
}

/// Puts the failed messages (hard bounces aside) back in the queue; returns how many.
#[server(prefix = "/rpc", endpoint = "retry_failed_sends")]
pub async fn retry_failed_sends(id: CampaignId) -> Result<u64, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::lifecycle};
    let m = require_role(Role::Author).await?;
    Ok(lifecycle::retry_failed(&m.state.db, &m.state.jobs, m.tenant, m.role, id).await?)
}

/// Why readers got nothing, in words.
fn skip_label(reason: &str) -> String {
    match reason {
        "suppressed" => "On the suppression list (bounced, complained or blocked)".into(),
        "frequency cap" => "Over the frequency cap (mailed recently)".into(),
        "unsubscribed" => "Unsubscribed before their message went out".into(),
        "reader unsubscribed" => "Left everything".into(),
        "reader blocklisted" => "Blocklisted".into(),
        "expired" => "Waited longer than the maximum queue age".into(),
        "cancelled" => "Not sent: the campaign was cancelled".into(),
        other => {
            let mut s = other.replace('_', " ");
            if let Some(first) = s.get(0..1) {
                s.replace_range(0..1, &first.to_uppercase());
            }
            s
        }
    }
}

#[component]
pub fn CampaignProgress(
    c: CampaignDetail,
    report: Resource<Result<ReportView, AppError>>,
    tick: RwSignal<u32>,
    /// The mail as it went out, rendered as a sample reader or a chosen one.
    preview: Resource<Result<PreviewView, AppError>>,
    reader: RwSignal<Option<ReaderPick>>,
) -> impl IntoView {
    let id = StoredValue::new(c.campaign.id);
    let pause = ServerAction::<PauseCampaign>::new();
    let resume = ServerAction::<ResumeCampaign>::new();
    let cancel = ServerAction::<CancelCampaign>::new();
    let retry = ServerAction::<RetryFailedSends>::new();
    let pick = ServerAction::<PickAbWinner>::new();
    let confirm_cancel = RwSignal::new(false);
    let confirm_retry = RwSignal::new(false);
    // The report is the page's resource (the hydration rule in `crate::pages`): each finished
    // action loads it again.
    Effect::new(move |previous: Option<[usize; 5]>| {
        let versions = [
            pause.version().get(),
            resume.version().get(),
            cancel.version().get(),
            retry.version().get(),
            pick.version().get(),
        ];
        if previous.is_some_and(|p| p != versions) {
            tick.update(|t| *t += 1);
        }
        versions
    });
    // Poll while the send moves (in the browser only), like the import page. Whether it moves
    // comes from the view's own rendering of the report: the timer reading the resource itself,
    // outside any <Suspense/>, made Leptos warn in the console every two seconds.
    let live = RwSignal::new(false);
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(
            move || {
                if live.get_untracked() {
                    tick.update(|t| *t += 1);
                }
            },
            std::time::Duration::from_millis(2000),
        ) {
            on_cleanup(move || handle.clear());
        }
    });
    let buttons = Buttons { pause, resume, pick, confirm_cancel, confirm_retry, id };
    view! {
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || {
                let c = c.clone();
                Suspend::new(async move {
                let report = report.await;
                live.set(report.as_ref().is_ok_and(|r| r.report.progress.live()));
                match report {
                    Ok(r) => view! { <ProgressBody c=c r=r buttons=buttons/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}}
        </Transition>
        // Outside the polled view: the preview renders once, not on every tick.
        <div class="mt-6 max-w-3xl" data-testid="sent-mail">
            <PreviewPanel preview=preview reader=reader/>
        </div>
        <ActionError value=pause.value()/>
        <ActionError value=resume.value()/>
        <ActionError value=cancel.value()/>
        <ActionError value=retry.value()/>
        <ActionError value=pick.value()/>
        {move || retry.value().get().and_then(|r| r.ok()).map(|n| view! {
            <p class="mt-3 rounded-md bg-emerald-50 px-3 py-2 text-sm text-emerald-800" role="status">
                {if n == 0 { "Nothing to retry: hard bounces are not retried.".to_string() } else { format!("{n} failed message{} queued again.", if n == 1 { "" } else { "s" }) }}
            </p>
        })}
        <ConfirmDialog open=confirm_cancel title="Cancel this send?" confirm_label="Cancel the send" danger=true
            on_confirm=move |()| { cancel.dispatch(CancelCampaign { id: id.get_value() }); }>
            <p>"Messages still queued will not be sent. Messages already handed to the mail server finish. This cannot be undone."</p>
        </ConfirmDialog>
        <ConfirmDialog open=confirm_retry title="Retry the failed messages?" confirm_label="Retry failed"
            on_confirm=move |()| { retry.dispatch(RetryFailedSends { id: id.get_value() }); }>
            <p>"Failed messages go back in the queue and are sent again. Hard bounces are not retried: those addresses are suppressed."</p>
        </ConfirmDialog>
    }
}

/// The controls, created once outside the polled view so a tick does not reset them.
#[derive(Clone, Copy)]
struct Buttons {
    pause: ServerAction<PauseCampaign>,
    resume: ServerAction<ResumeCampaign>,
    pick: ServerAction<PickAbWinner>,
    confirm_cancel: RwSignal<bool>,
    confirm_retry: RwSignal<bool>,
    id: StoredValue<CampaignId>,
}

#[component]
fn ProgressBody(c: CampaignDetail, r: ReportView, buttons: Buttons) -> impl IntoView {
    let Buttons { pause, resume, pick, confirm_cancel, confirm_retry, id } = buttons;
    let p = r.report.progress.clone();
    let status = p.status;
    let sending = status == CampaignStatus::Sending;
    let paused = status == CampaignStatus::Paused;
    let can_retry = r.can_act
        && p.failed > p.hard_bounces
        && matches!(status, CampaignStatus::Sent | CampaignStatus::Sending | CampaignStatus::Paused);
    let bar_class = match status {
        CampaignStatus::Sent => "h-4 rounded-full bg-emerald-500 transition-all duration-500",
        CampaignStatus::Paused => "h-4 rounded-full bg-orange-400 transition-all duration-500",
        CampaignStatus::Cancelled => "h-4 rounded-full bg-slate-400 transition-all duration-500",
        _ => "h-4 rounded-full bg-indigo-500 transition-all duration-500",
    };
    let total = p.total();
    let finished = p.finished();
    let progress_line = if !p.fanout_done && sending {
        format!("Preparing the audience… {total} queued so far")
    } else {
        format!("{finished} of {total} done")
    };
    let rate_line = match (sending, p.eta_seconds) {
        (true, Some(eta)) => format!("{:.1} messages/s · about {} left", p.rate, human_duration(eta)),
        (true, None) => format!("{:.1} messages/s", p.rate),
        _ => String::new(),
    };
    let counts = [
        ("Queued", p.queued, "count-queued", "Waiting their turn"),
        ("Held", p.held, "count-held", "Waiting for the A/B test's winner"),
        ("Sending", p.sending, "count-sending", "Handed to a connection right now"),
        ("Sent", p.sent, "count-sent", "Accepted by the mail server"),
        ("Failed", p.failed, "count-failed", "Refused or undeliverable"),
        ("Skipped", p.skipped, "count-skipped", "Suppressed, unsubscribed or over the frequency cap"),
        ("Expired", p.expired, "count-expired", "Waited longer than the maximum queue age"),
        ("Cancelled", p.cancelled, "count-cancelled", "Not sent because the campaign was cancelled"),
    ];
    let show_report = status.is_finished() || !r.report.failures.is_empty() || !r.report.skipped.is_empty();
    let subject = c.campaign.subject.clone();
    view! {
        <div class="mb-6">
            <h1 class="truncate text-2xl font-semibold text-slate-900" title=c.campaign.name.clone()>{c.campaign.name.clone()}</h1>
            <div class="mt-1 flex flex-wrap items-center gap-3 text-sm text-slate-500">
                <span data-testid="campaign-status"><CampaignStatusBadge status=status/></span>
                <span class="min-w-0 truncate" title=subject.clone()>"Subject: " {subject.clone()}</span>
                {p.started_at.map(|t| view! { <span>"Started " <LocalTimeOf at=t/></span> })}
                {p.finished_at.map(|t| view! { <span>"Finished " <LocalTimeOf at=t/></span> })}
                <a href=format!("/campaigns/{}/stats", id.get_value()) class="font-medium text-indigo-600 hover:underline"
                    data-testid="stats-link">"Opens, clicks and bounces →"</a>
            </div>
        </div>
        <ResendLinks c=c.campaign.clone() can_act=r.can_act/>
        {paused.then(|| view! {
            <div class="mb-6 flex items-start justify-between gap-4 rounded-md border border-orange-200 bg-orange-50 px-4 py-3 text-sm text-orange-800" role="alert" data-testid="pause-reason">
                <div>
                    <p class="font-medium">"Sending is paused"</p>
                    <p class="mt-1">{p.pause_reason.clone().unwrap_or_else(|| "No reason was given.".into())}</p>
                </div>
                {r.can_act.then(|| view! {
                    <button type="button" class="btn-primary shrink-0" disabled=move || resume.pending().get()
                        on:click=move |_| { resume.dispatch(ResumeCampaign { id: id.get_value() }); }>"Resume"</button>
                })}
            </div>
        })}
        <Card>
            <div class="mb-2 flex items-end justify-between">
                <span class="text-sm text-slate-600" data-testid="progress-line">{progress_line}</span>
                <span class="text-3xl font-semibold tabular-nums text-slate-900" data-testid="send-percent">{format!("{}%", p.percent())}</span>
            </div>
            <div class="h-4 w-full overflow-hidden rounded-full bg-slate-100" role="progressbar" aria-label="Send progress"
                aria-valuemin="0" aria-valuemax="100" aria-valuenow=p.percent()>
                <div class=bar_class style=format!("width: {}%", p.percent())></div>
            </div>
            <p class="mt-2 h-4 text-xs text-slate-500" data-testid="send-rate">{rate_line}</p>
            <dl class="mt-6 grid grid-cols-4 gap-4 text-center text-sm lg:grid-cols-8">
                {counts.into_iter().map(|(label, n, testid, title)| view! {
                    <div class="rounded-lg bg-slate-50 px-2 py-3" title=title>
                        <dt class="text-xs text-slate-500">{label}</dt>
                        <dd class="text-lg font-semibold tabular-nums" data-testid=testid>{n}</dd>
                    </div>
                }).collect_view()}
            </dl>
            {(p.hard_bounces > 0 || p.ambiguous > 0).then(|| view! {
                <p class="mt-3 text-xs text-slate-500">
                    {format!("{} hard bounce{} (now suppressed)", p.hard_bounces, if p.hard_bounces == 1 { "" } else { "s" })}
                    {(p.ambiguous > 0).then(|| format!(" · {} message{} re-sent after a connection dropped mid-delivery", p.ambiguous, if p.ambiguous == 1 { "" } else { "s" }))}
                </p>
            })}
            {r.can_act.then(|| view! {
                <div class="mt-6 flex flex-wrap gap-3 border-t border-slate-100 pt-4">
                    {sending.then(|| view! {
                        <button type="button" class="btn-secondary" disabled=move || pause.pending().get()
                            on:click=move |_| { pause.dispatch(PauseCampaign { id: id.get_value() }); }>"Pause"</button>
                    })}
                    {paused.then(|| view! {
                        <button type="button" class="btn-secondary" disabled=move || resume.pending().get()
                            on:click=move |_| { resume.dispatch(ResumeCampaign { id: id.get_value() }); }>"Resume"</button>
                    })}
                    {(sending || paused).then(|| view! {
                        <button type="button" class="btn-secondary text-red-600" on:click=move |_| confirm_cancel.set(true)>"Cancel send"</button>
                    })}
                    {can_retry.then(|| view! {
                        <button type="button" class="btn-secondary" on:click=move |_| confirm_retry.set(true)>"Retry failed"</button>
                    })}
                </div>
            })}
        </Card>
        {r.ab.clone().map(|results| {
            // Until a winner is chosen, an author may choose one (the send must have started).
            let pick = (r.can_act && results.winner.is_none() && (sending || paused)).then_some(pick);
            view! { <AbResultsCard results=results id=id.get_value() pick=pick/> }
        })}
        {show_report.then(|| view! { <ReportTables r=r.clone()/> })}
    }
}

#[component]
fn ReportTables(r: ReportView) -> impl IntoView {
    let failures = r.report.failures;
    let skips = r.report.skipped;
    view! {
        <Card title="Report">
            <h3 class="mb-2 text-sm font-medium text-slate-700">"Failures"</h3>
            {if failures.is_empty() {
                view! { <p class="text-sm text-slate-500" data-testid="no-failures">"No failures: every message that went out was accepted."</p> }.into_any()
            } else {
                view! {
                    <div class="overflow-x-auto">
                    <table class="w-full text-left text-sm" data-testid="failures-table">
                        <thead class="text-xs uppercase text-slate-500">
                            <tr><th class="py-2">"Reader"</th><th>"Reason"</th><th class="text-right">"Attempts"</th><th class="pl-4">"When"</th></tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100">
                            {failures.into_iter().map(|f| view! {
                                <tr>
                                    <td class="py-2 pr-4 align-top">
                                        <div class="font-medium">{f.email}</div>
                                        {f.hard_bounce.then(|| view! { <span class="badge bg-red-50 text-red-700 ring-red-200">"Hard bounce"</span> })}
                                    </td>
                                    <td class="py-2 align-top font-mono text-xs break-all text-slate-600">{f.reason.filter(|r| !r.is_empty()).unwrap_or_else(|| "—".to_string())}</td>
                                    <td class="py-2 text-right align-top tabular-nums">{f.attempts}</td>
                                    <td class="py-2 pl-4 align-top text-slate-500 whitespace-nowrap"><LocalTimeOf at=f.updated_at/></td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                    </div>
                }.into_any()
            }}
            <h3 class="mt-6 mb-2 text-sm font-medium text-slate-700">"Not sent"</h3>
            {if skips.is_empty() {
                view! { <p class="text-sm text-slate-500">"Nobody was skipped."</p> }.into_any()
            } else {
                view! {
                    <ul class="divide-y divide-slate-100 text-sm" data-testid="skip-reasons">
                        {skips.into_iter().map(|s| view! {
                            <li class="flex justify-between py-2">
                                <span>{skip_label(&s.reason)}</span>
                                <span class="font-medium tabular-nums">{s.count}</span>
                            </li>
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </Card>
    }
}
