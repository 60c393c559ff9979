//! `/api/v1/campaigns`: drafts, the send lifecycle and live counts. Every lifecycle call is the
//! same compare-and-set the web app uses: two concurrent `send` calls start one send (the other
//! gets 409).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::progress::{self, Progress, Report};
use herald_engine::campaigns::recurring::{self, Edition, FeedItem, FeedResult};
use herald_engine::campaigns::store::{self, Campaign, CampaignInput};
use herald_types::{CampaignId, ScheduleInput};
use serde::Serialize;
use utoipa::ToSchema;

use super::paging::{Page, PageQuery, parse_time_and_id, time_and_id};
use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[derive(Serialize, ToSchema)]
pub struct RetryResult {
    /// Failed messages put back in the queue.
    pub requeued: u64,
}

#[utoipa::path(get, path = "/api/v1/campaigns", operation_id = "listCampaigns", security(("api_key" = [])),
    params(herald_types::CampaignFilter),
    responses((status = 200, description = "Campaigns, newest first, that match the filter: `data` and `next_cursor`", body = Page<Campaign>),
              (status = 422, body = ApiError)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Query(filter): Query<herald_types::CampaignFilter>,
) -> Result<Json<Page<Campaign>>, ApiFailure> {
    let mut query = filter.parse().map_err(herald_engine::Error::Invalid)?;
    let page = PageQuery { cursor: filter.cursor, limit: None };
    query.after = page.after(parse_time_and_id::<CampaignId>)?;
    let limit = query.limit;
    query.limit += 1;
    let fetched = store::search(&s.app.db, caller.tenant, &query).await?;
    Ok(Json(Page::new(fetched, limit, |c| time_and_id(c.created_at, c.id))))
}

#[utoipa::path(post, path = "/api/v1/campaigns", operation_id = "createCampaign", security(("api_key" = [])), request_body = CampaignInput,
    responses((status = 201, description = "Created as a draft"), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<CampaignInput>,
) -> Result<(StatusCode, Json<Campaign>), ApiFailure> {
    let c = store::create(&s.app.db, caller.tenant, caller.role, &body).await?;
    Ok((StatusCode::CREATED, Json(c)))
}

