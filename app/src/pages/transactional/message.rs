//! `/transactional/messages/:id`: one transactional message: where it is in its life (queued,
//! sending, sent, failed, cancelled), its attempts and the server's reply, its events, and the
//! content as sent. A queued message can be cancelled here.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, PageHeader, short_time};
use crate::error::AppError;
use crate::pages::transactional::StatusBadge;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MessageView {
    pub id: String,
    pub to: String,
    pub from: String,
    pub subject: String,
    pub status: String,
    pub key: String,
    pub template: String,
    pub attempts: i32,
    pub next_attempt_at: String,
    pub provider_id: String,
    pub reply: String,
    pub error: String,
    pub metadata: String,
    pub html: String,
    pub text: String,
    /// (kind, detail, when)
    pub events: Vec<(String, String, String)>,
    pub can_cancel: bool,
}

#[server(prefix = "/rpc", endpoint = "load_message")]
pub async fn load_message(id: String) -> Result<MessageView, AppError> {
    use crate::ssr::{parse_id, require_role};
    use herald_engine::Role;
    use herald_engine::transactional::messages;
    let m = require_role(Role::Viewer).await?;
    let d = messages::detail(&m.state.db, m.tenant, parse_id(&id)?).await?;
    let msg = d.message;
    Ok(MessageView {
        id: msg.id.to_string(),
        to: if msg.to_name.is_empty() { msg.to_email } else { format!("{} <{}>", msg.to_name, msg.to_email) },
        from: if msg.from_name.is_empty() { msg.from_email } else { format!("{} <{}>", msg.from_name, msg.from_email) },
        subject: msg.subject,
        can_cancel: msg.status == "queued" && m.role.can_author(),
        status: msg.status,
        key: msg.idempotency_key,
        template: msg
            .template_name
            .map(|n| format!("{n} (version {})", msg.template_version.unwrap_or(1)))
            .unwrap_or_default(),
        attempts: msg.attempts,
        next_attempt_at: msg.next_attempt_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
        provider_id: msg.provider_id.unwrap_or_default(),
        reply: msg.smtp_reply.unwrap_or_default(),
        error: msg.last_error.unwrap_or_default(),
        metadata: serde_json::to_string_pretty(&msg.metadata).unwrap_or_default(),
        html: d.html,
        text: d.text,
        events: d.events.into_iter().map(|e| (e.kind, e.detail, e.occurred_at.to_rfc3339())).collect(),
    })
}

#[server(prefix = "/rpc", endpoint = "cancel_message")]
pub async fn cancel_message(id: String) -> Result<(), AppError> {
    use crate::ssr::{parse_id, require_role};
    use herald_engine::Role;
    use herald_engine::transactional::messages;
    let m = require_role(Role::Author).await?;
    messages::cancel(&m.state.db, m.tenant, m.role, parse_id(&id)?).await?;
    Ok(())
}

#[component]
pub fn TransactionalMessagePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let cancel = ServerAction::<CancelMessage>::new();
    let tick = RwSignal::new(0u32);
    let data = Resource::new(move || (id(), tick.get(), cancel.version().get()), |(id, _, _)| load_message(id));
    Effect::new(move |_| {
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(3))
        {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <Transition fallback=|| view! { <p class="text-slate-400">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <MessageBody v=v cancel=cancel/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn MessageBody(v: MessageView, cancel: ServerAction<CancelMessage>) -> impl IntoView {
    let facts = [
        ("To", v.to.clone()),
        ("From", v.from.clone()),
        ("Idempotency key", v.key.clone()),
        ("Template", v.template.clone()),
        ("Attempts", v.attempts.to_string()),
        ("Next attempt", short_time(&v.next_attempt_at)),
        ("Provider id", v.provider_id.clone()),
        ("Server reply", v.reply.clone()),
        ("Last error", v.error.clone()),
    ];
    let id = v.id.clone();
    view! {
        <PageHeader title=v.subject.clone() subtitle="Transactional message"/>
        <div class="mb-4 flex items-center gap-4 text-sm">
            <a href="/transactional" class="text-indigo-600 hover:underline">"← Messages"</a>
            <StatusBadge status=v.status.clone()/>
            {v.can_cancel.then(|| view! {
                <ActionForm action=cancel>
                    <input type="hidden" name="id" value=id.clone()/>
                    <button type="submit" class="text-sm text-red-600 hover:underline">"Cancel this message"</button>
                </ActionForm>
            })}
        </div>
        <ActionError value=cancel.value()/>
        <div class="grid gap-6 lg:grid-cols-2">
            <Card title="Details">
                <dl class="grid grid-cols-3 gap-x-3 gap-y-2 text-sm">
                    {facts.into_iter().filter(|(_, v)| !v.is_empty()).map(|(k, val)| view! {
                        <dt class="text-slate-500">{k}</dt><dd class="col-span-2 break-words">{val}</dd>
                    }).collect_view()}
                </dl>
                {(v.metadata != "{}").then(|| view! {
                    <p class="mt-3 text-xs font-medium uppercase text-slate-400">"Metadata"</p>
                    <pre class="mt-1 overflow-x-auto rounded bg-slate-50 p-2 text-xs">{v.metadata.clone()}</pre>
                })}
            </Card>
            <Card title="Events">
                <ol class="space-y-2 text-sm" data-testid="message-events">
                    {v.events.into_iter().map(|(kind, detail, at)| view! {
                        <li class="flex gap-3" data-testid="message-event">
                            <span class="w-28 shrink-0 text-slate-500">{short_time(&at)}</span>
                            <span class="badge" data-testid="message-event-kind">{kind}</span>
                            <span class="break-words text-slate-600">{detail}</span>
                        </li>
                    }).collect_view()}
                </ol>
            </Card>
        </div>
        <Card title="Content">
            <iframe title="Message preview" sandbox="" srcdoc=v.html class="h-96 w-full rounded border border-slate-200"></iframe>
            <details class="mt-3 text-sm"><summary class="cursor-pointer text-slate-600">"Plain-text version"</summary>
                <pre class="mt-2 whitespace-pre-wrap rounded bg-slate-50 p-3 text-xs">{v.text}</pre></details>
        </Card>
    }
}
