//! `/automations/:id` (`new` for a new one): an automation as a vertical flow — its trigger,
//! then each step with how many readers reached it, wait at it, and (an email) were sent,
//! opened and clicked — the controls draft → live ⇄ paused → archived, and the readers in it.
//! A new one starts as a welcome mail (`?list=` picks the list that triggers it).

use herald_types::{
    Automation, AutomationId, AutomationInput, AutomationReport, AutomationStatus, BodyFormat, BranchCondition,
    BranchTarget, FieldError, ListId, Reentry, RemovedStepReaders, Run, RunState, SegmentId, StepAction, StepInput,
    TagId, Trigger, WaitUnit, Weekday,
};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use leptos_router::hooks::{use_navigate, use_params_map, use_query_map};
use serde::{Deserialize, Serialize};

use crate::components::ui::{Card, ConfirmDialog, LoadError, LocalTimeOf};
use crate::error::AppError;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AutomationEditorData {
    pub automation: Option<Automation>,
    pub report: Option<AutomationReport>,
    pub runs: Vec<Run>,
    pub lists: Vec<(ListId, String)>,
    pub tags: Vec<(TagId, String)>,
    pub segments: Vec<(SegmentId, String)>,
    /// Date fields, by key and label (the anniversary trigger).
    pub date_fields: Vec<(String, String)>,
    /// Every custom field, by key and label (a reader's time zone, a branch on a value).
    pub fields: Vec<(String, String)>,
    /// The workspace's time zone: where a "wait until" naming no zone falls.
    pub workspace_zone: String,
    pub can_edit: bool,
}

/// The workspace's time zone, for the "wait until" steps' zone choice.
#[derive(Clone)]
struct WorkspaceZone(String);

#[server(prefix = "/rpc", endpoint = "automation_edit_view")]
pub async fn automation_edit_view(id: String) -> Result<AutomationEditorData, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::audience::{lists, tags};
    use herald_engine::automations::{report, store};
    let m = require_role(Role::Viewer).await?;
    let db = &m.state.db;
    let mut data = AutomationEditorData {
        automation: None,
        report: None,
        runs: Vec::new(),
        lists: lists::with_counts(db, m.tenant).await?.into_iter().map(|l| (l.list.id, l.list.name)).collect(),
        tags: tags::list(db, m.tenant).await?.into_iter().map(|t| (t.id, t.name)).collect(),
        segments: herald_engine::audience::segments::list(db, m.tenant)
            .await?
            .into_iter()
            .map(|s| (s.id, s.name))
            .collect(),
        date_fields: Vec::new(),
        fields: Vec::new(),
        workspace_zone: herald_engine::workspaces::get(db, m.tenant).await?.time_zone,
        can_edit: m.role.can_author(),
    };
    for f in herald_engine::audience::fields::list(db, m.tenant).await? {
        if f.kind == herald_types::FieldKind::Date {
            data.date_fields.push((f.key.clone(), f.label.clone()));
        }
        data.fields.push((f.key, f.label));
    }
    if id != "new" {
        let id: AutomationId = id.parse().map_err(|_| AppError::NotFound.respond())?;
        data.automation = Some(store::get(db, m.tenant, id).await?);
        data.report = Some(report::report(db, m.tenant, id).await?);
        data.runs = report::runs(db, m.tenant, id, None).await?;
    }
    Ok(data)
}

/// Saves a new automation (`id` is `new`) or changes one; returns its id.
#[server(prefix = "/rpc", endpoint = "save_automation", input = Json)]
pub async fn save_automation(id: String, input: AutomationInput) -> Result<AutomationId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, automations::store};
    let m = require_role(Role::Author).await?;
    let saved = if id == "new" {
        store::create(&m.state.db, m.tenant, m.role, &input).await?
    } else {
        let id: AutomationId = id.parse().map_err(|_| AppError::NotFound.respond())?;
        store::update(&m.state.db, m.tenant, m.role, id, &input).await?
    };
    Ok(saved.id)
}

/// `start`, `pause`, `archive` or `delete`; true when it was deleted.
#[server(prefix = "/rpc", endpoint = "change_automation")]
pub async fn change_automation(id: AutomationId, action: String) -> Result<bool, AppError> {
    use crate::ssr::require_role;
    use herald_engine::audit::Action;
    use herald_engine::{Role, automations::store};
    let m = require_role(Role::Author).await?;
    let db = &m.state.db;
    match action.as_str() {
        "start" => {
            store::start(db, &m.state.jobs, m.tenant, m.role, id).await?;
            m.audit(Action::AutomationStarted, id, serde_json::json!({})).await;
        }
        "pause" => {
            store::pause(db, m.tenant, m.role, id).await?;
            m.audit(Action::AutomationPaused, id, serde_json::json!({})).await;
        }
        "archive" => {
            store::archive(db, m.tenant, m.role, id).await?;
            m.audit(Action::AutomationArchived, id, serde_json::json!({})).await;
        }
        "delete" => {
            store::delete(db, m.tenant, m.role, id).await?;
            return Ok(true);
        }
        _ => return Err(AppError::NotFound),
    }
    Ok(false)
}

/// Test mode: each email step's mail, in order, to one address, at once (waits skipped; tags
/// and branches are not applied: nobody's data changes). Marked `[Test]`, rendered for a sample
/// reader; counted against the test allowance like a campaign's test. One line per mail.
#[server(prefix = "/rpc", endpoint = "test_automation")]
pub async fn test_automation(id: AutomationId, address: String) -> Result<Vec<String>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, automations::store, campaigns::preview};
    let m = require_role(Role::Author).await?;
    let automation = store::get(&m.state.db, m.tenant, id).await?;
    let mut out = Vec::new();
    for (i, step) in automation.steps.iter().enumerate() {
        let Some(campaign) = step.campaign_id else { continue };
        let results = preview::test_send(
            &m.state.db,
            &m.state.signer,
            &m.state.base_url,
            &m.state.default_identity,
            &m.state.egress,
            m.tenant,
            m.user,
            m.role,
            campaign,
            std::slice::from_ref(&address),
        )
        .await?;
        for (to, r) in results {
            out.push(match r {
                Ok(_) => format!("Step {}: sent to {to}.", i + 1),
                Err(why) => format!("Step {}: {why}", i + 1),
            });
        }
    }
    if out.is_empty() {
        return Err(AppError::Invalid(herald_types::Invalid::new("Add an email step first.")));
    }
    Ok(out)
}

