//! New drafts from a campaign: a resend to the readers of a sent campaign who did not open it,
//! and a plain copy.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::campaigns::resend;
use herald_types::{Campaign, CampaignId, ResendInput};

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/resend", operation_id = "resendCampaignToNonOpeners", security(("api_key" = [])),
    params(("id" = CampaignId, Path, description = "The sent campaign's id")),
    request_body = ResendInput,
    responses((status = 201, description = "A new draft whose audience is the original's readers who did not open, click, unsubscribe, bounce or complain; `resend_of` names the original, whose `resends` lists it", body = Campaign),
              (status = 404, body = ApiError),
              (status = 409, body = ApiError, description = "Not sent yet, or sent without per-reader tracking"),
              (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
    ApiJson(body): ApiJson<ResendInput>,
) -> Result<(StatusCode, Json<Campaign>), ApiFailure> {
    Ok((StatusCode::CREATED, Json(resend::create(&s.app.db, caller.tenant, caller.role, id, &body).await?)))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/duplicate", operation_id = "duplicateCampaign", security(("api_key" = [])),
    params(("id" = CampaignId, Path, description = "The campaign to copy, in any state")),
    responses((status = 201, description = "A new draft with the original's content, sender, audience, tracking and A/B versions, named \"… (copy)\"; not its schedule, repetition or history", body = Campaign),
              (status = 404, body = ApiError)))]
pub async fn duplicate(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<(StatusCode, Json<Campaign>), ApiFailure> {
    let copy = herald_engine::campaigns::store::duplicate(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok((StatusCode::CREATED, Json(copy)))
}
