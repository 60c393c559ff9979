//! The REST API under `/api/v1`: JSON, authenticated with `Authorization: Bearer <key>`, acting in
//! the key's workspace. Errors are JSON with a stable `code` and a human `message`.

pub mod ab_tests;
pub mod audit;
pub mod automations;
pub mod brand;
pub mod campaign_templates;
pub mod campaigns;
pub mod domains;
pub mod fields;
pub mod idempotency;
pub mod identities;
pub mod imports;
pub mod lists;
pub mod media;
pub mod members;
pub mod messages;
pub mod metering;
pub mod paging;
pub mod readers;
pub mod resends;
pub mod segments;
pub mod suppressions;
pub mod tags;
pub mod team_rules;
pub mod templates;
pub mod webhook_endpoints;
pub mod workspace;

use std::collections::BTreeMap;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::handler::Handler;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, patch, post, put};
use axum::{Json, Router};
use herald_engine::api_keys::{self, ApiCaller};
use herald_types::Access;
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::{Modify, OpenApi, ToSchema};

use crate::startup::ServerState;
pub use idempotency::Keys;

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
    /// Stable, machine-readable: `unauthenticated`, `forbidden`, `not_found`, `invalid`, `conflict`, `refused`, `too_large`, `rate_limited`, `busy`, `unavailable`, `internal`.
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
        // Authenticated (and its access checked) already, by the metering middleware that every
        // route but the public ones is served behind (see `ApiRoutes::into_router`).
        if let Some(caller) = parts.extensions.get::<ApiCaller>() {
            return Ok(caller.clone());
        }
        authenticate(parts, state).await
    }
}

/// The caller of a request, from its `Authorization: Bearer` key, refused unless its role has
/// the route's declared access (see `ApiRoutes`), before the handler runs. A route served
/// without a declaration refuses every key rather than trusting its handler to check.
async fn authenticate(parts: &Parts, state: &ServerState) -> Result<ApiCaller, ApiFailure> {
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
    match parts.extensions.get::<Access>() {
        Some(access) if access.allows(caller.role) => Ok(caller),
        Some(_) => Err(herald_engine::Error::Forbidden.into()),
        None => {
            tracing::error!(path = %parts.uri.path(), "an API route without a declared access was called");
            Err(herald_engine::Error::Forbidden.into())
        }
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
        workspace::get_workspace, workspace::update_workspace,
        domains::index, domains::create, domains::show, domains::check, domains::delete,
        members::index, members::invite, members::withdraw, members::change_role, members::remove,
        identities::index, identities::create, identities::update, identities::delete, identities::test,
        team_rules::show, team_rules::update,
        audit::index,
        lists::index, lists::create, lists::show, lists::update, lists::delete,
        readers::index, readers::show, readers::create, readers::update, readers::delete,
        readers::bulk_upsert, readers::subscribe, readers::unsubscribe,
        tags::index, tags::rename, tags::delete, tags::of_reader, tags::add, tags::remove,
        media::index, media::upload_from_api, media::remove,
        imports::index, imports::upload, imports::show, imports::start, imports::discard, imports::errors_csv,
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
        webhook_endpoints::event_types, webhook_endpoints::index, webhook_endpoints::create, webhook_endpoints::show,
        webhook_endpoints::update, webhook_endpoints::delete, webhook_endpoints::rotate_secret,
        webhook_endpoints::send_test, webhook_endpoints::deliveries, webhook_endpoints::redeliver,
    ),
    components(schemas(
        workspace::WorkspaceJson, workspace::WorkspaceChange, domains::NewDomain, herald_types::SendingDomainView,
        herald_types::DnsRecordView, members::Team, members::NewInvite, members::RoleChange, herald_types::Member,
        herald_types::PendingInvite, herald_types::Identity, herald_types::IdentityInput, identities::ConnectionCheck,
        team_rules::TeamRules, herald_types::Role, herald_types::InviteId, herald_types::UserId, ApiError, herald_types::AuditEntry, herald_types::AuditAction, herald_types::ActorKind, herald_types::ListInput, herald_types::List, herald_types::ListWithCounts,
        herald_types::NewReader, herald_types::ReaderInput, herald_types::ReaderChange,
        herald_types::BulkUpsert, herald_types::BulkOutcome, herald_types::Rejected, herald_types::Existing, herald_types::ListChoice,
        herald_types::Tag, herald_types::TagNames, herald_types::TagId, tags::TagRename,
        herald_types::Media, herald_types::MediaLibrary, herald_types::MediaId,
        herald_types::Import, herald_types::ImportSummary, herald_types::ImportId, herald_types::ImportMode,
        herald_types::ImportStatus, imports::ImportStart,
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
        herald_types::WebhookEndpoint, herald_types::WebhookEndpointInput, herald_types::WebhookEndpointWithSecret,
        herald_types::RotateSecret, herald_types::WebhookDelivery, herald_types::WebhookDeliveries,
        webhook_endpoints::EventType, webhook_endpoints::TestEventQueued,
    )),
    modifiers(&BearerAuth, &AccessInDocument, &PathParameters)
)]
pub struct ApiDoc;

pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

async fn not_found() -> ApiFailure {
    ApiFailure(herald_engine::Error::NotFound)
}

/// One API route as declared: its method, its path pattern and who may call it.
#[derive(Clone, Debug)]
pub struct Declared {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
    /// For a POST: how it honours `Idempotency-Key`.
    pub keys: Option<Keys>,
    /// Its body streams in under a limit of its own, larger than the server's general one.
    pub streamed: bool,
}

/// How a route's handler is built: once, or from the running server's settings (a streamed
/// upload's body limit).
enum Endpoint {
    Fixed(Box<MethodRouter<ServerState>>),
    Streamed(fn(&ServerState) -> MethodRouter<ServerState>),
}

/// The API's routes, each added together with the [`Access`] it needs. The access travels with
/// the request (an extension), and the [`ApiCaller`] extractor refuses a key whose role falls
/// short, before the handler runs; a handler without a declaration fails closed (403). The same
/// table is what the OpenAPI document shows as `x-herald-access` and what the route-walk tests
/// read, so a route cannot be served without a declaration the tests see.
#[derive(Default)]
pub struct ApiRoutes {
    routes: Vec<(Declared, Endpoint)>,
}

impl ApiRoutes {
    /// `endpoint` must serve `method` only (build it with the helpers below). A POST stores and
    /// replays the answer to each `Idempotency-Key` (see [`idempotency`]); use
    /// [`ApiRoutes::add_post`] for one that keeps keys itself or only reads.
    pub fn add(self, method: Method, path: &'static str, access: Access, endpoint: MethodRouter<ServerState>) -> Self {
        let keys = (method == Method::POST).then_some(Keys::Stored);
        self.declare(Declared { method, path, access, keys, streamed: false }, Endpoint::Fixed(Box::new(endpoint)))
    }

    pub fn add_post(self, path: &'static str, access: Access, keys: Keys, endpoint: MethodRouter<ServerState>) -> Self {
        let d = Declared { method: Method::POST, path, access, keys: Some(keys), streamed: false };
        self.declare(d, Endpoint::Fixed(Box::new(endpoint)))
    }

    /// A POST whose body streams in under its own limit, served by [`upload_router`] outside the
    /// server's general body limit. It keeps its `Idempotency-Key` itself: the stored-answer
    /// layer would read the whole body first.
    pub fn add_streamed_post(
        self,
        path: &'static str,
        access: Access,
        endpoint: fn(&ServerState) -> MethodRouter<ServerState>,
    ) -> Self {
        let d = Declared { method: Method::POST, path, access, keys: Some(Keys::Handler), streamed: true };
        self.declare(d, Endpoint::Streamed(endpoint))
    }

    fn declare(mut self, d: Declared, endpoint: Endpoint) -> Self {
        self.routes.push((d, endpoint));
        self
    }

