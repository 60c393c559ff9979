//! The editor's send panel: send now, schedule in the author's zone, unschedule, delete, and the
//! approval request that replaces "Send" where the workspace requires one.

use leptos::prelude::*;

use super::detail::{AfterSave, CampaignDetail};
use super::editor_form::Form;
use super::fields::audience_estimate;
use crate::components::timezone;
use crate::components::ui::{ActionError, Card, ConfirmDialog, short_time};
use crate::error::AppError;
use crate::pages::audience::ListsView;
use crate::pages::campaigns::approval::ApprovalStatus;
use herald_types::{CampaignId, CampaignStatus};

#[server(prefix = "/rpc", endpoint = "send_campaign")]
pub async fn send_campaign(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::lifecycle};
    let m = require_role(Role::Author).await?;
    herald_engine::accounts::require_verified_email(&m.state.db, m.user).await?;
    if ask_for_approval(&m, id, None, "").await? {
        return Ok(());
    }
    lifecycle::send_now(&m.state.db, &m.state.jobs, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::CampaignSent, id, serde_json::json!({})).await;
    Ok(())
}

/// `at` is RFC 3339 (the browser converts the author's wall-clock time in `timezone` to UTC);
/// `timezone` is kept to show the time as the author chose it.
#[server(prefix = "/rpc", endpoint = "schedule_campaign")]
pub async fn schedule_campaign(id: CampaignId, at: String, timezone: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::lifecycle};
    let m = require_role(Role::Author).await?;
    herald_engine::accounts::require_verified_email(&m.state.db, m.user).await?;
    let at = serde_json::from_value(serde_json::Value::String(at.trim().to_string()))
        .map_err(|_| AppError::invalid("Choose a valid date and time.").respond())?;
    if ask_for_approval(&m, id, Some(at), &timezone).await? {
        return Ok(());
    }
    lifecycle::schedule(&m.state.db, m.tenant, m.role, id, at, timezone.trim()).await?;
    m.audit(
        herald_engine::audit::Action::CampaignScheduled,
        id,
        serde_json::json!({ "at": at, "timezone": timezone.trim() }),
    )
    .await;
    Ok(())
}

/// In a workspace that requires approval, an author's "Send" or "Schedule" becomes a request
/// (true); otherwise nothing happens here (false) and the send goes ahead.
#[cfg(feature = "ssr")]
pub async fn ask_for_approval(
    m: &crate::ssr::Member,
    id: CampaignId,
    at: Option<chrono::DateTime<chrono::Utc>>,
    timezone: &str,
) -> Result<bool, AppError> {
    use herald_engine::campaigns::approval;
    if m.role.can_administer() || !approval::required(&m.state.db, m.tenant).await? {
        return Ok(false);
    }
    approval::request(&m.state.db, m.tenant, m.user, m.role, id, at, timezone).await?;
    approval::mail_approvers(&m.state.db, &m.state.jobs, &m.state.base_url, m.tenant, id).await?;
    let detail = serde_json::json!({ "send_at": at, "timezone": timezone.trim() });
    m.audit(herald_engine::audit::Action::ApprovalRequested, id, detail).await;
    Ok(true)
}

#[server(prefix = "/rpc", endpoint = "unschedule_campaign")]
pub async fn unschedule_campaign(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::lifecycle};
    let m = require_role(Role::Author).await?;
    lifecycle::unschedule(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::CampaignUnscheduled, id, serde_json::json!({})).await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "delete_campaign")]
pub async fn delete_campaign(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Author).await?;
    store::delete(&m.state.db, m.tenant, m.role, id).await?;
    Ok(())
}

/// The editor's lifecycle actions, handed to the send panel together.
#[derive(Clone, Copy)]
pub struct Lifecycle {
    pub send: ServerAction<SendCampaign>,
    pub schedule: ServerAction<ScheduleCampaign>,
    pub unschedule: ServerAction<UnscheduleCampaign>,
    pub delete: ServerAction<DeleteCampaign>,
    /// Drops unsaved changes and the autosave countdown (before deleting).
    pub discard: Callback<()>,
    /// The last save failed: sending and scheduling wait until the form is fixed.
    pub save_failed: Signal<bool>,
}

