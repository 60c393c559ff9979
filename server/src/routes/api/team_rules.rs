//! `/api/v1/team-rules`: what the workspace asks of its members (two-factor sign-in, approval
//! before a campaign is sent), as Settings → Members → Team rules shows them.

use axum::Json;
use axum::extract::State;
use herald_engine::Error;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit::Action;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[derive(Serialize, Deserialize, ToSchema)]
pub struct TeamRules {
    /// Every member signs in with a second factor.
    pub require_two_factor: bool,
    /// An author's send or schedule waits for an owner's or admin's approval.
    pub require_send_approval: bool,
}

async fn current(s: &ServerState, caller: &ApiCaller) -> Result<TeamRules, ApiFailure> {
    Ok(TeamRules {
        require_two_factor: herald_engine::two_factor::workspace_requires(&s.app.db, caller.tenant).await?,
        require_send_approval: herald_engine::campaigns::approval::required(&s.app.db, caller.tenant).await?,
    })
}

#[utoipa::path(get, path = "/api/v1/team-rules", operation_id = "getTeamRules", security(("api_key" = [])),
    responses((status = 200, body = TeamRules)))]
pub async fn show(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<TeamRules>, ApiFailure> {
    Ok(Json(current(&s, &caller).await?))
}

/// Requiring two-factor sign-in needs the key's maker to use it themselves, as in the app.
#[utoipa::path(put, path = "/api/v1/team-rules", operation_id = "setTeamRules", security(("api_key" = [])),
    request_body = TeamRules,
    responses((status = 200, body = TeamRules), (status = 403, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<TeamRules>,
) -> Result<Json<TeamRules>, ApiFailure> {
    let db = &s.app.db;
    let maker = herald_engine::api_keys::maker(db, caller.tenant, caller.key_id)
        .await?
        .ok_or_else(|| Error::Refused("This key has no maker to act for; change the team rules in the app.".into()))?;
    herald_engine::two_factor::set_workspace_requirement(
        db,
        caller.tenant,
        maker,
        caller.role,
        body.require_two_factor,
    )
    .await?;
    herald_engine::campaigns::approval::set_required(db, caller.tenant, caller.role, body.require_send_approval)
        .await?;
    caller
        .audit(
            db,
            Action::TeamRulesChanged,
            "",
            serde_json::json!({
                "require_two_factor": body.require_two_factor,
                "require_send_approval": body.require_send_approval,
            }),
        )
        .await;
    Ok(Json(current(&s, &caller).await?))
}
