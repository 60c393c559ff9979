//! The "Provider webhooks" part of Settings → Sending: per sending identity, which provider
//! reports deliveries, bounces and complaints to Herald, the URL to paste into that provider,
//! and the secret Herald checks its signatures with (stored encrypted, never shown again).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError};
use crate::error::AppError;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WebhookRow {
    pub id: String,
    pub name: String,
    /// Empty when off.
    pub provider: String,
    /// The URL to give the provider; empty when off, and for members who are not admins (the
    /// URL is what lets a provider, or anyone holding it, report on this workspace's mail).
    pub url: String,
    /// SES: the SNS topic the webhook is pinned to.
    pub sns_topic: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WebhooksView {
    pub rows: Vec<WebhookRow>,
    pub can_edit: bool,
}

/// (value, label, what the secret field holds)
const PROVIDERS: [(&str, &str, &str); 5] = [
    ("ses", "Amazon SES (via SNS)", "Nothing: SNS messages are checked against Amazon's signing certificate."),
    ("sendgrid", "SendGrid", "The Event Webhook's verification key (base64 public key)."),
    ("postmark", "Postmark", "The webhook's basic-auth credentials, as user:password."),
    ("mailgun", "Mailgun", "Your HTTP webhook signing key."),
    (
        "generic",
        "Generic JSON",
        "A shared secret; sign each body as the docs describe (docs/security.md, X-Herald-Signature).",
    ),
];

#[server(prefix = "/rpc", endpoint = "list_webhooks")]
pub async fn list_webhooks() -> Result<WebhooksView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Viewer).await?;
    let base = m.state.base_url.trim_end_matches('/').to_string();
    let admin = m.role.can_administer();
    let rows = identities::list(&m.state.db, m.tenant)
        .await?
        .into_iter()
        .map(|i| {
            let provider = i.webhook_provider.unwrap_or_default();
            let url = match (&i.webhook_token, provider.is_empty(), admin) {
                (Some(t), false, true) => format!("{base}/webhooks/{provider}/{t}"),
                _ => String::new(),
            };
            WebhookRow { id: i.id.to_string(), name: i.name, provider, url, sns_topic: i.webhook_sns_topic }
        })
        .collect();
    Ok(WebhooksView { rows, can_edit: admin })
}

#[server(prefix = "/rpc", endpoint = "rotate_webhook")]
pub async fn rotate_webhook(id: herald_types::IdentityId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Admin).await?;
    identities::rotate_webhook(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::WebhookRotated, id, serde_json::json!({})).await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "save_webhook")]
pub async fn save_webhook(id: herald_types::IdentityId, provider: String, secret: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::identities};
    let m = require_role(Role::Admin).await?;
    identities::configure_webhook(&m.state.db, &m.state.signer, m.tenant, m.role, id, &provider, &secret).await?;
    // The secret itself never reaches the log.
    m.audit(herald_engine::audit::Action::WebhookConfigured, id, serde_json::json!({ "provider": provider.trim() }))
        .await;
    Ok(())
}

#[component]
pub fn WebhookSettings(
    /// Changes when an identity is added or removed: each identity has its webhook row.
    identities_changed: Signal<usize>,
) -> impl IntoView {
    let save = ServerAction::<SaveWebhook>::new();
    let rotate = ServerAction::<RotateWebhook>::new();
    let data = Resource::new(
        move || (save.version().get(), rotate.version().get(), identities_changed.get()),
        |_| list_webhooks(),
    );
    view! {
        <Card title="Provider webhooks">
            <p class="mb-4 text-sm text-slate-500">
                "Let your email provider tell Herald about deliveries, bounces and spam complaints. Hard bounces and complaints suppress the address at once (a complaint also unsubscribes the reader), soft bounces after 3 in 30 days, and campaigns pause themselves when complaints pass 0.3 %. Give the provider the URL shown for its identity."
            </p>
            <ActionError value=save.value()/>
            <ActionError value=rotate.value()/>
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(v) if v.rows.is_empty() => view! {
                            <p class="text-sm text-slate-500">"Add a sending identity above first: webhooks belong to the identity whose mail they report on."</p>
                        }.into_any(),
                        Ok(v) => {
                            let can_edit = v.can_edit;
                            v.rows.into_iter().map(|r| view! { <WebhookRowForm r=r save=save rotate=rotate can_edit=can_edit/> }).collect_view().into_any()
                        }
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}

#[component]
fn WebhookRowForm(
    r: WebhookRow,
    save: ServerAction<SaveWebhook>,
    rotate: ServerAction<RotateWebhook>,
    can_edit: bool,
) -> impl IntoView {
    let provider = RwSignal::new(r.provider.clone());
    let hint = move || {
        PROVIDERS.iter().find(|p| p.0 == provider.get()).map(|p| p.2).unwrap_or("Webhooks are off for this identity.")
    };
    let rotate_id = r.id.clone();
    let select_id = format!("webhook-provider-{}", r.id);
    let secret_id = format!("webhook-secret-{}", r.id);
    view! {
        <div class="border-t border-slate-100 py-4 first:border-t-0" data-testid="webhook-row">
            <p class="font-medium">{r.name.clone()}</p>
            {(!r.url.is_empty()).then(|| view! {
                <p class="mt-1 text-xs text-slate-500">"Webhook URL: "
                    <code class="break-all rounded bg-slate-100 px-1" data-testid="webhook-url">{r.url.clone()}</code>
                </p>
            })}
            {(r.provider == "ses").then(|| view! {
                <p class="mt-1 text-xs text-slate-500">
                    {match r.sns_topic.clone() {
                        Some(topic) => view! { "Accepts SNS topic " <code class="break-all rounded bg-slate-100 px-1">{topic}</code> " only." }.into_any(),
                        None => "The first SNS topic that confirms a subscription to this URL will be the only one accepted.".into_any(),
                    }}
                </p>
            })}
            {(can_edit && !r.url.is_empty()).then(|| view! {
                <ActionForm action=rotate attr:class="mt-2">
                    <input type="hidden" name="id" value=rotate_id/>
                    <button type="submit" class="btn-secondary text-xs">"New URL"</button>
                    <span class="ml-2 text-xs text-slate-500">"The current URL stops working at once; give the provider the new one (for SES, subscribe it again)."</span>
                </ActionForm>
            })}
            {can_edit.then(|| view! {
                <ActionForm action=save attr:class="mt-3 flex flex-wrap items-end gap-3">
                    <input type="hidden" name="id" value=r.id.clone()/>
                    <div>
                        <label for=select_id.clone() class="block text-xs font-medium text-slate-700">"Provider"</label>
                        <select id=select_id.clone() name="provider" class="input mt-1 w-56" on:change=move |ev| provider.set(event_target_value(&ev))>
                            <option value="" selected=r.provider.is_empty()>"Off"</option>
                            {PROVIDERS.iter().map(|(v, label, _)| view! {
                                <option value=*v selected=r.provider == *v>{*label}</option>
                            }).collect_view()}
                        </select>
                    </div>
                    <div class="min-w-64 flex-1">
                        <label for=secret_id.clone() class="block text-xs font-medium text-slate-700">"Secret"</label>
                        <input id=secret_id.clone() name="secret" type="password" class="input mt-1 w-full" autocomplete="off"
                            placeholder=if r.provider.is_empty() { "" } else { "Leave empty to keep the stored secret" }/>
                    </div>
                    <button type="submit" class="btn-secondary">"Save"</button>
                    <p class="w-full text-xs text-slate-500">{hint}</p>
                </ActionForm>
            })}
        </div>
    }
}
