//! `/signup`: the first step of sign-up, the address and a name. The account is made on
//! `/signup/finish`, the page the mailed link opens (see `herald_engine::accounts`).

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::auth::Signup;
use crate::components::ui::ActionError;
use crate::components::ui::AuthCard;

#[component]
pub fn SignupPage() -> impl IntoView {
    let action = ServerAction::<Signup>::new();
    let next = move || use_query_map().with(|q| q.get("next")).unwrap_or_default();
    let login_href = move || format!("/login?next={}", next());
    let email = RwSignal::new(String::new());
    let sent = move || matches!(action.value().get(), Some(Ok(())));
    view! {
        <AuthCard title="Create your account">
            <Show when=move || !sent() fallback=move || view! {
                <div role="status" class="space-y-3 text-sm text-slate-700" data-testid="signup-sent">
                    <p class="font-medium">"Check your inbox"</p>
                    <p>
                        "We have sent a link to " <strong>{email.get_untracked()}</strong>
                        " to finish creating your account. It works for 24 hours; "
                        "check your spam folder if it does not arrive in a few minutes."
                    </p>
                    <button type="button" class="text-indigo-600 hover:underline"
                        on:click=move |_| action.value().set(None)>"Use another address"</button>
                </div>
            }>
                <ActionForm action=action attr:class="space-y-4">
                    <input type="hidden" name="next" value=next/>
                    <div>
                        <label for="name" class="label">"Your name"</label>
                        <input id="name" name="name" type="text" autocomplete="name" maxlength="100" class="input"/>
                    </div>
                    <div>
                        <label for="email" class="label">"Email"</label>
                        <input id="email" name="email" type="email" required autocomplete="email" class="input"
                            prop:value=email on:input=move |ev| email.set(event_target_value(&ev))/>
                        <p class="mt-1 text-xs text-slate-500">"We mail you a link; you choose a password when you open it."</p>
                    </div>
                    <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>
                        {move || if action.pending().get() { "Sending…" } else { "Create account" }}
                    </button>
                    <ActionError value=action.value()/>
                </ActionForm>
            </Show>
            <p class="mt-6 text-center text-sm text-slate-500">
                "Already have an account? " <a href=login_href class="text-indigo-600 hover:underline">"Log in"</a>
            </p>
        </AuthCard>
    }
}
