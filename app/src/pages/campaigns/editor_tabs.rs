//! The campaign editor's views (issue 35): what the author came to write (the message and its
//! body) beside its live preview; the settings set once (sender, audience, schedule, A/B test)
//! as a view of their own; and on a phone, where nothing fits beside anything, the preview with
//! the test and send buttons as a third. The chosen view is in the address (`?tab=settings`),
//! so a reload or a shared link opens the same one. Every field stays in the page whichever view
//! shows, so autosave and validation see the whole campaign.

use leptos::prelude::*;

use super::fields::Form;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditorTab {
    Content,
    Settings,
    /// The preview column as a view of its own; on wide screens it is always beside the content.
    Preview,
}

/// The fields a save's error or warning can name that the content view holds; any other named
/// field is a setting.
const CONTENT_FIELDS: &[&str] = &["name", "subject", "preheader", "body", "body_format"];

impl EditorTab {
    const ALL: [EditorTab; 3] = [EditorTab::Content, EditorTab::Settings, EditorTab::Preview];

    /// From the address's `tab` parameter; anything else is the content.
    pub fn from_query(value: Option<&str>) -> Self {
        match value {
            Some("settings") => EditorTab::Settings,
            Some("preview") => EditorTab::Preview,
            _ => EditorTab::Content,
        }
    }

    fn key(self) -> &'static str {
        match self {
            EditorTab::Content => "content",
            EditorTab::Settings => "settings",
            EditorTab::Preview => "preview",
        }
    }

    fn label(self) -> &'static str {
        match self {
            EditorTab::Content => "Content",
            EditorTab::Settings => "Settings",
            EditorTab::Preview => "Preview & send",
        }
    }

    /// The tab panel's element id, for `aria-controls`.
    pub fn panel_id(self) -> String {
        format!("campaign-panel-{}", self.key())
    }

    fn tab_id(self) -> String {
        format!("campaign-tab-{}", self.key())
    }

    /// The content panel's classes: shown in its view, and on wide screens also while the
    /// preview view is chosen (the preview is beside it there anyway).
    pub fn content_class(self) -> &'static str {
        match self {
            EditorTab::Content => "",
            EditorTab::Settings => "hidden",
            EditorTab::Preview => "hidden lg:block",
        }
    }

    pub fn settings_class(self) -> &'static str {
        if self == EditorTab::Settings { "" } else { "hidden" }
    }

    /// The preview column's classes: always there on wide screens, on a phone in its view only.
    pub fn preview_class(self) -> &'static str {
        if self == EditorTab::Preview { "" } else { "hidden lg:block" }
    }

    /// The panel's `aria-labelledby`.
    pub fn labelled_by(self) -> String {
        self.tab_id()
    }
}

/// The tab row over the editor. A save that finds a problem in a setting while the content is
/// in view marks the Settings tab with how many there are, so nothing wrong stays out of sight.
#[component]
pub fn EditorTabBar(tab: RwSignal<EditorTab>, form: Form) -> impl IntoView {
    let is_setting = |field: &Option<String>| field.as_deref().is_some_and(|f| !CONTENT_FIELDS.contains(&f));
    let problems = move || form.errors.with(|e| e.iter().filter(|e| is_setting(&e.field)).count());
    let warnings = move || form.warnings.with(|w| w.iter().filter(|w| is_setting(&w.field)).count());
    let choose = move |t: EditorTab| {
        tab.set(t);
        remember_in_address(t);
    };
    view! {
        <div role="tablist" aria-label="Campaign editor" class="mb-4 flex gap-1 border-b border-slate-200" data-testid="editor-tabs">
            {EditorTab::ALL.into_iter().map(|t| {
                let selected = move || tab.get() == t;
                let base = if t == EditorTab::Preview { "lg:hidden " } else { "" };
                view! {
                    <button type="button" role="tab" id=t.tab_id() aria-controls=t.panel_id()
                        aria-selected=move || selected().to_string()
                        class=move || format!("{base}-mb-px inline-flex min-h-11 items-center gap-1.5 border-b-2 px-3 text-sm {}",
                            if selected() { "border-indigo-600 font-medium text-indigo-700" } else { "border-transparent text-slate-600 hover:text-slate-900" })
                        on:click=move |_| choose(t)>
                        {t.label()}
                        {(t == EditorTab::Settings).then_some(move || {
                            let (p, w) = (problems(), warnings());
                            if p > 0 {
                                Some(view! {
                                    <span class="badge bg-red-100 text-red-700 ring-red-200" data-testid="settings-problems"
                                        title="Settings the last save found a problem in">{p}</span>
                                }.into_any())
                            } else if w > 0 {
                                Some(view! {
                                    <span class="badge bg-amber-100 text-amber-800 ring-amber-200" data-testid="settings-warnings"
                                        title="Settings with a warning">{w}</span>
                                }.into_any())
                            } else {
                                None
                            }
                        })}
                    </button>
                }
            }).collect_view()}
        </div>
    }
}

/// Puts the chosen view in the address without a navigation (which would re-run the page):
/// a reload then opens it again.
fn remember_in_address(tab: EditorTab) {
    #[cfg(feature = "hydrate")]
    {
        let window = window();
        let Ok(path) = window.location().pathname() else { return };
        let url = match tab {
            EditorTab::Content => path,
            other => format!("{path}?tab={}", other.key()),
        };
        if let Ok(history) = window.history() {
            let _ = history.replace_state_with_url(&web_sys::wasm_bindgen::JsValue::NULL, "", Some(&url));
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = tab;
}
