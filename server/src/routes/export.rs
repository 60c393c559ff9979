//! `GET /audience/readers/export.csv?q&list&status&attribute`: the readers matching the
//! Readers page's current filter, as a streamed CSV download. Session-authenticated (any role).

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_engine::Role;
use herald_engine::audience::{export, readers::AttributeCondition, readers::ReaderFilter};
use serde::Deserialize;
use tower_sessions::Session;
use uuid::Uuid;

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
}

pub async fn readers_csv(State(state): State<ServerState>, session: Session, Query(q): Query<ExportQuery>) -> Response {
    let tenant = match super::session_auth::require_member(&state.app.db, &session, Role::Viewer).await {
        Ok((tenant, _, _)) => tenant,
        Err(response) => return response,
    };
    let attribute = match q.attribute.trim() {
        "" => None,
        a => match AttributeCondition::parse(a) {
            Ok(c) => Some(c),
            Err(e) => return (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).into_response(),
        },
    };
    let filter = ReaderFilter {
        search: Some(q.q).filter(|s| !s.trim().is_empty()),
        list: Uuid::parse_str(&q.list).ok(),
        status: Some(q.status).filter(|s| !s.is_empty()),
        attribute,
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let db = state.app.db.clone();
    tokio::spawn(async move {
        if let Err(e) = export::stream_csv(&db, tenant, &filter, tx).await {
            tracing::error!(error = ?e, "readers export failed mid-stream");
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, std::io::Error>(chunk), rx))
    });
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (header::CONTENT_DISPOSITION, "attachment; filename=\"readers.csv\""),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}
