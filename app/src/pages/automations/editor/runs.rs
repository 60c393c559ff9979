//! The automation's figures and the readers in it.

use herald_types::{Run, RunState, StepInput};
use leptos::prelude::*;

use crate::components::ui::{Card, LocalTimeOf};

#[component]
pub(super) fn Figure(#[prop(into)] label: String, value: i64) -> impl IntoView {
    view! {
        <div class="rounded-xl border border-slate-200 bg-white p-4">
            <p class="text-xs uppercase tracking-wide text-slate-500">{label}</p>
            <p class="text-2xl font-semibold text-slate-900">{value}</p>
        </div>
    }
}

/// The latest readers in it, where each is and since when.
#[component]
pub(super) fn Runs(runs: Vec<Run>, steps: RwSignal<Vec<StepInput>>) -> impl IntoView {
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
