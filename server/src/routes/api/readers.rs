//! `/api/v1/readers`: get, search, create, update, delete, bulk upsert, and (un)subscribing to
//! lists. Another workspace's ids answer 404, exactly like ids that do not exist.

use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{MethodRouter, post};
use herald_engine::ListId;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::bulk::{self, Existing};
use herald_engine::audience::consent::Origin;
use herald_engine::audience::readers::{self, AttributeCondition, Reader, ReaderDetail, ReaderFilter, ReaderStatus};
use herald_types::{BulkOutcome, BulkUpsert, ListChoice, NewReader, ReaderChange};
use serde::Deserialize;

use super::paging::{Page, PageQuery};
use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

/// The most readers one bulk request may carry.
pub const BULK_MAX: usize = 10_000;

fn api_origin() -> Origin {
    Origin {
        wording: Some("Added through the API by the workspace, which attests the reader's consent.".into()),
        ..Origin::new("api")
    }
}

#[derive(Deserialize)]
pub struct SearchQuery {
    pub q: Option<String>,
    pub list: Option<ListId>,
    pub status: Option<String>,
    /// e.g. `city = "Lyon"` or `plan in ["pro","team"]`
    pub attribute: Option<String>,
    /// Only readers with this tag (its name, any case).
    pub tag: Option<String>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    pub limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/readers", operation_id = "listReaders", security(("api_key" = [])),
    params(
        ("q" = Option<String>, Query, description = "Email or name fragment"),
        ("list" = Option<Uuid>, Query, description = "Only readers on this list"),
        ("status" = Option<String>, Query, description = "active, unsubscribed or blocklisted"),
        ("attribute" = Option<String>, Query, description = "e.g. city = \"Lyon\""),
        ("tag" = Option<String>, Query, description = "Only readers with this tag (its name, any case)"),
        ("cursor" = Option<String>, Query, description = "The previous page's next_cursor"),
        ("limit" = Option<i64>, Query, description = "1–500, default 100"),
    ),
    responses((status = 200, description = "A page of readers, newest first: `data` and `next_cursor`"), (status = 422, body = ApiError)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Query(q): Query<SearchQuery>,
) -> Result<Json<Page<Reader>>, ApiFailure> {
    let page = PageQuery { cursor: q.cursor, limit: q.limit };
    let limit = page.limit(100, 500)?;
    let after = page.after(|k| k.parse::<i64>().ok())?;
    let filter = ReaderFilter {
        search: q.q,
        list: q.list,
        status: ReaderStatus::parse_optional(q.status.as_deref().unwrap_or_default())
            .map_err(herald_engine::Error::from)?,
        attribute: q
            .attribute
            .as_deref()
            .filter(|a| !a.trim().is_empty())
            .map(AttributeCondition::parse)
            .transpose()?,
        tag: q.tag,
    };
    let found = readers::search(&s.app.db, caller.tenant, &filter, after, limit).await?;
    Ok(Json(Page::with_next(found.readers, found.next_before.map(|id| id.to_string()))))
}

#[utoipa::path(get, path = "/api/v1/readers/{id}", operation_id = "getReader", security(("api_key" = [])),
    responses((status = 200, description = "The reader with subscriptions and consent history"), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
) -> Result<Json<ReaderDetail>, ApiFailure> {
    Ok(Json(readers::detail(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(post, path = "/api/v1/readers", operation_id = "createReader", security(("api_key" = [])), request_body = NewReader,
    responses((status = 201, description = "Created"), (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<NewReader>,
) -> Result<(StatusCode, Json<ReaderDetail>), ApiFailure> {
    let input = body.reader;
    // Typed fields first, so a wrong value is named by its field (the bulk path reports rows).
    if let Some(serde_json::Value::Object(attributes)) = &input.attributes {
        let defined = herald_engine::audience::fields::list(&s.app.db, caller.tenant).await?;
        herald_engine::audience::fields::check_attributes(&defined, attributes).map_err(herald_engine::Error::from)?;
    }
    let mut tx = s.app.db.tenant_tx(caller.tenant).await?;
    let out =
        bulk::upsert(&mut tx, caller.tenant, std::slice::from_ref(&input), &body.lists, Existing::Skip, &api_origin())
            .await?;
    if let Some(rejected) = out.invalid.first() {
        return Err(herald_engine::Error::invalid(rejected.reason.clone()).into());
    }
    if out.created == 0 {
        return Err(herald_engine::Error::Conflict(
            "A reader with this email already exists; use PATCH /api/v1/readers/{id} or the bulk endpoint.".into(),
        )
        .into());
    }
    let id: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 AND lower(email) = lower($2)")
        .bind(caller.tenant)
        .bind(herald_engine::Email::key(&input.email))
        .fetch_one(&mut *tx)
        .await
        .map_err(herald_engine::Error::from)?;
    tx.commit().await.map_err(herald_engine::Error::from)?;
    Ok((StatusCode::CREATED, Json(readers::detail(&s.app.db, caller.tenant, id).await?)))
}

#[utoipa::path(patch, path = "/api/v1/readers/{id}", operation_id = "updateReader", security(("api_key" = [])), request_body = ReaderChange,
    responses((status = 200, description = "Updated"), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
    ApiJson(body): ApiJson<ReaderChange>,
) -> Result<Json<Reader>, ApiFailure> {
    let current = readers::detail(&s.app.db, caller.tenant, id).await?.reader;
    let name = body.name.unwrap_or(current.name);
    let attributes = body.attributes.unwrap_or(current.attributes);
    Ok(Json(readers::update(&s.app.db, caller.tenant, caller.role, id, &name, attributes, &api_origin()).await?))
}

#[utoipa::path(delete, path = "/api/v1/readers/{id}", operation_id = "eraseReader", security(("api_key" = [])),
    responses((status = 204, description = "Erased (GDPR); a suppression entry, if any, stays"), (status = 404, body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiFailure> {
    readers::erase(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, herald_engine::audit::Action::ReaderErased, id, serde_json::json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/readers/bulk", operation_id = "upsertReaders", security(("api_key" = [])), request_body = BulkUpsert,
    responses((status = 200, body = BulkOutcome), (status = 422, body = ApiError)))]
pub async fn bulk_upsert(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<BulkUpsert>,
) -> Result<Json<BulkOutcome>, ApiFailure> {
    bulk::check_size(body.readers.len(), BULK_MAX)?;
    let mut tx = s.app.db.tenant_tx(caller.tenant).await?;
    let out = bulk::upsert(&mut tx, caller.tenant, &body.readers, &body.lists, body.existing, &api_origin()).await?;
    tx.commit().await.map_err(herald_engine::Error::from)?;
    Ok(Json(out))
}

/// The bulk route with room for 10,000 readers (other JSON bodies keep axum's 2 MB default).
pub fn bulk_route() -> MethodRouter<ServerState> {
    post(bulk_upsert).layer(DefaultBodyLimit::max(16 * 1024 * 1024))
}

#[utoipa::path(post, path = "/api/v1/readers/{id}/subscriptions", operation_id = "subscribeReader", security(("api_key" = [])), request_body = ListChoice,
    responses((status = 200, description = "The reader's subscriptions"), (status = 404, body = ApiError)))]
pub async fn subscribe(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
    ApiJson(body): ApiJson<ListChoice>,
) -> Result<Json<ReaderDetail>, ApiFailure> {
    let detail = readers::detail(&s.app.db, caller.tenant, id).await?;
    readers::add(&s.app.db, caller.tenant, caller.role, &detail.reader.email, "", &body.lists, &api_origin()).await?;
    Ok(Json(readers::detail(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(delete, path = "/api/v1/readers/{id}/subscriptions/{list_id}", operation_id = "unsubscribeReader", security(("api_key" = [])),
    responses((status = 204, description = "Unsubscribed"), (status = 404, body = ApiError)))]
pub async fn unsubscribe(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path((id, list)): Path<(i64, ListId)>,
) -> Result<StatusCode, ApiFailure> {
    readers::unsubscribe(&s.app.db, caller.tenant, caller.role, id, list, &api_origin()).await?;
    Ok(StatusCode::NO_CONTENT)
}
