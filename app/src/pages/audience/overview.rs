//! `/audience`: the workspace's lists with their counts, creating and editing lists, and the
//! embeddable sign-up form for each.

use leptos::prelude::*;

use crate::components::ui::{ActionError, Card, CopyButton, EmptyState, LoadError};
use crate::error::AppError;
use crate::pages::audience::{AudienceTabs, ListsView, list_lists};
use herald_types::html::escape_html;
use herald_types::{List, ListId, ListWithCounts, OptIn, Visibility};

/// Creates a list (empty `id`) or updates one.
#[server(prefix = "/rpc", endpoint = "save_list")]
pub async fn save_list(
    id: String,
    name: String,
    slug: String,
    description: String,
    opt_in: OptIn,
    visibility: Visibility,
) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::lists};
    let m = require_role(Role::Author).await?;
    let input = lists::ListInput { name, slug: Some(slug), description, opt_in, visibility };
    if id.trim().is_empty() {
        lists::create(&m.state.db, m.tenant, m.role, &input).await?;
    } else {
        let id: ListId = id.parse()?;
        lists::update(&m.state.db, m.tenant, m.role, id, &input).await?;
    }
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "delete_list")]
pub async fn delete_list(id: ListId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::lists};
    let m = require_role(Role::Author).await?;
    lists::delete(&m.state.db, m.tenant, m.role, id).await?;
    Ok(())
}

