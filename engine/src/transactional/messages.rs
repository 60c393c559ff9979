//! Transactional messages: accepting a request exactly once per idempotency key, reading a
//! message and its history, cancelling one still queued, and recording what happened to it
//! afterwards (opens, clicks, provider reports).
//!
//! Exactly once per key: `UNIQUE (tenant_id, idempotency_key)` with `INSERT … ON CONFLICT DO
//! NOTHING`. Two requests racing with one key both reach the insert; Postgres makes the second
//! wait for the first to commit and then insert nothing, and it answers with the first's row. A
//! replay compares a hash of its body with the stored one: the same body is the first answer
//! again (200), a different one is a 409.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::templates::{Compiled, RenderedMessage, find as find_template};
use crate::audience::suppressions;
use crate::domain::{Email, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::sending::template_sandbox::Turn;
use crate::tracking::TrackingKeys;
use crate::tracking::links;
use crate::webhooks::{EventKind, ProviderEvent};

pub use herald_types::{Message, MessageDetail, MessageEvent, MessageId, MessageStatus, SendRequest, TemplateId};

/// What `enqueue` did.
#[derive(Clone, Debug)]
pub struct Enqueued {
    pub message: Message,
    /// False when the key was used before with the same body: nothing new was queued.
    pub created: bool,
}

const COLUMNS: &str = "m.id, m.idempotency_key, m.status, m.to_email, m.to_name, m.from_email, m.from_name, m.subject,
    m.template_id, t.name AS template_name, m.template_version, m.metadata, m.attempts,
    CASE WHEN m.status = 'queued' THEN m.next_attempt_at END AS next_attempt_at, m.provider_id, m.smtp_reply,
    m.last_error, m.created_at, m.sent_at, m.delivered_at, m.opened_at, m.clicked_at, m.bounced_at, m.complained_at";
const FROM: &str = "FROM messages m LEFT JOIN tx_templates t ON t.id = m.template_id";

/// What enqueueing needs besides the database: the tracking keys and the public base URL.
#[derive(Clone)]
pub struct Outbox {
    pub db: Db,
    pub keys: TrackingKeys,
    pub base_url: String,
    /// Wakes this process's transactional senders at once (others poll).
    pub wake: std::sync::Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outbox")
    }
}

/// The key's rules: printable ASCII, 1–255 characters.
pub fn check_key(key: &str) -> Result<&str> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::invalid(
            "The Idempotency-Key header is required: a unique string per message, e.g. order-1234-receipt.",
        ));
    }
    if key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(Error::invalid("The Idempotency-Key must be 1–255 printable ASCII characters."));
    }
    Ok(key)
}

/// A hash of the request body that ignores key order and whitespace, and how the recipient's
/// address was typed: `Anna@Exämple.com` and `anna@xn--exmple-cua.com` are one mailbox, so one
/// request (its canonical form, [`Email`], is what is hashed).
pub fn request_hash(body: &serde_json::Value) -> String {
    let canonical_to = body.get("to").and_then(|to| to.as_str()).and_then(|to| Email::parse(to).ok());
    match canonical_to {
        Some(to) if body.get("to").and_then(|t| t.as_str()) != Some(to.as_str()) => {
            let mut body = body.clone();
            body["to"] = serde_json::Value::String(to.into());
            body_hash(&body)
        }
        _ => body_hash(body),
    }
}