#[component]
pub fn SendPanel(
    c: CampaignDetail,
    form: Form,
    lists: Resource<Result<ListsView, AppError>>,
    after_save: Callback<AfterSave>,
    actions: Lifecycle,
    refresh: RwSignal<u32>,
) -> impl IntoView {
    let Lifecycle { send, schedule, unschedule, delete, discard, save_failed } = actions;
    let asks = c.approval_needed;
    let id = StoredValue::new(c.campaign.id);
    let scheduled = c.campaign.status == CampaignStatus::Scheduled;
    let is_draft = c.campaign.status == CampaignStatus::Draft;
    let schedule_tz = c.campaign.schedule_tz.clone();
    let scheduled_at = c.campaign.scheduled_at.map(|t| t.to_rfc3339());
    let confirm_send = RwSignal::new(false);
    let confirm_delete = RwSignal::new(false);
    let schedule_error = RwSignal::new(None::<String>);
    // The schedule's form: open on a scheduled campaign (to move it), else behind "Schedule…".
    let show_schedule = RwSignal::new(scheduled);

    // The schedule, in the zone the author thinks in. Server rendering knows only UTC; once in
    // the browser, the zone list, the browser's zone and the local time arrive.
    let initial_tz = if scheduled && !schedule_tz.is_empty() { schedule_tz.clone() } else { "UTC".to_string() };
    let initial_local = scheduled_at
        .as_deref()
        .filter(|_| scheduled && initial_tz == "UTC")
        .and_then(|at| timezone::utc_to_local(at, "UTC"))
        .unwrap_or_default();
    let zone = RwSignal::new(initial_tz.clone());
    let local = RwSignal::new(initial_local.clone());
    let zones = RwSignal::new({
        let mut z = timezone::common_time_zones();
        if !z.contains(&initial_tz) {
            z.insert(0, initial_tz.clone());
        }
        z
    });
    let scheduled_at = scheduled_at.unwrap_or_default();
    let scheduled_label = RwSignal::new(format!("{} UTC", short_time(&scheduled_at)));
    {
        let scheduled_at = scheduled_at.clone();
        let tz = schedule_tz.clone();
        Effect::new(move |_| {
            let mut all = timezone::known_time_zones();
            let current = zone.get_untracked();
            if !all.contains(&current) {
                all.insert(0, current);
            }
            zones.set(all);
            if scheduled {
                if let Some(l) = timezone::utc_to_local(&scheduled_at, &tz) {
                    local.set(l);
                }
                if let Some(h) = timezone::utc_to_human(&scheduled_at, &tz) {
                    scheduled_label.set(format!("{h} ({tz})"));
                }
            } else if let Some(browser) = timezone::browser_time_zone() {
                zones.update(|z| {
                    if !z.contains(&browser) {
                        z.insert(0, browser.clone());
                    }
                });
                zone.set(browser);
            }
        });
    }

    let do_schedule = move || {
        let l = local.get_untracked();
        let tz = zone.get_untracked();
        if l.is_empty() {
            schedule_error.set(Some("Choose a date and time.".into()));
            return;
        }
        match timezone::local_to_utc(&l, &tz) {
            Some(at) => {
                schedule_error.set(None);
                after_save.run(AfterSave::Schedule { at, timezone: tz });
            }
            None => {
                schedule_error.set(Some(format!("Could not work out that time in {tz}. Choose UTC, or another zone.")))
            }
        }
    };
    let busy = move || send.pending().get() || schedule.pending().get() || unschedule.pending().get();

    view! {
        <Card title="Send">
            {c.approval.clone().map(|request| view! {
                <ApprovalStatus id=c.campaign.id request=request can_approve=c.can_approve refresh=refresh/>
            })}
            {asks.then(|| view! {
                <p class="mb-3 text-sm text-slate-600">
                    "In this workspace an owner or admin approves each send: the buttons below ask them."
                </p>
            })}
            {scheduled.then(|| view! {
                <div class="mb-4 flex items-center justify-between gap-3 rounded-md bg-blue-50 px-3 py-2 text-sm text-blue-800" data-testid="scheduled-banner">
                    <span>"Scheduled for " <strong>{move || scheduled_label.get()}</strong>". Edits are saved and go out with it."</span>
                    <button type="button" class="btn-secondary shrink-0 px-3 py-1 text-xs" disabled=busy
                        on:click=move |_| { unschedule.dispatch(UnscheduleCampaign { id: id.get_value() }); }>"Cancel schedule"</button>
                </div>
            })}
            // The three actions in one row at the top of the column, so they are in view
            // beside the content without scrolling; the schedule's form opens under them.
            <div class="flex flex-wrap items-center gap-2">
                <button type="button" class="btn-primary" disabled=busy on:click=move |_| confirm_send.set(true)>
                    {move || match (send.pending().get(), form.repeat.every.get().is_empty()) {
                        (true, _) => "Starting…",
                        (false, _) if asks => "Ask for approval to send",
                        (false, true) => "Send now",
                        (false, false) => "Start the schedule",
                    }}
                </button>
                <button type="button" class="btn-secondary" aria-controls="schedule-form"
                    aria-expanded=move || show_schedule.get().to_string()
                    on:click=move |_| show_schedule.update(|s| *s = !*s)>
                    {if scheduled { "Move the schedule" } else { "Schedule…" }}
                </button>
                {is_draft.then(|| view! {
                    <button type="button" class="ml-auto text-sm text-red-600 hover:underline" on:click=move |_| confirm_delete.set(true)>"Delete draft"</button>
                })}
            </div>
            <p class="mt-2 text-xs text-slate-500">
                {move || if form.repeat.every.get().is_empty() {
                    "Sending starts at once; you can pause or cancel while it sends."
                } else {
                    "Each slot of the schedule sends an edition; you can stop the schedule at any time."
                }}
            </p>
            {move || save_failed.get().then(|| view! {
                <p class="mt-3 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800" role="alert">
                    "The latest changes are not saved (see the message under the title). Fix that first: sending uses the saved campaign."
                </p>
            })}
            <ActionError value=send.value()/>
            <ActionError value=delete.value()/>
            <form id="schedule-form" class="mt-4 border-t border-slate-100 pt-4" class:hidden=move || !show_schedule.get()
                on:submit=move |ev| { ev.prevent_default(); do_schedule(); }>
                <p class="label">{if scheduled { "Move the schedule" } else { "Schedule it" }}</p>
                <div class="flex flex-wrap items-end gap-2">
                    <div>
                        <label for="schedule-at" class="sr-only">"Date and time"</label>
                        <input id="schedule-at" type="datetime-local" class="input" value=initial_local
                            prop:value=move || local.get()
                            on:input=move |ev| { local.set(event_target_value(&ev)); schedule_error.set(None); }/>
                    </div>
                    // At least 10 rem, so a phone wraps the time zone onto its own line
                    // instead of squeezing it past the card's edge.
                    <div class="min-w-40 flex-1">
                        <label for="schedule-tz" class="sr-only">"Time zone"</label>
                        <select id="schedule-tz" class="input" on:change=move |ev| zone.set(event_target_value(&ev))>
                            {move || zones.get().into_iter().map(|z| {
                                let selected = z == zone.get_untracked();
                                let value = z.clone();
                                view! { <option value=value.clone() selected=selected prop:selected=move || zone.get() == value>{z.replace('_', " ")}</option> }
                            }).collect_view()}
                        </select>
                    </div>
                    <button type="submit" class="btn-secondary" disabled=busy>
                        {move || if schedule.pending().get() {
                            "Scheduling…"
                        } else if asks {
                            "Ask for approval to schedule"
                        } else if scheduled {
                            "Reschedule"
                        } else {
                            "Schedule"
                        }}
                    </button>
                </div>
                <p class="mt-1 text-xs text-red-600" role="alert">{move || schedule_error.get()}</p>
                <ActionError value=schedule.value()/>
                <ActionError value=unschedule.value()/>
            </form>
        </Card>
        <ConfirmDialog open=confirm_send
            title=if asks { "Ask for approval to send this campaign?" } else { "Send this campaign now?" }
            confirm_label=if asks { "Ask for approval" } else { "Send now" }
            on_confirm=move |()| after_save.run(AfterSave::SendNow)>
            <SendSummary form=form lists=lists/>
        </ConfirmDialog>
        <ConfirmDialog open=confirm_delete title="Delete this draft?" confirm_label="Delete draft" danger=true
            on_confirm=move |()| {
                discard.run(());
                delete.dispatch(DeleteCampaign { id: id.get_value() });
            }>
            <p>"The draft and its content are removed for good."</p>
        </ConfirmDialog>
    }
}

