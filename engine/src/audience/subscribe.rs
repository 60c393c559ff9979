//! The public side: the hosted subscribe form, double opt-in confirmation, and leaving (the
//! unsubscribe page, RFC 8058 one-click, the preference center).
//!
//! Answers never reveal whether an address was already known: the form always says "check your
//! inbox", and a bot cannot make Herald mail-bomb a stranger (at most one confirmation per
//! address per list per [`CONFIRMATION_RESEND_AFTER_MINUTES`]).
//!
//! A public form is anyone typing any address: every entry through one waits for the click in
//! its confirmation mail, whatever the list's opt-in setting (single opt-in means "subscribed at
//! once" for imports, the API and authors only). So nothing a list starts (a welcome automation,
//! a campaign) reaches an address that did not prove itself by a click (an open proves nothing:
//! mail privacy proxies open every image). The name typed with it reaches the reader only
//! through that click too, and the confirmation mail shows none of it.

use chrono::{Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::consent::{self, Origin};
use super::lists::{self, List, Visibility};
use super::suppressions;
use crate::domain::{CampaignId, Email, ListId, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::infra::tokens::Signer;
use crate::jobs::Jobs;
use crate::sending::mail::{MailFrom, OutgoingMail, escape_html};
use herald_types::{ReaderStatus, SubscriptionStatus};

pub const CONFIRM_PURPOSE: &str = "confirm";
pub const UNSUBSCRIBE_PURPOSE: &str = "unsubscribe";
pub const CONFIRMATION_VALID_HOURS: i64 = 48;
pub const CONFIRMATION_RESEND_AFTER_MINUTES: i64 = 15;

/// The default consent wording shown on hosted forms (and stored in the ledger with each
/// subscription made through them).
pub fn default_wording(workspace: &str) -> String {
    format!(
        "By subscribing you agree that {workspace} may email you its newsletter. Every email has a link to unsubscribe at once."
    )
}

#[derive(Serialize, Deserialize)]
struct ConfirmClaim {
    t: TenantId,
    r: i64,
    /// (list, nonce) pairs: the nonce makes each link single-use.
    l: Vec<(ListId, Uuid)>,
    /// The name typed into the form, given to the reader (if theirs is empty) only when the
    /// link is used: a stranger who types a known reader's address cannot put words into the
    /// mail that reader gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct UnsubscribeClaim {
    t: TenantId,
    r: i64,
    l: Option<ListId>,
    /// The campaign the message belonged to, so its stats count the unsubscribe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    c: Option<CampaignId>,
}

/// A signed, non-expiring unsubscribe URL for one reader (and the list a message was sent for).
/// The token of the unsubscribe link in previews and test sends: it names no reader, and the
/// page it opens says so. A preview that showed a reader's real link would hand every viewer a
/// never-expiring token to that reader's preferences.
pub const PREVIEW_UNSUBSCRIBE_TOKEN: &str = "preview";

/// The unsubscribe link of a preview or a test send ([`PREVIEW_UNSUBSCRIBE_TOKEN`]).
pub fn preview_unsubscribe_url(base_url: &str) -> String {
    format!("{}/u/{PREVIEW_UNSUBSCRIBE_TOKEN}", base_url.trim_end_matches('/'))
}

pub fn unsubscribe_url(signer: &Signer, base_url: &str, tenant: TenantId, reader: i64, list: Option<ListId>) -> String {
    campaign_unsubscribe_url(signer, base_url, tenant, reader, list, None)
}

/// The same, naming the campaign whose message carried it.
pub fn campaign_unsubscribe_url(
    signer: &Signer,
    base_url: &str,
    tenant: TenantId,
    reader: i64,
    list: Option<ListId>,
    campaign: Option<CampaignId>,
) -> String {
    let token =
        signer.sign(UNSUBSCRIBE_PURPOSE, None, &UnsubscribeClaim { t: tenant, r: reader, l: list, c: campaign });
    format!("{}/u/{token}", base_url.trim_end_matches('/'))
}

pub struct SubscribeRequest {
    pub email: String,
    pub name: String,
    pub list_ids: Vec<ListId>,
    pub origin: Origin,
}

/// Everything the public subscribe endpoint needs.
pub struct PublicContext<'a> {
    pub db: &'a Db,
    pub signer: &'a Signer,
    pub jobs: &'a Jobs,
    pub base_url: &'a str,
}

/// Upserts a reader by lowercased address. An existing reader's name is only filled in, never
/// replaced, so a stranger cannot rename someone through a public form.
pub(crate) async fn upsert_reader(
    tx: &mut Tx,
    tenant: TenantId,
    email: &Email,
    name: &str,
) -> Result<(i64, ReaderStatus)> {
    let row: (i64, ReaderStatus) = sqlx::query_as(
        "INSERT INTO readers (tenant_id, email, name) VALUES ($1, $2, $3)
         ON CONFLICT (tenant_id, lower(email)) DO UPDATE
            SET name = CASE WHEN readers.name = '' THEN excluded.name ELSE readers.name END
         RETURNING id, status",
    )
    .bind(tenant)
    .bind(email.as_str())
    .bind(name.trim().chars().take(200).collect::<String>())
    .fetch_one(&mut **tx)
    .await?;
    Ok(row)
}

/// Handles a public form's entry (the hosted page, an embedded form): a pending subscription on
/// each chosen public list, and one confirmation mail covering them; the reader is on a list
/// only once they click it, on a single opt-in list too. Returns Ok whether or not anything
/// changed or was sent.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn subscribe(cx: &PublicContext<'_>, tenant: TenantId, req: SubscribeRequest) -> Result<()> {
    let email = Email::parse(&req.email)?;
    if req.name.chars().any(char::is_control) {
        return Err(Error::invalid("The name must be one line."));
    }
    let public = lists::public(cx.db, tenant).await?;
    let chosen: Vec<&List> = public.iter().filter(|l| req.list_ids.contains(&l.id)).collect();
    if chosen.is_empty() {
        return Err(Error::invalid("Choose at least one list."));
    }
    // Every entry is a confirmation mail, so the account must have proved its own address first.
    require_confirmed_account(cx.db, tenant).await?;
    let mut tx = cx.db.tenant_tx(tenant).await?;
    // Bounced, complained or blocklisted addresses are silently ignored: the answer is the same.
    let suppressed = suppressions::is_suppressed(&mut tx, tenant, email.as_str()).await?;
    if suppressed.is_some_and(|reason| reason != suppressions::SuppressionReason::UnsubscribedAll) {
        return Ok(());
    }
    // No name yet: the typed one rides in the signed link and is the reader's once they click.
    let (reader, status) = upsert_reader(&mut tx, tenant, &email, "").await?;
    if status == ReaderStatus::Blocklisted {
        return Ok(());
    }
    // Pending until the click, on a single opt-in list too: otherwise anyone could put any
    // address on a list (and in its welcome automation), or undo someone's unsubscribe, by
    // typing it.
    let mut to_confirm: Vec<(ListId, Uuid)> = Vec::new();
    for list in chosen {
        if let Some(nonce) = request_confirmation(&mut tx, tenant, reader, list.id, &req.origin).await? {
            to_confirm.push((list.id, nonce));
        }
    }
    tx.commit().await?;
    if !to_confirm.is_empty() {
        let ws = crate::workspaces::get(cx.db, tenant).await?;
        let names: Vec<String> =
            public.iter().filter(|l| to_confirm.iter().any(|(id, _)| *id == l.id)).map(|l| l.name.clone()).collect();
        let typed: String = req.name.trim().chars().take(200).collect();
        let link = confirm_link(cx, tenant, reader, to_confirm, (!typed.is_empty()).then_some(typed));
        mail_confirmation(cx, tenant, &email, &ws.name, &names, &link).await?;
    }
    Ok(())
}

