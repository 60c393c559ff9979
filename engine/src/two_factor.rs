//! Two-factor login with TOTP (RFC 6238: six digits, 30-second steps, SHA-1, which is what every
//! authenticator app reads from an `otpauth://` QR code), with ten single-use recovery codes.
//!
//! - Enrolment shows a new secret (a QR code rendered here as SVG, and the base32 text) and keeps
//!   it sealed in `totp_pending_sealed` until a code from it is confirmed; only then is it the
//!   account's secret, and only then are the recovery codes made (shown once, stored hashed).
//! - A code is accepted from the previous, current or next step (clock drift), once: the step of
//!   the last accepted code is stored and a code of that step or an older one is refused, so a
//!   code seen over a shoulder cannot be replayed.
//! - Five wrong codes in a row lock the second step for five minutes, whatever the caller's IP.
//! - Every check takes `now`, so the tests can move the clock.

use chrono::{DateTime, TimeDelta, Utc};
use rand::Rng;
use serde::Serialize;
use sha2::{Digest, Sha256};
use totp_rs::{Algorithm, TOTP};

use crate::domain::{Role, TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::infra::password;
use crate::infra::sealing;
use crate::infra::tokens::Signer;
use crate::workspaces::TeamRule;

const ISSUER: &str = "Herald";
const STEP_SECONDS: u64 = 30;
const DIGITS: usize = 6;
const SECRET_BYTES: usize = 20;
const RECOVERY_CODES: usize = 10;
const MAX_FAILURES: i32 = 5;
const LOCK: TimeDelta = TimeDelta::minutes(5);

fn totp(secret: Vec<u8>, account: &str) -> Result<TOTP> {
    // Skew 0: this module walks the neighbouring steps itself, to know which one matched.
    TOTP::new(Algorithm::SHA1, DIGITS, 0, STEP_SECONDS, secret, Some(ISSUER.into()), account.into())
        .map_err(|e| Error::Unexpected(anyhow::anyhow!("TOTP parameters refused: {e:?}")))
}

fn step_of(now: DateTime<Utc>) -> i64 {
    now.timestamp().div_euclid(STEP_SECONDS as i64)
}

/// The code an authenticator shows for `secret_base32` at `now` (for tests and the CLI's checks).
pub fn code_at(secret_base32: &str, now: DateTime<Utc>) -> Result<String> {
    let secret = totp_rs::Secret::Encoded(secret_base32.to_string())
        .to_bytes()
        .map_err(|_| Error::invalid("That is not a base32 secret."))?;
    Ok(totp(secret, "")?.generate(now.timestamp().max(0) as u64))
}

/// The step in `last_step + 1 ..= now + 1` whose code is `code`, if any.
fn matching_step(secret: &[u8], code: &str, now: DateTime<Utc>, last_step: i64) -> Result<Option<i64>> {
    let t = totp(secret.to_vec(), "")?;
    let current = step_of(now);
    for step in [current - 1, current, current + 1] {
        if step > last_step && step >= 0 && t.generate(step as u64 * STEP_SECONDS) == code {
            return Ok(Some(step));
        }
    }
    Ok(None)
}

fn recovery_hash(code: &str) -> String {
    let normal: String = code.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_lowercase();
    hex::encode(Sha256::digest(normal.as_bytes()))
}

/// `abcde-fghij`: 50 random bits from an alphabet without look-alikes.
fn new_recovery_code() -> String {
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
    let mut rng = rand::thread_rng();
    let mut code: String = (0..10).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char).collect();
    code.insert(5, '-');
    code
}

pub use herald_types::{TwoFactorEnrolment as Enrolment, TwoFactorStatus as Status};

#[tracing::instrument(skip_all)]
pub async fn status(db: &Db, user: UserId) -> Result<Status> {
    let (enabled_at, left): (Option<DateTime<Utc>>, i64) = sqlx::query_as(
        "SELECT totp_enabled_at,
                (SELECT count(*) FROM recovery_codes r WHERE r.user_id = u.id AND r.used_at IS NULL)
         FROM users u WHERE id = $1",
    )
    .bind(user)
    .fetch_optional(db.pool())
    .await?
    .ok_or(Error::Unauthenticated)?;
    Ok(Status { enabled_at, recovery_codes_left: left })
}