/// What "Send now" is about to do, in the confirmation dialog: the exact number of readers
/// (the fan-out's own count, as of the last save), who they are, and for an A/B test how the
/// audience is split.
#[component]
pub fn SendSummary(form: Form, lists: Resource<Result<ListsView, AppError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| view! { <p>"Counting the readers…"</p> }>
            {move || Suspend::new(async move {
                let v = lists.await.ok()?;
                let eligible = form.audience.await.ok().map(|c| c.eligible);
                let chosen = form.list_ids.get_untracked();
                let (n, estimate) = audience_estimate(&v, &chosen);
                let names: Vec<String> = v.lists.iter().filter(|l| chosen.contains(&l.list.id.to_string())).map(|l| format!("“{}”", l.list.name)).collect();
                let subject = form.subject.get_untracked();
                let subject = if subject.trim().is_empty() { "(no subject)".to_string() } else { subject.trim().to_string() };
                let condition = form.attribute_filter.get_untracked();
                let segments: Vec<String> = form.segment_ids.with_untracked(|chosen| {
                    v.segments.iter().filter(|(id, _)| chosen.contains(&id.to_string())).map(|(_, name)| format!("“{name}”")).collect()
                });
                let readers = |k: i64| format!("{k} reader{}", if k == 1 { "" } else { "s" });
                // The exact count when the server gave one; the lists' sum (an upper bound) otherwise.
                let total = eligible.map_or_else(|| format!("up to {}", readers(estimate)), readers);
                let whom = if form.resend_of.is_some() {
                    format!("“{subject}” goes to the {total} of the original campaign who have not opened it, clicked, unsubscribed or bounced since.")
                } else if n == 0 && segments.is_empty() {
                    "No list or segment is chosen yet: choose at least one.".to_string()
                } else {
                    let mut sources = Vec::new();
                    if n > 0 {
                        sources.push(format!("confirmed on {} {}", if n == 1 { "the list" } else { "the lists" }, names.join(", ")));
                    }
                    if !segments.is_empty() {
                        sources.push(format!("in {} {}", if segments.len() == 1 { "the segment" } else { "the segments" }, segments.join(", ")));
                    }
                    let matching = if condition.trim().is_empty() { String::new() } else { format!(", matching {}", condition.trim()) };
                    format!("“{subject}” goes to {total}: those {}{matching}.", sources.join(" or "))
                };
                let split = eligible.and_then(|n| ab_split(&form, n));
                Some(view! {
                    <p data-testid="send-summary">{whom}</p>
                    {split.map(|s| view! { <p class="mt-2" data-testid="send-split">{s}</p> })}
                    <p class="mt-2">"Suppressed and unsubscribed readers are skipped. Once started, the content can no longer be edited."</p>
                })
            })}
        </Suspense>
    }
}

