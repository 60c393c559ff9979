use super::*;

pub(super) const SUBJECT: &str = "subject";
pub(super) const PREHEADER: &str = "preheader";
pub(super) const BODY: &str = "body";

/// A rendered body larger than this is refused (Gmail clips at ~100 KB anyway).
pub(super) const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A campaign whose templates are parsed once and rendered per reader, in the template sandbox
/// ([`crate::sending::template_sandbox`]). `Send + Sync`: share it behind an `Arc` across sending tasks.
pub struct CompiledCampaign {
    templates: Arc<TemplateSet>,
    /// Whose renders these are, and whether they wait for a turn or are refused (see
    /// [`crate::sending::template_sandbox::admit`]).
    turn: Turn,
    format: BodyFormat,
    has_preheader: bool,
    /// A template mentions `web_version_url`: only then is each reader's link made.
    uses_web_version: bool,
    /// `{ name, postal_address }`, built once.
    workspace: Value,
    /// Non-empty address lines, raw and HTML-escaped, to check whether the body already has them.
    address_lines: Vec<(String, String)>,
    /// The escaped address with `<br>` between lines, for the footer.
    address_html: String,
    /// A block body's unchanging start, kept out of the per-reader work (see [`Frame`]).
    frame: Option<Frame>,
    /// Where a block body's merge tags came from, to name the block in an error.
    blocks: Option<BlockMap>,
}

fn too_large() -> TemplateError {
    TemplateError {
        field: BODY,
        line: None,
        column: None,
        message: format!("the rendered body is larger than {} MB", MAX_BODY_BYTES / (1024 * 1024)),
        block: None,
    }
}

/// The start of a block body that is the same for every reader: the head, its style sheets and
/// the outer tables, up to the first merge tag or link (about 4 KB of a typical 6 KB block
/// mail). It is set aside when the campaign is compiled, so per reader the template sandbox
/// renders, link tracking scans and the text version reads only what follows it, as they do
/// for a Markdown body, whose layout is added at the end in the same way. A block
/// campaign must cost no more per message than a Markdown one.
struct Frame {
    prefix: String,
    /// The text converter after reading `prefix` (which gives no text: the head is dropped).
    text: TextConverter,
    /// Which of the postal address's lines the prefix already shows.
    address_in_prefix: Vec<bool>,
    /// Lines and characters before the end of the prefix, to place a template error from the
    /// rest where it is in the whole body.
    lines: usize,
    last_line_chars: usize,
}

impl Frame {
    /// The frame of `body`, a whole HTML document, or `None` where none can be set aside.
    /// The prefix ends at a tag before the first merge tag (`{{`, `{%`, `{#`), `href` and `<a`
    /// tag, so it renders as itself, holds nothing link tracking reads, and the `<body>`
    /// tag the preheader follows; the text converter confirms that the cut falls between tags.
    fn of(body: &str, address_lines: &[(String, String)]) -> Option<Frame> {
        let first_tag = ["{{", "{%", "{#"].iter().filter_map(|t| body.find(t)).min().unwrap_or(body.len());
        let first_href = find_ascii_ci(body, "href", 0).unwrap_or(body.len());
        // Link tracking reads from `<a ` to its closing `>` honouring quotes, even in a comment:
        // with no `<a` tag in the prefix, its reading of the rest is its reading of the whole.
        let first_anchor = (0..)
            .scan(0, |from, _| {
                let at = find_ascii_ci(body, "<a", *from)?;
                *from = at + 2;
                Some(at)
            })
            .find(|&at| body.as_bytes().get(at + 2).is_some_and(|b| b.is_ascii_whitespace() || *b == b'>'))
            .unwrap_or(body.len());
        let interesting = first_tag.min(first_href).min(first_anchor);
        let cut = body[..interesting].rfind('<')?;
        let prefix = &body[..cut];
        // The preheader follows the `<body>` tag, so the prefix must hold all of it; the footer
        // and the open pixel go before `</body>`, so the rest must hold that (a document with
        // no merge tag or link would otherwise be all prefix).
        find_ascii_ci(prefix, "<body", 0).and_then(|o| prefix[o..].find('>'))?;
        find_ascii_ci(body, "</body", cut)?;
        let mut text = TextConverter::default();
        if !text.feed_until(body, cut) {
            return None;
        }
        let last_line = prefix.rfind('\n').map_or(prefix, |n| &prefix[n + 1..]);
        Some(Frame {
            prefix: prefix.to_string(),
            text,
            address_in_prefix: address_lines
                .iter()
                .map(|(raw, esc)| prefix.contains(esc) || prefix.contains(raw))
                .collect(),
            lines: prefix.matches('\n').count(),
            last_line_chars: last_line.chars().count(),
        })
    }

    /// An error in the rest of the body, placed in the whole body.
    fn place(&self, mut error: TemplateError) -> TemplateError {
        if error.field == BODY {
            if error.line == Some(1) {
                error.column = error.column.map(|c| c + self.last_line_chars);
            }
            error.line = error.line.map(|l| l + self.lines);
        }
        error
    }
}

