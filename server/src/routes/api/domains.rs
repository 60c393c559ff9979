//! `/api/v1/domains`: the domains the workspace may send From, the DNS records to publish for
//! each, and a live check of them, as Settings → Domains shows them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit::Action;
use herald_engine::sending::domains;
use herald_types::SendingDomainView;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[derive(Deserialize, ToSchema)]
pub struct NewDomain {
    /// `example.com`: mail From any address at it is allowed once it is verified.
    pub domain: String,
}

async fn view_of(s: &ServerState, caller: &ApiCaller, id: Uuid) -> Result<SendingDomainView, ApiFailure> {
    let d = domains::list(&s.app.db, caller.tenant)
        .await?
        .into_iter()
        .find(|d| d.id == id)
        .ok_or(herald_engine::Error::NotFound)?;
    Ok(domains::view(d, &s.app.domains.spf_include))
}

#[utoipa::path(get, path = "/api/v1/domains", operation_id = "listSendingDomains", security(("api_key" = [])),
    responses((status = 200, body = Vec<SendingDomainView>)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
) -> Result<Json<Vec<SendingDomainView>>, ApiFailure> {
    let list = domains::list(&s.app.db, caller.tenant).await?;
    Ok(Json(list.into_iter().map(|d| domains::view(d, &s.app.domains.spf_include)).collect()))
}

#[utoipa::path(post, path = "/api/v1/domains", operation_id = "addSendingDomain", security(("api_key" = [])),
    request_body = NewDomain,
    responses((status = 201, body = SendingDomainView, description = "Added, with the records to publish"),
              (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<NewDomain>,
) -> Result<(StatusCode, Json<SendingDomainView>), ApiFailure> {
    let d = domains::add(&s.app.db, &s.app.signer, caller.tenant, caller.role, &body.domain).await?;
    caller.audit(&s.app.db, Action::DomainAdded, &d.domain, serde_json::json!({})).await;
    Ok((StatusCode::CREATED, Json(domains::view(d, &s.app.domains.spf_include))))
}

#[utoipa::path(get, path = "/api/v1/domains/{id}", operation_id = "getSendingDomain", security(("api_key" = [])),
    responses((status = 200, body = SendingDomainView), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<Json<SendingDomainView>, ApiFailure> {
    Ok(Json(view_of(&s, &caller, id).await?))
}

/// Looks the records up in DNS now, and verifies the domain when they are there.
#[utoipa::path(post, path = "/api/v1/domains/{id}/check", operation_id = "checkSendingDomain", security(("api_key" = [])),
    responses((status = 200, body = SendingDomainView, description = "Each record with what the check found"),
              (status = 404, body = ApiError)))]
pub async fn check(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<Json<SendingDomainView>, ApiFailure> {
    let d = domains::check(&s.app.db, &s.app.domains, caller.tenant, caller.role, id).await?;
    Ok(Json(domains::view(d, &s.app.domains.spf_include)))
}

#[utoipa::path(delete, path = "/api/v1/domains/{id}", operation_id = "deleteSendingDomain", security(("api_key" = [])),
    responses((status = 204, description = "Removed"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiFailure> {
    domains::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, Action::DomainDeleted, id, serde_json::json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}
