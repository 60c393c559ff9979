//! `/audience/imports/:id`: map the columns, choose lists and mode, start; then a live progress
//! bar (polling, so it survives a reload) with counts and the error report.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::components::ui::{ActionError, Card, LoadError};
use crate::error::AppError;
use crate::pages::audience::fields::{CreateField, NewField};
use crate::pages::audience::{AudienceTabs, ListsView, list_lists};
use herald_types::{Existing, Import, ImportId, ImportMode, ImportStatus};

#[server(prefix = "/rpc", endpoint = "get_import")]
pub async fn get_import(id: ImportId) -> Result<Import, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::import};
    let m = require_role(Role::Viewer).await?;
    Ok(import::get(&m.state.db, m.tenant, id).await?)
}

/// `mapping` has one entry per column; `lists` is a comma-separated list of list ids; `no_list`
/// is the "Add them to no list" checkbox (present when ticked), needed when `lists` is empty.
#[server(prefix = "/rpc", endpoint = "start_import")]
pub async fn start_import(
    id: ImportId,
    mapping: Vec<String>,
    lists: String,
    #[server(default)] no_list: Option<String>,
    mode: ImportMode,
    existing: Existing,
) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::import};
    let m = require_role(Role::Author).await?;
    let list_ids = lists.split(',').filter(|s| !s.trim().is_empty()).map(str::parse).collect::<Result<Vec<_>, _>>()?;
    let into = import::ImportInto::from_form(list_ids, no_list.is_some())?;
    let start = import::StartImport { mapping, into, mode, existing };
    let detail = serde_json::json!({ "mode": start.mode, "existing": start.existing, "lists": start.into.list_ids() });
    import::start(&m.state.db, &m.state.jobs, m.tenant, m.role, id, start).await?;
    m.audit(herald_engine::audit::Action::ImportStarted, id, detail).await;
    Ok(())
}

/// Deletes an upload that is not importing (its file and mapping), then shows the imports.
#[server(prefix = "/rpc", endpoint = "discard_import")]
pub async fn discard_import(id: ImportId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::import};
    let m = require_role(Role::Author).await?;
    import::discard(&m.state.db, m.tenant, m.role, id).await?;
    leptos_axum::redirect("/audience/imports");
    Ok(())
}