/// The mail a new automation starts with.
fn starter_mail() -> StepAction {
    StepAction::Email {
        subject: "Welcome to {{ workspace.name }}".into(),
        preheader: String::new(),
        body_format: BodyFormat::Markdown,
        body: "Hi {{ reader.name | default(\"there\") }},\n\nThank you for joining. Here is what to expect from us, and how often.\n\nSee you in your inbox!".into(),
    }
}

/// A new step of `kind` at the end of `steps`.
fn new_step(
    kind: &str,
    tags: &[(TagId, String)],
    lists: &[(ListId, String)],
    steps: &[StepInput],
) -> Option<StepAction> {
    let first_tag = || tags.first().map(|(id, _)| *id).unwrap_or(TagId::NIL);
    let first_list = || lists.first().map(|(id, _)| *id).unwrap_or(ListId::NIL);
    let last_mail = steps.iter().rposition(|s| matches!(s.action, StepAction::Email { .. })).unwrap_or(0);
    Some(match kind {
        "email" => StepAction::Email {
            subject: String::new(),
            preheader: String::new(),
            body_format: BodyFormat::Markdown,
            body: String::new(),
        },
        "wait" => StepAction::Wait { amount: 1, unit: WaitUnit::Days },
        "wait_until" => StepAction::WaitUntil {
            weekdays: Vec::new(),
            time: "09:00".into(),
            // The workspace's zone, unless the author picks another.
            zone: String::new(),
            zone_field: None,
        },
        "add_tag" => StepAction::AddTag { tag_id: first_tag() },
        "remove_tag" => StepAction::RemoveTag { tag_id: first_tag() },
        "subscribe" => StepAction::Subscribe { list_id: first_list() },
        "unsubscribe" => StepAction::Unsubscribe { list_id: first_list() },
        "exit" => StepAction::Exit,
        "branch" => StepAction::Branch {
            condition: BranchCondition::Opened { step: last_mail },
            if_yes: BranchTarget::Next,
            if_no: BranchTarget::Exit,
        },
        _ => return None,
    })
}

const STEP_KINDS: [(&str, &str); 9] = [
    ("email", "Send an email"),
    ("wait", "Wait"),
    ("wait_until", "Wait until a day and time"),
    ("branch", "Branch (if… / if not…)"),
    ("add_tag", "Add a tag"),
    ("remove_tag", "Remove a tag"),
    ("subscribe", "Subscribe to a list"),
    ("unsubscribe", "Leave a list"),
    ("exit", "Exit"),
];