/// Starts (or restarts) a pending subscription that the reader confirms from their inbox; `None`
/// when the reader is already confirmed on the list or a confirmation went out recently (no
/// second mail in the window).
async fn request_confirmation(
    tx: &mut Tx,
    tenant: TenantId,
    reader: i64,
    list: ListId,
    origin: &Origin,
) -> Result<Option<Uuid>> {
    let nonce: Option<Option<Uuid>> = sqlx::query_scalar(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmation_nonce, confirmation_sent_at)
         VALUES ($1, $2, $3, 'unconfirmed', $4, now())
         ON CONFLICT (list_id, reader_id) DO UPDATE
            SET status = 'unconfirmed', unsubscribed_at = NULL,
                confirmation_nonce = excluded.confirmation_nonce, confirmation_sent_at = now()
          WHERE subscriptions.status <> 'confirmed'
            AND (subscriptions.confirmation_sent_at IS NULL
                 OR subscriptions.confirmation_sent_at < now() - make_interval(mins => $5))
         RETURNING confirmation_nonce",
    )
    .bind(tenant)
    .bind(list)
    .bind(reader)
    .bind(Uuid::new_v4())
    .bind(CONFIRMATION_RESEND_AFTER_MINUTES as i32)
    .fetch_optional(&mut **tx)
    .await?;
    let nonce = nonce.flatten();
    if nonce.is_some() {
        consent::record(tx, tenant, reader, Some(list), "subscribe_requested", origin).await?;
    }
    Ok(nonce)
}

