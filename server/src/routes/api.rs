//! The REST API under `/api/v1`: JSON, authenticated with `Authorization: Bearer <key>`, acting in
//! the key's workspace. Errors are JSON with a stable `code` and a human `message`.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing::get};
use herald_engine::api_keys::{self, ApiCaller};
use serde::Serialize;
use utoipa::{Modify, OpenApi, ToSchema};

use crate::startup::ServerState;

#[derive(Serialize, ToSchema)]
pub struct ApiError {
    /// Stable, machine-readable: `unauthenticated`, `forbidden`, `not_found`, `invalid`, `conflict`, `rate_limited`, `internal`.
    pub code: &'static str,
    pub message: String,
}

/// An API failure; converts from the engine's error and never exposes internal detail.
pub struct ApiFailure(herald_engine::Error);

impl From<herald_engine::Error> for ApiFailure {
    fn from(e: herald_engine::Error) -> Self {
        Self(e)
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        use herald_engine::Error as E;
        let (status, code, message) = match self.0 {
            E::Invalid(m) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid", m),
            E::Conflict(m) => (StatusCode::CONFLICT, "conflict", m),
            E::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated", "A valid API key is required.".into()),
            E::Forbidden => (StatusCode::FORBIDDEN, "forbidden", "This key may not do that.".into()),
            E::NotFound => (StatusCode::NOT_FOUND, "not_found", "Not found.".into()),
            E::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limited", "Too many requests.".into()),
            E::Unexpected(e) => {
                tracing::error!(error = ?e, "unexpected error in the API");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal", "Something went wrong on our side.".into())
            }
        };
        let mut res = (status, Json(ApiError { code, message })).into_response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        }
        res
    }
}

impl FromRequestParts<ServerState> for ApiCaller {
    type Rejection = ApiFailure;

    async fn from_request_parts(parts: &mut Parts, state: &ServerState) -> Result<Self, Self::Rejection> {
        let key = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(herald_engine::Error::Unauthenticated)?;
        Ok(api_keys::authenticate(&state.app.db, key).await?)
    }
}

#[derive(Serialize, ToSchema)]
pub struct WorkspaceJson {
    pub id: uuid::Uuid,
    pub name: String,
    pub slug: String,
    /// Whether a postal address is on file (required before campaigns can be sent).
    pub can_send_campaigns: bool,
}

/// The workspace this API key acts in.
#[utoipa::path(
    get,
    path = "/api/v1/workspace",
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The key's workspace", body = WorkspaceJson),
        (status = 401, description = "Missing, unknown or revoked key", body = ApiError),
    )
)]
pub async fn get_workspace(
    State(state): State<ServerState>,
    caller: ApiCaller,
) -> Result<Json<WorkspaceJson>, ApiFailure> {
    let ws = herald_engine::workspaces::get(&state.app.db, caller.tenant).await?;
    Ok(Json(WorkspaceJson { id: ws.id.0, can_send_campaigns: ws.can_send_campaigns(), name: ws.name, slug: ws.slug }))
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("hrld_…").build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Herald API", version = "1", description = "Authenticate with `Authorization: Bearer <API key>`; every call acts in the key's workspace."),
    paths(get_workspace),
    components(schemas(WorkspaceJson, ApiError)),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

async fn not_found() -> ApiFailure {
    ApiFailure(herald_engine::Error::NotFound)
}

pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/workspace", get(get_workspace))
        .route("/api/v1/{*rest}", axum::routing::any(not_found))
}
