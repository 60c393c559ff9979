//! The editor's live preview (as a sample reader or a chosen one) and its test send.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use super::detail::AfterSave;
use crate::components::shell::Current;
use crate::components::ui::{ActionError, Card, LoadError};
use crate::error::AppError;
use herald_types::{CampaignId, FieldError};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreviewView {
    pub subject: String,
    pub html: String,
    pub text: String,
    /// The template error, with its line and column or its block.
    pub error: Option<String>,
    /// The field the error is in, as the editor names its fields (`body.blocks.2.text`).
    pub error_at: Option<String>,
    pub as_reader: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReaderPick {
    pub id: i64,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestSendResult {
    pub address: String,
    pub ok: bool,
    /// The SMTP server's reply, or the error.
    pub reply: String,
}

/// Renders the saved campaign as `reader` (a reader id), or as a sample reader.
#[server(prefix = "/rpc", endpoint = "preview_campaign")]
pub async fn preview_campaign(id: CampaignId, reader: Option<i64>) -> Result<PreviewView, AppError> {
    use crate::ssr::{count_preview, require_role};
    use herald_engine::{Role, campaigns::preview};
    let m = require_role(Role::Viewer).await?;
    count_preview(&m)?;
    Ok(preview::preview(&m.state.db, &m.state.base_url, m.tenant, id, reader).await?.into())
}

#[cfg(feature = "ssr")]
impl From<herald_engine::campaigns::preview::PreviewOutcome> for PreviewView {
    fn from(out: herald_engine::campaigns::preview::PreviewOutcome) -> Self {
        let (subject, html, text) = match out.rendered {
            Some(r) => (r.subject, r.html, r.text),
            None => Default::default(),
        };
        PreviewView { subject, html, text, error: out.error, error_at: out.error_at, as_reader: out.as_reader }
    }
}

/// Finds the reader to preview as: by id, or by email (exact, or the only one that matches).
#[server(prefix = "/rpc", endpoint = "find_reader")]
pub async fn find_reader(query: String) -> Result<ReaderPick, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::audience::readers::{self, ReaderFilter};
    let m = require_role(Role::Viewer).await?;
    let q = query.trim();
    if q.is_empty() {
        return Err(AppError::invalid("Enter a reader's email address or id.").respond());
    }
    let label = |email: &str, name: &str| if name.is_empty() { email.to_string() } else { format!("{name} <{email}>") };
    if let Ok(n) = q.parse::<i64>() {
        return match readers::detail(&m.state.db, m.tenant, n).await {
            Ok(d) => Ok(ReaderPick { id: d.reader.id, label: label(&d.reader.email, &d.reader.name) }),
            Err(herald_engine::Error::NotFound) => {
                Err(AppError::invalid(format!("No reader has the id {n}.")).respond())
            }
            Err(e) => Err(e.into()),
        };
    }
    let filter = ReaderFilter { search: Some(q.to_string()), ..Default::default() };
    let page = readers::search(&m.state.db, m.tenant, &filter, None, 10).await?;
    let exact = page.readers.iter().find(|r| r.email.eq_ignore_ascii_case(q));
    let pick = match (exact, page.readers.len()) {
        (Some(r), _) => r,
        (None, 1) => &page.readers[0],
        (None, 0) => return Err(AppError::invalid(format!("No reader matches “{q}”.")).respond()),
        (None, n) => {
            return Err(AppError::invalid(format!(
                "{}{n} readers match “{q}”: enter the full email address.",
                if page.next_before.is_some() { "More than " } else { "" }
            ))
            .respond());
        }
    };
    Ok(ReaderPick { id: pick.id, label: label(&pick.email, &pick.name) })
}

/// Sends the saved campaign, rendered for a sample reader and marked `[Test]`, to up to five
/// addresses (separated by commas, semicolons or spaces).
#[server(prefix = "/rpc", endpoint = "test_send_campaign")]
pub async fn test_send_campaign(id: CampaignId, addresses: String) -> Result<Vec<TestSendResult>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::preview};
    let m = require_role(Role::Author).await?;
    let list: Vec<String> = addresses
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    let results = preview::test_send(
        &m.state.db,
        &m.state.signer,
        &m.state.base_url,
        &m.state.default_identity,
        &m.state.egress,
        m.tenant,
        m.user,
        m.role,
        id,
        &list,
    )
    .await?;
    Ok(results
        .into_iter()
        .map(|(address, r)| match r {
            Ok(reply) => TestSendResult { address, ok: true, reply },
            Err(reply) => TestSendResult { address, ok: false, reply },
        })
        .collect())
}

