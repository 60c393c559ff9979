//! A campaign's A/B test: its versions' results side by side, and choosing the winner before
//! the window ends (the supervisor chooses by the metric when it does).

use axum::Json;
use axum::extract::{Path, State};
use herald_engine::api_keys::ApiCaller;
use herald_engine::campaigns::ab_test;
use herald_types::{AbResults, CampaignId, PickWinner};

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/campaigns/{id}/ab-test", operation_id = "getCampaignAbTest", security(("api_key" = [])),
    params(("id" = CampaignId, Path, description = "The campaign's id")),
    responses((status = 200, description = "Each version's test readers, sent messages, unique opens (machine opens not counted) and unique clicks, the readers held for the winner, and the winner once chosen", body = AbResults),
              (status = 404, body = ApiError), (status = 409, body = ApiError, description = "The campaign has no A/B test")))]
pub async fn results(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<AbResults>, ApiFailure> {
    Ok(Json(ab_test::results(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/pick-winner", operation_id = "pickCampaignWinner", security(("api_key" = [])),
    params(("id" = CampaignId, Path, description = "The campaign's id")),
    request_body = PickWinner,
    responses((status = 200, description = "The winner is chosen and the readers held for it are queued with it; choosing the same winner again changes nothing", body = AbResults),
              (status = 404, body = ApiError),
              (status = 409, body = ApiError, description = "No A/B test, not sent yet, or another version already won"),
              (status = 422, body = ApiError, description = "No such version")))]
pub async fn pick_winner(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
    ApiJson(body): ApiJson<PickWinner>,
) -> Result<Json<AbResults>, ApiFailure> {
    let results = ab_test::pick_winner(&s.app.db, &s.app.jobs, caller.tenant, caller.role, id, body.variant).await?;
    let detail = serde_json::json!({ "winner": results.winner });
    caller.audit(&s.app.db, herald_engine::audit::Action::WinnerPicked, id, detail).await;
    Ok(Json(results))
}