/// A confirmation email carries the workspace's name to any address typed into its form: the
/// workspace's account must have proved its own address first. Checked before a
/// form starts pending subscriptions too, so nothing waits on a mail that never went.
async fn require_confirmed_account(db: &Db, tenant: TenantId) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    let unconfirmed_account: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM tenants t JOIN users u ON u.id = t.account_id
                        WHERE t.id = $1 AND u.email_verified_at IS NULL)",
    )
    .bind(tenant)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    if unconfirmed_account {
        return Err(Error::Refused(
            "This workspace cannot send confirmation emails until its owner confirms their own email address.".into(),
        ));
    }
    Ok(())
}

/// Queues one confirmation email for `reader`, covering the (list, nonce) pairs in `to_confirm`.
pub(crate) async fn send_confirmation(
    cx: &PublicContext<'_>,
    tenant: TenantId,
    reader: i64,
    email: &Email,
    workspace: &str,
    list_names: &[String],
    to_confirm: Vec<(ListId, Uuid)>,
) -> Result<()> {
    let link = confirm_link(cx, tenant, reader, to_confirm, None);
    mail_confirmation(cx, tenant, email, workspace, list_names, &link).await
}

/// The signed, expiring link that confirms the (list, nonce) pairs in `to_confirm`, carrying
/// the name typed into a form (if any) to be given to the reader on the click.
fn confirm_link(
    cx: &PublicContext<'_>,
    tenant: TenantId,
    reader: i64,
    to_confirm: Vec<(ListId, Uuid)>,
    name: Option<String>,
) -> String {
    let expires = Utc::now() + Duration::hours(CONFIRMATION_VALID_HOURS);
    let token = cx.signer.sign(
        CONFIRM_PURPOSE,
        Some(expires.timestamp()),
        &ConfirmClaim { t: tenant, r: reader, l: to_confirm, n: name },
    );
    format!("{}/confirm/{token}", cx.base_url.trim_end_matches('/'))
}

/// Queues the confirmation email with `link` to `email`.
async fn mail_confirmation(
    cx: &PublicContext<'_>,
    tenant: TenantId,
    email: &Email,
    workspace: &str,
    list_names: &[String],
    link: &str,
) -> Result<()> {
    require_confirmed_account(cx.db, tenant).await?;
    let mut mail = confirmation_mail(email, workspace, list_names, link);
    mail.from = confirmation_sender(cx, tenant, workspace).await?;
    cx.jobs.enqueue_workspace_mail(tenant, mail).await
}

/// Who a confirmation comes from: the workspace's default sender when its domain is verified
/// with the DKIM key published (the mail is signed with it), else Herald's address under the
/// workspace's name. Readers asked the workspace, not Herald, for this mail.
async fn confirmation_sender(cx: &PublicContext<'_>, tenant: TenantId, workspace: &str) -> Result<MailFrom> {
    let herald = MailFrom::HeraldFor { workspace: workspace.to_string() };
    let mut tx = cx.db.tenant_tx(tenant).await?;
    let (name, email): (String, String) =
        sqlx::query_as("SELECT default_from_name, default_from_email FROM tenants WHERE id = $1")
            .bind(tenant)
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    if email.is_empty() || crate::sending::domains::dkim_key_for(cx.db, cx.signer, tenant, &email).await?.is_none() {
        return Ok(herald);
    }
    let name = if name.trim().is_empty() { workspace.to_string() } else { name };
    Ok(MailFrom::Workspace { tenant, workspace: workspace.to_string(), name, email })
}

/// A reader to mail a confirmation to: (reader id, address, the (list, nonce) pairs).
pub(crate) type PendingConfirmation = (i64, String, Vec<(ListId, Uuid)>);

