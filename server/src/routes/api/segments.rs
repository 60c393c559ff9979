//! `/api/v1/segments`: saved condition trees over the workspace's readers (see
//! `herald_types::segment` for the tree's JSON), their live counts and matching readers.
//! Campaigns target them with `segment_ids` and exclude one with `exclude_segment_id`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::segments::{self, Segment, SegmentInput};
use herald_types::SegmentId;
use herald_types::segment::{Definition, SegmentCount};

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/segments", operation_id = "listSegments", security(("api_key" = [])),
    responses((status = 200, description = "The workspace's segments, by name", body = Vec<Segment>)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<Segment>>, ApiFailure> {
    Ok(Json(segments::list(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/segments", operation_id = "createSegment", security(("api_key" = [])),
    request_body = SegmentInput,
    responses((status = 201, description = "Created", body = Segment),
              (status = 422, description = "Keyed by the condition's place: `rules.0.value`, `rules.1.conditions.0.days`", body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<SegmentInput>,
) -> Result<(StatusCode, Json<Segment>), ApiFailure> {
    Ok((StatusCode::CREATED, Json(segments::create(&s.app.db, caller.tenant, caller.role, &body).await?)))
}

#[utoipa::path(get, path = "/api/v1/segments/{id}", operation_id = "getSegment", security(("api_key" = [])),
    params(("id" = SegmentId, Path, description = "The segment's id")),
    responses((status = 200, description = "The segment", body = Segment), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<SegmentId>,
) -> Result<Json<Segment>, ApiFailure> {
    Ok(Json(segments::get(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/segments/{id}", operation_id = "updateSegment", security(("api_key" = [])),
    params(("id" = SegmentId, Path, description = "The segment's id")), request_body = SegmentInput,
    responses((status = 200, description = "Replaced (a send already running keeps the tree it started with)", body = Segment),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<SegmentId>,
    ApiJson(body): ApiJson<SegmentInput>,
) -> Result<Json<Segment>, ApiFailure> {
    Ok(Json(segments::update(&s.app.db, caller.tenant, caller.role, id, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/segments/{id}", operation_id = "deleteSegment", security(("api_key" = [])),
    params(("id" = SegmentId, Path, description = "The segment's id")),
    responses((status = 204, description = "Deleted"), (status = 404, body = ApiError),
              (status = 409, description = "A campaign still to send uses it", body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<SegmentId>,
) -> Result<StatusCode, ApiFailure> {
    segments::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/segments/{id}/count", operation_id = "countSegment", security(("api_key" = [])),
    params(("id" = SegmentId, Path, description = "The segment's id")),
    responses((status = 200, description = "Readers matching it now", body = SegmentCount), (status = 404, body = ApiError),
        (status = 429, description = "Too many counts in this workspace just now", body = ApiError)))]
pub async fn count(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<SegmentId>,
) -> Result<Json<SegmentCount>, ApiFailure> {
    let segment = segments::get(&s.app.db, caller.tenant, id).await?;
    segments::take_count_allowance(&s.app.db, caller.tenant).await?;
    let readers = segments::count(&s.app.db, caller.tenant, &segment.definition).await?;
    Ok(Json(SegmentCount { readers }))
}

#[utoipa::path(post, path = "/api/v1/segments/count", operation_id = "countSegmentDefinition", security(("api_key" = [])),
    request_body = Definition,
    responses((status = 200, description = "Readers matching an unsaved tree", body = SegmentCount), (status = 422, body = ApiError),
        (status = 429, description = "Too many counts in this workspace just now", body = ApiError)))]
pub async fn count_definition(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<Definition>,
) -> Result<Json<SegmentCount>, ApiFailure> {
    segments::take_count_allowance(&s.app.db, caller.tenant).await?;
    let readers = segments::count(&s.app.db, caller.tenant, &body).await?;
    Ok(Json(SegmentCount { readers }))
}
