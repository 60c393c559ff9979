//! Sending identities: the SMTP servers a workspace sends through, with their connection limit,
//! rate and optional DKIM key. Credentials and keys are sealed at rest ([`crate::infra::sealing`]).
//! A workspace without identities sends through the server's default (`HERALD_SMTP_URL`).

use std::time::Duration;

use crate::domain::{IdentityId, Role, TenantId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::Db;
use crate::infra::egress::Egress;
use crate::infra::sealing;
use crate::infra::tokens::Signer;
use crate::sending::smtp::{SmtpConnection, SmtpServer};

/// What the delivery workers need to send through one identity.
#[derive(Clone, Debug)]
pub struct SmtpIdentity {
    /// The rate bucket shared by every worker process sending through this identity.
    pub bucket: String,
    pub server: SmtpServer,
    pub max_connections: u32,
    pub rate_per_second: f64,
    pub burst: u32,
    pub dkim: Option<DkimKey>,
}

#[derive(Clone)]
pub struct DkimKey {
    pub domain: String,
    pub selector: String,
    pub private_key_pem: String,
}

impl std::fmt::Debug for DkimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DkimKey({}._domainkey.{})", self.selector, self.domain)
    }
}

pub use herald_types::{Identity, IdentityInput};

const COLUMNS: &str = "id, name, smtp_display, max_connections, rate_per_second, burst, dkim_domain, dkim_selector,
    webhook_provider, webhook_token, webhook_sns_topic, created_at";

/// `smtp://user:secret@host:25` → `smtp://user@host:25`.
fn display_url(url: &str) -> Result<String> {
    let mut parsed = url::Url::parse(url).map_err(|_| Error::invalid("The SMTP URL is not valid."))?;
    if !matches!(parsed.scheme(), "smtp" | "smtps") || parsed.host_str().is_none() {
        return Err(Error::invalid("The SMTP URL must look like smtp://user:password@host:587."));
    }
    let _ = parsed.set_password(None);
    Ok(parsed.to_string())
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<Identity>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM sending_identities WHERE tenant_id = $1 ORDER BY lower(name)"
    )))
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Refuses, as an identity is saved, an SMTP server the egress policy would refuse at every
/// connect whatever DNS says: a port other than the submission ports, or an address literal
/// inside the network (`smtp://169.254.169.254:587`). Names are left to the check at each
/// connect, since what they resolve to can change.
pub fn check_destination(smtp_url: &str, egress: &Egress) -> Result<()> {
    if smtp_url.trim().is_empty() {
        return Ok(());
    }
    let server = SmtpServer::parse(smtp_url).map_err(|e| Error::invalid(format!("The SMTP URL is not valid: {e}.")))?;
    let refuse = |why: &str| Err(Error::invalid(format!("Herald may not connect to that SMTP server: {why}.")));
    if let Err(refused) = egress.check_smtp_port(server.port) {
        return refuse(refused.generic());
    }
    let host = server.host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) if !egress.permits(ip) => refuse("the address is inside a private network"),
        _ => Ok(()),
    }
}

