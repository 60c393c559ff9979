//! Block documents to email-safe HTML, once per campaign.
//!
//! [`blocks_to_template`] writes the document as MJML and renders it with `mrml` (tables with
//! width attributes, Outlook's conditional comments, columns that stack on phones: the layout
//! rules of every mail client live in MJML, not here). What comes out is an HTML *template*:
//! the campaign is then compiled as an HTML body, so the sandbox evaluates only the merge tags
//! per reader and a block campaign costs per message what an HTML one does.
//!
//! Merge tags and the HTML block's markup never go through Markdown or MJML: each is swapped for
//! a private-use placeholder first and put back after, so nothing escapes `{{ "x" }}` into
//! `{{ &quot;x&quot; }}` and `mrml`'s parser never sees an author's half-closed tag.
//! `mrml` is built without its filesystem and HTTP include loaders and parses with the loader
//! that loads nothing, so an `<mj-include>` in a document cannot read a file or fetch a URL.

use std::borrow::Cow;
use std::fmt::Write as _;

use herald_types::{Block, BlockDocument, CONTENT_WIDTH, Colour};
use mrml::prelude::parser::ParserOptions;
use mrml::prelude::parser::noop_loader::NoopIncludeLoader;
use mrml::prelude::render::RenderOptions;

use super::{BODY, BlockAt, BodyFormat, TemplateError};

const MUTED_COLOR: &str = "#6b7280";

/// The verbatim pieces set aside while the document goes through Markdown and MJML, each
/// replaced by a placeholder `HRLD{nonce}N{index}E`. Placeholders are letters and digits only,
/// so no escaping touches them: not HTML's, not a URL's percent-encoding (pulldown-cmark encodes
/// link targets, mrml escapes attributes), not Markdown's. The nonce is chosen so the document
/// itself contains no `HRLD{nonce}N`, so no author text can pass for a placeholder.
struct SetAside {
    prefix: String,
    pieces: Vec<String>,
    /// The block field each piece came from (parallel to `pieces`), to name it in an error.
    owners: Vec<Option<BlockAt>>,
    /// The block field being written now.
    here: Option<BlockAt>,
}

impl SetAside {
    fn for_document(doc: &BlockDocument) -> SetAside {
        // Random, so an author cannot write one (Markdown decodes `&#72;RLD…` into the letters).
        let json = doc.to_json();
        loop {
            let prefix = format!("HRLD{:016x}N", rand::random::<u64>());
            if !json.contains(&prefix) {
                return SetAside { prefix, pieces: Vec::new(), owners: Vec::new(), here: None };
            }
        }
    }

    /// The pieces set aside from now on come from `field` of the block at `block`.
    fn enter(&mut self, block: &Place, field: &str) {
        self.here = Some(BlockAt { path: format!("{}.{field}", block.path), label: block.label.clone() });
    }

    fn placeholder(&mut self, verbatim: String) -> String {
        self.pieces.push(verbatim);
        self.owners.push(self.here.clone());
        format!("{}{}E", self.prefix, self.pieces.len() - 1)
    }