/// How an A/B test shares `total` readers out, in words, or `None` without a test. The counts
/// are approximate: each reader's version comes from a hash of its id.
fn ab_split(form: &Form, total: i64) -> Option<String> {
    let ab = form.ab;
    if !ab.on.get_untracked() {
        return None;
    }
    let versions = ab.versions.get_untracked().clamp(1, super::editor_form::SLOTS) + 1;
    let labels: Vec<String> = (0..versions).map(|i| herald_types::ab_test::variant_label(i).to_string()).collect();
    let labels = match labels.split_last() {
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    };
    let percent: i64 = ab.percent.get_untracked().trim().parse().unwrap_or(0).clamp(1, 100);
    let testing = (total * percent + 50) / 100;
    let each = testing / versions as i64;
    if percent >= 100 {
        return Some(format!(
            "A/B test on everyone: each reader gets one of versions {labels} at random (about {each} each); no winner is sent afterwards."
        ));
    }
    let hours = ab.window_hours.get_untracked().trim().parse::<u32>().unwrap_or(0);
    Some(format!(
        "A/B test: {percent} % of them (about {testing}) get one of versions {labels} at random, about {each} each. \
         The other {} or so wait {hours} h, then get the version with the most {}, unless you pick one before then.",
        total - testing,
        ab.metric.get_untracked().label().to_lowercase(),
    ))
}
