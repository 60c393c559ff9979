//! `/audience/readers`: search and filter readers (email or name, list, status, an attribute
//! condition), page through them newest first, and add one by hand.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf, url_encode};
use crate::error::AppError;
use crate::pages::audience::{AudienceTabs, ListsView, TagOptions, list_lists};
use herald_types::{ReaderPage, ReaderStatus};
use serde::{Deserialize, Serialize};

/// The readers list's filter as the page's address and forms carry it (empty means "any").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilterForm {
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub list: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub attribute: String,
    #[serde(default)]
    pub tag: String,
}

impl FilterForm {
    /// The query parameters of the page, in the order they are shown.
    pub const PARAMS: [&str; 5] = ["q", "list", "status", "attribute", "tag"];

    /// Parsed and checked: the engine's filter, or what is wrong with it.
    #[cfg(feature = "ssr")]
    pub fn parse(self) -> Result<herald_engine::audience::readers::ReaderFilter, AppError> {
        use herald_engine::audience::readers::{AttributeCondition, ReaderFilter};
        let attribute = self.attribute.trim();
        Ok(ReaderFilter {
            search: Some(self.q).filter(|s| !s.trim().is_empty()),
            list: if self.list.is_empty() { None } else { Some(self.list.parse()?) },
            status: ReaderStatus::parse_optional(&self.status)?,
            attribute: if attribute.is_empty() { None } else { Some(AttributeCondition::parse(attribute)?) },
            tag: Some(self.tag).filter(|t| !t.trim().is_empty()),
        })
    }
}

#[server(prefix = "/rpc", endpoint = "search_readers")]
pub async fn search_readers(filter: FilterForm, before: Option<i64>) -> Result<ReaderPage, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::audience::readers;
    let m = require_role(Role::Viewer).await?;
    Ok(readers::search(&m.state.db, m.tenant, &filter.parse()?, before, 50).await?)
}

#[server(prefix = "/rpc", endpoint = "add_reader")]
pub async fn add_reader(email: String, name: String, list: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::consent::Origin, audience::readers};
    let m = require_role(Role::Author).await?;
    let lists: Vec<herald_types::ListId> = list.parse().ok().into_iter().collect();
    let origin = Origin {
        wording: Some("Added by a workspace member, who attests the reader's consent.".into()),
        ..Origin::new("admin")
    };
    readers::add(&m.state.db, m.tenant, m.role, &email, &name, &lists, &origin).await?;
    Ok(())
}

/// Applies a bulk action to the selected readers (`scope = "ids:1,2,3"`) or to everyone matching
/// the filter (`scope = "filter"`). Returns a summary to show.
#[server(prefix = "/rpc", endpoint = "bulk_readers")]
pub async fn bulk_readers(
    scope: String,
    #[server(default)] filter: FilterForm,
    action: String,
    target_list: String,
    #[server(default)] tag: String,
) -> Result<String, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::audience::consent::Origin;
    use herald_engine::audience::readers::{self, BulkAction, Target};
    let m = require_role(Role::Author).await?;
    let parse_list =
        |s: &str| s.parse::<herald_types::ListId>().map_err(|_| AppError::invalid("Choose a list.").respond());
    let target = if scope == "filter" {
        Target::Filter(filter.parse()?)
    } else {
        let ids: Vec<i64> =
            scope.strip_prefix("ids:").unwrap_or("").split(',').filter_map(|s| s.trim().parse().ok()).collect();
        if ids.is_empty() {
            return Err(AppError::invalid("Select at least one reader.").respond());
        }
        Target::Ids(ids)
    };
    let action = match action.as_str() {
        "add_to_list" => BulkAction::AddToList(parse_list(&target_list)?),
        "remove_from_list" => BulkAction::RemoveFromList(parse_list(&target_list)?),
        "unsubscribe_all" => BulkAction::UnsubscribeAll,
        "delete" => BulkAction::Delete,
        "add_tag" => BulkAction::AddTag(tag),
        "remove_tag" => BulkAction::RemoveTag(tag),
        _ => return Err(AppError::invalid("Choose an action.").respond()),
    };
    let origin = Origin { wording: Some("Bulk change by a workspace member.".into()), ..Origin::new("admin") };
    let n = readers::bulk_action(&m.state.db, m.tenant, m.role, &target, &action, &origin).await?;
    if action == BulkAction::Delete {
        let scope = match &target {
            Target::Ids(ids) => serde_json::json!({ "ids": ids }),
            Target::Filter(f) => {
                serde_json::json!({ "search": f.search, "list": f.list, "status": f.status, "tag": f.tag })
            }
        };
        m.audit(herald_engine::audit::Action::ReaderErased, format!("{n} readers"), scope).await;
    }
    Ok(format!("Done: {n} readers changed."))
}

