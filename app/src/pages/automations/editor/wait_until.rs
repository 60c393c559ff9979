//! A "wait until" step's inputs: its days, time and zone.

use herald_types::{StepAction, StepInput, Weekday};
use leptos::prelude::*;

/// The workspace's time zone, for the "wait until" steps' zone choice.
#[derive(Clone)]
pub(super) struct WorkspaceZone(pub(super) String);

/// A change to a "wait until" step: its days, time, zone and zone field.
type EditWaitUntil<'a> = dyn Fn(&mut Vec<Weekday>, &mut String, &mut String, &mut Option<String>) + 'a;

/// "Wait until": which days (none ticked: the next day), the time, and whose zone.
#[component]
pub(super) fn WaitUntilEditor(
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
