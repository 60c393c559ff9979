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
    // Why the last upload was refused: the upload route sends the form back here with it.
    let query = leptos_router::hooks::use_query_map();
    let upload_error = move || query.with(|q| q.get("upload_error")).filter(|e| !e.trim().is_empty());
    view! {
        <AudienceTabs active="/audience/imports"/>
        <Card title="Import readers from a CSV file">
            <p class="mb-4 text-sm text-slate-500">
                "The first row must name the columns, and one column must hold the email addresses. Commas, semicolons or tabs; UTF-8. You map the columns and choose lists on the next step; rows that cannot be imported are reported with their line number and the rest still import."
            </p>
            <form method="post" action="/audience/imports/upload" enctype="multipart/form-data" class="flex flex-wrap items-center gap-3">
                <label for="csv-file" class="sr-only">"CSV file"</label>
                <input id="csv-file" type="file" name="file" accept=".csv,text/csv,text/plain" required class="min-h-11 text-sm"
                    aria-invalid=move || upload_error().is_some().then_some("true")
                    aria-describedby=move || upload_error().is_some().then_some("csv-file-error")/>
                <button type="submit" class="btn-primary">"Upload"</button>
            </form>
            {move || upload_error().map(|e| view! {
                <p id="csv-file-error" role="alert" class="mt-2 text-sm text-red-700" data-testid="upload-error">{e}</p>
            })}
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
