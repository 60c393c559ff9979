//! `/audience/suppressions`: addresses this workspace never mails. Search, add (one, a pasted
//! list or a CSV column), and remove (admins; bounces and complaints ask for confirmation).

use herald_types::Suppression;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf};
use crate::error::AppError;
use crate::pages::audience::AudienceTabs;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuppressionsView {
    pub rows: Vec<Suppression>,
    pub can_remove: bool,
}

#[server(prefix = "/rpc", endpoint = "search_suppressions")]
pub async fn search_suppressions(q: String) -> Result<SuppressionsView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::suppressions};
    let m = require_role(Role::Viewer).await?;
    let rows = suppressions::search(&m.state.db, m.tenant, &q, 200).await?;
    Ok(SuppressionsView { rows, can_remove: m.role.can_administer() })
}

/// Adds every address in `emails` (one per line, or separated by commas or semicolons; a CSV
/// export's first column works too). Returns a summary to show.
#[server(prefix = "/rpc", endpoint = "add_suppressions")]
pub async fn add_suppressions(emails: String) -> Result<String, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::suppressions};
    let m = require_role(Role::Author).await?;
    let list: Vec<String> = emails
        .lines()
        .flat_map(|l| l.split([',', ';']))
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("email"))
        .collect();
    let herald_types::SuppressionsAdded { suppressed: added, invalid } =
        suppressions::add_many(&m.state.db, m.tenant, m.role, &list, suppressions::SuppressionReason::Manual, "admin")
            .await?;
    Ok(if invalid.is_empty() {
        format!("{added} addresses suppressed.")
    } else {
        format!(
            "{added} addresses suppressed; skipped {} that are not email addresses: {}",
            invalid.len(),
            invalid.join(", ")
        )
    })
}

#[server(prefix = "/rpc", endpoint = "remove_suppression")]
pub async fn remove_suppression(email: String, confirmed: Option<String>) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::suppressions};
    let m = require_role(Role::Admin).await?;
    suppressions::remove(&m.state.db, m.tenant, m.role, &email, confirmed.is_some_and(|c| c == "yes")).await?;
    m.audit(herald_engine::audit::Action::SuppressionRemoved, herald_engine::Email::key(&email), serde_json::json!({}))
        .await;
    Ok(())
}

#[component]
pub fn SuppressionsPage() -> impl IntoView {
    let query = use_query_map();
    let q = move || query.with(|q| q.get("q")).unwrap_or_default();
    let add = ServerAction::<AddSuppressions>::new();
    let remove = ServerAction::<RemoveSuppression>::new();
    let data =
        Resource::new(move || (q(), add.version().get(), remove.version().get()), |(q, _, _)| search_suppressions(q));
    view! {
        <AudienceTabs active="/audience/suppressions"/>
        <Card title="Add addresses">
            <ActionForm action=add attr:class="space-y-3">
                <textarea name="emails" rows="4" class="input font-mono text-xs" required
                    placeholder="one@example.com\ntwo@example.com" aria-label="Addresses to suppress"></textarea>
                <button type="submit" class="btn-primary">"Suppress"</button>
            </ActionForm>
            <p class="mt-2 text-sm text-emerald-700" role="status">{move || add.value().get().and_then(|r| r.ok())}</p>
            <ActionError value=add.value()/>
        </Card>
        <Card>
            <form method="get" class="mb-4 flex gap-2" role="search">
                <input name="q" class="input" placeholder="Search addresses" prop:value=q aria-label="Search suppressions"/>
                <button type="submit" class="btn-secondary">"Search"</button>
            </form>
            <ActionError value=remove.value()/>
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(v) if v.rows.is_empty() => view! {
                            <p class="py-4 text-center text-sm text-slate-500">"Nobody is suppressed. Hard bounces, complaints and people who leave everything land here automatically."</p>
                        }.into_any(),
                        Ok(v) => view! { <SuppressionTable v=v remove=remove/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}

#[component]
fn SuppressionTable(v: SuppressionsView, remove: ServerAction<RemoveSuppression>) -> impl IntoView {
    let can_remove = v.can_remove;
    view! {
        <table class="w-full text-left text-sm" data-testid="suppressions-table">
            <thead class="text-xs uppercase text-slate-500"><tr><th class="py-2">"Address"</th><th>"Reason"</th><th>"Source"</th><th>"Since"</th><th></th></tr></thead>
            <tbody class="divide-y divide-slate-100">
                {v.rows.into_iter().map(|s| view! {
                    <tr>
                        <td class="py-2 font-mono text-xs">{s.email_lower.clone()}</td>
                        <td><span class="badge">{s.reason.label()}</span></td>
                        <td class="text-slate-500">{s.source}</td>
                        <td class="text-slate-500"><LocalTimeOf at=s.created_at/></td>
                        <td class="text-right">
                            {can_remove.then(|| view! {
                                <ActionForm action=remove attr:class="flex items-center justify-end gap-2">
                                    <input type="hidden" name="email" value=s.email_lower.clone()/>
                                    {s.reason.protects_reputation().then(|| view! {
                                        <label class="text-xs text-slate-500"><input type="checkbox" name="confirmed" value="yes"/>" I know this "{s.reason.label()}" hurts deliverability"</label>
                                    })}
                                    <button type="submit" class="link-button text-red-600">"Remove"</button>
                                </ActionForm>
                            })}
                        </td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
