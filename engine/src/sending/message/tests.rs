use super::*;
use anyhow::Context as _;
use herald_devtools::dkim::{PublicKey, tag, verify as verify_dkim};

fn workspace() -> Workspace {
    Workspace { name: "Acme & Co".into(), postal_address: "1 Main St\nSpringfield, IL 62701".into() }
}

fn content(format: BodyFormat, subject: &str, body: &str) -> CampaignContent {
    CampaignContent { subject: subject.into(), preheader: String::new(), format, body: body.into() }
}

const UNSUB: &str = "https://herald.example/u/abc123?l=9&x=1";
const WEB: &str = "https://herald.example/v/web123";

/// Runs a render on a runtime of its own: these tests are synchronous, renders are not.
fn block<T>(f: impl std::future::Future<Output = Result<T, Busy>>) -> T {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(f).expect("a lone test render is never refused")
}

fn compile(c: &CampaignContent) -> Result<CompiledCampaign, TemplateError> {
    block(CompiledCampaign::compile(c, &workspace(), Turn::background(herald_types::TenantId::new())))
}

fn render(c: &CampaignContent, name: &str, attrs: serde_json::Value) -> anyhow::Result<Rendered> {
    let r = Recipient { email: "ada@example.org", name, attributes: &attrs };
    let compiled = compile(c)?;
    Ok(block(compiled.render(&r, &MessageContext { unsubscribe_url: UNSUB, web_version_url: WEB }))?)
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
    // Custom fields are the same values under `reader.fields`.
    let c = content(BodyFormat::Html, "{{ reader.fields.plan }}", "<p>{{ reader.fields.seats }} seats</p>");
    let r = render(&c, "Ada", serde_json::json!({ "plan": "Pro", "seats": 3 }))?;
    assert_eq!(r.subject, "Pro");
    assert!(r.html.contains("3 seats"), "{}", r.html);
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
    let e = compile(&c).err().context("should fail")?;
    assert_eq!(e.field, "body");
    assert_eq!(e.line, Some(2));
    assert!(e.column.is_some_and(|c| (1..=24).contains(&c)), "{e:?}");
    assert!(e.message.contains("unknown filter"), "{e}");
    assert!(e.to_string().starts_with("body, line 2, column "), "{e}");

    let c = content(BodyFormat::Html, "Hi {{ reader.name ", "ok");
    let e = compile(&c).err().context("should fail")?;
    assert_eq!(e.field, "subject");
    assert_eq!(e.line, Some(1));
    assert!(e.message.contains("syntax error"), "{e}");

    let mut c = content(BodyFormat::Html, "Hi", "ok");
    c.preheader = "line\n  {% if %}".into();
    let e = compile(&c).err().context("should fail")?;
    assert_eq!((e.field, e.line), ("preheader", Some(2)));
    assert!(e.column.is_some_and(|c| c >= 3), "{e:?}");

    // Errors that depend on data fail only the readers concerned, not the compile.
    let c = content(BodyFormat::Html, "x", "{{ reader.attributes.tags | length }} tags");
    let compiled = compile(&c)?;
    let attrs = serde_json::json!({ "tags": ["a", "b"] });
    let ctx = MessageContext { unsubscribe_url: UNSUB, web_version_url: WEB };
    let r = block(compiled.render(&Recipient { email: "a@b.example", name: "", attributes: &attrs }, &ctx))?;
    assert!(r.html.contains("2 tags"));
    let none = serde_json::json!({});
    let e = block(compiled.render(&Recipient { email: "a@b.example", name: "", attributes: &none }, &ctx));
    assert!(e.is_err_and(|e| e.field == "body" && e.line == Some(1)));

    // A runaway loop runs out of fuel instead of stalling the sender.
    let c = content(
        BodyFormat::Html,
        "x",
        "{% for a in range(100000) %}{% for b in range(100000) %}.{% endfor %}{% endfor %}",
    );
    let e = compile(&c).err().context("should fail")?;
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
        for required in ["from", "to", "subject", "date", "message-id", "list-unsubscribe", "list-unsubscribe-post"] {
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
    use rsa::pkcs1::EncodeRsaPrivateKey;
    use rsa::pkcs8::DecodePrivateKey;
    // The PKCS#1 form of the same RSA key.
    let pkcs1 = rsa::RsaPrivateKey::from_pkcs8_pem(TEST_RSA_PKCS8)?.to_pkcs1_pem(rsa::pkcs8::LineEnding::LF)?;
    assert!(pkcs1.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
    DkimSigner::new("s1", "acme.example", &pkcs1)?;
    // A bare base64 Ed25519 seed.
    DkimSigner::new("s1", "acme.example", "LP+MJGML7ZonUYZT/3Ibl+XBb6gjceLvcXTr24Aoc9Y=")?;
    // RFC 8463's 1024-bit example key: too short to sign with (RFC 8301).
    let short = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 1024)?.to_pkcs1_pem(rsa::pkcs8::LineEnding::LF)?;
    let e = DkimSigner::new("s1", "acme.example", &short).err().context("a 1024-bit key was accepted")?;
    assert!(e.to_string().contains("2048"), "{e}");
    for (selector, domain, key) in [
        ("s1", "acme.example", "not a key"),
        ("s1", "acme.example", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"),
        ("s1", "acme.example", "AAAA"),
        ("bad selector", "acme.example", TEST_ED25519_PKCS8),
        ("s1", "acme.example\r\nx", TEST_ED25519_PKCS8),
        ("s1", "localhost", TEST_ED25519_PKCS8),
    ] {
        assert!(matches!(DkimSigner::new(selector, domain, key), Err(Error::Invalid(_))), "{selector} {domain}");
    }
    Ok(())
}

/// RFC 8463 Appendix A: a message signed by a third party with Ed25519 and RSA, checked with
/// the canonicalization the signer uses (so a mistake in it cannot hide in our own round trip).
#[test]
fn canonicalization_verifies_rfc_8463_example() -> anyhow::Result<()> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let message = "DKIM-Signature: v=1; a=ed25519-sha256; c=relaxed/relaxed;\r\n \
d=football.example.com; i=@football.example.com;\r\n \
q=dns/txt; s=brisbane; t=1528637909; h=from : to :\r\n \
subject : date : message-id : from : subject : date;\r\n \
bh=2jUSOH9NhtVGCQWNr9BrIAPreKQjO6Sn7XIkfJVOzv8=;\r\n \
b=/gCrinpcQOoIfuHNQIbq4pgh9kyIK3AQUdt9OdqQehSwhEIug4D11Bus\r\n \
Fa3bT3FY5OsU7ZbnKELq+eXdp1Q1Dw==\r\n\
DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed;\r\n \
d=football.example.com; i=@football.example.com;\r\n \
q=dns/txt; s=test; t=1528637909; h=from : to : subject :\r\n \
date : message-id : from : subject : date;\r\n \
bh=2jUSOH9NhtVGCQWNr9BrIAPreKQjO6Sn7XIkfJVOzv8=;\r\n \
b=F45dVWDfMbQDGHJFlXUNB2HKfbCeLRyhDXgFpEL8GwpsRe0IeIixNTe3\r\n \
DhCVlUrSjV4BwcVcOF6+FF3Zo9Rpo1tFOeS9mPYQTnGdaSGsgeefOsk2Jz\r\n \
dA+L10TeYt9BgDfQNZtKdN1WO//KgIqXP7OdEFE4LjFYNcUxZQ4FADY+8=\r\n\
From: Joe SixPack <joe@football.example.com>\r\n\
To: Suzie Q <suzie@shopping.example.net>\r\n\
Subject: Is dinner ready?\r\n\
Date: Fri, 11 Jul 2003 21:00:37 -0700 (PDT)\r\n\
Message-ID: <20030712040037.46341.5F8J@football.example.com>\r\n\
\r\n\
Hi.\r\n\
\r\n\
We lost the game.  Are you hungry yet?\r\n\
\r\n\
Joe.\r\n";
    let ed = PublicKey::Ed25519(b64.decode("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=")?);
    let rsa = PublicKey::Rsa(b64.decode(
        "MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDkHlOQoBTzWRiGs5V6NpP3idY6Wk08a5qhdR6wy5bdOKb2jLQiY/J16JYi0Qvx/byYzCNb3W91y3FutACDfzwQ/BC/e/8uBsCR+yz1Lxj+PL6lHvqMKrM3rG4hstT5QjvHO9PzoxZyVYLzBfO2EeC3Ip3G+2kryOTIKT+l/K4w3QIDAQAB",
    )?);
    verify_dkim(message.as_bytes(), "brisbane", &ed)?;
    verify_dkim(message.as_bytes(), "test", &rsa)?;
    // A changed body or signed header no longer verifies.
    let tampered = message.replace("hungry", "angry");
    assert!(verify_dkim(tampered.as_bytes(), "brisbane", &ed).is_err());
    let tampered = message.replace("Is dinner ready?", "Is lunch ready?");
    assert!(verify_dkim(tampered.as_bytes(), "test", &rsa).is_err());
    // Whitespace changes relaxed canonicalization absorbs still verify.
    let relaxed =
        message.replace("Subject: Is dinner", "Subject:  Is \t dinner").replace("Joe.\r\n", "Joe. \r\n\r\n\r\n");
    verify_dkim(relaxed.as_bytes(), "brisbane", &ed)?;
    Ok(())
}

#[test]
fn signed_messages_verify() -> anyhow::Result<()> {
    use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey};
    let c = content(BodyFormat::Markdown, "Ünïcode — {{ reader.name }}", "Hi *{{ reader.name }}*\n\n. a dot line");
    let r = render(&c, "Ada", serde_json::json!({}))?;
    let rsa_public = rsa::RsaPrivateKey::from_pkcs8_pem(TEST_RSA_PKCS8)?.to_public_key().to_public_key_der()?;
    let ed_seed: [u8; 32] = match parse_dkim_key(TEST_ED25519_PKCS8)? {
        DkimKeyBytes::Ed25519Seed(seed) => seed,
        DkimKeyBytes::RsaPkcs1Der(_) => anyhow::bail!("not an Ed25519 key"),
    };
    use ring::signature::KeyPair as _;
    let ed_public = ring::signature::Ed25519KeyPair::from_seed_unchecked(&ed_seed)
        .map_err(|_| anyhow::anyhow!("seed"))?
        .public_key()
        .as_ref()
        .to_vec();
    for (key, public) in [
        (TEST_RSA_PKCS8, PublicKey::Rsa(rsa_public.as_bytes().to_vec())),
        (TEST_ED25519_PKCS8, PublicKey::Ed25519(ed_public)),
    ] {
        let signer = DkimSigner::new("herald", "acme.example", key)?;
        let raw = build_message(&r, &envelope(), Some(&signer))?;
        verify_dkim(&raw, "herald", &public)?;
        let text = String::from_utf8(raw.clone())?;
        assert!(verify_dkim(text.replace("Ada", "Eve").as_bytes(), "herald", &public).is_err());
    }
    Ok(())
}

