//! `POST /webhooks/{provider}/{identity-token}`: delivery, bounce, complaint and unsubscribe
//! reports from Amazon SES (via SNS), SendGrid, Postmark, Mailgun or Herald's generic format.
//! The token picks the sending identity (and so the workspace); the provider's signature, with
//! that identity's secret, decides whether anything happens. Unknown or unverifiable payloads
//! are a 4xx, logged, with nothing recorded. Each event is applied once per provider event id.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use herald_engine::feedback::{self, Applied};
use herald_engine::sending::identities;
use herald_engine::webhooks::{self, CertCache, Provider, Verified, WebhookConfig, WebhookError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::startup::ServerState;

/// Providers batch events; a megabyte is far above any real delivery.
const WEBHOOK_BODY_LIMIT: usize = 1024 * 1024;

#[derive(Clone)]
pub struct WebhookState {
    pub config: Arc<WebhookConfig>,
    pub certs: Arc<CertCache>,
    /// SNS's SubscribeURL is fetched through the egress policy too.
    pub egress: herald_engine::infra::egress::Egress,
}

impl WebhookState {
    pub fn new(config: WebhookConfig, egress: &herald_engine::infra::egress::Egress) -> Self {
        Self { config: Arc::new(config), certs: Arc::new(CertCache::with_egress(egress)), egress: egress.clone() }
    }
}

pub fn router() -> Router<ServerState> {
    Router::new().route("/webhooks/{provider}/{token}", post(receive)).layer(DefaultBodyLimit::max(WEBHOOK_BODY_LIMIT))
}

fn reply(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "message": message }))).into_response()
}

async fn receive(
    State(state): State<ServerState>,
    Path((provider, token)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let not_found = || reply(StatusCode::NOT_FOUND, "No such webhook.");
    let Some(provider) = Provider::parse(&provider) else { return not_found() };
    let target = match identities::webhook_target(&state.app.db, &state.app.signer, &token).await {
        Ok(Some(t)) if t.provider == provider.as_str() => t,
        Ok(_) => return not_found(),
        Err(e) => {
            tracing::error!(error = %e, "webhook identity lookup failed");
            return reply(StatusCode::SERVICE_UNAVAILABLE, "Temporarily unavailable; please retry.");
        }
    };
    let headers: HashMap<String, String> = headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_ascii_lowercase(), v.to_string())))
        .collect();
    let ws = &state.webhooks;
    let pinned = target.sns_topic.as_deref();
    let verified = webhooks::verify(
        provider,
        &headers,
        &body,
        target.secret.as_deref(),
        &ws.config,
        &ws.certs,
        Utc::now(),
        pinned,
    )
    .await;
    // The first authentic SNS message pins its topic; from then on other topics are refused.
    if provider == Provider::Ses
        && pinned.is_none()
        && verified.is_ok()
        && let Some(topic) = webhooks::sns_topic_arn(&body)
    {
        match identities::pin_sns_topic(&state.app.db, target.tenant, target.identity, &topic).await {
            Ok(true) => tracing::info!(tenant = %target.tenant, topic, "pinned the SNS topic of a webhook"),
            Ok(false) => {
                tracing::warn!(tenant = %target.tenant, topic, "SNS message from a topic other than the one just pinned");
                return reply(StatusCode::UNAUTHORIZED, "The signature could not be verified.");
            }
            Err(e) => {
                tracing::error!(error = %e, "pinning an SNS topic failed");
                return reply(StatusCode::SERVICE_UNAVAILABLE, "Temporarily unavailable; please retry.");
            }
        }
    }
    let events = match verified {
        Ok(Verified::Events(events)) => events,
        Ok(Verified::SubscriptionConfirmation { subscribe_url }) => {
            // The URL was checked to be on the trusted SNS host before we got here; it still
            // goes through the egress policy. No redirects: the checked host is the only one.
            let confirmed = if ws.egress.permits_url(&subscribe_url) {
                let client = ws.egress.http_client(Duration::from_secs(10), 0, "Herald SNS subscription");
                client
                    .get(subscribe_url.clone())
                    .send()
                    .await
                    .map(|r| r.status().is_success())
                    .map_err(|e| e.to_string())
            } else {
                Err("the SubscribeURL's address is not one Herald may fetch from".to_string())
            };
            return match confirmed {
                Ok(true) => {
                    tracing::info!(tenant = %target.tenant, "confirmed an SNS subscription");
                    reply(StatusCode::OK, "Subscription confirmed.")
                }
                other => {
                    tracing::warn!(?other, "confirming an SNS subscription failed");
                    reply(StatusCode::BAD_GATEWAY, "Could not confirm the subscription; SNS will retry.")
                }
            };
        }
        Err(WebhookError::Unauthorized(why)) => {
            tracing::warn!(provider = provider.as_str(), tenant = %target.tenant, why, "webhook refused");
            return reply(StatusCode::UNAUTHORIZED, "The signature could not be verified.");
        }
        Err(WebhookError::BadRequest(why)) => {
            tracing::warn!(provider = provider.as_str(), tenant = %target.tenant, why, "webhook payload refused");
            return reply(StatusCode::BAD_REQUEST, &format!("Unreadable payload: {why}"));
        }
        Err(WebhookError::Upstream(why)) => {
            tracing::warn!(provider = provider.as_str(), why, "webhook certificate unavailable");
            return reply(StatusCode::BAD_GATEWAY, "The signing certificate could not be fetched; please retry.");
        }
    };
    let (mut applied, mut duplicates, mut unmatched) = (0, 0, 0);
    for ev in &events {
        match feedback::apply(&state.app.db, target.tenant, provider.as_str(), ev).await {
            Ok(Applied::Duplicate) => duplicates += 1,
            Ok(Applied::New { matched }) => {
                applied += 1;
                unmatched += usize::from(!matched);
            }
            Err(e) => {
                // Earlier events are applied and recorded; the provider's retry skips them.
                tracing::error!(error = %e, "applying a webhook event failed");
                return reply(StatusCode::SERVICE_UNAVAILABLE, "Temporarily unavailable; please retry.");
            }
        }
    }
    (
        StatusCode::OK,
        axum::Json(serde_json::json!({ "applied": applied, "duplicates": duplicates, "unmatched": unmatched })),
    )
        .into_response()
}