/// Opt-in for many readers at once (an import in opt-in mode): starts pending subscriptions on
/// `lists` for the active, unsuppressed ones, under the same rules as the hosted form (never over
/// a confirmed or unsubscribed subscription, at most one mail per window), and returns per reader
/// its address and the (list, nonce) pairs to mail.
pub(crate) async fn start_pending(
    tx: &mut Tx,
    tenant: TenantId,
    readers: &[i64],
    lists: &[ListId],
    origin: &Origin,
) -> Result<Vec<PendingConfirmation>> {
    let rows: Vec<(i64, String, ListId, Uuid)> = sqlx::query_as(
        "WITH cand AS (
            SELECT r.id AS reader_id, l.id AS list_id, gen_random_uuid() AS nonce
            FROM readers r CROSS JOIN lists l
            WHERE r.tenant_id = $1 AND r.id = ANY($2) AND r.status = 'active' AND l.tenant_id = $1 AND l.id = ANY($3)
              AND NOT EXISTS (SELECT 1 FROM suppressions s WHERE s.tenant_id = $1 AND s.email_lower = lower(r.email))
         ), up AS (
            INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmation_nonce, confirmation_sent_at)
            SELECT $1, list_id, reader_id, 'unconfirmed', nonce, now() FROM cand
            ON CONFLICT (list_id, reader_id) DO UPDATE
               SET confirmation_nonce = excluded.confirmation_nonce, confirmation_sent_at = now()
             WHERE subscriptions.status = 'unconfirmed'
               AND (subscriptions.confirmation_sent_at IS NULL OR subscriptions.confirmation_sent_at < now() - make_interval(mins => $4))
            RETURNING reader_id, list_id, confirmation_nonce
         ), ledger AS (
            INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, ip, user_agent, wording)
            SELECT $1, reader_id, list_id, 'subscribe_requested', $5, $6, $7, $8 FROM up
         )
         SELECT up.reader_id, r.email, up.list_id, up.confirmation_nonce FROM up JOIN readers r ON r.id = up.reader_id
         ORDER BY up.reader_id",
    )
    .bind(tenant)
    .bind(readers)
    .bind(lists)
    .bind(CONFIRMATION_RESEND_AFTER_MINUTES as i32)
    .bind(&origin.source)
    .bind(origin.ip.as_deref())
    .bind(origin.user_agent.as_deref())
    .bind(origin.wording.as_deref())
    .fetch_all(&mut **tx)
    .await?;
    let mut out: Vec<PendingConfirmation> = Vec::new();
    for (reader, email, list, nonce) in rows {
        match out.last_mut() {
            Some(last) if last.0 == reader => last.2.push((list, nonce)),
            _ => out.push((reader, email, vec![(list, nonce)])),
        }
    }
    Ok(out)
}

/// Rows of `confirmation_outbox` one pass takes per workspace (the rest wait for the next).
const OWED_PER_PASS: i64 = 500;

/// Mails the confirmations owed for pending subscriptions that were started where no mail can be
/// sent: an automation's "subscribe" step on a double opt-in list runs in SQL and writes what it
/// owes in `confirmation_outbox`, in the same transaction as the subscription. The scheduler
/// calls this after every tick, so a crash between a step's commit and its mail only delays the
/// mail to the next pass. Returns the mails queued.
#[tracing::instrument(skip_all)]
pub async fn send_owed_confirmations(cx: &PublicContext<'_>) -> Result<u64> {
    let tenants: Vec<TenantId> =
        sqlx::query_scalar("SELECT tenant_id FROM confirmation_outbox_tenants()").fetch_all(cx.db.pool()).await?;
    let mut queued = 0;
    for tenant in tenants {
        // One workspace's trouble (its database rows, say) must not hold up the others' mail.
        match send_owed_in(cx, tenant).await {
            Ok(n) => queued += n,
            Err(e) => {
                tracing::warn!(%tenant, error = ?e, "owed confirmation mails not sent; the next pass tries again")
            }
        }
    }
    Ok(queued)
}

