//! `/settings/brand`: the workspace's logo, colours, font and footer text. New
//! campaigns, the starter layouts and the block editor's "Use the workspace's brand" take them;
//! campaigns already written keep their own look. The preview shows the newsletter layout in
//! the brand as it is being edited (a moment after each change), saved or not.

use herald_types::{Brand, CONTENT_WIDTH, Colour, Font, Invalid, Media};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{Card, LoadError};
use crate::components::upload::{LibraryPicker, UploadList, UploadState, upload_chosen};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrandView {
    pub brand: Brand,
    pub can_edit: bool,
}

#[server(prefix = "/rpc", endpoint = "get_brand")]
pub async fn get_brand() -> Result<BrandView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::brand};
    let m = require_role(Role::Viewer).await?;
    Ok(BrandView { brand: brand::get(&m.state.db, m.tenant).await?, can_edit: m.role.can_author() })
}

#[server(prefix = "/rpc", endpoint = "update_brand")]
pub async fn update_brand(brand: Brand) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::brand};
    let m = require_role(Role::Author).await?;
    let saved = brand::update(&m.state.db, m.tenant, m.role, &brand).await?;
    m.audit(
        herald_engine::audit::Action::SettingsChanged,
        "Brand",
        serde_json::json!({ "accent": saved.theme.accent, "font": saved.theme.font, "logo": !saved.logo_src.is_empty() }),
    )
    .await;
    Ok(())
}

/// The newsletter layout as a sample reader sees it: in `draft` (the form as it is, unsaved),
/// or in the saved brand.
#[server(prefix = "/rpc", endpoint = "brand_preview")]
pub async fn brand_preview(#[server(default)] draft: Option<Brand>) -> Result<String, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::brand, campaigns::preview};
    let m = require_role(Role::Viewer).await?;
    let brand = match draft {
        Some(draft) => {
            draft.validate()?;
            draft
        }
        None => brand::get(&m.state.db, m.tenant).await?,
    };
    let newsletter = herald_types::Layout::Newsletter.document(&brand);
    preview::preview_document(&m.state.db, &m.state.base_url, m.tenant, &newsletter)
        .await?
        .map_err(|e| AppError::Invalid(Invalid::new(e)))
}

#[component]
pub fn BrandPage() -> impl IntoView {
    // Saving refreshes the preview only: the form already shows what was saved.
    let saved = RwSignal::new(0u32);
    // The form as it is, once it has changed and its colours parse: the preview follows it.
    let draft = RwSignal::new(None::<Brand>);
    let brand = Resource::new(|| (), |_| get_brand());
    // The preview is a sibling of the form, not inside its suspense: each has its own resource.
    view! {
        <SettingsTabs active="/settings/brand"/>
        <div class="grid gap-6 xl:grid-cols-[minmax(0,1fr)_minmax(0,1fr)]">
            <div class="min-w-0">
                <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match brand.await {
                            Ok(v) => view! { <BrandForm view=v saved=saved draft=draft/> }.into_any(),
                            Err(e) => view! { <LoadError error=e/> }.into_any(),
                        }
                    })}
                </Suspense>
            </div>
            <div class="min-w-0">
                <BrandPreview saved=saved draft=draft/>
            </div>
        </div>
    }
}

