//! The steps: the kinds one can add, a new step of each, the starter mail, and one step's inputs.

use herald_types::{
    BodyFormat, BranchCondition, BranchTarget, FieldError, ListId, SegmentId, StepAction, StepInput, TagId, WaitUnit,
};
use leptos::prelude::*;

use super::branch::BranchEditor;
use super::mail_step::MailStep;
use super::tag_select::TagSelect;
use super::wait_until::WaitUntilEditor;

/// The mail a new automation starts with: `welcome`, blocks in the workspace's brand.
pub(super) fn starter_mail(welcome: String) -> StepAction {
    StepAction::Email {
        subject: "Welcome to {{ workspace.name }}".into(),
        preheader: String::new(),
        body_format: BodyFormat::Blocks,
        body: welcome,
    }
}

/// A new step of `kind` at the end of `steps`.
pub(super) fn new_step(
    kind: &str,
    tags: &[(TagId, String)],
    lists: &[(ListId, String)],
    steps: &[StepInput],
    mail: &str,
) -> Option<StepAction> {
    let first_tag = || tags.first().map(|(id, _)| *id).unwrap_or(TagId::NIL);
    let first_list = || lists.first().map(|(id, _)| *id).unwrap_or(ListId::NIL);
    let last_mail = steps.iter().rposition(|s| matches!(s.action, StepAction::Email { .. })).unwrap_or(0);
    Some(match kind {
        // Blocks in the workspace's brand, as a new campaign starts.
        "email" => StepAction::Email {
            subject: String::new(),
            preheader: String::new(),
            body_format: BodyFormat::Blocks,
            body: mail.to_string(),
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

pub(super) const STEP_KINDS: [(&str, &str); 9] = [
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

/// One step's inputs; a change writes the step back into `steps`.
#[component]
pub(super) fn StepEditor(
    i: usize,
    action: StepAction,
    steps: RwSignal<Vec<StepInput>>,
    lists: StoredValue<Vec<(ListId, String)>>,
    tags: StoredValue<Vec<(TagId, String)>>,
    segments: StoredValue<Vec<(SegmentId, String)>>,
    fields: StoredValue<Vec<(String, String)>>,
    editable: bool,
    error: impl Fn() -> String + Send + Sync + 'static,
    /// The last save's problems, every step's (a mail's blocks mark their own fields).
    problems: Memo<Vec<FieldError>>,
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
        StepAction::Email { subject, preheader, body_format, body } => view! {
            <MailStep i=i subject=subject preheader=preheader body_format=body_format body=body steps=steps editable=editable problems=problems/>
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
