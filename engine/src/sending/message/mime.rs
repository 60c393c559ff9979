use super::*;

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

/// The multipart boundary. It starts with `=_`, which quoted-printable never writes (a literal
/// `=` is always `=3D`), so it cannot occur inside either part.
const BOUNDARY: &str = "=_herald_alternative";

/// Headers stay within this many characters a line where they can be folded (RFC 5322 §2.1.1).
const HEADER_LINE: usize = 78;

/// Builds the multipart/alternative message (text, then HTML) in its wire form, DKIM-signed
/// when `dkim` is given. Line breaks or control characters in any envelope field are refused.
///
/// Written here, in one pass, rather than with lettre's message builder: this runs once per
/// recipient, and building lettre's tree of parts, formatting it and then dot-stuffing it again
/// in the SMTP client was the largest part of Herald's own time per message (docs/benchmarks.md,
/// Benchmarks). The output uses CRLF line endings, quoted-printable parts with no line longer
/// than 76 characters, and never has a line that starts with a dot, so the SMTP client has
/// nothing to stuff.
pub fn build_message(rendered: &Rendered, env: &Envelope, dkim: Option<&DkimSigner>) -> Result<Vec<u8>> {
    let from = mailbox("sender", &env.from_name, &env.from_email)?;
    let to = mailbox("recipient", &env.to_name, &env.to_email)?;
    let message_id = message_id(&env.message_id)?;
    let reply_to = match env.reply_to.as_deref() {
        Some(reply_to) => {
            check_header_text("reply-to address", reply_to)?;
            if reply_to.trim().is_empty() { None } else { Some(mailbox("reply-to", "", reply_to)?) }
        }
        None => None,
    };
    // Transactional mail has no list to leave: an empty URL leaves the List-* headers out.
    let list_unsubscribe = if env.list_unsubscribe_url.trim().is_empty() {
        None
    } else {
        let unsubscribe = unsubscribe_url(&env.list_unsubscribe_url)?;
        let one_click = unsubscribe.starts_with("https://") || unsubscribe.starts_with("HTTPS://");
        let mut options = vec![format!("<{unsubscribe}>")];
        if let Some(mailto) = env.list_unsubscribe_mailto.as_deref() {
            check_header_text("unsubscribe mailto", mailto)?;
        }
        if let Some(mailto) = env.list_unsubscribe_mailto.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            options.push(format!("<{}>", mailto_uri(mailto)?));
        }
        Some((options, one_click))
    };
    let list_id = if env.list_id.trim().is_empty() { None } else { Some(list_id(&env.list_id)?) };
    check_header_text("Feedback-ID", &env.feedback_id)?;
    let feedback_id = env.feedback_id.trim();
    if !feedback_id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid("the Feedback-ID must be printable ASCII without spaces"));
    }

    let mut out = Vec::with_capacity(2048 + (rendered.text.len() + rendered.html.len()) * 11 / 10);
    write_header(&mut out, "From", &from);
    if let Some(reply_to) = &reply_to {
        write_header(&mut out, "Reply-To", reply_to);
    }
    write_header(&mut out, "To", &to);
    out.extend_from_slice(b"Subject: ");
    write_unstructured(&mut out, "Subject: ".len(), &single_line(&rendered.subject));
    out.extend_from_slice(b"\r\n");
    write_header(&mut out, "Date", &chrono::Utc::now().to_rfc2822());
    write_header(&mut out, "Message-ID", &format!("<{message_id}>"));
    if let Some((options, one_click)) = &list_unsubscribe {
        // One option a line when they do not fit on one.
        let joined = options.join(", ");
        if "List-Unsubscribe: ".len() + joined.len() <= HEADER_LINE {
            write_header(&mut out, "List-Unsubscribe", &joined);
        } else {
            write_header(&mut out, "List-Unsubscribe", &options.join(",\r\n "));
        }
        if *one_click {
            write_header(&mut out, "List-Unsubscribe-Post", "List-Unsubscribe=One-Click");
        }
    }
    if let Some(list_id) = &list_id {
        write_header(&mut out, "List-Id", list_id);
    }
    if !feedback_id.is_empty() {
        write_header(&mut out, "Feedback-ID", feedback_id);
    }
    write_header(&mut out, "MIME-Version", "1.0");
    write_header(&mut out, "Content-Type", &format!("multipart/alternative;\r\n boundary=\"{BOUNDARY}\""));
    out.extend_from_slice(b"\r\n");
    for (subtype, content) in [("plain", &rendered.text), ("html", &rendered.html)] {
        out.extend_from_slice(b"--");
        out.extend_from_slice(BOUNDARY.as_bytes());
        out.extend_from_slice(b"\r\nContent-Type: text/");
        out.extend_from_slice(subtype.as_bytes());
        out.extend_from_slice(b"; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n");
        write_quoted_printable(&mut out, content.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"--");
    out.extend_from_slice(BOUNDARY.as_bytes());
    out.extend_from_slice(b"--\r\n");

    match dkim {
        Some(signer) => {
            let mut signed = signer.signature_header(&out)?;
            signed.extend_from_slice(&out);
            Ok(signed)
        }
        None => Ok(out),
    }
}