#[component]
fn BrandForm(view: BrandView, saved: RwSignal<u32>, draft: RwSignal<Option<Brand>>) -> impl IntoView {
    let ro = !view.can_edit;
    let b = view.brand;
    let accent = RwSignal::new(b.theme.accent.to_string());
    let background = RwSignal::new(b.theme.background.to_string());
    let text = RwSignal::new(b.theme.text.to_string());
    let font = RwSignal::new(b.theme.font);
    let logo_src = RwSignal::new(b.logo_src.clone());
    let logo_width = RwSignal::new(b.logo_width.to_string());
    let footer_text = RwSignal::new(b.footer_text.clone());
    let problems = RwSignal::new(None::<Invalid>);
    let save = Action::new(|brand: &Brand| update_brand(brand.clone()));
    let done = RwSignal::new(false);
    Effect::new(move |_| match save.value().get() {
        Some(Ok(())) => {
            problems.set(None);
            done.set(true);
            saved.update(|n| *n += 1);
        }
        Some(Err(AppError::Invalid(invalid))) => problems.set(Some(invalid)),
        Some(Err(other)) => problems.set(Some(Invalid::new(other.to_string()))),
        None => {}
    });
    let error = move |field: &'static str| {
        move || problems.with(|p| p.as_ref().and_then(|p| p.message_for(field)).map(str::to_string))
    };
    let general = move || {
        problems
            .with(|p| p.as_ref().and_then(|p| p.errors.iter().find(|e| e.field.is_none())).map(|e| e.message.clone()))
    };
    // The brand the form shows, or what to fix first (a colour that is not one).
    let current = move || -> Result<Brand, Invalid> {
        let colour = |field: &str, s: RwSignal<String>| {
            Colour::parse(&s.get_untracked()).map_err(|e| Invalid::field(field, e.to_string()))
        };
        let theme = (colour("accent", accent), colour("background", background), colour("text", text));
        let (accent, background, text) = match theme {
            (Ok(a), Ok(b), Ok(t)) => (a, b, t),
            (a, b, t) => {
                let errors = [a.err(), b.err(), t.err()].into_iter().flatten().flat_map(|e| e.errors).collect();
                return Err(Invalid { errors });
            }
        };
        Ok(Brand {
            theme: herald_types::Theme { accent, background, text, font: font.get_untracked() },
            logo_src: logo_src.get_untracked().trim().to_string(),
            logo_width: logo_width.get_untracked().trim().parse().unwrap_or(0),
            footer_text: footer_text.get_untracked(),
        })
    };
    // The preview follows the form half a second after the last change (not on the first
    // run, which is the page loading). A form that does not check out leaves it as it was.
    let pause = StoredValue::new(None::<TimeoutHandle>);
    Effect::new(move |first: Option<()>| {
        for field in [accent, background, text, logo_src, logo_width, footer_text] {
            field.track();
        }
        font.track();
        if first.is_none() {
            return;
        }
        if let Some(handle) = pause.get_value() {
            handle.clear();
        }
        let show = move || {
            if let Ok(brand) = current().and_then(|b| b.validate().map(|()| b)) {
                draft.try_set(Some(brand));
            }
        };
        pause.set_value(set_timeout_with_handle(show, std::time::Duration::from_millis(500)).ok());
    });
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        done.set(false);
        let brand = match current() {
            Ok(brand) => brand,
            Err(invalid) => {
                problems.set(Some(invalid));
                return;
            }
        };
        // Checked here first, so a mistake is shown without a round trip.
        match brand.validate() {
            Ok(()) => {
                save.dispatch(brand);
            }
            Err(invalid) => problems.set(Some(invalid)),
        }
    };
    let uploads = RwSignal::new(Vec::<UploadState>::new());
    let picked = Callback::new(move |m: Media| logo_src.set(m.url));
    let colour_input = move |id: &'static str, label: &'static str, value: RwSignal<String>| {
        view! {
            <div>
                <label for=id class="label">{label}</label>
                <div class="flex items-center gap-2">
                    <input id=id type="color" disabled=ro
                        class="h-11 w-16 shrink-0 cursor-pointer rounded-md border border-slate-300 bg-white p-1"
                        prop:value=move || value.get() on:input=move |ev| value.set(event_target_value(&ev))/>
                    <input type="text" class="input min-w-[120px] flex-1 font-mono" disabled=ro aria-label=format!("{label} (hex)")
                        prop:value=move || value.get() on:input=move |ev| value.set(event_target_value(&ev))/>
                </div>
                <p class="mt-1 text-xs text-red-600" role="alert">{error(id)}</p>
            </div>
        }
    };
    view! {
            <Card title="Brand">
                <p class="mb-4 text-sm text-slate-600">
                    "New campaigns and the starter layouts use these. Campaigns you have already started keep their own look; "
                    "in the block editor, “Style” brings a campaign back to the brand."
                </p>
                {ro.then(|| view! {
                    <p class="mb-4 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-800">"Only authors, admins and owners can change the brand."</p>
                })}
                <form class="space-y-5" on:submit=submit novalidate aria-label="Brand">
                    <fieldset class="space-y-3">
                        <legend class="label">"Logo"</legend>
                        {move || (!logo_src.with(String::is_empty)).then(|| view! {
                            <img src=logo_src.get() alt="The current logo" class="max-h-20 rounded border border-slate-200 bg-white p-2"/>
                        })}
                        <div>
                            <label for="logo_src" class="label">"Logo address"</label>
                            <input id="logo_src" type="url" class="input" placeholder="https://… (empty for no logo)" disabled=ro
                                prop:value=move || logo_src.get() on:change=move |ev| logo_src.set(event_target_value(&ev))/>
                            <p class="mt-1 text-xs text-red-600" role="alert">{error("logo_src")}</p>
                        </div>
                        {(!ro).then(|| view! {
                            <div class="flex flex-wrap items-center gap-2">
                                <label class="btn-secondary cursor-pointer">
                                    "Upload a logo"
                                    <input type="file" class="sr-only" accept="image/png,image/jpeg,image/gif,image/webp"
                                        aria-label="Upload a logo" on:change=move |ev| upload_chosen(&ev, uploads, picked)/>
                                </label>
                                <LibraryPicker id="logo-library".to_string() on_pick=picked/>
                                <button type="button" class="btn-secondary" on:click=move |_| logo_src.set(String::new())
                                    disabled=move || logo_src.with(String::is_empty)>"No logo"</button>
                            </div>
                        })}
                        <UploadList states=uploads/>
                        <div class="max-w-[12rem]">
                            <label for="logo_width" class="label">"Logo width (px)"</label>
                            <input id="logo_width" type="number" min="16" max=CONTENT_WIDTH.to_string() class="input" disabled=ro
                                prop:value=move || logo_width.get() on:change=move |ev| logo_width.set(event_target_value(&ev))/>
                            <p class="mt-1 text-xs text-red-600" role="alert">{error("logo_width")}</p>
                        </div>
                    </fieldset>
                    <div class="grid max-w-sm grid-cols-1 gap-4">
                        {colour_input("accent", "Links and buttons", accent)}
                        {colour_input("background", "Background", background)}
                        {colour_input("text", "Text", text)}
                    </div>
                    <div class="max-w-sm">
                        <label for="font" class="label">"Font"</label>
                        <select id="font" class="input" disabled=ro on:change=move |ev| {
                            if let Ok(f) = event_target_value(&ev).parse::<Font>() { font.set(f) }
                        }>
                            {Font::ALL.iter().map(|f| view! {
                                <option value=f.as_str() selected=b.theme.font == *f>{f.label()}</option>
                            }).collect_view()}
                        </select>
                        <p class="mt-1 text-xs text-slate-500">"Fonts every mail client has: nothing is downloaded."</p>
                    </div>
                    <div>
                        <label for="footer_text" class="label">"Footer text"</label>
                        <textarea id="footer_text" rows="3" maxlength="1000" class="input" disabled=ro
                            placeholder="Tulip Weekly: notes for people who grow things."
                            prop:value=move || footer_text.get() on:input=move |ev| footer_text.set(event_target_value(&ev))>{b.footer_text.clone()}</textarea>
                        <p class="mt-1 text-xs text-slate-500">
                            "Markdown, above the unsubscribe link. The postal address from "
                            <a href="/settings" class="text-indigo-600 hover:underline">"General"</a>" is added below it."
                        </p>
                        <p class="mt-1 text-xs text-red-600" role="alert">{error("footer_text")}</p>
                    </div>
                    {(!ro).then(|| view! {
                        <div class="flex items-center gap-3">
                            <button type="submit" class="btn-primary" disabled=move || save.pending().get()>"Save brand"</button>
                            <span class="text-sm text-emerald-600" role="status">{move || done.get().then_some("Saved")}</span>
                        </div>
                    })}
                    <p class="text-sm text-red-600" role="alert">{general}</p>
                </form>
            </Card>
    }
}

#[component]
fn BrandPreview(saved: RwSignal<u32>, draft: RwSignal<Option<Brand>>) -> impl IntoView {
    let html = Resource::new(move || (saved.get(), draft.get()), |(_, draft)| brand_preview(draft));
    view! {
        <Card title="The newsletter layout in your brand">
            <p class="mb-3 text-xs text-slate-500">"Follows your changes as you make them; “Save brand” keeps them."</p>
            <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match html.await {
                        Ok(html) => view! {
                            <iframe title="Brand preview" srcdoc=html sandbox="" data-testid="brand-preview"
                                class="h-[36rem] w-full rounded-md border border-slate-200 bg-white"></iframe>
                        }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </Card>
    }
}
