//! `/campaigns/:id`: the campaign editor, for drafts and scheduled campaigns. It saves by itself
//! (a second after the last change, and when a field loses focus), renders a live preview after
//! each save, sends tests, sends now or schedules. Once a campaign started sending, the same
//! address shows its progress and report instead (`progress`). The sections live beside it:
//! `fields` (the form), `preview` (preview and test send), `send_panel` (send, schedule, delete).

use std::time::Duration;

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map, use_query_map};
use serde::{Deserialize, Serialize};

use super::detail::{AfterSave, CampaignDetail};
use super::editor_form::{AbForm, Form};
use super::editor_tabs::{EditorTab, EditorTabBar};
use super::fields::{AudienceFields, ContentFields, MessageFields, SenderFields};
use super::preview::{PreviewPanel, PreviewView, ReaderPick, TestSendCampaign, TestSendPanel, preview_campaign};
use super::send_panel::{DeleteCampaign, Lifecycle, ScheduleCampaign, SendCampaign, SendPanel, UnscheduleCampaign};
use crate::components::timezone;
use crate::components::ui::{LoadError, short_time};
use crate::error::AppError;
use crate::pages::audience::{ListsView, list_lists};
use crate::pages::campaigns::ab_test::AbTestFields;
use crate::pages::campaigns::list::CampaignStatusBadge;
use crate::pages::campaigns::progress::{CampaignProgress, ReportView, campaign_report};
use crate::pages::campaigns::repeat::{RecurringCampaign, RecurringView, RepeatFields, RepeatForm, load_recurring};
use crate::pages::campaigns::resend::ResendLinks;
use crate::pages::settings::{IdentitiesView, list_identities};
use herald_types::{CampaignId, CampaignInput, CampaignStatus, FieldError};

/// A save either stores the draft (`updated_at`) or says what to fix, field by field (fields
/// named as in [`CampaignInput`]; none for what belongs to no one field).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SaveOutcome {
    pub errors: Vec<FieldError>,
    pub updated_at: Option<String>,
    /// As [`CampaignDetail::warnings`], for what was saved.
    pub warnings: Vec<FieldError>,
    /// The sender as saved (`(name, email)`): an empty one takes the workspace's default, which
    /// the form then shows.
    pub sender: Option<(String, String)>,
}

/// What renders or sends wrongly without being an error, by field: merge tags nobody provides
/// (`herald_engine::sending::message::unknown_merge_tags`, found off the async threads: a body
/// can be a megabyte) and a From address whose domain is not verified yet.
#[cfg(feature = "ssr")]
async fn campaign_warnings(m: &crate::ssr::Member, c: &herald_types::Campaign) -> Result<Vec<FieldError>, AppError> {
    let (subject, preheader, body, format) = (c.subject.clone(), c.preheader.clone(), c.body.clone(), c.body_format);
    let has_feed = (c.recurrence.is_some() || c.parent_id.is_some()) && c.feed != herald_types::FeedSource::None;
    let field_keys: Vec<String> =
        herald_engine::audience::fields::list(&m.state.db, m.tenant).await?.into_iter().map(|f| f.key).collect();
    let mut warnings = tokio::task::spawn_blocking(move || {
        use herald_engine::sending::message::{body_template, unknown_merge_tags};
        // A block document's tags are read from its HTML template (its JSON escapes quotes).
        let body = body_template(format, &body).map(|b| b.into_owned()).unwrap_or_default();
        unknown_merge_tags(&subject, &preheader, &body, has_feed, &field_keys)
    })
    .await
    .unwrap_or_default();
    let own_identity = c.identity_id.is_some();
    if let Some(why) =
        herald_engine::sending::domains::sender_warning(&m.state.db, m.tenant, own_identity, &c.from_email).await?
    {
        warnings.push(FieldError { field: Some("from_email".into()), message: why });
    }
    Ok(warnings)
}

#[server(prefix = "/rpc", endpoint = "get_campaign")]
pub async fn get_campaign(id: CampaignId) -> Result<CampaignDetail, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store, workspaces};
    let m = require_role(Role::Viewer).await?;
    let campaign = store::get(&m.state.db, m.tenant, id).await?;
    let ws = workspaces::get(&m.state.db, m.tenant).await?;
    let approval_needed =
        !m.role.can_administer() && herald_engine::campaigns::approval::required(&m.state.db, m.tenant).await?;
    let approval = herald_engine::campaigns::approval::latest(&m.state.db, m.tenant, id).await?;
    let warnings = campaign_warnings(&m, &campaign).await?;
    Ok(CampaignDetail {
        warnings,
        campaign,
        can_edit: m.role.can_author(),
        postal_address_missing: !ws.can_send_campaigns(),
        approval_needed,
        can_approve: m.role.can_administer(),
        approval,
    })
}

