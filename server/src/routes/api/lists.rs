//! `/api/v1/lists`: list CRUD.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::lists::{self, ListInput, ListWithCounts};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{API_ROLE, ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[derive(Deserialize, ToSchema)]
pub struct ListBody {
    pub name: String,
    /// Defaults to one derived from the name.
    #[serde(default)]
    pub slug: Option<String>,
    #[serde(default)]
    pub description: String,
    /// `single` or `double` (default).
    #[serde(default = "double")]
    pub opt_in: String,
    /// `public` (default) or `private`.
    #[serde(default = "public")]
    pub visibility: String,
}

fn double() -> String {
    "double".into()
}
fn public() -> String {
    "public".into()
}

impl From<ListBody> for ListInput {
    fn from(b: ListBody) -> Self {
        ListInput { name: b.name, slug: b.slug, description: b.description, opt_in: b.opt_in, visibility: b.visibility }
    }
}

/// Every list with its subscription counts.
#[utoipa::path(get, path = "/api/v1/lists", security(("api_key" = [])),
    responses((status = 200, description = "Lists with counts (confirmed, unconfirmed, unsubscribed)")))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<ListWithCounts>>, ApiFailure> {
    Ok(Json(lists::with_counts(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/lists", security(("api_key" = [])), request_body = ListBody,
    responses((status = 201, description = "Created"), (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<ListBody>,
) -> Result<(StatusCode, Json<lists::List>), ApiFailure> {
    let list = lists::create(&s.app.db, caller.tenant, API_ROLE, &body.into()).await?;
    Ok((StatusCode::CREATED, Json(list)))
}

#[utoipa::path(get, path = "/api/v1/lists/{id}", security(("api_key" = [])),
    responses((status = 200, description = "The list"), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<Json<lists::List>, ApiFailure> {
    Ok(Json(lists::get(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/lists/{id}", security(("api_key" = [])), request_body = ListBody,
    responses((status = 200, description = "Updated"), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
    ApiJson(body): ApiJson<ListBody>,
) -> Result<Json<lists::List>, ApiFailure> {
    Ok(Json(lists::update(&s.app.db, caller.tenant, API_ROLE, id, &body.into()).await?))
}

#[utoipa::path(delete, path = "/api/v1/lists/{id}", security(("api_key" = [])),
    responses((status = 204, description = "Deleted"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiFailure> {
    lists::delete(&s.app.db, caller.tenant, API_ROLE, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
