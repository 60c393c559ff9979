//! `/api/v1/templates`: transactional templates (named, versioned). Every `PUT` saves a new version.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::transactional::templates::{self, Template, TemplateInput};
use herald_types::TemplateId;

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/templates", operation_id = "listTemplates", security(("api_key" = [])),
    responses((status = 200, description = "Templates by name, at their current version")))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<Template>>, ApiFailure> {
    Ok(Json(templates::list(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/templates", operation_id = "createTemplate", security(("api_key" = [])), request_body = TemplateInput,
    responses((status = 201, description = "Created (version 1)"), (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<TemplateInput>,
) -> Result<(StatusCode, Json<Template>), ApiFailure> {
    let t = templates::create(&s.app.db, caller.tenant, caller.role, &body).await?;
    Ok((StatusCode::CREATED, Json(t)))
}

#[utoipa::path(get, path = "/api/v1/templates/{id}", operation_id = "getTemplate", security(("api_key" = [])),
    params(("id" = String, Path, description = "The template's id or name")),
    responses((status = 200, description = "The template at its current version"), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Template>, ApiFailure> {
    Ok(Json(templates::find(&s.app.db, caller.tenant, &id).await?))
}

#[utoipa::path(put, path = "/api/v1/templates/{id}", operation_id = "updateTemplate", security(("api_key" = [])), request_body = TemplateInput,
    responses((status = 200, description = "Saved as a new version"), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<TemplateId>,
    ApiJson(body): ApiJson<TemplateInput>,
) -> Result<Json<Template>, ApiFailure> {
    Ok(Json(templates::update(&s.app.db, caller.tenant, caller.role, id, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/templates/{id}", operation_id = "deleteTemplate", security(("api_key" = [])),
    responses((status = 204, description = "Deleted; sent messages keep their content"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<TemplateId>,
) -> Result<StatusCode, ApiFailure> {
    templates::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
