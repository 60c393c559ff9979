//! `/transactional/templates`: the workspace's transactional templates (what API callers name in
//! `template`), with their current version.

use herald_types::Template;
use leptos::prelude::*;

use crate::components::ui::{Card, EmptyState, LoadError, LocalTimeOf, TabbedHeader};
use crate::error::AppError;
use crate::pages::transactional::TABS;

#[server(prefix = "/rpc", endpoint = "list_tx_templates")]
pub async fn list_tx_templates() -> Result<Vec<Template>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::transactional::templates;
    let m = require_role(Role::Viewer).await?;
    Ok(templates::list(&m.state.db, m.tenant).await?)
}

#[component]
pub fn TxTemplatesPage() -> impl IntoView {
    let data = Resource::new(|| (), |_| list_tx_templates());
    view! {
        <TabbedHeader title="Transactional" subtitle="Templates: named, versioned, with variables from each API request."
            tabs=TABS active="/transactional/templates"/>
        <div class="mb-4 text-right"><a href="/transactional/templates/new" class="btn-primary" data-testid="new-template">"New template"</a></div>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(rows) if rows.is_empty() => view! {
                        <EmptyState title="No templates yet"
                            body="A template holds a subject and an HTML or text body with {{ variables }}; your application sends it with POST /api/v1/messages and the variables for that message."
                            action_href="/transactional/templates/new" action_label="Create a template"/>
                    }.into_any(),
                    Ok(rows) => view! { <TemplateTable rows=rows/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn TemplateTable(rows: Vec<Template>) -> impl IntoView {
    view! {
        <Card>
            <table class="w-full text-left text-sm" data-testid="templates-table">
                <thead class="text-xs uppercase text-slate-500">
                    <tr><th class="py-2">"Name"</th><th>"Subject"</th><th>"Version"</th><th>"Updated"</th></tr>
                </thead>
                <tbody class="divide-y divide-slate-100">
                    {rows.into_iter().map(|t| {
                        let href = format!("/transactional/templates/{}", t.id);
                        view! {
                            <tr>
                                <td class="py-2"><a href=href class="font-mono text-indigo-600 hover:underline">{t.name}</a>
                                    <div class="text-xs text-slate-500">{t.description}</div></td>
                                <td class="max-w-xs truncate" title=t.subject.clone()>{t.subject.clone()}</td>
                                <td>{format!("v{}", t.version)}</td>
                                <td class="text-slate-500"><LocalTimeOf at=t.updated_at/></td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </Card>
    }
}
