//! Turning a campaign and one reader into a complete RFC 5322 message.
//!
//! This runs once per recipient, so the expensive parts happen once per campaign:
//! [`CompiledCampaign::compile`] parses the subject, preheader and body templates into a
//! MiniJinja environment (and test-renders them so authors see mistakes before sending);
//! [`CompiledCampaign::render`] then only evaluates them for a reader, turns Markdown into HTML,
//! wraps it in the email layout and derives the text part; [`build_message`] assembles the
//! multipart/alternative message with the list headers and, when given a [`DkimSigner`], signs it.
//!
//! Safety rules: every value that comes from data (reader fields, attributes, workspace fields)
//! is HTML-escaped in the body (and, for Markdown bodies, Markdown-escaped so that a reader's
//! name cannot become a link); the subject and preheader are rendered without escaping but
//! collapsed to one line, and [`build_message`] refuses line breaks and control characters in
//! every other header value, so no data can inject a header.

use std::fmt;

use lettre::Message;
use lettre::message::dkim::{
    DkimCanonicalization, DkimCanonicalizationType, DkimConfig, DkimSigningAlgorithm, DkimSigningKey,
};
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use minijinja::AutoEscape;
use minijinja::value::Value;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::sending::template_sandbox::{Dialect, RenderFailure, TemplateSet};

// ---------------------------------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------------------------------

pub use herald_types::BodyFormat;

/// What the author wrote. All three fields are MiniJinja templates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignContent {
    pub subject: String,
    /// The preview line inbox lists show after the subject; may be empty.
    pub preheader: String,
    pub format: BodyFormat,
    pub body: String,
}

/// The sending workspace, as templates and the compliance footer see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub name: String,
    /// Physical postal address (CAN-SPAM); one or more lines.
    pub postal_address: String,
}

/// One reader, borrowed from the row being sent.
#[derive(Debug, Clone, Copy)]
pub struct Recipient<'a> {
    pub email: &'a str,
    /// May be empty: templates then see it as undefined, so `default("friend")` applies.
    pub name: &'a str,
    /// A JSON object of custom attributes (anything else is treated as no attributes).
    pub attributes: &'a serde_json::Value,
}

/// Per-message values that are not about the reader.
#[derive(Debug, Clone, Copy)]
pub struct MessageContext<'a> {
    /// This reader's one-click unsubscribe URL (`{{ unsubscribe_url }}`).
    pub unsubscribe_url: &'a str,
}

/// A reader's subject, preheader and body HTML, before layout and footer.
#[derive(Clone, Debug)]
pub struct RenderedBody {
    pub subject: String,
    pub preheader: String,
    pub body: String,
}

/// A rendered message: a one-line subject, the full HTML document and its plain-text twin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rendered {
    pub subject: String,
    pub html: String,
    pub text: String,
}

/// A template mistake, positioned for the author: `body, line 3, column 7: unknown filter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateError {
    /// `"subject"`, `"preheader"` or `"body"`.
    pub field: &'static str,
    /// 1-based.
    pub line: Option<usize>,
    /// 1-based, in characters.
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field)?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        if let Some(column) = self.column {
            write!(f, ", column {column}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for TemplateError {}

impl From<TemplateError> for Error {
    fn from(e: TemplateError) -> Self {
        Error::invalid(e.to_string())
    }
}

// ---------------------------------------------------------------------------------------------
// Compilation and rendering
// ---------------------------------------------------------------------------------------------

const SUBJECT: &str = "subject";
const PREHEADER: &str = "preheader";
const BODY: &str = "body";

/// A rendered body larger than this is refused (Gmail clips at ~100 KB anyway).
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A campaign whose templates are parsed once and rendered per reader, in the template sandbox
/// ([`crate::sending::template_sandbox`]). `Send + Sync`: share it behind an `Arc` across sending tasks.
pub struct CompiledCampaign {
    templates: TemplateSet,
    format: BodyFormat,
    has_preheader: bool,
    /// `{ name, postal_address }`, built once.
    workspace: Value,
    /// Non-empty address lines, raw and HTML-escaped, to check whether the body already has them.
    address_lines: Vec<(String, String)>,
    /// The escaped address with `<br>` between lines, for the footer.
    address_html: String,
}

impl fmt::Debug for CompiledCampaign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledCampaign").field("format", &self.format).finish_non_exhaustive()
    }
}

impl CompiledCampaign {
    /// Parses the three templates and test-renders them with a sample reader, so that syntax
    /// errors and unknown filters or functions are reported now, with their position.
    pub fn compile(content: &CampaignContent, workspace: &Workspace) -> Result<Self, TemplateError> {
        let templates = TemplateSet::parse(
            Dialect::Campaign { markdown: content.format == BodyFormat::Markdown },
            vec![
                (SUBJECT, content.subject.clone()),
                (PREHEADER, content.preheader.clone()),
                (BODY, content.body.clone()),
            ],
        )?;

        let address_lines: Vec<(String, String)> = workspace
            .postal_address
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| (l.to_string(), escape_html(l)))
            .collect();
        let address_html = address_lines.iter().map(|(_, e)| e.as_str()).collect::<Vec<_>>().join("<br>");

        let compiled = CompiledCampaign {
            templates,
            format: content.format,
            has_preheader: !content.preheader.trim().is_empty(),
            workspace: Value::from_serialize(workspace),
            address_lines,
            address_html,
        };
        // Test-render for a reader without name or attributes. Mistakes in the template itself
        // (an unknown filter, function or test, wrong arguments, a runaway loop, a template that
        // needs too much memory) fail now; errors that depend on data (`length` of a missing
        // attribute) only fail the readers they concern.
        let sample_attributes = serde_json::Value::Object(serde_json::Map::new());
        let sample = Recipient { email: "reader@example.com", name: "", attributes: &sample_attributes };
        let vars = compiled.vars(&sample, &MessageContext { unsubscribe_url: "https://example.com/unsubscribe" });
        for outcome in compiled.templates.render(&[SUBJECT, PREHEADER, BODY], &vars) {
            if let Err(RenderFailure { error, mistake: true }) = outcome {
                return Err(error);
            }
        }
        Ok(compiled)
    }

    pub fn format(&self) -> BodyFormat {
        self.format
    }

    /// Renders the message for one reader.
    pub fn render(&self, recipient: &Recipient<'_>, ctx: &MessageContext<'_>) -> Result<Rendered, TemplateError> {
        Ok(self.assemble(self.render_body(recipient, ctx)?, ctx, None))
    }

    /// The personalised parts, before links are rewritten for tracking.
    pub fn render_body(
        &self,
        recipient: &Recipient<'_>,
        ctx: &MessageContext<'_>,
    ) -> Result<RenderedBody, TemplateError> {
        self.render_body_with_feed(recipient, ctx, None)
    }

    /// [`Self::render_body`] with this reader's data for a recurring edition (`{{ feed.… }}`).
    pub fn render_body_with_feed(
        &self,
        recipient: &Recipient<'_>,
        ctx: &MessageContext<'_>,
        feed: Option<&serde_json::Value>,
    ) -> Result<RenderedBody, TemplateError> {
        self.render_bodies(&[(recipient, ctx, feed)]).pop().unwrap_or_else(|| {
            Err(TemplateError { field: BODY, line: None, column: None, message: "nothing was rendered".into() })
        })
    }

    /// [`Self::render_body_with_feed`] for several readers in one round trip to the template
    /// sandbox (a send renders each claimed batch at once).
    pub fn render_bodies(
        &self,
        readers: &[(&Recipient<'_>, &MessageContext<'_>, Option<&serde_json::Value>)],
    ) -> Vec<Result<RenderedBody, TemplateError>> {
        let vars: Vec<Value> = readers
            .iter()
            .map(|(recipient, ctx, feed)| {
                let vars = self.vars(recipient, ctx);
                match feed {
                    Some(feed) => minijinja::context! { feed => Value::from_serialize(feed), ..vars },
                    None => vars,
                }
            })
            .collect();
        // The first failure, in this order, wins.
        let names: &[&'static str] = if self.has_preheader { &[SUBJECT, PREHEADER, BODY] } else { &[SUBJECT, BODY] };
        self.templates.render_each(names, &vars).into_iter().map(|outcomes| self.body_from(outcomes)).collect()
    }

    fn body_from(&self, outcomes: Vec<Result<String, RenderFailure>>) -> Result<RenderedBody, TemplateError> {
        let mut outcomes = outcomes.into_iter();
        let mut next = || outcomes.next().unwrap_or_else(|| Ok(String::new())).map_err(|f| f.error);
        let subject = single_line(&next()?);
        let preheader = if self.has_preheader { single_line(&next()?) } else { String::new() };
        let rendered = next()?;
        let body = match self.format {
            BodyFormat::Markdown => markdown_to_html(&rendered),
            BodyFormat::Html => rendered,
        };
        if body.len() > MAX_BODY_BYTES {
            return Err(TemplateError {
                field: BODY,
                line: None,
                column: None,
                message: format!("the rendered body is larger than {} MB", MAX_BODY_BYTES / (1024 * 1024)),
            });
        }
        Ok(RenderedBody { subject, preheader, body })
    }

    /// The full HTML and text versions: layout, footer and, when tracking, the open pixel (at
    /// the end of the body, so the text version never shows it).
    pub fn assemble(&self, parts: RenderedBody, ctx: &MessageContext<'_>, open_pixel_url: Option<&str>) -> Rendered {
        let RenderedBody { subject, preheader, body } = parts;
        let footer = self.footer(&body, ctx.unsubscribe_url);
        let mut text = TextConverter::default();
        text.feed(&body);
        text.break_lines(2);
        text.feed(&footer);
        let html = match open_pixel_url {
            Some(url) => {
                let mut with_pixel = body;
                with_pixel.push_str("<img src=\"");
                with_pixel.push_str(&escape_html(url));
                with_pixel.push_str(
                    "\" width=\"1\" height=\"1\" alt=\"\" style=\"display:block;width:1px;height:1px;border:0;\">",
                );
                assemble_html(&subject, &preheader, &with_pixel, &footer)
            }
            None => assemble_html(&subject, &preheader, &body, &footer),
        };
        Rendered { subject, html, text: text.finish() }
    }

    /// The template variables: `reader.{email,name,attributes}`, `unsubscribe_url`,
    /// `workspace.{name,postal_address}` (and `feed` for editions with per-reader data).
    fn vars(&self, recipient: &Recipient<'_>, ctx: &MessageContext<'_>) -> Value {
        minijinja::context! {
            reader => ReaderVars {
                email: recipient.email,
                name: (!recipient.name.is_empty()).then_some(recipient.name),
                attributes: Attributes(recipient.attributes),
            },
            unsubscribe_url => ctx.unsubscribe_url,
            workspace => self.workspace.clone(),
        }
    }

    /// The compliance footer: an unsubscribe link unless the body already carries this reader's
    /// URL, and the postal address unless the body already shows it.
    fn footer(&self, body: &str, unsubscribe_url: &str) -> String {
        let mut footer = String::new();
        if !unsubscribe_url.is_empty() {
            let escaped = escape_html(unsubscribe_url);
            if !body.contains(&escaped) && !body.contains(unsubscribe_url) {
                footer.push_str("<p style=\"margin:0 0 8px 0;\"><a href=\"");
                footer.push_str(&escaped);
                footer.push_str("\" style=\"color:#6b7280;text-decoration:underline;\">Unsubscribe</a></p>");
            }
        }
        let has_address = self.address_lines.iter().all(|(raw, esc)| body.contains(esc) || body.contains(raw));
        if !has_address {
            footer.push_str("<p style=\"margin:0;\">");
            footer.push_str(&self.address_html);
            footer.push_str("</p>");
        }
        footer
    }
}

