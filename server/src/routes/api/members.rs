//! `/api/v1/members` and `/api/v1/invites`: who is in the workspace, and invitations.
//!
//! A key can invite, re-role and remove authors and viewers, never more: no key may grant the
//! admin or owner role, or act on the members who hold one (that stays a person's act in the
//! app, where it is confirmed and audited with their name). An invitation names the key's maker
//! as the inviter.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit::Action;
use herald_engine::{Email, Error, invites, workspaces};
use herald_types::{InviteId, Member, PendingInvite, Role, UserId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[derive(Serialize, ToSchema)]
pub struct Team {
    pub members: Vec<Member>,
    pub invites: Vec<PendingInvite>,
}

#[derive(Deserialize, ToSchema)]
pub struct NewInvite {
    pub email: String,
    /// `author` or `viewer`.
    pub role: Role,
}

#[derive(Deserialize, ToSchema)]
pub struct RoleChange {
    /// `author` or `viewer`.
    pub role: Role,
}

/// The roles a key may hand out or take away.
fn within_keys_reach(role: Role) -> Result<(), ApiFailure> {
    if matches!(role, Role::Author | Role::Viewer) {
        Ok(())
    } else {
        Err(Error::Refused(
            "An API key cannot grant the admin or owner role, or act on admins and owners: do it in the app.".into(),
        )
        .into())
    }
}

async fn member(s: &ServerState, caller: &ApiCaller, user: UserId) -> Result<Member, ApiFailure> {
    let all = workspaces::members(&s.app.db, caller.tenant).await?;
    Ok(all.into_iter().find(|m| m.user_id == user).ok_or(Error::NotFound)?)
}

#[utoipa::path(get, path = "/api/v1/members", operation_id = "listMembers", security(("api_key" = [])),
    responses((status = 200, body = Team)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Team>, ApiFailure> {
    let members = workspaces::members(&s.app.db, caller.tenant).await?;
    let invites = invites::pending(&s.app.db, caller.tenant).await?;
    Ok(Json(Team { members, invites }))
}

/// Mails an invitation from the key's maker.
#[utoipa::path(post, path = "/api/v1/invites", operation_id = "inviteMember", security(("api_key" = [])),
    request_body = NewInvite,
    responses((status = 201, body = PendingInvite), (status = 403, body = ApiError), (status = 422, body = ApiError)))]
pub async fn invite(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<NewInvite>,
) -> Result<(StatusCode, Json<PendingInvite>), ApiFailure> {
    within_keys_reach(body.role)?;
    let email = Email::parse(&body.email).map_err(|e| Error::Invalid(e.at("email")))?;
    let maker = herald_engine::api_keys::maker(&s.app.db, caller.tenant, caller.key_id).await?.ok_or_else(|| {
        Error::Refused("This key has no maker to send the invitation from; invite in the app.".into())
    })?;
    let a = &s.app;
    let invite = invites::invite_and_mail(
        &a.db,
        &a.signer,
        &a.jobs,
        &a.base_url,
        caller.tenant,
        maker,
        caller.role,
        &email,
        body.role,
    )
    .await?;
    caller.audit(&a.db, Action::MemberInvited, email.as_str(), serde_json::json!({ "role": body.role.as_str() })).await;
    Ok((StatusCode::CREATED, Json(invite)))
}

#[utoipa::path(delete, path = "/api/v1/invites/{id}", operation_id = "withdrawInvite", security(("api_key" = [])),
    responses((status = 204, description = "Withdrawn"), (status = 404, body = ApiError)))]
pub async fn withdraw(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<InviteId>,
) -> Result<StatusCode, ApiFailure> {
    invites::revoke(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, Action::InviteWithdrawn, id, serde_json::json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(patch, path = "/api/v1/members/{id}", operation_id = "changeMemberRole", security(("api_key" = [])),
    request_body = RoleChange,
    responses((status = 200, body = Member), (status = 403, body = ApiError), (status = 404, body = ApiError)))]
pub async fn change_role(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<UserId>,
    ApiJson(body): ApiJson<RoleChange>,
) -> Result<Json<Member>, ApiFailure> {
    within_keys_reach(body.role)?;
    let now = member(&s, &caller, id).await?;
    within_keys_reach(now.role)?;
    workspaces::set_role(&s.app.db, caller.tenant, caller.role, id, body.role).await?;
    caller
        .audit(&s.app.db, Action::MemberRoleChanged, &now.email, serde_json::json!({ "role": body.role.as_str() }))
        .await;
    Ok(Json(member(&s, &caller, id).await?))
}

#[utoipa::path(delete, path = "/api/v1/members/{id}", operation_id = "removeMember", security(("api_key" = [])),
    responses((status = 204, description = "Removed"), (status = 403, body = ApiError), (status = 404, body = ApiError)))]
pub async fn remove(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<UserId>,
) -> Result<StatusCode, ApiFailure> {
    let now = member(&s, &caller, id).await?;
    within_keys_reach(now.role)?;
    workspaces::remove_member(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, Action::MemberRemoved, &now.email, serde_json::json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}
