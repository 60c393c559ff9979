//! A branch step's inputs: its condition and where each answer leads.

use herald_types::{BranchCondition, BranchTarget, SegmentId, StepAction, StepInput, TagId};
use leptos::prelude::*;

use super::tag_select::TagSelect;

/// A step's place in the list and its words ("step 2: Wait 1 day").
type Place = (usize, String);

/// A branch's condition and where each answer leads. Mails are named by their place ("step 1:
/// Welcome"), and only earlier ones can be tested; targets are later steps only.
#[component]
pub(super) fn BranchEditor(
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
