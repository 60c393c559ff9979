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

/// Creates an account. An address already taken is a `Conflict` whose message does not confirm
/// that the account exists beyond what sign-up inherently reveals; callers that must not reveal
/// it (the public sign-up form) map it to the same answer as success-with-verification.
#[tracing::instrument(skip_all)]
pub async fn create_user(db: &Db, email: &Email, name: &str, pw: &str) -> Result<UserId> {
    password::check_rules(pw)?;
    let name = name.trim();
    if name.chars().count() > 100 {
        return Err(Error::invalid("The name can have at most 100 characters."));
    }
    let hash = password::hash(pw.to_string()).await?;
    let id = UserId::new();
    let res = sqlx::query("INSERT INTO users (id, email, name, password_hash) VALUES ($1, $2, $3, $4)")
        .bind(id)
        .bind(email.as_str())
        .bind(name)
        .bind(hash)
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

pub async fn get_user(db: &Db, id: UserId) -> Result<User> {
    sqlx::query_as("SELECT id, email, name, email_verified_at IS NOT NULL AS email_verified FROM users WHERE id = $1")
        .bind(id)
        .fetch_optional(db.pool())
        .await?
        .ok_or(Error::NotFound)
}

pub async fn find_by_email(db: &Db, email: &str) -> Result<Option<User>> {
    Ok(sqlx::query_as("SELECT id, email, name, email_verified_at IS NOT NULL AS email_verified FROM users\n         WHERE lower(email) = lower($1)")
        .bind(crate::domain::Email::key(email))
        .fetch_optional(db.pool())
        .await?)
}