/// [`send_owed_confirmations`] for one workspace: one mail per reader, naming every list it owes
/// them. A row whose subscription is no longer pending, or whose reader may no longer be mailed
/// (left everything, suppressed, blocked), is dropped unmailed.
async fn send_owed_in(cx: &PublicContext<'_>, tenant: TenantId) -> Result<u64> {
    let mut tx = cx.db.tenant_tx(tenant).await?;
    // Locked until this pass commits: another process's pass skips them, and a crash before the
    // commit leaves them owed (a mail queued just before such a crash goes twice, as system mail
    // may; never none). The nonce comes only where the mail is still owed: the subscription
    // still pending, the reader still active and unsuppressed.
    let rows: Vec<(i64, ListId, String, String, Option<Uuid>)> = sqlx::query_as(
        "SELECT o.reader_id, o.list_id, coalesce(r.email, ''), coalesce(l.name, ''),
                CASE WHEN r.id IS NOT NULL AND l.id IS NOT NULL THEN s.confirmation_nonce END
         FROM (SELECT reader_id, list_id, created_at FROM confirmation_outbox WHERE tenant_id = $1
               ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) o
         LEFT JOIN subscriptions s ON s.tenant_id = $1 AND s.list_id = o.list_id AND s.reader_id = o.reader_id
                                  AND s.status = 'unconfirmed'
         LEFT JOIN readers r ON r.tenant_id = $1 AND r.id = o.reader_id AND r.status = 'active'
                            AND NOT EXISTS (SELECT 1 FROM suppressions x
                                            WHERE x.tenant_id = $1 AND x.email_lower = lower(r.email))
         LEFT JOIN lists l ON l.tenant_id = $1 AND l.id = o.list_id
         ORDER BY o.reader_id, lower(l.name)",
    )
    .bind(tenant)
    .bind(OWED_PER_PASS)
    .fetch_all(&mut *tx)
    .await?;
    if rows.is_empty() {
        tx.commit().await?;
        return Ok(0);
    }
    // Per reader: (reader, address, the (list, nonce) pairs) and the lists' names.
    let mut to_mail: Vec<(PendingConfirmation, Vec<String>)> = Vec::new();
    for (reader, list, email, name, nonce) in &rows {
        let Some(nonce) = nonce else { continue };
        match to_mail.last_mut() {
            Some((last, names)) if last.0 == *reader => {
                last.2.push((*list, *nonce));
                names.push(name.clone());
            }
            _ => to_mail.push(((*reader, email.clone(), vec![(*list, *nonce)]), vec![name.clone()])),
        }
    }
    let workspace = if to_mail.is_empty() { String::new() } else { crate::workspaces::get(cx.db, tenant).await?.name };
    // The readers whose rows are settled: mailed, or not to be mailed.
    let mut settled: Vec<i64> = rows.iter().map(|r| r.0).filter(|r| !to_mail.iter().any(|m| m.0.0 == *r)).collect();
    let mut queued = 0u64;
    let mut failed = None;
    for ((reader, email, pairs), names) in to_mail {
        let sent = match Email::parse(&email) {
            Ok(address) => send_confirmation(cx, tenant, reader, &address, &workspace, &names, pairs).await,
            Err(e) => Err(Error::from(e)),
        };
        match sent {
            Ok(()) => queued += 1,
            // A mail quota, a suspended account, an account that never confirmed its own
            // address, an address that no longer parses: this mail will not go, now or on a
            // later pass. The subscription stays pending; the reader may still ask again.
            Err(Error::Invalid(why)) => tracing::warn!(%tenant, reader, %why, "owed confirmation mail not sent"),
            Err(Error::Refused(why)) => tracing::warn!(%tenant, reader, %why, "owed confirmation mail not sent"),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        settled.push(reader);
    }
    let (readers, lists): (Vec<i64>, Vec<ListId>) =
        rows.iter().filter(|r| settled.contains(&r.0)).map(|r| (r.0, r.1)).unzip();
    sqlx::query(
        "DELETE FROM confirmation_outbox o USING unnest($2::bigint[], $3::uuid[]) AS d(reader_id, list_id)
         WHERE o.tenant_id = $1 AND o.reader_id = d.reader_id AND o.list_id = d.list_id",
    )
    .bind(tenant)
    .bind(&readers)
    .bind(&lists)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    match failed {
        Some(e) => Err(e),
        None => Ok(queued),
    }
}

/// A reader who left everything and now opts in again is active again.
async fn rejoin(tx: &mut Tx, tenant: TenantId, reader: i64, email: &str) -> Result<()> {
    sqlx::query("UPDATE readers SET status = 'active', updated_at = now() WHERE tenant_id = $1 AND id = $2 AND status = 'unsubscribed'")
        .bind(tenant)
        .bind(reader)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "DELETE FROM suppressions WHERE tenant_id = $1 AND email_lower = lower($2) AND reason = 'unsubscribed_all'",
    )
    .bind(tenant)
    .bind(email)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn confirmation_mail(to: &Email, workspace: &str, lists: &[String], link: &str) -> OutgoingMail {
    let list_text = lists.join(", ");
    OutgoingMail {
        to: to.to_string(),
        subject: format!("Please confirm your subscription: {}", crate::sending::mail::subject_name(workspace)),
        text: format!(
            "Please confirm that you want to receive {list_text} from {workspace}.\n\nConfirm: {link}\n\n\
             The link works for {CONFIRMATION_VALID_HOURS} hours. If you did not ask for this, ignore this email and nothing will happen."
        ),
        html: format!(
            "<div style=\"font-family:sans-serif;max-width:520px\"><p>Please confirm that you want to receive <strong>{}</strong> from <strong>{}</strong>.</p>\
             <p><a href=\"{}\" style=\"display:inline-block;background:#4f46e5;color:#fff;padding:10px 18px;border-radius:6px;text-decoration:none\">Confirm subscription</a></p>\
             <p style=\"color:#64748b;font-size:13px\">The link works for {CONFIRMATION_VALID_HOURS} hours. If you did not ask for this, ignore this email and nothing will happen.</p></div>",
            escape_html(&list_text),
            escape_html(workspace),
            escape_html(link)
        ),
        ..Default::default()
    }
}

/// What a confirmation link would confirm (shown before the reader presses the button, so mail
/// scanners that prefetch links confirm nothing).
#[derive(Clone, Debug, Serialize)]
pub struct ConfirmPreview {
    /// Whose page it is (its brand dresses it); not shown.
    #[serde(skip)]
    pub tenant: TenantId,
    pub workspace: String,
    pub email: String,
    pub lists: Vec<String>,
}

#[tracing::instrument(skip_all)]
pub async fn confirm_preview(db: &Db, signer: &Signer, token: &str) -> Result<ConfirmPreview> {
    let claim: ConfirmClaim = signer.verify(CONFIRM_PURPOSE, token)?;
    let ws = crate::workspaces::get(db, claim.t).await?;
    let mut tx = db.tenant_tx(claim.t).await?;
    let reader = super::aliases::current_id(&mut tx, claim.t, claim.r).await?;
    let email: String = sqlx::query_scalar("SELECT email FROM readers WHERE tenant_id = $1 AND id = $2")
        .bind(claim.t)
        .bind(reader)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(Error::NotFound)?;
    let ids: Vec<ListId> = claim.l.iter().map(|(l, _)| *l).collect();
    let lists: Vec<String> =
        sqlx::query_scalar("SELECT name FROM lists WHERE tenant_id = $1 AND id = ANY($2) ORDER BY lower(name)")
            .bind(claim.t)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(ConfirmPreview { tenant: claim.t, workspace: ws.name, email, lists })
}

/// Confirms the subscriptions a link names. Single use: each (list, nonce) confirms once.
/// Returns the names of the lists confirmed now.
#[tracing::instrument(skip_all)]
pub async fn confirm(db: &Db, signer: &Signer, token: &str, origin: &Origin) -> Result<ConfirmPreview> {
    let claim: ConfirmClaim = signer.verify(CONFIRM_PURPOSE, token)?;
    let mut preview = confirm_preview(db, signer, token).await?;
    let mut tx = db.tenant_tx(claim.t).await?;
    // The link may name a reader since merged into another (the same mailbox): the pending
    // subscriptions moved with it.
    let (t, r) = (claim.t, super::aliases::current_id(&mut tx, claim.t, claim.r).await?);
    let mut confirmed = Vec::new();
    for (list, nonce) in &claim.l {
        // The resend window guards against unanswered confirmations: a click answered this one,
        // so a reader who leaves and asks again later gets their mail.
        let name: Option<String> = sqlx::query_scalar(
            "UPDATE subscriptions s SET status = 'confirmed', confirmed_at = now(), confirmation_nonce = NULL,
                                        confirmation_sent_at = NULL
             FROM lists l
             WHERE s.tenant_id = $1 AND s.list_id = $2 AND s.reader_id = $3 AND s.confirmation_nonce = $4
               AND s.status = 'unconfirmed' AND l.id = s.list_id
             RETURNING l.name",
        )
        .bind(t)
        .bind(list)
        .bind(r)
        .bind(nonce)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(name) = name {
            consent::record(&mut tx, t, r, Some(*list), "confirm", origin).await?;
            confirmed.push(name);
        }
    }
    if confirmed.is_empty() {
        return Err(Error::invalid("This confirmation link has already been used or was replaced by a newer one."));
    }
    // The name typed into the form, now that the inbox's owner asked for this: it fills an
    // empty name and never replaces one.
    if let Some(name) = claim.n.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        sqlx::query("UPDATE readers SET name = $3, updated_at = now() WHERE tenant_id = $1 AND id = $2 AND name = ''")
            .bind(t)
            .bind(r)
            .bind(name.chars().take(200).collect::<String>())
            .execute(&mut *tx)
            .await?;
    }
    rejoin(&mut tx, t, r, &preview.email).await?;
    tx.commit().await?;
    preview.lists = confirmed;
    Ok(preview)
}

