//! Account security: changing a password, resetting a forgotten one by mail, and the list of a
//! user's sessions with a way to end them.
//!
//! A reset link is a signed token ([`Signer`]) that expires after an hour and carries the user,
//! the reset generation it was issued under (a newer request supersedes it) and a fingerprint of
//! the password hash (the reset changes the hash, so the link works once). The request answers
//! the same whether or not the address has an account, and its mail counts against the
//! per-recipient limit of system mail, so "forgot password" cannot be used to mail-bomb someone.
//! A change or a reset ends the user's other sessions (a reset ends all of them).
//!
//! Sign-up starts with the address alone ([`start_signup`]): it mails a link, and the account is
//! made, with its password, only by whoever opens it ([`finish_signup`]). The form answers the
//! same whether or not the address has an account (an owner gets a "you have an account" mail
//! instead), so it cannot be used to find out who uses Herald, and nobody can make an account
//! at an address that is not theirs and wait for its owner (a pre-hijacked account).
//!
//! Accounts made another way without that proof (before sign-up worked like this) confirm their
//! address with a mailed link ([`send_verification`]). Until then they can set up their own
//! workspace, but not send a campaign, create an API key or accept an invite
//! ([`require_verified_email`]): an invite is bound to an address, and that binding means
//! nothing if anyone can claim anyone's address.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::UserId;
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::infra::password;
use crate::infra::tokens::Signer;
use crate::jobs::Jobs;
use crate::sending::mail::OutgoingMail;

const RESET_PURPOSE: &str = "password-reset";
const RESET_VALID_SECONDS: i64 = 3600;
const VERIFY_PURPOSE: &str = "verify-email";
const VERIFY_VALID_SECONDS: i64 = 3 * 24 * 3600;
const SIGNUP_PURPOSE: &str = "signup";
const SIGNUP_VALID_SECONDS: i64 = 24 * 3600;

/// What a sign-up link carries: the address it was mailed to, the name typed with it and the
/// page to open afterwards (an invite, say). Signed, not secret: it goes to that address only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignupClaim {
    pub email: String,
    pub name: String,
    pub next: String,
}

