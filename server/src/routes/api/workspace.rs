//! `/api/v1/workspace`: the workspace the key acts in, and its settings (name, postal address,
//! default sender, time zone), as Settings → General shows and changes them.

use axum::Json;
use axum::extract::State;
use herald_engine::api_keys::ApiCaller;
use herald_engine::workspaces::{self, Workspace};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[derive(Serialize, ToSchema)]
pub struct WorkspaceJson {
    pub id: uuid::Uuid,
    pub name: String,
    pub slug: String,
    /// Whether a postal address is on file (required before campaigns can be sent).
    pub can_send_campaigns: bool,
    /// In the footer of every campaign (anti-spam law wants a physical address).
    pub postal_address: String,
    /// The sender campaigns and automation emails take when they name none.
    pub default_from_name: String,
    pub default_from_email: String,
    /// IANA name (`Europe/Berlin`): schedules and reports are in it.
    pub time_zone: String,
}

impl From<Workspace> for WorkspaceJson {
    fn from(ws: Workspace) -> Self {
        Self {
            id: ws.id.0,
            can_send_campaigns: ws.can_send_campaigns(),
            name: ws.name,
            slug: ws.slug,
            postal_address: ws.postal_address,
            default_from_name: ws.default_from_name,
            default_from_email: ws.default_from_email,
            time_zone: ws.time_zone,
        }
    }
}

/// The settings to change; those left out keep their value.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceChange {
    pub name: Option<String>,
    pub postal_address: Option<String>,
    pub default_from_name: Option<String>,
    pub default_from_email: Option<String>,
    pub time_zone: Option<String>,
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
    Ok(Json(workspaces::get(&state.app.db, caller.tenant).await?.into()))
}

/// Changes the workspace's settings (an admin's, as on Settings → General).
#[utoipa::path(patch, path = "/api/v1/workspace", operation_id = "updateWorkspace",
    security(("api_key" = [])), request_body = WorkspaceChange,
    responses((status = 200, body = WorkspaceJson), (status = 422, body = ApiError)))]
pub async fn update_workspace(
    State(state): State<ServerState>,
    caller: ApiCaller,
    ApiJson(change): ApiJson<WorkspaceChange>,
) -> Result<Json<WorkspaceJson>, ApiFailure> {
    let now = workspaces::get(&state.app.db, caller.tenant).await?;
    let update = workspaces::SettingsUpdate {
        name: change.name.unwrap_or(now.name),
        postal_address: change.postal_address.unwrap_or(now.postal_address),
        default_from_name: change.default_from_name.unwrap_or(now.default_from_name),
        default_from_email: change.default_from_email.unwrap_or(now.default_from_email),
        time_zone: change.time_zone,
    };
    let ws = workspaces::update_settings(&state.app.db, caller.tenant, update).await?;
    caller
        .audit(
            &state.app.db,
            herald_engine::audit::Action::SettingsChanged,
            &ws.name,
            serde_json::json!({
                "default_from": format!("{} <{}>", ws.default_from_name, ws.default_from_email),
                "time_zone": ws.time_zone,
            }),
        )
        .await;
    Ok(Json(ws.into()))
}