/// What the unsubscribe page shows.
#[derive(Clone, Debug, Serialize)]
pub struct UnsubscribePage {
    /// Whose page it is (its brand dresses it); not shown.
    #[serde(skip)]
    pub tenant: TenantId,
    pub workspace: String,
    pub email: String,
    /// The list the message was sent for, if any: (id, name, still subscribed).
    pub list: Option<(ListId, String, bool)>,
    /// Public lists with whether the reader is subscribed (for the preference center).
    pub preferences: Vec<(ListId, String, bool)>,
    pub left_everything: bool,
}

#[tracing::instrument(skip_all)]
pub async fn unsubscribe_page(db: &Db, signer: &Signer, token: &str) -> Result<UnsubscribePage> {
    let claim: UnsubscribeClaim = signer.verify(UNSUBSCRIBE_PURPOSE, token)?;
    let ws = crate::workspaces::get(db, claim.t).await?;
    let mut tx = db.tenant_tx(claim.t).await?;
    let reader = super::aliases::current_id(&mut tx, claim.t, claim.r).await?;
    let (email, status): (String, ReaderStatus) =
        sqlx::query_as("SELECT email, status FROM readers WHERE tenant_id = $1 AND id = $2")
            .bind(claim.t)
            .bind(reader)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::NotFound)?;
    let rows: Vec<(ListId, String, Visibility, Option<SubscriptionStatus>)> = sqlx::query_as(
        "SELECT l.id, l.name, l.visibility, s.status FROM lists l
         LEFT JOIN subscriptions s ON s.list_id = l.id AND s.reader_id = $2
         WHERE l.tenant_id = $1 AND (l.visibility = 'public' OR l.id = $3) ORDER BY lower(l.name)",
    )
    .bind(claim.t)
    .bind(reader)
    .bind(claim.l)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let subscribed = |s: &Option<SubscriptionStatus>| s.is_some_and(SubscriptionStatus::is_on_list);
    let list = claim.l.and_then(|id| rows.iter().find(|r| r.0 == id)).map(|r| (r.0, r.1.clone(), subscribed(&r.3)));
    let preferences =
        rows.iter().filter(|r| r.2 == Visibility::Public).map(|r| (r.0, r.1.clone(), subscribed(&r.3))).collect();
    Ok(UnsubscribePage {
        tenant: claim.t,
        workspace: ws.name,
        email,
        list,
        preferences,
        left_everything: status == ReaderStatus::Unsubscribed,
    })
}

