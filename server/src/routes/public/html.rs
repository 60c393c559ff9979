//! The frame of Herald's plain server-rendered pages (public subscribe/confirm/unsubscribe pages):
//! they must work without JavaScript, so they are not Leptos pages but MiniJinja templates,
//! auto-escaped, in `server/templates/public/`.

use std::sync::LazyLock;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Environment, Value, context};
use serde::Serialize;

/// The pages' templates (`server/templates/public/`), parsed once. Names ending in `.html` are
/// auto-escaped: a value can only become markup through `Value::from_safe_string`, which only
/// the frame's `body` gets (the output of another template).
static PAGES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    for (name, source) in [
        ("frame.html", include_str!("../../../templates/public/frame.html")),
        ("message.html", include_str!("../../../templates/public/message.html")),
        ("subscribe.html", include_str!("../../../templates/public/subscribe.html")),
        ("confirm.html", include_str!("../../../templates/public/confirm.html")),
        ("confirmed.html", include_str!("../../../templates/public/confirmed.html")),
        ("unsubscribe.html", include_str!("../../../templates/public/unsubscribe.html")),
    ] {
        // The sources are compiled in, and `every_public_template_renders` parses each of them.
        if let Err(e) = env.add_template(name, source) {
            tracing::error!(error = %e, name, "a public page template does not parse");
        }
    }
    env
});

/// `template` rendered with `values` inside the centred card frame, titled `title`.
pub fn card_page(status: StatusCode, title: &str, template: &str, values: impl Serialize) -> Response {
    let render = || -> Result<String, minijinja::Error> {
        let body = PAGES.get_template(template)?.render(values)?;
        PAGES.get_template("frame.html")?.render(context! { title, body => Value::from_safe_string(body) })
    };
    match render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, template, "a public page did not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong on our side. Please try again in a moment.")
                .into_response()
        }
    }
}

/// A page with just a heading and a message.
pub fn message_page(status: StatusCode, title: &str, message: &str) -> Response {
    card_page(status, title, "message.html", context! { title, message })
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
        E::Busy { message, .. } => message_page(StatusCode::TOO_MANY_REQUESTS, "Slow down", &message),
        E::Unavailable(message) => message_page(StatusCode::SERVICE_UNAVAILABLE, "Try again soon", &message),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_public_template_renders_and_escapes_what_it_is_given() {
        for name in PAGES.templates().map(|(name, _)| name) {
            assert!(PAGES.get_template(name).is_ok(), "{name}");
        }
        assert_eq!(PAGES.templates().count(), 6, "a template did not parse");
        let page = PAGES
            .get_template("message.html")
            .and_then(|t| t.render(context! { title => "<script>", message => "a & b" }))
            .expect("renders");
        assert!(page.contains("&lt;script&gt;") && page.contains("a &amp; b") && !page.contains("<script>"), "{page}");
    }
}