    pub fn get<H: Handler<T, ServerState>, T: 'static>(self, path: &'static str, access: Access, h: H) -> Self {
        self.add(Method::GET, path, access, get(h))
    }

    pub fn post<H: Handler<T, ServerState>, T: 'static>(self, path: &'static str, access: Access, h: H) -> Self {
        self.add(Method::POST, path, access, post(h))
    }

    pub fn put<H: Handler<T, ServerState>, T: 'static>(self, path: &'static str, access: Access, h: H) -> Self {
        self.add(Method::PUT, path, access, put(h))
    }

    pub fn patch<H: Handler<T, ServerState>, T: 'static>(self, path: &'static str, access: Access, h: H) -> Self {
        self.add(Method::PATCH, path, access, patch(h))
    }

    pub fn delete<H: Handler<T, ServerState>, T: 'static>(self, path: &'static str, access: Access, h: H) -> Self {
        self.add(Method::DELETE, path, access, delete(h))
    }

    pub fn merge(mut self, other: ApiRoutes) -> Self {
        self.routes.extend(other.routes);
        self
    }

    /// The routes whose bodies stream in when `streamed`, else all the others.
    pub fn into_router(self, state: &ServerState, streamed: bool) -> Router<ServerState> {
        use axum::middleware::from_fn_with_state;
        let routes = self.routes.into_iter().filter(|(d, _)| d.streamed == streamed);
        routes.fold(Router::new(), |router, (d, endpoint)| {
            let endpoint = match endpoint {
                Endpoint::Fixed(endpoint) => *endpoint,
                Endpoint::Streamed(build) => build(state),
            };
            let endpoint = match d.keys {
                Some(Keys::Stored) => endpoint.route_layer(from_fn_with_state(state.clone(), idempotency::honour_key)),
                _ => endpoint,
            };
            // Outside the key's replay: a replayed answer counts against the caller's rate too.
            let endpoint = match d.access {
                Access::Public => endpoint,
                _ => endpoint.route_layer(from_fn_with_state(state.clone(), metering::meter)),
            };
            // Outermost, so the access is known to every layer inside and to the handler.
            router.route(d.path, endpoint.route_layer(axum::Extension(d.access)))
        })
    }
}

/// Every route under `/api/v1` with the access it declares.
pub fn declared() -> Vec<Declared> {
    routes().routes.into_iter().map(|(d, _)| d).collect()
}

/// Adds each operation's declared access to the OpenAPI document as `x-herald-access`, and the
/// `Idempotency-Key` header to each POST that honours it.
struct AccessInDocument;

fn add_idempotency_key(op: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::{ObjectBuilder, Required, Type};
    let params = op.parameters.get_or_insert_with(Vec::new);
    if params.iter().any(|p| p.parameter_in == ParameterIn::Header && p.name.eq_ignore_ascii_case("Idempotency-Key")) {
        return;
    }
    params.push(
        ParameterBuilder::new()
            .name("Idempotency-Key")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(
                "A unique string per request (1–255 printable ASCII). A retry with the same key and the same \
                 request gets the first answer back, marked `Idempotent-Replayed: true`, and does not run again; \
                 the same key with a different request is refused with 422.",
            ))
            .schema(Some(ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(255))))
            .build(),
    );
}

impl Modify for AccessInDocument {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::extensions::ExtensionsBuilder;
        for d in declared() {
            // The document writes path parameters as `{id}`, as the router does.
            let Some(item) = openapi.paths.paths.get_mut(d.path) else { continue };
            let op = match d.method {
                Method::GET => item.get.as_mut(),
                Method::POST => item.post.as_mut(),
                Method::PUT => item.put.as_mut(),
                Method::PATCH => item.patch.as_mut(),
                Method::DELETE => item.delete.as_mut(),
                _ => None,
            };
            if let Some(op) = op {
                let ext = ExtensionsBuilder::new().add("x-herald-access", d.access.name()).build();
                match op.extensions.as_mut() {
                    Some(existing) => existing.merge(ext),
                    None => op.extensions = Some(ext),
                }
                if matches!(d.keys, Some(Keys::Stored | Keys::Handler)) {
                    add_idempotency_key(op);
                }
            }
        }
    }
}

/// Declares every `{name}` in a path as a required path parameter of each of its operations that
/// does not declare it itself: a handler that takes `Path<…>` without a `params(…)` attribute
/// still arrives in the document the way a client generator needs it (OpenAPI requires each
/// templated segment to be declared).
struct PathParameters;

