//! `/transactional/messages/:id`: one transactional message: where it is in its life (queued,
//! sending, sent, failed, cancelled), its attempts and the server's reply, its events, and the
//! content as sent. A queued message can be cancelled here.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf, PageHeader};
use crate::error::AppError;
use crate::pages::transactional::StatusBadge;
use herald_types::{MessageDetail, MessageId};

/// A message's page: the message, its content and events, and whether this member may cancel it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MessagePage {
    pub detail: MessageDetail,
    pub can_cancel: bool,
}

#[server(prefix = "/rpc", endpoint = "load_message")]
pub async fn load_message(id: MessageId) -> Result<MessagePage, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::transactional::messages;
    let m = require_role(Role::Viewer).await?;
    let detail = messages::detail(&m.state.db, m.tenant, id).await?;
    let can_cancel = detail.message.status.can_cancel() && m.role.can_author();
    Ok(MessagePage { detail, can_cancel })
}

#[server(prefix = "/rpc", endpoint = "cancel_message")]
pub async fn cancel_message(id: MessageId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::transactional::messages;
    let m = require_role(Role::Author).await?;
    messages::cancel(&m.state.db, m.tenant, m.role, id).await?;
    Ok(())
}

#[component]
pub fn TransactionalMessagePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").and_then(|s| s.parse().ok()).unwrap_or(MessageId::NIL);
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
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
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
fn MessageBody(v: MessagePage, cancel: ServerAction<CancelMessage>) -> impl IntoView {
    let MessageDetail { message: msg, html, text, events } = v.detail;
    let template = msg
        .template_name
        .as_ref()
        .map(|n| format!("{n} (version {})", msg.template_version.unwrap_or(1)))
        .unwrap_or_default();
    let facts = [
        ("To", msg.recipient()),
        ("From", msg.sender()),
        ("Idempotency key", msg.idempotency_key.clone()),
        ("Template", template),
        ("Attempts", msg.attempts.to_string()),
        ("Provider id", msg.provider_id.clone().unwrap_or_default()),
        ("Server reply", msg.smtp_reply.clone().unwrap_or_default()),
        ("Last error", msg.last_error.clone().unwrap_or_default()),
    ];
    let metadata = (msg.metadata != serde_json::json!({}))
        .then(|| serde_json::to_string_pretty(&msg.metadata).unwrap_or_default());
    let id = msg.id.to_string();
    view! {
        <PageHeader title=msg.subject.clone() subtitle="Transactional message"/>
        <div class="mb-4 flex items-center gap-4 text-sm">
            <a href="/transactional" class="text-indigo-600 hover:underline">"← Messages"</a>
            <StatusBadge status=msg.status/>
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
                    {msg.next_attempt_at.map(|t| view! {
                        <dt class="text-slate-500">"Next attempt"</dt><dd class="col-span-2"><LocalTimeOf at=t/></dd>
                    })}
                </dl>
                {metadata.map(|metadata| view! {
                    <p class="mt-3 text-xs font-medium uppercase text-slate-500">"Metadata"</p>
                    <pre tabindex="0" class="mt-1 overflow-x-auto rounded bg-slate-50 p-2 text-xs">{metadata}</pre>
                })}
            </Card>
            <Card title="Events">
                <ol class="space-y-2 text-sm" data-testid="message-events">
                    {events.into_iter().map(|e| view! {
                        <li class="flex gap-3" data-testid="message-event">
                            <span class="w-28 shrink-0 text-slate-500"><LocalTimeOf at=e.occurred_at/></span>
                            <span class="badge" data-testid="message-event-kind">{e.kind}</span>
                            <span class="break-words text-slate-600">{e.detail}</span>
                        </li>
                    }).collect_view()}
                </ol>
            </Card>
        </div>
        <Card title="Content">
            <iframe title="Message preview" sandbox="" srcdoc=html class="h-96 w-full rounded border border-slate-200"></iframe>
            <details class="mt-3 text-sm"><summary class="cursor-pointer text-slate-600">"Plain-text version"</summary>
                <pre class="mt-2 whitespace-pre-wrap rounded bg-slate-50 p-3 text-xs">{text}</pre></details>
        </Card>
    }
}
