//! `/audience/imports`: upload a CSV (plain multipart form, streamed to the server) and see
//! earlier imports.

use leptos::prelude::*;

use crate::components::ui::{Card, LoadError, LocalTimeOf};
use crate::error::AppError;
use crate::pages::audience::AudienceTabs;
use herald_types::ImportSummary;

#[server(prefix = "/rpc", endpoint = "list_imports")]
pub async fn list_imports() -> Result<Vec<ImportSummary>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::import};
    let m = require_role(Role::Viewer).await?;
    Ok(import::recent(&m.state.db, m.tenant, 50).await?)
}

#[component]
pub fn ImportsPage() -> impl IntoView {
    let imports = Resource::new(|| (), |_| list_imports());
    view! {
        <AudienceTabs active="/audience/imports"/>
        <Card title="Import readers from a CSV file">
            <p class="mb-4 text-sm text-slate-500">
                "The first row must name the columns. Commas, semicolons or tabs; UTF-8. You map the columns and choose lists on the next step; rows that cannot be imported are reported with their line number and the rest still import."
            </p>
            <form method="post" action="/audience/imports/upload" enctype="multipart/form-data" class="flex items-center gap-3">
                <label for="csv-file" class="sr-only">"CSV file"</label>
                <input id="csv-file" type="file" name="file" accept=".csv,text/csv,text/plain" required class="min-h-11 text-sm"/>
                <button type="submit" class="btn-primary">"Upload"</button>
            </form>
        </Card>
        <Card title="Recent imports">
            <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match imports.await {
                        Ok(list) if list.is_empty() => view! { <p class="text-sm text-slate-500">"No imports yet."</p> }.into_any(),
                        Ok(list) => view! {
                            <table class="w-full text-left text-sm">
                                <thead class="text-xs uppercase text-slate-500"><tr><th class="py-2">"File"</th><th>"Status"</th><th>"Rows"</th><th>"Invalid"</th><th>"Uploaded"</th></tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {list.into_iter().map(|i| view! {
                                        <tr>
                                            <td class="py-2"><a class="text-indigo-600 hover:underline" href=format!("/audience/imports/{}", i.id)>{i.file_name}</a></td>
                                            <td><span class="badge">{i.status.as_str()}</span></td>
                                            <td>{i.rows_read}</td><td>{i.invalid}</td>
                                            <td class="text-slate-500"><LocalTimeOf at=i.created_at/></td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}
