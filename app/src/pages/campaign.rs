//! `/campaigns/:id`: the campaign editor, for drafts and scheduled campaigns. It saves by itself
//! (a second after the last change, and when a field loses focus), renders a live preview after
//! each save, sends tests, sends now or schedules. Once a campaign started sending, the same
//! address shows its progress and report instead (`campaign_progress`).

use std::time::Duration;

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map};
use serde::{Deserialize, Serialize};

use crate::components::shell::Current;
use crate::components::timezone;
use crate::components::ui::{ActionError, Card, ConfirmDialog, LoadError, short_time};
use crate::error::AppError;
use crate::pages::audience::{ListsView, list_lists};
use crate::pages::campaign_approval::{ApprovalStatus, ApprovalView};
use crate::pages::campaign_progress::{CampaignProgress, ReportView, campaign_report};
use crate::pages::campaign_repeat::{RecurringCampaign, RecurringView, RepeatFields, RepeatForm, load_recurring};
use crate::pages::campaigns::CampaignStatusBadge;
use crate::pages::sending::{IdentitiesView, list_identities};
use herald_types::{Campaign, CampaignId, CampaignInput, CampaignStatus, FieldError, Invalid};

/// A campaign as the editor and the progress view load it: the stored campaign (its fields
/// flattened into this object) and what this member may do with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CampaignDetail {
    #[serde(flatten)]
    pub campaign: Campaign,
    pub can_edit: bool,
    /// The workspace has no postal address yet: sending will be refused.
    pub postal_address_missing: bool,
    /// The workspace requires approval and this member cannot give it: "Send" asks for it.
    pub approval_needed: bool,
    /// An owner or admin: may approve a request.
    pub can_approve: bool,
    /// The latest approval request, if any was made.
    pub approval: Option<ApprovalView>,
}

/// A save either stores the draft (`updated_at`) or says what to fix, field by field (fields
/// named as in [`CampaignInput`]; none for what belongs to no one field).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SaveOutcome {
    pub errors: Vec<FieldError>,
    pub updated_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreviewView {
    pub subject: String,
    pub html: String,
    pub text: String,
    /// The template error, with its line and column.
    pub error: Option<String>,
    pub as_reader: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReaderPick {
    pub id: i64,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestSendResult {
    pub address: String,
    pub ok: bool,
    /// The SMTP server's reply, or the error.
    pub reply: String,
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
    let approval = crate::pages::campaign_approval::latest_request(&m, id).await?;
    Ok(CampaignDetail {
        campaign,
        can_edit: m.role.can_author(),
        postal_address_missing: !ws.can_send_campaigns(),
        approval_needed,
        can_approve: m.role.can_administer(),
        approval,
    })
}

/// Autosave. Field problems come back as `errors` (nothing is saved then); a campaign that
/// started sending in the meantime answers 409.
#[server(prefix = "/rpc", endpoint = "save_campaign")]
pub async fn save_campaign(id: CampaignId, input: CampaignInput) -> Result<SaveOutcome, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Author).await?;
    match store::update(&m.state.db, m.tenant, m.role, id, &input).await {
        Ok(c) => Ok(SaveOutcome { errors: Vec::new(), updated_at: Some(c.updated_at.to_rfc3339()) }),
        Err(herald_engine::Error::Invalid(e)) => Ok(SaveOutcome { errors: e.errors, updated_at: None }),
        Err(e) => Err(e.into()),
    }
}

/// Renders the saved campaign as `reader` (a reader id), or as a sample reader.
#[server(prefix = "/rpc", endpoint = "preview_campaign")]
pub async fn preview_campaign(id: CampaignId, reader: Option<i64>) -> Result<PreviewView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::preview};
    let m = require_role(Role::Viewer).await?;
    let out = preview::preview(&m.state.db, &m.state.signer, &m.state.base_url, m.tenant, id, reader).await?;
    let (subject, html, text) = match out.rendered {
        Some(r) => (r.subject, r.html, r.text),
        None => Default::default(),
    };
    Ok(PreviewView { subject, html, text, error: out.error, as_reader: out.as_reader })
}

