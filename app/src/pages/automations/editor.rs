//! `/automations/:id` (`new` for a new one): an automation as a vertical flow — its trigger,
//! then each step with how many readers reached it, wait at it, and (an email) were sent,
//! opened and clicked — the controls draft → live ⇄ paused → archived, and the readers in it.
//! A new one starts as a welcome mail (`?list=` picks the list that triggers it).

use herald_types::{
    Automation, AutomationId, AutomationInput, AutomationReport, AutomationStatus, BodyFormat, FieldError, ListId,
    Reentry, RemovedStepReaders, Run, RunState, StepAction, StepInput, TagId, Trigger, WaitUnit,
};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use leptos_router::hooks::{use_navigate, use_params_map, use_query_map};
use serde::{Deserialize, Serialize};

use crate::components::ui::{Card, ConfirmDialog, LoadError, short_time_of};
use crate::error::AppError;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AutomationEditorData {
    pub automation: Option<Automation>,
    pub report: Option<AutomationReport>,
    pub runs: Vec<Run>,
    pub lists: Vec<(ListId, String)>,
    pub tags: Vec<(TagId, String)>,
    pub can_edit: bool,
}

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
        can_edit: m.role.can_author(),
    };
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

/// The mail a new automation starts with.
fn starter_mail() -> StepAction {
    StepAction::Email {
        subject: "Welcome to {{ workspace.name }}".into(),
        preheader: String::new(),
        body_format: BodyFormat::Markdown,
        body: "Hi {{ reader.name | default(\"there\") }},\n\nThank you for joining. Here is what to expect from us, and how often.\n\nSee you in your inbox!".into(),
    }
}

fn new_step(kind: &str, tags: &[(TagId, String)]) -> Option<StepAction> {
    let first_tag = || tags.first().map(|(id, _)| *id).unwrap_or(TagId::NIL);
    Some(match kind {
        "email" => StepAction::Email {
            subject: String::new(),
            preheader: String::new(),
            body_format: BodyFormat::Markdown,
            body: String::new(),
        },
        "wait" => StepAction::Wait { amount: 1, unit: WaitUnit::Days },
        "add_tag" => StepAction::AddTag { tag_id: first_tag() },
        "remove_tag" => StepAction::RemoveTag { tag_id: first_tag() },
        "exit" => StepAction::Exit,
        _ => return None,
    })
}

const STEP_KINDS: [(&str, &str); 5] = [
    ("email", "Send an email"),
    ("wait", "Wait"),
    ("add_tag", "Add a tag"),
    ("remove_tag", "Remove a tag"),
    ("exit", "Exit"),
];

#[component]
pub fn AutomationPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let data = Resource::new(id, automation_edit_view);
    view! {
        <div class="mb-4 text-sm"><a href="/automations" class="text-indigo-700 hover:underline">"← Automations"</a></div>
        <Suspense fallback=|| view! { <p class="text-slate-400">"Loading…"</p> }>
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
    let AutomationEditorData { automation, report, runs, lists, tags, can_edit } = v;
    let lists = StoredValue::new(lists);
    let tags = StoredValue::new(tags);
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
                                _ => Trigger::ListConfirmed { list_id: first_list },
                            })>
                            <option value="list_confirmed" selected=move || trigger_kind() == "list_confirmed">"A reader is confirmed on a list"</option>
                            <option value="tag_added" selected=move || trigger_kind() == "tag_added">"A reader gets a tag"</option>
                            <option value="event" selected=move || trigger_kind() == "event">"Your app reports an event (API)"</option>
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
                                <StepEditor i=i action=step.action steps=steps tags=tags editable=editable error=problem_at(format!("steps.{i}"))/>
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
                                if let Some(action) = tags.with_value(|t| new_step(&event_target_value(&ev), t)) {
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
        {(!is_new).then(|| view! { <Runs runs=runs steps=steps/> })}
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
    tags: StoredValue<Vec<(TagId, String)>>,
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
        StepAction::Exit => view! { <p class="text-sm text-slate-500">"The reader's run ends here."</p> }.into_any(),
    };
    view! {
        {inputs}
        <p class="mt-1 text-xs text-red-600" role="alert">{error}</p>
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
                                        RunState::Waiting => format!(
                                            "Waiting at {}{}",
                                            r.step_id.and_then(step_name).unwrap_or_else(|| "a step".into()),
                                            r.due_at.map(|d| format!(" until {}", short_time_of(&d))).unwrap_or_default()
                                        ),
                                        RunState::Finished => "Finished".into(),
                                        RunState::Exited => format!("Left: {}", r.exit_reason.unwrap_or_default()),
                                    };
                                    view! {
                                        <tr>
                                            <td class="py-2 pr-3 break-all"><a href=format!("/audience/readers/{}", r.reader_id) class="text-indigo-700 hover:underline">{r.email}</a></td>
                                            <td class="py-2 pr-3">{at}</td>
                                            <td class="py-2 pr-3 whitespace-nowrap">{short_time_of(&r.entered_at)}</td>
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
