//! Names, addresses and subjects a workspace or a reader chose, built into a message: whatever
//! they hold, the header section must stay the headers Herald wrote (no injected header, no bare
//! CR or LF), each header present once.
#![no_main]
use herald_engine::Email;
use herald_engine::sending::message::{Envelope, Rendered, build_message};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let mut next = || parts.next().unwrap_or_default().to_string();
    let (from_name, from_email, to_email, to_name, subject, reply_to) =
        (next(), next(), next(), next(), next(), next());
    let (Ok(from), Ok(to)) = (Email::parse(&from_email), Email::parse(&to_email)) else { return };
    let reply_to = Email::parse(&reply_to).ok().map(|e| e.as_str().to_string());
    let envelope = Envelope {
        from_name,
        from_email: from.as_str().to_string(),
        reply_to,
        to_email: to.as_str().to_string(),
        to_name,
        message_id: "fuzz.1@herald.test".into(),
        list_unsubscribe_url: "https://herald.test/u/1".into(),
        list_unsubscribe_mailto: None,
        list_id: "list.herald.test".into(),
        feedback_id: "c:w:herald".into(),
    };
    let rendered = Rendered { subject, html: "<p>Hi</p>".into(), text: "Hi".into() };
    let Ok(raw) = build_message(&rendered, &envelope, None) else { return };
    let raw = String::from_utf8_lossy(&raw);
    let head = raw.split("\r\n\r\n").next().unwrap_or_default();
    let mut names = Vec::new();
    for line in head.split("\r\n") {
        assert!(!line.contains('\r') && !line.contains('\n'), "a bare CR or LF in a header: {line:?}");
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let (name, _) = line.split_once(':').unwrap_or_else(|| panic!("not a header line: {line:?}"));
        assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()), "bad header name {name:?}");
        names.push(name.to_ascii_lowercase());
    }
    for once in ["from", "to", "subject", "reply-to", "message-id", "list-unsubscribe"] {
        assert!(names.iter().filter(|n| *n == once).count() <= 1, "{once} twice: {head}");
    }
});
