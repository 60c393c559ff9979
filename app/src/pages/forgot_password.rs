//! `/forgot-password`: asks for a reset link by mail. The answer is the same whether or not the
//! address has an account.

use leptos::prelude::*;

use crate::components::ui::ActionError;
use crate::components::ui::AuthCard;
use crate::error::AppError;

#[server(prefix = "/rpc", endpoint = "request_password_reset")]
pub async fn request_password_reset(email: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let state = state()?;
    if !state.auth_ip_limiter.check(&format!("reset:{}", client_limiter_key().await)) {
        return Err(AppError::RateLimited.respond());
    }
    let email = herald_engine::Email::parse(&email)?;
    // The look-up and the mail happen after the answer: a known address would otherwise cost
    // an update and a queued job more than an unknown one, and the time to answer would say
    // which addresses have accounts.
    tokio::spawn(async move {
        let (db, jobs, signer, base) = (&state.db, &state.jobs, &state.signer, &state.base_url);
        if let Err(e) = herald_engine::accounts::request_password_reset(db, jobs, signer, base, email.as_str()).await {
            tracing::error!(error = ?e, "password reset not mailed");
        }
    });
    Ok(())
}

#[component]
pub fn ForgotPasswordPage() -> impl IntoView {
    let action = ServerAction::<RequestPasswordReset>::new();
    let sent = move || matches!(action.value().get(), Some(Ok(())));
    view! {
        <AuthCard title="Reset your password">
            <Show when=move || !sent() fallback=|| view! {
                <p role="status" class="text-sm text-slate-700" data-testid="reset-sent">
                    "If an account uses that address, we have sent it a link to choose a new password. "
                    "It works once, for an hour. Check your spam folder if it does not arrive."
                </p>
            }>
                <ActionForm action=action attr:class="space-y-4">
                    <div>
                        <label for="email" class="label">"Email"</label>
                        <input id="email" name="email" type="email" required autocomplete="username" autofocus class="input"/>
                    </div>
                    <button type="submit" class="btn-primary w-full" disabled=move || action.pending().get()>"Send me a link"</button>
                    <ActionError value=action.value()/>
                </ActionForm>
            </Show>
            <p class="mt-6 text-center text-sm text-slate-500">
                <a href="/login" class="text-indigo-600 hover:underline">"Back to log in"</a>
            </p>
        </AuthCard>
    }
}
