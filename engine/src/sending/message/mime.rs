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

pub(super) const LIST_UNSUBSCRIBE: HeaderName = HeaderName::new_from_ascii_str("List-Unsubscribe");
pub(super) const LIST_UNSUBSCRIBE_POST: HeaderName = HeaderName::new_from_ascii_str("List-Unsubscribe-Post");
pub(super) const LIST_ID: HeaderName = HeaderName::new_from_ascii_str("List-Id");
pub(super) const FEEDBACK_ID: HeaderName = HeaderName::new_from_ascii_str("Feedback-ID");

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

pub(super) fn check_header_text(what: &str, value: &str) -> Result<()> {
    if value.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return Err(Error::invalid(format!("the {what} contains a line break or control character")));
    }
    Ok(())
}

pub(super) fn mailbox(what: &str, name: &str, email: &str) -> Result<Mailbox> {
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
    Ok(if phrase.is_empty() { format!("<{id}>") } else { format!("{phrase} <{id}>") })
}