impl fmt::Debug for CompiledCampaign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledCampaign").field("format", &self.format).finish_non_exhaustive()
    }
}

impl CompiledCampaign {
    /// Parses the three templates and test-renders them with a sample reader, so that syntax
    /// errors and unknown filters or functions are reported now, with their position. `Err`
    /// only when a request's `turn` is refused; a template's own error is the inner `Err`.
    pub async fn compile(
        content: &CampaignContent,
        workspace: &Workspace,
        turn: Turn,
    ) -> Result<Result<Self, TemplateError>, Busy> {
        // A block document becomes its HTML template here, once per campaign.
        let (body, blocks) = match mapped_body_template(content.format, &content.body) {
            Ok((body, blocks)) => (body.into_owned(), blocks),
            Err(e) => return Ok(Err(e)),
        };
        let uses_web_version =
            [&content.subject, &content.preheader, &body].iter().any(|t| t.contains("web_version_url"));
        let address_lines: Vec<(String, String)> = workspace
            .postal_address
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| (l.to_string(), escape_html(l)))
            .collect();
        // Only block bodies: Herald wrote their HTML, so their frame is found the same way in
        // every campaign; an author's own HTML document is rendered whole, as written.
        let frame = (content.format == BodyFormat::Blocks).then(|| Frame::of(&body, &address_lines)).flatten();
        let rest = match &frame {
            Some(f) => body[f.prefix.len()..].to_string(),
            None => body,
        };
        let parsed = TemplateSet::parse(
            Dialect::Campaign { markdown: content.format == BodyFormat::Markdown },
            vec![(SUBJECT, content.subject.clone()), (PREHEADER, content.preheader.clone()), (BODY, rest)],
        );
        let templates = match parsed {
            Ok(t) => Arc::new(t),
            Err(e) => {
                let e = frame.as_ref().map_or(e.clone(), |f| f.place(e));
                return Ok(Err(blocks.as_ref().map_or(e.clone(), |b| b.name(e))));
            }
        };

        let address_html = address_lines.iter().map(|(_, e)| e.as_str()).collect::<Vec<_>>().join("<br>");

