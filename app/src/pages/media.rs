//! `/media`: the workspace's images. Drop files on the page or choose them; each is
//! checked and re-encoded by the server and gets a permanent address to use in campaigns (the
//! block editor's image block picks from here too). Deleting one breaks it in mail already sent,
//! which the confirmation says.

use herald_types::{Media, MediaId, MediaLibrary};
use leptos::prelude::*;

use crate::components::ui::{ActionError, Card, ConfirmDialog, EmptyState, LoadError};
use crate::components::upload::{UploadList, UploadState, drags_files, list_media, upload_chosen, upload_dropped};
use crate::error::AppError;

#[server(prefix = "/rpc", endpoint = "delete_media")]
pub async fn delete_media(id: MediaId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, media};
    let m = require_role(Role::Author).await?;
    media::delete(&m.state.db, &m.state.media_storage, m.tenant, m.role, id).await?;
    Ok(())
}

/// "3.2 MB", "740 KB".
pub fn size(bytes: i64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{} KB", (bytes + 1023) / 1024)
    }
}

#[component]
pub fn MediaPage() -> impl IntoView {
    let delete = ServerAction::<DeleteMedia>::new();
    let uploaded = RwSignal::new(0u32);
    let library = Resource::new(move || (delete.version().get(), uploaded.get()), |_| list_media());
    let uploads = RwSignal::new(Vec::<UploadState>::new());
    let done = Callback::new(move |_: Media| uploaded.update(|n| *n += 1));
    let over = RwSignal::new(false);
    view! {
        <div class="mb-6">
            <h1 class="text-2xl font-semibold text-slate-900">"Media"</h1>
            <p class="mt-1 text-sm text-slate-600">"Images for your campaigns. Each gets a permanent address; the block editor's image blocks pick from here."</p>
        </div>
        <Card>
            <div data-testid="media-drop"
                class=move || if over.get() {
                    "rounded-lg border-2 border-dashed border-indigo-400 bg-indigo-50 px-4 py-8 text-center"
                } else {
                    "rounded-lg border-2 border-dashed border-slate-300 px-4 py-8 text-center"
                }
                on:dragover=move |ev| if drags_files(&ev) { ev.prevent_default(); over.set(true); }
                on:dragleave=move |_| over.set(false)
                on:drop=move |ev| {
                    ev.prevent_default();
                    over.set(false);
                    upload_dropped(&ev, uploads, done);
                }>
                <p class="text-sm text-slate-700">"Drop images here, or"</p>
                <label class="btn-secondary mt-3 cursor-pointer">
                    "Choose images"
                    <input type="file" class="sr-only" multiple accept="image/png,image/jpeg,image/gif,image/webp"
                        aria-label="Upload images" on:change=move |ev| upload_chosen(&ev, uploads, done)/>
                </label>
                <p class="mt-3 text-xs text-slate-500">"PNG, JPEG, GIF or WebP, up to 10 MB and 8000 × 8000 pixels. Wide images are scaled to 1200 pixels; photo metadata (such as location) is removed."</p>
            </div>
            <UploadList states=uploads/>
        </Card>
        <ActionError value=delete.value()/>
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match library.await {
                    Ok(l) if l.items.is_empty() => view! {
                        <EmptyState title="No images yet"
                            body="Upload a logo or a photo above, or drop one straight into a campaign's block editor."/>
                    }.into_any(),
                    Ok(l) => view! { <MediaGrid library=l delete=delete/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn MediaGrid(library: MediaLibrary, delete: ServerAction<DeleteMedia>) -> impl IntoView {
    let used = library.used_bytes;
    let quota = library.quota_bytes.max(1);
    let percent = (used * 100 / quota).clamp(0, 100);
    view! {
        <p class="mb-2 text-sm text-slate-600" data-testid="media-usage">
            {format!("{} of {} used", size(used), size(quota))}
        </p>
        <div class="mb-6 h-2 w-full overflow-hidden rounded-full bg-slate-100" role="progressbar"
            aria-label="Storage used" aria-valuemin="0" aria-valuemax="100" aria-valuenow=percent>
            <div class="h-2 rounded-full bg-indigo-500" style=format!("width:{percent}%")></div>
        </div>
        <ul class="grid grid-cols-1 gap-4 sm:grid-cols-2 lg:grid-cols-3" data-testid="media-grid">
            {library.items.into_iter().map(|m| view! { <MediaCard m=m delete=delete/> }).collect_view()}
        </ul>
    }
}

#[component]
fn MediaCard(m: Media, delete: ServerAction<DeleteMedia>) -> impl IntoView {
    let confirm = RwSignal::new(false);
    let id = m.id;
    let name = m.file_name.clone();
    view! {
        <li class="overflow-hidden rounded-lg border border-slate-200 bg-white" data-testid="media-item">
            <div class="flex h-40 items-center justify-center bg-slate-50">
                <img src=m.url.clone() alt=m.file_name.clone() loading="lazy" class="max-h-40 max-w-full object-contain"/>
            </div>
            <div class="space-y-2 p-3">
                <p class="truncate text-sm font-medium text-slate-900" title=m.file_name.clone()>{m.file_name.clone()}</p>
                <p class="text-xs text-slate-500">{format!("{} × {} · {}", m.width, m.height, size(m.bytes))}</p>
                <label class="sr-only" for=format!("media-url-{id}")>{format!("Address of {}", m.file_name)}</label>
                <input id=format!("media-url-{id}") class="input font-mono text-xs" readonly value=m.url.clone()
                    on:focus=move |ev| {
                        use leptos::wasm_bindgen::JsCast;
                        if let Some(input) = ev.target().and_then(|t| t.dyn_into::<leptos::web_sys::HtmlInputElement>().ok()) {
                            input.select();
                        }
                    }/>
                <div class="flex justify-end">
                    <button type="button" class="btn-secondary text-red-700" on:click=move |_| confirm.set(true)>"Delete"</button>
                </div>
            </div>
            <ConfirmDialog open=confirm title=format!("Delete {name}?") confirm_label="Delete image" danger=true
                on_confirm=Callback::new(move |()| { delete.dispatch(DeleteMedia { id }); })>
                <p class="text-sm text-slate-600">"Its address stops working, also in mail already sent: those readers will see a broken image."</p>
            </ConfirmDialog>
        </li>
    }
}