#[component]
pub fn AutomationPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let data = Resource::new(id, automation_edit_view);
    view! {
        <div class="mb-4 text-sm"><a href="/automations" class="text-indigo-700 hover:underline">"← Automations"</a></div>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <Editor v=v id=id() data=data/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Editor(
    v: AutomationEditorData,
    id: String,
    data: Resource<Result<AutomationEditorData, AppError>>,
) -> impl IntoView {
    let query = use_query_map();
    let AutomationEditorData {
        automation,
        report,
        runs,
        lists,
        tags,
        segments,
        date_fields,
        fields,
        workspace_zone,
        can_edit,
    } = v;
    provide_context(WorkspaceZone(workspace_zone));
    let fields = StoredValue::new(fields);
    let date_fields = StoredValue::new(date_fields);
    let lists = StoredValue::new(lists);
    let tags = StoredValue::new(tags);
    let segments = StoredValue::new(segments);
    let status = automation.as_ref().map(|a| a.status);
    let editable = can_edit && status != Some(AutomationStatus::Archived);
    let first_list = lists.with_value(|l| l.first().map(|(id, _)| *id).unwrap_or(ListId::NIL));
    let chosen_list = query.with_untracked(|q| q.get("list")).and_then(|l| l.parse::<ListId>().ok());
    let name = RwSignal::new(automation.as_ref().map_or_else(|| "Welcome".to_string(), |a| a.name.clone()));
    let trigger =
        RwSignal::new(automation.as_ref().map_or_else(
            || Trigger::ListConfirmed { list_id: chosen_list.unwrap_or(first_list) },
            |a| a.trigger.clone(),
        ));
    let reentry = RwSignal::new(automation.as_ref().map_or(Reentry::Once, |a| a.reentry));
    let cap_exempt = RwSignal::new(automation.as_ref().is_none_or(|a| a.cap_exempt));
    let steps = RwSignal::new(automation.as_ref().map_or_else(
        || vec![StepInput { id: None, action: starter_mail() }],
        |a| a.steps.iter().map(|s| StepInput { id: Some(s.id), action: s.action.clone() }).collect(),
    ));
    let removed_readers = RwSignal::new(RemovedStepReaders::Next);
    let report = StoredValue::new(report);
    let save = ServerAction::<SaveAutomation>::new();
    let change = ServerAction::<ChangeAutomation>::new();
    let is_new = id == "new";
    let save_id = StoredValue::new(id);
    Effect::new(move |_| {
        if let Some(Ok(new_id)) = save.value().get() {
            if is_new {
                use_navigate()(&format!("/automations/{new_id}"), Default::default());
            } else {
                data.refetch();
            }
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(deleted)) = change.value().get() {
            if deleted {
                use_navigate()("/automations", Default::default());
            } else {
                data.refetch();
            }
        }
    });
    let problems = Memo::new(move |_| match save.value().get() {
        Some(Err(AppError::Invalid(i))) => i.errors,
        _ => Vec::<FieldError>::new(),
    });
    let problem_at = move |path: String| {
        move || {
            problems.with(|ps| {
                ps.iter()
                    .filter(|e| e.field.as_deref().is_some_and(|f| f == path || f.starts_with(&format!("{path}."))))
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        }
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        save.dispatch(SaveAutomation {
            id: save_id.get_value(),
            input: AutomationInput {
                name: name.get_untracked(),
                trigger: trigger.get_untracked(),
                reentry: reentry.get_untracked(),
                cap_exempt: cap_exempt.get_untracked(),
                steps: steps.get_untracked(),
                removed_step_readers: removed_readers.get_untracked(),
            },
        });
    };
    let automation_id = automation.as_ref().map(|a| a.id);
    let added = RwSignal::new(0_u32);
    let trigger_kind = move || match trigger.get() {
        Trigger::ListConfirmed { .. } => "list_confirmed",
        Trigger::TagAdded { .. } => "tag_added",
        Trigger::Event { .. } => "event",
        Trigger::SegmentEntered { .. } => "segment_entered",
        Trigger::DateAnniversary { .. } => "date_anniversary",
    };
    view! {
        <div class="mb-6 flex flex-wrap items-center justify-between gap-3">
            <h1 class="text-2xl font-semibold text-slate-900 break-words">
                {automation.as_ref().map_or_else(|| "New automation".to_string(), |a| a.name.clone())}
                {status.map(|s| {
                    let (label, class) = super::list::status_badge(s);
                    view! { <span class=format!("ml-3 align-middle rounded-full px-2 py-0.5 text-xs font-medium {class}") data-testid="automation-state">{label}</span> }
                })}
            </h1>
            {match (automation_id, can_edit) {
                (Some(aid), true) => Some(view! { <Controls id=aid status=status.unwrap_or_default() change=change/> }),
                _ => None,
            }}
        </div>
        {automation.as_ref().and_then(|a| a.pause_reason.clone()).map(|why| view! {
            <p role="status" class="mb-4 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800" data-testid="automation-pause-reason">{why}</p>
        })}
        {automation.as_ref().and_then(|a| a.warmup_limit_reached).map(|limit| view! {
            <p role="status" class="mb-4 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800" data-testid="automation-warmup">
                {format!("This workspace is warming up: its mail may reach {limit} readers a day, and today's are used. \
                          Readers keep their place, and their mail goes out as the limit allows; an operator can raise it.")}
            </p>
        })}
        {move || change.value().get().and_then(|r| r.err()).map(|e| view! {
            <p role="alert" class="mb-4 rounded-md bg-red-50 px-3 py-2 text-sm text-red-700" data-testid="automation-error">{e.to_string()}</p>
        })}
        {report.with_value(|r| r.clone()).map(|r| view! {
            <div class="mb-6 grid grid-cols-2 gap-3 sm:grid-cols-4" data-testid="automation-figures">
                <Figure label="Entered" value=r.entered/>
                <Figure label="In it now" value=r.active/>
                <Figure label="Finished" value=r.finished/>
                <Figure label="Left early" value=r.exited/>
            </div>
        })}
        <form on:submit=submit novalidate class="space-y-4">
            <Card title="When">
                <label for="automation-name" class="label">"Name"</label>
                <input id="automation-name" class="input" maxlength="200" required disabled=!editable
                    prop:value=name on:change=move |ev| name.set(event_target_value(&ev))/>
                <p class="mt-1 text-xs text-red-600" role="alert">{problem_at("name".into())}</p>
                <div class="mt-4 grid gap-3 sm:grid-cols-2">
                    <div>
                        <label for="automation-trigger" class="label">"Starts when"</label>
                        <select id="automation-trigger" class="input" disabled=!editable data-testid="automation-trigger"
                            on:change=move |ev| trigger.set(match event_target_value(&ev).as_str() {
                                "tag_added" => Trigger::TagAdded { tag_id: tags.with_value(|t| t.first().map(|(id, _)| *id).unwrap_or(TagId::NIL)) },
                                "event" => Trigger::Event { name: String::new() },
                                "segment_entered" => Trigger::SegmentEntered { segment_id: segments.with_value(|s| s.first().map(|(id, _)| *id).unwrap_or(SegmentId::NIL)) },
                                "date_anniversary" => Trigger::DateAnniversary { field: date_fields.with_value(|f| f.first().map(|(k, _)| k.clone()).unwrap_or_default()) },
                                _ => Trigger::ListConfirmed { list_id: first_list },
                            })>
                            <option value="list_confirmed" selected=move || trigger_kind() == "list_confirmed">"A reader is confirmed on a list"</option>
                            <option value="tag_added" selected=move || trigger_kind() == "tag_added">"A reader gets a tag"</option>
                            <option value="event" selected=move || trigger_kind() == "event">"Your app reports an event (API)"</option>
                            <option value="segment_entered" selected=move || trigger_kind() == "segment_entered">"A reader comes into a segment"</option>
                            <option value="date_anniversary" selected=move || trigger_kind() == "date_anniversary">"A date field's anniversary (birthday, renewal)"</option>
                        </select>
                    </div>
                    <div>
                        {move || match trigger.get() {
                            Trigger::ListConfirmed { list_id } => view! {
                                <label for="automation-list" class="label">"List"</label>
                                <select id="automation-list" class="input" disabled=!editable
                                    on:change=move |ev| trigger.set(Trigger::ListConfirmed { list_id: event_target_value(&ev).parse().unwrap_or(ListId::NIL) })>
                                    {lists.with_value(|l| l.iter().map(|(id, n)| view! {
                                        <option value=id.to_string() selected=*id == list_id>{n.clone()}</option>
                                    }).collect_view())}
                                </select>
                            }.into_any(),
                            Trigger::TagAdded { tag_id } => view! {
                                <label for="automation-tag" class="label">"Tag"</label>
                                <TagSelect id="automation-tag".into() tags=tags selected=tag_id disabled=!editable
                                    on_pick=Callback::new(move |t| trigger.set(Trigger::TagAdded { tag_id: t }))/>
                            }.into_any(),
                            Trigger::Event { name: event } => view! {
                                <label for="automation-event" class="label">"Event name"</label>
                                <input id="automation-event" class="input" placeholder="order_placed" disabled=!editable prop:value=event
                                    on:change=move |ev| trigger.set(Trigger::Event { name: event_target_value(&ev) })/>
                                <p class="mt-1 text-xs text-slate-500">"POST /api/v1/readers/{id}/events with this name; its data is {{ event.* }} in the mail."</p>
                            }.into_any(),
                            Trigger::SegmentEntered { segment_id } => view! {
                                <label for="automation-segment" class="label">"Segment"</label>
                                <select id="automation-segment" class="input" disabled=!editable
                                    on:change=move |ev| trigger.set(Trigger::SegmentEntered { segment_id: event_target_value(&ev).parse().unwrap_or(SegmentId::NIL) })>
                                    {segments.with_value(|s| s.is_empty()).then(|| view! { <option value="">"No segments yet: make one on Audience → Segments"</option> })}
                                    {segments.with_value(|s| s.iter().map(|(id, n)| view! {
                                        <option value=id.to_string() selected=*id == segment_id>{n.clone()}</option>
                                    }).collect_view())}
                                </select>
                                <p class="mt-1 text-xs text-slate-500">"Checked every minute; who is in it when you turn the automation on does not count."</p>
                            }.into_any(),
                            Trigger::DateAnniversary { field } => view! {
                                <label for="automation-field" class="label">"Date field"</label>
                                <select id="automation-field" class="input" disabled=!editable
                                    on:change=move |ev| trigger.set(Trigger::DateAnniversary { field: event_target_value(&ev) })>
                                    {date_fields.with_value(|f| f.is_empty()).then(|| view! { <option value="">"No date fields yet: add one on Audience → Fields"</option> })}
                                    {date_fields.with_value(|f| f.iter().map(|(k, l)| view! {
                                        <option value=k.clone() selected=*k == field>{l.clone()}</option>
                                    }).collect_view())}
                                </select>
                                <p class="mt-1 text-xs text-slate-500">"On the day (UTC). Choose “Every time it starts” below to send it each year."</p>
                            }.into_any(),
                        }}
                        <p class="mt-1 text-xs text-red-600" role="alert">{problem_at("trigger".into())}</p>
                    </div>
                    <div>
                        <label for="automation-reentry" class="label">"A reader can go through it"</label>
                        <select id="automation-reentry" class="input" disabled=!editable
                            on:change=move |ev| reentry.set(event_target_value(&ev).parse().unwrap_or_default())>
                            <option value="once" selected=move || reentry.get() == Reentry::Once>"Once"</option>
                            <option value="after_finish" selected=move || reentry.get() == Reentry::AfterFinish>"Again, once the last time ended"</option>
                            <option value="every_time" selected=move || reentry.get() == Reentry::EveryTime>"Every time it starts"</option>
                        </select>
                    </div>
                    <label class="flex items-center gap-2 self-end pb-2 text-sm text-slate-700">
                        <input type="checkbox" disabled=!editable prop:checked=cap_exempt
                            on:change=move |ev| cap_exempt.set(event_target_checked(&ev))/>
                        "Send its mail whatever the frequency cap says"
                    </label>
                </div>
            </Card>
            <Card title="Then">
                <ol class="space-y-3" data-testid="automation-steps">
                    {move || steps.get().into_iter().enumerate().map(|(i, step)| {
                        let is_email = matches!(step.action, StepAction::Email { .. });
                        let stats = step.id.and_then(|sid| report.with_value(|r| r.as_ref().and_then(|r| r.steps.iter().find(|s| s.step_id == sid).cloned())));
                        view! {
                            <li class="rounded-lg border border-slate-200 p-4" data-testid="automation-step">
                                <div class="mb-2 flex flex-wrap items-center justify-between gap-2">
                                    <span class="text-sm font-medium text-slate-900">{format!("{}. {}", i + 1, step.action.summary())}</span>
                                    {editable.then(|| view! {
                                        <button type="button" class="btn-secondary text-xs text-red-600" aria-label=format!("Remove step {}", i + 1)
                                            on:click=move |_| steps.update(|s| { s.remove(i); })>"Remove"</button>
                                    })}
                                </div>
                                <StepEditor i=i action=step.action steps=steps lists=lists tags=tags segments=segments fields=fields editable=editable error=problem_at(format!("steps.{i}"))/>
                                {stats.map(|s| view! {
                                    <p class="mt-2 text-xs text-slate-600" data-testid="step-figures">
                                        {format!("{} reached · {} waiting here", s.entered, s.waiting)}
                                        {is_email.then(|| format!(" · {} sent · {} opened · {} clicked", s.sent, s.opened, s.clicked))}
                                    </p>
                                })}
                            </li>
                        }
                    }).collect_view()}
                </ol>
                <p class="mt-1 text-xs text-red-600" role="alert">{move || problems.with(|ps| ps.iter().filter(|e| e.field.as_deref() == Some("steps")).map(|e| e.message.clone()).collect::<Vec<_>>().join(" "))}</p>
                {editable.then(|| view! {
                    <div class="mt-3 flex flex-wrap items-center gap-3">
                        <label for="add-step" class="sr-only">"Add a step"</label>
                        <select id="add-step" class="input w-auto" data-testid="add-step"
                            on:change=move |ev| {
                                let kind = event_target_value(&ev);
                                if let Some(action) = tags.with_value(|t| lists.with_value(|l| steps.with_untracked(|s| new_step(&kind, t, l, s)))) {
                                    steps.update(|s| s.push(StepInput { id: None, action }));
                                }
                                added.update(|n| *n += 1);
                            }
                            prop:value=move || { added.track(); String::new() }>
                            <option value="">"Add a step…"</option>
                            {STEP_KINDS.iter().map(|(code, label)| view! { <option value=*code>{*label}</option> }).collect_view()}
                        </select>
                        {status.is_some_and(|s| s != AutomationStatus::Draft).then(|| view! {
                            <label for="removed-readers" class="text-sm text-slate-700">"Readers waiting at a step you remove:"</label>
                            <select id="removed-readers" class="input w-auto"
                                on:change=move |ev| removed_readers.set(event_target_value(&ev).parse().unwrap_or_default())>
                                <option value="next">"go on to the next step"</option>
                                <option value="exit">"leave the automation"</option>
                            </select>
                        })}
                    </div>
                })}
            </Card>
            {editable.then(|| view! {
                <div class="flex items-center gap-3">
                    <button type="submit" class="btn-primary" data-testid="save-automation" disabled=move || save.pending().get()>
                        {if is_new { "Create automation" } else { "Save changes" }}
                    </button>
                    {move || match save.value().get() {
                        Some(Ok(_)) => Some(view! { <span class="text-sm text-green-700" role="status">"Saved."</span> }.into_any()),
                        Some(Err(AppError::Invalid(_))) => Some(view! { <span class="text-sm text-red-700" role="alert">"Fix the problems shown above."</span> }.into_any()),
                        Some(Err(e)) => Some(view! { <span class="text-sm text-red-700" role="alert">{e.to_string()}</span> }.into_any()),
                        None => None,
                    }}
                </div>
            })}
        </form>
        {automation_id.filter(|_| can_edit).map(|id| view! { <TestRun id=id/> })}
        {(!is_new).then(|| view! { <Runs runs=runs steps=steps/> })}
    }
}

/// Sends every mail of the automation to one address, now.
#[component]
fn TestRun(id: AutomationId) -> impl IntoView {
    let test = ServerAction::<TestAutomation>::new();
    let address = RwSignal::new(String::new());
    view! {
        <Card title="Try it">
            <p class="mb-3 text-sm text-slate-600">"Each mail of the saved automation, in order, to one address, right away (waits skipped, tags and branches not applied)."</p>
            <form class="flex flex-wrap items-end gap-2" on:submit=move |ev| {
                ev.prevent_default();
                test.dispatch(TestAutomation { id, address: address.get_untracked() });
            }>
                <div class="min-w-60 flex-1">
                    <label for="test-address" class="label">"Send to"</label>
                    <input id="test-address" type="email" class="input" placeholder="you@example.com" data-testid="test-address"
                        prop:value=address on:input=move |ev| address.set(event_target_value(&ev))/>
                </div>
                <button type="submit" class="btn-secondary" data-testid="test-automation" disabled=move || test.pending().get()>"Send the mails"</button>
            </form>
            {move || test.value().get().map(|r| match r {
                Ok(lines) => view! {
                    <ul class="mt-3 text-sm text-slate-700" role="status" data-testid="test-results">
                        {lines.into_iter().map(|l| view! { <li>{l}</li> }).collect_view()}
                    </ul>
                }.into_any(),
                Err(e) => view! { <p class="mt-3 text-sm text-red-700" role="alert">{e.to_string()}</p> }.into_any(),
            })}
        </Card>
    }
}

#[component]
fn Figure(#[prop(into)] label: String, value: i64) -> impl IntoView {
    view! {
        <div class="rounded-xl border border-slate-200 bg-white p-4">
            <p class="text-xs uppercase tracking-wide text-slate-500">{label}</p>
            <p class="text-2xl font-semibold text-slate-900">{value}</p>
        </div>
    }
}

/// Turn on, pause, archive, delete: each as the state allows.
#[component]
fn Controls(id: AutomationId, status: AutomationStatus, change: ServerAction<ChangeAutomation>) -> impl IntoView {
    let confirm_archive = RwSignal::new(false);
    let act = move |action: &'static str| {
        move |_| {
            change.dispatch(ChangeAutomation { id, action: action.into() });
        }
    };
    use AutomationStatus::{Archived, Draft, Live, Paused};
    view! {
        <div class="flex flex-wrap gap-2">
            {matches!(status, Draft | Paused).then(|| view! {
                <button type="button" class="btn-primary" data-testid="start-automation" disabled=move || change.pending().get()
                    on:click=act("start")>{if status == Draft { "Turn on" } else { "Resume" }}</button>
            })}
            {(status == Live).then(|| view! {
                <button type="button" class="btn-secondary" data-testid="pause-automation" on:click=act("pause")>"Pause"</button>
            })}
            {(status == Draft).then(|| view! {
                <button type="button" class="btn-secondary text-red-600" on:click=act("delete")>"Delete"</button>
            })}
            {(status != Archived && status != Draft).then(|| view! {
                <button type="button" class="btn-secondary" on:click=move |_| confirm_archive.set(true)>"Archive"</button>
                <ConfirmDialog open=confirm_archive title="Archive this automation?" confirm_label="Archive" danger=true
                    on_confirm=Callback::new(move |()| { change.dispatch(ChangeAutomation { id, action: "archive".into() }); })>
                    <p class="text-sm text-slate-600">"Readers waiting in it leave, and mail still queued is cancelled. Its figures stay."</p>
                </ConfirmDialog>
            })}
        </div>
    }
}

#[component]
fn TagSelect(
    id: String,
    tags: StoredValue<Vec<(TagId, String)>>,
    selected: TagId,
    disabled: bool,
    on_pick: Callback<TagId>,
) -> impl IntoView {
    let empty = tags.with_value(Vec::is_empty);
    view! {
        <select id=id class="input" disabled=disabled
            on:change=move |ev| on_pick.run(event_target_value(&ev).parse().unwrap_or(TagId::NIL))>
            {empty.then(|| view! { <option value="">"No tags yet: add one on Audience → Tags"</option> })}
            {tags.with_value(|t| t.iter().map(|(tid, n)| view! {
                <option value=tid.to_string() selected=*tid == selected>{n.clone()}</option>
            }).collect_view())}
        </select>
    }
}

/// One step's inputs; a change writes the step back into `steps`.
#[component]
fn StepEditor(
    i: usize,
    action: StepAction,
    steps: RwSignal<Vec<StepInput>>,
    lists: StoredValue<Vec<(ListId, String)>>,
    tags: StoredValue<Vec<(TagId, String)>>,
    segments: StoredValue<Vec<(SegmentId, String)>>,
    fields: StoredValue<Vec<(String, String)>>,
    editable: bool,
    error: impl Fn() -> String + Send + Sync + 'static,
) -> impl IntoView {
    let set = move |a: StepAction| {
        steps.update(|s| {
            if let Some(step) = s.get_mut(i) {
                step.action = a
            }
        })
    };
    let current = move || steps.with_untracked(|s| s.get(i).map(|s| s.action.clone()));
    let inputs = match action {
        StepAction::Email { subject, preheader, body, .. } => view! {
            <div class="grid gap-2">
                <label for=format!("step-{i}-subject") class="label">"Subject"</label>
                <input id=format!("step-{i}-subject") class="input" disabled=!editable prop:value=subject data-testid="step-subject"
                    on:change=move |ev| if let Some(StepAction::Email { preheader, body_format, body, .. }) = current() {
                        set(StepAction::Email { subject: event_target_value(&ev), preheader, body_format, body });
                    }/>
                <label for=format!("step-{i}-preheader") class="label">"Preheader"</label>
                <input id=format!("step-{i}-preheader") class="input" disabled=!editable prop:value=preheader
                    on:change=move |ev| if let Some(StepAction::Email { subject, body_format, body, .. }) = current() {
                        set(StepAction::Email { subject, preheader: event_target_value(&ev), body_format, body });
                    }/>
                <label for=format!("step-{i}-body") class="label">"Body (Markdown)"</label>
                <textarea id=format!("step-{i}-body") class="input min-h-32 font-mono text-sm" disabled=!editable prop:value=body data-testid="step-body"
                    on:change=move |ev| if let Some(StepAction::Email { subject, preheader, body_format, .. }) = current() {
                        set(StepAction::Email { subject, preheader, body_format, body: event_target_value(&ev) });
                    }></textarea>
            </div>
        }.into_any(),
        StepAction::Wait { amount, unit } => view! {
            <div class="flex flex-wrap items-center gap-2">
                <label for=format!("step-{i}-amount") class="text-sm text-slate-700">"Wait"</label>
                <input id=format!("step-{i}-amount") type="number" min="1" class="input w-28" disabled=!editable prop:value=amount.to_string()
                    on:change=move |ev| if let Some(StepAction::Wait { unit, .. }) = current() {
                        set(StepAction::Wait { amount: event_target_value(&ev).trim().parse().unwrap_or(0), unit });
                    }/>
                <label for=format!("step-{i}-unit") class="sr-only">"Unit"</label>
                <select id=format!("step-{i}-unit") class="input w-32" disabled=!editable
                    on:change=move |ev| if let Some(StepAction::Wait { amount, .. }) = current() {
                        set(StepAction::Wait { amount, unit: event_target_value(&ev).parse().unwrap_or_default() });
                    }>
                    {WaitUnit::ALL.iter().map(|u| view! { <option value=u.as_str() selected=*u == unit>{u.as_str()}</option> }).collect_view()}
                </select>
            </div>
        }.into_any(),
        StepAction::AddTag { tag_id } | StepAction::RemoveTag { tag_id } => {
            let adding = matches!(action, StepAction::AddTag { .. });
            view! {
                <label for=format!("step-{i}-tag") class="label">{if adding { "Tag to add" } else { "Tag to remove" }}</label>
                <TagSelect id=format!("step-{i}-tag") tags=tags selected=tag_id disabled=!editable
                    on_pick=Callback::new(move |t| set(if adding { StepAction::AddTag { tag_id: t } } else { StepAction::RemoveTag { tag_id: t } }))/>
            }.into_any()
        }
        StepAction::WaitUntil { weekdays, time, zone, zone_field } => view! {
            <WaitUntilEditor i=i weekdays=weekdays time=time zone=zone zone_field=zone_field steps=steps fields=fields editable=editable/>
        }.into_any(),
        StepAction::Subscribe { list_id } | StepAction::Unsubscribe { list_id } => {
            let joining = matches!(action, StepAction::Subscribe { .. });
            view! {
                <label for=format!("step-{i}-list") class="label">{if joining { "List to subscribe them to" } else { "List to take them off" }}</label>
                <select id=format!("step-{i}-list") class="input" disabled=!editable
                    on:change=move |ev| {
                        let list_id: ListId = event_target_value(&ev).parse().unwrap_or(ListId::NIL);
                        set(if joining { StepAction::Subscribe { list_id } } else { StepAction::Unsubscribe { list_id } });
                    }>
                    {lists.with_value(|l| l.iter().map(|(id, n)| view! {
                        <option value=id.to_string() selected=*id == list_id>{n.clone()}</option>
                    }).collect_view())}
                </select>
                <p class="mt-1 text-xs text-slate-500">{if joining {
                    "Confirmed at once, unless they already have a subscription to it: someone who left the list stays off it."
                } else {
                    "Leaving the list that starts this automation also ends their run."
                }}</p>
            }.into_any()
        }
        StepAction::Exit => view! { <p class="text-sm text-slate-500">"The reader's run ends here."</p> }.into_any(),
        StepAction::Branch { condition, if_yes, if_no } => view! {
            <BranchEditor i=i condition=condition if_yes=if_yes if_no=if_no steps=steps tags=tags segments=segments fields=fields editable=editable/>
        }.into_any(),
    };
    view! {
        {inputs}
        <p class="mt-1 text-xs text-red-600" role="alert">{error}</p>
    }
}

/// A change to a "wait until" step: its days, time, zone and zone field.
type EditWaitUntil<'a> = dyn Fn(&mut Vec<Weekday>, &mut String, &mut String, &mut Option<String>) + 'a;

/// "Wait until": which days (none ticked: the next day), the time, and whose zone.
#[component]
fn WaitUntilEditor(
    i: usize,
    weekdays: Vec<Weekday>,
    time: String,
    zone: String,
    zone_field: Option<String>,
    steps: RwSignal<Vec<StepInput>>,
    fields: StoredValue<Vec<(String, String)>>,
    editable: bool,
) -> impl IntoView {
    let set = move |f: &EditWaitUntil<'_>| {
        steps.update(|s| {
            if let Some(StepAction::WaitUntil { weekdays, time, zone, zone_field }) =
                s.get_mut(i).map(|s| &mut s.action)
            {
                f(weekdays, time, zone, zone_field);
            }
        })
    };
    let mut zones = crate::components::timezone::common_time_zones();
    if !zone.is_empty() && !zones.contains(&zone) {
        zones.insert(0, zone.clone());
    }
    let workspace_zone = use_context::<WorkspaceZone>().map(|z| z.0).unwrap_or_else(|| "UTC".into());
    view! {
        <fieldset class="grid gap-3 sm:grid-cols-2">
            <legend class="label">"On"</legend>
            <div class="flex flex-wrap gap-1 sm:col-span-2" role="group" aria-label="Days of the week">
                {Weekday::ALL.iter().map(|d| {
                    let d = *d;
                    let id = format!("step-{i}-day-{}", d.as_str());
                    let label_for = id.clone();
                    view! {
                        <label for=label_for class="inline-flex min-h-11 min-w-11 items-center justify-center gap-1 rounded-md border border-slate-300 px-2 text-sm">
                            <input id=id type="checkbox" disabled=!editable checked=weekdays.contains(&d)
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    set(&|days, _, _, _| {
                                        days.retain(|x| *x != d);
                                        if on {
                                            days.push(d);
                                            days.sort_by_key(|x| Weekday::ALL.iter().position(|y| y == x));
                                        }
                                    });
                                }/>
                            {d.short_name()}
                        </label>
                    }
                }).collect_view()}
                <p class="w-full text-xs text-slate-500">"None ticked: the next day at that time."</p>
            </div>
            <div>
                <label for=format!("step-{i}-time") class="label">"At"</label>
                <input id=format!("step-{i}-time") type="time" class="input" disabled=!editable prop:value=time
                    on:change=move |ev| { let t = event_target_value(&ev); set(&|_, time, _, _| *time = t.clone()); }/>
            </div>
            <div>
                <label for=format!("step-{i}-zone") class="label">"Time zone"</label>
                <select id=format!("step-{i}-zone") class="input" disabled=!editable
                    on:change=move |ev| { let z = event_target_value(&ev); set(&|_, _, zone, _| *zone = z.clone()); }>
                    <option value="" selected=zone.is_empty()>{format!("The workspace's ({workspace_zone})")}</option>
                    {zones.into_iter().map(|z| { let selected = z == zone; view! { <option value=z.clone() selected=selected>{z.clone()}</option> } }).collect_view()}
                </select>
                <p class="mt-1 text-xs text-slate-500">"The workspace's zone is set in "<a href="/settings" class="text-indigo-700 underline">"Settings"</a>"."</p>
            </div>
            <div class="sm:col-span-2">
                <label for=format!("step-{i}-zone-field") class="label">"Or the reader's own zone, from the field"</label>
                <select id=format!("step-{i}-zone-field") class="input" disabled=!editable
                    on:change=move |ev| {
                        let f = event_target_value(&ev);
                        set(&|_, _, _, field| *field = (!f.is_empty()).then(|| f.clone()));
                    }>
                    <option value="" selected=zone_field.is_none()>"— none: everyone in the zone above —"</option>
                    {fields.with_value(|fs| fs.iter().map(|(key, label)| view! {
                        <option value=key.clone() selected=zone_field.as_deref() == Some(key.as_str())>{label.clone()}</option>
                    }).collect_view())}
                </select>
                <p class="mt-1 text-xs text-slate-500">"A reader whose field is empty or not a zone such as America/New_York waits in the zone above."</p>
            </div>
        </fieldset>
    }
}

