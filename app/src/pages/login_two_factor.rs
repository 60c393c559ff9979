//! `/login/two-factor`: the second step of a login for an account with two-factor on. The
//! password step left the user in the session as "pending"; a code (or a recovery code) here
//! finishes the login.

use leptos::prelude::*;

use crate::auth::LoginSecondFactor;
use crate::components::ui::ActionError;
use crate::components::ui::AuthCard;

#[component]
pub fn LoginTwoFactorPage() -> impl IntoView {
    let action = ServerAction::<LoginSecondFactor>::new();
    view! {
        <AuthCard title="Two-factor authentication">
            <ActionForm action=action attr:class="space-y-4">
                <div>
                    <label for="code" class="label">"Code"</label>
                    <input id="code" name="code" type="text" required autocomplete="one-time-code" autofocus
                        inputmode="text" maxlength="20" spellcheck="false" class="input font-mono tracking-widest"/>
                    <p class="mt-1 text-xs text-slate-500">
                        "The six digits your authenticator app shows for Herald, or one of your recovery codes."
                    </p>
                </div>
                <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>"Verify"</button>
                <ActionError value=action.value()/>
            </ActionForm>
            <p class="mt-6 text-center text-sm text-slate-500">
                <a href="/login" class="text-indigo-600 hover:underline">"Start again"</a>
            </p>
        </AuthCard>
    }
}
