//! The one error type every server function returns. It carries only text that is safe to show:
//! internal failures (database, I/O) are logged on the server and arrive as `Internal`.

use herald_types::Invalid;
use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    /// What to fix, keyed by field: forms show each message beside its field.
    #[error("{0}")]
    Invalid(Invalid),
    #[error("{0}")]
    Conflict(String),
    #[error("Please log in.")]
    Unauthenticated,
    #[error("You do not have permission to do that.")]
    Forbidden,
    /// Allowed by the role, but the account must do something first; the text says what.
    #[error("{0}")]
    Refused(String),
    #[error("Not found.")]
    NotFound,
    #[error("Too many attempts. Wait a minute and try again.")]
    RateLimited,
    /// Too much at once (renders, previews): the text says what, `retry_after` in seconds.
    #[error("{message}")]
    Busy { message: String, retry_after: u64 },
    #[error("Something went wrong on our side. Please try again.")]
    Internal,
    #[error("Could not reach Herald. Check your connection and try again.")]
    Network,
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            ServerFnErrorErr::Request(_) | ServerFnErrorErr::Response(_) => AppError::Network,
            // A malformed argument (a forged id, a value outside its set): 422, never a 500.
            ServerFnErrorErr::Args(_) | ServerFnErrorErr::MissingArg(_) => {
                AppError::invalid("Some fields are missing or malformed.").respond()
            }
            // On the server this is a request body that does not decode (a JSON-encoded
            // function's arguments): the caller's mistake, not ours. In the browser it is an
            // answer that does not decode, which stays an internal error below.
            #[cfg(feature = "ssr")]
            ServerFnErrorErr::Deserialization(_) => {
                AppError::invalid("Some fields are missing or malformed.").respond()
            }
            other => {
                #[cfg(feature = "ssr")]
                tracing::error!(error = %other, "server function plumbing failed");
                let _ = other;
                AppError::Internal
            }
        }
    }
}

impl AppError {
    /// A problem with the request as a whole.
    pub fn invalid(message: impl Into<String>) -> Self {
        AppError::Invalid(Invalid::new(message))
    }
}

// Errors of the shared types, raised by server functions with `?`: like the engine's, they set
// the response status (see `respond`).
impl From<Invalid> for AppError {
    fn from(e: Invalid) -> Self {
        AppError::Invalid(e).respond()
    }
}

/// An id that does not parse names nothing.
impl From<herald_types::BadId> for AppError {
    fn from(_: herald_types::BadId) -> Self {
        AppError::NotFound.respond()
    }
}

impl From<herald_types::Forbidden> for AppError {
    fn from(_: herald_types::Forbidden) -> Self {
        AppError::Forbidden.respond()
    }
}

#[cfg(feature = "ssr")]
impl AppError {
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode;
        match self {
            AppError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Unauthenticated => StatusCode::UNAUTHORIZED,
            AppError::Forbidden | AppError::Refused(_) => StatusCode::FORBIDDEN,
            AppError::NotFound => StatusCode::NOT_FOUND,
            AppError::RateLimited | AppError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::Internal | AppError::Network => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

#[cfg(feature = "ssr")]
impl From<herald_engine::Error> for AppError {
    fn from(e: herald_engine::Error) -> Self {
        use herald_engine::Error as E;
        let app = match e {
            E::Invalid(m) => AppError::Invalid(m),
            E::Conflict(m) => AppError::Conflict(m),
            E::Unauthenticated => AppError::Unauthenticated,
            E::Forbidden => AppError::Forbidden,
            E::Refused(m) => AppError::Refused(m),
            E::NotFound => AppError::NotFound,
            E::RateLimited => AppError::RateLimited,
            E::Busy { message, retry_after_secs } => AppError::Busy { message, retry_after: retry_after_secs },
            E::Unavailable(message) => AppError::Busy { message, retry_after: 30 },
            E::Unexpected(e) => {
                // The whole cause chain goes to the log; the browser gets an opaque message.
                tracing::error!(error = ?e, "unexpected error in a server function");
                AppError::Internal
            }
        };
        app.respond()
    }
}

impl AppError {
    /// Gives the HTTP response a matching status (server functions default to 500), so API-like
    /// callers and tests see 401/403/404/422 rather than a generic failure. In the browser it
    /// does nothing.
    pub fn respond(self) -> Self {
        #[cfg(feature = "ssr")]
        if let Some(res) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            res.set_status(self.status());
            if let AppError::Busy { retry_after, .. } = &self {
                res.insert_header(http::header::RETRY_AFTER, http::HeaderValue::from(*retry_after));
            }
        }
        self
    }
}
