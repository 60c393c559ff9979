//! The editor's live preview (rendered as a chosen reader) and test sends to a few addresses.
//! Both render exactly as delivery does, so what the author sees is what readers get.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

use super::store::{self, Campaign};
use crate::audience::subscribe::preview_unsubscribe_url;
use crate::domain::{CampaignId, Email, Role, TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::infra::tokens::Signer;
use crate::sending::identities::{self, SmtpIdentity};
use crate::sending::message::{self, CompiledCampaign, Envelope, MessageContext, Recipient, Rendered};
use crate::sending::smtp::SmtpConnection;
use crate::sending::template_sandbox::Turn;

pub const MAX_TEST_ADDRESSES: usize = 5;

/// Where `{{ web_version_url }}` points in a preview or a test: no reader's copy, a page that
/// says what the link does.
pub fn preview_web_version_url(base_url: &str) -> String {
    format!("{}/v/{PREVIEW_WEB_VERSION_TOKEN}", base_url.trim_end_matches('/'))
}

pub const PREVIEW_WEB_VERSION_TOKEN: &str = "preview";
/// Test emails one workspace may send per hour (in bursts of up to [`TEST_SEND_BURST`]): enough
/// to check a newsletter many times, too few to make "send test" a way around campaigns.
pub const TEST_SENDS_PER_HOUR: f64 = 60.0;
pub const TEST_SEND_BURST: u32 = 20;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PreviewOutcome {
    /// `None` when the template has an error.
    pub rendered: Option<PreviewMessage>,
    /// "body, line 3, column 7: …" or "body, block 3 (Paragraph): …" — shown before sending.
    pub error: Option<String>,
    /// The field the error is in, as the editor names it (`subject`, `body`,
    /// `body.blocks.2.text`), to mark it there.
    pub error_at: Option<String>,
    /// Who it was rendered as.
    pub as_reader: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PreviewMessage {
    pub subject: String,
    pub html: String,
    pub text: String,
}

/// A stand-in reader when the workspace has none yet (or the author picks none).
pub(super) struct Sample {
    /// The reader's id (`None` for the stand-in): the one asked for, or the reader it was
    /// merged into.
    pub(super) id: Option<i64>,
    pub(super) email: String,
    pub(super) name: String,
    pub(super) attributes: Value,
}

pub(super) async fn load_context(
    db: &Db,
    tenant: TenantId,
    reader: Option<i64>,
) -> Result<(message::Workspace, Sample)> {
    let mut tx = db.tenant_tx(tenant).await?;
    let (name, postal_address): (String, String) =
        sqlx::query_as("SELECT name, postal_address FROM tenants WHERE id = $1")
            .bind(tenant)
            .fetch_one(&mut *tx)
            .await?;
    let row: Option<(i64, String, String, Value)> = match reader {
        Some(id) => {
            // A web-version link mailed before a merge names the merged copy of the reader.
            let id = crate::audience::aliases::current_id(&mut tx, tenant, id).await?;
            sqlx::query_as("SELECT id, email, name, attributes FROM readers WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .map(Some)
                .ok_or(Error::NotFound)?
        }
        None => None,
    };
    tx.commit().await?;
    let sample = match row {
        Some((id, email, name, attributes)) => Sample { id: Some(id), email, name, attributes },
        None => Sample {
            id: None,
            email: "reader@example.com".into(),
            name: "Sample Reader".into(),
            attributes: serde_json::json!({}),
        },
    };
    Ok((message::Workspace { name, postal_address }, sample))
}

pub(super) async fn render_as(
    tenant: TenantId,
    campaign: &Campaign,
    workspace: &message::Workspace,
    reader: &Sample,
    unsubscribe: &str,
    web_version: &str,
) -> Result<Result<Rendered, message::TemplateError>> {
    let turn = Turn::request(tenant);
    let compiled = match CompiledCampaign::compile(&super::store::content(campaign), workspace, turn).await? {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let recipient = Recipient { email: &reader.email, name: &reader.name, attributes: &reader.attributes };
    let ctx = MessageContext { unsubscribe_url: unsubscribe, web_version_url: web_version };
    Ok(compiled.render(&recipient, &ctx).await?)
}

/// Renders the saved campaign as `reader` (or a sample reader).
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn preview(
    db: &Db,
    base_url: &str,
    tenant: TenantId,
    campaign: CampaignId,
    reader: Option<i64>,
) -> Result<PreviewOutcome> {
    let c = store::get(db, tenant, campaign).await?;
    let (workspace, sample) = load_context(db, tenant, reader).await?;
    let unsubscribe = preview_unsubscribe_url(base_url);
    let as_reader =
        if sample.name.is_empty() { sample.email.clone() } else { format!("{} <{}>", sample.name, sample.email) };
    let rendered = render_as(tenant, &c, &workspace, &sample, &unsubscribe, &preview_web_version_url(base_url)).await?;
    Ok(PreviewOutcome::of(rendered, as_reader))
}

impl PreviewOutcome {
    /// A render's result as a preview shows it: the message, or the mistake and where it is.
    pub fn of(rendered: std::result::Result<Rendered, message::TemplateError>, as_reader: String) -> Self {
        match rendered {
            Ok(r) => PreviewOutcome {
                rendered: Some(PreviewMessage { subject: r.subject, html: r.html, text: r.text }),
                error: None,
                error_at: None,
                as_reader,
            },
            Err(e) => PreviewOutcome {
                rendered: None,
                error: Some(e.to_string()),
                error_at: Some(e.location().to_string()),
                as_reader,
            },
        }
    }
}

/// A block document (a starter layout, a template, the brand) as a sample reader sees it: the
/// HTML, or the reason it cannot render.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn preview_document(
    db: &Db,
    base_url: &str,
    tenant: TenantId,
    doc: &herald_types::BlockDocument,
) -> Result<std::result::Result<String, String>> {
    let content = message::CampaignContent {
        subject: String::new(),
        preheader: String::new(),
        format: herald_types::BodyFormat::Blocks,
        body: doc.to_json(),
    };
    Ok(preview_content(db, base_url, tenant, &content).await?.map(|r| r.html).map_err(|e| e.to_string()))
}

/// Mail that is stored nowhere yet (an automation's mail step as its editor holds it), rendered
/// as a sample reader sees it; a template mistake is the inner error, with its block named.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn preview_content(
    db: &Db,
    base_url: &str,
    tenant: TenantId,
    content: &message::CampaignContent,
) -> Result<std::result::Result<Rendered, message::TemplateError>> {
    let (workspace, sample) = load_context(db, tenant, None).await?;
    let compiled = match CompiledCampaign::compile(content, &workspace, Turn::request(tenant)).await? {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let recipient = Recipient { email: &sample.email, name: &sample.name, attributes: &sample.attributes };
    let (unsubscribe, web_version) = (preview_unsubscribe_url(base_url), preview_web_version_url(base_url));
    let ctx = MessageContext { unsubscribe_url: &unsubscribe, web_version_url: &web_version };
    Ok(compiled.render(&recipient, &ctx).await?)
}

/// Sends the campaign, rendered as a sample reader, to up to five addresses through the
/// campaign's identity. Returns the server's reply per address (or the error).
/// (lowercased address, reason) for those of `addresses` the workspace has suppressed.
async fn suppressed_among(db: &Db, tenant: TenantId, addresses: &[Email]) -> Result<Vec<(String, String)>> {
    let lower: Vec<String> = addresses.iter().map(|a| a.as_str().to_lowercase()).collect();
    let mut tx = db.tenant_tx(tenant).await?;
    let rows =
        sqlx::query_as("SELECT email_lower, reason FROM suppressions WHERE tenant_id = $1 AND email_lower = ANY($2)")
            .bind(tenant)
            .bind(&lower)
            .fetch_all(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(rows)
}

#[allow(clippy::too_many_arguments)]
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn test_send(
    db: &Db,
    signer: &Signer,
    base_url: &str,
    default_identity: &SmtpIdentity,
    egress: &crate::infra::egress::Egress,
    tenant: TenantId,
    member: UserId,
    role: Role,
    campaign: CampaignId,
    addresses: &[String],
) -> Result<Vec<(String, Result<String, String>)>> {
    role.require(Role::Author)?;
    crate::account_limits::ensure_not_suspended(db, tenant).await?;
    // A test email goes to any address the member types: only a member whose own address is
    // confirmed may send them, and at most their account's daily allowance.
    crate::accounts::require_verified_email(db, member).await?;
    let addresses: Vec<Email> = addresses
        .iter()
        .map(|a| a.trim())
        .filter(|a| !a.is_empty())
        .map(|a| Email::parse(a).map_err(Error::from))
        .collect::<Result<_>>()?;
    if addresses.is_empty() || addresses.len() > MAX_TEST_ADDRESSES {
        return Err(Error::invalid(format!("Enter 1 to {MAX_TEST_ADDRESSES} addresses.")));
    }
    let c = store::get(db, tenant, campaign).await?;
    if c.from_email.is_empty() {
        return Err(Error::invalid("Choose a sender address first."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    crate::sending::domains::require_verified_sender(&mut tx, tenant, c.identity_id.is_some(), &c.from_email).await?;
    tx.commit().await?;
    // Test emails are mail like any other: suppressed addresses are left out, and the rest
    // take tokens from the workspace's test allowance and from the identity's rate bucket.
    let mut results = Vec::new();
    let suppressed = suppressed_among(db, tenant, &addresses).await?;
    let addresses: Vec<Email> = addresses
        .into_iter()
        .filter(|a| match suppressed.iter().find(|(e, _)| *e == a.as_str().to_lowercase()) {
            Some((_, reason)) => {
                results.push((a.as_str().to_string(), Err(format!("not sent: the address is suppressed ({reason})"))));
                false
            }
            None => true,
        })
        .collect();
    if addresses.is_empty() {
        return Ok(results);
    }
    let n = addresses.len() as u32;
    let key = format!("test-sends:{tenant}");
    if let Some(wait) =
        crate::sending::rate::try_take(db, &key, n, TEST_SENDS_PER_HOUR / 3600.0, TEST_SEND_BURST).await?
    {
        return Err(Error::invalid(format!(
            "This workspace has sent many test emails in a short time; try again in about {} minute(s).",
            wait.as_secs().div_ceil(60).max(1)
        )));
    }
    let mut tx = db.begin().await?;
    crate::account_limits::claim(&mut tx, member, crate::account_limits::Usage::TestSend, n as i32).await?;
    tx.commit().await?;
    let (workspace, sample) = load_context(db, tenant, None).await?;
    let identity = identities::resolve(db, signer, tenant, c.identity_id, default_identity, egress).await?;
    let wait = crate::sending::rate::reserve(db, &identity.bucket, n, identity.rate_per_second, identity.burst).await?;
    tokio::time::sleep(wait.min(Duration::from_secs(10))).await;
    let dkim = crate::sending::domains::dkim_signer(db, signer, tenant, &identity, &c.from_email).await?;
    let unsubscribe = preview_unsubscribe_url(base_url);
    let rendered = render_as(tenant, &c, &workspace, &sample, &unsubscribe, &preview_web_version_url(base_url))
        .await?
        .map_err(|e| Error::invalid(e.to_string()))?;
    let rendered = Rendered { subject: format!("[Test] {}", rendered.subject), ..rendered };
    let domain = c.from_email.rsplit_once('@').map(|(_, d)| d.to_string()).unwrap_or_default();
    let mut conn: Option<SmtpConnection> = None;
    for to in addresses {
        let envelope = Envelope {
            from_name: c.from_name.clone(),
            from_email: c.from_email.clone(),
            reply_to: (!c.reply_to.is_empty()).then(|| c.reply_to.clone()),
            to_email: to.as_str().to_string(),
            to_name: String::new(),
            message_id: format!("test.{}.{}@{domain}", c.id, Uuid::new_v4().simple()),
            list_unsubscribe_url: unsubscribe.clone(),
            list_unsubscribe_mailto: None,
            list_id: format!("{}.test.{domain}", c.id),
            feedback_id: format!("{}:test:herald", c.id.0.simple()),
        };
        let raw = message::build_message(&rendered, &envelope, dkim.as_ref())?;
        if conn.is_none() {
            match SmtpConnection::connect(&identity.server, Duration::from_secs(15)).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    results.push((to.as_str().to_string(), Err(e.to_string())));
                    continue;
                }
            }
        }
        let Some(open) = conn.as_mut() else { continue };
        match open.send(&c.from_email, to.as_str(), &raw).await {
            Ok(reply) => results.push((to.as_str().to_string(), Ok(reply))),
            Err(e) => {
                conn = None;
                results.push((to.as_str().to_string(), Err(e.to_string())));
            }
        }
    }
    if let Some(open) = conn {
        open.quit().await;
    }
    Ok(results)
}
