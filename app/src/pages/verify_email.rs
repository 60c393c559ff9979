//! `/verify-email?token=…`: the link from the sign-up mail. Opening it shows a button; only
//! pressing it (a POST) confirms the address. Mail scanners (Safe Links and the like) fetch every
//! link in a message: a page that confirmed on GET would confirm an address for whoever signed up
//! with it, before its owner ever saw the mail.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::auth::VerifyEmail;
use crate::components::ui::{ActionError, AuthCard};
use crate::error::AppError;

#[component]
pub fn VerifyEmailPage() -> impl IntoView {
    let action = ServerAction::<VerifyEmail>::new();
    let token = move || use_query_map().with(|q| q.get("token")).unwrap_or_default();
    let done = move || match action.value().get() {
        Some(Ok(())) => Some(
            "Thank you: your address is confirmed. You can now send campaigns, create API keys and join workspaces."
                .to_string(),
        ),
        Some(Err(AppError::Conflict(m))) => Some(m),
        _ => None,
    };
    view! {
        <AuthCard title="Confirm your address">
            <Show
                when=move || done().is_none()
                fallback=move || view! {
                    <p role="status" class="text-sm text-emerald-800" data-testid="email-verified">{done}</p>
                }
            >
                <Show
                    when=move || !token().trim().is_empty()
                    fallback=|| view! {
                        <p role="alert" class="text-sm text-red-700">
                            "This confirmation link is incomplete: open the whole link from the mail."
                        </p>
                    }
                >
                    <ActionForm action=action attr:class="space-y-4">
                        <input type="hidden" name="token" value=token/>
                        <p class="text-sm text-slate-600">"Confirm that this address is yours to finish setting up your account."</p>
                        <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>
                            "Confirm my address"
                        </button>
                        <ActionError value=action.value()/>
                    </ActionForm>
                </Show>
            </Show>
            <p class="mt-6 text-center text-sm text-slate-500">
                <a href="/" class="text-indigo-600 hover:underline">"Go to Herald"</a>
            </p>
        </AuthCard>
    }
}
