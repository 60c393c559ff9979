//! Streamed CSV downloads. `GET /audience/readers/export.csv?q&list&status&attribute`: the
//! readers matching the Readers page's current filter. `GET /campaigns/{id}/events.csv`: a
//! campaign's events (also in the API). Session-authenticated (any role).

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_engine::Role;
use herald_engine::audience::export;
use herald_engine::audience::readers::{AttributeCondition, ReaderFilter, ReaderStatus};
use herald_engine::campaigns::stats;
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;

use crate::startup::ServerState;

#[derive(Deserialize)]
pub struct ExportQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    list: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    attribute: String,
    #[serde(default)]
    tag: String,
}

pub async fn readers_csv(
    State(state): State<ServerState>,
    session: Session,
    ip: Option<axum::Extension<herald_app::ssr::ClientIp>>,
    Query(q): Query<ExportQuery>,
) -> Response {
    let (tenant, user) = match super::session_auth::require_member(&state.app.db, &session, Role::Viewer).await {
        Ok((tenant, user, _)) => (tenant, user),
        Err(response) => return response,
    };
    let attribute = match q.attribute.trim() {
        "" => None,
        a => match AttributeCondition::parse(a) {
            Ok(c) => Some(c),
            Err(e) => return (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).into_response(),
        },
    };
    let status = match ReaderStatus::parse_optional(&q.status) {
        Ok(s) => s,
        Err(e) => return (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).into_response(),
    };
    let filter = ReaderFilter {
        search: Some(q.q).filter(|s| !s.trim().is_empty()),
        list: q.list.parse().ok(),
        status,
        attribute,
        tag: Some(q.tag.clone()).filter(|t| !t.trim().is_empty()),
    };
    let actor = herald_engine::audit::Actor::User { id: user, ip: client_ip(ip) };
    let detail = json!({
        "search": filter.search, "list": filter.list, "status": filter.status, "attribute": q.attribute.trim(),
        "tag": filter.tag,
    });
    let exported = herald_engine::audit::Action::ExportDownloaded;
    herald_engine::audit::note(&state.app.db, tenant, &actor, exported, "readers.csv", detail).await;
    let db = state.app.db.clone();
    csv_download("readers.csv", move |tx| async move { export::stream_csv(&db, tenant, &filter, tx).await })
}

/// The address the edge middleware worked out, for the audit log.
fn client_ip(ip: Option<axum::Extension<herald_app::ssr::ClientIp>>) -> String {
    ip.map(|axum::Extension(herald_app::ssr::ClientIp(ip))| ip.to_string()).unwrap_or_default()
}

pub async fn campaign_events_csv(
    State(state): State<ServerState>,
    session: Session,
    ip: Option<axum::Extension<herald_app::ssr::ClientIp>>,
    Path(id): Path<String>,
) -> Response {
    let (tenant, user) = match super::session_auth::require_member(&state.app.db, &session, Role::Viewer).await {
        Ok((tenant, user, _)) => (tenant, user),
        Err(response) => return response,
    };
    let Ok(id) = id.parse::<herald_types::CampaignId>() else {
        return (StatusCode::NOT_FOUND, "Not found").into_response();
    };
    let actor = herald_engine::audit::Actor::User { id: user, ip: client_ip(ip) };
    let exported = herald_engine::audit::Action::ExportDownloaded;
    herald_engine::audit::note(
        &state.app.db,
        tenant,
        &actor,
        exported,
        &format!("campaign {id} events.csv"),
        json!({}),
    )
    .await;
    events_csv(&state.app.db, tenant, id).await
}

/// A campaign's events as a CSV download (404 for a campaign of another workspace).
pub async fn events_csv(
    db: &herald_engine::Db,
    tenant: herald_engine::TenantId,
    id: herald_types::CampaignId,
) -> Response {
    match herald_engine::campaigns::store::get(db, tenant, id).await {
        Ok(_) => {}
        Err(herald_engine::Error::NotFound) => return (StatusCode::NOT_FOUND, "Not found").into_response(),
        Err(e) => {
            tracing::error!(error = %e, "events export failed");
            return (StatusCode::INTERNAL_SERVER_ERROR, "The export failed; please try again.").into_response();
        }
    }
    let db = db.clone();
    csv_download("events.csv", move |tx| async move { stats::stream_events_csv(&db, tenant, id, tx).await })
}

/// Streams what `produce` sends as an attachment; an error mid-stream ends the download early
/// and is logged (the status line has gone out by then).
pub(crate) fn csv_download<F, Fut>(filename: &str, produce: F) -> Response
where
    F: FnOnce(tokio::sync::mpsc::Sender<Vec<u8>>) -> Fut,
    Fut: std::future::Future<Output = herald_engine::Result<()>> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let work = produce(tx);
    tokio::spawn(async move {
        if let Err(e) = work.await {
            tracing::error!(error = ?e, "CSV export failed mid-stream");
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, std::io::Error>(chunk), rx))
    });
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{filename}\"")),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}
