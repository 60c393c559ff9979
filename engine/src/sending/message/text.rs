use super::*;

/// The plain-text twin of an HTML body (links kept as `text (url)`), as campaigns get it.
pub fn html_to_text(html: &str) -> String {
    let mut text = TextConverter::default();
    text.feed(html);
    text.finish()
}

/// Elements whose content never reaches the text part.
pub(super) const SKIPPED: &[&str] = &["script", "style", "head", "title", "template", "noscript", "svg", "object"];
/// Elements that are paragraphs: a blank line before and after.
pub(super) const PARAGRAPHS: &[&str] =
    &["p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "table", "blockquote", "pre", "dl", "figure", "hr"];
/// Elements that start and end a line.
pub(super) const LINES: &[&str] = &[
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
///
/// Written here rather than taken from `html2text` (the well-kept crate for this): it runs once
/// per message on the send path, where a full HTML5 parse and layout (html5ever plus a
/// text renderer) costs several times the ≈ 20 µs this single pass does, and the text part
/// needs rules that crate does not have: `display:none` content (the preheader) dropped, and
/// links as `label (url)` with the tracked URL kept whole on one line.
#[derive(Default, Clone)]
pub(super) struct TextConverter {
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
    pub(super) fn feed(&mut self, html: &str) {
        self.feed_until(html, html.len());
    }

    /// Reads `html` as far as byte `stop`, the way reading all of it would, and says whether
    /// `stop` is where that reading starts a tag or a comment. Only then is the converter now
    /// exactly as it would be at `stop` in the whole of `html` (every lookahead while reading is
    /// forward, within the element it reads), so it can be cloned and fed whatever follows:
    /// a block body's unchanging start is read once per campaign this way, not per reader.
    /// `false` when `stop` falls inside text, a tag, a comment or a style sheet.
    pub(super) fn feed_until(&mut self, html: &str, stop: usize) -> bool {
        let bytes = html.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if i >= stop {
                return i == stop;
            }
            let lt = html[i..].find('<').map_or(bytes.len(), |p| p + i);
            if lt > stop {
                return false;
            }
            if lt > i {
                self.text(&html[i..lt]);
            }
            if lt == bytes.len() {
                break;
            }
            i = lt;
            if i == stop {
                return true;
            }
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
            // Lowercase already, as nearly every tag is: no allocation per tag.
            let raw_name = &html[name_start..name_end];
            let name: std::borrow::Cow<'_, str> = if raw_name.bytes().any(|b| b.is_ascii_uppercase()) {
                std::borrow::Cow::Owned(raw_name.to_ascii_lowercase())
            } else {
                std::borrow::Cow::Borrowed(raw_name)
            };
            let attrs = &html[name_end..tag_end.saturating_sub(1).max(name_end)];
            i = tag_end;
            if closing {
                self.end_tag(&name);
            } else {
                let self_closing = attrs.trim_end().ends_with('/');
                self.start_tag(&name, attrs);
                if SKIPPED.contains(&name.as_ref()) && !self_closing {
                    // Raw text: skip to the matching end tag.
                    let close = format!("</{name}");
                    let end = find_ascii_ci(html, &close, i).unwrap_or(bytes.len());
                    i = html[end..].find('>').map_or(bytes.len(), |p| end + p + 1);
                    self.end_tag(&name);
                }
            }
        }
        stop >= bytes.len()
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
    pub(super) fn break_lines(&mut self, n: u8) {
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

    pub(super) fn finish(self) -> String {
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

pub(super) fn is_void(name: &str) -> bool {
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
pub(super) fn find_tag_end(bytes: &[u8], from: usize) -> usize {
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
pub(super) fn attr(attrs: &str, name: &str) -> Option<String> {
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

pub(super) fn decode_entities(s: &str) -> String {
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
pub(super) fn decode_entity(s: &str) -> Option<(Option<char>, usize)> {
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
