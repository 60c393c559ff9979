//! `/login`

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::auth::Login;
use crate::components::ui::ActionError;
use crate::components::ui::AuthCard;

#[component]
pub fn LoginPage() -> impl IntoView {
    let action = ServerAction::<Login>::new();
    let next = move || use_query_map().with(|q| q.get("next")).unwrap_or_default();
    let signup_href = move || format!("/signup?next={}", next());
    let after_reset = move || use_query_map().with(|q| q.get("reset").as_deref() == Some("done"));
    let after_delete = move || use_query_map().with(|q| q.get("deleted").as_deref() == Some("1"));
    view! {
        <AuthCard title="Log in">
            {move || after_reset().then(|| view! {
                <p role="status" class="mb-4 rounded-md bg-emerald-50 px-3 py-2 text-sm text-emerald-800">
                    "Your password has been changed. Log in with the new one."
                </p>
            })}
            {move || after_delete().then(|| view! {
                <p role="status" class="mb-4 rounded-md bg-slate-100 px-3 py-2 text-sm text-slate-700">
                    "Your account has been deleted."
                </p>
            })}
            <ActionForm action=action attr:class="space-y-4">
                <input type="hidden" name="next" value=next/>
                <div>
                    <label for="email" class="label">"Email"</label>
                    <input id="email" name="email" type="email" required autocomplete="username" autofocus class="input"/>
                </div>
                <div>
                    <div class="flex items-baseline justify-between">
                        <label for="password" class="label">"Password"</label>
                        <a href="/forgot-password" class="text-xs text-indigo-600 hover:underline">"Forgot your password?"</a>
                    </div>
                    <input id="password" name="password" type="password" required autocomplete="current-password" class="input"/>
                </div>
                <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>
                    {move || if action.pending().get() { "Logging in…" } else { "Log in" }}
                </button>
                <ActionError value=action.value()/>
            </ActionForm>
            <p class="mt-6 text-center text-sm text-slate-500">
                "New to Herald? " <a href=signup_href class="text-indigo-600 hover:underline">"Create an account"</a>
            </p>
        </AuthCard>
    }
}
