//! `GET /api/v1/workspace`

use axum::Json;
use axum::extract::State;
use herald_engine::api_keys::ApiCaller;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ApiFailure};
use crate::startup::ServerState;

#[derive(Serialize, ToSchema)]
pub struct WorkspaceJson {
    pub id: uuid::Uuid,
    pub name: String,
    pub slug: String,
    /// Whether a postal address is on file (required before campaigns can be sent).
    pub can_send_campaigns: bool,
}

/// The workspace this API key acts in.
#[utoipa::path(get, path = "/api/v1/workspace", operation_id = "getWorkspace",
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The key's workspace", body = WorkspaceJson),
        (status = 401, description = "Missing, unknown or revoked key", body = ApiError),
    )
)]
pub async fn get_workspace(
    State(state): State<ServerState>,
    caller: ApiCaller,
) -> Result<Json<WorkspaceJson>, ApiFailure> {
    let ws = herald_engine::workspaces::get(&state.app.db, caller.tenant).await?;
    Ok(Json(WorkspaceJson { id: ws.id.0, can_send_campaigns: ws.can_send_campaigns(), name: ws.name, slug: ws.slug }))
}