#[tracing::instrument(skip_all)]
pub async fn is_enabled(db: &Db, user: UserId) -> Result<bool> {
    Ok(status(db, user).await?.enabled_at.is_some())
}

/// Starts (or restarts) enrolment with a fresh secret. It needs the password (a stolen session
/// alone must not be able to tie the account to someone else's phone) and a confirmed address
/// (nor may someone who signed up with another person's address).
#[tracing::instrument(skip_all)]
pub async fn start_enrolment(db: &Db, signer: &Signer, user: UserId, current_password: &str) -> Result<Enrolment> {
    let (email, enabled, hash): (String, Option<DateTime<Utc>>, String) =
        sqlx::query_as("SELECT email, totp_enabled_at, password_hash FROM users WHERE id = $1")
            .bind(user)
            .fetch_optional(db.pool())
            .await?
            .ok_or(Error::Unauthenticated)?;
    if !password::verify(current_password.to_string(), Some(hash)).await? {
        return Err(Error::invalid("The password is not right."));
    }
    crate::accounts::require_verified_email(db, user).await?;
    if enabled.is_some() {
        return Err(Error::Conflict("Two-factor authentication is on already.".into()));
    }
    let mut secret = vec![0u8; SECRET_BYTES];
    rand::thread_rng().fill(&mut secret[..]);
    let t = totp(secret, &email)?;
    let secret_base32 = t.get_secret_base32();
    sqlx::query("UPDATE users SET totp_pending_sealed = $2 WHERE id = $1")
        .bind(user)
        .bind(sealing::seal(signer, &secret_base32))
        .execute(db.pool())
        .await?;
    let otpauth_url = t.get_url();
    let qr =
        qrcode::QrCode::new(otpauth_url.as_bytes()).map_err(|e| Error::Unexpected(anyhow::anyhow!("QR code: {e}")))?;
    let qr_svg = qr
        .render::<qrcode::render::svg::Color>()
        .min_dimensions(200, 200)
        .quiet_zone(true)
        .build()
        // The renderer starts with an XML declaration, which is not allowed inside HTML.
        .split_once("<svg")
        .map(|(_, rest)| format!("<svg role=\"img\" aria-label=\"QR code for your authenticator app\"{rest}"))
        .unwrap_or_default();
    Ok(Enrolment { secret_base32, otpauth_url, qr_svg })
}

fn open_secret(signer: &Signer, sealed: &str) -> Result<Vec<u8>> {
    let base32 = sealing::open(signer, sealed)?;
    totp_rs::Secret::Encoded(base32)
        .to_bytes()
        .map_err(|_| Error::Unexpected(anyhow::anyhow!("a stored TOTP secret is not base32")))
}