/// The hash of the body exactly as sent. Requests stored before addresses were canonical were
/// hashed this way; a replay of one still matches it (see `replay`).
fn body_hash(body: &serde_json::Value) -> String {
    fn canonical(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&map[k], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    canonical(body, &mut s);
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Accepts one message. `body` is the request as sent (for the replay comparison).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn enqueue(
    outbox: &Outbox,
    tenant: TenantId,
    role: Role,
    key: &str,
    body: &serde_json::Value,
) -> Result<Enqueued> {
    role.require(Role::Author)?;
    let key = check_key(key)?;
    let hash = request_hash(body);
    let db = &outbox.db;
    // A replay costs one read and renders nothing.
    if let Some(found) = replay(db, tenant, key, &[&hash, &body_hash(body)]).await? {
        return Ok(found);
    }
    let Request { req, to, metadata, variables } = parse_request(body)?;

    let mut tx = db.tenant_tx(tenant).await?;
    let workspace = workspace_sender(&mut tx, tenant).await?;
    let suppressed = suppression_of(&mut tx, tenant, &to).await?;
    tx.commit().await?;
    if let Some(reason) = suppressed {
        return Err(suppressed_error(&to, &reason));
    }

    let content = render_content(db, tenant, &req, &variables).await?;
    let from_email = from_address(&req, content.from_email, workspace.from_email, &workspace.slug)?;
    let mut tx = db.tenant_tx(tenant).await?;
    crate::sending::domains::require_verified_sender(&mut tx, tenant, workspace.own_identity, &from_email).await?;
    tx.commit().await?;
    let from_name = first_given([req.from_name.clone().unwrap_or_default(), content.from_name, workspace.from_name])
        .unwrap_or_default();
    let reply_to = reply_address(&req, content.reply_to)?;
    let sender = Sender { from_name, from_email, reply_to };

    let id = MessageId::new();
    let tracking = req.tracking.unwrap_or(true);
    let (html, links) = if tracking {
        track(outbox, tenant, id, &content.rendered)
    } else {
        (content.rendered.html.clone(), Vec::new())
    };
    let mut tx = db.tenant_tx(tenant).await?;
    let message = NewMessage {
        id,
        key,
        hash: &hash,
        to: &to,
        req: &req,
        sender: &sender,
        rendered: &content.rendered,
        template_id: content.template_id,
        template_version: content.template_version,
        html: &html,
        metadata: &metadata,
        links: &links,
    };
    let inserted = insert_message(&mut tx, tenant, &message).await?;
    if inserted.is_none() {
        // A concurrent request with this key committed first.
        tx.commit().await?;
        return replay(db, tenant, key, &[&hash]).await?.ok_or(Error::NotFound);
    }
    count_and_log(&mut tx, tenant, id, req.send_at).await?;
    tx.commit().await?;
    outbox.wake.notify_waiters();
    Ok(Enqueued { message: get(db, tenant, id).await?, created: true })
}

/// A send request as `enqueue` reads it: the body, its recipient, and its metadata and
/// variables (empty objects when not given).
struct Request {
    req: SendRequest,
    to: Email,
    metadata: serde_json::Value,
    variables: serde_json::Value,
}

/// Reads the body as a send request, checking its recipient and metadata.
fn parse_request(body: &serde_json::Value) -> Result<Request> {
    let req: SendRequest = serde_json::from_value(body.clone())
        .map_err(|e| Error::invalid(format!("The request body is not a valid message: {e}")))?;
    let to = Email::parse(req.to.trim())
        .map_err(|_| Error::invalid(format!("“{}” is not a valid recipient address.", req.to.trim())))?;
    let metadata = req.metadata.clone().unwrap_or_else(|| serde_json::json!({}));
    if !metadata.is_object() {
        return Err(Error::invalid("`metadata` must be a JSON object."));
    }
    let variables = req.variables.clone().unwrap_or_else(|| serde_json::json!({}));
    Ok(Request { req, to, metadata, variables })
}

/// The workspace's transactional sender, which a message falls back to.
struct WorkspaceSender {
    slug: String,
    from_name: String,
    from_email: String,
    /// Whether the workspace has its own transactional sending identity.
    own_identity: bool,
}

async fn workspace_sender(tx: &mut Tx, tenant: TenantId) -> Result<WorkspaceSender> {
    let (slug, ws_from_name, ws_from_email, own_identity): (String, String, String, bool) = sqlx::query_as(
        "SELECT slug, transactional_from_name, transactional_from_email, transactional_identity_id IS NOT NULL
         FROM tenants WHERE id = $1",
    )
    .bind(tenant)
    .fetch_one(&mut **tx)
    .await?;
    Ok(WorkspaceSender { slug, from_name: ws_from_name, from_email: ws_from_email, own_identity })
}

/// Why the recipient is suppressed, if it is (an unsubscribe from everything does not stop
/// transactional mail).
async fn suppression_of(tx: &mut Tx, tenant: TenantId, to: &Email) -> Result<Option<String>> {
    let suppressed: Option<String> = sqlx::query_scalar(
        "SELECT reason FROM suppressions WHERE tenant_id = $1 AND email_lower = lower($2) AND reason <> 'unsubscribed_all'",
    )
    .bind(tenant)
    .bind(to.as_str())
    .fetch_optional(&mut **tx)
    .await?;
    Ok(suppressed)
}

/// The refusal of a suppressed recipient, saying why in the sender's terms.
fn suppressed_error(to: &Email, reason: &str) -> Error {
    let why = match reason {
        "hard_bounce" => "it hard-bounced",
        "soft_bounce" => "it bounced repeatedly",
        "complaint" => "its owner reported your mail as spam",
        _ => "it is on the workspace's blocklist",
    };
    Error::invalid(format!(
        "{} is suppressed because {why}; Herald will not send to it. Remove it from Audience → Suppressions if that was a mistake.",
        to.as_str()
    ))
}

/// A message's rendered content, and what its template says about its sender.
struct Content {
    rendered: RenderedMessage,
    template_id: Option<TemplateId>,
    template_version: Option<i32>,
    /// The template's sender and reply-to address; empty for inline content.
    from_name: String,
    from_email: String,
    reply_to: String,
}

/// Renders the named template, or the inline subject and bodies, with the request's variables.
async fn render_content(
    db: &Db,
    tenant: TenantId,
    req: &SendRequest,
    variables: &serde_json::Value,
) -> Result<Content> {
    let (content, template_id, template_version, from_name, from_email, reply_to) = match req.template.as_deref() {
        Some(name) => {
            if req.html.is_some() || req.text.is_some() {
                return Err(Error::invalid("Send either `template` or inline `html`/`text`, not both."));
            }
            let t = find_template(db, tenant, name).await.map_err(|e| match e {
                Error::NotFound => Error::invalid(format!("There is no template “{name}”.")),
                e => e,
            })?;
            let subject = req.subject.clone().unwrap_or_else(|| t.subject.clone());
            let compiled = Compiled::new(&subject, &t.html, &t.text_body)?;
            let content = compiled.render(Turn::request(tenant), variables).await?;
            (content, Some(t.id), Some(t.version), t.from_name, t.from_email, t.reply_to)
        }
        None => {
            let subject = req.subject.clone().unwrap_or_default();
            if subject.trim().is_empty() {
                return Err(Error::invalid("`subject` is required with inline content."));
            }
            let html = req.html.clone().unwrap_or_default();
            let text = req.text.clone().unwrap_or_default();
            if html.trim().is_empty() && text.trim().is_empty() {
                return Err(Error::invalid("Give a `template`, or inline `html` and/or `text`."));
            }
            let content = Compiled::new(&subject, &html, &text)?.render(Turn::request(tenant), variables).await?;
            (content, None, None, String::new(), String::new(), String::new())
        }
    };
    Ok(Content { rendered: content, template_id, template_version, from_name, from_email, reply_to })
}

/// The first of `candidates` that is not blank, trimmed.
fn first_given(candidates: [String; 3]) -> Option<String> {
    candidates.into_iter().map(|s| s.trim().to_string()).find(|s| !s.is_empty())
}

/// The sender's address: the request's, else the template's, else the workspace's; checked.
fn from_address(req: &SendRequest, from_email: String, ws_from_email: String, slug: &str) -> Result<String> {
    let from_email = first_given([req.from.clone().unwrap_or_default(), from_email, ws_from_email]).ok_or_else(|| {
        Error::invalid(format!(
            "No sender: pass `from`, set one on the template, or set the workspace's transactional sender in Settings → Sending (workspace {slug})."
        ))
    })?;
    Ok(Email::parse(&from_email)?.as_str().to_string())
}

/// The reply-to address: the request's, else the template's; checked when not empty.
fn reply_address(req: &SendRequest, reply_to: String) -> Result<String> {
    let reply_to = req.reply_to.clone().unwrap_or(reply_to).trim().to_string();
    if !reply_to.is_empty() {
        Email::parse(&reply_to)?;
    }
    Ok(reply_to)
}

/// Who a message is from, and where replies go.
struct Sender {
    from_name: String,
    from_email: String,
    reply_to: String,
}

/// A message as `enqueue` stores it.
struct NewMessage<'a> {
    id: MessageId,
    key: &'a str,
    hash: &'a str,
    to: &'a Email,
    req: &'a SendRequest,
    sender: &'a Sender,
    rendered: &'a RenderedMessage,
    template_id: Option<TemplateId>,
    template_version: Option<i32>,
    /// The HTML as sent: with its links rewritten and its open pixel when tracked.
    html: &'a str,
    metadata: &'a serde_json::Value,
    links: &'a [String],
}

/// Stores the message unless its key is taken; its id when it was stored.
async fn insert_message(tx: &mut Tx, tenant: TenantId, m: &NewMessage<'_>) -> Result<Option<MessageId>> {
    let inserted: Option<MessageId> = sqlx::query_scalar(
        "INSERT INTO messages (id, tenant_id, idempotency_key, request_hash, to_email, to_name, from_name, from_email,
                               reply_to, subject, html, text_body, template_id, template_version, metadata, links,
                               next_attempt_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, greatest(coalesce($17, now()), now()))
         ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
         RETURNING id",
    )
    .bind(m.id)
    .bind(tenant)
    .bind(m.key)
    .bind(m.hash)
    .bind(m.to.as_str())
    .bind(m.req.to_name.trim())
    .bind(&m.sender.from_name)
    .bind(&m.sender.from_email)
    .bind(&m.sender.reply_to)
    .bind(&m.rendered.subject)
    .bind(m.html)
    .bind(&m.rendered.text)
    .bind(m.template_id)
    .bind(m.template_version)
    .bind(m.metadata)
    .bind(m.links)
    .bind(m.req.send_at)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(inserted)
}

