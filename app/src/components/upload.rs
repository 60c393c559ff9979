//! Image uploads from the browser: files dropped on the block editor or the media
//! page, or chosen with a file input, go to `POST /media/upload` as multipart form data (a
//! server function cannot take them: its body limit is far below an image's).
//!
//! Only the browser build uploads; the server renders the same views with handlers that do
//! nothing, so the event handlers below have an inert twin for `ssr`.

use herald_types::{Media, MediaLibrary};
use leptos::prelude::*;

use crate::error::AppError;

/// The workspace's images and the storage they use: what the block editor's image picker and the
/// media page list (here, below both, so neither imports the other).
#[server(prefix = "/rpc", endpoint = "list_media")]
pub async fn list_media() -> Result<MediaLibrary, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, media};
    let m = require_role(Role::Viewer).await?;
    Ok(media::library(&m.state.db, &m.state.base_url, m.tenant, m.state.media_quota).await?)
}

/// What happened to one file: the view lists these under the drop zone.
#[derive(Clone, Debug, PartialEq)]
pub enum UploadState {
    Uploading(String),
    Done(Media),
    Failed { file_name: String, reason: String },
}

/// The image files of a drop (none when it carries no files, e.g. a block being moved).
#[cfg(feature = "hydrate")]
pub fn dropped_files(ev: &leptos::ev::DragEvent) -> Vec<web_sys::File> {
    let Some(list) = ev.data_transfer().and_then(|d| d.files()) else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.get(i)).collect()
}

/// Whether a drag carries files (so the drop zone accepts it).
#[cfg(feature = "hydrate")]
pub fn drags_files(ev: &leptos::ev::DragEvent) -> bool {
    ev.data_transfer().is_some_and(|d| d.types().includes(&"Files".into(), 0))
}

#[cfg(not(feature = "hydrate"))]
pub fn drags_files(_: &leptos::ev::DragEvent) -> bool {
    false
}

/// The files chosen in a file input.
#[cfg(feature = "hydrate")]
pub fn chosen_files(ev: &leptos::ev::Event) -> Vec<web_sys::File> {
    use leptos::wasm_bindgen::JsCast;
    let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) else {
        return Vec::new();
    };
    let files: Vec<web_sys::File> =
        input.files().map(|list| (0..list.length()).filter_map(|i| list.get(i)).collect()).unwrap_or_default();
    // The same file can be chosen again after this.
    input.set_value("");
    files
}

/// Uploads each file of a drop, reporting every state change to `report` (by position in
/// `states`, which this appends to).
#[cfg(feature = "hydrate")]
pub fn upload_dropped(ev: &leptos::ev::DragEvent, states: RwSignal<Vec<UploadState>>, done: Callback<Media>) {
    upload_all(dropped_files(ev), states, done);
}

#[cfg(not(feature = "hydrate"))]
pub fn upload_dropped(_: &leptos::ev::DragEvent, _: RwSignal<Vec<UploadState>>, _: Callback<Media>) {}

#[cfg(feature = "hydrate")]
pub fn upload_chosen(ev: &leptos::ev::Event, states: RwSignal<Vec<UploadState>>, done: Callback<Media>) {
    upload_all(chosen_files(ev), states, done);
}

#[cfg(not(feature = "hydrate"))]
pub fn upload_chosen(_: &leptos::ev::Event, _: RwSignal<Vec<UploadState>>, _: Callback<Media>) {}

#[cfg(feature = "hydrate")]
fn upload_all(files: Vec<web_sys::File>, states: RwSignal<Vec<UploadState>>, done: Callback<Media>) {
    for file in files {
        let name = file.name();
        let at = states.with_untracked(Vec::len);
        states.update(|s| s.push(UploadState::Uploading(name.clone())));
        // The view that asked may be gone when the upload ends (its block deleted, undone):
        // then nobody is told, rather than a panic on a disposed callback.
        leptos::task::spawn_local(async move {
            let state = match upload_image(&file).await {
                Ok(media) => {
                    let _ = done.try_run(media.clone());
                    UploadState::Done(media)
                }
                Err(reason) => UploadState::Failed { file_name: name, reason },
            };
            states.try_update(|s| {
                if let Some(slot) = s.get_mut(at) {
                    *slot = state;
                }
            });
        });
    }
}

