//! Outbound webhooks: a workspace's endpoints receive its events, signed on the Standard
//! Webhooks scheme, at least once.
//!
//! - Events are written by triggers (`engine/sql/webhooks.sql`) in the transaction of the change
//!   that caused them, and only when an enabled endpoint of that workspace receives that type;
//!   each gets one delivery per such endpoint. Nothing is lost if a process dies before sending.
//! - [`delivery`] sends them: a 10 s timeout, no redirects, destinations through the egress
//!   policy, retries with exponential backoff and jitter for at least a day, the same event id on
//!   every attempt (receivers deduplicate on it). No ordering is promised.
//! - Endpoints are an admin's to make and change: each change is audit-logged and mailed to the
//!   workspace's admins, since an endpoint receiving `reader.*` copies the audience out.

pub mod delivery;
pub mod signing;

use chrono::{DateTime, Utc};
use herald_types::webhook::{EVENT_TYPES, TEST_EVENT, expand_event_types};
use herald_types::{
    Invalid, Problems, Role, RotateSecret, WebhookDeliveries, WebhookDelivery, WebhookEndpoint, WebhookEndpointInput,
    WebhookEndpointWithSecret,
};
use uuid::Uuid;

use crate::audit::{self, Action, Actor};
use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::infra::egress::Egress;
use crate::infra::sealing;
use crate::infra::tokens::Signer;
use crate::jobs::Jobs;
use crate::sending::mail::OutgoingMail;

/// How long a rotated secret keeps signing beside the new one, unless the rotation says.
pub const DEFAULT_OVERLAP_HOURS: u32 = 24;

/// Who is changing endpoints, and how to tell the workspace's admins.
pub struct Change<'a> {
    pub db: &'a Db,
    pub signer: &'a Signer,
    pub egress: &'a Egress,
    pub jobs: &'a Jobs,
    pub tenant: TenantId,
    pub role: Role,
    pub actor: Actor,
}

const ENDPOINT_COLUMNS: &str = "e.id, e.url, e.description, e.event_types, e.enabled, e.disabled_reason,
    e.previous_secret_until, e.created_at,
    (SELECT count(*) FROM outbound_deliveries d
      WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.id AND d.state = 'pending') AS pending";

type EndpointRow = (Uuid, String, String, Vec<String>, bool, Option<String>, Option<DateTime<Utc>>, DateTime<Utc>, i64);

fn endpoint(r: EndpointRow) -> WebhookEndpoint {
    WebhookEndpoint {
        id: r.0,
        url: r.1,
        description: r.2,
        event_types: r.3,
        enabled: r.4,
        disabled_reason: r.5,
        previous_secret_until: r.6,
        created_at: r.7,
        pending: r.8,
    }
}

/// A new `whsec_` secret: 32 random bytes, base64.
fn new_secret() -> String {
    use base64::Engine as _;
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn require_admin(role: Role) -> Result<()> {
    if role.can_administer() { Ok(()) } else { Err(Error::Forbidden) }
}

/// The input checked: a URL the egress policy lets Herald reach, known event types.
fn check(egress: &Egress, input: &WebhookEndpointInput) -> Result<(String, String, Vec<String>)> {
    let mut problems = Problems::default();
    let url = input.url.trim().to_string();
    match url::Url::parse(&url) {
        Ok(u) if !matches!(u.scheme(), "http" | "https") => problems.add("url", "The address starts with https://."),
        Ok(u) if u.host_str().is_none() => problems.add("url", "The address needs a host: https://example.com/hooks."),
        Ok(u) if !egress.permits_url(&u) => {
            problems.add("url", "Herald does not send to this address: it is not on the public internet.")
        }
        Ok(_) if url.len() > 2000 => problems.add("url", "The address is longer than 2,000 characters."),
        Ok(_) => {}
        Err(_) => problems.add("url", "Enter the full address: https://example.com/hooks."),
    }
    let description = input.description.trim().to_string();
    if description.chars().count() > 500 {
        problems.add("description", "The description is at most 500 characters.");
    }
    let types = match expand_event_types(&input.event_types) {
        Ok(t) => t,
        Err(m) => {
            problems.add("event_types", m);
            Vec::new()
        }
    };
    problems.into_result()?;
    Ok((url, description, types))
}

pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<WebhookEndpoint>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows: Vec<EndpointRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints e WHERE e.tenant_id = $1 ORDER BY e.created_at"
    )))
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(endpoint).collect())
}