/// What an unsubscribe request asks for.
pub enum Leave {
    /// The list the message was for (RFC 8058 one-click uses this; with no list, everything).
    ThisList,
    Everything,
    /// Keep exactly these public lists (the preference center).
    Preferences(Vec<ListId>),
}

/// Applies an unsubscribe or preference change. Takes effect at once: the send engine re-checks
/// subscriptions and suppressions right before each message.
///
/// The link was mailed, so anyone who saw the message (or a member who previewed it, before
/// previews carried a dead link) may hold it: it can take the reader off lists, never put them
/// on. A list ticked in the preference center starts a pending subscription and mails a fresh
/// confirmation; only the reader's own click in that mail adds it, and a suppressed address is
/// not mailed at all.
#[tracing::instrument(skip_all)]
pub async fn leave(cx: &PublicContext<'_>, token: &str, what: Leave, origin: &Origin) -> Result<()> {
    let claim: UnsubscribeClaim = cx.signer.verify(UNSUBSCRIBE_PURPOSE, token)?;
    let t = claim.t;
    let mut tx = cx.db.tenant_tx(t).await?;
    // A link mailed before this reader was merged into another copy of the same mailbox names
    // the merged copy: it unsubscribes the reader it became.
    let r = super::aliases::current_id(&mut tx, t, claim.r).await?;
    let email: String = sqlx::query_scalar("SELECT email FROM readers WHERE tenant_id = $1 AND id = $2")
        .bind(t)
        .bind(r)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(Error::NotFound)?;
    let what = match (what, claim.l) {
        (Leave::ThisList, None) => Leave::Everything,
        (w, _) => w,
    };
    if let (Some(campaign), Leave::ThisList | Leave::Everything) = (claim.c, &what) {
        crate::events::record_unsubscribe(&mut tx, t, campaign, r, &origin.source).await?;
    }
    let mut to_confirm: Vec<(ListId, Uuid, String)> = Vec::new();
    match what {
        Leave::ThisList => {
            let list = claim.l.ok_or(Error::NotFound)?;
            unsubscribe_from(&mut tx, t, r, list, origin).await?;
        }
        Leave::Everything => leave_everything(&mut tx, t, r, &email, origin).await?,
        Leave::Preferences(keep) => {
            let public: Vec<(ListId, String, Option<SubscriptionStatus>)> = sqlx::query_as(
                "SELECT l.id, l.name, s.status FROM lists l
                 LEFT JOIN subscriptions s ON s.list_id = l.id AND s.reader_id = $2
                 WHERE l.tenant_id = $1 AND l.visibility = 'public'",
            )
            .bind(t)
            .bind(r)
            .fetch_all(&mut *tx)
            .await?;
            let suppressed = suppressions::is_suppressed(&mut tx, t, &email).await?;
            let mailable = suppressed.is_none_or(|why| why == suppressions::SuppressionReason::UnsubscribedAll);
            for (list, name, status) in public {
                let on = status.is_some_and(SubscriptionStatus::is_on_list);
                let want = keep.contains(&list);
                if on && !want {
                    unsubscribe_from(&mut tx, t, r, list, origin).await?;
                } else if !on
                    && want
                    && mailable
                    && let Some(nonce) = request_confirmation(&mut tx, t, r, list, origin).await?
                {
                    to_confirm.push((list, nonce, name));
                }
            }
        }
    }
    tx.commit().await?;
    if !to_confirm.is_empty() {
        let ws = crate::workspaces::get(cx.db, t).await?;
        let names: Vec<String> = to_confirm.iter().map(|(_, _, name)| name.clone()).collect();
        let pairs = to_confirm.into_iter().map(|(list, nonce, _)| (list, nonce)).collect();
        send_confirmation(cx, t, r, &Email::parse(&email)?, &ws.name, &names, pairs).await?;
    }
    Ok(())
}

