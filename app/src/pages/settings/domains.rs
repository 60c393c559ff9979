//! `/settings/domains`: the domains this workspace may send From. Add one, publish the DNS
//! records shown, check them; mail From an unverified domain is refused with a message that
//! points here.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, ConfirmDialog, CopyButton, EmptyState, LoadError, LocalTime};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;
pub use herald_types::{DnsRecordView as RecordView, SendingDomainView as DomainView};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DomainsPageData {
    pub can_edit: bool,
    pub domains: Vec<DomainView>,
}

#[server(prefix = "/rpc", endpoint = "list_sending_domains")]
pub async fn list_sending_domains() -> Result<DomainsPageData, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::domains};
    let m = require_role(Role::Viewer).await?;
    let spf = &m.state.domains.spf_include;
    let domains = domains::list(&m.state.db, m.tenant).await?;
    Ok(DomainsPageData {
        can_edit: m.role.can_administer(),
        domains: domains.into_iter().map(|d| domains::view(d, spf)).collect(),
    })
}

#[server(prefix = "/rpc", endpoint = "add_sending_domain")]
pub async fn add_sending_domain(domain: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::domains};
    let m = require_role(Role::Admin).await?;
    domains::add(&m.state.db, &m.state.signer, m.tenant, m.role, &domain).await?;
    m.audit(herald_engine::audit::Action::DomainAdded, domain.trim().to_lowercase(), serde_json::json!({})).await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "check_sending_domain")]
pub async fn check_sending_domain(domain_id: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::domains};
    let m = require_role(Role::Admin).await?;
    let id = crate::ssr::parse_id(&domain_id)?;
    domains::check(&m.state.db, &m.state.domains, m.tenant, m.role, id).await?;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "delete_sending_domain")]
pub async fn delete_sending_domain(domain_id: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, sending::domains};
    let m = require_role(Role::Admin).await?;
    let id = crate::ssr::parse_id(&domain_id)?;
    domains::delete(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::DomainDeleted, id, serde_json::json!({})).await;
    Ok(())
}