/// `POST /media/upload`: the stored image, or the reason it was refused (the server's words).
#[cfg(feature = "hydrate")]
async fn upload_image(file: &web_sys::File) -> Result<Media, String> {
    use leptos::wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let failed = || "The upload failed; check your connection and try again.".to_string();
    let form = web_sys::FormData::new().map_err(|_| failed())?;
    form.append_with_blob_and_filename("file", file, &file.name()).map_err(|_| failed())?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_body(&form);
    let window = web_sys::window().ok_or_else(failed)?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init("/media/upload", &init))
        .await
        .map_err(|_| failed())?
        .dyn_into()
        .map_err(|_| failed())?;
    let text = JsFuture::from(response.text().map_err(|_| failed())?)
        .await
        .ok()
        .and_then(|t| t.as_string())
        .unwrap_or_default();
    if response.ok() {
        return serde_json::from_str(&text).map_err(|_| failed());
    }
    // The API's error shape: the field's message when there is one.
    let error: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let reason = error["fields"]["file"].as_str().or_else(|| error["message"].as_str()).map(str::to_string);
    Err(reason.unwrap_or_else(|| format!("The upload was refused ({}).", response.status())))
}

/// The uploads under a drop zone, one line each.
#[component]
pub fn UploadList(states: RwSignal<Vec<UploadState>>) -> impl IntoView {
    view! {
        <ul class="mt-2 space-y-1 text-sm" data-testid="uploads" aria-live="polite">
            {move || states.get().into_iter().map(|s| match s {
                UploadState::Uploading(name) => view! {
                    <li class="text-slate-600">{format!("Uploading {name}…")}</li>
                }.into_any(),
                UploadState::Done(m) => view! {
                    <li class="text-emerald-700">{format!("✓ {} ({} × {})", m.file_name, m.width, m.height)}</li>
                }.into_any(),
                UploadState::Failed { file_name, reason } => view! {
                    <li class="text-red-700" role="alert">{format!("✗ {file_name}: {reason}")}</li>
                }.into_any(),
            }).collect_view()}
        </ul>
    }
}

/// "Choose from the library": the workspace's images as thumbnails; a click picks one.
#[component]
pub fn LibraryPicker(id: String, on_pick: Callback<Media>) -> impl IntoView {
    let open = RwSignal::new(false);
    let library = RwSignal::new(None::<Result<MediaLibrary, String>>);
    let toggle = move |_| {
        let opening = !open.get_untracked();
        open.set(opening);
        if opening {
            leptos::task::spawn_local(async move {
                library.set(Some(list_media().await.map_err(|e| e.to_string())));
            });
        }
    };
    let panel_id = format!("{id}-panel");
    view! {
        <button type="button" class="btn-secondary" aria-expanded=move || open.get().to_string() aria-controls=panel_id.clone()
            on:click=toggle>"Choose from the library"</button>
        <div id=panel_id class="w-full" hidden=move || !open.get()>
            {move || match library.get() {
                None => view! { <p class="text-sm text-slate-500">"Loading…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="text-sm text-red-600" role="alert">{e}</p> }.into_any(),
                Some(Ok(l)) if l.items.is_empty() => view! {
                    <p class="text-sm text-slate-500">"No images yet: upload one, or add some on the Media page."</p>
                }.into_any(),
                Some(Ok(l)) => view! {
                    <ul class="mt-2 grid grid-cols-3 gap-2 sm:grid-cols-4" data-testid="library-picker">
                        {l.items.into_iter().map(|m| {
                            let name = m.file_name.clone();
                            let url = m.url.clone();
                            view! {
                                <li>
                                    <button type="button" class="block h-20 w-full overflow-hidden rounded-md border border-slate-200 bg-slate-50 hover:border-indigo-400"
                                        aria-label=format!("Use {name}")
                                        on:click=move |_| { on_pick.run(m.clone()); open.set(false); }>
                                        <img src=url alt="" class="h-full w-full object-contain"/>
                                    </button>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </div>
    }
}