/// Creates (`id` None) or updates an identity. Admins only: it holds credentials.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn save(
    db: &Db,
    signer: &Signer,
    tenant: TenantId,
    role: Role,
    id: Option<IdentityId>,
    input: &IdentityInput,
) -> Result<Identity> {
    role.require(Role::Admin)?;
    input.check()?;
    let url = input.smtp_url.trim();
    let (sealed_url, display) = if url.is_empty() {
        if id.is_none() {
            return Err(Error::invalid("Enter the SMTP server's URL."));
        }
        (None, None)
    } else {
        SmtpServer::parse(url).map_err(|e| Error::invalid(format!("The SMTP URL is not valid: {e}")))?;
        (Some(sealing::seal(signer, url)), Some(display_url(url)?))
    };
    let domain = input.dkim_domain.trim();
    let key = input.dkim_private_key.trim();
    if !key.is_empty() {
        crate::sending::message::DkimSigner::new(input.dkim_selector.trim(), domain, key)
            .map_err(|_| Error::invalid("The DKIM private key is not a valid PEM RSA or Ed25519 key."))?;
    }
    let sealed_key = (!key.is_empty()).then(|| sealing::seal(signer, key));
    let mut tx = db.tenant_tx(tenant).await?;
    // Insert and update name the same fields as $3…$11.
    let query: sqlx::query::QueryAs<'_, sqlx::Postgres, Identity, sqlx::postgres::PgArguments> = match id {
        None => sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO sending_identities (id, tenant_id, name, smtp_url_sealed, smtp_display, max_connections,
                     rate_per_second, burst, dkim_domain, dkim_selector, dkim_key_sealed)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), nullif($10, ''), $11) RETURNING {COLUMNS}"
        )))
        .bind(IdentityId::new())
        .bind(tenant),
        Some(id) => sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "UPDATE sending_identities SET name = $3, smtp_url_sealed = coalesce($4, smtp_url_sealed),
                     smtp_display = coalesce($5, smtp_display), max_connections = $6, rate_per_second = $7, burst = $8,
                     dkim_domain = nullif($9, ''), dkim_selector = nullif($10, ''),
                     dkim_key_sealed = CASE WHEN $9 = '' THEN NULL ELSE coalesce($11, dkim_key_sealed) END,
                     updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}"
        )))
        .bind(tenant)
        .bind(id),
    };
    let result = query
        .bind(input.name.trim())
        .bind(sealed_url)
        .bind(display)
        .bind(input.max_connections)
        .bind(input.rate_per_second)
        .bind(input.burst)
        .bind(domain)
        .bind(input.dkim_selector.trim())
        .bind(sealed_key)
        .fetch_optional(&mut *tx)
        .await
        .and_then(|r| r.ok_or(sqlx::Error::RowNotFound));
    let identity = match result {
        Ok(i) => i,
        Err(sqlx::Error::RowNotFound) => return Err(Error::NotFound),
        Err(e) if is_unique_violation(&e, "sending_identities_tenant_id_name_key") => {
            return Err(Error::Conflict("An identity with that name already exists.".into()));
        }
        Err(e) => return Err(e.into()),
    };
    tx.commit().await?;
    Ok(identity)
}

/// Turns provider webhooks on (`provider` one of [`crate::webhooks::Provider`]) or off (empty).
/// The URL token is made once and kept; an empty `secret` keeps the stored one.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn configure_webhook(
    db: &Db,
    signer: &Signer,
    tenant: TenantId,
    role: Role,
    id: IdentityId,
    provider: &str,
    secret: &str,
) -> Result<Identity> {
    role.require(Role::Admin)?;
    let provider = provider.trim();
    if !provider.is_empty() && crate::webhooks::Provider::parse(provider).is_none() {
        return Err(Error::invalid("Choose Amazon SES, SendGrid, Postmark, Mailgun or the generic format."));
    }
    let secret = secret.trim();
    if secret.len() > 4096 {
        return Err(Error::invalid("The webhook secret is too long."));
    }
    let token = crate::infra::tokens::random_token();
    let mut tx = db.tenant_tx(tenant).await?;
    let identity = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE sending_identities SET webhook_provider = nullif($3, ''), webhook_token = coalesce(webhook_token, $4),
                webhook_sns_topic = CASE WHEN webhook_provider IS NOT DISTINCT FROM nullif($3, '')
                                         THEN webhook_sns_topic END,
                webhook_secret_sealed = CASE WHEN $3 = '' THEN NULL WHEN $5 = '' THEN webhook_secret_sealed ELSE $6 END,
                updated_at = now()
         WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(provider)
    .bind(token)
    .bind(secret)
    .bind((!secret.is_empty()).then(|| sealing::seal(signer, secret)))
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    tx.commit().await?;
    Ok(identity)
}

/// Where a webhook delivery goes: the workspace, provider and (opened) secret of the identity
/// whose token is in the URL. Runs before any tenant is known (`webhook_identity`, 0013).
#[derive(Debug)]
pub struct WebhookTarget {
    pub tenant: TenantId,
    pub identity: IdentityId,
    pub provider: String,
    pub secret: Option<String>,
    /// SES: the SNS topic this webhook is pinned to, once it has heard from one.
    pub sns_topic: Option<String>,
}

