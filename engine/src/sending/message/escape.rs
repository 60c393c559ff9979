use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Escape {
    /// `& < > " '` as entities.
    Html,
    /// HTML, plus backslash escapes for the Markdown punctuation that could start emphasis,
    /// code, links, tables or headings.
    Markdown,
    /// For URLs in Markdown: percent-encoding for HTML specials (but a bare `&`, which Markdown
    /// escapes itself) and for what could turn a URL into Markdown links, code or tables.
    MarkdownUrl,
}

pub(super) fn write_escaped(out: &mut impl fmt::Write, s: &str, mode: Escape) -> fmt::Result {
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

/// Herald's one HTML escape (also what [`Escape::Html`] writes inside templates).
pub(crate) use crate::sending::mail::escape_html;