pub async fn get(db: &Db, tenant: TenantId, id: Uuid) -> Result<WebhookEndpoint> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row: Option<EndpointRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints e WHERE e.tenant_id = $1 AND e.id = $2"
    )))
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    row.map(endpoint).ok_or(Error::NotFound)
}

#[tracing::instrument(skip_all, fields(tenant = %c.tenant))]
pub async fn create(c: &Change<'_>, input: &WebhookEndpointInput) -> Result<WebhookEndpointWithSecret> {
    require_admin(c.role)?;
    let (url, description, types) = check(c.egress, input)?;
    let id = Uuid::new_v4();
    let secret = new_secret();
    let mut tx = c.db.tenant_tx(c.tenant).await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1")
        .bind(c.tenant)
        .fetch_one(&mut *tx)
        .await?;
    if count >= 20 {
        return Err(Error::invalid("A workspace has at most 20 webhook endpoints."));
    }
    sqlx::query(
        "INSERT INTO webhook_endpoints (tenant_id, id, url, description, event_types, enabled, secret)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(c.tenant)
    .bind(id)
    .bind(&url)
    .bind(&description)
    .bind(&types)
    .bind(input.enabled)
    .bind(sealing::seal(c.signer, &secret))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let detail = serde_json::json!({"url": url, "event_types": types});
    tell_admins(c, Action::EndpointCreated, &url, detail).await;
    Ok(WebhookEndpointWithSecret { endpoint: get(c.db, c.tenant, id).await?, secret })
}

#[tracing::instrument(skip_all, fields(tenant = %c.tenant))]
pub async fn update(c: &Change<'_>, id: Uuid, input: &WebhookEndpointInput) -> Result<WebhookEndpoint> {
    require_admin(c.role)?;
    let (url, description, types) = check(c.egress, input)?;
    let mut tx = c.db.tenant_tx(c.tenant).await?;
    // Turning an endpoint on again clears what Herald said when it turned it off.
    let n = sqlx::query(
        "UPDATE webhook_endpoints SET url = $3, description = $4, event_types = $5, enabled = $6,
                disabled_reason = CASE WHEN $6 THEN NULL ELSE disabled_reason END,
                failing_since = CASE WHEN $6 AND NOT enabled THEN NULL ELSE failing_since END,
                updated_at = now()
          WHERE tenant_id = $1 AND id = $2",
    )
    .bind(c.tenant)
    .bind(id)
    .bind(&url)
    .bind(&description)
    .bind(&types)
    .bind(input.enabled)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n == 0 {
        return Err(Error::NotFound);
    }
    tx.commit().await?;
    let detail = serde_json::json!({"url": url, "event_types": types, "enabled": input.enabled});
    tell_admins(c, Action::EndpointChanged, &url, detail).await;
    get(c.db, c.tenant, id).await
}

#[tracing::instrument(skip_all, fields(tenant = %c.tenant))]
pub async fn delete(c: &Change<'_>, id: Uuid) -> Result<()> {
    require_admin(c.role)?;
    let mut tx = c.db.tenant_tx(c.tenant).await?;
    let url: Option<String> =
        sqlx::query_scalar("DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 RETURNING url")
            .bind(c.tenant)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let url = url.ok_or(Error::NotFound)?;
    tx.commit().await?;
    tell_admins(c, Action::EndpointDeleted, &url, serde_json::json!({})).await;
    Ok(())
}

/// A new secret; the old one keeps signing beside it for the overlap, so receivers can switch
/// without missing an event.
#[tracing::instrument(skip_all, fields(tenant = %c.tenant))]
pub async fn rotate_secret(c: &Change<'_>, id: Uuid, input: &RotateSecret) -> Result<WebhookEndpointWithSecret> {
    require_admin(c.role)?;
    let hours = input.overlap_hours.unwrap_or(DEFAULT_OVERLAP_HOURS);
    if hours > 24 * 7 {
        return Err(Error::Invalid(Invalid::field("overlap_hours", "The overlap is at most 168 hours (a week).")));
    }
    let secret = new_secret();
    let mut tx = c.db.tenant_tx(c.tenant).await?;
    let url: Option<String> = sqlx::query_scalar(
        "UPDATE webhook_endpoints
            SET previous_secret = secret, previous_secret_until = now() + make_interval(hours => $4),
                secret = $3, updated_at = now()
          WHERE tenant_id = $1 AND id = $2 RETURNING url",
    )
    .bind(c.tenant)
    .bind(id)
    .bind(sealing::seal(c.signer, &secret))
    .bind(hours as i32)
    .fetch_optional(&mut *tx)
    .await?;
    let url = url.ok_or(Error::NotFound)?;
    tx.commit().await?;
    tell_admins(c, Action::EndpointSecretRotated, &url, serde_json::json!({"overlap_hours": hours})).await;
    Ok(WebhookEndpointWithSecret { endpoint: get(c.db, c.tenant, id).await?, secret })
}

/// Queues a `webhook.test` event for this endpoint alone (whatever it receives).
pub async fn send_test(db: &Db, tenant: TenantId, role: Role, id: Uuid) -> Result<String> {
    require_admin(role)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2)")
            .bind(tenant)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
    if !exists {
        return Err(Error::NotFound);
    }
    let event: Uuid =
        sqlx::query_scalar("INSERT INTO outbound_events (tenant_id, type, data) VALUES ($1, $2, $3) RETURNING id")
            .bind(tenant)
            .bind(TEST_EVENT)
            .bind(serde_json::json!({"endpoint_id": id, "message": "A test event from Herald."}))
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(signing::event_id(event))
}

