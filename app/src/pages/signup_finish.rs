//! `/signup/finish?token=…`: the page the sign-up mail links to. Whoever opens it chooses the
//! password, and the account is made, its address confirmed, and logged in.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, AuthCard, LoadError};
use crate::error::AppError;

/// Mirrors the engine's rule (herald_engine::infra::password) so it can be shown before submitting.
const PASSWORD_MIN: usize = 10;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SignupLinkView {
    pub email: String,
    pub name: String,
}

#[server(prefix = "/rpc", endpoint = "read_signup_link")]
pub async fn read_signup_link(token: String) -> Result<SignupLinkView, AppError> {
    use crate::ssr::*;
    let state = state()?;
    let claim = herald_engine::accounts::read_signup_link(&state.signer, &token)?;
    Ok(SignupLinkView { email: claim.email, name: claim.name })
}

#[server(prefix = "/rpc", endpoint = "finish_signup")]
pub async fn finish_signup(token: String, name: String, password: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let state = state()?;
    // A key of its own: each sign-up passes the form and then this, and one counter for both
    // would halve the sign-ups an address may make (a password is hashed here, so it is limited).
    if !state.auth_ip_limiter.check(&format!("signup-finish:{}", client_limiter_key().await)) {
        return Err(AppError::RateLimited.respond());
    }
    let (user, claim) = herald_engine::accounts::finish_signup(&state.db, &state.signer, &token, &name, &password)
        .await
        .map_err(|e| match e {
            herald_engine::Error::Conflict(_) => {
                AppError::Conflict("This link has been used: the account exists. Log in with its password.".into())
            }
            e => e.into(),
        })?;
    log_in(&session().await?, user).await?;
    leptos_axum::redirect(&crate::auth::safe_next(Some(&claim.next)));
    Ok(())
}

#[component]
pub fn SignupFinishPage() -> impl IntoView {
    let token = move || use_query_map().with(|q| q.get("token")).unwrap_or_default();
    let link = Resource::new(token, read_signup_link);
    view! {
        <AuthCard title="Choose your password">
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match link.await {
                        Ok(v) => view! { <FinishForm v=v token=token()/> }.into_any(),
                        Err(e) => view! {
                            <LoadError error=e/>
                            <p class="mt-4 text-center text-sm">
                                <a href="/signup" class="text-indigo-600 hover:underline">"Sign up again"</a>
                            </p>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </AuthCard>
    }
}

#[component]
fn FinishForm(v: SignupLinkView, token: String) -> impl IntoView {
    let action = ServerAction::<FinishSignup>::new();
    let password = RwSignal::new(String::new());
    let long_enough = move || password.with(|p| p.chars().count() >= PASSWORD_MIN);
    view! {
        <ActionForm action=action attr:class="space-y-4">
            <input type="hidden" name="token" value=token/>
            <div>
                <label for="email" class="label">"Email"</label>
                // Read-only, and named `username` so password managers save the pair.
                <input id="email" type="email" readonly autocomplete="username" class="input bg-slate-50"
                    value=v.email data-testid="signup-email"/>
            </div>
            <div>
                <label for="name" class="label">"Your name"</label>
                <input id="name" name="name" type="text" autocomplete="name" maxlength="100" class="input" value=v.name/>
            </div>
            <div>
                <label for="password" class="label">"Password"</label>
                <input id="password" name="password" type="password" required minlength="10" maxlength="128"
                    autocomplete="new-password" autofocus class="input" aria-describedby="password-rules"
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
    }
}
