//! `/api/v1/brand` and `/api/v1/layouts`: the workspace's logo, colours, font and
//! footer text, and the starter layouts dressed in them.

use axum::Json;
use axum::extract::State;
use herald_engine::api_keys::ApiCaller;
use herald_engine::campaigns::brand;
use herald_types::{Brand, LayoutView};

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/brand", operation_id = "getBrand", security(("api_key" = [])),
    responses((status = 200, description = "The workspace's brand (Herald's default until one is saved)", body = Brand)))]
pub async fn show(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Brand>, ApiFailure> {
    Ok(Json(brand::get(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(put, path = "/api/v1/brand", operation_id = "updateBrand", security(("api_key" = [])),
    request_body = Brand,
    responses((status = 200, description = "Saved; campaigns started from now on use it, those already started keep theirs", body = Brand),
              (status = 403, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<Brand>,
) -> Result<Json<Brand>, ApiFailure> {
    Ok(Json(brand::update(&s.app.db, caller.tenant, caller.role, &body).await?))
}

#[utoipa::path(get, path = "/api/v1/layouts", operation_id = "listLayouts", security(("api_key" = [])),
    responses((status = 200, description = "The starter layouts (newsletter, announcement, plain letter), each a block document dressed in the workspace's brand, ready to be a campaign's body", body = Vec<LayoutView>)))]
pub async fn layouts(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<LayoutView>>, ApiFailure> {
    Ok(Json(brand::layouts(&s.app.db, caller.tenant).await?))
}
