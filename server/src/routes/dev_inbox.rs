//! `/dev/inbox`: what the dev mail catcher received. Mounted only in development mode.
//! Plain server-rendered HTML: it is a tool page, not part of the product UI.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use herald_devtools::smtp_sink::MailSink;
use herald_engine::sending::mail::escape_html as e;
use serde::Serialize;

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} · Herald dev inbox</title>\
         <link rel=\"stylesheet\" href=\"/pkg/herald.css\"></head>\
         <body class=\"bg-slate-50 text-slate-800\"><div class=\"mx-auto max-w-5xl px-6 py-8\">\
         <p class=\"text-sm text-slate-500\"><a href=\"/dev/inbox\" class=\"text-indigo-600\">Dev inbox</a> · mail caught by the built-in SMTP catcher</p>\
         {body}</div></body></html>",
        e(title)
    ))
}

pub async fn list(State(sink): State<MailSink>) -> Html<String> {
    let messages = sink.messages().await;
    let mut rows = String::new();
    for m in &messages {
        let p = m.parse();
        rows.push_str(&format!(
            "<tr data-testid=\"inbox-row\" class=\"border-t border-slate-100\"><td class=\"py-2 pr-4\">{}</td>\
             <td class=\"pr-4\"><a class=\"text-indigo-600 hover:underline\" href=\"/dev/inbox/{}\">{}</a></td>\
             <td class=\"text-slate-500\">{}</td></tr>",
            e(&m.rcpt_to.join(", ")),
            m.id,
            e(if p.subject.is_empty() { "(no subject)" } else { &p.subject }),
            m.received_at.format("%Y-%m-%d %H:%M:%S")
        ));
    }
    let body = if messages.is_empty() {
        "<h1 class=\"mt-4 text-2xl font-semibold\">Inbox</h1><p class=\"mt-6 text-slate-500\">No mail yet. Invites and confirmations sent in development land here.</p>".to_string()
    } else {
        format!(
            "<h1 class=\"mt-4 text-2xl font-semibold\">Inbox ({})</h1><table class=\"mt-6 w-full text-left text-sm\">\
             <thead><tr class=\"text-xs uppercase text-slate-400\"><th>To</th><th>Subject</th><th>Received</th></tr></thead><tbody>{rows}</tbody></table>",
            messages.len()
        )
    };
    page("Inbox", &body)
}

pub async fn show(State(sink): State<MailSink>, Path(id): Path<String>) -> Response {
    let Some(m) = id.parse::<u64>().ok().map(|id| sink.get(id)) else {
        return (StatusCode::NOT_FOUND, "no such message").into_response();
    };
    let Some(m) = m.await else {
        return (StatusCode::NOT_FOUND, "no such message").into_response();
    };
    let p = m.parse();
    let headers: String = p
        .headers
        .iter()
        .map(|(k, v)| {
            format!(
                "<tr><td class=\"pr-4 align-top font-medium\">{}</td><td class=\"break-all\">{}</td></tr>",
                e(k),
                e(v)
            )
        })
        .collect();
    // The HTML part is shown in a sandboxed iframe: no scripts, no same-origin access. Its links
    // open in a new tab outside the sandbox, as a mail client opens them: followed inside the
    // frame, a link's page ran without scripts or forms and never finished.
    let html = p
        .html
        .as_deref()
        .map(|h| {
            let doc = format!("<base target=\"_blank\">{h}");
            format!(
                "<h2 class=\"mt-6 font-medium\">HTML part</h2><iframe sandbox=\"allow-popups allow-popups-to-escape-sandbox\" \
                 data-testid=\"html-part\" title=\"HTML part\" class=\"mt-2 h-96 w-full rounded border bg-white\" srcdoc=\"{}\"></iframe>",
                e(&doc)
            )
        })
        .unwrap_or_default();
    let text = p
        .text
        .as_deref()
        .map(|t| format!("<h2 class=\"mt-6 font-medium\">Text part</h2><pre data-testid=\"text-part\" class=\"mt-2 whitespace-pre-wrap rounded border bg-white p-4 text-sm\">{}</pre>", e(t)))
        .unwrap_or_default();
    let body = format!(
        "<h1 class=\"mt-4 text-2xl font-semibold\">{}</h1><p class=\"text-sm text-slate-500\">From {} to {}</p>{html}{text}\
         <details class=\"mt-6\"><summary class=\"cursor-pointer text-sm\">Headers</summary><table class=\"mt-2 text-xs\">{headers}</table></details>",
        e(&p.subject),
        e(&m.mail_from),
        e(&m.rcpt_to.join(", "))
    );
    page(&p.subject, &body).into_response()
}

#[derive(Serialize)]
pub struct MessageJson {
    id: u64,
    /// The envelope's sender (MAIL FROM).
    from: String,
    /// The From header as written, display name included.
    header_from: String,
    to: Vec<String>,
    subject: String,
    text: Option<String>,
    html: Option<String>,
    received_at: String,
}

pub async fn list_json(State(sink): State<MailSink>) -> Json<Vec<MessageJson>> {
    let out = sink
        .messages()
        .await
        .into_iter()
        .map(|m| {
            let p = m.parse();
            MessageJson {
                id: m.id,
                from: m.mail_from,
                header_from: p
                    .headers
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case("from"))
                    .map(|(_, value)| value.clone())
                    .unwrap_or_default(),
                to: m.rcpt_to,
                subject: p.subject,
                text: p.text,
                html: p.html,
                received_at: m.received_at.to_rfc3339(),
            }
        })
        .collect();
    Json(out)
}