/// Where a campaign is now: what an open editor polls while the campaign can start without it
/// (scheduled), so the page follows it to sending and sent.
#[server(prefix = "/rpc", endpoint = "campaign_state")]
pub async fn campaign_state(id: CampaignId) -> Result<CampaignStatus, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Viewer).await?;
    Ok(store::get(&m.state.db, m.tenant, id).await?.status)
}

/// Autosave. Field problems come back as `errors` (nothing is saved then); a campaign that
/// started sending in the meantime answers 409.
#[server(prefix = "/rpc", endpoint = "save_campaign")]
pub async fn save_campaign(id: CampaignId, input: CampaignInput) -> Result<SaveOutcome, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Author).await?;
    match store::update(&m.state.db, m.tenant, m.role, id, &input).await {
        Ok(c) => Ok(SaveOutcome {
            errors: Vec::new(),
            updated_at: Some(c.updated_at.to_rfc3339()),
            warnings: campaign_warnings(&m, &c).await?,
            sender: Some((c.from_name, c.from_email)),
        }),
        Err(herald_engine::Error::Invalid(e)) => {
            Ok(SaveOutcome { errors: e.errors, updated_at: None, warnings: Vec::new(), sender: None })
        }
        Err(e) => Err(e.into()),
    }
}

/// Who a send started now would reach (after suppressions, unconfirmed readers, the cap).
#[server(prefix = "/rpc", endpoint = "campaign_audience")]
pub async fn campaign_audience(id: CampaignId) -> Result<herald_types::AudienceCount, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    let m = require_role(Role::Viewer).await?;
    Ok(herald_engine::campaigns::fanout::reach(&m.state.db, m.tenant, id).await?)
}

