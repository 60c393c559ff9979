//! `/api/v1/campaign-templates`: an author's saved starting points for campaigns.
//! (`/api/v1/templates` are transactional templates, another thing.) Another workspace's ids
//! answer 404, exactly like ids that do not exist.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::campaigns::templates;
use herald_types::{CampaignTemplate, CampaignTemplateId, CampaignTemplateInput, CampaignTemplateSummary};

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/campaign-templates", operation_id = "listCampaignTemplates", security(("api_key" = [])),
    responses((status = 200, description = "The workspace's saved campaign templates, by name, without their bodies (`GET /api/v1/campaign-templates/{id}` has the body)", body = Vec<CampaignTemplateSummary>)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
) -> Result<Json<Vec<CampaignTemplateSummary>>, ApiFailure> {
    Ok(Json(templates::list_templates(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/campaign-templates", operation_id = "createCampaignTemplate", security(("api_key" = [])),
    request_body = CampaignTemplateInput,
    responses((status = 201, description = "Saved", body = CampaignTemplate),
              (status = 403, body = ApiError),
              (status = 422, description = "A field is wrong (a block document is checked block by block), the name is taken, or the workspace has 200 templates", body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<CampaignTemplateInput>,
) -> Result<(StatusCode, Json<CampaignTemplate>), ApiFailure> {
    Ok((StatusCode::CREATED, Json(templates::create_template(&s.app.db, caller.tenant, caller.role, &body).await?)))
}

#[utoipa::path(get, path = "/api/v1/campaign-templates/{id}", operation_id = "getCampaignTemplate", security(("api_key" = [])),
    params(("id" = CampaignTemplateId, Path, description = "The template's id")),
    responses((status = 200, description = "The template", body = CampaignTemplate), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignTemplateId>,
) -> Result<Json<CampaignTemplate>, ApiFailure> {
    Ok(Json(templates::get_template(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/campaign-templates/{id}", operation_id = "updateCampaignTemplate", security(("api_key" = [])),
    params(("id" = CampaignTemplateId, Path, description = "The template's id")),
    request_body = CampaignTemplateInput,
    responses((status = 200, description = "Saved", body = CampaignTemplate), (status = 403, body = ApiError),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignTemplateId>,
    ApiJson(body): ApiJson<CampaignTemplateInput>,
) -> Result<Json<CampaignTemplate>, ApiFailure> {
    Ok(Json(templates::update_template(&s.app.db, caller.tenant, caller.role, id, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/campaign-templates/{id}", operation_id = "deleteCampaignTemplate", security(("api_key" = [])),
    params(("id" = CampaignTemplateId, Path, description = "The template's id")),
    responses((status = 204, description = "Deleted; campaigns started from it keep their content"), (status = 403, body = ApiError),
              (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignTemplateId>,
) -> Result<StatusCode, ApiFailure> {
    templates::delete_template(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
