//! `/account`: the logged-in person's own account: their password, two-factor authentication,
//! where they are logged in, and deleting the account.

use leptos::prelude::*;

use crate::components::ui::{ActionError, Card, LoadError, PageHeader, local_time_or};
use crate::error::AppError;
use crate::pages::account::two_factor::{
    ConfirmTwoFactor, DisableTwoFactor, StartTwoFactor, TwoFactorCard, load_two_factor_status,
};
use herald_types::LoginSession;

/// Needs the current password; every other session of the account ends.
#[server(prefix = "/rpc", endpoint = "change_password")]
pub async fn change_password(current_password: String, new_password: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    if !state.auth_account_limiter.check(&format!("change-password:{user}")) {
        return Err(AppError::RateLimited.respond());
    }
    let this = session_id(&session);
    herald_engine::accounts::change_password(&state.db, user, &current_password, &new_password, &this).await?;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "list_sessions")]
pub async fn list_sessions() -> Result<Vec<LoginSession>, AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    Ok(herald_engine::accounts::list_sessions(&state.db, user, &session_id(&session)).await?)
}

#[server(prefix = "/rpc", endpoint = "end_session")]
pub async fn end_session(handle: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, _, user) = require_user().await?;
    herald_engine::accounts::end_session(&state.db, user, &handle).await?;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "end_other_sessions")]
pub async fn end_other_sessions() -> Result<u64, AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    Ok(herald_engine::accounts::end_sessions(&state.db, user, Some(&session_id(&session))).await?)
}

/// Deletes the account (and the workspaces where it is the only member), then logs out.
#[server(prefix = "/rpc", endpoint = "delete_account")]
pub async fn delete_account(current_password: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    if !state.auth_account_limiter.check(&format!("delete-account:{user}")) {
        return Err(AppError::RateLimited.respond());
    }
    let gone = herald_engine::accounts::delete_account(&state.db, user, &current_password).await?;
    tracing::info!(%user, workspaces_deleted = gone.len(), "account deleted");
    // Their rows went with the workspaces; a bucket's objects do not.
    for (tenant, _) in &gone {
        state.media_storage.purge_workspace(*tenant).await;
    }
    log_out(&session).await?;
    leptos_axum::redirect("/login?deleted=1");
    Ok(())
}

#[component]
pub fn AccountPage() -> impl IntoView {
    let change = ServerAction::<ChangePassword>::new();
    let end_one = ServerAction::<EndSession>::new();
    let end_others = ServerAction::<EndOtherSessions>::new();
    let start = ServerAction::<StartTwoFactor>::new();
    let confirm = ServerAction::<ConfirmTwoFactor>::new();
    let disable = ServerAction::<DisableTwoFactor>::new();
    let delete = ServerAction::<DeleteAccount>::new();
    let sessions = Resource::new(
        move || (change.version().get(), end_one.version().get(), end_others.version().get()),
        |_| list_sessions(),
    );
    let two_factor =
        Resource::new(move || (confirm.version().get(), disable.version().get()), |_| load_two_factor_status());
    let changed = move || matches!(change.value().get(), Some(Ok(())));
    view! {
        <PageHeader title="Your account"/>
        <Card title="Password">
            <ActionForm action=change attr:class="max-w-md space-y-4">
                <div>
                    <label for="current_password" class="label">"Current password"</label>
                    <input id="current_password" name="current_password" type="password" required autocomplete="current-password" class="input"/>
                </div>
                <div>
                    <label for="new_password" class="label">"New password"</label>
                    <input id="new_password" name="new_password" type="password" required minlength="10" autocomplete="new-password" class="input"/>
                    <p class="mt-1 text-xs text-slate-500">"At least 10 characters. Changing it logs you out everywhere else."</p>
                </div>
                <button type="submit" class="btn-primary" disabled=move || change.pending().get()>"Change password"</button>
                <ActionError value=change.value()/>
                {move || changed().then(|| view! {
                    <p role="status" class="text-sm text-emerald-700">"Password changed. Your other sessions have ended."</p>
                })}
            </ActionForm>
        </Card>
        <TwoFactorCard status=two_factor start=start confirm=confirm disable=disable/>
        <Card title="Where you are logged in">
            <ActionError value=end_one.value()/>
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match sessions.await {
                        Ok(list) => view! { <SessionList list=list end_one=end_one end_others=end_others/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
        <Card title="Delete your account">
            <p class="text-sm text-slate-600">
                "Deletes your account and logs you out everywhere. Workspaces where you are the only member are "
                "deleted with it, with their readers, campaigns and reports. If you are the only owner of a "
                "workspace others use, make one of them owner first."
            </p>
            <details class="mt-3">
                <summary class="cursor-pointer text-sm text-red-700">"Delete my account"</summary>
                <ActionForm action=delete attr:class="mt-3 max-w-md space-y-3">
                    <div>
                        <label for="delete_password" class="label">"Your password"</label>
                        <input id="delete_password" name="current_password" type="password" required autocomplete="current-password" class="input"/>
                    </div>
                    <button type="submit" class="btn-danger" disabled=move || delete.pending().get()>"Delete my account for good"</button>
                    <ActionError value=delete.value()/>
                </ActionForm>
            </details>
        </Card>
    }
}

#[component]
fn SessionList(
    list: Vec<LoginSession>,
    end_one: ServerAction<EndSession>,
    end_others: ServerAction<EndOtherSessions>,
) -> impl IntoView {
    let others = list.iter().filter(|s| !s.current).count();
    view! {
        <ul class="divide-y divide-slate-100" data-testid="sessions">
            {list.into_iter().map(|s| view! {
                <li class="flex flex-wrap items-center justify-between gap-3 py-3" data-testid="session">
                    <div class="min-w-0">
                        <div class="text-sm font-medium text-slate-800">
                            {s.device.clone()}
                            {s.current.then(|| view! { <span class="badge ml-2 bg-emerald-100 text-emerald-800">"This device"</span> })}
                        </div>
                        <div class="text-xs text-slate-500">
                            {s.ip.clone()}" · started "{local_time_or(s.started_at, "—")}
                            " · last seen "{local_time_or(s.last_seen, "—")}
                        </div>
                    </div>
                    {(!s.current).then(|| view! {
                        <ActionForm action=end_one>
                            <input type="hidden" name="handle" value=s.handle.clone()/>
                            <button type="submit" class="text-sm text-red-600 hover:underline">"Log out"</button>
                        </ActionForm>
                    })}
                </li>
            }).collect_view()}
        </ul>
        {(others > 0).then(|| view! {
            <ActionForm action=end_others attr:class="mt-4">
                <button type="submit" class="btn-secondary">"Log out everywhere else"</button>
            </ActionForm>
        })}
    }
}