/// Sends a delivery again now (a failed one, or a delivered one the receiver lost).
pub async fn redeliver(db: &Db, tenant: TenantId, role: Role, endpoint: Uuid, event_id: &str) -> Result<()> {
    require_admin(role)?;
    let event = signing::parse_event_id(event_id).ok_or(Error::NotFound)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query(
        "UPDATE outbound_deliveries SET state = 'pending', next_attempt_at = now(), delivered_at = NULL
          WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id = $3",
    )
    .bind(tenant)
    .bind(endpoint)
    .bind(event)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n == 0 {
        return Err(Error::NotFound);
    }
    tx.commit().await?;
    Ok(())
}

/// An endpoint's deliveries, newest first, `limit` at a time; `before` is a page's
/// `next_cursor`.
pub async fn deliveries(
    db: &Db,
    tenant: TenantId,
    endpoint: Uuid,
    before: Option<&str>,
    limit: i64,
) -> Result<WebhookDeliveries> {
    let limit = limit.clamp(1, 100);
    let cursor = match before {
        None => None,
        Some(c) => Some(
            parse_cursor(c)
                .ok_or_else(|| Error::Invalid(Invalid::field("cursor", "Not a cursor this list gave out.")))?,
        ),
    };
    let mut tx = db.tenant_tx(tenant).await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2)")
            .bind(tenant)
            .bind(endpoint)
            .fetch_one(&mut *tx)
            .await?;
    if !exists {
        return Err(Error::NotFound);
    }
    type Row = (
        Uuid,
        String,
        String,
        i32,
        DateTime<Utc>,
        Option<DateTime<Utc>>,
        Option<i16>,
        Option<String>,
        Option<i32>,
        Option<String>,
        DateTime<Utc>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT d.event_id, ev.type, d.state, d.attempts, d.next_attempt_at, d.last_attempt_at, d.last_status,
                d.last_error, d.last_latency_ms, d.last_response, d.created_at
           FROM outbound_deliveries d
           JOIN outbound_events ev ON ev.tenant_id = d.tenant_id AND ev.id = d.event_id
          WHERE d.tenant_id = $1 AND d.endpoint_id = $2
            AND ($3::timestamptz IS NULL OR (d.created_at, d.event_id) < ($3, $4))
          ORDER BY d.created_at DESC, d.event_id DESC
          LIMIT $5",
    )
    .bind(tenant)
    .bind(endpoint)
    .bind(cursor.map(|c| c.0))
    .bind(cursor.map(|c| c.1))
    .bind(limit + 1)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let more = rows.len() as i64 > limit;
    let items: Vec<WebhookDelivery> = rows
        .into_iter()
        .take(limit as usize)
        .map(|r| WebhookDelivery {
            event_id: signing::event_id(r.0),
            event_type: r.1,
            next_attempt_at: (r.2 == "pending").then_some(r.4),
            state: r.2,
            attempts: r.3,
            last_attempt_at: r.5,
            last_status: r.6,
            last_error: r.7,
            last_latency_ms: r.8,
            last_response: r.9,
            created_at: r.10,
        })
        .collect();
    let next_cursor = more.then(|| items.last().map(|d| cursor_of(d.created_at, &d.event_id))).flatten();
    Ok(WebhookDeliveries { items, next_cursor })
}