#[component]
pub fn CampaignPage() -> impl IntoView {
    let params = use_params_map();
    // A malformed id becomes one that names nothing: the server answers "not found".
    let id = move || params.with(|p| p.get("id")).and_then(|s| s.parse().ok()).unwrap_or(CampaignId::NIL);
    // Bumped when the campaign changes state (sent, scheduled, …): the page reloads it and
    // shows the editor or the progress view accordingly.
    let refresh = RwSignal::new(0u32);
    let campaign = Resource::new(move || (id(), refresh.get()), |(id, _)| get_campaign(id));
    let res = CampaignResources::new(Signal::derive(id), refresh);
    // The editor's view, here rather than in the editor: the editor is made anew when the
    // campaign reloads (after a schedule, say), and the view chosen must survive that.
    let tab = RwSignal::new(EditorTab::from_query(use_query_map().with_untracked(|q| q.get("tab")).as_deref()));
    view! {
        <div class="mb-4">
            <a href="/campaigns" class="text-sm text-slate-500 hover:text-slate-800">"← Campaigns"</a>
        </div>
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match campaign.await {
                    Ok(c) if c.campaign.status.is_editable() => view! { <Editor c=c refresh=refresh res=res tab=tab/> }.into_any(),
                    Ok(c) if c.campaign.status == CampaignStatus::Recurring => view! {
                        <RecurringCampaign id=c.campaign.id name=c.campaign.name refresh=refresh data=res.recurring/>
                    }.into_any(),
                    Ok(c) => view! {
                        <CampaignProgress c=c report=res.report tick=res.report_tick preview=res.preview reader=res.preview_as/>
                    }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// Every resource the campaign page's views read, made once at the top of [`CampaignPage`] and
/// handed down (the hydration rule in `crate::pages`). The editor, the progress view and the
/// recurring view each read their own; all load, whatever the campaign's state, because a
/// resource cannot be made only when a state that needs it has been loaded.
#[derive(Clone, Copy)]
pub struct CampaignResources {
    lists: Resource<Result<ListsView, AppError>>,
    identities: Resource<Result<IdentitiesView, AppError>>,
    /// Bumped by each save of the editor: the preview renders again.
    saved_version: RwSignal<u32>,
    /// The reader the preview is rendered for (a sample reader when `None`).
    pub preview_as: RwSignal<Option<ReaderPick>>,
    pub preview: Resource<Result<PreviewView, AppError>>,
    /// Bumped by the progress view's polling and after its actions.
    pub report_tick: RwSignal<u32>,
    pub report: Resource<Result<ReportView, AppError>>,
    /// Who a send would reach, recounted after each save.
    audience: Resource<Result<herald_types::AudienceCount, AppError>>,
    pub recurring: Resource<Result<RecurringView, AppError>>,
}

impl CampaignResources {
    fn new(id: Signal<CampaignId>, refresh: RwSignal<u32>) -> Self {
        let saved_version = RwSignal::new(0u32);
        let preview_as = RwSignal::new(None::<ReaderPick>);
        let report_tick = RwSignal::new(0u32);
        Self {
            lists: Resource::new(|| (), |_| list_lists()),
            identities: Resource::new(|| (), |_| list_identities()),
            saved_version,
            preview_as,
            preview: Resource::new(
                move || (id.get(), saved_version.get(), preview_as.with(|r| r.as_ref().map(|r| r.id))),
                |(id, _, reader)| preview_campaign(id, reader),
            ),
            report_tick,
            audience: Resource::new(move || (id.get(), saved_version.get()), |(id, _)| campaign_audience(id)),
            report: Resource::new(move || (id.get(), refresh.get(), report_tick.get()), |(id, ..)| campaign_report(id)),
            recurring: Resource::new(move || (id.get(), refresh.get()), |(id, _)| load_recurring(id)),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SaveStatus {
    /// Nothing changed since the page loaded.
    Idle,
    Unsaved,
    Saving,
    /// Saved at this time of day (browser clock).
    Saved(String),
    Failed(String),
}

#[component]
fn Editor(
    c: CampaignDetail,
    refresh: RwSignal<u32>,
    res: CampaignResources,
    tab: RwSignal<EditorTab>,
) -> impl IntoView {
    let id = StoredValue::new(c.campaign.id);
    let can_edit = c.can_edit;
    let dirty = RwSignal::new(false);
    let status = RwSignal::new(SaveStatus::Idle);
    let saved_version = res.saved_version;
    let timer = StoredValue::new(None::<TimeoutHandle>);
    let pending_op = RwSignal::new(None::<AfterSave>);

    let save = Action::new(move |input: &CampaignInput| {
        let input = input.clone();
        let id = id.get_value();
        async move { save_campaign(id, input).await }
    });
    let test = ServerAction::<TestSendCampaign>::new();
    let send = ServerAction::<SendCampaign>::new();
    let schedule = ServerAction::<ScheduleCampaign>::new();
    let unschedule = ServerAction::<UnscheduleCampaign>::new();
    let delete = ServerAction::<DeleteCampaign>::new();

    let errors = RwSignal::new(Vec::<FieldError>::new());
    let warnings = RwSignal::new(c.warnings.clone());
    // The campaign started sending (or changed state) under an edit that could no longer be
    // saved: the form keeps the text, says so, and the author moves on when ready.
    let overtaken = RwSignal::new(false);
    let form_cell = StoredValue::new(None::<Form>);
    let flush = Callback::new(move |()| {
        if let Some(handle) = timer.get_value() {
            handle.clear();
            timer.set_value(None);
        }
        if !can_edit || !dirty.get_untracked() || save.pending().get_untracked() {
            // A save in flight saves again when it returns (see below).
            return;
        }
        let Some(form) = form_cell.get_value() else { return };
        dirty.set(false);
        match form.input() {
            Ok(input) => {
                status.set(SaveStatus::Saving);
                save.dispatch(input);
            }
            // Caught in the browser: nothing to send until it is fixed.
            Err(invalid) => {
                errors.set(invalid.errors);
                status.set(SaveStatus::Failed("Not saved: fix the fields marked in red.".into()));
                pending_op.set(None);
            }
        }
    });
    let changed = Callback::new(move |()| {
        if !can_edit || overtaken.get_untracked() {
            return;
        }
        dirty.set(true);
        status.set(SaveStatus::Unsaved);
        if let Some(handle) = timer.get_value() {
            handle.clear();
        }
        let handle = set_timeout_with_handle(move || flush.run(()), Duration::from_millis(1000)).ok();
        timer.set_value(handle);
    });
    let stored = &c.campaign;
    let form = Form {
        name: RwSignal::new(stored.name.clone()),
        subject: RwSignal::new(stored.subject.clone()),
        preheader: RwSignal::new(stored.preheader.clone()),
        identity_id: RwSignal::new(stored.identity_id.map(|i| i.to_string()).unwrap_or_default()),
        from_name: RwSignal::new(stored.from_name.clone()),
        from_email: RwSignal::new(stored.from_email.clone()),
        reply_to: RwSignal::new(stored.reply_to.clone()),
        list_ids: RwSignal::new(stored.list_ids.iter().map(ToString::to_string).collect()),
        attribute_filter: RwSignal::new(stored.attribute_filter.clone()),
        segment_ids: RwSignal::new(stored.segment_ids.iter().map(ToString::to_string).collect()),
        exclude_segment_id: RwSignal::new(stored.exclude_segment_id.map(|s| s.to_string()).unwrap_or_default()),
        audience: res.audience,
        body_format: RwSignal::new(stored.body_format.as_str().to_string()),
        body: RwSignal::new(stored.body.clone()),
        spread_on: RwSignal::new(stored.spread_hours.is_some()),
        spread_hours: RwSignal::new(stored.spread_hours.map_or_else(|| "24".to_string(), |h| h.to_string())),
        tracking: RwSignal::new(stored.tracking.as_str().to_string()),
        // UTC until the author picks a zone: the server and the browser must render the same.
        repeat: RepeatForm::new(stored, "UTC"),
        ab: AbForm::new(stored),
        resend_of: stored.resend_of,
        errors,
        warnings,
        render_error: RwSignal::new(None),
        changed,
    };
    form_cell.set_value(Some(form));
    // Leaving the editor inside the app: changes still waiting for the countdown are saved
    // on the way out (the signals are still alive while cleanups run).
    on_cleanup(move || {
        if let Some(Some(handle)) = timer.try_get_value() {
            handle.clear();
        }
        if dirty.try_get_untracked() == Some(true)
            && let Some(Some(form)) = form_cell.try_get_value()
        {
            let id = id.get_value();
            if let Ok(input) = form.input() {
                leptos::task::spawn_local(async move {
                    let _ = save_campaign(id, input).await;
                });
            }
        }
    });
    // Closing the tab or reloading with unsaved changes: let the browser ask first.
    Effect::new(move |_| {
        let handle = window_event_listener(leptos::ev::beforeunload, move |ev| {
            let unsaved = dirty.try_get_untracked() == Some(true) || save.pending().try_get_untracked() == Some(true);
            if unsaved {
                ev.prevent_default();
            }
        });
        on_cleanup(move || handle.remove());
    });

    let run_op = move |op: AfterSave| {
        let id = id.get_value();
        match op {
            AfterSave::TestSend(addresses) => {
                test.dispatch(TestSendCampaign { id, addresses });
            }
            AfterSave::SendNow => {
                send.dispatch(SendCampaign { id });
            }
            AfterSave::Schedule { at, timezone } => {
                schedule.dispatch(ScheduleCampaign { id, at, timezone });
            }
        }
    };
    // Runs `op` once the form is saved as shown: at once when it is, else after the save.
    let after_save = Callback::new(move |op: AfterSave| {
        let failed = matches!(status.get_untracked(), SaveStatus::Failed(_));
        if !can_edit || (!dirty.get_untracked() && !save.pending().get_untracked() && !failed) {
            run_op(op);
        } else {
            pending_op.set(Some(op));
            dirty.set(true);
            flush.run(());
        }
    });

    // A save came back.
    let after_save_result = move |result: Result<SaveOutcome, AppError>| {
        match result {
            Ok(out) if out.errors.is_empty() => {
                errors.set(Vec::new());
                warnings.set(out.warnings);
                // An empty sender took the workspace's default: show it (only into empty fields,
                // so nothing typed since is overwritten).
                if let (Some((name, email)), Some(form)) = (out.sender, form_cell.get_value()) {
                    if form.from_email.with_untracked(String::is_empty) && !email.is_empty() {
                        form.from_email.set(email);
                    }
                    if form.from_name.with_untracked(String::is_empty) && !name.is_empty() {
                        form.from_name.set(name);
                    }
                }
                let at = timezone::now_hm();
                let at = if at.is_empty() { out.updated_at.as_deref().map(short_time).unwrap_or_default() } else { at };
                status.set(SaveStatus::Saved(at));
                saved_version.update(|v| *v += 1);
            }
            Ok(out) => {
                let general = out.errors.iter().find(|e| e.field.is_none()).map(|e| e.message.clone());
                errors.set(out.errors);
                status.set(SaveStatus::Failed(
                    general.unwrap_or_else(|| "Not saved: fix the fields marked in red.".into()),
                ));
                pending_op.set(None);
            }
            Err(AppError::Conflict(_)) => {
                // It started sending (a schedule came due) under this edit: keep the text in the
                // form and say so, rather than swap in the progress view and lose it.
                overtaken.set(true);
                pending_op.set(None);
                status.set(SaveStatus::Failed("Not saved: this campaign is no longer a draft.".into()));
                return;
            }
            Err(e) => {
                status.set(SaveStatus::Failed(format!("Not saved: {e}")));
                // Keep the changes pending: the next edit or blur tries again.
                dirty.set(true);
                pending_op.set(None);
                return;
            }
        }
        if dirty.get_untracked() {
            flush.run(());
        } else if matches!(status.get_untracked(), SaveStatus::Saved(_))
            && let Some(op) = pending_op.get_untracked()
        {
            pending_op.set(None);
            run_op(op);
        }
    };
    Effect::new(move |_| {
        let Some(result) = save.value().get() else { return };
        untrack(move || after_save_result(result));
    });
    // Sent or scheduled: reload, which shows the progress view or the schedule.
    Effect::new(move |_| {
        let done = matches!(send.value().get(), Some(Ok(())))
            || matches!(schedule.value().get(), Some(Ok(())))
            || matches!(unschedule.value().get(), Some(Ok(())));
        if done {
            refresh.update(|r| *r += 1);
        }
    });
    // A scheduled campaign starts without this page: look every 2 s (in the browser) and follow
    // it, unless an edit is waiting to be saved, which is then kept and explained instead.
    if c.campaign.status == CampaignStatus::Scheduled {
        let loaded = c.campaign.status;
        Effect::new(move |_| {
            let look = move || {
                if overtaken.get_untracked() {
                    return;
                }
                leptos::task::spawn_local(async move {
                    let Ok(now) = campaign_state(id.get_value()).await else { return };
                    if now == loaded || overtaken.try_get_untracked() != Some(false) {
                        return;
                    }
                    // The page may have been left meanwhile: every read and write is a `try_`.
                    let unsaved = dirty.try_get_untracked() == Some(true)
                        || save.pending().try_get_untracked() == Some(true)
                        || matches!(status.try_get_untracked(), Some(SaveStatus::Failed(_)));
                    if unsaved && !now.is_editable() {
                        overtaken.try_set(true);
                    } else {
                        refresh.try_update(|r| *r += 1);
                    }
                });
            };
            if let Ok(handle) = set_interval_with_handle(look, Duration::from_secs(2)) {
                on_cleanup(move || handle.clear());
            }
        });
    }
    let navigate = use_navigate();
    Effect::new(move |_| {
        if matches!(delete.value().get(), Some(Ok(()))) {
            navigate("/campaigns", Default::default());
        }
    });

    let lifecycle = Lifecycle {
        send,
        schedule,
        unschedule,
        delete,
        discard: Callback::new(move |()| {
            if let Some(handle) = timer.get_value() {
                handle.clear();
                timer.set_value(None);
            }
            dirty.set(false);
        }),
        save_failed: Signal::derive(move || matches!(status.get(), SaveStatus::Failed(_))),
    };
    let CampaignResources { lists, identities, preview, preview_as, .. } = res;
    let status_text = move || match status.get() {
        SaveStatus::Idle => {
            if can_edit {
                "Changes save automatically".to_string()
            } else {
                "Read only".to_string()
            }
        }
        SaveStatus::Unsaved => "Unsaved changes".into(),
        SaveStatus::Saving => "Saving…".into(),
        SaveStatus::Saved(at) => {
            if at.is_empty() {
                "Saved".into()
            } else {
                format!("Saved at {at}")
            }
        }
        SaveStatus::Failed(m) => m,
    };
    let status_class = move || match status.get() {
        SaveStatus::Failed(_) => "text-sm text-red-600",
        SaveStatus::Saved(_) => "text-sm text-emerald-600",
        _ => "text-sm text-slate-500",
    };
    let title = move || {
        let n = form.name.get();
        if n.trim().is_empty() { "Untitled campaign".to_string() } else { n }
    };
    view! {
        <div class="mb-6 flex items-start justify-between gap-4">
            <div class="min-w-0">
                <h1 class="truncate text-2xl font-semibold text-slate-900" title=title>{title}</h1>
                <div class="mt-1 flex items-center gap-3">
                    <CampaignStatusBadge status=c.campaign.status/>
                    <span class=status_class role="status" aria-live="polite" data-testid="save-status">{status_text}</span>
                </div>
            </div>
        </div>
        <Show when=move || overtaken.get()>
            <div role="alert" data-testid="overtaken" class="mb-6 flex flex-wrap items-center justify-between gap-3 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900">
                <span>
                    "This campaign started sending while you were editing, so your last changes were not saved. "
                    "They are still in the form below: copy what you need."
                </span>
                <button type="button" class="btn-secondary" on:click=move |_| {
                    dirty.set(false);
                    refresh.update(|r| *r += 1);
                }>"Show its progress"</button>
            </div>
        </Show>
        {c.campaign.resend_of.is_some().then(|| view! { <ResendLinks c=c.campaign.clone() can_act=false/> })}
        {c.postal_address_missing.then(|| view! {
            <p class="mb-6 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800" role="note">
                "Your workspace has no postal address yet; campaigns cannot be sent without one (anti-spam law). "
                <a href="/settings" class="font-medium underline">"Add it in Settings"</a>"."
            </p>
        })}
        // Each column is type-erased (`into_any`): the editor's whole view as one static type
        // is too deep for rustc in release builds without `erase_components`.
        <div class="grid grid-cols-1 gap-6 lg:grid-cols-2">
            // Leaving a field saves at once; so does Ctrl+S (or ⌘S).
            {view! { <div on:focusout=move |_| flush.run(())
                on:keydown=move |ev| {
                    if (ev.ctrl_key() || ev.meta_key()) && ev.key().eq_ignore_ascii_case("s") {
                        ev.prevent_default();
                        flush.run(());
                    }
                }>
                // Content first: what the author came to write opens the page, the
                // preview beside it stays in view while typing, and the settings set once
                // (sender, audience, schedule, A/B test) are a view of their own (editor_tabs).
                <EditorTabBar tab=tab form=form/>
                <fieldset disabled=!can_edit class="min-w-0">
                    <div role="tabpanel" id=EditorTab::Content.panel_id() aria-labelledby=EditorTab::Content.tab_id()
                        class=move || tab.get().content_class()>
                        <MessageFields form=form/>
                        <ContentFields form=form/>
                    </div>
                    <div role="tabpanel" id=EditorTab::Settings.panel_id() aria-labelledby=EditorTab::Settings.tab_id()
                        class=move || tab.get().settings_class() data-testid="campaign-settings">
                        <SenderFields form=form identities=identities/>
                        <AudienceFields form=form lists=lists/>
                        <RepeatFields form=form.repeat changed=form.changed error=form.section_error(&["recurrence", "feed", "feed_url"])/>
                        <AbTestFields form=form/>
                    </div>
                </fieldset>
            </div> }.into_any()}
            // On wide screens the column stays in view as the content scrolls; it is never taller
            // than the window (it scrolls inside instead), or it could not stay when the content
            // beside it is the shorter of the two.
            // Not a tab panel: on wide screens it is always there beside the others, and on a
            // phone the "Preview & send" tab names it.
            {view! { <aside id=EditorTab::Preview.panel_id() aria-label="Preview and send"
                class=move || format!(
                    "min-w-0 lg:sticky lg:top-6 lg:self-start lg:max-h-[calc(100vh-3rem)] lg:overflow-y-auto {}",
                    tab.get().preview_class()
                )>
                // Sending first: its buttons stay in view at the top of the column.
                {can_edit.then(|| view! {
                    <SendPanel c=c.clone() form=form lists=lists after_save=after_save actions=lifecycle refresh=refresh/>
                })}
                {can_edit.then(|| view! { <TestSendPanel test=test after_save=after_save/> })}
                <PreviewPanel preview=preview reader=preview_as mark=form.render_error/>
                {can_edit.then(|| view! { <super::templates::SaveAsTemplatePanel form=form/> })}
            </aside> }.into_any()}
        </div>
    }
}
