//! `/automations/:id` (`new` for a new one): an automation as a vertical flow — its trigger,
//! then each step with how many readers reached it, wait at it, and (an email) were sent,
//! opened and clicked — the controls draft → live ⇄ paused → archived, and the readers in it.
//! A new one starts as a welcome mail (`?list=` picks the list that triggers it).

mod branch;
mod controls;
mod mail_step;
mod runs;
mod server;
mod steps;
mod tag_select;
mod wait_until;

use herald_types::{
    AutomationInput, AutomationStatus, FieldError, ListId, Reentry, RemovedStepReaders, SegmentId, StepAction,
    StepInput, TagId, Trigger,
};
use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map, use_query_map};

use crate::components::ui::{Card, LoadError};
use crate::error::AppError;
use controls::{Controls, TestRun};
use runs::{Figure, Runs};
pub use server::{
    AutomationEditView, AutomationEditorData, ChangeAutomation, PreviewAutomationMail, SaveAutomation, TestAutomation,
    automation_edit_view, change_automation, preview_automation_mail, save_automation, test_automation,
};
use steps::{STEP_KINDS, StepEditor, new_step, starter_mail};
use tag_select::TagSelect;
use wait_until::WorkspaceZone;

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
        welcome_blocks,
        mail_blocks,
        can_edit,
    } = v;
    let mail_blocks = StoredValue::new(mail_blocks);
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
        || vec![StepInput { id: None, action: starter_mail(welcome_blocks.clone()) }],
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
            <h1 class="min-w-0 text-2xl font-semibold wrap-anywhere text-slate-900">
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
                                <StepEditor i=i action=step.action steps=steps lists=lists tags=tags segments=segments fields=fields editable=editable
                                    error=problem_at(format!("steps.{i}")) problems=problems/>
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
                                let made = mail_blocks.with_value(|mail| {
                                    tags.with_value(|t| lists.with_value(|l| steps.with_untracked(|s| new_step(&kind, t, l, s, mail))))
                                });
                                if let Some(action) = made {
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