/// Counts the message against the account's allowance and logs it queued.
async fn count_and_log(tx: &mut Tx, tenant: TenantId, id: MessageId, send_at: Option<DateTime<Utc>>) -> Result<()> {
    // Counted with the insert: a refusal stores nothing, and a replay above costs nothing.
    if let Some(account) = crate::account_limits::account_of(tx, tenant).await? {
        crate::account_limits::claim(tx, account, crate::account_limits::Usage::Transactional, 1).await?;
    }
    let detail = match send_at {
        Some(at) if at > Utc::now() => format!("scheduled for {}", at.to_rfc3339()),
        _ => String::new(),
    };
    add_event(tx, tenant, id, "queued", &detail).await
}

/// The message stored under `key`, if any: the same body gives it back, another is a 409.
async fn replay(db: &Db, tenant: TenantId, key: &str, hashes: &[&str]) -> Result<Option<Enqueued>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let found: Option<(MessageId, String)> =
        sqlx::query_as("SELECT id, request_hash FROM messages WHERE tenant_id = $1 AND idempotency_key = $2")
            .bind(tenant)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    match found {
        None => Ok(None),
        // The API's convention for a reused key (see server/src/routes/api/idempotency.rs).
        Some((_, stored)) if !hashes.contains(&stored.as_str()) => Err(Error::Invalid(herald_types::Invalid::field(
            "Idempotency-Key",
            format!(
                "The Idempotency-Key “{key}” was already used for a different request. Use a new key for a new message, or resend exactly the same body to get the first answer back."
            ),
        ))),
        Some((id, _)) => Ok(Some(Enqueued { message: get(db, tenant, id).await?, created: false })),
    }
}