        let compiled = CompiledCampaign {
            templates,
            turn,
            format: content.format,
            has_preheader: !content.preheader.trim().is_empty(),
            uses_web_version,
            workspace: Value::from_serialize(workspace),
            address_lines,
            address_html,
            frame,
            blocks,
        };
        // Test-render for a reader without name or attributes. Mistakes in the template itself
        // (an unknown filter, function or test, wrong arguments, a runaway loop, a template that
        // needs too much memory) fail now; errors that depend on data (`length` of a missing
        // attribute) only fail the readers they concern.
        let sample_attributes = serde_json::Value::Object(serde_json::Map::new());
        let sample = Recipient { email: "reader@example.com", name: "", attributes: &sample_attributes };
        let vars = compiled.vars(
            &sample,
            &MessageContext {
                unsubscribe_url: "https://example.com/unsubscribe",
                web_version_url: "https://example.com/v/sample",
            },
        );
        let outcomes = compiled.templates.render(turn, &[SUBJECT, PREHEADER, BODY], &vars).await?;
        for outcome in &outcomes {
            if let Err(RenderFailure { error, mistake: true }) = outcome {
                return Ok(Err(compiled.place(error.clone())));
            }
        }
        // The sandbox capped only the rest of a framed body; whole, it is refused now, as a body
        // rendered whole is refused by the sandbox's cap, not later for every reader.
        if let Some(Ok(body)) = outcomes.get(2)
            && compiled.whole_len(body) > MAX_BODY_BYTES
        {
            return Ok(Err(too_large()));
        }
        Ok(Ok(compiled))
    }

    /// The length of the body whose rest is `rest`: with its frame's prefix, when it has one.
    fn whole_len(&self, rest: &str) -> usize {
        rest.len() + self.frame.as_ref().map_or(0, |f| f.prefix.len())
    }

    pub fn format(&self) -> BodyFormat {
        self.format
    }

    /// Whether the mail links each reader's web version (so the sender must make the links).
    pub fn uses_web_version(&self) -> bool {
        self.uses_web_version
    }

    /// Renders the message for one reader.
    pub async fn render(
        &self,
        recipient: &Recipient<'_>,
        ctx: &MessageContext<'_>,
    ) -> Result<Result<Rendered, TemplateError>, Busy> {
        Ok(self.render_body(recipient, ctx).await?.map(|body| self.assemble(body, ctx, None)))
    }

    /// The personalised parts, before links are rewritten for tracking.
    pub async fn render_body(
        &self,
        recipient: &Recipient<'_>,
        ctx: &MessageContext<'_>,
    ) -> Result<Result<RenderedBody, TemplateError>, Busy> {
        Ok(self.render_bodies(&[(recipient, ctx, None)]).await?.pop().unwrap_or_else(|| {
            Err(TemplateError {
                field: BODY,
                line: None,
                column: None,
                message: "nothing was rendered".into(),
                block: None,
            })
        }))
    }

    /// The personalised parts for several readers (with each one's data for a recurring
    /// edition, `{{ feed.… }}`) in one round trip to the template sandbox: a send renders each
    /// claimed batch at once.
    pub async fn render_bodies(
        &self,
        readers: &[(&Recipient<'_>, &MessageContext<'_>, Option<&serde_json::Value>)],
    ) -> Result<Vec<Result<RenderedBody, TemplateError>>, Busy> {
        let vars: Vec<Value> = readers
            .iter()
            .map(|(recipient, ctx, feed)| {
                let vars = self.vars(recipient, ctx);
                match feed {
                    // An automation's mail calls it `event` (the data the trigger carried).
                    Some(feed) => {
                        let feed = Value::from_serialize(feed);
                        minijinja::context! { feed => feed.clone(), event => feed, ..vars }
                    }
                    None => vars,
                }
            })
            .collect();
        // The first failure, in this order, wins.
        let names: &[&'static str] = if self.has_preheader { &[SUBJECT, PREHEADER, BODY] } else { &[SUBJECT, BODY] };
        let outcomes = self.templates.render_each(self.turn, names, &vars).await?;
        Ok(outcomes.into_iter().map(|outcomes| self.body_from(outcomes)).collect())
    }

    /// A template error placed in the body as the author's template has it.
    fn place(&self, error: TemplateError) -> TemplateError {
        let error = match &self.frame {
            Some(frame) => frame.place(error),
            None => error,
        };
        match &self.blocks {
            Some(blocks) => blocks.name(error),
            None => error,
        }
    }

    fn body_from(&self, outcomes: Vec<Result<String, RenderFailure>>) -> Result<RenderedBody, TemplateError> {
        let mut outcomes = outcomes.into_iter();
        let mut next = || outcomes.next().unwrap_or_else(|| Ok(String::new())).map_err(|f| self.place(f.error));
        let subject = single_line(&next()?);
        let preheader = if self.has_preheader { single_line(&next()?) } else { String::new() };
        let rendered = next()?;
        let body = match self.format {
            BodyFormat::Markdown => markdown_to_html(&rendered),
            BodyFormat::Html | BodyFormat::Blocks => rendered,
        };
        if self.whole_len(&body) > MAX_BODY_BYTES {
            return Err(too_large());
        }
        Ok(RenderedBody { subject, preheader, body })
    }

    /// The full HTML and text versions: layout, footer and, when tracking, the open pixel (at
    /// the end of the body, so the text version never shows it).
    pub fn assemble(&self, parts: RenderedBody, ctx: &MessageContext<'_>, open_pixel_url: Option<&str>) -> Rendered {
        let RenderedBody { subject, preheader, body } = parts;
        let footer = self.footer(&body, ctx.unsubscribe_url);
        let mut text = self.frame.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        text.feed(&body);
        text.break_lines(2);
        text.feed(&footer);
        let pixel = open_pixel_url.map(|url| {
            format!(
                "<img src=\"{}\" width=\"1\" height=\"1\" alt=\"\" style=\"display:block;width:1px;height:1px;border:0;\">",
                escape_html(url)
            )
        });
        let frame = self.frame.as_ref().map_or("", |f| f.prefix.as_str());
        let html = assemble_html(&subject, &preheader, Body { frame, rest: &body, pixel: pixel.as_deref() }, &footer);
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
                fields: Attributes(recipient.attributes),
            },
            unsubscribe_url => ctx.unsubscribe_url,
            web_version_url => ctx.web_version_url,
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
        let in_frame = |i: usize| self.frame.as_ref().is_some_and(|f| f.address_in_prefix[i]);
        let has_address = self
            .address_lines
            .iter()
            .enumerate()
            .all(|(i, (raw, esc))| in_frame(i) || body.contains(esc) || body.contains(raw));
        if !has_address {
            footer.push_str("<p style=\"margin:0;\">");
            footer.push_str(&self.address_html);
            footer.push_str("</p>");
        }
        footer
    }
}

#[derive(Serialize)]
pub(super) struct ReaderVars<'a> {
    email: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    attributes: Attributes<'a>,
    /// The same values under the name custom fields give them (`reader.fields.plan`).
    fields: Attributes<'a>,
}

/// Serializes reader attributes with `null` members left out, so they are undefined in
/// templates and `default(...)` applies to them. A non-object serializes as an empty map.
pub(super) struct Attributes<'a>(&'a serde_json::Value);

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

pub(super) struct AttributeValue<'a>(&'a serde_json::Value);

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
pub(super) fn looks_like_url(s: &str) -> bool {
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
    TemplateError { field, line, column, message, block: None }
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

pub(super) fn markdown_to_html(src: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let parser = Parser::new_ext(src, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH);
    let mut out = String::with_capacity(src.len() + src.len() / 2);
    html::push_html(&mut out, parser);
    out
}