/// Finds the reader to preview as: by id, or by email (exact, or the only one that matches).
#[server(prefix = "/rpc", endpoint = "find_reader")]
pub async fn find_reader(query: String) -> Result<ReaderPick, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::audience::readers::{self, ReaderFilter};
    let m = require_role(Role::Viewer).await?;
    let q = query.trim();
    if q.is_empty() {
        return Err(AppError::invalid("Enter a reader's email address or id.").respond());
    }
    let label = |email: &str, name: &str| if name.is_empty() { email.to_string() } else { format!("{name} <{email}>") };
    if let Ok(n) = q.parse::<i64>() {
        return match readers::detail(&m.state.db, m.tenant, n).await {
            Ok(d) => Ok(ReaderPick { id: d.reader.id, label: label(&d.reader.email, &d.reader.name) }),
            Err(herald_engine::Error::NotFound) => {
                Err(AppError::invalid(format!("No reader has the id {n}.")).respond())
            }
            Err(e) => Err(e.into()),
        };
    }
    let filter = ReaderFilter { search: Some(q.to_string()), ..Default::default() };
    let page = readers::search(&m.state.db, m.tenant, &filter, None, 10).await?;
    let exact = page.readers.iter().find(|r| r.email.eq_ignore_ascii_case(q));
    let pick = match (exact, page.readers.len()) {
        (Some(r), _) => r,
        (None, 1) => &page.readers[0],
        (None, 0) => return Err(AppError::invalid(format!("No reader matches “{q}”.")).respond()),
        (None, n) => {
            return Err(AppError::invalid(format!(
                "{}{n} readers match “{q}”: enter the full email address.",
                if page.next_before.is_some() { "More than " } else { "" }
            ))
            .respond());
        }
    };
    Ok(ReaderPick { id: pick.id, label: label(&pick.email, &pick.name) })
}

/// Sends the saved campaign, rendered for a sample reader and marked `[Test]`, to up to five
/// addresses (separated by commas, semicolons or spaces).
#[server(prefix = "/rpc", endpoint = "test_send_campaign")]
pub async fn test_send_campaign(id: CampaignId, addresses: String) -> Result<Vec<TestSendResult>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::preview};
    let m = require_role(Role::Author).await?;
    let list: Vec<String> = addresses
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    let results = preview::test_send(
        &m.state.db,
        &m.state.signer,
        &m.state.base_url,
        &m.state.default_identity,
        &m.state.egress,
        m.tenant,
        m.role,
        id,
        &list,
    )
    .await?;
    Ok(results
        .into_iter()
        .map(|(address, r)| match r {
            Ok(reply) => TestSendResult { address, ok: true, reply },
            Err(reply) => TestSendResult { address, ok: false, reply },
        })
        .collect())
}

#[server(prefix = "/rpc", endpoint = "send_campaign")]
pub async fn send_campaign(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Author).await?;
    herald_engine::accounts::require_verified_email(&m.state.db, m.user).await?;
    if ask_for_approval(&m, id, None, "").await? {
        return Ok(());
    }
    store::send_now(&m.state.db, &m.state.jobs, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::CampaignSent, id, serde_json::json!({})).await;
    Ok(())
}