/// Rewrites the links for click tracking and adds the open pixel.
fn track(outbox: &Outbox, tenant: TenantId, id: MessageId, content: &RenderedMessage) -> (String, Vec<String>) {
    let base = outbox.base_url.trim_end_matches('/');
    let own = format!("{base}/");
    let mac = outbox.keys.workspace(tenant);
    let mut urls = links::trackable_urls(&content.html, &own);
    urls.truncate(100);
    let mut html = links::rewrite(&content.html, &own, |url| {
        let index = urls.iter().position(|u| u == url)?;
        Some(format!("{base}/c/{}", outbox.keys.message_click_token(&mac, tenant, id, index as i64)))
    });
    let pixel = format!(
        "<img src=\"{base}/o/{}\" width=\"1\" height=\"1\" alt=\"\" style=\"display:block;width:1px;height:1px;border:0;\">",
        outbox.keys.message_open_token(&mac, tenant, id)
    );
    match html.rfind("</body>") {
        Some(at) => html.insert_str(at, &pixel),
        None => html.push_str(&pixel),
    }
    (html, urls)
}

/// The HTML without its open pixel, so looking at a message in Herald does not count as an open.
fn without_pixel(html: &str) -> String {
    const START: &str = "<img src=\"";
    const END: &str = "border:0;\">";
    let mut out = html.to_string();
    if let Some(at) = out.rfind(START)
        && out[at..].contains("/o/")
        && let Some(len) = out[at..].find(END)
    {
        out.replace_range(at..at + len + END.len(), "");
    }
    out
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn get(db: &Db, tenant: TenantId, id: MessageId) -> Result<Message> {
    let mut tx = db.tenant_tx(tenant).await?;
    let message = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(message)
}

async fn get_in(tx: &mut Tx, tenant: TenantId, id: MessageId) -> Result<Message> {
    let row =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} {FROM} WHERE m.tenant_id = $1 AND m.id = $2")))
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    row.ok_or(Error::NotFound)
}