#[component]
pub fn ReadersPage() -> impl IntoView {
    let query = use_query_map();
    let param = move |k: &str| query.with(|q| q.get(k)).unwrap_or_default();
    let add = ServerAction::<AddReader>::new();
    // Once a reader is added, the form is reset for the next one. A reset (not clearing the
    // values one by one) also forgets that the fields were touched, so the empty required
    // Email field is not outlined red as invalid.
    let add_form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if matches!(add.value().get(), Some(Ok(_)))
            && let Some(form) = add_form.get()
        {
            form.reset();
        }
    });
    let bulk = ServerAction::<BulkReaders>::new();
    let selected = RwSignal::new(Vec::<i64>::new());
    let selected_ids =
        move || format!("ids:{}", selected.with(|s| s.iter().map(i64::to_string).collect::<Vec<String>>().join(",")));
    let lists = Resource::new(|| (), |_| list_lists());
    let known_tags = Resource::new(move || bulk.version().get(), |_| crate::pages::audience::tags::list_tags());
    let before = move || query.with(|q| q.get("before")).and_then(|b| b.parse::<i64>().ok());
    let readers = Resource::new(
        move || {
            (
                FilterForm {
                    q: param("q"),
                    list: param("list"),
                    status: param("status"),
                    attribute: param("attribute"),
                    tag: param("tag"),
                },
                before(),
                add.version().get(),
                bulk.version().get(),
            )
        },
        |(filter, before, _, _)| search_readers(filter, before),
    );
    let export_href = move || {
        let params: Vec<String> = FilterForm::PARAMS.iter().map(|k| format!("{k}={}", url_encode(&param(k)))).collect();
        format!("/audience/readers/export.csv?{}", params.join("&"))
    };
    view! {
        <AudienceTabs active="/audience/readers"/>
        <div class="-mt-2 mb-4 flex justify-end">
            <a href=export_href class="btn-secondary" rel="external" download="readers.csv">"Export CSV"</a>
        </div>
        <Card>
            // Two columns on a phone (each field keeps a usable width), five from `sm` up.
            <form method="get" class="grid grid-cols-2 gap-3 sm:grid-cols-5" role="search">
                <input name="q" class="input col-span-2" placeholder="Search email or name" prop:value=move || param("q") aria-label="Search"/>
                <select name="list" class="input" aria-label="List" prop:value=move || param("list")>
                    <option value="">"All lists"</option>
                    <ListOptions lists=lists/>
                </select>
                <select name="status" class="input" aria-label="Status" prop:value=move || param("status")>
                    <option value="">"Any status"</option>
                    {ReaderStatus::ALL.iter().map(|s| view! { <option value=s.as_str()>{s.label()}</option> }).collect_view()}
                </select>
                <button type="submit" class="btn-primary">"Filter"</button>
                <input name="tag" class="input" placeholder="Tag" list="filter-tags" autocomplete="off"
                    prop:value=move || param("tag") aria-label="Filter by tag"/>
                <TagOptions id="filter-tags" tags=known_tags/>
                <input name="attribute" class="input col-span-2 font-mono text-xs sm:col-span-3" placeholder="Attribute condition, e.g. city = \"Lyon\" or plan in [\"pro\", \"team\"]"
                    prop:value=move || param("attribute") aria-label="Attribute condition"/>
            </form>
        </Card>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match readers.await {
                    Ok(v) => view! { <ReaderTable v=v selected=selected/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
        <Card title="Bulk actions">
            <ActionForm action=bulk attr:class="flex flex-wrap items-end gap-3">

                {FilterForm::PARAMS.map(|k| view! { <input type="hidden" name=format!("filter[{k}]") prop:value=move || param(k)/> })}
                <div>
                    <label for="bulk-scope" class="label">"Apply to"</label>
                    <select id="bulk-scope" name="scope" class="input">
                        <option prop:value=selected_ids>{move || format!("The {} selected readers", selected.with(Vec::len))}</option>
                        <option value="filter">"Everyone matching the filter"</option>
                    </select>
                </div>
                <div>
                    <label for="bulk-action" class="label">"Action"</label>
                    <select id="bulk-action" name="action" class="input">
                        <option value="add_to_list">"Add to list (confirmed)"</option>
                        <option value="remove_from_list">"Remove from list"</option>
                        <option value="add_tag">"Add tag"</option>
                        <option value="remove_tag">"Remove tag"</option>
                        <option value="unsubscribe_all">"Unsubscribe from everything"</option>
                        <option value="delete">"Delete (erase)"</option>
                    </select>
                </div>
                <div>
                    <label for="bulk-list" class="label">"List"</label>
                    <select id="bulk-list" name="target_list" class="input">
                        <option value="">"—"</option>
                        <ListOptions lists=lists/>
                    </select>
                </div>
                <div>
                    <label for="bulk-tag" class="label">"Tag"</label>
                    <input id="bulk-tag" name="tag" class="input w-40" maxlength="50" list="known-tags" autocomplete="off"/>
                    <TagOptions id="known-tags" tags=known_tags/>
                </div>
                <button type="submit" class="btn-primary" disabled=move || bulk.pending().get()>"Apply"</button>
            </ActionForm>
            <p class="mt-2 text-sm text-emerald-700" role="status">{move || bulk.value().get().and_then(|r| r.ok())}</p>
            <ActionError value=bulk.value()/>
        </Card>
        <Card title="Add a reader">
            <ActionForm action=add node_ref=add_form attr:class="flex flex-wrap items-end gap-3">
                <div class="min-w-56 flex-1"><label for="new-email" class="label">"Email"</label><input id="new-email" name="email" type="email" required class="input"/></div>
                <div class="min-w-40 flex-1"><label for="new-name" class="label">"Name"</label><input id="new-name" name="name" class="input"/></div>
                <div>
                    <label for="new-list" class="label">"Add to list (confirmed)"</label>
                    <select id="new-list" name="list" class="input">
                        <option value="">"No list"</option>
                        <ListOptions lists=lists/>
                    </select>
                </div>
                <button type="submit" class="btn-primary">"Add reader"</button>
            </ActionForm>
            <p class="mt-2 text-xs text-slate-500">"Adding someone by hand records in the consent ledger that you attest their consent."</p>
            <ActionError value=add.value()/>
        </Card>
    }
}

#[component]
fn ReaderTable(v: ReaderPage, selected: RwSignal<Vec<i64>>) -> impl IntoView {
    if v.readers.is_empty() {
        return view! {
            <Card><p class="py-6 text-center text-sm text-slate-500">"No readers match. Share your sign-up page, add someone below, or change the filter."</p></Card>
        }
        .into_any();
    }
    let next = v.next_before.map(|b| {
        let query = use_query_map().get_untracked();
        let mut params: Vec<String> =
            FilterForm::PARAMS.iter().filter_map(|k| query.get(k).map(|v| format!("{k}={}", url_encode(&v)))).collect();
        params.push(format!("before={b}"));
        format!("/audience/readers?{}", params.join("&"))
    });
    view! {
        <Card>
            <table class="w-full text-left text-sm" data-testid="readers-table">
                <thead class="text-xs uppercase text-slate-500"><tr><th class="w-8"></th><th class="py-2">"Reader"</th><th>"Status"</th><th>"Added"</th></tr></thead>
                <tbody class="divide-y divide-slate-100">
                    {v.readers.into_iter().map(|r| view! {
                        <tr>
                            <td>
                                // The label is the 44 px target a finger needs around a 13 px box.
                                <label class="-ml-3 flex h-11 w-11 cursor-pointer items-center justify-center">
                                    <input type="checkbox" aria-label=format!("Select {}", r.email)
                                        prop:checked=move || selected.with(|s| s.contains(&r.id))
                                        on:change=move |ev| {
                                            let on = event_target_checked(&ev);
                                            selected.update(|s| { s.retain(|x| *x != r.id); if on { s.push(r.id); } });
                                        }/>
                                </label>
                            </td>
                            <td class="py-2">
                                <a href=format!("/audience/readers/{}", r.id) class="font-medium text-slate-800 hover:text-indigo-600">{r.email}</a>
                                <div class="text-xs text-slate-500">{r.name}</div>
                            </td>
                            <td><span class="badge">{r.status.as_str()}</span></td>
                            <td class="text-slate-500" data-label="Added"><LocalTimeOf at=r.created_at/></td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            {next.map(|href| view! { <div class="mt-4 text-right"><a href=href class="btn-secondary">"Older readers →"</a></div> })}
        </Card>
    }
    .into_any()
}

/// `<option>`s for the workspace's lists, once loaded.
#[component]
fn ListOptions(lists: Resource<Result<ListsView, AppError>>) -> impl IntoView {
    view! {
        <Suspense>
            {move || Suspend::new(async move {
                lists.await.map(|v| v.lists.into_iter().map(|l| view! { <option value=l.list.id.to_string()>{l.list.name}</option> }).collect_view()).ok()
            })}
        </Suspense>
    }
}
