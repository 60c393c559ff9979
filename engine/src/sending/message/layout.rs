use super::*;

pub(super) const FONT: &str =
    "font-family:-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;";

pub(super) const HEAD_START: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"x-apple-disable-message-reformatting\">\n<title>";

pub(super) const HEAD_END: &str = "</title>\n<style>\n\
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

pub(super) const PREHEADER_START: &str = "<span style=\"display:none!important;visibility:hidden;mso-hide:all;font-size:1px;\
line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;color:transparent;\">";

/// Padding after the preheader so inbox previews do not run on into the body text.
pub(super) const PREHEADER_PAD: &str = "&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;\
&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;\
&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;";

pub(super) const OUTER_START: &str = "<table role=\"presentation\" class=\"herald-layout\" width=\"100%\" cellpadding=\"0\" \
cellspacing=\"0\" border=\"0\" style=\"background-color:#f4f4f5;\">\n<tr><td align=\"center\" \
style=\"padding:24px 12px;border:0;\">\n<table role=\"presentation\" class=\"herald-layout\" width=\"100%\" \
cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"max-width:600px;\">\n<tr><td style=\"background-color:#ffffff;\
border-radius:6px;padding:32px;border:0;font-size:16px;line-height:1.6;color:#1f2937;";

pub(super) const FOOTER_START: &str = "</td></tr>\n<tr><td style=\"padding:16px 32px;border:0;font-size:12px;line-height:1.5;\
color:#6b7280;text-align:center;";

pub(super) const OUTER_END: &str = "</td></tr>\n</table>\n</td></tr>\n</table>\n</body>\n</html>\n";

/// A reader's body as [`assemble_html`] puts it together.
pub(super) struct Body<'a> {
    /// The unchanging start of a block body (its head and outer tables), or empty.
    pub frame: &'a str,
    /// The rest, rendered for this reader.
    pub rest: &'a str,
    /// The open-tracking image, at the end of the body.
    pub pixel: Option<&'a str>,
}

/// The final HTML document. A body that is already a full document (it has a `<body>` tag, in
/// its frame when it has one) keeps its own layout and gets the preheader, the pixel and the
/// footer inserted into it.
pub(super) fn assemble_html(subject: &str, preheader: &str, body: Body<'_>, footer: &str) -> String {
    let Body { frame, rest, pixel } = body;
    let pixel = pixel.unwrap_or("");
    let mut preheader_html = String::new();
    if !preheader.is_empty() {
        preheader_html.reserve(PREHEADER_START.len() + preheader.len() + PREHEADER_PAD.len() + 16);
        preheader_html.push_str(PREHEADER_START);
        let _ = write_escaped(&mut preheader_html, preheader, Escape::Html);
        preheader_html.push_str(PREHEADER_PAD);
        preheader_html.push_str("</span>\n");
    }

    // Where the `<body …>` tag ends: in the frame, or in the rest when there is no frame.
    let body_open = |html: &str| find_ascii_ci(html, "<body", 0).and_then(|o| html[o..].find('>').map(|gt| o + gt + 1));
    let opened = if frame.is_empty() {
        body_open(rest).map(|at| ("", rest.split_at(at)))
    } else {
        body_open(frame).map(|at| (rest, frame.split_at(at)))
    };
    if let Some((after_frame, (before_open, after_open))) = opened {
        // `after_open` runs on into `after_frame`; `</body` is in the last of them.
        let (mid, last) = if frame.is_empty() { ("", after_open) } else { (after_open, after_frame) };
        let close = rfind_ascii_ci(last, "</body").unwrap_or(last.len());
        let mut html = String::with_capacity(
            frame.len() + rest.len() + preheader_html.len() + pixel.len() + footer.len() + FONT.len() + 160,
        );
        html.push_str(before_open);
        html.push('\n');
        html.push_str(&preheader_html);
        html.push_str(mid);
        html.push_str(&last[..close]);
        html.push_str(pixel);
        if !footer.is_empty() {
            html.push_str("<div style=\"padding:16px;font-size:12px;line-height:1.5;color:#6b7280;text-align:center;");
            html.push_str(FONT);
            html.push_str("\">");
            html.push_str(footer);
            html.push_str("</div>\n");
        }
        html.push_str(&last[close..]);
        return html;
    }
    debug_assert!(frame.is_empty(), "a frame always holds the <body> tag (Frame::of checks it)");
    let body = rest;

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
            + pixel.len()
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
    html.push_str(pixel);
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
pub(super) fn find_ascii_ci(haystack: &str, needle: &str, from: usize) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    let (&first, _) = n.split_first()?;
    // From one occurrence of the first byte to the next (`memchr`), not byte by byte.
    memchr::memchr2_iter(first.to_ascii_lowercase(), first.to_ascii_uppercase(), h.get(from..)?)
        .map(|i| from + i)
        .find(|&i| h.get(i..i + n.len()).is_some_and(|w| w.eq_ignore_ascii_case(n)))
}

pub(super) fn rfind_ascii_ci(haystack: &str, needle: &str) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    (0..=h.len().checked_sub(n.len())?).rev().find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}