#[utoipa::path(get, path = "/api/v1/campaigns/{id}", operation_id = "getCampaign", security(("api_key" = [])),
    responses((status = 200, description = "The campaign"), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Campaign>, ApiFailure> {
    Ok(Json(store::get(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/campaigns/{id}", operation_id = "updateCampaign", security(("api_key" = [])), request_body = CampaignInput,
    responses((status = 200, description = "Saved"), (status = 404, body = ApiError), (status = 409, body = ApiError),
              (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
    ApiJson(body): ApiJson<CampaignInput>,
) -> Result<Json<Campaign>, ApiFailure> {
    Ok(Json(store::update(&s.app.db, caller.tenant, caller.role, id, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/campaigns/{id}", operation_id = "deleteCampaign", security(("api_key" = [])),
    responses((status = 204, description = "Draft deleted"), (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<StatusCode, ApiFailure> {
    store::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/send", operation_id = "sendCampaign", security(("api_key" = [])),
    responses((status = 200, description = "Sending"), (status = 409, body = ApiError, description = "Already sending or sent"),
              (status = 422, body = ApiError, description = "Not ready: the message says what to fix")))]
pub async fn send(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Campaign>, ApiFailure> {
    let campaign = lifecycle::send_now(&s.app.db, &s.app.jobs, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, herald_engine::audit::Action::CampaignSent, id, serde_json::json!({})).await;
    Ok(Json(campaign))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/schedule", operation_id = "scheduleCampaign", security(("api_key" = [])), request_body = ScheduleInput,
    responses((status = 200, description = "Scheduled"), (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub async fn schedule(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
    ApiJson(body): ApiJson<ScheduleInput>,
) -> Result<Json<Campaign>, ApiFailure> {
    let campaign = lifecycle::schedule(&s.app.db, caller.tenant, caller.role, id, body.at, &body.timezone).await?;
    caller
        .audit(
            &s.app.db,
            herald_engine::audit::Action::CampaignScheduled,
            id,
            serde_json::json!({ "at": body.at, "timezone": body.timezone }),
        )
        .await;
    Ok(Json(campaign))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/unschedule", operation_id = "unscheduleCampaign", security(("api_key" = [])),
    responses((status = 200, description = "Back to draft"), (status = 409, body = ApiError)))]
pub async fn unschedule(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Campaign>, ApiFailure> {
    let campaign = lifecycle::unschedule(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, herald_engine::audit::Action::CampaignUnscheduled, id, serde_json::json!({})).await;
    Ok(Json(campaign))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/pause", operation_id = "pauseCampaign", security(("api_key" = [])),
    responses((status = 200, description = "Paused: no new messages start"), (status = 409, body = ApiError)))]
pub async fn pause(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Campaign>, ApiFailure> {
    let campaign = lifecycle::pause(&s.app.db, caller.tenant, caller.role, id, "Paused through the API").await?;
    caller.audit(&s.app.db, herald_engine::audit::Action::CampaignPaused, id, serde_json::json!({})).await;
    Ok(Json(campaign))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/resume", operation_id = "resumeCampaign", security(("api_key" = [])),
    responses((status = 200, description = "Sending again"), (status = 409, body = ApiError)))]
pub async fn resume(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Campaign>, ApiFailure> {
    let campaign = lifecycle::resume(&s.app.db, &s.app.jobs, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, herald_engine::audit::Action::CampaignResumed, id, serde_json::json!({})).await;
    Ok(Json(campaign))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/cancel", operation_id = "cancelCampaign", security(("api_key" = [])),
    responses((status = 200, description = "Cancelled: queued messages will not be sent"), (status = 409, body = ApiError)))]
pub async fn cancel(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Campaign>, ApiFailure> {
    let campaign = lifecycle::cancel(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, herald_engine::audit::Action::CampaignCancelled, id, serde_json::json!({})).await;
    Ok(Json(campaign))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/retry-failed", operation_id = "retryFailedCampaignReaders", security(("api_key" = [])),
    responses((status = 200, body = RetryResult), (status = 409, body = ApiError)))]
pub async fn retry_failed(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<RetryResult>, ApiFailure> {
    let requeued = lifecycle::retry_failed(&s.app.db, &s.app.jobs, caller.tenant, caller.role, id).await?;
    Ok(Json(RetryResult { requeued }))
}

#[utoipa::path(get, path = "/api/v1/campaigns/{id}/stats", operation_id = "getCampaignStats", security(("api_key" = [])),
    responses((status = 200, description = "Counts per status, rate (msg/s) and ETA"), (status = 404, body = ApiError)))]
pub async fn stats(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Progress>, ApiFailure> {
    Ok(Json(progress::view(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(get, path = "/api/v1/campaigns/{id}/audience", operation_id = "getCampaignAudience", security(("api_key" = [])),
    params(("id" = CampaignId, Path, description = "The campaign's id")),
    responses((status = 200, description = "Readers a send started now would mail (after suppressions, unconfirmed readers, the frequency cap and the exclusion), and those it would skip", body = herald_types::AudienceCount),
              (status = 404, body = ApiError)))]
pub async fn audience(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<herald_types::AudienceCount>, ApiFailure> {
    Ok(Json(herald_engine::campaigns::fanout::reach(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(get, path = "/api/v1/campaigns/{id}/results", operation_id = "getCampaignResults", security(("api_key" = [])),
    responses((status = 200, description = "Engagement: sent, delivered, bounces, complaints, unsubscribes, opens and clicks (unique and total), opens and clicks per hour, top links, top recipient domains"),
              (status = 404, body = ApiError)))]
pub async fn results(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<herald_engine::campaigns::stats::CampaignStats>, ApiFailure> {
    Ok(Json(herald_engine::campaigns::stats::campaign(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(get, path = "/api/v1/campaigns/{id}/events.csv", operation_id = "exportCampaignEvents", security(("api_key" = [])),
    responses((status = 200, description = "Every event of the campaign as CSV (at,event,email,url,detail), streamed", content_type = "text/csv"),
              (status = 404, body = ApiError)))]
pub async fn events_csv(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> axum::response::Response {
    let exported = herald_engine::audit::Action::ExportDownloaded;
    caller.audit(&s.app.db, exported, format!("campaign {id} events.csv"), serde_json::json!({})).await;
    crate::routes::export::events_csv(&s.app.db, caller.tenant, id).await
}

#[utoipa::path(get, path = "/api/v1/campaigns/{id}/report", operation_id = "getCampaignReport", security(("api_key" = [])),
    responses((status = 200, description = "Counts, the latest failures with reasons, skip reasons"), (status = 404, body = ApiError)))]
pub async fn report(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Report>, ApiFailure> {
    Ok(Json(progress::report(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(post, path = "/api/v1/campaigns/{id}/stop", operation_id = "stopRecurringCampaign", security(("api_key" = [])),
    responses((status = 200, description = "The schedule stopped; the campaign is a draft again"),
              (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub async fn stop(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Campaign>, ApiFailure> {
    let campaign = recurring::stop(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, herald_engine::audit::Action::CampaignStopped, id, serde_json::json!({})).await;
    Ok(Json(campaign))
}

#[utoipa::path(get, path = "/api/v1/campaigns/{id}/editions", operation_id = "listCampaignEditions", security(("api_key" = [])),
    responses((status = 200, description = "A recurring campaign's editions, newest first"), (status = 404, body = ApiError)))]
pub async fn editions(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
) -> Result<Json<Vec<Edition>>, ApiFailure> {
    Ok(Json(recurring::editions(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/campaigns/{id}/feed/{reader}", operation_id = "putCampaignFeedItem", security(("api_key" = [])),
    request_body(content = Object, description = "This reader's data for the next edition"),
    responses((status = 200, description = "Stored"), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn put_feed(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path((id, reader)): Path<(CampaignId, String)>,
    ApiJson(data): ApiJson<serde_json::Value>,
) -> Result<Json<FeedResult>, ApiFailure> {
    let r = recurring::put_feed(&s.app.db, caller.tenant, caller.role, id, &[FeedItem { reader, data }]).await?;
    if let Some(rejected) = r.rejected.first() {
        return Err(match rejected.reason.as_str() {
            recurring::NO_SUCH_READER => herald_engine::Error::NotFound,
            other => herald_engine::Error::invalid(format!("The data was not stored: {other}.")),
        }
        .into());
    }
    Ok(Json(r))
}

#[utoipa::path(put, path = "/api/v1/campaigns/{id}/feed", operation_id = "putCampaignFeed", security(("api_key" = [])), request_body = Vec<FeedItem>,
    responses((status = 200, description = "Stored; items that were not are listed", body = FeedResult),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn put_feed_bulk(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<CampaignId>,
    ApiJson(items): ApiJson<Vec<FeedItem>>,
) -> Result<Json<FeedResult>, ApiFailure> {
    Ok(Json(recurring::put_feed(&s.app.db, caller.tenant, caller.role, id, &items).await?))
}