/// Renders `content` for one reader without keeping the compiled templates: the editor's live
/// preview.
pub fn preview(
    content: &CampaignContent,
    workspace: &Workspace,
    recipient: &Recipient<'_>,
    unsubscribe_url: &str,
) -> Result<Rendered, TemplateError> {
    CompiledCampaign::compile(content, workspace)?.render(recipient, &MessageContext { unsubscribe_url })
}

#[derive(Serialize)]
struct ReaderVars<'a> {
    email: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    attributes: Attributes<'a>,
}

/// Serializes reader attributes with `null` members left out, so they are undefined in
/// templates and `default(...)` applies to them. A non-object serializes as an empty map.
struct Attributes<'a>(&'a serde_json::Value);

impl Serialize for Attributes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            serde_json::Value::Object(members) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in members {
                    if !v.is_null() {
                        map.serialize_entry(k, &AttributeValue(v))?;
                    }
                }
                map.end()
            }
            _ => s.serialize_map(Some(0))?.end(),
        }
    }
}

struct AttributeValue<'a>(&'a serde_json::Value);

impl Serialize for AttributeValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            serde_json::Value::Object(_) => Attributes(self.0).serialize(s),
            serde_json::Value::Array(items) => s.collect_seq(items.iter().map(AttributeValue)),
            other => other.serialize(s),
        }
    }
}

/// Writes `{{ value }}`: nothing for undefined and none; as-is without auto-escaping or for
/// `|safe` values; otherwise HTML-escaped (and Markdown-escaped for Markdown bodies).
pub(crate) fn format_value(
    out: &mut minijinja::Output,
    escape: AutoEscape,
    markdown: bool,
    value: &Value,
) -> std::result::Result<(), minijinja::Error> {
    if value.is_undefined() || value.is_none() {
        return Ok(());
    }
    if escape == AutoEscape::None || value.is_safe() {
        return write!(out, "{value}").map_err(minijinja::Error::from);
    }
    let owned;
    let s = match value.as_str() {
        Some(s) => s,
        None => {
            owned = value.to_string();
            owned.as_str()
        }
    };
    let mode = match markdown {
        false => Escape::Html,
        // Backslash escapes would corrupt URLs in autolinks (`<{{ url }}>`), which do not
        // process them; percent-encoding the link brackets keeps URLs working and inert.
        true if looks_like_url(s) => Escape::MarkdownUrl,
        true => Escape::Markdown,
    };
    write_escaped(out, s, mode).map_err(minijinja::Error::from)
}

/// An absolute http(s) or mailto URL without whitespace.
fn looks_like_url(s: &str) -> bool {
    ["https://", "http://", "mailto:"].iter().any(|p| s.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)))
        && !s.chars().any(char::is_whitespace)
}

/// Errors that are the template's fault whatever the reader's data.
pub(crate) fn is_template_mistake(e: &minijinja::Error) -> bool {
    use minijinja::ErrorKind as K;
    // A method called on a missing value (`reader.attributes.x.split()`) depends on the data.
    let on_undefined = e.detail().is_some_and(|d| d.starts_with("undefined has no method"));
    matches!(
        e.kind(),
        K::SyntaxError
            | K::UnknownFilter
            | K::UnknownFunction
            | K::UnknownTest
            | K::TooManyArguments
            | K::MissingArgument
            | K::BadEscape
            | K::OutOfFuel
            | K::TemplateNotFound
    ) || (e.kind() == K::UnknownMethod && !on_undefined)
}

pub(crate) fn template_error(field: &'static str, src: &str, e: &minijinja::Error) -> TemplateError {
    let (line, column) = match e.range().and_then(|r| src.get(..r.start)) {
        Some(before) => {
            let line = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let column = before.get(line_start..).map_or(0, |l| l.chars().count()) + 1;
            (Some(line), Some(column))
        }
        None => (e.line(), None),
    };
    let message = match e.detail() {
        Some(detail) => format!("{}: {detail}", e.kind()),
        None => e.kind().to_string(),
    };
    TemplateError { field, line, column, message }
}

/// Collapses every run of whitespace and control characters (CR, LF, tab, U+2028…) into one
/// space and trims: a subject can never span two header lines.
pub(crate) fn single_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut gap = false;
    for ch in s.chars() {
        if ch.is_whitespace() || ch.is_control() {
            gap = true;
            continue;
        }
        if gap && !out.is_empty() {
            out.push(' ');
        }
        gap = false;
        out.push(ch);
    }
    out
}

fn markdown_to_html(src: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let parser = Parser::new_ext(src, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH);
    let mut out = String::with_capacity(src.len() + src.len() / 2);
    html::push_html(&mut out, parser);
    out
}

// ---------------------------------------------------------------------------------------------
// Escaping
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    /// `& < > " '` as entities.
    Html,
    /// HTML, plus backslash escapes for the Markdown punctuation that could start emphasis,
    /// code, links, tables or headings.
    Markdown,
    /// For URLs in Markdown: percent-encoding for HTML specials (but a bare `&`, which Markdown
    /// escapes itself) and for what could turn a URL into Markdown links, code or tables.
    MarkdownUrl,
}

fn write_escaped(out: &mut impl fmt::Write, s: &str, mode: Escape) -> fmt::Result {
    let markdown = mode == Escape::Markdown;
    let url = mode == Escape::MarkdownUrl;
    let mut last = 0;
    for (i, b) in s.bytes().enumerate() {
        let replacement = match b {
            // Markdown decodes entities in link destinations but not in autolinks, and
            // escapes a raw `&` itself; the rest is percent-encoded, which works everywhere.
            b'&' if url => continue,
            b'<' if url => "%3C",
            b'>' if url => "%3E",
            b'"' if url => "%22",
            b'\'' if url => "%27",
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            b'\\' if markdown => "\\\\",
            b'`' if markdown => "\\`",
            b'*' if markdown => "\\*",
            b'_' if markdown => "\\_",
            b'[' if markdown => "\\[",
            b']' if markdown => "\\]",
            b'~' if markdown => "\\~",
            b'|' if markdown => "\\|",
            b'#' if markdown => "\\#",
            b'[' if url => "%5B",
            b']' if url => "%5D",
            b'`' if url => "%60",
            b'|' if url => "%7C",
            _ => continue,
        };
        out.write_str(&s[last..i])?;
        out.write_str(replacement)?;
        last = i + 1;
    }
    out.write_str(&s[last..])
}

/// The plain-text twin of an HTML body (links kept as `text (url)`), as campaigns get it.
pub fn html_to_text(html: &str) -> String {
    let mut text = TextConverter::default();
    text.feed(html);
    text.finish()
}

/// Herald's one HTML escape (also what [`Escape::Html`] writes inside templates).
pub(crate) use crate::sending::mail::escape_html;

// ---------------------------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------------------------

const FONT: &str = "font-family:-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;";

const HEAD_START: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"x-apple-disable-message-reformatting\">\n<title>";

const HEAD_END: &str = "</title>\n<style>\n\
body{margin:0;padding:0;}\n\
img{max-width:100%;height:auto;border:0;}\n\
a{color:#2563eb;}\n\
h1,h2,h3{line-height:1.3;margin:0 0 16px 0;}\n\
p,ul,ol,blockquote,pre,table{margin:0 0 16px 0;}\n\
blockquote{border-left:3px solid #e5e7eb;padding-left:12px;color:#4b5563;}\n\
pre{background:#f3f4f6;padding:12px;overflow:auto;}\n\
code{background:#f3f4f6;padding:1px 4px;}\n\
table{border-collapse:collapse;}\n\
th,td{border:1px solid #e5e7eb;padding:6px 10px;}\n\
.herald-layout td{border:0;padding:0;}\n\
</style>\n</head>\n<body style=\"margin:0;padding:0;background-color:#f4f4f5;\">\n";

const PREHEADER_START: &str = "<span style=\"display:none!important;visibility:hidden;mso-hide:all;font-size:1px;\
line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;color:transparent;\">";