/// `at` is RFC 3339 (the browser converts the author's wall-clock time in `timezone` to UTC);
/// `timezone` is kept to show the time as the author chose it.
#[server(prefix = "/rpc", endpoint = "schedule_campaign")]
pub async fn schedule_campaign(id: CampaignId, at: String, timezone: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Author).await?;
    herald_engine::accounts::require_verified_email(&m.state.db, m.user).await?;
    let at = serde_json::from_value(serde_json::Value::String(at.trim().to_string()))
        .map_err(|_| AppError::invalid("Choose a valid date and time.").respond())?;
    if ask_for_approval(&m, id, Some(at), &timezone).await? {
        return Ok(());
    }
    store::schedule(&m.state.db, m.tenant, m.role, id, at, timezone.trim()).await?;
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
async fn ask_for_approval(
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
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Author).await?;
    store::unschedule(&m.state.db, m.tenant, m.role, id).await?;
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
    view! {
        <div class="mb-4">
            <a href="/campaigns" class="text-sm text-slate-500 hover:text-slate-800">"← Campaigns"</a>
        </div>
        <Transition fallback=|| view! { <p class="text-slate-400">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match campaign.await {
                    Ok(c) if c.campaign.status.is_editable() => view! { <Editor c=c refresh=refresh res=res/> }.into_any(),
                    Ok(c) if c.campaign.status == CampaignStatus::Recurring => view! {
                        <RecurringCampaign id=c.campaign.id name=c.campaign.name refresh=refresh data=res.recurring/>
                    }.into_any(),
                    Ok(c) => view! { <CampaignProgress c=c report=res.report tick=res.report_tick/> }.into_any(),
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
    preview_as: RwSignal<Option<ReaderPick>>,
    preview: Resource<Result<PreviewView, AppError>>,
    /// Bumped by the progress view's polling and after its actions.
    pub report_tick: RwSignal<u32>,
    pub report: Resource<Result<ReportView, AppError>>,
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
            report: Resource::new(move || (id.get(), refresh.get(), report_tick.get()), |(id, ..)| campaign_report(id)),
            recurring: Resource::new(move || (id.get(), refresh.get()), |(id, _)| load_recurring(id)),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum SaveStatus {
    /// Nothing changed since the page loaded.
    Idle,
    Unsaved,
    Saving,
    /// Saved at this time of day (browser clock).
    Saved(String),
    Failed(String),
}

/// What waits for the autosave before it runs, so it acts on what the author sees.
#[derive(Clone, Debug, PartialEq)]
enum AfterSave {
    TestSend(String),
    SendNow,
    Schedule { at: String, timezone: String },
}

/// The editor's state, shared by its sections. Every field is a signal; `changed` (re)starts
/// the autosave countdown.
#[derive(Clone, Copy)]
struct Form {
    name: RwSignal<String>,
    subject: RwSignal<String>,
    preheader: RwSignal<String>,
    identity_id: RwSignal<String>,
    from_name: RwSignal<String>,
    from_email: RwSignal<String>,
    reply_to: RwSignal<String>,
    list_ids: RwSignal<Vec<String>>,
    attribute_filter: RwSignal<String>,
    body_format: RwSignal<String>,
    body: RwSignal<String>,
    spread_on: RwSignal<bool>,
    spread_hours: RwSignal<String>,
    tracking: RwSignal<String>,
    repeat: RepeatForm,
    errors: RwSignal<Vec<FieldError>>,
    changed: Callback<()>,
}

/// A value the browser parses before saving; `field` files its message.
fn parsed<T: std::str::FromStr>(field: &str, raw: &str, message: &str) -> Result<T, Invalid> {
    raw.trim().parse().map_err(|_| Invalid::field(field, message))
}

impl Form {
    /// The input to save, or what to fix first (every field the browser can check).
    fn input(&self) -> Result<CampaignInput, Invalid> {
        let mut problems = herald_types::Problems::default();
        let spread_hours = if self.spread_on.get_untracked() {
            let raw = self.spread_hours.get_untracked().replace(',', ".");
            problems.take(parsed::<f64>("spread_hours", &raw, "Enter a number of hours between 0 and 168 (a week)."))
        } else {
            None
        };
        let identity_id = match self.identity_id.get_untracked().trim() {
            "" => None,
            raw => problems.take(parsed("identity_id", raw, "Choose a sender from the list.")),
        };
        let recurrence = problems.take(self.repeat.recurrence()).flatten();
        let input = CampaignInput {
            name: self.name.get_untracked(),
            subject: self.subject.get_untracked(),
            preheader: self.preheader.get_untracked(),
            identity_id,
            from_name: self.from_name.get_untracked(),
            from_email: self.from_email.get_untracked(),
            reply_to: self.reply_to.get_untracked(),
            list_ids: self.list_ids.get_untracked().iter().filter_map(|l| l.parse().ok()).collect(),
            attribute_filter: self.attribute_filter.get_untracked(),
            body_format: self.body_format.get_untracked().parse().unwrap_or_default(),
            body: self.body.get_untracked(),
            spread_hours,
            tracking: self.tracking.get_untracked().parse().unwrap_or_default(),
            recurrence,
            feed: self.repeat.feed(),
            feed_url: self.repeat.feed_url.get_untracked(),
        };
        problems.check(input.validate());
        problems.into_result().map(|()| input)
    }

    // `use<>`: the closure copies the signal out and does not borrow `self` (edition 2024 would
    // otherwise capture the borrow, which only the release build without erased components sees).
    fn error(&self, field: &'static str) -> impl Fn() -> Option<String> + Copy + Send + Sync + use<> {
        let errors = self.errors;
        move || errors.with(|e| e.iter().find(|e| e.field.as_deref() == Some(field)).map(|e| e.message.clone()))
    }

    /// The first message for any of `fields` (a section that edits several).
    fn section_error(
        &self,
        fields: &'static [&'static str],
    ) -> impl Fn() -> Option<String> + Copy + Send + Sync + use<> {
        let errors = self.errors;
        move || {
            errors.with(|e| {
                e.iter().find(|e| e.field.as_deref().is_some_and(|f| fields.contains(&f))).map(|e| e.message.clone())
            })
        }
    }
}

#[component]
fn Editor(c: CampaignDetail, refresh: RwSignal<u32>, res: CampaignResources) -> impl IntoView {
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
        if !can_edit {
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
        body_format: RwSignal::new(stored.body_format.as_str().to_string()),
        body: RwSignal::new(stored.body.clone()),
        spread_on: RwSignal::new(stored.spread_hours.is_some()),
        spread_hours: RwSignal::new(stored.spread_hours.map_or_else(|| "24".to_string(), |h| h.to_string())),
        tracking: RwSignal::new(stored.tracking.as_str().to_string()),
        // UTC until the author picks a zone: the server and the browser must render the same.
        repeat: RepeatForm::new(stored, "UTC"),
        errors,
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
                // It started sending (a schedule came due): show its progress.
                refresh.update(|r| *r += 1);
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
                <h1 class="truncate text-2xl font-semibold text-slate-900">{title}</h1>
                <div class="mt-1 flex items-center gap-3">
                    <CampaignStatusBadge status=c.campaign.status/>
                    <span class=status_class role="status" aria-live="polite" data-testid="save-status">{status_text}</span>
                </div>
            </div>
        </div>
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
                <fieldset disabled=!can_edit class="min-w-0">
                    <MessageFields form=form/>
                    <SenderFields form=form identities=identities/>
                    <AudienceFields form=form lists=lists/>
                    <RepeatFields form=form.repeat changed=form.changed error=form.section_error(&["recurrence", "feed", "feed_url"])/>
                    <ContentFields form=form/>
                </fieldset>
            </div> }.into_any()}
            {view! { <div class="min-w-0 lg:sticky lg:top-6 lg:self-start">
                <PreviewPanel preview=preview reader=preview_as/>
                {can_edit.then(|| view! { <TestSendPanel test=test after_save=after_save/> })}
                {can_edit.then(|| view! {
                    <SendPanel c=c.clone() form=form lists=lists after_save=after_save actions=lifecycle refresh=refresh/>
                })}
            </div> }.into_any()}
        </div>
    }
}