    /// `text` with every `{{ … }}`, `{% … %}` and `{# … #}` replaced by a placeholder. Put back,
    /// a tag is replaced by its value when the template runs, so its own quotes never reach the
    /// HTML (even inside an attribute). An unclosed tag is set aside with the rest of the text,
    /// unchanged: compiling reports it, and the error falls in this block's piece.
    fn tags(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find('{') {
            let close = match rest.as_bytes().get(start + 1) {
                Some(b'{') => "}}",
                Some(b'%') => "%}",
                Some(b'#') => "#}",
                _ => {
                    out.push_str(&rest[..=start]);
                    rest = &rest[start + 1..];
                    continue;
                }
            };
            let end = rest[start + 2..].find(close).map_or(rest.len(), |len| start + 2 + len + 2);
            out.push_str(&rest[..start]);
            out.push_str(&self.placeholder(rest[start..end].to_string()));
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }

    /// Puts every piece back, noting where each block's pieces landed.
    fn restore(&self, html: &str) -> (String, Vec<(std::ops::Range<usize>, BlockAt, String)>) {
        let mut out = String::with_capacity(html.len() + self.pieces.iter().map(String::len).sum::<usize>());
        let mut spans = Vec::new();
        let mut rest = html;
        while let Some(at) = rest.find(&self.prefix) {
            out.push_str(&rest[..at]);
            let after = &rest[at + self.prefix.len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let index = after[..digits].parse::<usize>().ok();
            match index.and_then(|i| self.pieces.get(i)) {
                Some(piece) if after[digits..].starts_with('E') => {
                    if let Some(owner) = index.and_then(|i| self.owners.get(i).cloned().flatten()) {
                        spans.push((out.len()..out.len() + piece.len(), owner, piece.clone()));
                    }
                    out.push_str(piece);
                    rest = &after[digits + 1..];
                }
                _ => {
                    out.push_str(&self.prefix);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        (out, spans)
    }

    fn leftover(&self, html: &str) -> bool {
        html.contains(&self.prefix)
    }
}

/// The body as the template sandbox reads it: a block document rendered to its HTML template,
/// any other format as written.
pub fn body_template(format: BodyFormat, body: &str) -> Result<Cow<'_, str>, TemplateError> {
    Ok(mapped_body_template(format, body)?.0)
}

/// [`body_template`], with where each block's merge tags are in it (none for other formats).
pub(crate) fn mapped_body_template(
    format: BodyFormat,
    body: &str,
) -> Result<(Cow<'_, str>, Option<BlockMap>), TemplateError> {
    if format != BodyFormat::Blocks {
        return Ok((Cow::Borrowed(body), None));
    }
    let doc = BlockDocument::parse(body).map_err(|e| TemplateError {
        field: BODY,
        line: None,
        column: None,
        message: e.to_string(),
        block: None,
    })?;
    let (html, map) = mapped_blocks_to_template(&doc)?;
    Ok((Cow::Owned(html), Some(map)))
}

/// Where each block's template pieces (merge tags, the HTML block's markup) are in the HTML
/// template, by line and column, so that an error there names the block the author wrote.
pub(crate) struct BlockMap {
    spans: Vec<Span>,
}

struct Span {
    /// 1-based line and column (in characters) where the piece starts, and where it ends.
    start: (usize, usize),
    end: (usize, usize),
    at: BlockAt,
    piece: String,
}

impl BlockMap {
    fn new(html: &str, spans: Vec<(std::ops::Range<usize>, BlockAt, String)>) -> Self {
        // One pass over the HTML turns every byte offset into its line and column.
        let mut offsets: Vec<usize> = spans.iter().flat_map(|(r, ..)| [r.start, r.end]).collect();
        offsets.sort_unstable();
        offsets.dedup();
        let mut positions = std::collections::HashMap::with_capacity(offsets.len());
        let (mut line, mut column, mut next) = (1, 1, offsets.iter().peekable());
        for (at, c) in html.char_indices().chain(std::iter::once((html.len(), '\0'))) {
            while let Some(&&offset) = next.peek().filter(|&&&o| o <= at) {
                positions.insert(offset, (line, column));
                next.next();
            }
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        let spans = spans
            .into_iter()
            .filter_map(|(r, at, piece)| {
                Some(Span { start: *positions.get(&r.start)?, end: *positions.get(&r.end)?, at, piece })
            })
            .collect();
        BlockMap { spans }
    }

    /// `error` with the block it falls in named: the piece that holds its position; else (a tag
    /// left open is reported where the template ends or goes wrong after it) the first block
    /// field whose pieces do not parse on their own; else the last piece before it.
    pub(crate) fn name(&self, mut error: TemplateError) -> TemplateError {
        let Some(line) = error.line.filter(|_| error.field == BODY && error.block.is_none()) else { return error };
        let at = (line, error.column.unwrap_or(1));
        let holding = self.spans.iter().find(|s| s.start <= at && at < s.end);
        let open = || self.first_unparsable();
        let before = || self.spans.iter().rev().find(|s| s.start <= at);
        error.block = holding.or_else(open).or_else(before).map(|s| Box::new(s.at.clone()));
        error
    }

    /// The first span of the first block field whose pieces, put together, are not a template
    /// on their own (parsing only: nothing is evaluated outside the sandbox).
    fn first_unparsable(&self) -> Option<&Span> {
        let mut i = 0;
        while let Some(first) = self.spans.get(i) {
            let same = self.spans[i..].iter().take_while(|s| s.at == first.at).count();
            let source: String = self.spans[i..i + same].iter().map(|s| s.piece.as_str()).collect();
            if minijinja::Environment::new().template_from_str(&source).is_err() {
                return Some(first);
            }
            i += same;
        }
        None
    }
}

/// A block's path and label as it is written, for [`SetAside::enter`].
struct Place {
    path: String,
    label: String,
}

impl Place {
    /// The `i`th (0-based) block of `blocks`, inside `parent` (none at the top).
    fn of(parent: Option<&Place>, i: usize, block: &Block) -> Place {
        let label = format!("block {} ({})", i + 1, block.label());
        match parent {
            None => Place { path: format!("body.blocks.{i}"), label },
            Some(p) => Place { path: format!("{}.blocks.{i}", p.path), label: format!("{}, {label}", p.label) },
        }
    }

    /// Column `c` (0-based) of a columns block.
    fn column(&self, c: usize) -> Place {
        Place { path: format!("{}.columns.{c}", self.path), label: format!("{}, column {}", self.label, c + 1) }
    }
}

/// The document as an HTML template: a whole `<html>` document whose merge tags are still to be
/// evaluated per reader. Errors are the document's (`mrml` refusing what was written).
pub fn blocks_to_template(doc: &BlockDocument) -> Result<String, TemplateError> {
    Ok(mapped_blocks_to_template(doc)?.0)
}

fn mapped_blocks_to_template(doc: &BlockDocument) -> Result<(String, BlockMap), TemplateError> {
    let mut aside = SetAside::for_document(doc);
    let mut mjml = String::with_capacity(4096);
    // Every value here is a checked `#rrggbb` colour or a constant font stack: nothing to escape.
    let theme = &doc.theme;
    let (font, text, accent, background) = (theme.font.stack(), &theme.text, &theme.accent, &theme.background);
    let on_accent = accent.readable_text();
    let _ = write!(
        mjml,
        "<mjml><mj-head><mj-attributes>\
         <mj-all font-family=\"{font}\" />\
         <mj-text font-size=\"16px\" line-height=\"1.6\" color=\"{text}\" padding=\"8px 24px\" />\
         <mj-image padding=\"8px 0\" />\
         <mj-button background-color=\"{accent}\" color=\"{on_accent}\" font-size=\"16px\" font-weight=\"600\" border-radius=\"6px\" inner-padding=\"12px 24px\" padding=\"12px 24px\" />\
         <mj-divider border-color=\"#e5e7eb\" border-width=\"1px\" padding=\"12px 24px\" />\
         </mj-attributes><mj-style>a {{ color: {accent}; }} p {{ margin: 0 0 12px 0; }} h1, h2, h3 {{ margin: 0; line-height: 1.3; }}</mj-style></mj-head>\
         <mj-body width=\"{CONTENT_WIDTH}px\" background-color=\"{background}\">\
         <mj-wrapper padding=\"24px 0\"><mj-section background-color=\"#ffffff\" padding=\"16px 0\"><mj-column>"
    );
    write_blocks(&mut mjml, &mut aside, accent, &doc.blocks, None);
    mjml.push_str("</mj-column></mj-section></mj-wrapper></mj-body></mjml>");

    let options = ParserOptions { include_loader: Box::new(NoopIncludeLoader) };
    let failed = |stage: &str, e: &dyn std::fmt::Display| TemplateError {
        field: BODY,
        line: None,
        column: None,
        message: format!("the blocks could not be {stage}: {e}"),
        block: None,
    };
    let parsed = mrml::parse_with_options(&mjml, &options).map_err(|e| failed("read", &e))?;
    let render = RenderOptions { disable_comments: true, social_icon_origin: None, fonts: Default::default() };
    let html = parsed.element.render(&render).map_err(|e| failed("laid out", &e))?;
    let (html, spans) = aside.restore(&html);
    if aside.leftover(&html) {
        // A placeholder was changed on its way through (it never should be): sending it would
        // show readers a code instead of their name.
        return Err(failed("put together", &"a merge tag was lost"));
    }
    let map = BlockMap::new(&html, spans);
    Ok((html, map))
}

/// Blocks that are only text: a run of them shares one `<mj-text>` cell. Every cell is a table
/// row with the font and colours written out again, about 250 bytes in every message sent, and
/// a message's bytes are what link rewriting, the text version, MIME and DKIM cost per reader:
/// a document of ten paragraphs costs as much per message as the same text in Markdown. Not the
/// HTML block: its markup is the author's, and an unclosed `<a>` or a stray `</div>` must spoil
/// only its own cell, never the blocks around it.
fn is_text(block: &Block) -> bool {
    matches!(block, Block::Heading { .. } | Block::Paragraph { .. } | Block::Quote { .. } | Block::Code { .. })
}

/// `blocks` inside the running `<mj-column>`: runs of text in one cell each, columns (top
/// level only: `column` is none) in a section of their own.
fn write_blocks(mjml: &mut String, aside: &mut SetAside, accent: &Colour, blocks: &[Block], column: Option<&Place>) {
    let mut in_text = false;
    for (i, block) in blocks.iter().enumerate() {
        let place = Place::of(column, i, block);
        let text = is_text(block);
        if text != in_text {
            mjml.push_str(if text { "<mj-text>" } else { "</mj-text>" });
            in_text = text;
        }
        match block {
            _ if text => write_text(mjml, aside, &place, block),
            Block::Columns { columns } if column.is_none() => {
                // Columns need a section of their own: close the running one and open another.
                mjml.push_str("</mj-column></mj-section><mj-section background-color=\"#ffffff\" padding=\"0\">");
                for (c, inner) in columns.iter().enumerate() {
                    mjml.push_str("<mj-column>");
                    write_blocks(mjml, aside, accent, &inner.blocks, Some(&place.column(c)));
                    mjml.push_str("</mj-column>");
                }
                mjml.push_str("</mj-section><mj-section background-color=\"#ffffff\" padding=\"0\"><mj-column>");
            }
            other => write_block(mjml, aside, accent, &place, other),
        }
    }
    if in_text {
        mjml.push_str("</mj-text>");
    }
}

/// A text block's HTML, inside a shared `<mj-text>`. Each ends with a 12 px margin, as a
/// paragraph does, so the run is spaced like separate cells were.
fn write_text(mjml: &mut String, aside: &mut SetAside, place: &Place, block: &Block) {
    aside.enter(place, "text");
    match block {
        Block::Heading { text, level } => {
            let level = (*level).clamp(1, 3);
            let size = [28, 22, 18][usize::from(level - 1)];
            let _ = write!(
                mjml,
                "<h{level} style=\"font-size:{size}px;font-weight:700;margin:0 0 12px 0;\">{}</h{level}>",
                escape(&aside.tags(text))
            );
        }
        Block::Paragraph { text } => mjml.push_str(&markdown(aside, text)),
        Block::Quote { text } => {
            let _ = write!(
                mjml,
                "<blockquote style=\"margin:0 0 12px 0;border-left:3px solid #e5e7eb;padding-left:12px;color:#4b5563;\">{}</blockquote>",
                markdown(aside, text)
            );
        }
        Block::Code { text } => {
            // Shown as written: its braces become entities, so `{{ … }}` in code is not a tag.
            let _ = write!(
                mjml,
                "<pre style=\"margin:0 0 12px 0;background:#f3f4f6;padding:12px;white-space:pre-wrap;font-family:Menlo,Consolas,monospace;font-size:13px;\">{}</pre>",
                escape(text).replace('{', "&#123;").replace('}', "&#125;")
            );
        }
        // Not text: written by `write_block`.
        _ => {}
    }
}

/// A block that is not text ([`is_text`]), as MJML of its own.
fn write_block(mjml: &mut String, aside: &mut SetAside, accent: &Colour, place: &Place, block: &Block) {
    aside.enter(place, "text");
    match block {
        Block::Footer { text } => {
            let _ = write!(
                mjml,
                "<mj-text font-size=\"12px\" line-height=\"1.5\" color=\"{MUTED_COLOR}\" align=\"center\" padding=\"16px 24px 8px 24px\">{}</mj-text>",
                markdown(aside, text)
            );
        }
        Block::Image { src, alt, href, width } => {
            let width = (*width).clamp(16, CONTENT_WIDTH);
            aside.enter(place, "src");
            let src = attribute(&aside.tags(src));
            aside.enter(place, "alt");
            let alt = attribute(&aside.tags(alt));
            let _ = write!(mjml, "<mj-image src=\"{src}\" alt=\"{alt}\" width=\"{width}px\"");
            if !href.trim().is_empty() {
                aside.enter(place, "href");
                let _ = write!(mjml, " href=\"{}\"", attribute(&aside.tags(href.trim())));
            }
            mjml.push_str(" />");
        }
        Block::Button { label, href } => {
            aside.enter(place, "href");
            let href = attribute(&aside.tags(href.trim()));
            aside.enter(place, "label");
            let _ = write!(mjml, "<mj-button href=\"{href}\">{}</mj-button>", escape(&aside.tags(label)));
        }
        Block::Divider => mjml.push_str("<mj-divider />"),
        Block::Spacer { height } => {
            let _ = write!(mjml, "<mj-spacer height=\"{}px\" />", (*height).clamp(4, 120));
        }
        Block::Social { links } => {
            // Text links, not mj-social's icons: those load from Mailjet's servers.
            mjml.push_str("<mj-text align=\"center\">");
            for (i, link) in links.iter().enumerate() {
                if i > 0 {
                    mjml.push_str(" &middot; ");
                }
                aside.enter(place, &format!("links.{i}.url"));
                let url = attribute(&aside.tags(link.url.trim()));
                aside.enter(place, &format!("links.{i}.label"));
                let _ = write!(
                    mjml,
                    "<a href=\"{url}\" style=\"color:{accent};font-weight:600;text-decoration:none;\">{}</a>",
                    escape(&aside.tags(&link.label))
                );
            }
            mjml.push_str("</mj-text>");
        }
        // Columns inside columns are refused on save; rendered flat should one get here.
        Block::Columns { columns } => {
            let inner: Vec<Block> = columns.iter().flat_map(|c| c.blocks.iter().cloned()).collect();
            write_blocks(mjml, aside, accent, &inner, Some(&place.column(0)));
        }
        Block::Html { html } => {
            aside.enter(place, "html");
            let _ = write!(mjml, "<mj-text>{}</mj-text>", aside.placeholder(html.clone()));
        }
        // Text: written by `write_text`, in a shared cell.
        Block::Heading { .. } | Block::Paragraph { .. } | Block::Quote { .. } | Block::Code { .. } => {
            mjml.push_str("<mj-text>");
            write_text(mjml, aside, place, block);
            mjml.push_str("</mj-text>");
        }
    }
}

/// Markdown to HTML, with raw HTML shown as text: formatting comes from Markdown here, markup
/// from the HTML block.
fn markdown(aside: &mut SetAside, text: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, html};
    let protected = aside.tags(text);
    let parser = Parser::new_ext(&protected, Options::ENABLE_STRIKETHROUGH).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut out = String::with_capacity(protected.len() + protected.len() / 2);
    html::push_html(&mut out, parser);
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn attribute(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_types::{Column, SocialLink};

    fn fixture() -> BlockDocument {
        BlockDocument::parse(include_str!("../../../../types/tests/fixtures/blocks_v1.json")).expect("fixture")
    }

    /// Each `<tag …>` opening tag in `html`.
    fn tags<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
        let open = format!("<{name}");
        let mut found = Vec::new();
        let mut at = 0;
        while let Some(i) = html[at..].find(&open).map(|i| i + at) {
            let end = html[i..].find('>').map_or(html.len(), |e| i + e + 1);
            let next = html.as_bytes().get(i + open.len()).copied().unwrap_or(b' ');
            if next == b' ' || next == b'>' || next == b'/' {
                found.push(&html[i..end]);
            }
            at = end;
        }
        found
    }

    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let key = format!(" {name}=\"");
        let start = tag.find(&key)? + key.len();
        Some(&tag[start..start + tag[start..].find('"')?])
    }

    #[test]
    fn the_layout_is_tables_with_widths_no_wider_than_600() {
        let html = blocks_to_template(&fixture()).expect("renders");
        let tables = tags(&html, "table");
        assert!(tables.len() >= 5, "the layout is built from tables: {}", tables.len());
        assert!(tables.iter().any(|t| attr(t, "width") == Some("600")), "a 600-wide table holds the content");
        for tag in tags(&html, "table").iter().chain(&tags(&html, "td")).chain(&tags(&html, "img")) {
            if let Some(width) = attr(tag, "width").and_then(|w| w.trim_end_matches("px").parse::<u32>().ok()) {
                assert!(width <= 600, "wider than 600 px: {tag}");
            }
        }
        assert!(!html.contains("max-width:601") && !html.contains("width:700"), "nothing is laid out wider");
    }

    #[test]
    fn images_have_alt_text_and_explicit_widths() {
        let html = blocks_to_template(&fixture()).expect("renders");
        let images = tags(&html, "img");
        assert_eq!(images.len(), 2, "{images:?}");
        for img in &images {
            assert!(attr(img, "alt").is_some_and(|a| !a.is_empty()), "no alt: {img}");
            let width: u32 = attr(img, "width").and_then(|w| w.parse().ok()).unwrap_or(0);
            assert!((16..=600).contains(&width), "no explicit width: {img}");
        }
        assert!(images.iter().any(|i| attr(i, "alt") == Some("A tulip field") && attr(i, "width") == Some("560")));
        // A linked image is wrapped in its link.
        assert!(html.contains("href=\"https://example.com/tulips\""), "the image's link");
    }

    #[test]
    fn buttons_and_social_links_are_links() {
        let html = blocks_to_template(&fixture()).expect("renders");
        let links = tags(&html, "a");
        let button = links
            .iter()
            .find(|a| attr(a, "href").is_some_and(|h| h.starts_with("https://example.com/story")))
            .expect("the button is an <a>");
        assert_eq!(attr(button, "href"), Some("https://example.com/story?r={{ reader.email }}"));
        let after = &html[html.find(button).unwrap_or(0)..];
        assert!(after[..after.find("</a>").unwrap_or(0)].contains("Read the story"), "the label is the link's text");
        assert!(links.iter().any(|a| attr(a, "href") == Some("https://mastodon.example/@herald")));
        assert!(!html.contains("mailjet.com"), "no icons from someone else's server");
    }

    #[test]
    fn merge_tags_markdown_and_raw_html_survive_as_written() {
        let html = blocks_to_template(&fixture()).expect("renders");
        // Tags come back exactly as written; nothing was escaped.
        assert!(
            html.contains("Hi {{ reader.name | default(\"there\") }}, <strong>bold</strong>, <em>italic</em>"),
            "{html}"
        );
        assert!(html.contains("<a href=\"https://example.com/a?b=1&amp;c=2\">link</a>"), "{html}");
        assert!(html.contains("<li>one</li>"));
        assert!(
            html.contains("<p style=\"color:#b91c1c\">Raw <b>HTML</b></p>"),
            "the HTML block is kept byte for byte"
        );
        assert!(html.contains("let x = 1 &lt; 2;"), "code is escaped");
        let code = BlockDocument {
            version: 1,
            theme: Default::default(),
            blocks: vec![Block::Code { text: "println!(\"{{}}\", x);".into() }],
        };
        let code = blocks_to_template(&code).expect("renders");
        assert!(
            code.contains("println!(&quot;&#123;&#123;&#125;&#125;&quot;, x);")
                || code.contains("println!(\"&#123;&#123;&#125;&#125;\", x);"),
            "{code}"
        );
        assert!(html.contains("<a href=\"{{ unsubscribe_url }}\">Unsubscribe</a>"), "{html}");
        assert!(!html.contains("HRLD"), "every placeholder is put back");
    }

    #[test]
    fn raw_html_in_a_paragraph_is_text_and_includes_load_nothing() {
        let doc = BlockDocument {
            version: 1,
            theme: Default::default(),
            blocks: vec![
                Block::Paragraph { text: "<script>alert(1)</script> <mj-include path=\"/etc/passwd\" />".into() },
                Block::Columns { columns: vec![Column::default(), Column { blocks: vec![Block::Divider] }] },
                Block::Social {
                    links: vec![SocialLink {
                        label: "A \"quoted\" <b>".into(),
                        url: "https://x.example/?a=\"b\"".into(),
                    }],
                },
            ],
        };
        let html = blocks_to_template(&doc).expect("renders");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(!html.contains("<script>") && !html.contains("root:"), "{html}");
        assert!(html.contains("A &quot;quoted&quot; &lt;b&gt;") || html.contains("A \"quoted\" &lt;b&gt;"), "{html}");
        // An include written straight into MJML by someone who got past the blocks loads nothing.
        let options = ParserOptions { include_loader: Box::new(NoopIncludeLoader) };
        let include = "<mjml><mj-body><mj-include path=\"/etc/passwd\" /></mj-body></mjml>";
        assert!(mrml::parse_with_options(include, &options).is_err());
    }

    #[test]
    fn the_theme_colours_and_font_reach_the_mail() {
        use herald_types::{Font, Theme};
        let theme = Theme {
            accent: Colour::parse("#FDE047").expect("colour"),
            background: Colour::parse("#102030").expect("colour"),
            text: Colour::parse("#0a0b0c").expect("colour"),
            font: Font::Serif,
        };
        let doc = BlockDocument { theme, ..fixture() };
        let html = blocks_to_template(&doc).expect("renders");
        assert!(html.contains("#fde047") && html.contains("#102030") && html.contains("#0a0b0c"), "{html}");
        assert!(html.contains("Georgia"), "the serif stack: {html}");
        // A light accent gets a dark button label, so the button stays readable.
        assert!(html.contains("color:#111827"), "{html}");
        let plain = blocks_to_template(&fixture()).expect("renders");
        assert!(!plain.contains("#fde047") && plain.contains("#2563eb") && !plain.contains("Georgia"));
    }

    #[test]
    fn a_run_of_text_blocks_is_one_cell() {
        let doc = |blocks: Vec<Block>| BlockDocument { blocks, ..BlockDocument::default() };
        let cells = |html: &str| html.matches("word-break:break-word").count();
        let paragraph = |t: &str| Block::Paragraph { text: t.into() };
        let one = blocks_to_template(&doc(vec![paragraph("First")])).expect("renders");
        let run = vec![
            Block::Heading { text: "Title".into(), level: 1 },
            paragraph("First"),
            Block::Quote { text: "Said".into() },
            paragraph("Second"),
            Block::Code { text: "x = 1".into() },
        ];
        let many = blocks_to_template(&doc(run)).expect("renders");
        assert_eq!(cells(&many), cells(&one), "{many}");
        // In order, each spaced like a paragraph.
        let at = |needle: &str| many.find(needle).unwrap_or_else(|| panic!("{needle} missing: {many}"));
        assert!(at("Title") < at("First") && at("First") < at("Said") && at("Said") < at("Second"));
        assert!(at("Second") < at("x = 1"));
        assert!(many.contains("<h1 style=\"font-size:28px;font-weight:700;margin:0 0 12px 0;\">Title</h1>"), "{many}");
        // A button between two runs makes two text cells and its own.
        let split = blocks_to_template(&doc(vec![
            paragraph("First"),
            Block::Button { label: "Go".into(), href: "https://example.com".into() },
            paragraph("Second"),
        ]))
        .expect("renders");
        assert!(cells(&split) > cells(&one), "{split}");
        // Unbalanced author HTML keeps to its own cell: the paragraphs around it are cells of
        // their own, outside its reach.
        for raw in ["<a href=\"https://example.com\"><b>", "</div></td>", "<div style=\"display:none\">"] {
            let html = blocks_to_template(&doc(vec![
                paragraph("Before"),
                Block::Html { html: raw.into() },
                paragraph("After"),
            ]))
            .expect("renders");
            assert_eq!(cells(&html), 3 * cells(&one), "{raw}: {html}");
        }
    }
}