/// Padding after the preheader so inbox previews do not run on into the body text.
const PREHEADER_PAD: &str = "&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;\
&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;\
&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;";

const OUTER_START: &str = "<table role=\"presentation\" class=\"herald-layout\" width=\"100%\" cellpadding=\"0\" \
cellspacing=\"0\" border=\"0\" style=\"background-color:#f4f4f5;\">\n<tr><td align=\"center\" \
style=\"padding:24px 12px;border:0;\">\n<table role=\"presentation\" class=\"herald-layout\" width=\"100%\" \
cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"max-width:600px;\">\n<tr><td style=\"background-color:#ffffff;\
border-radius:6px;padding:32px;border:0;font-size:16px;line-height:1.6;color:#1f2937;";

const FOOTER_START: &str = "</td></tr>\n<tr><td style=\"padding:16px 32px;border:0;font-size:12px;line-height:1.5;\
color:#6b7280;text-align:center;";

const OUTER_END: &str = "</td></tr>\n</table>\n</td></tr>\n</table>\n</body>\n</html>\n";

/// The final HTML document. A body that is already a full document (it has a `<body>` tag)
/// keeps its own layout and gets the preheader and footer inserted into it.
fn assemble_html(subject: &str, preheader: &str, body: &str, footer: &str) -> String {
    let mut preheader_html = String::new();
    if !preheader.is_empty() {
        preheader_html.reserve(PREHEADER_START.len() + preheader.len() + PREHEADER_PAD.len() + 16);
        preheader_html.push_str(PREHEADER_START);
        let _ = write_escaped(&mut preheader_html, preheader, Escape::Html);
        preheader_html.push_str(PREHEADER_PAD);
        preheader_html.push_str("</span>\n");
    }

    if let Some(open) = find_ascii_ci(body, "<body", 0)
        && let Some(gt) = body[open..].find('>')
    {
        let after_open = open + gt + 1;
        let close = rfind_ascii_ci(body, "</body").filter(|&c| c >= after_open).unwrap_or(body.len());
        let mut html = String::with_capacity(body.len() + preheader_html.len() + footer.len() + 128);
        html.push_str(&body[..after_open]);
        html.push('\n');
        html.push_str(&preheader_html);
        html.push_str(&body[after_open..close]);
        if !footer.is_empty() {
            html.push_str("<div style=\"padding:16px;font-size:12px;line-height:1.5;color:#6b7280;text-align:center;");
            html.push_str(FONT);
            html.push_str("\">");
            html.push_str(footer);
            html.push_str("</div>\n");
        }
        html.push_str(&body[close..]);
        return html;
    }

    let mut html = String::with_capacity(
        HEAD_START.len()
            + HEAD_END.len()
            + OUTER_START.len()
            + FOOTER_START.len()
            + OUTER_END.len()
            + 2 * FONT.len()
            + subject.len()
            + preheader_html.len()
            + body.len()
            + footer.len()
            + 64,
    );
    html.push_str(HEAD_START);
    let _ = write_escaped(&mut html, subject, Escape::Html);
    html.push_str(HEAD_END);
    html.push_str(&preheader_html);
    html.push_str(OUTER_START);
    html.push_str(FONT);
    html.push_str("\">\n");
    html.push_str(body);
    html.push('\n');
    if !footer.is_empty() {
        html.push_str(FOOTER_START);
        html.push_str(FONT);
        html.push_str("\">\n");
        html.push_str(footer);
        html.push('\n');
    }
    html.push_str(OUTER_END);
    html
}

/// Finds ASCII `needle` (lowercase) in `haystack`, ignoring ASCII case, from byte `from`.
fn find_ascii_ci(haystack: &str, needle: &str, from: usize) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    let first = *n.first()?;
    let mut i = from;
    while i + n.len() <= h.len() {
        if h[i].to_ascii_lowercase() == first && h[i..i + n.len()].eq_ignore_ascii_case(n) {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn rfind_ascii_ci(haystack: &str, needle: &str) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    (0..=h.len().checked_sub(n.len())?).rev().find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

// ---------------------------------------------------------------------------------------------
// HTML → plain text
// ---------------------------------------------------------------------------------------------

/// Elements whose content never reaches the text part.
const SKIPPED: &[&str] = &["script", "style", "head", "title", "template", "noscript", "svg", "object"];
/// Elements that are paragraphs: a blank line before and after.
const PARAGRAPHS: &[&str] =
    &["p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "table", "blockquote", "pre", "dl", "figure", "hr"];
/// Elements that start and end a line.
const LINES: &[&str] = &[
    "div",
    "tr",
    "li",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "center",
    "address",
    "dt",
    "dd",
    "form",
    "caption",
    "figcaption",
    "fieldset",
    "details",
    "summary",
    "thead",
    "tbody",
    "tfoot",
];

/// A small, forgiving HTML-to-text converter for the text/plain part: block elements become
/// line breaks and paragraphs, links become `label (url)`, list items `- `, entities are
/// decoded, whitespace collapsed, scripts, styles and `display:none` elements dropped.
#[derive(Default)]
struct TextConverter {
    out: String,
    /// Line breaks owed before the next text (at most 2).
    pending_breaks: u8,
    pending_space: bool,
    /// A list marker to write before the next text.
    pending_marker: Option<String>,
    /// `<a>` elements open: where their label starts in `out`, and their href.
    links: Vec<(usize, String)>,
    /// Open lists: `None` for `<ul>`, the next number for `<ol>`.
    lists: Vec<Option<u32>>,
    pre_depth: u32,
    /// Inside an element whose content is dropped: its name and how many of it are open.
    hidden: Option<(String, u32)>,
}

impl TextConverter {
    /// Converts one fragment; fragments fed in sequence behave as one document.
    fn feed(&mut self, html: &str) {
        let bytes = html.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let Some(lt) = html[i..].find('<').map(|p| p + i) else {
                self.text(&html[i..]);
                break;
            };
            if lt > i {
                self.text(&html[i..lt]);
            }
            i = lt;
            let rest = &html[i..];
            if rest.starts_with("<!--") {
                i = rest.find("-->").map_or(bytes.len(), |p| i + p + 3);
                continue;
            }
            let next = bytes.get(i + 1).copied().unwrap_or(b' ');
            if next == b'!' || next == b'?' {
                i = rest.find('>').map_or(bytes.len(), |p| i + p + 1);
                continue;
            }
            let closing = next == b'/';
            let name_start = i + 1 + usize::from(closing);
            if !bytes.get(name_start).is_some_and(u8::is_ascii_alphabetic) {
                self.text("<");
                i += 1;
                continue;
            }
            let name_end = html[name_start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == ':'))
                .map_or(bytes.len(), |p| name_start + p);
            let tag_end = find_tag_end(bytes, name_end);
            let name = html[name_start..name_end].to_ascii_lowercase();
            let attrs = &html[name_end..tag_end.saturating_sub(1).max(name_end)];
            i = tag_end;
            if closing {
                self.end_tag(&name);
            } else {
                let self_closing = attrs.trim_end().ends_with('/');
                self.start_tag(&name, attrs);
                if SKIPPED.contains(&name.as_str()) && !self_closing {
                    // Raw text: skip to the matching end tag.
                    let close = format!("</{name}");
                    let end = find_ascii_ci(html, &close, i).unwrap_or(bytes.len());
                    i = html[end..].find('>').map_or(bytes.len(), |p| end + p + 1);
                    self.end_tag(&name);
                }
            }
        }
    }

    fn start_tag(&mut self, name: &str, attrs: &str) {
        if let Some((hidden, depth)) = &mut self.hidden {
            if hidden == name && !is_void(name) {
                *depth += 1;
            }
            return;
        }
        if SKIPPED.contains(&name) {
            return;
        }
        if !is_void(name)
            && attr(attrs, "style").is_some_and(|s| {
                let s: String = s.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
                s.contains("display:none")
            })
        {
            self.hidden = Some((name.to_string(), 1));
            return;
        }
        match name {
            "br" => self.pending_breaks = (self.pending_breaks + 1).min(2),
            "hr" => {
                self.break_lines(2);
                self.literal("----------");
                self.break_lines(2);
            }
            "img" => {
                if let Some(alt) = attr(attrs, "alt").filter(|a| !a.trim().is_empty()) {
                    self.pending_space = true;
                    self.literal(alt.trim());
                    self.pending_space = true;
                }
            }
            "a" => {
                let href = attr(attrs, "href").unwrap_or_default();
                // Whatever is owed goes before the label, so the label can be compared with href.
                self.flush();
                self.links.push((self.out.len(), href.trim().to_string()));
            }
            "td" | "th" => self.pending_space = true,
            "pre" => {
                self.break_lines(2);
                self.pre_depth += 1;
            }
            "ul" => {
                self.break_lines(if self.lists.is_empty() { 2 } else { 1 });
                self.lists.push(None);
            }
            "ol" => {
                self.break_lines(if self.lists.is_empty() { 2 } else { 1 });
                let start = attr(attrs, "start").and_then(|s| s.trim().parse().ok()).unwrap_or(1);
                self.lists.push(Some(start));
            }
            "li" => {
                self.break_lines(1);
                let indent = "  ".repeat(self.lists.len().saturating_sub(1));
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{indent}{n}. ");
                        *n += 1;
                        m
                    }
                    _ => format!("{indent}- "),
                };
                self.pending_marker = Some(marker);
            }
            _ if PARAGRAPHS.contains(&name) => self.break_lines(2),
            _ if LINES.contains(&name) => self.break_lines(1),
            _ => {}
        }
    }

    fn end_tag(&mut self, name: &str) {
        if let Some((hidden, depth)) = &mut self.hidden {
            if hidden == name {
                *depth -= 1;
                if *depth == 0 {
                    self.hidden = None;
                }
            }
            return;
        }
        match name {
            "a" => {
                let Some((start, href)) = self.links.pop() else { return };
                let label = self.out.get(start..).unwrap_or_default().trim();
                let bare = href.strip_prefix("mailto:").unwrap_or(&href);
                let useless = href.is_empty()
                    || href.starts_with('#')
                    || href.to_ascii_lowercase().starts_with("javascript:")
                    || label.is_empty()
                    || label == href
                    || label == bare
                    || href.split_once("://").is_some_and(|(_, rest)| rest.trim_end_matches('/') == label);
                if !useless {
                    self.out.push_str(" (");
                    self.out.push_str(&href);
                    self.out.push(')');
                }
            }
            "td" | "th" => self.pending_space = true,
            "pre" => {
                self.pre_depth = self.pre_depth.saturating_sub(1);
                self.break_lines(2);
            }
            "ul" | "ol" => {
                self.lists.pop();
                self.break_lines(if self.lists.is_empty() { 2 } else { 1 });
            }
            "li" => {
                self.pending_marker = None;
                self.break_lines(1);
            }
            _ if PARAGRAPHS.contains(&name) => self.break_lines(2),
            _ if LINES.contains(&name) => self.break_lines(1),
            _ => {}
        }
    }

    /// Asks for at least `n` line breaks before the next text.
    fn break_lines(&mut self, n: u8) {
        self.pending_breaks = self.pending_breaks.max(n);
    }

    /// Writes what is owed (breaks, a space, a list marker) before text.
    fn flush(&mut self) {
        if self.pending_breaks > 0 {
            if !self.out.is_empty() {
                let trimmed = self.out.trim_end_matches([' ', '\t']).len();
                self.out.truncate(trimmed);
                let have = self.out.len() - self.out.trim_end_matches('\n').len();
                for _ in have..usize::from(self.pending_breaks) {
                    self.out.push('\n');
                }
            }
            self.pending_breaks = 0;
            self.pending_space = false;
        } else if self.pending_space {
            if !self.out.is_empty() && !self.out.ends_with([' ', '\n']) {
                self.out.push(' ');
            }
            self.pending_space = false;
        }
        if let Some(marker) = self.pending_marker.take() {
            self.out.push_str(&marker);
        }
    }

    /// Writes text that is not HTML (already decoded).
    fn literal(&mut self, s: &str) {
        self.flush();
        self.out.push_str(s);
    }

    /// Writes a text node: entities decoded, whitespace collapsed outside `<pre>`.
    fn text(&mut self, raw: &str) {
        if self.hidden.is_some() || raw.is_empty() {
            return;
        }
        let mut rest = raw;
        while let Some(ch) = rest.chars().next() {
            let decoded = if ch == '&' {
                match decode_entity(rest) {
                    Some((c, len)) => {
                        rest = &rest[len..];
                        c
                    }
                    None => {
                        rest = &rest[1..];
                        Some('&')
                    }
                }
            } else {
                rest = &rest[ch.len_utf8()..];
                Some(ch)
            };
            let Some(c) = decoded else { continue };
            if matches!(c, '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{feff}' | '\u{ad}' | '\u{34f}') {
                continue;
            }
            if self.pre_depth > 0 {
                if c == '\r' {
                    continue;
                }
                self.flush();
                self.out.push(c);
            } else if c.is_whitespace() {
                self.pending_space = true;
            } else {
                self.flush();
                self.out.push(c);
            }
        }
    }

    fn finish(self) -> String {
        let mut text = String::with_capacity(self.out.len() + 1);
        let mut blank_run = 0;
        for line in self.out.trim().lines() {
            let line = line.trim_end();
            if line.is_empty() {
                blank_run += 1;
                if blank_run > 1 {
                    continue;
                }
            } else {
                blank_run = 0;
            }
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}

fn is_void(name: &str) -> bool {
    matches!(
        name,
        "br" | "hr"
            | "img"
            | "meta"
            | "link"
            | "input"
            | "area"
            | "base"
            | "col"
            | "embed"
            | "source"
            | "track"
            | "wbr"
    )
}

/// The index just past the `>` closing a tag whose name ends at `from`, honouring quotes.
fn find_tag_end(bytes: &[u8], from: usize) -> usize {
    let mut quote = None;
    for (offset, &b) in bytes.get(from..).unwrap_or_default().iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => return from + offset + 1,
            None => {}
        }
    }
    bytes.len()
}