/// The message and its events from one snapshot: an `opened` event never shows beside a null
/// `opened_at` (they are written in one transaction, and read in one here).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn with_events(db: &Db, tenant: TenantId, id: MessageId) -> Result<(Message, Vec<MessageEvent>)> {
    let mut tx = db.tenant_snapshot_tx(tenant).await?;
    let message = get_in(&mut tx, tenant, id).await?;
    let events = events_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok((message, events))
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn detail(db: &Db, tenant: TenantId, id: MessageId) -> Result<MessageDetail> {
    let mut tx = db.tenant_snapshot_tx(tenant).await?;
    let message = get_in(&mut tx, tenant, id).await?;
    let (html, text): (String, String) =
        sqlx::query_as("SELECT html, text_body FROM messages WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
    let events = events_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(MessageDetail { message, html: without_pixel(&html), text, events })
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn events(db: &Db, tenant: TenantId, id: MessageId) -> Result<Vec<MessageEvent>> {
    Ok(with_events(db, tenant, id).await?.1)
}

async fn events_in(tx: &mut Tx, tenant: TenantId, id: MessageId) -> Result<Vec<MessageEvent>> {
    Ok(sqlx::query_as(
        "SELECT kind, detail, occurred_at FROM message_events WHERE tenant_id = $1 AND message_id = $2 ORDER BY id",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&mut **tx)
    .await?)
}

/// Filters for the list; all optional.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MessageFilter {
    pub status: Option<String>,
    /// An address (exact, any case) or an idempotency key, or the start of an address.
    pub q: Option<String>,
    pub template: Option<TemplateId>,
    /// Messages after this one in the list's order: the previous page's last `(created_at, id)`.
    pub after: Option<(DateTime<Utc>, MessageId)>,
    pub limit: Option<i64>,
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId, f: &MessageFilter) -> Result<Vec<Message>> {
    let status = f.status.as_deref().filter(|s| !s.trim().is_empty()).map(str::parse::<MessageStatus>).transpose()?;
    let q = f.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let prefix =
        q.map(|q| format!("{}%", q.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} {FROM}
         WHERE m.tenant_id = $1
           AND ($2::text IS NULL OR m.status = $2)
           AND ($3::text IS NULL OR m.idempotency_key = $3 OR lower(m.to_email) LIKE $4)
           AND ($5::uuid IS NULL OR m.template_id = $5)
           AND ($6::timestamptz IS NULL OR (m.created_at, m.id) < ($6, $8))
         ORDER BY m.created_at DESC, m.id DESC LIMIT $7"
    )))
    .bind(tenant)
    .bind(status)
    .bind(q)
    .bind(prefix)
    .bind(f.template)
    .bind(f.after.map(|a| a.0))
    .bind(f.limit.unwrap_or(50).clamp(1, 501))
    .bind(f.after.map(|a| a.1))
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Counts per status over the last 24 hours, for the page header.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn counts_last_day(db: &Db, tenant: TenantId) -> Result<Vec<(MessageStatus, i64)>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(
        "SELECT status, count(*) FROM messages WHERE tenant_id = $1 AND created_at > now() - interval '1 day'
         GROUP BY status ORDER BY status",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Cancels a message that has not been handed to SMTP yet.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn cancel(db: &Db, tenant: TenantId, role: Role, id: MessageId) -> Result<Message> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let cancellable: Vec<MessageStatus> = MessageStatus::ALL.iter().copied().filter(|s| s.can_cancel()).collect();
    let moved = transition(
        &mut tx,
        tenant,
        id,
        (&cancellable, MessageStatus::Cancelled),
        None,
        ("", |q| q),
        Some(("cancelled", "")),
    )
    .await?;
    tx.commit().await?;
    let message = get(db, tenant, id).await?;
    if !moved {
        return Err(Error::Conflict(format!(
            "Only a queued message can be cancelled; this one is {}.",
            message.status
        )));
    }
    Ok(message)
}