/// Classes for a text input, red once its field has an error.
fn input_class(error: Option<String>, extra: &'static str) -> String {
    let base = if error.is_some() { "input border-red-400" } else { "input" };
    if extra.is_empty() { base.to_string() } else { format!("{base} {extra}") }
}

/// A labelled text input bound to one draft field, with its hint and its error.
#[component]
fn TextField(
    form: Form,
    field: &'static str,
    label: &'static str,
    value: RwSignal<String>,
    #[prop(optional)] placeholder: &'static str,
    #[prop(optional)] hint: &'static str,
    #[prop(optional)] input_type: &'static str,
    #[prop(optional)] extra_class: &'static str,
    #[prop(optional)] maxlength: Option<u32>,
    #[prop(optional)] required: bool,
) -> impl IntoView {
    let error = form.error(field);
    let input_id = format!("campaign-{}", field.replace('_', "-"));
    let hint_id = format!("{input_id}-hint");
    let error_id = format!("{input_id}-error");
    let described = format!("{hint_id} {error_id}");
    view! {
        <div>
            <label for=input_id.clone() class="label">{label}</label>
            <input id=input_id type=if input_type.is_empty() { "text" } else { input_type }
                class=move || input_class(error(), extra_class)
                value=value.get_untracked() placeholder=placeholder maxlength=maxlength required=required
                autocomplete="off" aria-describedby=described aria-invalid=move || error().is_some().to_string()
                on:input=move |ev| {
                    value.set(event_target_value(&ev));
                    form.changed.run(());
                }/>
            {(!hint.is_empty()).then(|| view! { <p id=hint_id class="mt-1 text-xs text-slate-500">{hint}</p> })}
            <p id=error_id class="mt-1 text-xs text-red-600" role="alert">{error}</p>
        </div>
    }
}

#[component]
fn MessageFields(form: Form) -> impl IntoView {
    view! {
        <Card title="Message">
            <div class="space-y-4">
                <TextField form=form field="name" label="Name" value=form.name maxlength=200 required=true
                    hint="For you and your team; readers never see it."/>
                <TextField form=form field="subject" label="Subject" value=form.subject maxlength=300
                    placeholder="What's new this week, {{ reader.name }}"
                    hint="Template variables work here too: {{ reader.name }}, {{ reader.attributes.city }}."/>
                <TextField form=form field="preheader" label="Preheader" value=form.preheader maxlength=300
                    placeholder="The line inboxes show after the subject"/>
            </div>
        </Card>
    }
}

#[component]
fn SenderFields(form: Form, identities: Resource<Result<IdentitiesView, AppError>>) -> impl IntoView {
    let identity_error = form.error("identity_id");
    view! {
        <Card title="Sender">
            <div class="space-y-4">
                <div>
                    <label for="campaign-identity" class="label">"Send through"</label>
                    <select id="campaign-identity" class="input"
                        on:change=move |ev| {
                            form.identity_id.set(event_target_value(&ev));
                            form.changed.run(());
                        }>
                        <option value="" selected=form.identity_id.get_untracked().is_empty()>"Default server"</option>
                        <Suspense>
                            {move || Suspend::new(async move {
                                identities.await.map(|v| {
                                    let current = form.identity_id.get_untracked();
                                    v.identities.into_iter().map(|i| {
                                        let selected = i.id == current;
                                        view! { <option value=i.id selected=selected>{i.name}</option> }
                                    }).collect_view()
                                }).ok()
                            })}
                        </Suspense>
                    </select>
                    <p class="mt-1 text-xs text-slate-500">
                        "The SMTP server and its limits. Manage identities in "
                        <a href="/settings/sending" class="text-indigo-600 hover:underline">"Settings → Sending"</a>"."
                    </p>
                    <p class="mt-1 text-xs text-red-600" role="alert">{identity_error}</p>
                </div>
                <div class="grid grid-cols-2 gap-4">
                    <TextField form=form field="from_name" label="From name" value=form.from_name maxlength=100
                        placeholder="The Weekly Team"/>
                    <TextField form=form field="from_email" label="From email" value=form.from_email input_type="email"
                        placeholder="news@example.com"/>
                </div>
                <TextField form=form field="reply_to" label="Reply-to" value=form.reply_to input_type="email"
                    placeholder="Replies go to the From address" hint="Optional: where replies go, if not to the From address."/>
            </div>
        </Card>
    }
}