/// The entity-decoded value of attribute `name` in a tag's attribute text.
fn attr(attrs: &str, name: &str) -> Option<String> {
    let b = attrs.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        let key_start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'/' {
            i += 1;
        }
        let key = &attrs[key_start..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = "";
        if b.get(i) == Some(&b'=') {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            match b.get(i) {
                Some(&q) if q == b'"' || q == b'\'' => {
                    let end = attrs[i + 1..].find(char::from(q)).map_or(b.len(), |p| i + 1 + p);
                    value = &attrs[i + 1..end];
                    i = end + 1;
                }
                _ => {
                    let start = i;
                    while i < b.len() && !b[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    value = &attrs[start..i];
                }
            }
        }
        if key.eq_ignore_ascii_case(name) {
            return Some(decode_entities(value));
        }
        if key.is_empty() && i == key_start {
            i += 1;
        }
    }
    None
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find('&') {
        out.push_str(&rest[..p]);
        rest = &rest[p..];
        match decode_entity(rest) {
            Some((c, len)) => {
                out.extend(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Decodes the entity at the start of `s` (which starts with `&`): the character (`None` for
/// ones that stand for nothing, like `&zwnj;`) and the entity's length. `None` if it is not a
/// known entity.
fn decode_entity(s: &str) -> Option<(Option<char>, usize)> {
    let semi = s.get(1..s.len().min(12))?.find(';')? + 1;
    let body = &s[1..semi];
    let c = if let Some(num) = body.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse::<u32>().ok()?,
        };
        let c = char::from_u32(code).unwrap_or('\u{fffd}');
        if c == '\0' { '\u{fffd}' } else { c }
    } else {
        match body {
            "amp" | "AMP" => '&',
            "lt" | "LT" => '<',
            "gt" | "GT" => '>',
            "quot" | "QUOT" => '"',
            "apos" => '\'',
            "nbsp" => ' ',
            "ensp" | "emsp" | "thinsp" => ' ',
            "zwnj" | "zwj" | "shy" => return Some((None, semi + 1)),
            "copy" => '©',
            "reg" => '®',
            "trade" => '™',
            "hellip" => '…',
            "mdash" => '—',
            "ndash" => '–',
            "lsquo" => '‘',
            "rsquo" => '’',
            "ldquo" => '“',
            "rdquo" => '”',
            "laquo" => '«',
            "raquo" => '»',
            "bull" => '•',
            "middot" => '·',
            "euro" => '€',
            "pound" => '£',
            "yen" => '¥',
            "cent" => '¢',
            "deg" => '°',
            "times" => '×',
            "rarr" => '→',
            "larr" => '←',
            _ => return None,
        }
    };
    Some((Some(c), semi + 1))
}

// ---------------------------------------------------------------------------------------------
// Message assembly
// ---------------------------------------------------------------------------------------------

/// Who the message is from and to, and the per-message headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub from_name: String,
    pub from_email: String,
    pub reply_to: Option<String>,
    pub to_email: String,
    /// May be empty.
    pub to_name: String,
    /// Without angle brackets: `id-left@domain`, e.g. `campaign-uuid.reader-id@sending-domain`.
    pub message_id: String,
    /// The one-click unsubscribe URL. `List-Unsubscribe-Post` (RFC 8058) is only added for
    /// https URLs; http is accepted for development.
    pub list_unsubscribe_url: String,
    /// An address or a `mailto:` URI, offered as the second `List-Unsubscribe` option.
    pub list_unsubscribe_mailto: Option<String>,
    /// `Weekly news <list-uuid.workspace-slug.herald>` or just the id; empty leaves it out.
    pub list_id: String,
    /// Gmail's `Feedback-ID`, e.g. `campaign:workspace:herald`; empty leaves it out.
    pub feedback_id: String,
}

const LIST_UNSUBSCRIBE: HeaderName = HeaderName::new_from_ascii_str("List-Unsubscribe");
const LIST_UNSUBSCRIBE_POST: HeaderName = HeaderName::new_from_ascii_str("List-Unsubscribe-Post");
const LIST_ID: HeaderName = HeaderName::new_from_ascii_str("List-Id");
const FEEDBACK_ID: HeaderName = HeaderName::new_from_ascii_str("Feedback-ID");

/// Builds the multipart/alternative message (text, then HTML), DKIM-signed when `dkim` is given.
/// Line breaks or control characters in any envelope field are refused.
pub fn build_message(rendered: &Rendered, env: &Envelope, dkim: Option<&DkimSigner>) -> Result<Vec<u8>> {
    let from = mailbox("sender", &env.from_name, &env.from_email)?;
    let to = mailbox("recipient", &env.to_name, &env.to_email)?;
    let message_id = message_id(&env.message_id)?;
    // Transactional mail has no list to leave: an empty URL leaves the List-* headers out.
    let list_unsubscribe = if env.list_unsubscribe_url.trim().is_empty() {
        None
    } else {
        let unsubscribe = unsubscribe_url(&env.list_unsubscribe_url)?;
        let one_click = unsubscribe.starts_with("https://") || unsubscribe.starts_with("HTTPS://");
        let mut header = format!("<{unsubscribe}>");
        if let Some(mailto) = env.list_unsubscribe_mailto.as_deref() {
            check_header_text("unsubscribe mailto", mailto)?;
        }
        if let Some(mailto) = env.list_unsubscribe_mailto.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            header.push_str(", <");
            header.push_str(&mailto_uri(mailto)?);
            header.push('>');
        }
        Some((header, one_click))
    };

    let mut builder = Message::builder()
        .from(from)
        .to(to)
        .subject(single_line(&rendered.subject))
        .message_id(Some(format!("<{message_id}>")));
    if let Some(reply_to) = env.reply_to.as_deref() {
        check_header_text("reply-to address", reply_to)?;
        if !reply_to.trim().is_empty() {
            builder = builder.reply_to(mailbox("reply-to", "", reply_to)?);
        }
    }
    if let Some((header, one_click)) = list_unsubscribe {
        builder = builder.raw_header(HeaderValue::new(LIST_UNSUBSCRIBE, header));
        if one_click {
            builder =
                builder.raw_header(HeaderValue::new(LIST_UNSUBSCRIBE_POST, "List-Unsubscribe=One-Click".to_string()));
        }
    }
    if !env.list_id.trim().is_empty() {
        builder = builder.raw_header(HeaderValue::new(LIST_ID, list_id(&env.list_id)?));
    }
    check_header_text("Feedback-ID", &env.feedback_id)?;
    if !env.feedback_id.trim().is_empty() {
        let feedback_id = env.feedback_id.trim();
        if !feedback_id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid("the Feedback-ID must be printable ASCII without spaces"));
        }
        builder = builder.raw_header(HeaderValue::new(FEEDBACK_ID, feedback_id.to_string()));
    }

    let mut message = builder
        .multipart(MultiPart::alternative_plain_html(rendered.text.clone(), rendered.html.clone()))
        .map_err(|e| Error::invalid(format!("could not build the message: {e}")))?;
    if let Some(signer) = dkim {
        message.sign(&signer.config);
    }
    Ok(message.formatted())
}

fn check_header_text(what: &str, value: &str) -> Result<()> {
    if value.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return Err(Error::invalid(format!("the {what} contains a line break or control character")));
    }
    Ok(())
}

