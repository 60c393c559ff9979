//! `/api/v1/identities`: the SMTP servers the workspace sends through (credentials sealed at
//! rest and never shown again), as Settings → Sending shows them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit::Action;
use herald_engine::sending::identities;
use herald_types::{Identity, IdentityId, IdentityInput};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

/// What the server answered when Herald connected, greeted and authenticated.
#[derive(Serialize, ToSchema)]
pub struct ConnectionCheck {
    pub ok: bool,
    pub reply: String,
}

#[utoipa::path(get, path = "/api/v1/identities", operation_id = "listIdentities", security(("api_key" = [])),
    responses((status = 200, body = Vec<Identity>)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<Identity>>, ApiFailure> {
    Ok(Json(identities::list(&s.app.db, caller.tenant).await?))
}

async fn save(
    s: &ServerState,
    caller: &ApiCaller,
    id: Option<IdentityId>,
    input: &IdentityInput,
) -> Result<Identity, ApiFailure> {
    if id.is_none() || !input.smtp_url.trim().is_empty() {
        identities::check_destination(&input.smtp_url, &s.app.egress)?;
    }
    let saved = identities::save(&s.app.db, &s.app.signer, caller.tenant, caller.role, id, input).await?;
    caller.audit(&s.app.db, Action::IdentitySaved, &saved.name, serde_json::json!({ "new": id.is_none() })).await;
    Ok(saved)
}

#[utoipa::path(post, path = "/api/v1/identities", operation_id = "createIdentity", security(("api_key" = [])),
    request_body = IdentityInput,
    responses((status = 201, body = Identity), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<IdentityInput>,
) -> Result<(StatusCode, Json<Identity>), ApiFailure> {
    Ok((StatusCode::CREATED, Json(save(&s, &caller, None, &body).await?)))
}

/// An empty `smtp_url` keeps the stored one (and its password); an empty key keeps the key.
#[utoipa::path(put, path = "/api/v1/identities/{id}", operation_id = "updateIdentity", security(("api_key" = [])),
    request_body = IdentityInput,
    responses((status = 200, body = Identity), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<IdentityId>,
    ApiJson(body): ApiJson<IdentityInput>,
) -> Result<Json<Identity>, ApiFailure> {
    Ok(Json(save(&s, &caller, Some(id), &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/identities/{id}", operation_id = "deleteIdentity", security(("api_key" = [])),
    responses((status = 204, description = "Deleted"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<IdentityId>,
) -> Result<StatusCode, ApiFailure> {
    identities::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, Action::IdentityDeleted, id, serde_json::json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}

/// Connects to the identity's server, greets, authenticates and quits. A failure to connect is
/// an answer (`ok: false` and why), not an error.
#[utoipa::path(post, path = "/api/v1/identities/{id}/test", operation_id = "testIdentity", security(("api_key" = [])),
    responses((status = 200, body = ConnectionCheck), (status = 404, body = ApiError)))]
pub async fn test(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<IdentityId>,
) -> Result<Json<ConnectionCheck>, ApiFailure> {
    herald_engine::account_limits::ensure_not_suspended(&s.app.db, caller.tenant).await?;
    if !identities::list(&s.app.db, caller.tenant).await?.iter().any(|i| i.id == id) {
        return Err(herald_engine::Error::NotFound.into());
    }
    let a = &s.app;
    let identity =
        identities::resolve(&a.db, &a.signer, caller.tenant, Some(id), &a.default_identity, &a.egress).await?;
    let (ok, reply) = match identities::check_connection(&identity.server).await {
        Ok(reply) => (true, reply),
        Err(error) => (false, error),
    };
    Ok(Json(ConnectionCheck { ok, reply }))
}
