//! Account security: changing a password, resetting a forgotten one by mail, and the list of a
//! user's sessions with a way to end them.
//!
//! A reset link is a signed token ([`Signer`]) that expires after an hour and carries the user,
//! the reset generation it was issued under (a newer request supersedes it) and a fingerprint of
//! the password hash (the reset changes the hash, so the link works once). The request answers
//! the same whether or not the address has an account, and its mail counts against the
//! per-recipient limit of system mail, so "forgot password" cannot be used to mail-bomb someone.
//! A change or a reset ends the user's other sessions (a reset ends all of them).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::db::Db;
use crate::domain::UserId;
use crate::error::{Error, Result};
use crate::jobs::Jobs;
use crate::mail::OutgoingMail;
use crate::password;
use crate::tokens::Signer;

const RESET_PURPOSE: &str = "password-reset";
const RESET_VALID_SECONDS: i64 = 3600;

/// What a reset link is bound to: the hash it may replace (16 hex digits of its SHA-256).
fn fingerprint(password_hash: &str) -> String {
    hex::encode(Sha256::digest(password_hash.as_bytes()))[..16].to_string()
}

/// A session's public handle: the session id is the cookie's secret, so pages never show it.
fn handle(session_id: &str) -> String {
    hex::encode(Sha256::digest(session_id.as_bytes()))[..16].to_string()
}

/// Mails a reset link if `email` has an account; answers the same either way.
pub async fn request_password_reset(db: &Db, jobs: &Jobs, signer: &Signer, base_url: &str, email: &str) -> Result<()> {
    let row: Option<(UserId, String, i32, String)> = sqlx::query_as(
        "UPDATE users SET reset_generation = reset_generation + 1 WHERE lower(email) = lower($1)
         RETURNING id, password_hash, reset_generation, email",
    )
    .bind(email.trim())
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
    };
    // A refusal (the address had its share of such mail today) must look like success: telling
    // the asker would say the account exists.
    match jobs.enqueue_account_mail(mail).await {
        Ok(()) => Ok(()),
        Err(Error::Invalid(why)) => {
            tracing::warn!(%user, why, "password reset mail refused by the system-mail limit");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Sets a new password with a reset link and ends every session of the account.
pub async fn reset_password(db: &Db, signer: &Signer, token: &str, new_password: &str) -> Result<UserId> {
    let (user, generation, fp): (UserId, i32, String) = signer.verify(RESET_PURPOSE, token).map_err(|e| match e {
        Error::Invalid(_) => Error::Invalid("This reset link has expired. Ask for a new one.".into()),
        _ => Error::Invalid("This reset link is not valid. Ask for a new one.".into()),
    })?;
    let row: Option<(String, i32)> = sqlx::query_as("SELECT password_hash, reset_generation FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(db.pool())
        .await?;
    let Some((hash, current)) = row else {
        return Err(Error::Invalid("This reset link is not valid. Ask for a new one.".into()));
    };
    if fingerprint(&hash) != fp {
        return Err(Error::Invalid("This reset link has been used already. Ask for a new one if you need to.".into()));
    }
    if generation != current {
        return Err(Error::Invalid("A newer reset link has been sent since this one: use the latest.".into()));
    }
    password::check_rules(new_password)?;
    let new_hash = password::hash(new_password.to_string()).await?;
    // Conditional on the hash the link was made for: two uses at once cannot both succeed.
    let changed = sqlx::query(
        "UPDATE users SET password_hash = $3, reset_generation = reset_generation + 1
         WHERE id = $1 AND password_hash = $2",
    )
    .bind(user)
    .bind(&hash)
    .bind(new_hash)
    .execute(db.pool())
    .await?
    .rows_affected();
    if changed == 0 {
        return Err(Error::Invalid("This reset link has been used already. Ask for a new one if you need to.".into()));
    }
    end_sessions(db, user, None).await?;
    Ok(user)
}

/// Changes the password of a logged-in user, who proves it with the current one; every other
/// session of the account ends.
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
        return Err(Error::Invalid("The current password is not right.".into()));
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

/// Ends the user's sessions, all or all but `except` (a session id). Returns how many ended.
pub async fn end_sessions(db: &Db, user: UserId, except: Option<&str>) -> Result<u64> {
    Ok(sqlx::query("DELETE FROM sessions WHERE data ->> 'user_id' = $1 AND ($2::text IS NULL OR id <> $2)")
        .bind(user.to_string())
        .bind(except)
        .execute(db.pool())
        .await?
        .rows_affected())
}

/// One of a user's sessions as the sessions page shows it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionView {
    /// Not the session id: [`handle`] of it.
    pub handle: String,
    pub device: String,
    pub ip: String,
    pub started_at: Option<DateTime<Utc>>,
    pub last_seen: Option<DateTime<Utc>>,
    pub current: bool,
}

pub async fn list_sessions(db: &Db, user: UserId, this_session: &str) -> Result<Vec<SessionView>> {
    #[allow(clippy::type_complexity)]
    let rows: Vec<(String, Option<String>, Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT id, data ->> 'ua', data ->> 'ip', data ->> 'started', data ->> 'seen' FROM sessions
         WHERE data ->> 'user_id' = $1 AND expiry_date > now()",
    )
    .bind(user.to_string())
    .fetch_all(db.pool())
    .await?;
    let time = |s: Option<String>| s.and_then(|s| DateTime::parse_from_rfc3339(&s).ok()).map(|t| t.with_timezone(&Utc));
    let mut list: Vec<SessionView> = rows
        .into_iter()
        .map(|(id, ua, ip, started, seen)| SessionView {
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