#[component]
pub fn PreviewPanel(
    preview: Resource<Result<PreviewView, AppError>>,
    reader: RwSignal<Option<ReaderPick>>,
    /// Where the editor marks the last render's template error (none on read-only pages).
    #[prop(optional)]
    mark: Option<RwSignal<Option<FieldError>>>,
) -> impl IntoView {
    let query = RwSignal::new(String::new());
    let mode = RwSignal::new(PreviewMode::Desktop);
    let find = ServerAction::<FindReader>::new();
    Effect::new(move |_| {
        if let Some(Ok(pick)) = find.value().get() {
            reader.set(Some(pick));
        }
    });
    view! {
        <Card title="Preview">
            <form class="mb-3 flex items-end gap-2" on:submit=move |ev| {
                ev.prevent_default();
                find.dispatch(FindReader { query: query.get_untracked() });
            }>
                <div class="flex-1">
                    <label for="preview-reader" class="label">"Preview as reader"</label>
                    <input id="preview-reader" class="input" placeholder="Email address or reader id" autocomplete="off"
                        on:input=move |ev| query.set(event_target_value(&ev))/>
                </div>
                <button type="submit" class="btn-secondary" disabled=move || find.pending().get()>"Show"</button>
                {move || reader.with(Option::is_some).then(|| view! {
                    <button type="button" class="btn-secondary" on:click=move |_| reader.set(None)>"Sample reader"</button>
                })}
            </form>
            <ActionError value=find.value()/>
            <div class="mb-3 flex items-center justify-between gap-3">
                <PreviewModeTabs mode=mode/>
                <span class="truncate text-xs text-slate-500" data-testid="preview-as">
                    <Transition>
                        {move || Suspend::new(async move {
                            preview.await.ok().map(|p| format!("As {}", p.as_reader))
                        })}
                    </Transition>
                </span>
            </div>
            <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Rendering…"</p> }>
                {move || Suspend::new(async move {
                    match preview.await {
                        Ok(p) => view! { <PreviewBody p=p mode=mode mark=mark/> }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </Card>
    }
}

/// The width a desktop mail client gives a message (wider than the 600 px most mail is laid out
/// for, so its margins show).
const DESKTOP_WIDTH: f64 = 700.0;
/// The frame's height, `h-[36rem]`, in CSS pixels.
const PREVIEW_HEIGHT: f64 = 576.0;

/// Keeps `width` at the element's width, with a `ResizeObserver` (a column changes width with
/// the window, and a tab that was hidden has none until shown).
fn follow_width(element: NodeRef<leptos::html::Div>, width: RwSignal<f64>) {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        use leptos::wasm_bindgen::{JsCast, closure::Closure};
        let Some(el) = element.get() else { return };
        let measured = el.clone();
        let changed = Closure::<dyn FnMut()>::new(move || {
            let _ = width.try_set(f64::from(measured.client_width()));
        });
        let Ok(observer) = web_sys::ResizeObserver::new(changed.as_ref().unchecked_ref()) else { return };
        observer.observe(&el);
        width.set(f64::from(el.client_width()));
        let kept = StoredValue::new_local((observer, changed));
        on_cleanup(move || {
            kept.try_with_value(|(observer, _)| observer.disconnect());
        });
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (element, width);
}

/// The switch between the preview's three views.
#[component]
pub fn PreviewModeTabs(mode: RwSignal<PreviewMode>) -> impl IntoView {
    let tab = move |this: PreviewMode, label: &'static str| {
        view! {
            <button type="button" aria-pressed=move || (mode.get() == this).to_string()
                class=move || if mode.get() == this {
                    "min-h-11 rounded-md bg-white px-3 py-1 text-xs font-medium text-slate-900 shadow-xs"
                } else {
                    "min-h-11 rounded-md px-3 py-1 text-xs font-medium text-slate-600 hover:text-slate-800"
                }
                on:click=move |_| mode.set(this)>{label}</button>
        }
    };
    view! {
        <div class="inline-flex rounded-lg bg-slate-100 p-0.5" role="group" aria-label="Preview format">
            {tab(PreviewMode::Desktop, "Desktop")}
            {tab(PreviewMode::Phone, "Phone")}
            {tab(PreviewMode::Plain, "Plain text")}
        </div>
    }
}

/// How the preview shows the mail: at desktop width, at a phone's 390 px, or as its text part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreviewMode {
    Desktop,
    Phone,
    Plain,
}

#[component]
pub fn PreviewBody(
    p: PreviewView,
    mode: RwSignal<PreviewMode>,
    /// Where an editor marks this render's template error (none on read-only pages).
    #[prop(default = None)]
    mark: Option<RwSignal<Option<FieldError>>>,
) -> impl IntoView {
    if let Some(mark) = mark {
        let found = p.error.clone().map(|message| FieldError { field: p.error_at.clone(), message });
        // Marked once the render is shown (an effect: never while rendering).
        Effect::new(move |_| mark.set(found.clone()));
    }
    if let Some(error) = p.error {
        return view! {
            <div role="alert" class="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-700" data-testid="template-error">
                <p class="font-medium">"The template has an error"</p>
                <p class="mt-1 font-mono text-xs whitespace-pre-wrap">{error}</p>
            </div>
        }
        .into_any();
    }
    let html = p.html;
    let text = p.text;
    let plain = Memo::new(move |_| mode.get() == PreviewMode::Plain);
    // The width the frame has to fit in, followed as the window or the column changes.
    let frame_box = NodeRef::<leptos::html::Div>::new();
    let width = RwSignal::new(0.0_f64);
    follow_width(frame_box, width);
    view! {
        <div class="rounded-lg border border-slate-200">
            <div class="border-b border-slate-200 bg-slate-50 px-3 py-2 text-sm">
                <span class="text-slate-500">"Subject: "</span>
                <span class="font-medium text-slate-900" data-testid="preview-subject">{p.subject}</span>
            </div>
            {move || if plain.get() {
                view! {
                    <pre tabindex="0" class="h-[36rem] overflow-auto p-4 font-mono text-xs whitespace-pre-wrap text-slate-800" data-testid="preview-text">{text.clone()}</pre>
                }.into_any()
            } else {
                // The tenant's HTML stays in a sandboxed frame (no scripts, no same-origin
                // access): never in the app's own DOM. A phone is 390 CSS pixels wide: the frame
                // is too, so the mail's own media queries (columns stacking) apply as on a phone.
                // On a desktop the mail is laid out at DESKTOP_WIDTH, as a desktop mail client
                // shows it, and scaled down to the column when the column is narrower.
                // Switching width restyles the same frame rather than loading it again.
                let phone = move || mode.get() == PreviewMode::Phone;
                let scale = move || {
                    let w = width.get();
                    (!phone() && w > 0.0 && w < DESKTOP_WIDTH).then(|| w / DESKTOP_WIDTH)
                };
                view! {
                    <div node_ref=frame_box class=move || if phone() { "flex justify-center bg-slate-100 py-3" } else { "overflow-hidden rounded-b-lg" }
                        style=move || scale().map(|s| format!("height:{:.0}px", PREVIEW_HEIGHT * s)).unwrap_or_default()>
                        <iframe sandbox="" srcdoc=html.clone() title="Email preview" data-testid="preview-frame"
                            data-width=move || if phone() { "phone" } else { "desktop" }
                            style=move || scale().map(|s| format!(
                                "width:{DESKTOP_WIDTH}px;height:{:.0}px;transform:scale({s:.4});transform-origin:0 0",
                                PREVIEW_HEIGHT,
                            )).unwrap_or_default()
                            class=move || if phone() {
                                "block h-[36rem] w-[390px] max-w-full bg-white shadow"
                            } else {
                                "block h-[36rem] w-full min-w-0 bg-white"
                            }></iframe>
                    </div>
                }.into_any()
            }}
        </div>
    }
    .into_any()
}

#[component]
pub fn TestSendPanel(test: ServerAction<TestSendCampaign>, after_save: Callback<AfterSave>) -> impl IntoView {
    let me = use_context::<Current>().map(|c| c.0.email).unwrap_or_default();
    let addresses = RwSignal::new(me.clone());
    view! {
        <Card title="Send a test">
            <form class="flex items-end gap-2" on:submit=move |ev| {
                ev.prevent_default();
                after_save.run(AfterSave::TestSend(addresses.get_untracked()));
            }>
                <div class="flex-1">
                    <label for="test-addresses" class="label">"Send a test to"</label>
                    <input id="test-addresses" class="input" value=me placeholder="you@example.com, colleague@example.com"
                        autocomplete="off" aria-describedby="test-addresses-hint"
                        on:input=move |ev| addresses.set(event_target_value(&ev))/>
                </div>
                <button type="submit" class="btn-secondary" disabled=move || test.pending().get()>
                    {move || if test.pending().get() { "Sending…" } else { "Send test" }}
                </button>
            </form>
            <p id="test-addresses-hint" class="mt-1 text-xs text-slate-500">
                "Up to 5 addresses, separated by commas. The test is rendered for a sample reader, marked [Test], and sent through the campaign's sender."
            </p>
            <ActionError value=test.value()/>
            {move || test.value().get().and_then(|r| r.ok()).map(|results| view! {
                <ul class="mt-3 divide-y divide-slate-100 text-sm" data-testid="test-results">
                    {results.into_iter().map(|r| {
                        let (icon, cls) = if r.ok { ("✓", "text-emerald-600") } else { ("✗", "text-red-600") };
                        view! {
                            <li class="flex gap-2 py-2" data-testid="test-result">
                                <span class=cls aria-hidden="true">{icon}</span>
                                <div class="min-w-0">
                                    <div class="font-medium">{r.address}
                                        <span class="sr-only">{if r.ok { " accepted" } else { " failed" }}</span>
                                    </div>
                                    <div class=format!("break-all font-mono text-xs {cls}")>{r.reply}</div>
                                </div>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            })}
        </Card>
    }
}
