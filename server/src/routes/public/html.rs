//! The frame of Herald's plain server-rendered pages (public subscribe/confirm/unsubscribe pages
//! and the dev inbox): they must work without JavaScript, so they are not Leptos pages.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
pub use herald_engine::sending::mail::escape_html as esc;

/// A centred card page, with `title` escaped and `body` trusted (callers escape what they insert).
pub fn card_page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{}</title>\
         <link rel=\"stylesheet\" href=\"/pkg/herald.css\"></head>\
         <body class=\"bg-slate-50 text-slate-800 antialiased\"><main class=\"flex min-h-screen items-center justify-center px-4 py-10\">\
         <div class=\"w-full max-w-md rounded-xl border border-slate-200 bg-white p-8 shadow-sm\">{body}</div></main></body></html>",
        esc(title)
    );
    (status, Html(html)).into_response()
}

/// A page with just a heading and a message.
pub fn message_page(status: StatusCode, title: &str, message: &str) -> Response {
    card_page(
        status,
        title,
        &format!(
            "<h1 class=\"text-xl font-semibold text-slate-900\">{}</h1><p class=\"mt-3 text-sm text-slate-600\">{}</p>",
            esc(title),
            esc(message)
        ),
    )
}

/// Maps an engine error on a public page to a page that reveals nothing internal.
pub fn error_page(e: herald_engine::Error) -> Response {
    use herald_engine::Error as E;
    match e {
        E::NotFound => message_page(
            StatusCode::NOT_FOUND,
            "Link not valid",
            "This link is not valid. Check that you copied all of it.",
        ),
        E::Invalid(m) => message_page(StatusCode::BAD_REQUEST, "Something is not right", &m.to_string()),
        E::RateLimited => {
            message_page(StatusCode::TOO_MANY_REQUESTS, "Slow down", "Too many requests. Wait a minute and try again.")
        }
        E::Unexpected(err) => {
            tracing::error!(error = ?err, "public page failed");
            message_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "Something went wrong on our side. Please try again in a moment.",
            )
        }
        other => message_page(StatusCode::BAD_REQUEST, "Something is not right", &other.to_string()),
    }
}

/// Form fields, with repeated keys kept (checkbox groups).
pub fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

pub fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
}