/// The confirmed readers of the chosen lists, added up (a reader on two lists gets one copy,
/// so this is an upper bound), and how many lists that is.
fn audience_estimate(lists: &ListsView, chosen: &[String]) -> (usize, i64) {
    let picked: Vec<_> = lists.lists.iter().filter(|l| chosen.contains(&l.id)).collect();
    (picked.len(), picked.iter().map(|l| l.confirmed).sum())
}

#[component]
fn AudienceFields(form: Form, lists: Resource<Result<ListsView, AppError>>) -> impl IntoView {
    let filter_error = form.error("attribute_filter");
    let spread_error = form.error("spread_hours");
    view! {
        <Card title="Audience">
            <fieldset>
                <legend class="label">"Send to these lists"</legend>
                <Suspense fallback=|| view! { <p class="text-sm text-slate-400">"Loading lists…"</p> }>
                    {move || Suspend::new(async move {
                        match lists.await {
                            Ok(v) if v.lists.is_empty() => view! {
                                <p class="text-sm text-slate-500">
                                    "No lists yet. " <a href="/audience" class="text-indigo-600 hover:underline">"Create one in Audience"</a>
                                    " and add readers to it."
                                </p>
                            }.into_any(),
                            Ok(v) => {
                                let chosen = form.list_ids.get_untracked();
                                view! {
                                    <div class="space-y-1" data-testid="campaign-lists">
                                        {v.lists.into_iter().map(|l| {
                                            let id = l.id.clone();
                                            let checked = chosen.contains(&l.id);
                                            view! {
                                                <label class="flex items-center gap-2 rounded-md px-2 py-1 text-sm hover:bg-slate-50">
                                                    <input type="checkbox" value=l.id.clone() checked=checked
                                                        on:change=move |ev| {
                                                            let on = event_target_checked(&ev);
                                                            let id = id.clone();
                                                            form.list_ids.update(|c| { c.retain(|x| *x != id); if on { c.push(id); } });
                                                            form.changed.run(());
                                                        }/>
                                                    <span class="font-medium text-slate-800">{l.name}</span>
                                                    <span class="text-xs text-slate-500">{format!("{} confirmed", l.confirmed)}</span>
                                                </label>
                                            }
                                        }).collect_view()}
                                    </div>
                                }.into_any()
                            }
                            Err(e) => view! { <LoadError error=e/> }.into_any(),
                        }
                    })}
                </Suspense>
                <Suspense>
                    {move || Suspend::new(async move {
                        lists.await.ok().map(|v| view! {
                            <p class="mt-2 text-xs text-slate-500" data-testid="audience-estimate">
                                {move || {
                                    let (n, readers) = form.list_ids.with(|c| audience_estimate(&v, c));
                                    if n == 0 {
                                        "Choose at least one list.".to_string()
                                    } else {
                                        format!("Up to {readers} confirmed reader{} on {n} list{}; each reader gets one copy.",
                                            if readers == 1 { "" } else { "s" }, if n == 1 { "" } else { "s" })
                                    }
                                }}
                            </p>
                        })
                    })}
                </Suspense>
            </fieldset>
            <div class="mt-5">
                <label for="campaign-attribute-filter" class="label">"Only readers whose attributes match (optional)"</label>
                <input id="campaign-attribute-filter" class=move || input_class(filter_error(), "font-mono text-xs")
                    value=form.attribute_filter.get_untracked() placeholder="city = \"Lyon\"" autocomplete="off" spellcheck="false"
                    aria-describedby="campaign-attribute-filter-hint campaign-attribute-filter-error"
                    aria-invalid=move || filter_error().is_some().to_string()
                    on:input=move |ev| {
                        form.attribute_filter.set(event_target_value(&ev));
                        form.changed.run(());
                    }/>
                <p id="campaign-attribute-filter-hint" class="mt-1 text-xs text-slate-500">
                    "For example " <code class="rounded bg-slate-100 px-1">"city = \"Lyon\""</code> " or "
                    <code class="rounded bg-slate-100 px-1">"plan in [\"pro\", \"team\"]"</code>". Empty: everyone on the lists."
                </p>
                <p id="campaign-attribute-filter-error" class="mt-1 text-xs text-red-600" role="alert">{filter_error}</p>
            </div>
            <div class="mt-5">
                <div class="flex flex-wrap items-center gap-2 text-sm">
                    <label class="flex items-center gap-2">
                        <input type="checkbox" checked=form.spread_on.get_untracked()
                            on:change=move |ev| {
                                form.spread_on.set(event_target_checked(&ev));
                                form.changed.run(());
                            }/>
                        "Spread the send over"
                    </label>
                    <input id="campaign-spread-hours" type="number" min="0.5" max="168" step="0.5" class="input w-24"
                        aria-label="Hours to spread the send over"
                        value=form.spread_hours.get_untracked() disabled=move || !form.spread_on.get()
                        aria-invalid=move || spread_error().is_some().to_string()
                        on:input=move |ev| {
                            form.spread_hours.set(event_target_value(&ev));
                            form.changed.run(());
                        }/>
                    "hours"
                </div>
                <p class="mt-1 text-xs text-slate-500">"Sends at an even pace instead of as fast as the server allows: gentler on new sending domains."</p>
                <p class="mt-1 text-xs text-red-600" role="alert">{spread_error}</p>
            </div>
            <div class="mt-5">
                <label for="campaign-tracking" class="block text-sm font-medium text-slate-700">"Open and click tracking"</label>
                <select id="campaign-tracking" class="input mt-1 w-72" aria-describedby="campaign-tracking-hint"
                    on:change=move |ev| {
                        form.tracking.set(event_target_value(&ev));
                        form.changed.run(());
                    }>
                    {[("on", "On: per reader"), ("anonymous", "Anonymous: counts only"), ("off", "Off")].into_iter().map(|(v, label)| view! {
                        <option value=v selected=form.tracking.get_untracked() == v>{label}</option>
                    }).collect_view()}
                </select>
                <p id="campaign-tracking-hint" class="mt-1 text-xs text-slate-500">
                    "Adds an invisible image and rewrites links through this server. Anonymous keeps totals without knowing who opened or clicked."
                </p>
            </div>
        </Card>
    }
}

