//! `/signup`

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::auth::Signup;
use crate::components::ui::ActionError;
use crate::components::ui::AuthCard;

/// Mirrors the engine's rule (herald_engine::infra::password) so it can be shown before submitting.
const PASSWORD_MIN: usize = 10;

#[component]
pub fn SignupPage() -> impl IntoView {
    let action = ServerAction::<Signup>::new();
    let next = move || use_query_map().with(|q| q.get("next")).unwrap_or_default();
    let login_href = move || format!("/login?next={}", next());
    let password = RwSignal::new(String::new());
    let long_enough = move || password.with(|p| p.chars().count() >= PASSWORD_MIN);
    view! {
        <AuthCard title="Create your account">
            <ActionForm action=action attr:class="space-y-4">
                <input type="hidden" name="next" value=next/>
                <div>
                    <label for="name" class="label">"Your name"</label>
                    <input id="name" name="name" type="text" autocomplete="name" maxlength="100" class="input"/>
                </div>
                <div>
                    <label for="email" class="label">"Email"</label>
                    <input id="email" name="email" type="email" required autocomplete="email" class="input"/>
                </div>
                <div>
                    <label for="password" class="label">"Password"</label>
                    <input id="password" name="password" type="password" required minlength="10" maxlength="128"
                        autocomplete="new-password" class="input" aria-describedby="password-rules"
                        on:input=move |ev| password.set(event_target_value(&ev))/>
                    <p id="password-rules" class="mt-1 text-xs"
                        class=("text-emerald-600", long_enough) class=("text-slate-500", move || !long_enough())>
                        {move || if long_enough() { "✓ At least 10 characters" } else { "At least 10 characters (up to 128). A passphrase of a few words works well." }}
                    </p>
                </div>
                <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>
                    {move || if action.pending().get() { "Creating account…" } else { "Create account" }}
                </button>
                <ActionError value=action.value()/>
            </ActionForm>
            <p class="mt-6 text-center text-sm text-slate-500">
                "Already have an account? " <a href=login_href class="text-indigo-600 hover:underline">"Log in"</a>
            </p>
        </AuthCard>
    }
}
