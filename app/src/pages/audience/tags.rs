//! `/audience/tags`: the workspace's tags with how many readers carry each; rename one in place
//! or delete it (it comes off every reader). Tags are made by tagging readers (the reader page,
//! the readers list's bulk actions, an import column, the API).

use herald_types::{Tag, TagId};
use leptos::prelude::*;

use crate::components::ui::{ActionError, Card, ConfirmDialog, EmptyState, LoadError};
use crate::error::AppError;
use crate::pages::audience::AudienceTabs;

#[server(prefix = "/rpc", endpoint = "list_tags")]
pub async fn list_tags() -> Result<Vec<Tag>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::tags};
    let m = require_role(Role::Viewer).await?;
    Ok(tags::list(&m.state.db, m.tenant).await?)
}

#[server(prefix = "/rpc", endpoint = "rename_tag")]
pub async fn rename_tag(id: TagId, name: String) -> Result<Tag, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::tags};
    let m = require_role(Role::Author).await?;
    Ok(tags::rename(&m.state.db, m.tenant, m.role, id, &name).await?)
}

#[server(prefix = "/rpc", endpoint = "delete_tag")]
pub async fn delete_tag(id: TagId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::tags};
    let m = require_role(Role::Author).await?;
    tags::delete(&m.state.db, m.tenant, m.role, id).await?;
    Ok(())
}

#[component]
pub fn TagsPage() -> impl IntoView {
    let rename = ServerAction::<RenameTag>::new();
    let delete = ServerAction::<DeleteTag>::new();
    let tags = Resource::new(move || (rename.version().get(), delete.version().get()), |_| list_tags());
    view! {
        <AudienceTabs active="/audience/tags"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match tags.await {
                    Ok(list) if list.is_empty() => view! {
                        <EmptyState title="No tags yet"
                            body="Tag readers on their page, select some on the readers list and add a tag to all of them, map a column of an import to tags, or use the API. Segments and campaigns can then pick readers by tag."
                            action_href="/audience/readers" action_label="Go to the readers"/>
                    }.into_any(),
                    Ok(list) => view! { <TagTable tags=list rename=rename delete=delete/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn TagTable(tags: Vec<Tag>, rename: ServerAction<RenameTag>, delete: ServerAction<DeleteTag>) -> impl IntoView {
    view! {
        <Card title="Tags">
            <ActionError value=rename.value()/>
            <ActionError value=delete.value()/>
            <ul class="divide-y divide-slate-100" data-testid="tags-list">
                {tags.into_iter().map(|t| view! { <TagRow tag=t rename=rename delete=delete/> }).collect_view()}
            </ul>
        </Card>
    }
}

#[component]
fn TagRow(tag: Tag, rename: ServerAction<RenameTag>, delete: ServerAction<DeleteTag>) -> impl IntoView {
    let editing = RwSignal::new(false);
    let confirm = RwSignal::new(false);
    let id = tag.id;
    let name = tag.name.clone();
    let input_id = StoredValue::new(format!("tag-name-{}", tag.id.0));
    let current = StoredValue::new(tag.name.clone());
    let readers = tag.readers;
    let count = if readers == 1 { "1 reader".to_string() } else { format!("{readers} readers") };
    // The readers list, filtered by this tag (where bulk actions apply to all of them).
    let readers_href = format!("/audience/readers?tag={}", crate::components::ui::url_encode(&tag.name));
    view! {
        <li class="flex flex-wrap items-center justify-between gap-3 py-3" data-testid="tag-row">
            <Show when=move || editing.get() fallback={
                let name = name.clone();
                move || view! {
                    <div class="min-w-0">
                        <span class="badge max-w-full break-all normal-case" data-testid="tag-name">{name.clone()}</span>
                        <a href=readers_href.clone() class="ml-3 text-sm text-indigo-600 hover:underline" data-testid="tag-count">{count.clone()}</a>
                    </div>
                }
            }>
                <ActionForm action=rename attr:class="flex flex-wrap items-center gap-2">
                    <input type="hidden" name="id" value=id.0.to_string()/>
                    <label for=input_id.get_value() class="sr-only">"New name"</label>
                    <input id=input_id.get_value() name="name" class="input w-56" maxlength="50" required value=current.get_value()/>
                    <button type="submit" class="btn-primary">"Save"</button>
                    <button type="button" class="btn-secondary" on:click=move |_| editing.set(false)>"Cancel"</button>
                </ActionForm>
            </Show>
            <div class="flex gap-2">
                <button type="button" class="btn-secondary" aria-label=format!("Rename {}", tag.name)
                    on:click=move |_| editing.set(true)>"Rename"</button>
                <button type="button" class="btn-secondary text-red-600" aria-label=format!("Delete {}", tag.name)
                    on:click=move |_| confirm.set(true)>"Delete"</button>
            </div>
            <ConfirmDialog open=confirm title=format!("Delete the tag “{}”?", tag.name) confirm_label="Delete tag" danger=true
                on_confirm=Callback::new(move |()| { delete.dispatch(DeleteTag { id }); })>
                <p class="text-sm text-slate-600">{format!("It comes off {count}. The readers themselves stay.", count = if readers == 1 { "1 reader".to_string() } else { format!("all {readers} readers") })}</p>
            </ConfirmDialog>
        </li>
    }
}
