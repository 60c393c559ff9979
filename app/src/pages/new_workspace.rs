//! `/workspaces/new`: the first step after sign-up, and "+ New workspace" later.

use leptos::prelude::*;

use crate::auth::CreateWorkspace;
use crate::components::ui::ActionError;
use crate::components::ui::AuthCard;

#[component]
pub fn NewWorkspacePage() -> impl IntoView {
    let action = ServerAction::<CreateWorkspace>::new();
    let name = RwSignal::new(String::new());
    let suggested = move || {
        let mut s = String::new();
        for c in name.get().to_lowercase().chars() {
            if c.is_ascii_alphanumeric() {
                s.push(c);
            } else if !s.is_empty() && !s.ends_with('-') {
                s.push('-');
            }
        }
        s.trim_end_matches('-').to_string()
    };
    view! {
        <AuthCard title="Create a workspace">
            <p class="-mt-3 mb-5 text-sm text-slate-500">
                "A workspace holds one newsletter's readers, campaigns and team. You can create more later."
            </p>
            <ActionForm action=action attr:class="space-y-4">
                <div>
                    <label for="ws-name" class="label">"Workspace name"</label>
                    <input id="ws-name" name="name" type="text" required maxlength="80" autofocus class="input"
                        placeholder="Acme Weekly" on:input=move |ev| name.set(event_target_value(&ev))/>
                </div>
                <div>
                    <label for="ws-slug" class="label">"Address"</label>
                    <div class="flex items-center gap-1 text-sm text-slate-500">
                        <span>"/s/"</span>
                        <input id="ws-slug" name="slug" type="text" maxlength="48" pattern="[a-z0-9][a-z0-9-]*[a-z0-9]"
                            class="input" placeholder=suggested/>
                    </div>
                    <p class="mt-1 text-xs text-slate-600" data-testid="slug-suggestion">
                        {move || match suggested() {
                            s if s.is_empty() => "Used in your public subscribe page; made from the name unless you write one.".to_string(),
                            s => format!("Used in your public subscribe page. Leave it empty for /s/{s}"),
                        }}
                    </p>
                </div>
                <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>"Create workspace"</button>
                <ActionError value=action.value()/>
            </ActionForm>
            <p class="mt-6 text-center text-sm"><a href="/" class="text-slate-500 hover:underline">"Back"</a></p>
        </AuthCard>
    }
}
