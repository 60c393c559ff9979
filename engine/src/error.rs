//! The engine's one error type. Callers map it to a status and a user-facing message; the
//! `Unexpected` arm carries internal detail (SQL, I/O) that is logged and never shown to users.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input failed validation; the message is safe to show to the user.
    #[error("{0}")]
    Invalid(String),
    /// Not logged in, a bad password, a bad key: deliberately vague.
    #[error("not authenticated")]
    Unauthenticated,
    /// Logged in, but this role may not do this.
    #[error("you do not have permission to do that")]
    Forbidden,
    /// Missing, or belongs to another workspace (which must look the same).
    #[error("not found")]
    NotFound,
    /// A uniqueness rule; the message is safe to show.
    #[error("{0}")]
    Conflict(String),
    /// A rate limit was hit; the message is safe to show.
    #[error("too many attempts, try again in a minute")]
    RateLimited,
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Unexpected(anyhow::Error::new(e).context("database error"))
    }
}

/// True when `e` is a unique violation of the named constraint (or index).
pub(crate) fn is_unique_violation(e: &sqlx::Error, constraint: &str) -> bool {
    match e {
        sqlx::Error::Database(db) => db.code().as_deref() == Some("23505") && db.constraint() == Some(constraint),
        _ => false,
    }
}