/// A step's place in the list and its words ("step 2: Wait 1 day").
type Place = (usize, String);

/// A branch's condition and where each answer leads. Mails are named by their place ("step 1:
/// Welcome"), and only earlier ones can be tested; targets are later steps only.
#[component]
fn BranchEditor(
    i: usize,
    condition: BranchCondition,
    if_yes: BranchTarget,
    if_no: BranchTarget,
    steps: RwSignal<Vec<StepInput>>,
    tags: StoredValue<Vec<(TagId, String)>>,
    segments: StoredValue<Vec<(SegmentId, String)>>,
    fields: StoredValue<Vec<(String, String)>>,
    editable: bool,
) -> impl IntoView {
    let set = move |f: &dyn Fn(&mut BranchCondition, &mut BranchTarget, &mut BranchTarget)| {
        steps.update(|s| {
            if let Some(StepAction::Branch { condition, if_yes, if_no }) = s.get_mut(i).map(|s| &mut s.action) {
                f(condition, if_yes, if_no);
            }
        })
    };
    let (mails, later): (Vec<Place>, Vec<Place>) = steps.with_untracked(|s| {
        let label = |n: usize, a: &StepAction| format!("step {}: {}", n + 1, a.summary());
        (
            s.iter()
                .enumerate()
                .take(i)
                .filter(|(_, x)| matches!(x.action, StepAction::Email { .. }))
                .map(|(n, x)| (n, label(n, &x.action)))
                .collect(),
            s.iter().enumerate().skip(i + 2).map(|(n, x)| (n, label(n, &x.action))).collect(),
        )
    });
    let kind = match condition {
        BranchCondition::Opened { .. } => "opened",
        BranchCondition::Clicked { .. } => "clicked",
        BranchCondition::HasTag { .. } => "has_tag",
        BranchCondition::InSegment { .. } => "in_segment",
        BranchCondition::FieldIs { .. } => "field_is",
    };
    let first_mail = mails.first().map_or(0, |(n, _)| *n);
    let target_select = move |id: String, label: &'static str, current: BranchTarget, yes: bool| {
        let later = later.clone();
        view! {
            <div>
                <label for=id.clone() class="label">{label}</label>
                <select id=id class="input" disabled=!editable
                    on:change=move |ev| {
                        let v = event_target_value(&ev);
                        let t = match v.as_str() {
                            "next" => BranchTarget::Next,
                            "exit" => BranchTarget::Exit,
                            n => BranchTarget::Step { index: n.parse().unwrap_or(0) },
                        };
                        set(&|_, y, n| if yes { *y = t } else { *n = t });
                    }>
                    <option value="next" selected=current == BranchTarget::Next>"go on to the next step"</option>
                    {later.into_iter().map(|(n, l)| view! {
                        <option value=n.to_string() selected=current == BranchTarget::Step { index: n }>{format!("go to {l}")}</option>
                    }).collect_view()}
                    <option value="exit" selected=current == BranchTarget::Exit>"exit the automation"</option>
                </select>
            </div>
        }
    };
    view! {
        <div class="grid gap-3 sm:grid-cols-2">
            <div>
                <label for=format!("step-{i}-condition") class="label">"If the reader"</label>
                <select id=format!("step-{i}-condition") class="input" disabled=!editable data-testid="branch-condition"
                    on:change=move |ev| {
                        let c = match event_target_value(&ev).as_str() {
                            "clicked" => BranchCondition::Clicked { step: first_mail },
                            "has_tag" => BranchCondition::HasTag { tag_id: tags.with_value(|t| t.first().map(|(id, _)| *id).unwrap_or(TagId::NIL)) },
                            "in_segment" => BranchCondition::InSegment { segment_id: segments.with_value(|s| s.first().map(|(id, _)| *id).unwrap_or(SegmentId::NIL)) },
                            "field_is" => BranchCondition::FieldIs { field: fields.with_value(|f| f.first().map(|(k, _)| k.clone()).unwrap_or_default()), value: String::new() },
                            _ => BranchCondition::Opened { step: first_mail },
                        };
                        set(&|cond, _, _| *cond = c.clone());
                    }>
                    <option value="opened" selected=kind == "opened">"opened a mail"</option>
                    <option value="clicked" selected=kind == "clicked">"clicked in a mail"</option>
                    <option value="has_tag" selected=kind == "has_tag">"has a tag"</option>
                    <option value="in_segment" selected=kind == "in_segment">"is in a segment"</option>
                    <option value="field_is" selected=kind == "field_is">"has a field value"</option>
                </select>
            </div>
            <div>
                {match condition {
                    BranchCondition::Opened { step } | BranchCondition::Clicked { step } => view! {
                        <label for=format!("step-{i}-mail") class="label">"Which mail"</label>
                        <select id=format!("step-{i}-mail") class="input" disabled=!editable
                            on:change=move |ev| {
                                let n: usize = event_target_value(&ev).parse().unwrap_or(0);
                                set(&|cond, _, _| match cond {
                                    BranchCondition::Opened { step } | BranchCondition::Clicked { step } => *step = n,
                                    _ => {}
                                });
                            }>
                            {mails.is_empty().then(|| view! { <option value="">"Add an email step before this branch"</option> })}
                            {mails.into_iter().map(|(n, l)| view! { <option value=n.to_string() selected=n == step>{l}</option> }).collect_view()}
                        </select>
                    }.into_any(),
                    BranchCondition::HasTag { tag_id } => view! {
                        <label for=format!("step-{i}-branch-tag") class="label">"Tag"</label>
                        <TagSelect id=format!("step-{i}-branch-tag") tags=tags selected=tag_id disabled=!editable
                            on_pick=Callback::new(move |t| set(&|cond, _, _| *cond = BranchCondition::HasTag { tag_id: t }))/>
                    }.into_any(),
                    BranchCondition::InSegment { segment_id } => view! {
                        <label for=format!("step-{i}-segment") class="label">"Segment"</label>
                        <select id=format!("step-{i}-segment") class="input" disabled=!editable
                            on:change=move |ev| {
                                let id: SegmentId = event_target_value(&ev).parse().unwrap_or(SegmentId::NIL);
                                set(&|cond, _, _| *cond = BranchCondition::InSegment { segment_id: id });
                            }>
                            {segments.with_value(|s| s.is_empty()).then(|| view! { <option value="">"No segments yet: make one on Audience → Segments"</option> })}
                            {segments.with_value(|s| s.iter().map(|(id, n)| view! {
                                <option value=id.to_string() selected=*id == segment_id>{n.clone()}</option>
                            }).collect_view())}
                        </select>
                    }.into_any(),
                    BranchCondition::FieldIs { field, value } => view! {
                        <div class="grid gap-2 sm:grid-cols-2">
                            <div>
                                <label for=format!("step-{i}-field") class="label">"Field"</label>
                                <select id=format!("step-{i}-field") class="input" disabled=!editable
                                    on:change=move |ev| {
                                        let f = event_target_value(&ev);
                                        set(&|cond, _, _| if let BranchCondition::FieldIs { field, .. } = cond { *field = f.clone() });
                                    }>
                                    {fields.with_value(|f| f.is_empty()).then(|| view! { <option value="">"No fields yet: add one on Audience → Fields"</option> })}
                                    {fields.with_value(|fs| fs.iter().map(|(key, label)| view! {
                                        <option value=key.clone() selected=*key == field>{label.clone()}</option>
                                    }).collect_view())}
                                </select>
                            </div>
                            <div>
                                <label for=format!("step-{i}-field-value") class="label">"Is (ignoring case)"</label>
                                <input id=format!("step-{i}-field-value") class="input" disabled=!editable prop:value=value
                                    on:change=move |ev| {
                                        let v = event_target_value(&ev);
                                        set(&|cond, _, _| if let BranchCondition::FieldIs { value, .. } = cond { *value = v.clone() });
                                    }/>
                            </div>
                        </div>
                    }.into_any(),
                }}
            </div>
            {target_select(format!("step-{i}-if-yes"), "If so", if_yes, true)}
            {target_select(format!("step-{i}-if-no"), "If not", if_no, false)}
        </div>
    }
}

