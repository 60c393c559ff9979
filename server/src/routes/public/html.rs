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

/// A workspace's look on the pages its readers meet: its name, logo, colours and typeface, as
/// saved on Settings → Brand, so its readers' pages are the author's, not Herald's.
#[derive(Clone, Debug, Serialize)]
pub struct PageBrand {
    pub name: String,
    /// `#rrggbb` (checked by `Colour`): safe inside the page's `<style>`.
    pub accent: String,
    pub text: String,
    pub background: String,
    pub logo_src: String,
    pub logo_width: u32,
}

impl PageBrand {
    /// The workspace's brand; none (Herald's own look) when it cannot be read, so a reader's
    /// page never fails for its dress.
    pub async fn of(db: &herald_engine::Db, tenant: herald_engine::TenantId, name: &str) -> Option<(Self, Font)> {
        match herald_engine::campaigns::brand::get(db, tenant).await {
            Ok(b) => Some((
                PageBrand {
                    name: name.to_string(),
                    accent: b.theme.accent.to_string(),
                    text: b.theme.text.to_string(),
                    background: b.theme.background.to_string(),
                    logo_src: b.logo_src,
                    logo_width: b.logo_width.clamp(16, 320),
                },
                b.theme.font,
            )),
            Err(e) => {
                tracing::warn!(error = ?e, "a reader's page is shown without its workspace's brand");
                None
            }
        }
    }
}

use herald_types::Font;

/// `template` rendered with `values` inside the centred card frame, titled `title`.
pub fn card_page(status: StatusCode, title: &str, template: &str, values: impl Serialize) -> Response {
    branded_page(status, title, template, values, None)
}

/// [`card_page`] in a workspace's brand (see [`PageBrand::of`]).
pub fn branded_page(
    status: StatusCode,
    title: &str,
    template: &str,
    values: impl Serialize,
    brand: Option<(PageBrand, Font)>,
) -> Response {
    let render = || -> Result<String, minijinja::Error> {
        let body = PAGES.get_template(template)?.render(values)?;
        // The font stack is one of `Font`'s constants, written as CSS: escaping its quotes for
        // HTML would break it inside `<style>`.
        let (brand, font) = match brand {
            Some((b, font)) => (Some(b), Some(Value::from_safe_string(font.stack().to_string()))),
            None => (None, None),
        };
        PAGES.get_template("frame.html")?.render(context! { title, brand, font, body => Value::from_safe_string(body) })
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

    #[tokio::test]
    async fn a_branded_page_carries_the_brand_and_escapes_the_name() {
        let brand = PageBrand {
            name: "<b>Tulips</b>".into(),
            accent: "#be123c".into(),
            text: "#1f2937".into(),
            background: "#f4f4f5".into(),
            logo_src: "https://example.com/logo.png?a=1&b=2".into(),
            logo_width: 120,
        };
        let res = branded_page(
            StatusCode::OK,
            "Hi",
            "message.html",
            context! { title => "Hi", message => "m" },
            Some((brand, Font::Serif)),
        );
        let body = axum::body::to_bytes(res.into_body(), 1 << 20).await.expect("body");
        let page = String::from_utf8_lossy(&body);
        assert!(page.contains("background-color: #be123c"), "{page}");
        // The font stack as CSS (its quotes intact), the name as text, the logo's address escaped.
        assert!(page.contains("font-family: Georgia, 'Times New Roman', Times, serif;"), "{page}");
        assert!(page.contains("&lt;b&gt;Tulips") && !page.contains("<b>Tulips"), "{page}");
        assert!(page.contains("logo.png?a=1&amp;b=2"), "{page}");
        let plain = card_page(StatusCode::OK, "Hi", "message.html", context! { title => "Hi", message => "m" });
        let body = axum::body::to_bytes(plain.into_body(), 1 << 20).await.expect("body");
        assert!(!String::from_utf8_lossy(&body).contains("branded"));
    }
}
