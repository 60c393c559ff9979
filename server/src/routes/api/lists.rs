//! `/api/v1/lists`: list CRUD.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::ListId;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::lists::{self, ListInput, ListWithCounts};

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

/// Every list with its subscription counts.
#[utoipa::path(get, path = "/api/v1/lists", operation_id = "listLists", security(("api_key" = [])),
    responses((status = 200, description = "Lists with counts (confirmed, unconfirmed, unsubscribed)")))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<ListWithCounts>>, ApiFailure> {
    Ok(Json(lists::with_counts(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/lists", operation_id = "createList", security(("api_key" = [])), request_body = ListInput,
    responses((status = 201, description = "Created"), (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<ListInput>,
) -> Result<(StatusCode, Json<lists::List>), ApiFailure> {
    let list = lists::create(&s.app.db, caller.tenant, caller.role, &body).await?;
    Ok((StatusCode::CREATED, Json(list)))
}

#[utoipa::path(get, path = "/api/v1/lists/{id}", operation_id = "getList", security(("api_key" = [])),
    responses((status = 200, description = "The list"), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<ListId>,
) -> Result<Json<lists::List>, ApiFailure> {
    Ok(Json(lists::get(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/lists/{id}", operation_id = "updateList", security(("api_key" = [])), request_body = ListInput,
    responses((status = 200, description = "Updated"), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<ListId>,
    ApiJson(body): ApiJson<ListInput>,
) -> Result<Json<lists::List>, ApiFailure> {
    Ok(Json(lists::update(&s.app.db, caller.tenant, caller.role, id, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/lists/{id}", operation_id = "deleteList", security(("api_key" = [])),
    responses((status = 204, description = "Deleted"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<ListId>,
) -> Result<StatusCode, ApiFailure> {
    lists::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