#[test]
fn wire_form_is_quoted_printable_with_short_lines_and_no_leading_dots() -> anyhow::Result<()> {
    let long = "word=".repeat(40) + "é";
    let text = format!(".starts with a dot\n{long}\ntrailing space \nand tab\t\r\n\n.\n..\nend with dot.\n");
    let html = format!("<p>{long}</p>\n.<b>x</b>\n<p>Ünïcode ☺</p>");
    let r = Rendered { subject: "x".into(), html: html.clone(), text: text.clone() };
    let raw = build_message(&r, &envelope(), None)?;
    for line in raw.split(|&b| b == b'\n') {
        assert!(line.len() <= 78, "line of {} characters: {}", line.len(), String::from_utf8_lossy(line));
        assert!(!line.starts_with(b"."), "a line starts with a dot: {}", String::from_utf8_lossy(line));
    }
    assert!(raw.windows(2).all(|w| w[1] != b'\n' || w[0] == b'\r'), "a bare LF");
    assert!(raw.is_ascii());
    let msg = parse(&raw)?;
    let lf = |s: &str| s.replace("\r\n", "\n");
    assert_eq!(lf(&msg.body_text(0).context("no text")?), lf(&text));
    assert_eq!(lf(&msg.body_html(0).context("no html")?), lf(&html));
    Ok(())
}

