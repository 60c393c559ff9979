//! The two-factor card of `/account`: enrol with a QR code and a confirming code, see the ten
//! recovery codes once, and turn it off again with the password and a code.

use leptos::prelude::*;

use crate::components::ui::{ActionError, Card, CopyButton, LoadError, LocalTime};
use crate::error::AppError;
use herald_types::{TwoFactorEnrolment, TwoFactorStatus};

#[server(prefix = "/rpc", endpoint = "two_factor_status")]
pub async fn load_two_factor_status() -> Result<TwoFactorStatus, AppError> {
    use crate::ssr::*;
    let (state, _, user) = require_user().await?;
    Ok(herald_engine::two_factor::status(&state.db, user).await?)
}

#[server(prefix = "/rpc", endpoint = "start_two_factor")]
pub async fn start_two_factor(current_password: String) -> Result<TwoFactorEnrolment, AppError> {
    use crate::ssr::*;
    let (state, _, user) = require_user().await?;
    if !state.auth_account_limiter.check(&format!("2fa-start:{user}")) {
        return Err(AppError::RateLimited.respond());
    }
    Ok(herald_engine::two_factor::start_enrolment(&state.db, &state.signer, user, &current_password).await?)
}

/// Returns the recovery codes: the only time they are shown. Every other session ends: they
/// were opened without the second factor.
#[server(prefix = "/rpc", endpoint = "confirm_two_factor")]
pub async fn confirm_two_factor(code: String) -> Result<Vec<String>, AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    if !state.auth_account_limiter.check(&format!("2fa-enrol:{user}")) {
        return Err(AppError::RateLimited.respond());
    }
    let codes =
        herald_engine::two_factor::confirm_enrolment(&state.db, &state.signer, user, &code, chrono::Utc::now()).await?;
    herald_engine::accounts::end_sessions(&state.db, user, Some(&session_id(&session))).await?;
    Ok(codes)
}

#[server(prefix = "/rpc", endpoint = "disable_two_factor")]
pub async fn disable_two_factor(current_password: String, code: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, _, user) = require_user().await?;
    if !state.auth_account_limiter.check(&format!("2fa-disable:{user}")) {
        return Err(AppError::RateLimited.respond());
    }
    herald_engine::two_factor::disable(&state.db, &state.signer, user, &current_password, &code, chrono::Utc::now())
        .await?;
    Ok(())
}

#[component]
pub fn TwoFactorCard(
    status: Resource<Result<TwoFactorStatus, AppError>>,
    start: ServerAction<StartTwoFactor>,
    confirm: ServerAction<ConfirmTwoFactor>,
    disable: ServerAction<DisableTwoFactor>,
) -> impl IntoView {
    view! {
        <Card title="Two-factor authentication">
            {move || match confirm.value().get() {
                Some(Ok(codes)) => view! { <RecoveryCodes codes=codes/> }.into_any(),
                _ => ().into_any(),
            }}
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match status.await {
                        Ok(TwoFactorStatus { enabled_at: Some(since), recovery_codes_left }) => view! {
                            <TwoFactorOn since=since.to_rfc3339() codes_left=recovery_codes_left disable=disable/>
                        }.into_any(),
                        Ok(_) => view! { <TwoFactorOff start=start confirm=confirm/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}

#[component]
fn RecoveryCodes(codes: Vec<String>) -> impl IntoView {
    let all = codes.join("\n");
    view! {
        <div class="mb-4 rounded-lg border border-amber-200 bg-amber-50 p-4">
            <p class="text-sm font-medium text-amber-900">
                "Two-factor authentication is on. Save these recovery codes somewhere safe: each logs you in once "
                "if you lose your phone, and they are not shown again."
            </p>
            <ul class="mt-3 grid grid-cols-2 gap-1 font-mono text-sm text-slate-800" data-testid="recovery-codes">
                {codes.into_iter().map(|c| view! { <li>{c}</li> }).collect_view()}
            </ul>
            <div class="mt-3"><CopyButton text=all label="Copy the codes"/></div>
        </div>
    }
}

#[component]
fn TwoFactorOff(start: ServerAction<StartTwoFactor>, confirm: ServerAction<ConfirmTwoFactor>) -> impl IntoView {
    view! {
        <p class="text-sm text-slate-600">
            "Off. With it on, logging in also asks for a code from an authenticator app on your phone "
            "(1Password, Google Authenticator, Aegis…), so a stolen password is not enough."
        </p>
        {move || match start.value().get() {
            Some(Ok(e)) => view! {
                <div class="mt-4 flex flex-wrap items-start gap-6">
                    <div class="h-52 w-52 shrink-0 rounded-lg border border-slate-200 bg-white p-1" inner_html=e.qr_svg></div>
                    <div class="min-w-0 flex-1 space-y-3">
                        <p class="text-sm text-slate-700">"1. Scan the code with your app, or type this key into it:"</p>
                        <code class="block break-all rounded bg-slate-100 px-2 py-1 text-sm" data-testid="totp-secret">{e.secret_base32}</code>
                        <ActionForm action=confirm attr:class="space-y-2">
                            <label for="enrol_code" class="label">"2. Type the six digits it shows"</label>
                            <div class="flex gap-2">
                                <input id="enrol_code" name="code" type="text" required inputmode="numeric" pattern="[0-9 ]{6,7}"
                                    autocomplete="one-time-code" class="input w-40 font-mono tracking-widest"/>
                                <button type="submit" class="btn-primary" disabled=move || confirm.pending().get()>"Turn on"</button>
                            </div>
                            <ActionError value=confirm.value()/>
                        </ActionForm>
                    </div>
                </div>
            }.into_any(),
            other => view! {
                <ActionForm action=start attr:class="mt-4 flex flex-wrap items-end gap-3">
                    <div>
                        <label for="enrol_password" class="label">"Confirm with your password"</label>
                        <input id="enrol_password" name="current_password" type="password" required autocomplete="current-password" class="input"/>
                    </div>
                    <button type="submit" class="btn-primary" disabled=move || start.pending().get()>
                        "Set up two-factor authentication"
                    </button>
                </ActionForm>
                {matches!(other, Some(Err(_))).then(|| view! { <ActionError value=start.value()/> })}
            }.into_any(),
        }}
    }
}

#[component]
fn TwoFactorOn(since: String, codes_left: i64, disable: ServerAction<DisableTwoFactor>) -> impl IntoView {
    view! {
        <p class="text-sm text-slate-700" data-testid="two-factor-on">
            <span class="badge bg-emerald-100 text-emerald-800">"On"</span>
            " since "<LocalTime at=since/>{format!(". {codes_left} recovery code{} left.", if codes_left == 1 { "" } else { "s" })}
        </p>
        <details class="mt-4">
            <summary class="cursor-pointer text-sm text-slate-600">"Turn two-factor authentication off"</summary>
            <ActionForm action=disable attr:class="mt-3 max-w-md space-y-3">
                <div>
                    <label for="disable_password" class="label">"Your password"</label>
                    <input id="disable_password" name="current_password" type="password" required autocomplete="current-password" class="input"/>
                </div>
                <div>
                    <label for="disable_code" class="label">"A code from your app, or a recovery code"</label>
                    <input id="disable_code" name="code" type="text" required autocomplete="one-time-code" class="input font-mono"/>
                </div>
                <button type="submit" class="btn-danger" disabled=move || disable.pending().get()>"Turn off"</button>
                <ActionError value=disable.value()/>
            </ActionForm>
        </details>
    }
}