/// The first step of sign-up: mails `email` a link that finishes it, or, when the address has an
/// account already, a note saying so with links to log in and to reset the password. Callers
/// answer before this runs (it costs a look-up and a job more for one case than the other) and
/// say the same either way. A refusal by the per-recipient system-mail limit is logged, not
/// returned: it would say which case this was.
#[tracing::instrument(skip_all)]
pub async fn start_signup(
    db: &Db,
    jobs: &Jobs,
    signer: &Signer,
    base_url: &str,
    email: &crate::domain::Email,
    claim: &SignupClaim,
) -> Result<()> {
    let base = base_url.trim_end_matches('/');
    let existing = crate::users::find_by_email(db, email.as_str()).await?;
    let mail = match existing {
        None => {
            let link = format!("{base}/signup/finish?token={}", signup_token(signer, claim));
            OutgoingMail {
                to: email.as_str().to_string(),
                subject: "Finish creating your Herald account".into(),
                text: format!(
                    "Welcome to Herald. Choose a password to finish creating your account \
                     (the link works for 24 hours):\n{link}\n\nIf you did not sign up, ignore this email: \
                     no account is made until the link is opened."
                ),
                html: format!(
                    "<p>Welcome to Herald.</p><p><a href=\"{link}\">Choose a password to finish creating your \
                     account</a> (the link works for 24 hours).</p><p>If you did not sign up, ignore this email: \
                     no account is made until the link is opened.</p>"
                ),
                ..Default::default()
            }
        }
        Some(_) => OutgoingMail {
            to: email.as_str().to_string(),
            subject: "You already have a Herald account".into(),
            text: format!(
                "Someone (we hope you) tried to sign up for Herald with this address, which has an \
                 account already.\n\nLog in: {base}/login\nForgot your password? {base}/forgot-password\n\n\
                 If it was not you, ignore this email: nothing has changed."
            ),
            html: format!(
                "<p>Someone (we hope you) tried to sign up for Herald with this address, which has an \
                 account already.</p><p><a href=\"{base}/login\">Log in</a> or, if you forgot your password, \
                 <a href=\"{base}/forgot-password\">choose a new one</a>.</p>\
                 <p>If it was not you, ignore this email: nothing has changed.</p>"
            ),
            ..Default::default()
        },
    };
    match jobs.enqueue_account_mail(mail).await {
        Ok(()) => Ok(()),
        Err(Error::Invalid(why)) => {
            tracing::warn!(%why, "sign-up mail refused by the system-mail limit");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The token of a sign-up link, valid for 24 hours.
pub fn signup_token(signer: &Signer, claim: &SignupClaim) -> String {
    signer.sign(SIGNUP_PURPOSE, Some(Utc::now().timestamp() + SIGNUP_VALID_SECONDS), claim)
}

/// What a sign-up link says, checked: the page that finishes sign-up shows it before asking
/// for a password.
pub fn read_signup_link(signer: &Signer, token: &str) -> Result<SignupClaim> {
    signer.verify(SIGNUP_PURPOSE, token).map_err(|e| match e {
        Error::Invalid(_) => Error::invalid("This sign-up link has expired. Sign up again for a new one."),
        _ => Error::invalid("This sign-up link is not valid. Sign up again for a new one."),
    })
}

/// The second step of sign-up: whoever opened the mailed link chooses the password, and the
/// account is made with its address confirmed. A second use of the link finds the account made
/// and is a `Conflict` (only the address's owner sees it). Returns the account and the claim.
#[tracing::instrument(skip_all)]
pub async fn finish_signup(
    db: &Db,
    signer: &Signer,
    token: &str,
    name: &str,
    pw: &str,
) -> Result<(UserId, SignupClaim)> {
    let claim = read_signup_link(signer, token)?;
    let email = crate::domain::Email::parse(&claim.email)?;
    let user = crate::users::create_user(db, &email, name, pw, crate::users::Address::Confirmed).await?;
    Ok((user, claim))
}

/// What a reset link is bound to: the hash it may replace (16 hex digits of its SHA-256).
fn fingerprint(password_hash: &str) -> String {
    hex::encode(Sha256::digest(password_hash.as_bytes()))[..16].to_string()
}

/// A session's public handle: the session id is the cookie's secret, so pages never show it.
fn handle(session_id: &str) -> String {
    hex::encode(Sha256::digest(session_id.as_bytes()))[..16].to_string()
}

/// Mails a reset link if `email` has an account; answers the same either way.
#[tracing::instrument(skip_all)]
pub async fn request_password_reset(db: &Db, jobs: &Jobs, signer: &Signer, base_url: &str, email: &str) -> Result<()> {
    let row: Option<(UserId, String, i32, String)> = sqlx::query_as(
        "UPDATE users SET reset_generation = reset_generation + 1 WHERE lower(email) = lower($1)
         RETURNING id, password_hash, reset_generation, email",
    )
    .bind(crate::domain::Email::key(email))
    .fetch_optional(db.pool())
    .await?;
    let Some((user, hash, generation, address)) = row else {
        tracing::info!("password reset asked for an address without an account");
        return Ok(());
    };
    let expires = Utc::now().timestamp() + RESET_VALID_SECONDS;
    let token = signer.sign(RESET_PURPOSE, Some(expires), &(user, generation, fingerprint(&hash)));
    let link = format!("{}/reset-password?token={token}", base_url.trim_end_matches('/'));
    let mail = OutgoingMail {
        to: address,
        subject: "Reset your Herald password".into(),
        text: format!(
            "Someone (we hope you) asked to reset the password of your Herald account.\n\n\
             Choose a new password here (the link works once, for an hour):\n{link}\n\n\
             If it was not you, ignore this email: your password stays as it is."
        ),
        html: format!(
            "<p>Someone (we hope you) asked to reset the password of your Herald account.</p>\
             <p><a href=\"{link}\">Choose a new password</a> (the link works once, for an hour).</p>\
             <p>If it was not you, ignore this email: your password stays as it is.</p>"
        ),
        ..Default::default()
    };
    // A refusal (the address had its share of such mail today) must look like success: telling
    // the asker would say the account exists.
    match jobs.enqueue_account_mail(mail).await {
        Ok(()) => Ok(()),
        Err(Error::Invalid(why)) => {
            tracing::warn!(%user, %why, "password reset mail refused by the system-mail limit");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Mails `user` a link that confirms their address (at sign-up, and on "resend"). An address
/// already confirmed is a `Conflict`; the mail counts against the per-recipient system-mail
/// limit, whose refusal is passed on (the person asking owns the account).
#[tracing::instrument(skip_all)]
pub async fn send_verification(db: &Db, jobs: &Jobs, signer: &Signer, base_url: &str, user: UserId) -> Result<()> {
    let row: Option<(String, Option<DateTime<Utc>>)> =
        sqlx::query_as("SELECT email, email_verified_at FROM users WHERE id = $1")
            .bind(user)
            .fetch_optional(db.pool())
            .await?;
    let Some((address, verified)) = row else { return Err(Error::NotFound) };
    if verified.is_some() {
        return Err(Error::Conflict("Your address is confirmed already.".into()));
    }
    let expires = Utc::now().timestamp() + VERIFY_VALID_SECONDS;
    // Bound to the address as well as the account, so a link stops working if the address changes.
    let token = signer.sign(VERIFY_PURPOSE, Some(expires), &(user, address.to_lowercase()));
    let link = format!("{}/verify-email?token={token}", base_url.trim_end_matches('/'));
    let mail = OutgoingMail {
        to: address,
        subject: "Confirm your email address for Herald".into(),
        text: format!(
            "Welcome to Herald. Confirm that this address is yours (the link works for three days):\n{link}\n\n\
             Until you do, you can set up your workspace, but not send campaigns, create API keys or \
             join other workspaces.\n\nIf you did not sign up, ignore this email."
        ),
        html: format!(
            "<p>Welcome to Herald.</p><p><a href=\"{link}\">Confirm that this address is yours</a> \
             (the link works for three days).</p><p>Until you do, you can set up your workspace, but not \
             send campaigns, create API keys or join other workspaces.</p>\
             <p>If you did not sign up, ignore this email.</p>"
        ),
        ..Default::default()
    };
    jobs.enqueue_account_mail(mail).await
}

/// Confirms an address with the link from [`send_verification`]. A link works once: after it,
/// the address is confirmed and the link says so.
#[tracing::instrument(skip_all)]
pub async fn verify_email(db: &Db, signer: &Signer, token: &str) -> Result<UserId> {
    let (user, address): (UserId, String) = signer.verify(VERIFY_PURPOSE, token).map_err(|e| match e {
        Error::Invalid(_) => Error::invalid("This confirmation link has expired. Log in and ask for a new one."),
        _ => Error::invalid("This confirmation link is not valid."),
    })?;
    let row: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(
        "UPDATE users SET email_verified_at = coalesce(email_verified_at, now())
         WHERE id = $1 AND lower(email) = $2
         RETURNING (SELECT email_verified_at FROM users WHERE id = $1)",
    )
    .bind(user)
    .bind(&address)
    .fetch_optional(db.pool())
    .await?;
    match row {
        None => Err(Error::invalid("This confirmation link is not valid.")),
        Some(Some(_)) => Err(Error::Conflict("This link has been used already: your address is confirmed.".into())),
        Some(None) => Ok(user),
    }
}

/// What an operator's `herald admin verify-email` does: confirms an address without the mail.
#[tracing::instrument(skip_all)]
pub async fn mark_email_verified(db: &Db, email: &str) -> Result<UserId> {
    sqlx::query_scalar(
        "UPDATE users SET email_verified_at = coalesce(email_verified_at, now()) WHERE lower(email) = lower($1)
         RETURNING id",
    )
    .bind(crate::domain::Email::key(email))
    .fetch_optional(db.pool())
    .await?
    .ok_or(Error::NotFound)
}

/// The gate in front of sending a campaign, creating an API key and accepting an invite.
#[tracing::instrument(skip_all)]
pub async fn require_verified_email(db: &Db, user: UserId) -> Result<()> {
    let verified: Option<Option<DateTime<Utc>>> =
        sqlx::query_scalar("SELECT email_verified_at FROM users WHERE id = $1")
            .bind(user)
            .fetch_optional(db.pool())
            .await?;
    match verified {
        Some(Some(_)) => Ok(()),
        Some(None) => Err(Error::Refused(
            "Confirm your email address first: open the link we mailed you (or send a new one from the banner at the top).".into(),
        )),
        None => Err(Error::Unauthenticated),
    }
}

/// Sets a new password with a reset link and ends every session of the account.
#[tracing::instrument(skip_all)]
pub async fn reset_password(db: &Db, signer: &Signer, token: &str, new_password: &str) -> Result<UserId> {
    let (user, generation, fp): (UserId, i32, String) = signer.verify(RESET_PURPOSE, token).map_err(|e| match e {
        Error::Invalid(_) => Error::invalid("This reset link has expired. Ask for a new one."),
        _ => Error::invalid("This reset link is not valid. Ask for a new one."),
    })?;
    let row: Option<(String, i32)> = sqlx::query_as("SELECT password_hash, reset_generation FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(db.pool())
        .await?;
    let Some((hash, current)) = row else {
        return Err(Error::invalid("This reset link is not valid. Ask for a new one."));
    };
    if fingerprint(&hash) != fp {
        return Err(Error::invalid("This reset link has been used already. Ask for a new one if you need to."));
    }
    if generation != current {
        return Err(Error::invalid("A newer reset link has been sent since this one: use the latest."));
    }
    password::check_rules(new_password)?;
    let new_hash = password::hash(new_password.to_string()).await?;
    // Conditional on the hash the link was made for: two uses at once cannot both succeed.
    // The link was mailed to the address, so using it proves the mailbox. An account that never
    // proved it may have been made by a squatter who then turned on two-factor: the mailbox's
    // owner gets the account back without the squatter's second factor.
    let mut tx = db.begin().await?;
    let was_unconfirmed: Option<bool> = sqlx::query_scalar(
        "UPDATE users u SET password_hash = $3, reset_generation = reset_generation + 1,
                email_verified_at = coalesce(u.email_verified_at, now()),
                totp_secret_sealed = CASE WHEN old.unconfirmed THEN NULL ELSE u.totp_secret_sealed END,
                totp_pending_sealed = CASE WHEN old.unconfirmed THEN NULL ELSE u.totp_pending_sealed END,
                totp_enabled_at = CASE WHEN old.unconfirmed THEN NULL ELSE u.totp_enabled_at END
         FROM (SELECT email_verified_at IS NULL AS unconfirmed FROM users WHERE id = $1) old
         WHERE u.id = $1 AND u.password_hash = $2
         RETURNING old.unconfirmed",
    )
    .bind(user)
    .bind(&hash)
    .bind(new_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(was_unconfirmed) = was_unconfirmed else {
        return Err(Error::invalid("This reset link has been used already. Ask for a new one if you need to."));
    };
    if was_unconfirmed {
        sqlx::query("DELETE FROM recovery_codes WHERE user_id = $1").bind(user).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    end_sessions(db, user, None).await?;
    Ok(user)
}

/// Changes the password of a logged-in user, who proves it with the current one; every other
/// session of the account ends.
#[tracing::instrument(skip_all)]
pub async fn change_password(
    db: &Db,
    user: UserId,
    current: &str,
    new_password: &str,
    this_session: &str,
) -> Result<()> {
    let hash: Option<String> = sqlx::query_scalar("SELECT password_hash FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(db.pool())
        .await?;
    let Some(hash) = hash else { return Err(Error::Unauthenticated) };
    if !password::verify(current.to_string(), Some(hash.clone())).await? {
        return Err(Error::invalid("The current password is not right."));
    }
    password::check_rules(new_password)?;
    let new_hash = password::hash(new_password.to_string()).await?;
    sqlx::query("UPDATE users SET password_hash = $2, reset_generation = reset_generation + 1 WHERE id = $1")
        .bind(user)
        .bind(new_hash)
        .execute(db.pool())
        .await?;
    end_sessions(db, user, Some(this_session)).await?;
    Ok(())
}

/// Deletes an account, which needs its password. Workspaces where the user is the only member
/// are deleted with it (their names are returned); a workspace with other members whose only
/// owner is this user stops the deletion, as leaving it would (make someone else owner first).
#[tracing::instrument(skip_all)]
pub async fn delete_account(
    db: &Db,
    user: UserId,
    current_password: &str,
) -> Result<Vec<(crate::domain::TenantId, String)>> {
    let hash: Option<String> = sqlx::query_scalar("SELECT password_hash FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(db.pool())
        .await?;
    if hash.is_none() {
        return Err(Error::Unauthenticated);
    }
    if !password::verify(current_password.to_string(), hash).await? {
        return Err(Error::invalid("The password is not right."));
    }
    // One transaction over every workspace of the user (the tenant setting changes per
    // workspace), so nobody can join or be promoted between the check and the deletion.
    let mut tx = db.user_tx(user).await?;
    let owned: Vec<(crate::domain::TenantId, String)> = sqlx::query_as(
        "SELECT t.id, t.name FROM memberships m JOIN tenants t ON t.id = m.tenant_id
         WHERE m.user_id = $1 AND m.role = 'owner' ORDER BY t.name",
    )
    .bind(user)
    .fetch_all(&mut *tx)
    .await?;
    let mut alone_in = Vec::new();
    let mut only_owner_of = Vec::new();
    for (tenant, name) in owned {
        sqlx::query("SELECT set_config('app.tenant_id', $1, true)").bind(tenant.to_string()).execute(&mut *tx).await?;
        // A new membership's foreign key takes a share lock on this row: nobody can join
        // between this count and the deletion.
        sqlx::query("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE").bind(tenant).execute(&mut *tx).await?;
        let (members, owners): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE role = 'owner')
             FROM (SELECT role FROM memberships WHERE tenant_id = $1 FOR UPDATE) m",
        )
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
        if members == 1 {
            alone_in.push((tenant, name));
        } else if owners == 1 {
            only_owner_of.push(name);
        }
    }
    if !only_owner_of.is_empty() {
        return Err(Error::invalid(format!(
            "You are the only owner of {}, which other people use: make one of them owner first.",
            only_owner_of.join(", ")
        )));
    }
    for (tenant, _) in &alone_in {
        sqlx::query("SELECT set_config('app.tenant_id', $1, true)").bind(tenant.to_string()).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM tenants WHERE id = $1").bind(tenant).execute(&mut *tx).await?;
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM sessions WHERE {SESSIONS_OF_USER}")))
        .bind(user.to_string())
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM users WHERE id = $1").bind(user).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(alone_in)
}

/// The sessions of user `$1`: logged in, or past the password and waiting for the second factor
/// (`herald_app::ssr::start_second_factor` keeps `[user, started, next]` there), so a reset or a
/// deletion also ends a login that is half done.
const SESSIONS_OF_USER: &str = "(data ->> 'user_id' = $1 OR data -> 'pending_2fa' ->> 0 = $1)";

/// Ends the user's sessions, all or all but `except` (a session id). Returns how many ended.
#[tracing::instrument(skip_all)]
pub async fn end_sessions(db: &Db, user: UserId, except: Option<&str>) -> Result<u64> {
    Ok(sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM sessions WHERE {SESSIONS_OF_USER} AND ($2::text IS NULL OR id <> $2)"
    )))
    .bind(user.to_string())
    .bind(except)
    .execute(db.pool())
    .await?
    .rows_affected())
}

/// One of a user's sessions as the sessions page shows it.
pub use herald_types::LoginSession;

#[tracing::instrument(skip_all)]
pub async fn list_sessions(db: &Db, user: UserId, this_session: &str) -> Result<Vec<LoginSession>> {
    #[allow(clippy::type_complexity)]
    let rows: Vec<(String, Option<String>, Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT id, data ->> 'ua', data ->> 'ip', data ->> 'started', data ->> 'seen' FROM sessions
         WHERE data ->> 'user_id' = $1 AND expiry_date > now()",
    )
    .bind(user.to_string())
    .fetch_all(db.pool())
    .await?;
    let time = |s: Option<String>| s.and_then(|s| DateTime::parse_from_rfc3339(&s).ok()).map(|t| t.with_timezone(&Utc));
    let mut list: Vec<LoginSession> = rows
        .into_iter()
        .map(|(id, ua, ip, started, seen)| LoginSession {
            handle: handle(&id),
            device: device(ua.as_deref().unwrap_or_default()),
            ip: ip.unwrap_or_else(|| "unknown".into()),
            started_at: time(started),
            last_seen: time(seen),
            current: id == this_session,
        })
        .collect();
    list.sort_by(|a, b| b.current.cmp(&a.current).then(b.last_seen.cmp(&a.last_seen)));
    Ok(list)
}

/// Ends one of the user's sessions by its handle.
#[tracing::instrument(skip_all)]
pub async fn end_session(db: &Db, user: UserId, session_handle: &str) -> Result<()> {
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM sessions WHERE data ->> 'user_id' = $1")
        .bind(user.to_string())
        .fetch_all(db.pool())
        .await?;
    let Some(id) = ids.into_iter().find(|id| handle(id) == session_handle) else { return Err(Error::NotFound) };
    sqlx::query("DELETE FROM sessions WHERE id = $1 AND data ->> 'user_id' = $2")
        .bind(id)
        .bind(user.to_string())
        .execute(db.pool())
        .await?;
    Ok(())
}

/// "Firefox on Linux" from a User-Agent header; enough to recognise one's own devices.
pub fn device(user_agent: &str) -> String {
    let ua = user_agent;
    let browser = if ua.contains("Edg/") {
        "Edge"
    } else if ua.contains("Firefox/") {
        "Firefox"
    } else if ua.contains("Chrome/") || ua.contains("Chromium/") {
        "Chrome"
    } else if ua.contains("Safari/") {
        "Safari"
    } else if ua.is_empty() {
        return "Unknown device".into();
    } else {
        "A browser"
    };
    let os = if ua.contains("Android") {
        "Android"
    } else if ua.contains("iPhone") || ua.contains("iPad") {
        "iOS"
    } else if ua.contains("Windows") {
        "Windows"
    } else if ua.contains("Mac OS X") || ua.contains("Macintosh") {
        "macOS"
    } else if ua.contains("Linux") || ua.contains("X11") {
        "Linux"
    } else {
        return browser.to_string();
    };
    format!("{browser} on {os}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_named_from_the_user_agent() {
        let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0";
        let edge = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 Edg/131.0";
        let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
        assert_eq!(device(firefox), "Firefox on Linux");
        assert_eq!(device(edge), "Edge on Windows");
        assert_eq!(device(iphone), "Safari on iOS");
        assert_eq!(device("curl/8.0"), "A browser");
        assert_eq!(device(""), "Unknown device");
    }

    #[test]
    fn handles_hide_session_ids() {
        assert_eq!(handle("abc").len(), 16);
        assert_ne!(handle("abc"), handle("abd"));
        assert_ne!(fingerprint("h1"), fingerprint("h2"));
    }
}