#[component]
pub fn ImportPage() -> impl IntoView {
    let id = move || use_params_map().with(|p| p.get("id")).and_then(|s| s.parse().ok()).unwrap_or(ImportId::NIL);
    let start = ServerAction::<StartImport>::new();
    let discard = ServerAction::<DiscardImport>::new();
    let tick = RwSignal::new(0u32);
    // Reloaded once a start succeeds, never after a refused one: the mapping form keeps the
    // author's choices (ticked lists, columns) beside the error instead of starting over.
    let started = RwSignal::new(0u32);
    Effect::new(move |_| {
        if matches!(start.value().get(), Some(Ok(()))) {
            started.update(|n| *n += 1);
        }
    });
    let detail = Resource::new(move || (id(), tick.get(), started.get()), |(id, _, _)| get_import(id));
    // Every resource of the page is made here, never in a component a `Suspend` builds (see
    // `crate::pages` on hydration ids).
    let lists = Resource::new(|| (), |_| list_lists());
    // A field made beside the mapping is offered in every column's choices at once.
    let create_field = ServerAction::<CreateField>::new();
    let fields = Resource::new(move || create_field.version().get(), |_| crate::pages::audience::fields::list_fields());
    // Poll while the import is queued or running (in the browser only). Whether it is comes
    // from the page's own rendering of the import: the timer reading the resource itself, outside
    // any <Suspense/>, made Leptos warn in the console every second.
    let in_progress = RwSignal::new(false);
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(
            move || {
                if in_progress.get_untracked() {
                    tick.update(|t| *t += 1);
                }
            },
            std::time::Duration::from_millis(1000),
        ) {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <AudienceTabs active="/audience/imports"/>
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let detail = detail.await;
                in_progress.set(detail.as_ref().is_ok_and(|d| d.status.in_progress()));
                match detail {
                    // A failed import that read nothing can be mapped afresh; one that did resumes.
                    Ok(d) if d.status.can_start() && (d.status == ImportStatus::Uploaded || d.rows_read == 0) => view! {
                        <Mapping d=d start=start discard=discard lists=lists fields=fields/>
                        <NewField create=create_field title="New field for a column"
                            hint="A column that needs a typed field (a number, a date, a choice…): make it here, then choose it above."/>
                    }.into_any(),
                    Ok(d) => view! { <Progress d=d start=start discard=discard/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The reader's own parts a column can fill, as the column's choices name them.
const ROLES: [(&str, &str); 6] = [
    ("email", "Email address"),
    ("name", "Name"),
    ("first_name", "First name"),
    ("last_name", "Last name"),
    ("tags", "Tags (comma-separated)"),
    ("ignore", "Don't import"),
];

#[component]
fn Mapping(
    d: Import,
    start: ServerAction<StartImport>,
    discard: ServerAction<DiscardImport>,
    lists: Resource<Result<ListsView, AppError>>,
    fields: Resource<Result<Vec<herald_types::Field>, AppError>>,
) -> impl IntoView {
    let id = d.id.to_string();
    let chosen = RwSignal::new(Vec::<String>::new());
    let no_list = RwSignal::new(false);
    // Start only once the readers have somewhere to go, or "nowhere" was chosen on purpose.
    let destination_chosen = move || !chosen.with(Vec::is_empty) || no_list.get();
    let columns = d.columns.clone();
    view! {
        <Card title=format!("Import “{}”", d.file_name)>
            <ActionForm action=start attr:class="space-y-6">
                <input type="hidden" name="id" value=d.id.to_string()/>
                <input type="hidden" name="lists" prop:value=move || chosen.get().join(",")/>
                <div class="overflow-x-auto">
                    // A spreadsheet with a choice per column: on a phone it scrolls sideways
                    // (`wide-table`) instead of becoming cards, which would hide the choices.
                    <table class="wide-table w-full text-left text-sm" data-testid="import-preview">
                        <thead>
                            <tr>
                                {columns.iter().enumerate().map(|(i, c)| {
                                    let guess = d.mapping.get(i).cloned().unwrap_or_else(|| "ignore".into());
                                    let attr = format!("attributes.{}", c.trim().to_lowercase().replace(|ch: char| !ch.is_alphanumeric(), "_"));
                                    view! {
                                        <th class="p-2 align-top">
                                            <div class="text-xs font-medium text-slate-700">{c.clone()}</div>
                                            <select name=format!("mapping[{i}]") class="input mt-1 min-w-36 text-xs" aria-label=format!("Column {c}")>
                                                {ROLES.iter().map(|(v, label)| view! { <option value=*v selected=guess == *v>{*label}</option> }).collect_view()}
                                                // Typed fields first (each cell is checked against its field; a bad one
                                                // lands in the report), then the column as text of its own, unless a
                                                // field already has its name: one choice per destination.
                                                <Suspense>
                                                    {move || {
                                                        let (attr, guess) = (attr.clone(), guess.clone());
                                                        Suspend::new(async move {
                                                            let fields = fields.await.unwrap_or_default();
                                                            let is_field = fields.iter().any(|f| format!("attributes.{}", f.key) == attr);
                                                            let typed = fields.into_iter().map(|f| {
                                                                let value = format!("attributes.{}", f.key);
                                                                let selected = guess == value;
                                                                view! { <option value=value selected=selected title=f.kind.label()>{format!("Field: {}", f.label)}</option> }
                                                            }).collect_view();
                                                            let untyped = (!is_field).then(|| view! {
                                                                <option value=attr.clone() selected=guess == attr>
                                                                    {format!("Text: {}", attr.trim_start_matches("attributes."))}
                                                                </option>
                                                            });
                                                            view! { {typed} {untyped} }
                                                        })
                                                    }}
                                                </Suspense>
                                            </select>
                                        </th>
                                    }
                                }).collect_view()}
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100 text-slate-600">
                            {d.preview.iter().map(|row| view! {
                                <tr>{row.iter().map(|cell| view! { <td class="p-2">{cell.clone()}</td> }).collect_view()}</tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                <details class="text-sm text-slate-600" data-testid="import-choices-help">
                    <summary class="cursor-pointer text-indigo-700">"What each choice does"</summary>
                    <dl class="mt-2 grid gap-x-4 gap-y-1 sm:grid-cols-[max-content_1fr]">
                        <dt class="font-medium">"Email address"</dt><dd>"The reader's address: exactly one column. Readers already here are matched on it."</dd>
                        <dt class="font-medium">"Name, or First name and Last name"</dt><dd>"The reader's name. First and last names are joined; a full-name column wins when both are given."</dd>
                        <dt class="font-medium">"Tags"</dt><dd>"Tag names separated by commas (“vip, early”)."</dd>
                        <dt class="font-medium">"Field: …"</dt><dd>"One of the workspace's typed fields (a number, a date, a choice…): each cell is checked, and a bad one is reported by line."</dd>
                        <dt class="font-medium">"Text: …"</dt><dd>"Kept as text under the column's name (an attribute), for merge tags and segments, with no type checked."</dd>
                        <dt class="font-medium">"Don't import"</dt><dd>"The column is left out."</dd>
                    </dl>
                </details>
                <fieldset>
                    <legend class="label">"Add the readers to these lists"</legend>
                    <Suspense>
                        {move || Suspend::new(async move {
                            lists.await.map(|v| v.lists.into_iter().map(|l| {
                                let l = l.list;
                                let id = l.id.to_string();
                                let ticked = { let id = id.clone(); move || chosen.with(|c| c.contains(&id)) };
                                view! {
                                    <label class="mr-4 inline-flex max-w-full items-center gap-2 text-sm wrap-anywhere">
                                        <input type="checkbox" prop:checked=ticked on:change=move |ev| {
                                            let on = event_target_checked(&ev);
                                            let id = id.clone();
                                            chosen.update(|c| { c.retain(|x| *x != id); if on { c.push(id); } });
                                        }/>
                                        {l.name}
                                    </label>
                                }
                            }).collect_view()).ok()
                        })}
                    </Suspense>
                    <label class="mt-2 flex items-center gap-2 text-sm text-slate-600">
                        <input type="checkbox" name="no_list" on:change=move |ev| no_list.set(event_target_checked(&ev))/>
                        "Add them to no list (they get no campaign until they join one)"
                    </label>
                    <Show when=move || !destination_chosen()>
                        <p class="mt-1 text-xs text-amber-700" data-testid="import-lists-hint">
                            "Choose a list to add the readers to, or tick “Add them to no list”."
                        </p>
                    </Show>
                </fieldset>
                <div class="grid grid-cols-2 gap-4">
                    <div>
                        <label for="import-mode" class="label">"Consent"</label>
                        <select id="import-mode" name="mode" class="input">
                            <option value=ImportMode::Confirmed.as_str()>"Add as confirmed: I attest these readers consented"</option>
                            <option value=ImportMode::OptIn.as_str()>"Send them an opt-in email first"</option>
                        </select>
                    </div>
                    <div>
                        <label for="import-existing" class="label">"Readers already here"</label>
                        <select id="import-existing" name="existing" class="input">
                            <option value=Existing::Update.as_str()>"Update their name and attributes"</option>
                            <option value=Existing::Skip.as_str()>"Leave them unchanged"</option>
                        </select>
                    </div>
                </div>
                <button type="submit" class="btn-primary" disabled=move || start.pending().get() || !destination_chosen()>"Start import"</button>
                <ActionError value=start.value()/>
            </ActionForm>
            <DiscardButton id=id discard=discard/>
        </Card>
    }
}

#[component]
fn Progress(d: Import, start: ServerAction<StartImport>, discard: ServerAction<DiscardImport>) -> impl IntoView {
    let done = d.status == ImportStatus::Done;
    let failed = d.status == ImportStatus::Failed;
    let percent = d.percent();
    let errors_href = format!("/audience/imports/{}/errors.csv", d.id);
    let discard_id = d.id.to_string();
    view! {
        <Card title=format!("Import “{}”", d.file_name)>
            <div class="mb-2 flex items-center justify-between text-sm">
                <span><span class="badge" data-testid="import-status">{d.status.as_str()}</span></span>
                <span class="font-medium" data-testid="import-percent">{format!("{percent}%")}</span>
            </div>
            <div class="h-3 w-full rounded-full bg-slate-100" role="progressbar" aria-label="Import progress" aria-valuemin="0" aria-valuemax="100" aria-valuenow=percent>
                <div class="h-3 rounded-full transition-all" class:bg-indigo-500=!failed class:bg-red-500=failed style=format!("width: {percent}%")></div>
            </div>
            <dl class="mt-6 grid grid-cols-2 gap-4 text-center text-sm sm:grid-cols-5">
                <div><dt class="text-slate-500">"Rows read"</dt><dd class="text-lg font-semibold" data-testid="rows-read">{d.rows_read}</dd></div>
                <div><dt class="text-slate-500">"Imported"</dt><dd class="text-lg font-semibold" data-testid="rows-created">{d.created}</dd></div>
                <div><dt class="text-slate-500">"Updated"</dt><dd class="text-lg font-semibold" data-testid="rows-updated">{d.updated}</dd></div>
                <div><dt class="text-slate-500">"Skipped"</dt><dd class="text-lg font-semibold" data-testid="rows-skipped">{d.skipped}</dd></div>
                <div><dt class="text-slate-500">"Invalid"</dt><dd class="text-lg font-semibold" data-testid="rows-invalid">{d.invalid}</dd></div>
            </dl>
            {(d.invalid > 0).then(|| view! {
                <p class="mt-4 text-sm">
                    <a href=errors_href class="text-indigo-600 hover:underline" rel="external" download="import-errors.csv">"Download the error report"</a>
                    " — each invalid row with its line number and the reason."
                </p>
            })}
            {d.error.clone().map(|e| view! { <p role="alert" class="mt-4 rounded-md bg-red-50 px-3 py-2 text-sm text-red-700">{e}</p> })}
            {failed.then(|| {
                // Run again with the choices it was started with: its lists, consent and
                // handling of existing readers.
                let mapping = d.mapping.clone();
                let lists = d.list_ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
                view! {
                    <ActionForm action=start attr:class="mt-4">
                        <input type="hidden" name="id" value=d.id.to_string()/>
                        {mapping.into_iter().enumerate().map(|(i, m)| view! { <input type="hidden" name=format!("mapping[{i}]") value=m/> }).collect_view()}
                        <input type="hidden" name="lists" value=lists.clone()/>
                        {lists.is_empty().then(|| view! { <input type="hidden" name="no_list" value="on"/> })}
                        <input type="hidden" name="mode" value=d.mode.as_str()/>
                        <input type="hidden" name="existing" value=d.existing.as_str()/>
                        <button type="submit" class="btn-primary">"Run again (continues where it stopped)"</button>
                    </ActionForm>
                }
            })}
            {failed.then(move || view! { <DiscardButton id=discard_id discard=discard/> })}
            {done.then(|| view! { <a href="/audience/readers" class="btn-secondary mt-6">"See the readers"</a> })}
        </Card>
    }
}

/// Frees the workspace's upload storage (see `HERALD_IMPORT_STORAGE_PER_WORKSPACE`).
#[component]
fn DiscardButton(id: String, discard: ServerAction<DiscardImport>) -> impl IntoView {
    view! {
        <ActionForm action=discard attr:class="mt-4">
            <input type="hidden" name="id" value=id/>
            <button type="submit" class="btn-secondary" disabled=move || discard.pending().get()>"Discard this upload"</button>
            <ActionError value=discard.value()/>
        </ActionForm>
    }
}