fn cursor_of(at: DateTime<Utc>, event_id: &str) -> String {
    format!("{}_{}", at.timestamp_micros(), event_id.trim_start_matches("evt_"))
}

fn parse_cursor(c: &str) -> Option<(DateTime<Utc>, Uuid)> {
    let (micros, id) = c.split_once('_')?;
    Some((DateTime::from_timestamp_micros(micros.parse().ok()?)?, Uuid::parse_str(id).ok()?))
}

/// Every event type with what it means (the page's checkboxes, the API's list).
pub fn event_types() -> Vec<(&'static str, &'static str)> {
    EVENT_TYPES.to_vec()
}

/// Audit-logs an endpoint change and mails the workspace's admins (a failure is logged: the
/// change happened).
async fn tell_admins(c: &Change<'_>, action: Action, url: &str, detail: serde_json::Value) {
    audit::note(c.db, c.tenant, &c.actor, action, url, detail.clone()).await;
    let what = action.label();
    if let Err(e) = mail_admins(
        c.db,
        c.jobs,
        c.tenant,
        &format!("Webhook endpoint: {}", what.to_lowercase()),
        &format!(
            "Someone in your workspace did this: {what}.\n\nEndpoint: {url}\nDetails: {detail}\n\n\
             An endpoint receives the events it subscribes to, with readers' addresses and names. \
             If this was not you or your team, delete the endpoint on Settings → Webhooks."
        ),
    )
    .await
    {
        tracing::warn!(error = ?e, "could not mail the admins about a webhook endpoint change");
    }
}

/// Mails every admin and owner of the workspace.
pub(crate) async fn mail_admins(db: &Db, jobs: &Jobs, tenant: TenantId, subject: &str, text: &str) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    let admins: Vec<String> = sqlx::query_scalar(
        "SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.tenant_id = $1 AND m.role IN ('admin', 'owner') ORDER BY u.email",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let html =
        format!("<p>{}</p>", herald_types::html::escape_html(text).replace("\n\n", "</p><p>").replace('\n', "<br>"));
    for to in admins {
        let mail = OutgoingMail {
            to,
            subject: subject.to_string(),
            html: html.clone(),
            text: text.to_string(),
            ..Default::default()
        };
        jobs.enqueue_workspace_mail(tenant, mail).await?;
    }
    Ok(())
}
