//! The engine's one error type. Callers map it to a status and a user-facing message; the
//! `Unexpected` arm carries internal detail (SQL, I/O) that is logged and never shown to users.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input failed validation, keyed by field; the messages are safe to show to the user.
    #[error("{0}")]
    Invalid(Invalid),
    /// Not logged in, a bad password, a bad key: deliberately vague.
    #[error("not authenticated")]
    Unauthenticated,
    /// Logged in, but this role may not do this.
    #[error("you do not have permission to do that")]
    Forbidden,
    /// The role allows it, but the account must do something first (confirm its address, turn
    /// on two-factor); the message says what, and is safe to show.
    #[error("{0}")]
    Refused(String),
    /// Missing, or belongs to another workspace (which must look the same).
    #[error("not found")]
    NotFound,
    /// A uniqueness rule; the message is safe to show.
    #[error("{0}")]
    Conflict(String),
    /// A rate limit was hit; the message is safe to show.
    #[error("too many attempts, try again in a minute")]
    RateLimited,
    /// Too much is running or was asked for lately (renders, previews); the message is safe to
    /// show, and the caller should answer 429 with `Retry-After`.
    #[error("{message}")]
    Busy { message: String, retry_after_secs: u64 },
    /// Something Herald stores into cannot be reached (the media bucket); the message is safe
    /// to show, and the caller should answer 503 with `Retry-After`.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use herald_types::Invalid;

impl Error {
    /// Input failed validation as a whole (no one field).
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(Invalid::new(message))
    }
}

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        Error::Invalid(e)
    }
}

impl From<herald_types::Forbidden> for Error {
    fn from(_: herald_types::Forbidden) -> Self {
        Error::Forbidden
    }
}

/// An id that does not parse names nothing: the same answer as a missing row.
impl From<herald_types::BadId> for Error {
    fn from(_: herald_types::BadId) -> Self {
        Error::NotFound
    }
}

/// Postgres's SQLSTATE for a statement cancelled by `statement_timeout`.
const QUERY_CANCELED: &str = "57014";

/// A failed query names its use case: every use case is a `#[tracing::instrument]` span, and the
/// conversion that `?` makes runs inside it, so the span's module and function
/// (`herald_engine::audience::lists::create`) go into the error's context without a
/// `.context(…)` at every `?`. Outside any span (or with no subscriber) it is "database error".
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        // A statement that ran past its bound (`infra::db::interactive`): the person waiting is
        // told so plainly, and Postgres's own text stays in the log.
        if e.as_database_error().and_then(|d| d.code()).as_deref() == Some(QUERY_CANCELED) {
            tracing::warn!(error = %e, "a statement ran past its time bound");
            return Error::Unavailable(
                "This took longer than Herald allows for one request. Narrow it down (fewer conditions, a shorter period) or try again in a moment.".into(),
            );
        }
        let what = tracing::Span::current()
            .metadata()
            .map(|m| format!("database error in {}::{}", m.target(), m.name()))
            .unwrap_or_else(|| "database error".to_string());
        Error::Unexpected(anyhow::Error::new(e).context(what))
    }
}

/// Names the use case an unexpected failure happened in, so the log says more than "database
/// error": `lists::create(…).await.context("creating a list")`. Errors meant for the user
/// (invalid, not found, conflict…) pass through unchanged, and the underlying error can still be
/// told apart (`is_connection_lost` looks through the added context).
pub trait Context<T> {
    fn context(self, what: &'static str) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: &'static str) -> Result<T> {
        self.map_err(|e| match e.into() {
            Error::Unexpected(e) => Error::Unexpected(e.context(what)),
            other => other,
        })
    }
}

/// True when `e` is a unique violation of the named constraint (or index).
pub(crate) fn is_unique_violation(e: &sqlx::Error, constraint: &str) -> bool {
    match e {
        sqlx::Error::Database(db) => db.code().as_deref() == Some("23505") && db.constraint() == Some(constraint),
        _ => false,
    }
}

impl Error {
    /// The database could not be reached, or dropped the connection (a restart, a terminated
    /// backend, a full pool): the same write may succeed if tried again.
    pub fn is_connection_lost(&self) -> bool {
        let Error::Unexpected(e) = self else { return false };
        e.downcast_ref::<sqlx::Error>().is_some_and(connection_lost)
    }
}

/// True when `e` says the database could not be reached or dropped the connection, not that the
/// statement was wrong: see [`Error::is_connection_lost`].
pub fn connection_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // Class 08 (connection exception), 57P01-57P03 (admin shutdown, crash shutdown,
        // cannot connect now), 40001/40P01 (serialization, deadlock: safe to retry too),
        // 57014 (statement cancelled: a timeout or an operator), 53300 (too many
        // connections) and 25006 (a read-only transaction: connected to a standby during a
        // failover). Each says nothing about the write itself, which may land next time.
        sqlx::Error::Database(db) => db.code().is_some_and(|c| {
            c.starts_with("08")
                || matches!(c.as_ref(), "57P01" | "57P02" | "57P03" | "40001" | "40P01" | "57014" | "53300" | "25006")
        }),
        _ => false,
    }
}

/// How long a worker keeps retrying a write it must not lose (an outcome it knows) before it
/// gives up and leaves the row to the reaper.
pub const PERSIST_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// Runs `write` until it succeeds, retrying with backoff (50 ms doubling to 1 s) while the
/// database is unreachable, for at most [`PERSIST_FOR`]. Other errors return at once. Every
/// write passed here must be idempotent (the send engine's are conditional on a lease token
/// and a status).
pub async fn persist<T, F, Fut>(what: &str, mut write: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let started = std::time::Instant::now();
    let mut delay = std::time::Duration::from_millis(50);
    loop {
        match write().await {
            Err(e) if e.is_connection_lost() && started.elapsed() < PERSIST_FOR => {
                tracing::warn!(error = %e, "{what}: database unreachable, retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(1));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod context_tests {
    use super::{Context, Error};

    #[test]
    fn a_failed_query_names_the_use_case_it_ran_in() {
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("create");
            let _in = span.enter();
            let e = Error::from(sqlx::Error::PoolTimedOut);
            let text = format!("{e:#}");
            assert!(text.starts_with("database error in herald_engine::error::context_tests::create: "), "{text}");
        });
        let outside = format!("{:#}", Error::from(sqlx::Error::PoolTimedOut));
        assert!(outside.starts_with("database error: "), "{outside}");
    }

    #[test]
    fn context_names_the_use_case_of_unexpected_errors_only() {
        let lost: Result<(), sqlx::Error> = Err(sqlx::Error::PoolTimedOut);
        let e = lost.context("creating a list").expect_err("an error");
        assert!(format!("{e:#}").starts_with("creating a list"), "{e:#}");
        assert!(e.is_connection_lost(), "the sqlx error is still found under the context");
        let missing: Result<(), Error> = Err(Error::NotFound);
        assert!(matches!(missing.context("x"), Err(Error::NotFound)));
    }
}