fn mailbox(what: &str, name: &str, email: &str) -> Result<Mailbox> {
    check_header_text(&format!("{what} name"), name)?;
    check_header_text(&format!("{what} address"), email)?;
    let address = email
        .trim()
        .parse::<lettre::Address>()
        .map_err(|_| Error::invalid(format!("the {what} address {email:?} is not valid")))?;
    let name = name.trim();
    Ok(Mailbox::new((!name.is_empty()).then(|| name.to_string()), address))
}

/// Checks `id-left@domain` (angle brackets tolerated and removed).
fn message_id(id: &str) -> Result<&str> {
    check_header_text("Message-ID", id)?;
    let id = id.trim();
    let id = id.strip_prefix('<').and_then(|i| i.strip_suffix('>')).unwrap_or(id);
    let valid = id.split_once('@').is_some_and(|(left, right)| {
        !left.is_empty()
            && !right.is_empty()
            && !right.contains('@')
            && id.bytes().all(|b| b.is_ascii_graphic() && !b"<>()[]\\,;:\"".contains(&b))
    });
    if !valid {
        return Err(Error::invalid(format!("the Message-ID {id:?} is not of the form id@domain")));
    }
    Ok(id)
}

fn unsubscribe_url(url: &str) -> Result<String> {
    check_header_text("unsubscribe URL", url)?;
    let url = url.trim();
    let parsed =
        url::Url::parse(url).map_err(|_| Error::invalid(format!("the unsubscribe URL {url:?} is not a valid URL")))?;
    if !matches!(parsed.scheme(), "https" | "http") || parsed.host().is_none() {
        return Err(Error::invalid(format!("the unsubscribe URL {url:?} must be an https URL")));
    }
    if url.chars().any(|c| c.is_whitespace() || c == '<' || c == '>' || !c.is_ascii()) {
        return Err(Error::invalid(format!("the unsubscribe URL {url:?} has characters that must be percent-encoded")));
    }
    // RFC 2369: commas inside a List-* URL must be escaped.
    Ok(url.replace(',', "%2C"))
}

fn mailto_uri(mailto: &str) -> Result<String> {
    check_header_text("unsubscribe mailto", mailto)?;
    let uri = if mailto.len() >= 7 && mailto[..7].eq_ignore_ascii_case("mailto:") {
        mailto.to_string()
    } else {
        format!("mailto:{mailto}")
    };
    if uri.chars().any(|c| c.is_whitespace() || matches!(c, '<' | '>' | ',') || !c.is_ascii()) || !uri.contains('@') {
        return Err(Error::invalid(format!("the unsubscribe mailto {mailto:?} is not valid")));
    }
    Ok(uri)
}

/// `phrase <id>` or a bare `id` (then bracketed). Specials that would need quoting are dropped
/// from the phrase; the id must be a dot-atom.
fn list_id(value: &str) -> Result<String> {
    check_header_text("List-Id", value)?;
    let value = value.trim();
    let (phrase, id) = match value.rfind('<') {
        Some(open) => {
            let id = value[open + 1..]
                .strip_suffix('>')
                .ok_or_else(|| Error::invalid(format!("the List-Id {value:?} is not of the form name <id>")))?;
            (&value[..open], id)
        }
        None => ("", value),
    };
    let atext = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~.".contains(&b);
    if id.is_empty() || !id.bytes().all(atext) || id.starts_with('.') || id.ends_with('.') || id.contains("..") {
        return Err(Error::invalid(format!("the List-Id {id:?} is not a valid list identifier")));
    }
    let phrase: String = phrase.chars().map(|c| if "()<>[]:;@\\,\"".contains(c) { ' ' } else { c }).collect::<String>();
    let phrase = single_line(&phrase);
    Ok(if phrase.is_empty() { format!("<{id}>") } else { format!("{phrase} <{id}>") })
}

// ---------------------------------------------------------------------------------------------
// DKIM
// ---------------------------------------------------------------------------------------------

/// Headers covered by the signature. Ones a message lacks are signed as absent, so they cannot
/// be added in transit (RFC 6376 §5.4); Gmail requires both List-Unsubscribe headers covered.
const DKIM_HEADERS: &[&str] = &[
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "Reply-To",
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
    "List-Id",
    "Feedback-ID",
    "MIME-Version",
    // Not Content-Type: lettre keeps a multipart's Content-Type with the body, not among the
    // message headers its signer reads, so it would be signed as absent and fail verification.
];

/// A DKIM key with its selector and domain: relaxed/relaxed, SHA-256, RSA or Ed25519.
pub struct DkimSigner {
    selector: String,
    domain: String,
    algorithm: DkimSigningAlgorithm,
    config: DkimConfig,
}

impl fmt::Debug for DkimSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkimSigner")
            .field("selector", &self.selector)
            .field("domain", &self.domain)
            .field("algorithm", &self.algorithm.to_string())
            .finish_non_exhaustive()
    }
}

impl DkimSigner {
    /// `private_key_pem` is an RSA key (PKCS#1 `BEGIN RSA PRIVATE KEY` or PKCS#8
    /// `BEGIN PRIVATE KEY`, as `openssl genrsa` writes), an Ed25519 PKCS#8 key (`openssl genpkey
    /// -algorithm ed25519`), or a bare base64 32-byte Ed25519 seed.
    pub fn new(selector: &str, domain: &str, private_key_pem: &str) -> Result<Self> {
        let selector = selector.trim();
        let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.split('.')
                    .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)))
        };
        if !label_ok(selector) {
            return Err(Error::invalid(format!("the DKIM selector {selector:?} is not valid")));
        }
        if !label_ok(&domain) || !domain.contains('.') {
            return Err(Error::invalid(format!("the DKIM domain {domain:?} is not valid")));
        }
        let (key, algorithm) = parse_dkim_key(private_key_pem)?;
        let signing_key = DkimSigningKey::new(&key, algorithm).map_err(|_| invalid_key())?;
        let headers = DKIM_HEADERS.iter().map(|&h| HeaderName::new_from_ascii_str(h)).collect();
        let config = DkimConfig::new(
            selector.to_string(),
            domain.clone(),
            signing_key,
            headers,
            DkimCanonicalization { header: DkimCanonicalizationType::Relaxed, body: DkimCanonicalizationType::Relaxed },
        );
        Ok(DkimSigner { selector: selector.to_string(), domain, algorithm, config })
    }

    pub fn selector(&self) -> &str {
        &self.selector
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }
}

fn invalid_key() -> Error {
    Error::invalid("the DKIM private key is not a valid unencrypted PEM RSA or Ed25519 key")
}

const RSA_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const ED25519_OID: &[u8] = &[0x2b, 0x65, 0x70];