fn write_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Text fit for a header as it is: printable ASCII, and nothing a reader would take for the
/// start of an encoded word.
fn is_plain_header_text(s: &str) -> bool {
    s.bytes().all(|b| (b' '..=b'~').contains(&b)) && !s.contains("=?")
}

/// An unstructured value (the subject), `start` characters into its line: folded at spaces
/// when plain ASCII, else as RFC 2047 encoded words.
pub(super) fn write_unstructured(out: &mut Vec<u8>, start: usize, value: &str) {
    // A word too long to fold would break the 998-character line limit: encode instead.
    if !is_plain_header_text(value) || value.split(' ').any(|w| w.len() > 900) {
        write_encoded_words(out, value);
        return;
    }
    let mut column = start;
    for (i, word) in value.split(' ').enumerate() {
        if i > 0 {
            if column + 1 + word.len() > HEADER_LINE && column > start {
                out.extend_from_slice(b"\r\n");
                column = 0;
            }
            out.push(b' ');
            column += 1;
        }
        out.extend_from_slice(word.as_bytes());
        column += word.len();
    }
}

/// `=?utf-8?b?…?=` words of at most 64 characters (so a header name and the first word fit on
/// a line), one a line after the first (RFC 2047 §2, §5); decoders ignore the folding between
/// encoded words.
pub(super) fn write_encoded_words(out: &mut Vec<u8>, value: &str) {
    use base64::Engine as _;
    // 39 bytes are 52 base64 characters: with `=?utf-8?b?` and `?=`, 64 a word.
    const CHUNK: usize = 39;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut rest = value;
    let mut first = true;
    while first || !rest.is_empty() {
        let mut end = rest.len().min(CHUNK);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (chunk, tail) = rest.split_at(end);
        if !first {
            out.extend_from_slice(b"\r\n ");
        }
        out.extend_from_slice(b"=?utf-8?b?");
        out.extend_from_slice(b64.encode(chunk.as_bytes()).as_bytes());
        out.extend_from_slice(b"?=");
        rest = tail;
        first = false;
    }
}

