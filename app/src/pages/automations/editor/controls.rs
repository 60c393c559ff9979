//! The test send and the state controls: turn on, pause, archive, delete.

use herald_types::{AutomationId, AutomationStatus};
use leptos::prelude::*;

use super::server::{ChangeAutomation, TestAutomation};
use crate::components::ui::{Card, ConfirmDialog};

/// Sends every mail of the automation to one address, now.
#[component]
pub(super) fn TestRun(id: AutomationId) -> impl IntoView {
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

/// Turn on, pause, archive, delete: each as the state allows.
#[component]
pub(super) fn Controls(
    id: AutomationId,
    status: AutomationStatus,
    change: ServerAction<ChangeAutomation>,
) -> impl IntoView {
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