/// Unsubscribes a reader from every list, marks them unsubscribed and suppresses the address
/// (an unsubscribe link's "everything", and a spam complaint).
pub(crate) async fn leave_everything(tx: &mut Tx, t: TenantId, r: i64, email: &str, origin: &Origin) -> Result<()> {
    let lists: Vec<ListId> = sqlx::query_scalar(
        "SELECT list_id FROM subscriptions WHERE tenant_id = $1 AND reader_id = $2 AND status <> 'unsubscribed'",
    )
    .bind(t)
    .bind(r)
    .fetch_all(&mut **tx)
    .await?;
    for list in lists {
        unsubscribe_from(tx, t, r, list, origin).await?;
    }
    sqlx::query("UPDATE readers SET status = 'unsubscribed', updated_at = now() WHERE tenant_id = $1 AND id = $2 AND status = 'active'")
        .bind(t)
        .bind(r)
        .execute(&mut **tx)
        .await?;
    suppressions::add_in(
        tx,
        t,
        email,
        crate::audience::suppressions::SuppressionReason::UnsubscribedAll,
        &origin.source,
    )
    .await?;
    consent::record(tx, t, r, None, "unsubscribe_all", origin).await?;
    Ok(())
}

pub(crate) async fn unsubscribe_from(tx: &mut Tx, t: TenantId, r: i64, list: ListId, origin: &Origin) -> Result<()> {
    let n = sqlx::query(
        "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now(), confirmation_nonce = NULL
         WHERE tenant_id = $1 AND list_id = $2 AND reader_id = $3 AND status <> 'unsubscribed'",
    )
    .bind(t)
    .bind(list)
    .bind(r)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if n > 0 {
        consent::record(tx, t, r, Some(list), "unsubscribe", origin).await?;
    }
    Ok(())
}