type MessageUpdate<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The one way a message's status changes: from one of `from` to `to`, setting `also` as well
/// (assignments whose binds start at $6), and, for a claimed message, only while it still
/// carries the lease token it was claimed under (`claimed_under`), so a loop that lost its
/// lease cannot overwrite what the next owner recorded. Records `event` (kind, detail) when the
/// message moved, and says whether it did.
pub(crate) async fn transition<'q>(
    tx: &mut Tx,
    tenant: TenantId,
    id: MessageId,
    (from, to): (&'q [MessageStatus], MessageStatus),
    claimed_under: Option<i64>,
    (also, bind_also): (&str, impl FnOnce(MessageUpdate<'q>) -> MessageUpdate<'q>),
    event: Option<(&str, &str)>,
) -> Result<bool> {
    let also = if also.is_empty() { String::new() } else { format!("{also}, ") };
    let update = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE messages SET status = $3, {also}updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status = ANY($4) AND ($5::bigint IS NULL OR lease_token = $5)"
    )))
    .bind(tenant)
    .bind(id)
    .bind(to)
    .bind(from)
    .bind(claimed_under);
    let moved = bind_also(update).execute(&mut **tx).await?.rows_affected() > 0;
    if moved && let Some((kind, detail)) = event {
        add_event(tx, tenant, id, kind, detail).await?;
    }
    Ok(moved)
}

pub(crate) async fn add_event(tx: &mut Tx, tenant: TenantId, id: MessageId, kind: &str, detail: &str) -> Result<()> {
    sqlx::query("INSERT INTO message_events (tenant_id, message_id, kind, detail) VALUES ($1, $2, $3, $4)")
        .bind(tenant)
        .bind(id)
        .bind(kind)
        .bind(detail.chars().take(500).collect::<String>())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// An open or a click from the tracking endpoints. The first of each sets the message's column.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn record_hit(db: &Db, tenant: TenantId, id: MessageId, click: Option<&str>, prefetch: bool) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    let (kind, detail) = match click {
        Some(url) => ("clicked", url.to_string()),
        None if prefetch => ("opened", "privacy prefetch".to_string()),
        None => ("opened", String::new()),
    };
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM messages WHERE tenant_id = $1 AND id = $2)")
        .bind(tenant)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
    if !exists {
        return Ok(());
    }
    if !prefetch {
        let column = if click.is_some() { "clicked_at" } else { "opened_at" };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET {column} = now() WHERE tenant_id = $1 AND id = $2 AND {column} IS NULL"
        )))
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    add_event(&mut tx, tenant, id, kind, &detail).await?;
    tx.commit().await?;
    Ok(())
}

/// The URL behind a message's `index`th tracked link, once the message was sent.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn link(db: &Db, tenant: TenantId, id: MessageId, index: i64) -> Result<Option<String>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let url: Option<Option<String>> = sqlx::query_scalar(
        "SELECT links[$3::int + 1] FROM messages WHERE tenant_id = $1 AND id = $2 AND status = 'sent'",
    )
    .bind(tenant)
    .bind(id)
    .bind(index.clamp(0, 10_000) as i32)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(url.flatten())
}

/// `msg.<uuid>@domain`: the Message-ID every transactional message carries.
pub fn parse_message_id(id: &str) -> Option<MessageId> {
    let id = id.trim().trim_start_matches('<').trim_end_matches('>');
    let (local, _) = id.split_once('@')?;
    local.strip_prefix("msg.")?.parse().ok()
}