impl Modify for PathParameters {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        use utoipa::openapi::{ObjectBuilder, Required, Type};
        for (path, item) in openapi.paths.paths.iter_mut() {
            let names: Vec<&str> = path.split('/').filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}')).collect();
            let ops = [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
            for op in ops.into_iter().flatten() {
                let params = op.parameters.get_or_insert_with(Vec::new);
                for name in &names {
                    if params.iter().any(|p| p.name == *name && p.parameter_in == ParameterIn::Path) {
                        continue;
                    }
                    params.push(
                        ParameterBuilder::new()
                            .name(*name)
                            .parameter_in(ParameterIn::Path)
                            .required(Required::True)
                            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                            .build(),
                    );
                }
            }
        }
    }
}

fn routes() -> ApiRoutes {
    use herald_types::Access as A;
    const VIEW: A = A::VIEWER_READS;
    const AUTHOR: A = A::AUTHOR_CHANGES;
    const ADMIN: A = A::ADMIN_CHANGES;
    ApiRoutes::default()
        .get("/api/v1/openapi.json", A::Public, openapi)
        .get("/api/v1/workspace", VIEW, workspace::get_workspace)
        .patch("/api/v1/workspace", ADMIN, workspace::update_workspace)
        // Which domains the workspace sends From is an admin's call, as on Settings → Domains.
        .get("/api/v1/domains", VIEW, domains::index)
        .post("/api/v1/domains", ADMIN, domains::create)
        .get("/api/v1/domains/{id}", VIEW, domains::show)
        .post("/api/v1/domains/{id}/check", ADMIN, domains::check)
        .delete("/api/v1/domains/{id}", ADMIN, domains::delete)
        // The team: admins', as on Settings → Members (see `members` for what a key may not do).
        .get("/api/v1/members", A::ADMIN_READS, members::index)
        .patch("/api/v1/members/{id}", ADMIN, members::change_role)
        .delete("/api/v1/members/{id}", ADMIN, members::remove)
        .post("/api/v1/invites", ADMIN, members::invite)
        .delete("/api/v1/invites/{id}", ADMIN, members::withdraw)
        .get("/api/v1/team-rules", A::ADMIN_READS, team_rules::show)
        .put("/api/v1/team-rules", ADMIN, team_rules::update)
        // Identities hold credentials: an admin's to change; every member may see them (the
        // campaign editor's sender picker lists them), and an author may test one, as in the app.
        .get("/api/v1/identities", VIEW, identities::index)
        .post("/api/v1/identities", ADMIN, identities::create)
        .put("/api/v1/identities/{id}", ADMIN, identities::update)
        .delete("/api/v1/identities/{id}", ADMIN, identities::delete)
        .post("/api/v1/identities/{id}/test", AUTHOR, identities::test)
        // The audit log names members and their addresses: admins read it, as in the app.
        .get("/api/v1/audit", A::ADMIN_READS, audit::index)
        .get("/api/v1/lists", VIEW, lists::index)
        .post("/api/v1/lists", AUTHOR, lists::create)
        .get("/api/v1/lists/{id}", VIEW, lists::show)
        .put("/api/v1/lists/{id}", AUTHOR, lists::update)
        .delete("/api/v1/lists/{id}", AUTHOR, lists::delete)
        .get("/api/v1/readers", VIEW, readers::index)
        .post("/api/v1/readers", AUTHOR, readers::create)
        .add(Method::POST, "/api/v1/readers/bulk", AUTHOR, readers::bulk_route())
        .get("/api/v1/readers/{id}", VIEW, readers::show)
        .patch("/api/v1/readers/{id}", AUTHOR, readers::update)
        // Erasure (GDPR) cannot be undone.
        .delete("/api/v1/readers/{id}", ADMIN, readers::delete)
        .post("/api/v1/readers/{id}/subscriptions", AUTHOR, readers::subscribe)
        .delete("/api/v1/readers/{id}/subscriptions/{list_id}", AUTHOR, readers::unsubscribe)
        .get("/api/v1/readers/{id}/tags", VIEW, tags::of_reader)
        .post("/api/v1/readers/{id}/tags", AUTHOR, tags::add)
        .delete("/api/v1/readers/{id}/tags", AUTHOR, tags::remove)
        .get("/api/v1/readers/{id}/automations", VIEW, automations::reader_runs)
        // Enters readers into event automations, which mail them.
        .add_post("/api/v1/readers/{id}/events", AUTHOR, Keys::Handler, post(automations::record_event))
        .get("/api/v1/tags", VIEW, tags::index)
        .patch("/api/v1/tags/{id}", AUTHOR, tags::rename)
        .delete("/api/v1/tags/{id}", AUTHOR, tags::delete)
        .get("/api/v1/brand", VIEW, brand::show)
        .put("/api/v1/brand", AUTHOR, brand::update)
        .get("/api/v1/layouts", VIEW, brand::layouts)
        .get("/api/v1/media", VIEW, media::index)
        .add(Method::POST, "/api/v1/media", AUTHOR, media::upload_route())
        .delete("/api/v1/media/{id}", AUTHOR, media::remove)
        // CSV imports, as on Audience → Imports.
        .get("/api/v1/imports", VIEW, imports::index)
        .add_streamed_post("/api/v1/imports", AUTHOR, |s| imports::upload_route(s.imports.max_bytes))
        .get("/api/v1/imports/{id}", VIEW, imports::show)
        .post("/api/v1/imports/{id}/start", AUTHOR, imports::start)
        .delete("/api/v1/imports/{id}", AUTHOR, imports::discard)
        .get("/api/v1/imports/{id}/errors.csv", VIEW, imports::errors_csv)
        .get("/api/v1/campaign-templates", VIEW, campaign_templates::index)
        .post("/api/v1/campaign-templates", AUTHOR, campaign_templates::create)
        .get("/api/v1/campaign-templates/{id}", VIEW, campaign_templates::show)
        .put("/api/v1/campaign-templates/{id}", AUTHOR, campaign_templates::update)
        .delete("/api/v1/campaign-templates/{id}", AUTHOR, campaign_templates::delete)
        .get("/api/v1/fields", VIEW, fields::index)
        .post("/api/v1/fields", AUTHOR, fields::create)
        .patch("/api/v1/fields/{key}", AUTHOR, fields::update)
        .delete("/api/v1/fields/{key}", AUTHOR, fields::delete)
        .get("/api/v1/segments", VIEW, segments::index)
        .post("/api/v1/segments", AUTHOR, segments::create)
        // Counts an unsaved tree: a read sent as a POST for its body.
        .add_post("/api/v1/segments/count", VIEW, Keys::Read, post(segments::count_definition))
        .get("/api/v1/segments/{id}", VIEW, segments::show)
        .put("/api/v1/segments/{id}", AUTHOR, segments::update)
        .delete("/api/v1/segments/{id}", AUTHOR, segments::delete)
        .get("/api/v1/segments/{id}/count", VIEW, segments::count)
        .get("/api/v1/automations", VIEW, automations::index)
        .post("/api/v1/automations", AUTHOR, automations::create)
        .get("/api/v1/automations/{id}", VIEW, automations::show)
        .put("/api/v1/automations/{id}", AUTHOR, automations::update)
        .delete("/api/v1/automations/{id}", AUTHOR, automations::delete)
        .post("/api/v1/automations/{id}/start", AUTHOR, automations::start)
        .post("/api/v1/automations/{id}/pause", AUTHOR, automations::pause)
        .post("/api/v1/automations/{id}/archive", AUTHOR, automations::archive)
        .get("/api/v1/automations/{id}/report", VIEW, automations::show_report)
        .get("/api/v1/automations/{id}/runs", VIEW, automations::runs)
        .get("/api/v1/suppressions", VIEW, suppressions::index)
        .post("/api/v1/suppressions", AUTHOR, suppressions::add)
        // Mailing a suppressed address again is the admin's call.
        .delete("/api/v1/suppressions/{email}", ADMIN, suppressions::remove)
        .get("/api/v1/campaigns", VIEW, campaigns::index)
        .post("/api/v1/campaigns", AUTHOR, campaigns::create)
        .get("/api/v1/campaigns/{id}", VIEW, campaigns::show)
        .put("/api/v1/campaigns/{id}", AUTHOR, campaigns::update)
        .delete("/api/v1/campaigns/{id}", AUTHOR, campaigns::delete)
        .get("/api/v1/campaigns/{id}/audience", VIEW, campaigns::audience)
        .get("/api/v1/campaigns/{id}/ab-test", VIEW, ab_tests::results)
        .post("/api/v1/campaigns/{id}/pick-winner", AUTHOR, ab_tests::pick_winner)
        .post("/api/v1/campaigns/{id}/resend", AUTHOR, resends::create)
        .post("/api/v1/campaigns/{id}/duplicate", AUTHOR, resends::duplicate)
        .post("/api/v1/campaigns/{id}/send", AUTHOR, campaigns::send)
        .post("/api/v1/campaigns/{id}/schedule", AUTHOR, campaigns::schedule)
        .post("/api/v1/campaigns/{id}/unschedule", AUTHOR, campaigns::unschedule)
        .post("/api/v1/campaigns/{id}/pause", AUTHOR, campaigns::pause)
        .post("/api/v1/campaigns/{id}/resume", AUTHOR, campaigns::resume)
        .post("/api/v1/campaigns/{id}/cancel", AUTHOR, campaigns::cancel)
        .post("/api/v1/campaigns/{id}/retry-failed", AUTHOR, campaigns::retry_failed)
        .get("/api/v1/campaigns/{id}/stats", VIEW, campaigns::stats)
        .get("/api/v1/campaigns/{id}/report", VIEW, campaigns::report)
        .get("/api/v1/campaigns/{id}/results", VIEW, campaigns::results)
        .get("/api/v1/campaigns/{id}/events.csv", VIEW, campaigns::events_csv)
        .post("/api/v1/campaigns/{id}/stop", AUTHOR, campaigns::stop)
        .get("/api/v1/campaigns/{id}/editions", VIEW, campaigns::editions)
        .put("/api/v1/campaigns/{id}/feed", AUTHOR, campaigns::put_feed_bulk)
        .put("/api/v1/campaigns/{id}/feed/{reader}", AUTHOR, campaigns::put_feed)
        .get("/api/v1/messages", VIEW, messages::index)
        .add_post("/api/v1/messages", AUTHOR, Keys::Handler, post(messages::create))
        .get("/api/v1/messages/{id}", VIEW, messages::show)
        .post("/api/v1/messages/{id}/cancel", AUTHOR, messages::cancel)
        .get("/api/v1/templates", VIEW, templates::index)
        .post("/api/v1/templates", AUTHOR, templates::create)
        .get("/api/v1/templates/{id}", VIEW, templates::show)
        .put("/api/v1/templates/{id}", AUTHOR, templates::update)
        .delete("/api/v1/templates/{id}", AUTHOR, templates::delete)
        .get("/api/v1/webhook-event-types", VIEW, webhook_endpoints::event_types)
        // Endpoints receive readers' addresses: an admin's to see and to change.
        .get("/api/v1/webhook-endpoints", A::ADMIN_READS, webhook_endpoints::index)
        .post("/api/v1/webhook-endpoints", ADMIN, webhook_endpoints::create)
        .get("/api/v1/webhook-endpoints/{id}", A::ADMIN_READS, webhook_endpoints::show)
        .put("/api/v1/webhook-endpoints/{id}", ADMIN, webhook_endpoints::update)
        .delete("/api/v1/webhook-endpoints/{id}", ADMIN, webhook_endpoints::delete)
        .post("/api/v1/webhook-endpoints/{id}/rotate-secret", ADMIN, webhook_endpoints::rotate_secret)
        .post("/api/v1/webhook-endpoints/{id}/test", ADMIN, webhook_endpoints::send_test)
        .get("/api/v1/webhook-endpoints/{id}/deliveries", A::ADMIN_READS, webhook_endpoints::deliveries)
        .post("/api/v1/webhook-endpoints/{id}/deliveries/{event_id}/redeliver", ADMIN, webhook_endpoints::redeliver)
}

pub fn router(state: &ServerState) -> Router<ServerState> {
    routes().into_router(state, false).route("/api/v1/{*rest}", axum::routing::any(not_found))
}

/// The routes whose bodies stream in under their own limit: merged outside the server's general
/// body limit.
pub fn upload_router(state: &ServerState) -> Router<ServerState> {
    routes().into_router(state, true)
}