#[test]
fn header_words_survive_encoding_and_folding() -> anyhow::Result<()> {
    let subject = "A very long subject line that goes on and on, well past the seventy-eight characters a header line should hold, and then some more words";
    for (subject, to_name) in [
        (subject.to_string(), "Ada Lovelace".to_string()),
        ("Ünïcode — ☺ ".repeat(12).trim().to_string(), "Zoë Ünïcode-Ø".to_string()),
        ("=?utf-8?q?not_an_encoded_word?=".to_string(), "Doe, \"Jo\" \\ J.".to_string()),
    ] {
        let r = Rendered { subject: subject.clone(), html: "<p>x</p>".into(), text: "x".into() };
        let env =
            Envelope { to_name: to_name.clone(), list_id: format!("{to_name} <6f1c2a2e.acme.herald>"), ..envelope() };
        let raw = build_message(&r, &env, None)?;
        let msg = parse(&raw)?;
        assert_eq!(msg.subject(), Some(subject.as_str()));
        let to = msg.to().and_then(|a| a.first()).context("no to")?;
        assert_eq!((to.name(), to.address()), (Some(to_name.as_str()), Some("ada@example.org")));
        assert!(raw.is_ascii(), "8-bit headers need 8BITMIME: {}", String::from_utf8_lossy(&raw));
        let (headers, _) = split_message(&raw);
        for line in headers.split(|&b| b == b'\n') {
            assert!(line.len() <= 80, "{}", String::from_utf8_lossy(line));
        }
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
/// `cargo test -p herald-engine --release message::tests::throughput -- --ignored --nocapture`
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
    let compiled = compile(&c)?;
    let attrs = serde_json::json!({ "city": "London", "plan": "pro" });
    let recipient = Recipient { email: "ada@example.org", name: "Ada", attributes: &attrs };
    let ctx = MessageContext { unsubscribe_url: UNSUB, web_version_url: WEB };
    let rsa = DkimSigner::new("herald", "acme.example", TEST_RSA_PKCS8)?;
    let ed = DkimSigner::new("herald", "acme.example", TEST_ED25519_PKCS8)?;
    for (label, signer, n) in [("no DKIM", None, 10_000u32), ("Ed25519", Some(&ed), 10_000), ("RSA", Some(&rsa), 2_000)]
    {
        let start = std::time::Instant::now();
        let mut render_time = std::time::Duration::ZERO;
        let mut bytes = 0;
        for _ in 0..n {
            let t = std::time::Instant::now();
            let r = block(compiled.render(&recipient, &ctx))?;
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

/// A block campaign: rendered to its HTML once, then per reader like an HTML body.
#[test]
fn a_block_campaign_renders_merge_tags_inside_blocks_and_a_text_part() -> anyhow::Result<()> {
    let doc = include_str!("../../../../types/tests/fixtures/blocks_v1.json");
    let c = content(BodyFormat::Blocks, "Spring for {{ reader.name }}", doc);
    let r = render(&c, "Ada <script>", serde_json::json!({}))?;
    assert_eq!(r.subject, "Spring for Ada <script>");
    // The reader's name is escaped like in any HTML body; the tag with quotes still works.
    assert!(r.html.contains("Hi Ada &lt;script&gt;, <strong>bold</strong>"), "{}", r.html);
    assert!(r.html.contains("https://example.com/story?r=ada@example.org"), "a merge tag inside a button's link");
    // The footer block links this reader's unsubscribe URL, so Herald adds no second link; the
    // postal address is still added.
    assert_eq!(r.html.matches("/u/abc123").count(), 1, "{}", r.html);
    assert!(r.html.contains("Springfield, IL 62701"));
    assert!(r.text.contains("Spring issue") && r.text.contains("Hi Ada <script>, bold"), "{}", r.text);
    assert!(r.text.contains("Read the story (https://example.com/story?r=ada@example.org)"), "{}", r.text);
    assert!(!r.text.contains("mso") && !r.text.contains("{{"), "no head or template left: {}", r.text);

    // A broken document is the body's error, found when compiling, not per reader.
    let broken = content(BodyFormat::Blocks, "x", r#"{"version": 1, "blocks": [{"type": "heading"}]}"#);
    let e = compile(&broken).expect_err("refused");
    assert_eq!(e.field, "body");
    Ok(())
}

/// A block body's unchanging start is set aside once per campaign (per message a block
/// campaign costs what a Markdown one does), and nothing a reader gets changes for it: the same
/// HTML rendered whole, as an HTML body, gives the same mail, text part and errors.
#[test]
fn a_block_body_set_aside_in_part_renders_as_if_whole() -> anyhow::Result<()> {
    let doc = include_str!("../../../../types/tests/fixtures/blocks_v1.json");
    let whole = blocks_to_template(&herald_types::BlockDocument::parse(doc)?)?;
    let mut framed = content(BodyFormat::Blocks, "Spring for {{ reader.name }}", doc);
    framed.preheader = "This week: {{ reader.email }}".into();
    let plain = CampaignContent { format: BodyFormat::Html, body: whole.clone(), ..framed.clone() };
    let recipient = Recipient { email: "ada@example.org", name: "Ada <script>", attributes: &serde_json::Value::Null };
    let ctx = MessageContext { unsubscribe_url: UNSUB, web_version_url: WEB };
    let (framed, plain) = (compile(&framed)?, compile(&plain)?);
    let parts = block(framed.render_body(&recipient, &ctx))?;
    assert!(parts.body.len() + 3000 < whole.len(), "the head and outer tables are rendered per reader");
    assert!(!parts.body.to_ascii_lowercase().contains("<head"), "{}", parts.body);
    for pixel in [None, Some("https://herald.example/o/pixel")] {
        let a = framed.assemble(parts.clone(), &ctx, pixel);
        let b = plain.assemble(block(plain.render_body(&recipient, &ctx))?, &ctx, pixel);
        assert_eq!(a, b);
        // The pixel and the footer are inside the document's body.
        let close = a.html.rfind("</body>").context("a body")?;
        assert!(a.html.find("/o/pixel").is_none_or(|at| at < close), "{}", &a.html[close - 200..]);
        assert!(a.html.find("Springfield").is_some_and(|at| at < close));
        assert!(a.html.find("This week: ada@example.org").is_some_and(|at| at > a.html.find("<body").unwrap_or(0)));
    }

    // A document without merge tags or links has no frame to set aside, and its footer still
    // lands inside its body.
    let quiet = r#"{"version": 1, "blocks": [{"type": "paragraph", "text": "Nothing to fill in."}]}"#;
    let quiet_whole = blocks_to_template(&herald_types::BlockDocument::parse(quiet)?)?;
    let a = render(&content(BodyFormat::Blocks, "x", quiet), "", serde_json::json!({}))?;
    let b = render(&content(BodyFormat::Html, "x", &quiet_whole), "", serde_json::json!({}))?;
    assert_eq!(a, b);
    assert!(a.html.find("Springfield").is_some_and(|at| at < a.html.rfind("</body>").unwrap_or(0)), "{}", a.html);

    // An `<a` with an open quote in a comment before the first merge tag: link tracking reads
    // past the comment in the whole body, so it must read the same in the framed one.
    let tricky = r#"{"version": 1, "blocks": [{"type": "html", "html": "<!-- <a title='draft -->"},
        {"type": "paragraph", "text": "Hi {{ reader.name }}, [read](https://example.com/x) it's here"}]}"#;
    let tricky_whole = blocks_to_template(&herald_types::BlockDocument::parse(tricky)?)?;
    let (framed_tricky, plain_tricky) =
        (compile(&content(BodyFormat::Blocks, "x", tricky))?, compile(&content(BodyFormat::Html, "x", &tricky_whole))?);
    let framed_parts = block(framed_tricky.render_body(&recipient, &ctx))?;
    let plain_parts = block(plain_tricky.render_body(&recipient, &ctx))?;
    // Tracking sits above this layer; what makes its reading the same is that the part set
    // aside (the whole less the rest) holds no `<a` tag at all.
    assert!(plain_parts.body.ends_with(&framed_parts.body));
    let prefix = &plain_parts.body[..plain_parts.body.len() - framed_parts.body.len()];
    assert!(!prefix.contains("<a ") && prefix.contains("<body"), "{prefix}");

    // The size limit counts the set-aside start too, and is found when compiling.
    let filler = "x".repeat(1000);
    let huge = format!(
        r#"{{"version": 1, "blocks": [{{"type": "paragraph", "text": "Hi {{{{ reader.email }}}}{{% for i in range(2094) %}}{filler}{{% endfor %}}"}}]}}"#
    );
    let e = compile(&content(BodyFormat::Blocks, "x", &huge)).expect_err("over 2 MB whole");
    assert!(e.message.contains("larger than 2 MB"), "{e}");

    // A mistake in a block is placed where it is in the whole body.
    let bad_doc = doc.replacen("{{ reader.name", "{{ reader.name | nosuchfilter", 1);
    let bad = |format, body: String| content(format, "x", &body);
    let framed_error = compile(&bad(BodyFormat::Blocks, bad_doc.clone())).expect_err("an unknown filter");
    let whole_bad = blocks_to_template(&herald_types::BlockDocument::parse(&bad_doc)?)?;
    let plain_error = compile(&bad(BodyFormat::Html, whole_bad)).expect_err("an unknown filter");
    assert_eq!(TemplateError { block: None, ..framed_error.clone() }, plain_error);
    assert!(framed_error.line.is_some() && framed_error.column > Some(1), "{framed_error}");
    Ok(())
}

/// A mistake in a block document is reported in the block the author wrote it in, never as a
/// line and column of the HTML Herald generated: in a paragraph, inside a column, in a button's
/// link, in an HTML block, an unclosed tag, and a mistake found only when rendering for a reader.
#[test]
fn a_mistake_in_a_block_names_the_block_and_its_field() -> anyhow::Result<()> {
    let doc = |blocks: &str| format!(r#"{{"version": 1, "blocks": [{blocks}]}}"#);
    let heading = r#"{"type": "heading", "text": "Spring {{ reader.email }}", "level": 1}"#;
    let named = |blocks: &str| -> anyhow::Result<(String, String)> {
        let e = compile(&content(BodyFormat::Blocks, "x", &doc(blocks))).err().context("should fail")?;
        let at = e.block.clone().context(format!("no block named: {e}"))?;
        assert!(e.to_string().starts_with(&format!("body, {}: ", at.label)), "{e}");
        assert!(!e.to_string().contains("line"), "{e}");
        Ok((at.path, at.label))
    };
    let paragraph = r#"{"type": "paragraph", "text": "Hello {{ reader.name | nosuchfilter }}"}"#;
    assert_eq!(
        named(&format!("{heading}, {{\"type\": \"divider\"}}, {paragraph}"))?,
        ("body.blocks.2.text".into(), "block 3 (Paragraph)".into())
    );
    let button = r#"{"type": "button", "label": "Go", "href": "https://example.com/?{{ reader.email | nope }}"}"#;
    assert_eq!(
        named(&format!(
            r#"{heading}, {{"type": "columns", "columns": [{{"blocks": [{heading}]}}, {{"blocks": [{heading}, {button}]}}]}}"#
        ))?,
        ("body.blocks.1.columns.1.blocks.1.href".into(), "block 2 (Two columns), column 2, block 2 (Button)".into())
    );
    let html = r#"{"type": "html", "html": "<p>{% if reader.name %}</p>"}"#;
    assert_eq!(named(&format!("{heading}, {html}, {heading}"))?.0, "body.blocks.1.html");
    let unclosed = r#"{"type": "paragraph", "text": "Hi {{ reader.name, welcome"}"#;
    assert_eq!(named(&format!("{heading}, {heading}, {unclosed}, {heading}"))?.0, "body.blocks.2.text");

    // Data that fails one reader only: named too, when that reader's preview is rendered.
    let per_reader = r#"{"type": "quote", "text": "You have {{ reader.attributes.tags | length }} tags"}"#;
    let compiled = compile(&content(BodyFormat::Blocks, "x", &doc(&format!("{heading}, {per_reader}"))))?;
    let none = serde_json::json!({});
    let ctx = MessageContext { unsubscribe_url: UNSUB, web_version_url: WEB };
    let e = block(compiled.render(&Recipient { email: "a@b.example", name: "", attributes: &none }, &ctx))
        .err()
        .context("no tags to count")?;
    assert_eq!(e.location(), "body.blocks.1.text", "{e}");
    assert_eq!(e.block.map(|b| b.label).as_deref(), Some("block 2 (Quote)"));

    // Other formats keep their line and column.
    let e = compile(&content(BodyFormat::Markdown, "x", "a\n{{ x | nope }}")).err().context("should fail")?;
    assert_eq!((e.location(), e.line), ("body", Some(2)));
    Ok(())
}
