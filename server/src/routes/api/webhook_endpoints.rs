//! `/api/v1/webhook-endpoints`: where the workspace's events are sent (outbound webhooks, see
//! [`herald_engine::outbound_webhooks`]), their deliveries, a test event and redelivery.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit::Actor;
use herald_engine::outbound_webhooks::{self as webhooks, Change};
use herald_types::{RotateSecret, WebhookDelivery, WebhookEndpoint, WebhookEndpointInput, WebhookEndpointWithSecret};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::paging::{Page, PageQuery};
use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

fn change<'a>(s: &'a ServerState, caller: &ApiCaller) -> Change<'a> {
    Change {
        db: &s.app.db,
        signer: &s.app.signer,
        egress: &s.app.egress,
        jobs: &s.app.jobs,
        tenant: caller.tenant,
        role: caller.role,
        actor: Actor::ApiKey { id: caller.key_id, ip: caller.ip.clone() },
    }
}

/// One event type an endpoint can receive.
#[derive(Serialize, ToSchema)]
pub struct EventType {
    /// `reader.subscribed`; an endpoint may also name a group, `reader.*`.
    pub name: &'static str,
    pub description: &'static str,
}

#[utoipa::path(get, path = "/api/v1/webhook-event-types", operation_id = "listWebhookEventTypes", security(("api_key" = [])),
    responses((status = 200, body = Vec<EventType>)))]
pub async fn event_types(_caller: ApiCaller) -> Json<Vec<EventType>> {
    Json(webhooks::event_types().into_iter().map(|(name, description)| EventType { name, description }).collect())
}

#[utoipa::path(get, path = "/api/v1/webhook-endpoints", operation_id = "listWebhookEndpoints", security(("api_key" = [])),
    responses((status = 200, body = Vec<WebhookEndpoint>)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<WebhookEndpoint>>, ApiFailure> {
    Ok(Json(webhooks::list(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints", operation_id = "createWebhookEndpoint", security(("api_key" = [])),
    request_body = WebhookEndpointInput,
    responses((status = 201, body = WebhookEndpointWithSecret, description = "Created; the secret is shown this once"),
              (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<WebhookEndpointInput>,
) -> Result<(StatusCode, Json<WebhookEndpointWithSecret>), ApiFailure> {
    Ok((StatusCode::CREATED, Json(webhooks::create(&change(&s, &caller), &body).await?)))
}

#[utoipa::path(get, path = "/api/v1/webhook-endpoints/{id}", operation_id = "getWebhookEndpoint", security(("api_key" = [])),
    responses((status = 200, body = WebhookEndpoint), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<Json<WebhookEndpoint>, ApiFailure> {
    Ok(Json(webhooks::get(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/webhook-endpoints/{id}", operation_id = "updateWebhookEndpoint", security(("api_key" = [])),
    request_body = WebhookEndpointInput,
    responses((status = 200, body = WebhookEndpoint), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
    ApiJson(body): ApiJson<WebhookEndpointInput>,
) -> Result<Json<WebhookEndpoint>, ApiFailure> {
    Ok(Json(webhooks::update(&change(&s, &caller), id, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/webhook-endpoints/{id}", operation_id = "deleteWebhookEndpoint", security(("api_key" = [])),
    responses((status = 204, description = "Deleted, with its undelivered events"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiFailure> {
    webhooks::delete(&change(&s, &caller), id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints/{id}/rotate-secret", operation_id = "rotateWebhookEndpointSecret",
    security(("api_key" = [])), request_body = RotateSecret,
    responses((status = 200, body = WebhookEndpointWithSecret, description = "The new secret, shown this once; the old one signs too until the overlap ends"),
              (status = 404, body = ApiError)))]
pub async fn rotate_secret(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
    ApiJson(body): ApiJson<RotateSecret>,
) -> Result<Json<WebhookEndpointWithSecret>, ApiFailure> {
    Ok(Json(webhooks::rotate_secret(&change(&s, &caller), id, &body).await?))
}

/// The test event queued.
#[derive(Serialize, ToSchema)]
pub struct TestEventQueued {
    pub event_id: String,
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints/{id}/test", operation_id = "sendWebhookTestEvent", security(("api_key" = [])),
    responses((status = 202, body = TestEventQueued, description = "A `webhook.test` event is on its way to this endpoint"),
              (status = 404, body = ApiError)))]
pub async fn send_test(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<(StatusCode, Json<TestEventQueued>), ApiFailure> {
    let event_id = webhooks::send_test(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok((StatusCode::ACCEPTED, Json(TestEventQueued { event_id })))
}

#[derive(Deserialize, IntoParams)]
pub struct DeliveriesQuery {
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// 1 to 100; 25 by default.
    pub limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/webhook-endpoints/{id}/deliveries", operation_id = "listWebhookDeliveries",
    security(("api_key" = [])), params(DeliveriesQuery),
    responses((status = 200, description = "Deliveries, newest first: `data` and `next_cursor`", body = Page<WebhookDelivery>),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn deliveries(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
    Query(q): Query<DeliveriesQuery>,
) -> Result<Json<Page<WebhookDelivery>>, ApiFailure> {
    let page = PageQuery { cursor: q.cursor, limit: q.limit };
    let limit = page.limit(25, 100)?;
    // The engine pages the deliveries itself (the endpoint's page uses it too); its cursor
    // travels inside the API's.
    let after = page.after(|k| Some(k.to_owned()))?;
    let found = webhooks::deliveries(&s.app.db, caller.tenant, id, after.as_deref(), limit).await?;
    Ok(Json(Page::with_next(found.items, found.next_cursor)))
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints/{id}/deliveries/{event_id}/redeliver",
    operation_id = "redeliverWebhookEvent", security(("api_key" = [])),
    responses((status = 202, description = "Due again now"), (status = 404, body = ApiError)))]
pub async fn redeliver(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path((id, event_id)): Path<(Uuid, String)>,
) -> Result<StatusCode, ApiFailure> {
    webhooks::redeliver(&s.app.db, caller.tenant, caller.role, id, &event_id).await?;
    Ok(StatusCode::ACCEPTED)
}