/// The transactional message a provider event is about: by our Message-ID, else (when
/// `by_provider_id`) by the id the provider's 250 gave.
pub(crate) async fn match_event(
    tx: &mut Tx,
    tenant: TenantId,
    ev: &ProviderEvent,
    by_provider_id: bool,
) -> Result<Option<MessageId>> {
    if let Some(id) = ev.message_id.as_deref().and_then(parse_message_id) {
        return Ok(sqlx::query_scalar("SELECT id FROM messages WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?);
    }
    match ev.provider_id.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
        Some(pid) if by_provider_id => {
            let short = pid.split('.').next().unwrap_or(pid);
            Ok(sqlx::query_scalar("SELECT id FROM messages WHERE tenant_id = $1 AND provider_id IN ($2, $3) LIMIT 1")
                .bind(tenant)
                .bind(pid)
                .bind(short)
                .fetch_optional(&mut **tx)
                .await?)
        }
        _ => Ok(None),
    }
}

/// A provider's report about a transactional message: its event, its first-time column, and
/// (for hard bounces and complaints) the workspace's suppression. Transactional mail does not
/// unsubscribe anyone from lists.
pub(crate) async fn apply_event(
    tx: &mut Tx,
    tenant: TenantId,
    id: MessageId,
    ev: &ProviderEvent,
    provider: &str,
) -> Result<()> {
    let source = format!("{provider} webhook");
    let detail = format!("{provider}: {}", ev.detail);
    let (kind, column) = match ev.kind {
        EventKind::Delivered => ("delivered", Some("delivered_at")),
        EventKind::Bounce { hard: true } => {
            suppressions::add_in(
                tx,
                tenant,
                &ev.email,
                crate::audience::suppressions::SuppressionReason::HardBounce,
                &source,
            )
            .await?;
            ("bounced", Some("bounced_at"))
        }
        EventKind::Bounce { hard: false } => ("soft_bounced", None),
        EventKind::Complaint => {
            suppressions::add_in(
                tx,
                tenant,
                &ev.email,
                crate::audience::suppressions::SuppressionReason::Complaint,
                &source,
            )
            .await?;
            ("complained", Some("complained_at"))
        }
        EventKind::Unsubscribe => ("unsubscribed", None),
    };
    if let Some(column) = column {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET {column} = $3, updated_at = now() WHERE tenant_id = $1 AND id = $2 AND {column} IS NULL"
        )))
        .bind(tenant)
        .bind(id)
        .bind(ev.at)
        .execute(&mut **tx)
        .await?;
        if column != "delivered_at" {
            super::guard::check(tx, tenant).await?;
        }
    }
    add_event(tx, tenant, id, kind, &detail).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_and_whitespace() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"to":"a@x.test","variables":{"b":1,"a":[1,2]}}"#).unwrap_or_default();
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "variables": {"a": [1, 2], "b": 1}, "to": "a@x.test" }"#).unwrap_or_default();
        let c: serde_json::Value =
            serde_json::from_str(r#"{"to":"a@x.test","variables":{"b":2,"a":[1,2]}}"#).unwrap_or_default();
        assert_eq!(request_hash(&a), request_hash(&b));
        assert_ne!(request_hash(&a), request_hash(&c));
        // One mailbox, however it is typed, is one request.
        let unicode = serde_json::json!({"to": "Anna@Exämple.com", "subject": "s"});
        let ascii = serde_json::json!({"to": "anna@xn--exmple-cua.com", "subject": "s"});
        assert_eq!(request_hash(&unicode), request_hash(&ascii));
        assert_ne!(request_hash(&unicode), body_hash(&unicode), "the legacy hash is kept for replays of old rows");
    }

    #[test]
    fn parses_only_message_ids_of_transactional_mail() {
        let id = MessageId::new();
        assert_eq!(parse_message_id(&format!("<msg.{id}@mail.example.com>")), Some(id));
        assert_eq!(parse_message_id(&format!("{id}.42@mail.example.com")), None);
        assert_eq!(parse_message_id("msg.nope@x"), None);
    }

    #[test]
    fn keys_must_be_printable() {
        assert!(check_key("").is_err());
        assert!(check_key("order-1\n").is_ok(), "trimmed");
        assert!(check_key("a\u{7}b").is_err());
        assert!(check_key(&"k".repeat(256)).is_err());
        assert!(check_key("order-1234-receipt").is_ok());
    }
}