/// The latest readers in it, where each is and since when.
#[component]
fn Runs(runs: Vec<Run>, steps: RwSignal<Vec<StepInput>>) -> impl IntoView {
    let step_name = move |id| {
        steps.with_untracked(|s| {
            s.iter().position(|x| x.id == Some(id)).map(|i| format!("{}. {}", i + 1, s[i].action.summary()))
        })
    };
    view! {
        <Card title="Readers in it">
            {if runs.is_empty() {
                view! { <p class="text-sm text-slate-500" data-testid="automation-runs-empty">"Nobody yet. Readers appear here the moment its trigger lets them in."</p> }.into_any()
            } else {
                view! {
                    <div class="overflow-x-auto">
                        <table class="w-full text-left text-sm" data-testid="automation-runs">
                            <thead class="text-xs uppercase text-slate-500">
                                <tr><th class="py-2 pr-3">"Reader"</th><th class="py-2 pr-3">"Where"</th><th class="py-2 pr-3">"Entered"</th></tr>
                            </thead>
                            <tbody class="divide-y divide-slate-100">
                                {runs.into_iter().map(|r| {
                                    let at = match r.state {
                                        RunState::Waiting => view! {
                                            {format!("Waiting at {}", r.step_id.and_then(step_name).unwrap_or_else(|| "a step".into()))}
                                            {r.due_at.map(|due| view! { " until " <LocalTimeOf at=due/> })}
                                        }
                                        .into_any(),
                                        RunState::Finished => "Finished".into_any(),
                                        RunState::Exited => format!("Left: {}", r.exit_reason.unwrap_or_default()).into_any(),
                                    };
                                    view! {
                                        <tr>
                                            <td class="py-2 pr-3 break-all"><a href=format!("/audience/readers/{}", r.reader_id) class="text-indigo-700 hover:underline">{r.email}</a></td>
                                            <td class="py-2 pr-3">{at}</td>
                                            <td class="py-2 pr-3 whitespace-nowrap"><LocalTimeOf at=r.entered_at/></td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any()
            }}
        </Card>
    }
}