#[component]
pub fn AudiencePage() -> impl IntoView {
    let save = ServerAction::<SaveList>::new();
    let delete = ServerAction::<DeleteList>::new();
    let data = Resource::new(move || (save.version().get(), delete.version().get()), |_| list_lists());
    view! {
        <AudienceTabs active="/audience"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <ListsBody v=v save=save delete=delete/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ListsBody(v: ListsView, save: ServerAction<SaveList>, delete: ServerAction<DeleteList>) -> impl IntoView {
    let editing = RwSignal::new(None::<List>);
    let hosted = format!("{}/s/{}", v.base_url, v.workspace_slug);
    let can_edit = v.can_edit;
    let empty = v.lists.is_empty();
    let rows = v.lists.clone();
    let for_snippet = v.lists;
    view! {
        <div class="mb-4 flex items-center justify-between text-sm text-slate-500">
            <span>"Hosted sign-up page: " <a href=hosted.clone() class="text-indigo-600 hover:underline" target="_blank">{hosted.clone()}</a></span>
        </div>
        {empty.then(|| view! {
            <EmptyState title="No lists yet"
                body="A list is what readers subscribe to: a newsletter, a product-updates feed. Create the first one below; public lists appear on your hosted sign-up page."/>
        })}
        {(!empty).then(|| view! {
            <Card>
                <table class="w-full text-left text-sm" data-testid="lists-table">
                    <thead class="text-xs uppercase text-slate-500">
                        <tr><th class="py-2">"List"</th><th>"Opt-in"</th><th>"Confirmed"</th><th>"Unconfirmed"</th><th>"Unsubscribed"</th><th></th></tr>
                    </thead>
                    <tbody class="divide-y divide-slate-100">
                        {rows.into_iter().map(|ListWithCounts { list: l, confirmed, unconfirmed, unsubscribed }| {
                            let row = l.clone();
                            let id = l.id.to_string();
                            let readers_href = format!("/audience/readers?list={}", l.id);
                            view! {
                                <tr>
                                    <td class="py-3">
                                        <a href=readers_href class="font-medium wrap-anywhere text-slate-800 hover:text-indigo-600">{l.name.clone()}</a>
                                        <span class="badge ml-2">{l.visibility.as_str()}</span>
                                        <div class="text-xs text-slate-500">{l.description.clone()}</div>
                                    </td>
                                    // `data-label` names each figure on a phone, where the header row is hidden.
                                    <td data-label="Opt-in">{l.opt_in.as_str()}</td>
                                    <td data-label="Confirmed" data-testid="confirmed-count">{confirmed}</td>
                                    <td data-label="Unconfirmed">{unconfirmed}</td>
                                    <td data-label="Unsubscribed">{unsubscribed}</td>
                                    <td class="text-right">
                                        {can_edit.then(|| view! {
                                            // A welcome automation in one click: a starter mail to each reader who confirms.
                                            <a href=format!("/automations/new?list={id}") class="mr-3 text-xs text-indigo-600 hover:underline"
                                                aria-label=format!("Welcome mail for {}", l.name)>"Welcome mail"</a>
                                            <button type="button" class="link-button text-indigo-600" on:click=move |_| editing.set(Some(row.clone()))>"Edit"</button>
                                            <ActionForm action=delete attr:class="inline">
                                                <input type="hidden" name="id" value=id.clone()/>
                                                <button type="submit" class="link-button ml-1 text-red-600">"Delete"</button>
                                            </ActionForm>
                                        })}
                                    </td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
                <ActionError value=delete.value()/>
            </Card>
        })}
        {can_edit.then(|| view! { <ListForm save=save editing=editing/> })}
        {(!empty).then(|| view! { <EmbedSnippet hosted=hosted lists=for_snippet/> })}
    }
}

#[component]
fn ListForm(save: ServerAction<SaveList>, editing: RwSignal<Option<List>>) -> impl IntoView {
    let get = move |f: fn(&List) -> String| editing.with(|e| e.as_ref().map(f).unwrap_or_default());
    // A new list starts as double opt-in and public.
    let opt_in = move || editing.with(|e| e.as_ref().map(|l| l.opt_in).unwrap_or_default().as_str());
    let visibility = move || editing.with(|e| e.as_ref().map(|l| l.visibility).unwrap_or_default().as_str());
    // Once saved, the form is reset for the next list: a reset (not a re-render) also forgets
    // that the fields were touched, so the empty required Name is not outlined red as invalid.
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if matches!(save.value().get(), Some(Ok(())))
            && let Some(form) = form.get()
        {
            form.reset();
        }
    });
    view! {
        <Card title="">
            <h2 class="mb-4 text-lg font-medium text-slate-900">
                {move || if editing.with(Option::is_some) { "Edit list" } else { "Create a list" }}
            </h2>
            <ActionForm action=save node_ref=form attr:class="grid grid-cols-1 gap-4 sm:grid-cols-2">
                <input type="hidden" name="id" prop:value=move || get(|l| l.id.to_string())/>
                <div>
                    <label for="list-name" class="label">"Name"</label>
                    <input id="list-name" name="name" required maxlength="100" class="input" prop:value=move || get(|l| l.name.clone())/>
                </div>
                <div>
                    <label for="list-slug" class="label">"Address (slug)"</label>
                    <input id="list-slug" name="slug" maxlength="48" class="input" placeholder="from the name" prop:value=move || get(|l| l.slug.clone())/>
                </div>
                <div class="sm:col-span-2">
                    <label for="list-description" class="label">"Description"</label>
                    <input id="list-description" name="description" maxlength="1000" class="input" prop:value=move || get(|l| l.description.clone())/>
                </div>
                <div>
                    <label for="list-opt-in" class="label">"Opt-in"</label>
                    <select id="list-opt-in" name="opt_in" class="input" prop:value=opt_in>
                        <option value="double">"Double: readers confirm by email (recommended)"</option>
                        <option value="single">"Single: subscribed at once"</option>
                    </select>
                    <p class="mt-1 text-xs text-slate-500">
                        "Single opt-in applies to imports, the API and readers you add; whoever signs up on a public form confirms by email first, so nothing goes to an address that was only typed in."
                    </p>
                </div>
                <div>
                    <label for="list-visibility" class="label">"Visibility"</label>
                    <select id="list-visibility" name="visibility" class="input" prop:value=visibility>
                        <option value="public">"Public: on the sign-up page and preference center"</option>
                        <option value="private">"Private: import and API only"</option>
                    </select>
                </div>
                <div class="flex items-center gap-3 sm:col-span-2">
                    <button type="submit" class="btn-primary" disabled=move || save.pending().get()>
                        {move || if editing.with(Option::is_some) { "Save list" } else { "Create list" }}
                    </button>
                    {move || editing.with(Option::is_some).then(|| view! {
                        <button type="button" class="btn-secondary" on:click=move |_| editing.set(None)>"Cancel"</button>
                    })}
                </div>
            </ActionForm>
            <ActionError value=save.value()/>
        </Card>
    }
}

#[component]
fn EmbedSnippet(hosted: String, lists: Vec<ListWithCounts>) -> impl IntoView {
    let public: Vec<List> = lists.into_iter().map(|l| l.list).filter(|l| l.visibility == Visibility::Public).collect();
    let boxes: String = public
        .iter()
        .map(|l| {
            format!(
                "  <label><input type=\"checkbox\" name=\"list\" value=\"{}\" checked> {}</label>\n",
                l.id,
                escape_html(&l.name)
            )
        })
        .collect();
    // Styled by its own class, so it looks like a sign-up form wherever it is pasted (and the
    // page's own styles win where they are more specific).
    let snippet = format!(
        "<form class=\"herald-signup\" method=\"post\" action=\"{hosted}\">\n  <input type=\"email\" name=\"email\" placeholder=\"you@example.com\" aria-label=\"Email\" required>\n  <input type=\"text\" name=\"name\" placeholder=\"Your name\" aria-label=\"Name\">\n{boxes}  <input type=\"text\" name=\"website\" tabindex=\"-1\" autocomplete=\"off\" style=\"position:absolute;left:-10000px\" aria-hidden=\"true\">\n  <button type=\"submit\">Subscribe</button>\n</form>\n<style>\n.herald-signup {{ display: flex; flex-wrap: wrap; gap: 8px; max-width: 480px; font: 14px/1.4 system-ui, sans-serif; }}\n.herald-signup input[type=email], .herald-signup input[name=name] {{ flex: 1 1 180px; padding: 8px 10px; border: 1px solid #cbd5e1; border-radius: 8px; }}\n.herald-signup label {{ flex-basis: 100%; }}\n.herald-signup button {{ padding: 8px 16px; border: 0; border-radius: 8px; background: #4f46e5; color: #fff; font-weight: 600; cursor: pointer; }}\n</style>"
    );
    let to_copy = snippet.clone();
    // The preview cannot submit or run anything (an empty sandbox).
    let preview = format!("<!doctype html><body style=\"margin:16px\">{snippet}</body>");
    view! {
        <Card title="Embed a sign-up form">
            <p class="mb-3 text-sm text-slate-600">"Paste this into any web page. It posts to your hosted page, with the same spam protection."</p>
            <p class="label">"Preview"</p>
            <iframe title="Preview of the embedded sign-up form" sandbox="" srcdoc=preview data-testid="embed-preview"
                class="mb-4 h-40 w-full rounded-md border border-slate-200 bg-white"></iframe>
            <p class="label">"Code"</p>
            <pre tabindex="0" class="max-h-64 overflow-auto whitespace-pre-wrap break-all rounded-md bg-slate-900 p-4 text-xs text-slate-100" data-testid="embed-snippet">{snippet}</pre>
            <CopyButton text=to_copy label="Copy snippet" class="btn-secondary mt-3"/>
        </Card>
    }
}
