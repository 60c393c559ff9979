//! `/reset-password?token=…`: the link from the reset mail. A new password ends every session of
//! the account; the person then logs in with it.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::components::ui::ActionError;
use crate::components::ui::AuthCard;
use crate::error::AppError;

#[server(prefix = "/rpc", endpoint = "reset_password")]
pub async fn reset_password(token: String, password: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let state = state()?;
    if !state.auth_ip_limiter.check(&format!("reset:{}", client_limiter_key().await)) {
        return Err(AppError::RateLimited.respond());
    }
    herald_engine::accounts::reset_password(&state.db, &state.signer, &token, &password).await?;
    // This browser's session, if any, was one of those that ended.
    log_out(&session().await?).await?;
    leptos_axum::redirect("/login?reset=done");
    Ok(())
}

#[component]
pub fn ResetPasswordPage() -> impl IntoView {
    let action = ServerAction::<ResetPassword>::new();
    let token = move || use_query_map().with(|q| q.get("token")).unwrap_or_default();
    view! {
        <AuthCard title="Choose a new password">
            <ActionForm action=action attr:class="space-y-4">
                <input type="hidden" name="token" value=token/>
                <div>
                    <label for="password" class="label">"New password"</label>
                    <input id="password" name="password" type="password" required minlength="10" autocomplete="new-password" autofocus class="input"/>
                    <p class="mt-1 text-xs text-slate-500">"At least 10 characters. Every device logged in to your account is logged out."</p>
                </div>
                <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>"Set the new password"</button>
                <ActionError value=action.value()/>
            </ActionForm>
            <p class="mt-6 text-center text-sm text-slate-500">
                <a href="/forgot-password" class="text-indigo-600 hover:underline">"Ask for a new link"</a>
            </p>
        </AuthCard>
    }
}
