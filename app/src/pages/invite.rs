//! `/invite/:token`: the page an invite email links to.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::AuthCard;
use crate::components::ui::{ActionError, LoadError};
use crate::error::AppError;
use herald_types::Role;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InviteView {
    pub workspace_name: String,
    pub email: String,
    pub role: Role,
    pub invited_by: String,
    /// The logged-in user's email, if any.
    pub logged_in_as: Option<String>,
}

#[server(prefix = "/rpc", endpoint = "get_invite")]
pub async fn get_invite(token: String) -> Result<InviteView, AppError> {
    use crate::ssr::*;
    let state = state()?;
    let preview = herald_engine::invites::preview(&state.db, &state.signer, &token).await?;
    let session = session().await?;
    let logged_in_as = match session_user(&session).await? {
        Some(u) => herald_engine::users::get_user(&state.db, u).await.ok().map(|u| u.email),
        None => None,
    };
    Ok(InviteView {
        workspace_name: preview.workspace_name,
        email: preview.email,
        role: preview.role,
        invited_by: preview.invited_by,
        logged_in_as,
    })
}

#[server(prefix = "/rpc", endpoint = "accept_invite")]
pub async fn accept_invite(token: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    herald_engine::accounts::require_verified_email(&state.db, user).await?;
    let me = herald_engine::users::get_user(&state.db, user).await?;
    let tenant = herald_engine::invites::accept(&state.db, &state.signer, &token, user, &me.email).await?;
    let actor = herald_engine::audit::Actor::User { id: user, ip: client_ip().await };
    let joined = herald_engine::audit::Action::MemberJoined;
    herald_engine::audit::note(&state.db, tenant, &actor, joined, &me.email, serde_json::json!({})).await;
    set_session_tenant(&session, tenant).await?;
    leptos_axum::redirect("/settings/members");
    Ok(())
}

#[component]
pub fn InvitePage() -> impl IntoView {
    let token = move || use_params_map().with(|p| p.get("token")).unwrap_or_default();
    let invite = Resource::new(token, get_invite);
    view! {
        <AuthCard title="Join a workspace">
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match invite.await {
                        Ok(v) => view! { <InviteBody v=v token=token()/> }.into_any(),
                        Err(AppError::NotFound) => view! {
                            <LoadError error=AppError::invalid("This invite link is not valid. Ask for a new invite.")/>
                        }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </AuthCard>
    }
}

#[component]
fn InviteBody(v: InviteView, token: String) -> impl IntoView {
    let accept = ServerAction::<AcceptInvite>::new();
    let next = format!("/invite/{token}");
    view! {
        <p class="text-sm text-slate-600">
            <strong>{v.invited_by}</strong> " invited " <strong>{v.email.clone()}</strong> " to join "
            <strong data-testid="invite-workspace">{v.workspace_name}</strong> " as " <span class="badge">{v.role.as_str()}</span> "."
        </p>
        {match v.logged_in_as {
            Some(me) => view! {
                <p class="mt-4 text-xs text-slate-500">"Logged in as " {me}</p>
                <ActionForm action=accept attr:class="mt-4">
                    <input type="hidden" name="token" value=token/>
                    <button type="submit" class="btn-primary w-full" disabled=move || accept.pending().get()>"Accept invite"</button>
                </ActionForm>
                <ActionError value=accept.value()/>
            }.into_any(),
            None => view! {
                <div class="mt-6 space-y-2">
                    <a href=format!("/signup?next={next}") class="btn-primary block text-center">"Create an account to accept"</a>
                    <a href=format!("/login?next={next}") class="btn-secondary block text-center">"I already have an account"</a>
                </div>
            }.into_any(),
        }}
    }
}