/// Confirms enrolment with a code from the new secret; turns two-factor on and returns the ten
/// recovery codes, which are never shown again.
#[tracing::instrument(skip_all)]
pub async fn confirm_enrolment(
    db: &Db,
    signer: &Signer,
    user: UserId,
    code: &str,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    let pending: Option<Option<String>> = sqlx::query_scalar("SELECT totp_pending_sealed FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(db.pool())
        .await?;
    let Some(sealed) = pending.ok_or(Error::Unauthenticated)? else {
        return Err(Error::invalid("Start again: show a new QR code and scan it."));
    };
    let secret = open_secret(signer, &sealed)?;
    let Some(step) = matching_step(&secret, code.trim(), now, 0)? else {
        return Err(Error::invalid(
            "That code does not match. Type the six digits your app shows now (check the phone's clock).",
        ));
    };
    let codes: Vec<String> = (0..RECOVERY_CODES).map(|_| new_recovery_code()).collect();
    let mut tx = db.begin().await?;
    let turned_on = sqlx::query(
        "UPDATE users SET totp_secret_sealed = totp_pending_sealed, totp_pending_sealed = NULL,
                totp_enabled_at = $3, totp_last_step = $4, totp_failures = 0, totp_locked_until = NULL
         WHERE id = $1 AND totp_pending_sealed = $2 AND totp_enabled_at IS NULL",
    )
    .bind(user)
    .bind(&sealed)
    .bind(now)
    .bind(step)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if turned_on == 0 {
        return Err(Error::Conflict("Two-factor authentication changed meanwhile. Reload the page.".into()));
    }
    sqlx::query("DELETE FROM recovery_codes WHERE user_id = $1").bind(user).execute(&mut *tx).await?;
    for code in &codes {
        sqlx::query("INSERT INTO recovery_codes (user_id, code_hash) VALUES ($1, $2)")
            .bind(user)
            .bind(recovery_hash(code))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(codes)
}

/// How a second factor was proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Proof {
    Code,
    RecoveryCode,
}

/// Checks a code from the authenticator, or a recovery code (which is then used up), for a
/// user who has two-factor on.
///
/// Every attempt is counted as a failure *before* it is checked, in one statement that also
/// refuses while the step is locked, and a right answer clears the count: so requests sent all
/// at once cannot each slip past the lock before the others are counted.
#[tracing::instrument(skip_all)]
pub async fn check(db: &Db, signer: &Signer, user: UserId, answer: &str, now: DateTime<Utc>) -> Result<Proof> {
    let claimed: Option<(Option<String>, i64)> = sqlx::query_as(
        "UPDATE users SET totp_failures = totp_failures + 1,
                totp_locked_until = CASE WHEN totp_failures + 1 >= $2 THEN $3 ELSE totp_locked_until END
         WHERE id = $1 AND (totp_locked_until IS NULL OR totp_locked_until <= $4)
         RETURNING totp_secret_sealed, totp_last_step",
    )
    .bind(user)
    .bind(MAX_FAILURES)
    .bind(now + LOCK)
    .bind(now)
    .fetch_optional(db.pool())
    .await?;
    let Some((sealed, last_step)) = claimed else {
        let exists: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM users WHERE id = $1").bind(user).fetch_optional(db.pool()).await?;
        return Err(if exists.is_some() { Error::RateLimited } else { Error::Unauthenticated });
    };
    let Some(sealed) = sealed else {
        return Err(Error::invalid("Two-factor authentication is not on for this account."));
    };
    let answer = answer.trim();
    let is_totp = answer.len() == DIGITS && answer.chars().all(|c| c.is_ascii_digit());
    let proof = if is_totp {
        let secret = open_secret(signer, &sealed)?;
        match matching_step(&secret, answer, now, last_step)? {
            // Conditional on the step only moving forward: two logins racing with one code
            // cannot both pass.
            Some(step) => {
                sqlx::query(
                    "UPDATE users SET totp_last_step = $2, totp_failures = 0, totp_locked_until = NULL
                 WHERE id = $1 AND totp_last_step < $2",
                )
                .bind(user)
                .bind(step)
                .execute(db.pool())
                .await?
                .rows_affected()
                    > 0
            }
            None => false,
        }
        .then_some(Proof::Code)
    } else {
        let used = sqlx::query(
            "UPDATE recovery_codes SET used_at = $3 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL",
        )
        .bind(user)
        .bind(recovery_hash(answer))
        .bind(now)
        .execute(db.pool())
        .await?
        .rows_affected();
        (used > 0).then_some(Proof::RecoveryCode)
    };
    match proof {
        Some(p) => {
            if p == Proof::RecoveryCode {
                sqlx::query("UPDATE users SET totp_failures = 0, totp_locked_until = NULL WHERE id = $1")
                    .bind(user)
                    .execute(db.pool())
                    .await?;
            }
            Ok(p)
        }
        // Counted already, when the attempt was claimed.
        None => Err(Error::invalid("That code is not right, or it has been used already. Try the next one.")),
    }
}

/// Turns two-factor off; needs the password and a code (or a recovery code). Refused while a
/// workspace the user belongs to requires it.
#[tracing::instrument(skip_all)]
pub async fn disable(
    db: &Db,
    signer: &Signer,
    user: UserId,
    current_password: &str,
    answer: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    let hash: Option<String> = sqlx::query_scalar("SELECT password_hash FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(db.pool())
        .await?;
    if !password::verify(current_password.to_string(), hash).await? {
        return Err(Error::invalid("The password is not right."));
    }
    let requiring: Vec<String> = requiring_workspaces(db, user).await?;
    if !requiring.is_empty() {
        return Err(Error::Refused(format!(
            "{} require two-factor authentication of every member: leave {} first, or ask an admin to lift the rule.",
            requiring.join(", "),
            if requiring.len() == 1 { "it" } else { "them" }
        )));
    }
    check(db, signer, user, answer, now).await?;
    let mut tx = db.begin().await?;
    sqlx::query(
        "UPDATE users SET totp_secret_sealed = NULL, totp_pending_sealed = NULL, totp_enabled_at = NULL,
                totp_failures = 0, totp_locked_until = NULL WHERE id = $1",
    )
    .bind(user)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM recovery_codes WHERE user_id = $1").bind(user).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Names of the user's workspaces that require two-factor of every member.
async fn requiring_workspaces(db: &Db, user: UserId) -> Result<Vec<String>> {
    let mut tx = db.user_tx(user).await?;
    let names = sqlx::query_scalar(
        "SELECT t.name FROM tenants t JOIN memberships m ON m.tenant_id = t.id
         WHERE m.user_id = $1 AND t.require_two_factor ORDER BY t.name",
    )
    .bind(user)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(names)
}

/// Whether the workspace requires two-factor of every member.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn workspace_requires(db: &Db, tenant: TenantId) -> Result<bool> {
    crate::workspaces::team_rule(db, tenant, TeamRule::TwoFactor).await
}

/// Turns the workspace rule on or off (owners and admins). Whoever turns it on must have
/// two-factor themselves, or they would lock themselves out on the next page.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn set_workspace_requirement(
    db: &Db,
    tenant: TenantId,
    actor: UserId,
    actor_role: Role,
    on: bool,
) -> Result<()> {
    actor_role.require(Role::Admin)?;
    if on && !is_enabled(db, actor).await? {
        return Err(Error::invalid("Turn on two-factor authentication for your own account first (Your account)."));
    }
    crate::workspaces::set_team_rule(db, tenant, actor_role, TeamRule::TwoFactor, on).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_rfc_6238_and_neighbouring_steps_only() -> anyhow::Result<()> {
        // RFC 6238 appendix B, SHA-1 secret "12345678901234567890", T = 59 s → 94287082 (8
        // digits); the six-digit code is its last six digits.
        let secret = b"12345678901234567890".to_vec();
        let at = |s: i64| DateTime::from_timestamp(s, 0).unwrap_or_default();
        assert_eq!(totp(secret.clone(), "")?.generate(59), "287082");
        assert_eq!(matching_step(&secret, "287082", at(59), 0)?, Some(1));
        assert_eq!(matching_step(&secret, "287082", at(89), 0)?, Some(1), "previous step accepted");
        assert_eq!(matching_step(&secret, "287082", at(29), 0)?, Some(1), "next step accepted");
        assert_eq!(matching_step(&secret, "287082", at(120), 0)?, None, "two steps late");
        assert_eq!(matching_step(&secret, "287082", at(59), 1)?, None, "a step used already");
        Ok(())
    }

    #[test]
    fn recovery_codes_are_random_and_forgiving_to_type() {
        let a = new_recovery_code();
        assert_eq!(a.len(), 11);
        assert_ne!(a, new_recovery_code());
        assert_eq!(recovery_hash(&a), recovery_hash(&format!(" {} ", a.to_uppercase().replace('-', ""))));
    }
}