#[component]
pub fn SendingDomainsPage() -> impl IntoView {
    let add = ServerAction::<AddSendingDomain>::new();
    let check = ServerAction::<CheckSendingDomain>::new();
    let delete = ServerAction::<DeleteSendingDomain>::new();
    let data = Resource::new(
        move || (add.version().get(), check.version().get(), delete.version().get()),
        |_| list_sending_domains(),
    );
    view! {
        <SettingsTabs active="/settings/domains"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(d) => view! { <DomainsView data=d add=add check=check delete=delete/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn DomainsView(
    data: DomainsPageData,
    add: ServerAction<AddSendingDomain>,
    check: ServerAction<CheckSendingDomain>,
    delete: ServerAction<DeleteSendingDomain>,
) -> impl IntoView {
    let can_edit = data.can_edit;
    let empty = data.domains.is_empty();
    view! {
        <Card title="Sending domains">
            <p class="mb-4 text-sm text-slate-500">
                "Campaigns, test emails and transactional messages can only come From a domain this workspace has verified "
                "(or a subdomain of one). Add your domain, publish the records below at your DNS provider, then check them. "
                "The ownership record verifies the domain; SPF, DKIM and DMARC make your mail trusted by inboxes."
            </p>
            {if can_edit {
                view! {
                    <ActionForm action=add attr:class="flex flex-wrap items-end gap-3">
                        <div class="min-w-0 flex-1">
                            <label for="domain" class="label">"Domain"</label>
                            <input id="domain" name="domain" required maxlength="253" class="input"
                                placeholder="example.com" autocomplete="off" spellcheck="false"/>
                        </div>
                        <button type="submit" class="btn-primary" disabled=move || add.pending().get()>
                            {move || if add.pending().get() { "Adding…" } else { "Add domain" }}
                        </button>
                    </ActionForm>
                    <ActionError value=add.value()/>
                }.into_any()
            } else {
                view! {
                    <p class="rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800">
                        "Only owners and admins can add or check domains."
                    </p>
                }.into_any()
            }}
        </Card>
        <ActionError value=check.value()/>
        <ActionError value=delete.value()/>
        {empty.then(|| view! {
            <EmptyState title="No sending domains yet"
                body="Until you verify a domain, this workspace cannot send. Add the domain your From addresses use above."/>
        })}
        {data.domains.into_iter().map(|d| view! { <DomainCard d=d can_edit=can_edit check=check delete=delete/> }).collect_view()}
    }
}

#[component]
fn DomainCard(
    d: DomainView,
    can_edit: bool,
    check: ServerAction<CheckSendingDomain>,
    delete: ServerAction<DeleteSendingDomain>,
) -> impl IntoView {
    let confirm_open = RwSignal::new(false);
    let id = d.id.clone();
    let delete_id = d.id.clone();
    let checking = move || check.pending().get();
    let verified_badge = match d.verified_by.as_deref() {
        Some("operator") => {
            view! { <span class="badge bg-emerald-100 text-emerald-800">"Verified by an operator"</span> }.into_any()
        }
        Some(_) => view! { <span class="badge bg-emerald-100 text-emerald-800">"Verified"</span> }.into_any(),
        None => view! { <span class="badge bg-amber-100 text-amber-800">"Not verified"</span> }.into_any(),
    };
    let signing_badge = if d.signing {
        view! { <span class="badge bg-emerald-100 text-emerald-800">"DKIM signing on"</span> }.into_any()
    } else {
        view! { <span class="badge">"DKIM signing off"</span> }.into_any()
    };
    let domain_name = d.domain.clone();
    view! {
        <section class="mb-6 rounded-xl border border-slate-200 bg-white p-6 shadow-sm" data-testid="sending-domain">
            <div class="mb-4 flex flex-wrap items-center gap-3">
                <h2 class="break-all text-lg font-medium text-slate-900">{d.domain.clone()}</h2>
                {verified_badge}
                {signing_badge}
                <span class="text-xs text-slate-500">
                    {match d.checked_at.clone() {
                        Some(at) => view! { "Checked " <LocalTime at=at/> }.into_any(),
                        None => "Not checked yet".into_any(),
                    }}
                </span>
            </div>
            <ul class="space-y-3">
                {d.records.into_iter().map(|r| view! { <RecordRow r=r/> }).collect_view()}
            </ul>
            {can_edit.then(|| view! {
                <div class="mt-4 flex flex-wrap gap-3">
                    <ActionForm action=check>
                        <input type="hidden" name="domain_id" value=id.clone()/>
                        <button type="submit" class="btn-primary" disabled=checking>
                            {move || if checking() { "Checking DNS…" } else { "Check DNS now" }}
                        </button>
                    </ActionForm>
                    <button type="button" class="btn-secondary text-red-700" on:click=move |_| confirm_open.set(true)>
                        "Remove"
                    </button>
                </div>
                <ConfirmDialog open=confirm_open title="Remove this domain?" confirm_label="Remove" danger=true
                    on_confirm=Callback::new(move |_| {
                        delete.dispatch(DeleteSendingDomain { domain_id: delete_id.clone() });
                    })>
                    {format!("Mail From {} will be refused until the domain is added and verified again; its DKIM key is deleted.", domain_name)}
                </ConfirmDialog>
            })}
        </section>
    }
}

#[component]
fn RecordRow(r: RecordView) -> impl IntoView {
    let (badge_class, badge_text) = match r.status.as_str() {
        "found" => ("badge bg-emerald-100 text-emerald-800", "Found"),
        "missing" => ("badge bg-amber-100 text-amber-800", "Missing"),
        "wrong" => ("badge bg-red-100 text-red-800", "Wrong value"),
        "unknown" => ("badge bg-slate-100 text-slate-700", "No answer"),
        _ => ("badge", "Not checked"),
    };
    let detail = (!r.detail.is_empty()).then(|| view! { <p class="mt-1 text-xs text-red-700">{r.detail.clone()}</p> });
    view! {
        <li class="rounded-lg border border-slate-200 p-3" data-record=r.label.to_lowercase()>
            <div class="flex flex-wrap items-center justify-between gap-2">
                <span class="text-sm font-medium text-slate-800">{r.label.clone()} " · TXT"</span>
                <span class=badge_class data-testid="record-status">{badge_text}</span>
            </div>
            <dl class="mt-2 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 text-xs">
                <dt class="text-slate-500">"Host"</dt>
                <dd class="flex items-start justify-between gap-2">
                    <code class="break-all font-mono text-slate-800">{r.host.clone()}</code>
                    <CopyButton text=r.host.clone() label="Copy" class="link-button shrink-0 text-indigo-600"/>
                </dd>
                <dt class="text-slate-500">"Value"</dt>
                <dd class="flex items-start justify-between gap-2">
                    <code class="break-all font-mono text-slate-800">{r.value.clone()}</code>
                    <CopyButton text=r.value.clone() label="Copy" class="link-button shrink-0 text-indigo-600"/>
                </dd>
            </dl>
            {detail}
        </li>
    }
}
