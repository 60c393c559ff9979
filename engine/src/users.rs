//! Accounts: sign-up and password login. Accounts are global; workspaces are joined through
//! memberships.

use serde::Serialize;

use crate::domain::{Email, UserId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::Db;
use crate::infra::password;

#[derive(Clone, Debug, Serialize, sqlx::FromRow)]
pub struct User {
    pub id: UserId,
    pub email: String,
    pub name: String,
    /// The address was confirmed with the link mailed at sign-up (see `accounts`).
    pub email_verified: bool,
}

/// Whether whoever creates an account has shown they read the address's mail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Address {
    /// Opened a link mailed to it (sign-up), or an operator vouches for it (`herald admin`).
    Confirmed,
    /// Nobody has shown it yet: the account must confirm it before it can send or join.
    Unconfirmed,
}

/// A display name as stored: trimmed, at most 100 characters.
pub fn check_name(name: &str) -> Result<&str> {
    let name = name.trim();
    if name.chars().count() > 100 {
        return Err(Error::invalid("The name can have at most 100 characters."));
    }
    Ok(name)
}

/// Creates an account. An address already taken is a `Conflict`: only callers that have shown
/// the address is theirs may call this where strangers can see the answer (the public sign-up
/// form mails a link first, see `accounts::start_signup`, so it never tells who has an account).
#[tracing::instrument(skip_all)]
pub async fn create_user(db: &Db, email: &Email, name: &str, pw: &str, address: Address) -> Result<UserId> {
    password::check_rules(pw)?;
    let name = check_name(name)?;
    let hash = password::hash(pw.to_string()).await?;
    let id = UserId::new();
    let res = sqlx::query(
        "INSERT INTO users (id, email, name, password_hash, email_verified_at)
         VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END)",
    )
    .bind(id)
    .bind(email.as_str())
    .bind(name)
    .bind(hash)
    .bind(address == Address::Confirmed)
    .execute(db.pool())
    .await;
    match res {
        Ok(_) => Ok(id),
        Err(e) if is_unique_violation(&e, "users_email_lower_key") => {
            Err(Error::Conflict("An account with this email already exists. Try logging in.".into()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Checks an email and password. Unknown email and wrong password are the same
/// `Unauthenticated`, and take the same time.
#[tracing::instrument(skip_all)]
pub async fn authenticate(db: &Db, email: &str, pw: &str) -> Result<UserId> {
    let row: Option<(UserId, String)> =
        sqlx::query_as("SELECT id, password_hash FROM users WHERE lower(email) = lower($1)")
            .bind(crate::domain::Email::key(email))
            .fetch_optional(db.pool())
            .await?;
    let (id, hash) = match row {
        Some((id, hash)) => (Some(id), Some(hash)),
        None => (None, None),
    };
    let ok = password::verify(pw.to_string(), hash).await?;
    match id {
        Some(id) if ok => Ok(id),
        _ => Err(Error::Unauthenticated),
    }
}

#[tracing::instrument(skip_all)]
pub async fn get_user(db: &Db, id: UserId) -> Result<User> {
    sqlx::query_as("SELECT id, email, name, email_verified_at IS NOT NULL AS email_verified FROM users WHERE id = $1")
        .bind(id)
        .fetch_optional(db.pool())
        .await?
        .ok_or(Error::NotFound)
}

#[tracing::instrument(skip_all)]
pub async fn find_by_email(db: &Db, email: &str) -> Result<Option<User>> {
    Ok(sqlx::query_as("SELECT id, email, name, email_verified_at IS NOT NULL AS email_verified FROM users\n         WHERE lower(email) = lower($1)")
        .bind(crate::domain::Email::key(email))
        .fetch_optional(db.pool())
        .await?)
}
