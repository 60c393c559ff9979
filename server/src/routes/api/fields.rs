//! `/api/v1/fields`: a workspace's custom reader fields. Values are written with the readers
//! (`attributes.<key>`), typed: a value of the wrong type is a 422 naming the field.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::fields::{self, Field, FieldInput};

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/fields", operation_id = "listFields", security(("api_key" = [])),
    responses((status = 200, description = "The workspace's fields, in order", body = Vec<Field>)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<Field>>, ApiFailure> {
    Ok(Json(fields::list(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/fields", operation_id = "createField", security(("api_key" = [])),
    request_body = FieldInput,
    responses((status = 201, description = "Created", body = Field), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<FieldInput>,
) -> Result<(StatusCode, Json<Field>), ApiFailure> {
    Ok((StatusCode::CREATED, Json(fields::create(&s.app.db, caller.tenant, caller.role, &body).await?)))
}

#[utoipa::path(patch, path = "/api/v1/fields/{key}", operation_id = "updateField", security(("api_key" = [])),
    params(("key" = String, Path, description = "The field's key")), request_body = FieldInput,
    responses((status = 200, description = "Label and choices changed (the key and type stay)", body = Field),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(key): Path<String>,
    ApiJson(body): ApiJson<FieldInput>,
) -> Result<Json<Field>, ApiFailure> {
    Ok(Json(fields::update(&s.app.db, caller.tenant, caller.role, &key, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/fields/{key}", operation_id = "deleteField", security(("api_key" = [])),
    params(("key" = String, Path, description = "The field's key")),
    responses((status = 204, description = "Deleted, with its value on every reader"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(key): Path<String>,
) -> Result<StatusCode, ApiFailure> {
    fields::delete(&s.app.db, caller.tenant, caller.role, &key).await?;
    Ok(StatusCode::NO_CONTENT)
}
