//! The REST API under `/api/v1`: JSON, authenticated with `Authorization: Bearer <key>`, acting in
//! the key's workspace. Errors are JSON with a stable `code` and a human `message`.

pub mod ab_tests;
pub mod audit;
pub mod automations;
pub mod brand;
pub mod campaign_templates;
pub mod campaigns;
pub mod fields;
pub mod lists;
pub mod messages;
pub mod readers;
pub mod resends;
pub mod segments;
pub mod suppressions;
pub mod tags;
pub mod templates;
pub mod workspace;

use std::collections::BTreeMap;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use axum::{Json, Router};
use herald_engine::api_keys::{self, ApiCaller};
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::{Modify, OpenApi, ToSchema};

use crate::startup::ServerState;

/// `Json<T>` whose rejections (bad JSON, wrong fields, wrong content type) are the API's JSON
/// errors with code `invalid`, not axum's plain-text ones.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiFailure;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Self(v)),
            Err(e) => Err(ApiFailure(herald_engine::Error::invalid(e.body_text()))),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct ApiError {
    /// Stable, machine-readable: `unauthenticated`, `forbidden`, `not_found`, `invalid`, `conflict`, `rate_limited`, `busy`, `unavailable`, `internal`.
    pub code: &'static str,
    pub message: String,
    /// With `invalid`: the message for each input field that is wrong, keyed by its name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
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
        let mut fields = BTreeMap::new();
        let mut retry_after = None;
        let (status, code, message) = match self.0 {
            E::Invalid(e) => {
                for f in &e.errors {
                    if let Some(field) = &f.field {
                        fields.entry(field.clone()).or_insert_with(|| f.message.clone());
                    }
                }
                (StatusCode::UNPROCESSABLE_ENTITY, "invalid", e.to_string())
            }
            E::Conflict(m) => (StatusCode::CONFLICT, "conflict", m),
            E::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated", "A valid API key is required.".into()),
            E::Forbidden => (StatusCode::FORBIDDEN, "forbidden", "This key may not do that.".into()),
            E::Refused(m) => (StatusCode::FORBIDDEN, "refused", m),
            E::NotFound => (StatusCode::NOT_FOUND, "not_found", "Not found.".into()),
            E::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limited", "Too many requests.".into()),
            E::Busy { message, retry_after_secs } => {
                retry_after = Some(retry_after_secs);
                (StatusCode::TOO_MANY_REQUESTS, "busy", message)
            }
            E::Unavailable(message) => {
                retry_after = Some(30);
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
            }
            E::Unexpected(e) => {
                tracing::error!(error = ?e, "unexpected error in the API");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal", "Something went wrong on our side.".into())
            }
        };
        let mut res = (status, Json(ApiError { code, message, fields })).into_response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = retry_after {
            res.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
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
        let mut caller = api_keys::authenticate(&state.app.db, key).await?;
        if let Some(herald_app::ssr::ClientIp(ip)) = parts.extensions.get::<herald_app::ssr::ClientIp>() {
            caller.ip = ip.to_string();
        }
        Ok(caller)
    }
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
    paths(
        workspace::get_workspace,
        audit::index,
        lists::index, lists::create, lists::show, lists::update, lists::delete,
        readers::index, readers::show, readers::create, readers::update, readers::delete,
        readers::bulk_upsert, readers::subscribe, readers::unsubscribe,
        tags::index, tags::rename, tags::delete, tags::of_reader, tags::add, tags::remove,
        crate::routes::media::index, crate::routes::media::upload_from_api, crate::routes::media::remove,
        brand::show, brand::update, brand::layouts,
        campaign_templates::index, campaign_templates::create, campaign_templates::show, campaign_templates::update,
        campaign_templates::delete,
        fields::index, fields::create, fields::update, fields::delete,
        segments::index, segments::create, segments::show, segments::update, segments::delete, segments::count,
        segments::count_definition,
        automations::index, automations::create, automations::show, automations::update, automations::delete,
        automations::start, automations::pause, automations::archive, automations::show_report, automations::runs,
        automations::reader_runs, automations::record_event,
        campaigns::audience, ab_tests::results, ab_tests::pick_winner, resends::create, resends::duplicate,
        suppressions::index, suppressions::add, suppressions::remove,
        campaigns::index, campaigns::create, campaigns::show, campaigns::update, campaigns::delete,
        campaigns::send, campaigns::schedule, campaigns::unschedule, campaigns::pause, campaigns::resume,
        campaigns::cancel, campaigns::retry_failed, campaigns::stats, campaigns::report, campaigns::results,
        campaigns::events_csv, campaigns::stop, campaigns::editions, campaigns::put_feed, campaigns::put_feed_bulk,
        messages::create, messages::index, messages::show, messages::cancel,
        templates::index, templates::create, templates::show, templates::update, templates::delete,
    ),
    components(schemas(
        workspace::WorkspaceJson, ApiError, audit::AuditPage, herald_types::AuditEntry, herald_types::AuditAction, herald_types::ActorKind, herald_types::ListInput, herald_types::List, herald_types::ListWithCounts,
        herald_types::NewReader, herald_types::ReaderInput, herald_types::ReaderChange,
        herald_types::BulkUpsert, herald_types::BulkOutcome, herald_types::Rejected, herald_types::Existing, herald_types::ListChoice,
        herald_types::Tag, herald_types::TagNames, herald_types::TagId, tags::TagRename,
        herald_types::Media, herald_types::MediaLibrary, herald_types::MediaId,
        herald_types::Brand, herald_types::Theme, herald_types::Colour, herald_types::Font, herald_types::Layout,
        herald_types::LayoutView, herald_types::CampaignTemplate, herald_types::CampaignTemplateInput, herald_types::CampaignTemplateSummary,
        herald_types::CampaignTemplateId, herald_types::BlockDocument, herald_types::Block, herald_types::Column,
        herald_types::SocialLink,
        herald_types::Field, herald_types::FieldInput, herald_types::FieldKind,
        herald_types::Segment, herald_types::SegmentInput, herald_types::SegmentId, herald_types::segment::Definition,
        herald_types::segment::Rule, herald_types::segment::Group, herald_types::segment::Condition,
        herald_types::segment::Match, herald_types::segment::ListState, herald_types::segment::FieldOp,
        herald_types::segment::DateOp, herald_types::segment::SignupSource, herald_types::segment::SegmentCount,
        herald_types::Automation, herald_types::AutomationInput, herald_types::AutomationId, herald_types::AutomationStepId,
        herald_types::AutomationStatus, herald_types::Trigger, herald_types::Reentry, herald_types::RemovedStepReaders,
        herald_types::Step, herald_types::StepInput, herald_types::StepAction, herald_types::WaitUnit, herald_types::Weekday,
        herald_types::AutomationReport, herald_types::StepStats, herald_types::Run, herald_types::RunStep,
        herald_types::RunState, herald_types::ReaderEventInput, herald_types::EventAccepted,
        herald_types::AudienceCount, herald_types::AbTest, herald_types::Variant, herald_types::AbMetric,
        herald_types::AbResults, herald_types::VariantResult, herald_types::PickWinner, herald_types::ResendInput,
        herald_types::NewSuppressions, herald_types::SuppressionsAdded, herald_types::SuppressionReason,
        herald_types::CampaignInput, herald_types::Campaign, herald_types::Progress, herald_types::Report,
        herald_types::ScheduleInput, campaigns::RetryResult,
        herald_types::FeedResult, herald_types::FeedItem,
        herald_types::SendRequest, herald_types::TemplateInput, herald_types::Template,
    )),
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
        .route("/api/v1/workspace", get(workspace::get_workspace))
        .route("/api/v1/audit", get(audit::index))
        .route("/api/v1/lists", get(lists::index).post(lists::create))
        .route("/api/v1/lists/{id}", get(lists::show).put(lists::update).delete(lists::delete))
        .route("/api/v1/readers", get(readers::index).post(readers::create))
        .route("/api/v1/readers/bulk", readers::bulk_route())
        .route("/api/v1/readers/{id}", get(readers::show).patch(readers::update).delete(readers::delete))
        .route("/api/v1/readers/{id}/subscriptions", post(readers::subscribe))
        .route("/api/v1/readers/{id}/tags", get(tags::of_reader).post(tags::add).delete(tags::remove))
        .route("/api/v1/tags", get(tags::index))
        .route("/api/v1/brand", get(brand::show).put(brand::update))
        .route("/api/v1/layouts", get(brand::layouts))
        .route("/api/v1/campaign-templates", get(campaign_templates::index).post(campaign_templates::create))
        .route(
            "/api/v1/campaign-templates/{id}",
            get(campaign_templates::show).put(campaign_templates::update).delete(campaign_templates::delete),
        )
        .route("/api/v1/fields", get(fields::index).post(fields::create))
        .route("/api/v1/fields/{key}", patch(fields::update).delete(fields::delete))
        .route("/api/v1/tags/{id}", patch(tags::rename).delete(tags::delete))
        .route("/api/v1/segments", get(segments::index).post(segments::create))
        .route("/api/v1/segments/count", post(segments::count_definition))
        .route("/api/v1/segments/{id}", get(segments::show).put(segments::update).delete(segments::delete))
        .route("/api/v1/segments/{id}/count", get(segments::count))
        .route("/api/v1/automations", get(automations::index).post(automations::create))
        .route("/api/v1/automations/{id}", get(automations::show).put(automations::update).delete(automations::delete))
        .route("/api/v1/automations/{id}/start", post(automations::start))
        .route("/api/v1/automations/{id}/pause", post(automations::pause))
        .route("/api/v1/automations/{id}/archive", post(automations::archive))
        .route("/api/v1/automations/{id}/report", get(automations::show_report))
        .route("/api/v1/automations/{id}/runs", get(automations::runs))
        .route("/api/v1/readers/{id}/automations", get(automations::reader_runs))
        .route("/api/v1/readers/{id}/events", post(automations::record_event))
        .route("/api/v1/campaigns/{id}/audience", get(campaigns::audience))
        .route("/api/v1/campaigns/{id}/ab-test", get(ab_tests::results))
        .route("/api/v1/campaigns/{id}/pick-winner", post(ab_tests::pick_winner))
        .route("/api/v1/campaigns/{id}/resend", post(resends::create))
        .route("/api/v1/campaigns/{id}/duplicate", post(resends::duplicate))
        .route("/api/v1/readers/{id}/subscriptions/{list_id}", delete(readers::unsubscribe))
        .route("/api/v1/suppressions", get(suppressions::index).post(suppressions::add))
        .route("/api/v1/suppressions/{email}", delete(suppressions::remove))
        .route("/api/v1/campaigns", get(campaigns::index).post(campaigns::create))
        .route("/api/v1/campaigns/{id}", get(campaigns::show).put(campaigns::update).delete(campaigns::delete))
        .route("/api/v1/campaigns/{id}/send", post(campaigns::send))
        .route("/api/v1/campaigns/{id}/schedule", post(campaigns::schedule))
        .route("/api/v1/campaigns/{id}/unschedule", post(campaigns::unschedule))
        .route("/api/v1/campaigns/{id}/pause", post(campaigns::pause))
        .route("/api/v1/campaigns/{id}/resume", post(campaigns::resume))
        .route("/api/v1/campaigns/{id}/cancel", post(campaigns::cancel))
        .route("/api/v1/campaigns/{id}/retry-failed", post(campaigns::retry_failed))
        .route("/api/v1/campaigns/{id}/stats", get(campaigns::stats))
        .route("/api/v1/campaigns/{id}/report", get(campaigns::report))
        .route("/api/v1/campaigns/{id}/results", get(campaigns::results))
        .route("/api/v1/campaigns/{id}/events.csv", get(campaigns::events_csv))
        .route("/api/v1/campaigns/{id}/stop", post(campaigns::stop))
        .route("/api/v1/campaigns/{id}/editions", get(campaigns::editions))
        .route("/api/v1/campaigns/{id}/feed", axum::routing::put(campaigns::put_feed_bulk))
        .route("/api/v1/campaigns/{id}/feed/{reader}", axum::routing::put(campaigns::put_feed))
        .route("/api/v1/messages", get(messages::index).post(messages::create))
        .route("/api/v1/messages/{id}", get(messages::show))
        .route("/api/v1/messages/{id}/cancel", post(messages::cancel))
        .route("/api/v1/templates", get(templates::index).post(templates::create))
        .route("/api/v1/templates/{id}", get(templates::show).put(templates::update).delete(templates::delete))
        .route("/api/v1/{*rest}", axum::routing::any(not_found))
}