#[tracing::instrument(skip_all)]
pub async fn webhook_target(db: &Db, signer: &Signer, token: &str) -> Result<Option<WebhookTarget>> {
    if token.is_empty() || token.len() > 100 {
        return Ok(None);
    }
    #[derive(sqlx::FromRow)]
    struct Row {
        tenant_id: TenantId,
        identity_id: IdentityId,
        provider: String,
        secret_sealed: Option<String>,
        sns_topic: Option<String>,
    }
    let row: Option<Row> =
        sqlx::query_as("SELECT tenant_id, identity_id, provider, secret_sealed, sns_topic FROM webhook_identity($1)")
            .bind(token)
            .fetch_optional(db.pool())
            .await?;
    let Some(Row { tenant_id: tenant, identity_id: identity, provider, secret_sealed, sns_topic }) = row else {
        return Ok(None);
    };
    let secret = match secret_sealed {
        Some(s) => Some(sealing::open(signer, &s)?),
        None => None,
    };
    Ok(Some(WebhookTarget { tenant, identity, provider, secret, sns_topic }))
}

/// Pins `topic` as the SNS topic of `identity`'s webhook unless one is pinned already; true when
/// the pinned topic is `topic` afterwards (two first messages from different topics: one wins).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn pin_sns_topic(db: &Db, tenant: TenantId, identity: IdentityId, topic: &str) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    let pinned: Option<String> = sqlx::query_scalar(
        "UPDATE sending_identities SET webhook_sns_topic = coalesce(webhook_sns_topic, $3)
         WHERE tenant_id = $1 AND id = $2 RETURNING webhook_sns_topic",
    )
    .bind(tenant)
    .bind(identity)
    .bind(topic.chars().take(256).collect::<String>())
    .fetch_optional(&mut *tx)
    .await?
    .flatten();
    tx.commit().await?;
    Ok(pinned.as_deref() == Some(topic))
}

/// Gives `id`'s webhook a new URL (the old one answers 404 at once) and forgets its SNS topic,
/// for a URL that leaked or a provider account that changed. Admins only.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn rotate_webhook(db: &Db, tenant: TenantId, role: Role, id: IdentityId) -> Result<Identity> {
    role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let identity = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE sending_identities SET webhook_token = $3, webhook_sns_topic = NULL, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND webhook_provider IS NOT NULL RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(crate::infra::tokens::random_token())
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    tx.commit().await?;
    Ok(identity)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: IdentityId) -> Result<()> {
    role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("DELETE FROM sending_identities WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

/// The identity a campaign sends through: its own, or the server default.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn resolve(
    db: &Db,
    signer: &Signer,
    tenant: TenantId,
    id: Option<crate::domain::IdentityId>,
    default: &SmtpIdentity,
    egress: &Egress,
) -> Result<SmtpIdentity> {
    let Some(id) = id else { return Ok(default.clone()) };
    let mut tx = db.tenant_tx(tenant).await?;
    #[allow(clippy::type_complexity)]
    let row: Option<(String, i32, f64, i32, Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT smtp_url_sealed, max_connections, rate_per_second, burst, dkim_domain, dkim_selector, dkim_key_sealed
         FROM sending_identities WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    // A deleted identity falls back to the default rather than stranding the campaign.
    let Some((sealed, conns, rate, burst, dkim_domain, dkim_selector, dkim_key)) = row else {
        return Ok(default.clone());
    };
    let url = sealing::open(signer, &sealed)?;
    let mut server = SmtpServer::parse(&url).map_err(|e| Error::invalid(format!("The SMTP URL is not valid: {e}")))?;
    // A workspace's server is a destination its members chose: it goes through the policy.
    server.egress = Some(egress.clone());
    let dkim = match (dkim_domain, dkim_selector, dkim_key) {
        (Some(domain), Some(selector), Some(key)) => {
            Some(DkimKey { domain, selector, private_key_pem: sealing::open(signer, &key)? })
        }
        _ => None,
    };
    Ok(SmtpIdentity {
        bucket: format!("identity:{id}"),
        server,
        max_connections: conns.max(1) as u32,
        rate_per_second: rate,
        burst: burst.max(1) as u32,
        dkim,
    })
}

/// Connects, greets and authenticates, then quits: the "send test" button. Returns what to
/// show: the greeting of the operator's server; for a workspace's own server only that it
/// answered (its banner says nothing a member needs, and would make this a probe).
#[tracing::instrument(skip_all)]
pub async fn check_connection(server: &SmtpServer) -> Result<String, String> {
    match SmtpConnection::connect(server, Duration::from_secs(10)).await {
        Ok(conn) => {
            let greeting = match server.egress {
                Some(_) => "The server answered and accepted the login.".to_string(),
                None => conn.greeting().to_string(),
            };
            conn.quit().await;
            Ok(greeting)
        }
        Err(e) => Err(e.to_string()),
    }
}