/// Quoted-printable (RFC 2045 §6.7): line breaks (LF or CRLF) become CRLF, lines are soft-broken
/// at 76 characters, `=`, control characters, non-ASCII bytes and whitespace at the end of a
/// line are escaped, and so is a dot at the start of a line (so no line of the message starts
/// with one, and nothing needs dot-stuffing on the wire).
pub(super) fn write_quoted_printable(out: &mut Vec<u8>, text: &[u8]) {
    let mut lines = text.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let more = lines.peek().is_some();
        // A CR is part of the line break only when an LF follows it.
        write_quoted_printable_line(out, if more { line.strip_suffix(b"\r").unwrap_or(line) } else { line });
        if more {
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Bytes quoted-printable writes as they are (anywhere but at the start of a line for `.`);
/// spaces and tabs are decided by position.
const QP_LITERAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = b'!';
    while b <= b'~' {
        table[b as usize] = b != b'=';
        b += 1;
    }
    table
};

fn write_quoted_printable_line(out: &mut Vec<u8>, line: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    // Characters a line may hold: the last one of a line may use the column a soft break's
    // `=` takes everywhere else.
    const WIDTH: usize = 76;
    let trailing_space = line.iter().rev().take_while(|&&b| b == b' ' || b == b'\t').count();
    let spaces_end = line.len() - trailing_space;
    let last = line.len().saturating_sub(1);
    let mut column = 0;
    for (i, &b) in line.iter().enumerate() {
        let literal = |column: usize| match b {
            b' ' | b'\t' => i < spaces_end,
            b'.' => column > 0,
            _ => QP_LITERAL[usize::from(b)],
        };
        let mut plain = literal(column);
        let room = if i == last { WIDTH } else { WIDTH - 1 };
        if column + if plain { 1 } else { 3 } > room {
            out.extend_from_slice(b"=\r\n");
            column = 0;
            plain = literal(0);
        }
        if plain {
            out.push(b);
            column += 1;
        } else {
            out.extend_from_slice(&[b'=', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
            column += 3;
        }
    }
}

pub(super) fn check_header_text(what: &str, value: &str) -> Result<()> {
    if value.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return Err(Error::invalid(format!("the {what} contains a line break or control character")));
    }
    Ok(())
}

/// `name <address>` or the bare address, as header text: the name as it is when it is a run of
/// atoms, quoted when it has other ASCII, encoded words when it is not ASCII.
pub(super) fn mailbox(what: &str, name: &str, email: &str) -> Result<String> {
    check_header_text(&format!("{what} name"), name)?;
    check_header_text(&format!("{what} address"), email)?;
    let address = email
        .trim()
        .parse::<lettre::Address>()
        .map_err(|_| Error::invalid(format!("the {what} address {email:?} is not valid")))?;
    let name = single_line(name);
    if name.is_empty() {
        return Ok(address.to_string());
    }
    let atext = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b);
    let address: &str = address.as_ref();
    let mut out = Vec::with_capacity(name.len() + address.len() + 8);
    if name.split(' ').all(|word| !word.is_empty() && word.bytes().all(atext)) && !name.contains("=?") {
        out.extend_from_slice(name.as_bytes());
    } else if is_plain_header_text(&name) {
        out.push(b'"');
        for b in name.bytes() {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        write_encoded_words(&mut out, &name);
    }
    out.extend_from_slice(b" <");
    out.extend_from_slice(address.as_bytes());
    out.push(b'>');
    String::from_utf8(out).map_err(|_| Error::invalid(format!("the {what} name is not valid")))
}

/// Checks `id-left@domain` (angle brackets tolerated and removed).
pub(super) fn message_id(id: &str) -> Result<&str> {
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

pub(super) fn unsubscribe_url(url: &str) -> Result<String> {
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

pub(super) fn mailto_uri(mailto: &str) -> Result<String> {
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
pub(super) fn list_id(value: &str) -> Result<String> {
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
    if phrase.is_empty() {
        return Ok(format!("<{id}>"));
    }
    // A list name that is not plain ASCII goes as encoded words, like a subject.
    let mut out = Vec::with_capacity(phrase.len() + id.len() + 8);
    if is_plain_header_text(&phrase) {
        out.extend_from_slice(phrase.as_bytes());
    } else {
        write_encoded_words(&mut out, &phrase);
    }
    out.extend_from_slice(b" <");
    out.extend_from_slice(id.as_bytes());
    out.push(b'>');
    String::from_utf8(out).map_err(|_| Error::invalid("the List-Id is not valid"))
}