/// Turns the accepted key forms into what lettre takes: PKCS#1 PEM for RSA, base64 seed for
/// Ed25519.
fn parse_dkim_key(pem: &str) -> Result<(String, DkimSigningAlgorithm)> {
    use base64::Engine as _;
    let pem = pem.trim();
    if pem.starts_with("-----BEGIN RSA PRIVATE KEY-----") {
        return Ok((pem.replace("\r\n", "\n"), DkimSigningAlgorithm::Rsa));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(rest) = pem.strip_prefix("-----BEGIN PRIVATE KEY-----") {
        let body = rest.split("-----END PRIVATE KEY-----").next().unwrap_or_default();
        let der_text: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        let der = b64.decode(der_text).map_err(|_| invalid_key())?;
        // PrivateKeyInfo ::= SEQUENCE { version INTEGER, algorithm SEQUENCE { OID, .. },
        //                               privateKey OCTET STRING, .. }
        let (_, info) = der_read(&der, 0x30).ok_or_else(invalid_key)?;
        let (info, _version) = der_read(info, 0x02).ok_or_else(invalid_key)?;
        let (info, algorithm) = der_read(info, 0x30).ok_or_else(invalid_key)?;
        let (_, oid) = der_read(algorithm, 0x06).ok_or_else(invalid_key)?;
        let (_, key) = der_read(info, 0x04).ok_or_else(invalid_key)?;
        if oid == RSA_OID {
            let encoded = b64.encode(key);
            let mut out = String::from("-----BEGIN RSA PRIVATE KEY-----\n");
            for chunk in encoded.as_bytes().chunks(64) {
                out.push_str(std::str::from_utf8(chunk).map_err(|_| invalid_key())?);
                out.push('\n');
            }
            out.push_str("-----END RSA PRIVATE KEY-----\n");
            return Ok((out, DkimSigningAlgorithm::Rsa));
        }
        if oid == ED25519_OID {
            // CurvePrivateKey ::= OCTET STRING (the 32-byte seed)
            let (_, seed) = der_read(key, 0x04).ok_or_else(invalid_key)?;
            if seed.len() != 32 {
                return Err(invalid_key());
            }
            return Ok((b64.encode(seed), DkimSigningAlgorithm::Ed25519));
        }
        return Err(Error::invalid("the DKIM private key must be RSA or Ed25519"));
    }
    match b64.decode(pem) {
        Ok(seed) if seed.len() == 32 => Ok((pem.to_string(), DkimSigningAlgorithm::Ed25519)),
        _ => Err(invalid_key()),
    }
}

/// Reads one DER element with tag `tag` from the start of `input`: (what follows, contents).
fn der_read(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = input.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    let (contents, after) = rest.split_at(len);
    Some((after, contents))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    fn workspace() -> Workspace {
        Workspace { name: "Acme & Co".into(), postal_address: "1 Main St\nSpringfield, IL 62701".into() }
    }

    fn content(format: BodyFormat, subject: &str, body: &str) -> CampaignContent {
        CampaignContent { subject: subject.into(), preheader: String::new(), format, body: body.into() }
    }

    const UNSUB: &str = "https://herald.example/u/abc123?l=9&x=1";

    fn render(c: &CampaignContent, name: &str, attrs: serde_json::Value) -> anyhow::Result<Rendered> {
        let r = Recipient { email: "ada@example.org", name, attributes: &attrs };
        Ok(preview(c, &workspace(), &r, UNSUB)?)
    }

    fn envelope() -> Envelope {
        Envelope {
            from_name: "Acme News".into(),
            from_email: "news@acme.example".into(),
            reply_to: Some("editor@acme.example".into()),
            to_email: "ada@example.org".into(),
            to_name: "Ada Lovelace".into(),
            message_id: "6f1c2a2e-0000-4000-8000-000000000001.42@acme.example".into(),
            list_unsubscribe_url: "https://herald.example/u/abc123".into(),
            list_unsubscribe_mailto: Some("unsubscribe+abc123@acme.example".into()),
            list_id: "Weekly news <6f1c2a2e.acme.herald>".into(),
            feedback_id: "6f1c2a2e:acme:herald".into(),
        }
    }

    fn parse(raw: &[u8]) -> anyhow::Result<mail_parser::Message<'_>> {
        mail_parser::MessageParser::default().parse(raw).context("unparseable message")
    }

    #[test]
    fn merge_tags_defaults_and_missing_attributes() -> anyhow::Result<()> {
        let c = content(
            BodyFormat::Html,
            "Hi {{ reader.name | default(\"friend\") }} from {{ workspace.name }}",
            "<p>Hello {{ reader.name | default(\"friend\") }} in [{{ reader.attributes.city }}] \
             [{{ reader.attributes.address.zip }}] [{{ reader.attributes.gone | default(\"n/a\") }}] \
             plan={{ reader.attributes.plan }} n={{ reader.attributes.count }} {{ reader.email }}</p>",
        );
        let r = render(&c, "", serde_json::json!({ "plan": "pro", "count": 3, "gone": null }))?;
        assert_eq!(r.subject, "Hi friend from Acme & Co");
        assert!(r.html.contains("Hello friend in [] [] [n/a] plan=pro n=3 ada@example.org"), "{}", r.html);

        let r = render(&c, "Ada", serde_json::json!({ "city": "London" }))?;
        assert_eq!(r.subject, "Hi Ada from Acme & Co");
        assert!(r.html.contains("Hello Ada in [London]"));
        // Attributes that are not an object behave as none.
        let r = render(&c, "Ada", serde_json::Value::Null)?;
        assert!(r.html.contains("Hello Ada in []"));
        Ok(())
    }

    #[test]
    fn markdown_body() -> anyhow::Result<()> {
        let c = content(
            BodyFormat::Markdown,
            "News",
            "# Hello {{ reader.name }}\n\nSome **bold** and ~~old~~ text.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n\
             [Unsubscribe]({{ unsubscribe_url }})\n",
        );
        let r = render(&c, "Ada_Lovelace *x*", serde_json::json!({}))?;
        assert!(r.html.contains("<h1>Hello Ada_Lovelace *x*</h1>"), "{}", r.html);
        assert!(r.html.contains("<strong>bold</strong>"));
        assert!(r.html.contains("<del>old</del>"));
        assert!(r.html.contains("<table>"));
        assert!(r.html.contains("href=\"https://herald.example/u/abc123?l=9&amp;x=1\""), "{}", r.html);
        // The body links to the unsubscribe URL, so no footer link is added.
        assert_eq!(r.html.matches("Unsubscribe").count(), 1);
        assert!(r.text.contains("Hello Ada_Lovelace *x*"));
        assert!(r.text.contains("Unsubscribe (https://herald.example/u/abc123?l=9&x=1)"), "{}", r.text);
        Ok(())
    }

    #[test]
    fn markdown_data_cannot_become_markup() -> anyhow::Result<()> {
        let c = content(BodyFormat::Markdown, "x", "Hi {{ reader.name }}!");
        let r = render(&c, "[win](https://evil.example) <b>x</b>", serde_json::json!({}))?;
        assert!(!r.html.contains("<a href=\"https://evil"), "{}", r.html);
        assert!(!r.html.contains("<b>"));
        assert!(r.html.contains("[win](https://evil.example) &lt;b&gt;x&lt;/b&gt;"), "{}", r.html);
        // URL-looking values stay usable URLs, in autolinks too, but cannot smuggle in a link.
        let c = content(BodyFormat::Markdown, "x", "<{{ reader.attributes.site }}> {{ reader.name }}");
        let r = render(
            &c,
            "https://x.example/[a](https://evil.example)",
            serde_json::json!({ "site": "https://x.example/a_b?c=1&d=2" }),
        )?;
        assert!(r.html.contains("<a href=\"https://x.example/a_b?c=1&amp;d=2\">"), "{}", r.html);
        assert!(!r.html.contains("href=\"https://evil"), "{}", r.html);
        Ok(())
    }

    #[test]
    fn html_escaping_in_body_not_subject() -> anyhow::Result<()> {
        for format in [BodyFormat::Html, BodyFormat::Markdown] {
            let c = content(format, "For {{ reader.name }}", "<p>Dear {{ reader.name }}</p>");
            let r = render(&c, "<script>alert('x')</script>", serde_json::json!({}))?;
            assert_eq!(r.subject, "For <script>alert('x')</script>");
            assert!(!r.html.contains("<script>"), "{format}: {}", r.html);
            assert!(r.html.contains("Dear &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), "{format}: {}", r.html);
            // The <title> carries the subject, escaped.
            assert!(r.html.contains("<title>For &lt;script&gt;"));
            assert!(r.text.contains("Dear <script>alert('x')</script>"));
        }
        Ok(())
    }

    #[test]
    fn header_injection_through_name_is_impossible() -> anyhow::Result<()> {
        let c = content(BodyFormat::Html, "Hello {{ reader.name }}, news", "<p>Hi</p>");
        let r = render(&c, "Eve\r\nBcc: x@y.example\r\n", serde_json::json!({}))?;
        assert_eq!(r.subject, "Hello Eve Bcc: x@y.example , news");
        let raw = build_message(&r, &envelope(), None)?;
        let msg = parse(&raw)?;
        assert!(msg.header("Bcc").is_none());
        assert_eq!(msg.subject(), Some("Hello Eve Bcc: x@y.example , news"));
        // A hand-built Rendered with a raw CRLF is collapsed too.
        let evil = Rendered { subject: "a\r\nBcc: x@y.example".into(), ..r };
        let raw = build_message(&evil, &envelope(), None)?;
        let msg = parse(&raw)?;
        assert!(msg.header("Bcc").is_none());
        assert_eq!(msg.subject(), Some("a Bcc: x@y.example"));
        // Envelope fields with line breaks are refused outright.
        for mutate in [
            (|e: &mut Envelope| e.to_name = "Eve\r\nBcc: x@y.example".into()) as fn(&mut Envelope),
            |e| e.from_name = "A\nB".into(),
            |e| e.to_email = "ada@example.org\r\nBcc: x@y.example".into(),
            |e| e.reply_to = Some("a@b.example\n".into()),
            |e| e.list_id = "x\r\nBcc: y".into(),
            |e| e.feedback_id = "a:b\r\nBcc: y".into(),
            |e| e.list_unsubscribe_url = "https://x.example/\r\nBcc: y".into(),
            |e| e.list_unsubscribe_mailto = Some("u@x.example\r\nBcc: y".into()),
            |e| e.message_id = "a@b\r\nBcc: y".into(),
            |e| e.list_unsubscribe_url = "javascript:alert(1)".into(),
        ] {
            let mut env = envelope();
            mutate(&mut env);
            assert!(matches!(build_message(&evil, &env, None), Err(Error::Invalid(_))), "{env:?}");
        }
        Ok(())
    }

    #[test]
    fn footer_added_when_missing_and_not_duplicated() -> anyhow::Result<()> {
        let bare = content(BodyFormat::Html, "x", "<p>Hello</p>");
        let r = render(&bare, "", serde_json::json!({}))?;
        assert_eq!(r.html.matches(">Unsubscribe</a>").count(), 1);
        assert!(r.html.contains("href=\"https://herald.example/u/abc123?l=9&amp;x=1\""));
        assert!(r.html.contains("1 Main St<br>Springfield, IL 62701"));
        assert!(r.text.contains("Unsubscribe (https://herald.example/u/abc123?l=9&x=1)"), "{}", r.text);
        assert!(r.text.contains("1 Main St\nSpringfield, IL 62701"), "{}", r.text);

        let complete = content(
            BodyFormat::Html,
            "x",
            "<p>Hello</p><p><a href=\"{{ unsubscribe_url }}\">Leave</a></p><p>1 Main St<br>Springfield, IL 62701</p>",
        );
        let r = render(&complete, "", serde_json::json!({}))?;
        assert!(!r.html.contains(">Unsubscribe</a>"), "{}", r.html);
        assert_eq!(r.html.matches("1 Main St").count(), 1);
        assert_eq!(r.html.matches("https://herald.example/u/abc123").count(), 1);

        // Only the address missing: only the address added.
        let link_only = content(BodyFormat::Html, "x", "<a href=\"{{ unsubscribe_url }}\">Leave</a>");
        let r = render(&link_only, "", serde_json::json!({}))?;
        assert!(!r.html.contains(">Unsubscribe</a>"));
        assert_eq!(r.html.matches("1 Main St").count(), 1);
        Ok(())
    }

    #[test]
    fn layout_has_preheader_and_max_width() -> anyhow::Result<()> {
        let mut c = content(BodyFormat::Html, "x", "<p>Body</p>");
        c.preheader = "Inside: {{ reader.name }} & more\nnews".into();
        let r = render(&c, "<b>Ada</b>", serde_json::json!({}))?;
        let body_open = r.html.find("<body").context("no body")?;
        let span = r.html.find("<span style=\"display:none").context("no preheader")?;
        assert!(span > body_open && r.html[body_open..span].matches('<').count() == 1, "{}", r.html);
        assert!(r.html.contains("Inside: &lt;b&gt;Ada&lt;/b&gt; &amp; more news"));
        assert!(r.html.contains("max-width:600px"));
        assert!(!r.text.contains("Inside"), "the preheader is not part of the text: {}", r.text);

        // A full document keeps its own layout.
        let doc = content(
            BodyFormat::Html,
            "x",
            "<html><head><style>p{color:red}</style></head><body class=\"x\"><p>Own</p></body></html>",
        );
        let r = render(&doc, "", serde_json::json!({}))?;
        assert!(r.html.starts_with("<html><head><style>p{color:red}</style></head><body class=\"x\">"));
        assert!(r.html.ends_with("</body></html>"));
        assert!(r.html.contains(">Unsubscribe</a>"));
        assert!(!r.text.contains("color:red"));
        assert!(r.text.starts_with("Own\n\nUnsubscribe ("), "{}", r.text);
        Ok(())
    }

    #[test]
    fn text_part_of_sample_html() {
        let html = "<style>.x{color:red}</style><script>var a = '<p>';</script>\
            <h1>Big&nbsp;news</h1>\n<p>Hello   <b>world</b>,\n  this &amp; that &lt;tag&gt; &quot;q&quot; &#39;s&#39; \
            &#x263A; &#8364; &copy;</p><div>Line one<br>Line two</div>\
            <ul><li>First</li><li>Second <a href=\"https://x.example/a?b=1&amp;c=2\">link</a></li>\
            <li><a href=\"https://same.example/\">https://same.example/</a></li></ul>\
            <ol><li>One</li><li>Two</li></ol>\
            <!-- a comment <p>no</p> --><span style=\"display: none\">hidden <span>nested</span></span>\
            <table><tr><td>A</td><td>B</td></tr><tr><td>C</td><td>D</td></tr></table>\
            <p><img src=\"x.png\" alt=\"Logo\"> after <a href=\"mailto:me@x.example\">me@x.example</a></p>\
            <pre>  keep\n    this</pre>unknown &bogus; entity";
        let mut t = TextConverter::default();
        t.feed(html);
        let text = t.finish();
        let expected = "Big news\n\n\
            Hello world, this & that <tag> \"q\" 's' ☺ € ©\n\n\
            Line one\nLine two\n\n\
            - First\n- Second link (https://x.example/a?b=1&c=2)\n- https://same.example/\n\n\
            1. One\n2. Two\n\n\
            A B\nC D\n\n\
            Logo after me@x.example\n\n\
            \u{20}\u{20}keep\n    this\n\n\
            unknown &bogus; entity\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn template_errors_have_field_line_and_column() -> anyhow::Result<()> {
        let c = content(BodyFormat::Markdown, "Hi", "Hello\n{{ reader.name | nosuchfilter }}");
        let e = CompiledCampaign::compile(&c, &workspace()).err().context("should fail")?;
        assert_eq!(e.field, "body");
        assert_eq!(e.line, Some(2));
        assert!(e.column.is_some_and(|c| (1..=24).contains(&c)), "{e:?}");
        assert!(e.message.contains("unknown filter"), "{e}");
        assert!(e.to_string().starts_with("body, line 2, column "), "{e}");

        let c = content(BodyFormat::Html, "Hi {{ reader.name ", "ok");
        let e = CompiledCampaign::compile(&c, &workspace()).err().context("should fail")?;
        assert_eq!(e.field, "subject");
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("syntax error"), "{e}");

        let mut c = content(BodyFormat::Html, "Hi", "ok");
        c.preheader = "line\n  {% if %}".into();
        let e = CompiledCampaign::compile(&c, &workspace()).err().context("should fail")?;
        assert_eq!((e.field, e.line), ("preheader", Some(2)));
        assert!(e.column.is_some_and(|c| c >= 3), "{e:?}");

        // Errors that depend on data fail only the readers concerned, not the compile.
        let c = content(BodyFormat::Html, "x", "{{ reader.attributes.tags | length }} tags");
        let compiled = CompiledCampaign::compile(&c, &workspace())?;
        let attrs = serde_json::json!({ "tags": ["a", "b"] });
        let ctx = MessageContext { unsubscribe_url: UNSUB };
        let r = compiled.render(&Recipient { email: "a@b.example", name: "", attributes: &attrs }, &ctx)?;
        assert!(r.html.contains("2 tags"));
        let none = serde_json::json!({});
        let e = compiled.render(&Recipient { email: "a@b.example", name: "", attributes: &none }, &ctx);
        assert!(e.is_err_and(|e| e.field == "body" && e.line == Some(1)));

        // A runaway loop runs out of fuel instead of stalling the sender.
        let c = content(
            BodyFormat::Html,
            "x",
            "{% for a in range(100000) %}{% for b in range(100000) %}.{% endfor %}{% endfor %}",
        );
        let e = CompiledCampaign::compile(&c, &workspace()).err().context("should fail")?;
        assert_eq!(e.field, "body");
        Ok(())
    }

    #[test]
    fn message_has_list_headers_and_exact_message_id() -> anyhow::Result<()> {
        let c = content(BodyFormat::Markdown, "Weekly — {{ reader.name }}", "Hello *{{ reader.name }}*");
        let r = render(&c, "Ada", serde_json::json!({}))?;
        let raw = build_message(&r, &envelope(), None)?;
        let text = String::from_utf8(raw.clone())?;
        assert!(text.contains("\r\nMessage-ID: <6f1c2a2e-0000-4000-8000-000000000001.42@acme.example>\r\n"), "{text}");
        assert!(
            text.contains(
                "\r\nList-Unsubscribe: <https://herald.example/u/abc123>,\r\n <mailto:unsubscribe+abc123@acme.example>\r\n"
            ) || text.contains(
                "\r\nList-Unsubscribe: <https://herald.example/u/abc123>, <mailto:unsubscribe+abc123@acme.example>\r\n"
            ),
            "{text}"
        );
        assert!(text.contains("\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"));
        assert!(text.contains("\r\nList-Id: Weekly news <6f1c2a2e.acme.herald>\r\n"));
        assert!(text.contains("\r\nFeedback-ID: 6f1c2a2e:acme:herald\r\n"));
        assert!(text.contains("multipart/alternative"));

        let msg = parse(&raw)?;
        assert_eq!(msg.message_id(), Some("6f1c2a2e-0000-4000-8000-000000000001.42@acme.example"));
        assert_eq!(msg.subject(), Some("Weekly — Ada"));
        assert!(msg.date().is_some());
        let from = msg.from().and_then(|a| a.first()).context("no from")?;
        assert_eq!((from.name(), from.address()), (Some("Acme News"), Some("news@acme.example")));
        let to = msg.to().and_then(|a| a.first()).context("no to")?;
        assert_eq!((to.name(), to.address()), (Some("Ada Lovelace"), Some("ada@example.org")));
        let reply = msg.reply_to().and_then(|a| a.first()).context("no reply-to")?;
        assert_eq!(reply.address(), Some("editor@acme.example"));
        assert!(msg.body_text(0).context("no text")?.contains("Hello Ada"));
        assert!(msg.body_html(0).context("no html")?.contains("<em>Ada</em>"));

        // A bare list id gets brackets; no mailto, no Feedback-ID; http is allowed but not one-click.
        let env = Envelope {
            list_id: "abc.acme.herald".into(),
            list_unsubscribe_mailto: None,
            feedback_id: String::new(),
            list_unsubscribe_url: "http://localhost:3000/u/x".into(),
            reply_to: None,
            to_name: String::new(),
            ..envelope()
        };
        let text = String::from_utf8(build_message(&r, &env, None)?)?;
        assert!(text.contains("\r\nList-Id: <abc.acme.herald>\r\n"));
        assert!(text.contains("\r\nList-Unsubscribe: <http://localhost:3000/u/x>\r\n"));
        assert!(!text.contains("List-Unsubscribe-Post"));
        assert!(!text.contains("Feedback-ID"));
        assert!(!text.contains("Reply-To"));
        assert!(text.contains("\r\nTo: ada@example.org\r\n"));
        Ok(())
    }

    // `openssl genrsa 2048` (OpenSSL 3 writes PKCS#8); a throwaway key for tests only.
    const TEST_RSA_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDOMy7yKqnQODsA
glZEuDUSiUuq/eAsUnPypxnJBA+r16gPUA5zgdBimy7CRo61zbnE/Np5wkJCv+pi
9isSojFF38Ie9iZShfAQuo5Qp+T0P/iPL7V4CuDtsSzrJ6ABKkBEKF0N+p53Xquj
LSFQ2jYS3wdJ4lgW03xsgGUdmQYT+aw+uAImZqRlrWoCfQb+u0Iqj4cBAGSaop1b
slra3bU5LNIkU43Zld74zqKKS0/MeaEY5C7t+3769z4KGOFpGDq7djwWdslrG7cs
bvfx+WR1hbY0NNxhWcFRCzKDjHBhdpiI147q2U0WpKEKbSFfg2yizoG3QpXjuu4s
xiUQ/tWRAgMBAAECggEAGGWkRCvkbAn91SlsCp/JoRf/N3aSsRElEzdOjOL+9a6Y
/bgpADqs92ser7GIeMikFm4dGB3yGBK7/pnbbnjOn/1XFbG7HArT5Nl7NYjVRUmn
tPgInnDvEcCOV4PDNzq9YDMZu38v2Qt+/wS7yzoI/teboFQjEbmpIESwHL3lIwoH
bP24AL+vB2HoF/bNF9UI2e9hD6y6iOUpmaufplIrf7AC26iWCKuy14PG3E7YG+fa
S4428Pe2A4YChjze2qyPHLgYSPa7sFjg1FZS6SvhZWoecOyJkFvAyRUsWpBRNO5v
ANdyXsjVlMxYgI6fpvQppKrWy4fZOCs8mNPEs5FuZwKBgQD5f8yI8Gx0jCSuNxli
+tMyOgXQ32ScYUj+YgvZC7J9Z2hilCd3VDnyTUmExm/lXYo1Vbj2kuFjz+meFSzh
lK+b4RnVJve3Rqv8eUN/kZG1v73iqXT6/lbWa+RcJLC4CVeXv+Br6NdtGBpw8uT9
qIV4DzjJvwvc+9DAjsoi3vZX8wKBgQDTkpIxAlpawWLZp6YkGgWht1aT3a6/Xz6F
kKbBTxm57y1roPvkNZgG6NRa7sIYq4/oqjAB4aRfGrMCahD6YX/BFdikHAbe+mry
hpsteOoG6kSEEbPaP4E8wSgAIEYNB3vp3o764GceT3BSc8UqWSHjcpT4tyBc+2DV
pdoQLrdhawKBgAkA6KOkcXV/PS+gQ2VEAe0VFPKlrR7Lj/PGHAFYH7fQzH6KNCZl
PrYUvetxscYIKx2jm0oioMmWTirrPrRhRjkM1X7Qqi3N+hThV2M6IJT7d2G/lb4d
AYs5V4NPu6TYiXWrcfDS9Ts1nHao/UR+GVrsybLWFxqBZ9YbEQZTH3arAoGBALEx
yI6TUelAnfF8n4EM6jqOukwNFhXhRxPGGmM8RGedEYVaxpxS5oii53dhD95pkZVj
M+HfgTLFwbb77kxE7CJikZaggoCtanTEl6J16krwWYHi8aaQGUUw4Ld6UDEJW5Z7
d3RWDQctsPzdSPw2ulMr2+iSNuCpCGjnBsMW3S8RAoGASE88cT8SQShCE46zilek
4GxwLtMcPy1nGUwaytJv9CmnkWiW5CZNeqwRuHuzDEWTWeRVoH9SEMRD9os1CWUR
UEVkqijSP2KIp7ax92qOS1t4Qt6WwI6BQTMw+SBoiKUL/dzYXbJAbHjsaN9euS13
k0Nl53aexC5vOYslZGyuFSY=
-----END PRIVATE KEY-----";

    // `openssl genpkey -algorithm ed25519`.
    const TEST_ED25519_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEICz/jCRjC+2aJ1GGU/9yG5flwW+oI3Hi73F069uAKHPW
-----END PRIVATE KEY-----";

    fn dkim_header(raw: &[u8]) -> anyhow::Result<String> {
        let msg = parse(raw)?;
        let value = msg.header_raw("DKIM-Signature").context("no DKIM-Signature")?;
        // Unfold.
        Ok(value.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    fn tag<'a>(sig: &'a str, name: &str) -> Option<&'a str> {
        sig.split(';').map(str::trim).find_map(|t| t.strip_prefix(name)?.strip_prefix('='))
    }

    #[test]
    fn dkim_signature_covers_list_unsubscribe() -> anyhow::Result<()> {
        let c = content(BodyFormat::Html, "Signed", "<p>Hi {{ reader.name }}</p>");
        let r = render(&c, "Ada", serde_json::json!({}))?;
        for (key, algorithm) in [(TEST_RSA_PKCS8, "rsa-sha256"), (TEST_ED25519_PKCS8, "ed25519-sha256")] {
            let signer = DkimSigner::new("herald", "acme.example", key)?;
            let raw = build_message(&r, &envelope(), Some(&signer))?;
            let sig = dkim_header(&raw)?;
            assert_eq!(tag(&sig, "a"), Some(algorithm), "{sig}");
            assert_eq!(tag(&sig, "d"), Some("acme.example"));
            assert_eq!(tag(&sig, "s"), Some("herald"));
            assert_eq!(tag(&sig, "c"), Some("relaxed/relaxed"));
            let h: Vec<String> =
                tag(&sig, "h").context("no h=")?.split(':').map(|h| h.trim().to_ascii_lowercase()).collect();
            for required in ["from", "to", "subject", "date", "message-id", "list-unsubscribe", "list-unsubscribe-post"]
            {
                assert!(h.iter().any(|x| x == required), "{required} not signed: {sig}");
            }
            assert!(tag(&sig, "b").is_some_and(|b| b.len() > 40), "{sig}");
            // Still a well-formed message.
            assert!(parse(&raw)?.body_html(0).is_some());
        }
        Ok(())
    }

    #[test]
    fn dkim_key_forms() -> anyhow::Result<()> {
        // The PKCS#1 form of the same RSA key, as lettre reads it.
        let (pkcs1, _) = parse_dkim_key(TEST_RSA_PKCS8)?;
        assert!(pkcs1.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
        DkimSigner::new("s1", "acme.example", &pkcs1)?;
        // A bare base64 Ed25519 seed.
        DkimSigner::new("s1", "acme.example", "LP+MJGML7ZonUYZT/3Ibl+XBb6gjceLvcXTr24Aoc9Y=")?;
        for (selector, domain, key) in [
            ("s1", "acme.example", "not a key"),
            ("s1", "acme.example", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"),
            ("bad selector", "acme.example", TEST_ED25519_PKCS8),
            ("s1", "acme.example\r\nx", TEST_ED25519_PKCS8),
            ("s1", "localhost", TEST_ED25519_PKCS8),
        ] {
            assert!(matches!(DkimSigner::new(selector, domain, key), Err(Error::Invalid(_))), "{selector} {domain}");
        }
        Ok(())
    }

    #[test]
    fn shareable_across_tasks() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CompiledCampaign>();
        send_sync::<DkimSigner>();
    }

    #[test]
    fn body_format_parses() {
        assert_eq!("markdown".parse::<BodyFormat>().ok(), Some(BodyFormat::Markdown));
        assert_eq!(" HTML ".parse::<BodyFormat>().ok(), Some(BodyFormat::Html));
        assert!("rtf".parse::<BodyFormat>().is_err());
        assert_eq!(serde_json::to_string(&BodyFormat::Html).ok().as_deref(), Some("\"html\""));
    }

    /// Not a benchmark with assertions: prints the per-message cost.
    /// `cargo test -p herald-engine --release render::tests::throughput -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn throughput() -> anyhow::Result<()> {
        let body = "# Hello {{ reader.name | default(\"friend\") }}\n\n".to_string()
            + &"Some paragraph with **bold** text, a [link](https://acme.example/post?id=1) and \
                {{ reader.attributes.city | default(\"your city\") }}.\n\n"
                .repeat(30)
            + "- one\n- two\n- three\n\n[Unsubscribe]({{ unsubscribe_url }})\n";
        let c = CampaignContent {
            subject: "Weekly news for {{ reader.name }}".into(),
            preheader: "This week: {{ reader.attributes.city }}".into(),
            format: BodyFormat::Markdown,
            body,
        };
        let compiled = CompiledCampaign::compile(&c, &workspace())?;
        let attrs = serde_json::json!({ "city": "London", "plan": "pro" });
        let recipient = Recipient { email: "ada@example.org", name: "Ada", attributes: &attrs };
        let ctx = MessageContext { unsubscribe_url: UNSUB };
        let rsa = DkimSigner::new("herald", "acme.example", TEST_RSA_PKCS8)?;
        let ed = DkimSigner::new("herald", "acme.example", TEST_ED25519_PKCS8)?;
        for (label, signer, n) in
            [("no DKIM", None, 10_000u32), ("Ed25519", Some(&ed), 10_000), ("RSA", Some(&rsa), 2_000)]
        {
            let start = std::time::Instant::now();
            let mut render_time = std::time::Duration::ZERO;
            let mut bytes = 0;
            for _ in 0..n {
                let t = std::time::Instant::now();
                let r = compiled.render(&recipient, &ctx)?;
                render_time += t.elapsed();
                bytes += build_message(&r, &envelope(), signer)?.len();
            }
            let total = start.elapsed();
            println!(
                "{label}: {n} messages, {:.1} µs/message (render {:.1} µs), {} bytes each",
                total.as_secs_f64() * 1e6 / f64::from(n),
                render_time.as_secs_f64() * 1e6 / f64::from(n),
                bytes / n as usize
            );
        }
        Ok(())
    }
}
