//! `/api/v1/tags` and `/api/v1/readers/{id}/tags`: a workspace's tags with their counts, rename
//! and delete; a reader's tags, added and removed. Another workspace's ids answer 404, exactly
//! like ids that do not exist.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::tags::{self, Tag, TagId};
use herald_types::TagNames;
use serde::Deserialize;

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/tags", operation_id = "listTags", security(("api_key" = [])),
    responses((status = 200, description = "The workspace's tags by name, each with its number of readers", body = Vec<Tag>)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<Tag>>, ApiFailure> {
    Ok(Json(tags::list(&s.app.db, caller.tenant).await?))
}

/// `PATCH /api/v1/tags/{id}`
#[derive(Deserialize, utoipa::ToSchema)]
pub struct TagRename {
    /// The new name: at most 50 characters, no commas, not another tag's.
    pub name: String,
}

#[utoipa::path(patch, path = "/api/v1/tags/{id}", operation_id = "renameTag", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The tag's id")), request_body = TagRename,
    responses((status = 200, description = "Renamed", body = Tag), (status = 404, body = ApiError),
              (status = 409, description = "Another tag has that name", body = ApiError), (status = 422, body = ApiError)))]
pub async fn rename(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<TagId>,
    ApiJson(body): ApiJson<TagRename>,
) -> Result<Json<Tag>, ApiFailure> {
    Ok(Json(tags::rename(&s.app.db, caller.tenant, caller.role, id, &body.name).await?))
}

#[utoipa::path(delete, path = "/api/v1/tags/{id}", operation_id = "deleteTag", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The tag's id")),
    responses((status = 204, description = "Deleted and taken off every reader"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<TagId>,
) -> Result<StatusCode, ApiFailure> {
    tags::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/readers/{id}/tags", operation_id = "listReaderTags", security(("api_key" = [])),
    params(("id" = i64, Path, description = "The reader's id")),
    responses((status = 200, description = "The reader's tags by name", body = TagNames), (status = 404, body = ApiError)))]
pub async fn of_reader(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
) -> Result<Json<TagNames>, ApiFailure> {
    // The reader must exist in this workspace: an unknown id is a 404, not an empty list.
    herald_engine::audience::readers::detail(&s.app.db, caller.tenant, id).await?;
    Ok(Json(TagNames { tags: tags::of_reader(&s.app.db, caller.tenant, id).await? }))
}

#[utoipa::path(post, path = "/api/v1/readers/{id}/tags", operation_id = "addReaderTags", security(("api_key" = [])),
    params(("id" = i64, Path, description = "The reader's id")), request_body = TagNames,
    responses((status = 200, description = "Tagged (new names become tags); the reader's tags after", body = TagNames),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn add(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
    ApiJson(body): ApiJson<TagNames>,
) -> Result<Json<TagNames>, ApiFailure> {
    Ok(Json(TagNames { tags: tags::add_to_reader(&s.app.db, caller.tenant, caller.role, id, &body.tags).await? }))
}

#[derive(Deserialize)]
pub struct RemoveQuery {
    pub tags: String,
}

#[utoipa::path(delete, path = "/api/v1/readers/{id}/tags", operation_id = "removeReaderTags", security(("api_key" = [])),
    params(("id" = i64, Path, description = "The reader's id"),
           ("tags" = String, Query, description = "Comma-separated tag names to take off (names the reader lacks are ignored)")),
    responses((status = 200, description = "The reader's tags after", body = TagNames),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn remove(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
    Query(q): Query<RemoveQuery>,
) -> Result<Json<TagNames>, ApiFailure> {
    let names: Vec<&str> = q.tags.split(',').filter(|n| !n.trim().is_empty()).collect();
    let names: Vec<String> = names.into_iter().map(str::to_string).collect();
    Ok(Json(TagNames { tags: tags::remove_from_reader(&s.app.db, caller.tenant, caller.role, id, &names).await? }))
}