#[component]
fn ContentFields(form: Form) -> impl IntoView {
    let body_error = form.error("body");
    let format_radio = move |value: &'static str, label: &'static str| {
        view! {
            <label class="flex items-center gap-2 text-sm">
                <input type="radio" name="campaign-body-format" value=value
                    checked=form.body_format.get_untracked() == value
                    on:change=move |_| {
                        form.body_format.set(value.to_string());
                        form.changed.run(());
                    }/>
                {label}
            </label>
        }
    };
    view! {
        <Card title="Content">
            <fieldset class="mb-4 flex items-center gap-6">
                <legend class="sr-only">"Body format"</legend>
                <span class="text-sm font-medium text-slate-700" aria-hidden="true">"Format"</span>
                {format_radio("markdown", "Markdown")}
                {format_radio("html", "HTML")}
            </fieldset>
            <label for="campaign-body" class="label">"Body"</label>
            <textarea id="campaign-body" rows="24" spellcheck="false"
                class=move || input_class(body_error(), "min-h-96 font-mono text-xs leading-5")
                aria-describedby="campaign-body-hint campaign-body-error"
                aria-invalid=move || body_error().is_some().to_string()
                placeholder="# Hello {{ reader.name }}\n\nWhat happened this week…"
                on:input=move |ev| {
                    form.body.set(event_target_value(&ev));
                    form.changed.run(());
                }>{form.body.get_untracked()}</textarea>
            <p id="campaign-body-hint" class="mt-1 text-xs text-slate-500">
                "Variables: " <code class="rounded bg-slate-100 px-1">"{{ reader.name }}"</code>", "
                <code class="rounded bg-slate-100 px-1">"{{ reader.email }}"</code>", "
                <code class="rounded bg-slate-100 px-1">"{{ reader.attributes.city | default(\"\") }}"</code>", "
                <code class="rounded bg-slate-100 px-1">"{{ workspace.name }}"</code>", "
                <code class="rounded bg-slate-100 px-1">"{{ unsubscribe_url }}"</code>
                ". An unsubscribe link and your postal address are added at the bottom when the body has none."
            </p>
            <p id="campaign-body-error" class="mt-1 text-xs text-red-600" role="alert">{body_error}</p>
        </Card>
    }
}

#[component]
fn PreviewPanel(
    preview: Resource<Result<PreviewView, AppError>>,
    reader: RwSignal<Option<ReaderPick>>,
) -> impl IntoView {
    let query = RwSignal::new(String::new());
    let plain = RwSignal::new(false);
    let find = ServerAction::<FindReader>::new();
    Effect::new(move |_| {
        if let Some(Ok(pick)) = find.value().get() {
            reader.set(Some(pick));
        }
    });
    let tab = move |is_plain: bool, label: &'static str| {
        view! {
            <button type="button" aria-pressed=move || (plain.get() == is_plain).to_string()
                class=move || if plain.get() == is_plain {
                    "rounded-md bg-white px-3 py-1 text-xs font-medium text-slate-900 shadow-xs"
                } else {
                    "rounded-md px-3 py-1 text-xs font-medium text-slate-500 hover:text-slate-800"
                }
                on:click=move |_| plain.set(is_plain)>{label}</button>
        }
    };
    view! {
        <Card title="Preview">
            <form class="mb-3 flex items-end gap-2" on:submit=move |ev| {
                ev.prevent_default();
                find.dispatch(FindReader { query: query.get_untracked() });
            }>
                <div class="flex-1">
                    <label for="preview-reader" class="label">"Preview as reader"</label>
                    <input id="preview-reader" class="input" placeholder="Email address or reader id" autocomplete="off"
                        on:input=move |ev| query.set(event_target_value(&ev))/>
                </div>
                <button type="submit" class="btn-secondary" disabled=move || find.pending().get()>"Show"</button>
                {move || reader.with(Option::is_some).then(|| view! {
                    <button type="button" class="btn-secondary" on:click=move |_| reader.set(None)>"Sample reader"</button>
                })}
            </form>
            <ActionError value=find.value()/>
            <div class="mb-3 flex items-center justify-between gap-3">
                <div class="inline-flex rounded-lg bg-slate-100 p-0.5" role="group" aria-label="Preview format">
                    {tab(false, "HTML")}
                    {tab(true, "Plain text")}
                </div>
                <span class="truncate text-xs text-slate-500" data-testid="preview-as">
                    <Transition>
                        {move || Suspend::new(async move {
                            preview.await.ok().map(|p| format!("As {}", p.as_reader))
                        })}
                    </Transition>
                </span>
            </div>
            <Transition fallback=|| view! { <p class="text-sm text-slate-400">"Rendering…"</p> }>
                {move || Suspend::new(async move {
                    match preview.await {
                        Ok(p) => view! { <PreviewBody p=p plain=plain/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </Card>
    }
}

#[component]
fn PreviewBody(p: PreviewView, plain: RwSignal<bool>) -> impl IntoView {
    if let Some(error) = p.error {
        return view! {
            <div role="alert" class="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-700" data-testid="template-error">
                <p class="font-medium">"The template has an error"</p>
                <p class="mt-1 font-mono text-xs whitespace-pre-wrap">{error}</p>
            </div>
        }
        .into_any();
    }
    let html = p.html;
    let text = p.text;
    view! {
        <div class="rounded-lg border border-slate-200">
            <div class="border-b border-slate-200 bg-slate-50 px-3 py-2 text-sm">
                <span class="text-slate-500">"Subject: "</span>
                <span class="font-medium text-slate-900" data-testid="preview-subject">{p.subject}</span>
            </div>
            {move || if plain.get() {
                view! {
                    <pre class="h-[36rem] overflow-auto p-4 font-mono text-xs whitespace-pre-wrap text-slate-800" data-testid="preview-text">{text.clone()}</pre>
                }.into_any()
            } else {
                // The tenant's HTML stays in a sandboxed frame (no scripts, no same-origin
                // access): never in the app's own DOM.
                view! {
                    <iframe sandbox="" srcdoc=html.clone() title="Email preview" data-testid="preview-frame"
                        class="block h-[36rem] w-full rounded-b-lg bg-white"></iframe>
                }.into_any()
            }}
        </div>
    }
    .into_any()
}

#[component]
fn TestSendPanel(test: ServerAction<TestSendCampaign>, after_save: Callback<AfterSave>) -> impl IntoView {
    let me = use_context::<Current>().map(|c| c.0.email).unwrap_or_default();
    let addresses = RwSignal::new(me.clone());
    view! {
        <Card title="Send a test">
            <form class="flex items-end gap-2" on:submit=move |ev| {
                ev.prevent_default();
                after_save.run(AfterSave::TestSend(addresses.get_untracked()));
            }>
                <div class="flex-1">
                    <label for="test-addresses" class="label">"Send a test to"</label>
                    <input id="test-addresses" class="input" value=me placeholder="you@example.com, colleague@example.com"
                        autocomplete="off" aria-describedby="test-addresses-hint"
                        on:input=move |ev| addresses.set(event_target_value(&ev))/>
                </div>
                <button type="submit" class="btn-secondary" disabled=move || test.pending().get()>
                    {move || if test.pending().get() { "Sending…" } else { "Send test" }}
                </button>
            </form>
            <p id="test-addresses-hint" class="mt-1 text-xs text-slate-500">
                "Up to 5 addresses, separated by commas. The test is rendered for a sample reader, marked [Test], and sent through the campaign's sender."
            </p>
            <ActionError value=test.value()/>
            {move || test.value().get().and_then(|r| r.ok()).map(|results| view! {
                <ul class="mt-3 divide-y divide-slate-100 text-sm" data-testid="test-results">
                    {results.into_iter().map(|r| {
                        let (icon, cls) = if r.ok { ("✓", "text-emerald-600") } else { ("✗", "text-red-600") };
                        view! {
                            <li class="flex gap-2 py-2" data-testid="test-result">
                                <span class=cls aria-hidden="true">{icon}</span>
                                <div class="min-w-0">
                                    <div class="font-medium">{r.address}
                                        <span class="sr-only">{if r.ok { " accepted" } else { " failed" }}</span>
                                    </div>
                                    <div class=format!("break-all font-mono text-xs {cls}")>{r.reply}</div>
                                </div>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            })}
        </Card>
    }
}

/// The editor's lifecycle actions, handed to the send panel together.
#[derive(Clone, Copy)]
struct Lifecycle {
    send: ServerAction<SendCampaign>,
    schedule: ServerAction<ScheduleCampaign>,
    unschedule: ServerAction<UnscheduleCampaign>,
    delete: ServerAction<DeleteCampaign>,
    /// Drops unsaved changes and the autosave countdown (before deleting).
    discard: Callback<()>,
    /// The last save failed: sending and scheduling wait until the form is fixed.
    save_failed: Signal<bool>,
}

#[component]
fn SendPanel(
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
            <div class="flex flex-wrap items-center gap-3">
                <button type="button" class="btn-primary" disabled=busy on:click=move |_| confirm_send.set(true)>
                    {move || match (send.pending().get(), form.repeat.every.get().is_empty()) {
                        (true, _) => "Starting…",
                        (false, _) if asks => "Ask for approval to send",
                        (false, true) => "Send now",
                        (false, false) => "Start the schedule",
                    }}
                </button>
                <span class="text-xs text-slate-500">
                    {move || if form.repeat.every.get().is_empty() {
                        "Starts at once; you can pause or cancel while it sends."
                    } else {
                        "Each slot of the schedule sends an edition; you can stop the schedule at any time."
                    }}
                </span>
            </div>
            {move || save_failed.get().then(|| view! {
                <p class="mt-3 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800" role="alert">
                    "The latest changes are not saved (see the message under the title). Fix that first: sending uses the saved campaign."
                </p>
            })}
            <ActionError value=send.value()/>
            <form class="mt-5 border-t border-slate-100 pt-5" on:submit=move |ev| { ev.prevent_default(); do_schedule(); }>
                <p class="label">{if scheduled { "Move the schedule" } else { "Or schedule it" }}</p>
                <div class="flex flex-wrap items-end gap-2">
                    <div>
                        <label for="schedule-at" class="sr-only">"Date and time"</label>
                        <input id="schedule-at" type="datetime-local" class="input" value=initial_local
                            prop:value=move || local.get()
                            on:input=move |ev| { local.set(event_target_value(&ev)); schedule_error.set(None); }/>
                    </div>
                    <div class="min-w-0 flex-1">
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
            {is_draft.then(|| view! {
                <div class="mt-5 border-t border-slate-100 pt-5">
                    <button type="button" class="text-sm text-red-600 hover:underline" on:click=move |_| confirm_delete.set(true)>"Delete draft"</button>
                    <ActionError value=delete.value()/>
                </div>
            })}
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

/// What "Send now" is about to do, in the confirmation dialog.
#[component]
fn SendSummary(form: Form, lists: Resource<Result<ListsView, AppError>>) -> impl IntoView {
    view! {
        <Suspense>
            {move || Suspend::new(async move {
                let v = lists.await.ok()?;
                let chosen = form.list_ids.get_untracked();
                let (n, readers) = audience_estimate(&v, &chosen);
                let names: Vec<String> = v.lists.iter().filter(|l| chosen.contains(&l.id)).map(|l| l.name.clone()).collect();
                let subject = form.subject.get_untracked();
                let condition = form.attribute_filter.get_untracked();
                Some(view! {
                    <p data-testid="send-summary">
                        {if n == 0 {
                            "No list is chosen yet: choose at least one list.".to_string()
                        } else {
                            format!(
                                "“{}” goes to up to {readers} confirmed reader{} on {n} list{} ({}){}.",
                                if subject.trim().is_empty() { "(no subject)" } else { subject.trim() },
                                if readers == 1 { "" } else { "s" },
                                if n == 1 { "" } else { "s" },
                                names.join(", "),
                                if condition.trim().is_empty() { String::new() } else { format!(" matching {}", condition.trim()) }
                            )
                        }}
                    </p>
                    <p class="mt-2">"Suppressed and unsubscribed readers are skipped. Once started, the content can no longer be edited."</p>
                })
            })}
        </Suspense>
    }
}
