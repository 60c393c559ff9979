//! The campaign editor's views: what the author came to write (the message and its
//! body) beside its live preview; the settings set once (sender, audience, schedule, A/B test)
//! as a view of their own; and on a phone, where nothing fits beside anything, the preview with
//! the test and send buttons as a third. The chosen view is in the address (`?tab=settings`),
//! so a reload or a shared link opens the same one. Every field stays in the page whichever view
//! shows, so autosave and validation see the whole campaign.

use leptos::prelude::*;

use super::editor_form::Form;

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

    /// The tab's element id, for the panel's `aria-labelledby`.
    pub fn tab_id(self) -> String {
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
}

/// The tab row over the editor (the ARIA tabs pattern: one tab in the Tab order, arrow keys,
/// Home and End move between them). A save that finds a problem in a view not shown marks that
/// view's tab with how many there are, so nothing wrong stays out of sight.
#[component]
pub fn EditorTabBar(tab: RwSignal<EditorTab>, form: Form) -> impl IntoView {
    let in_view = |t: EditorTab, field: &Option<String>| match t {
        EditorTab::Content => field.as_deref().is_some_and(|f| CONTENT_FIELDS.contains(&f)),
        EditorTab::Settings => field.as_deref().is_some_and(|f| !CONTENT_FIELDS.contains(&f)),
        EditorTab::Preview => false,
    };
    let problems = move |t: EditorTab| form.errors.with(|e| e.iter().filter(|e| in_view(t, &e.field)).count());
    let warnings = move |t: EditorTab| form.warnings.with(|w| w.iter().filter(|w| in_view(t, &w.field)).count());
    let choose = move |t: EditorTab| {
        tab.set(t);
        remember_in_address(t);
    };
    let on_keydown = move |ev: leptos::ev::KeyboardEvent| {
        // The preview's tab is there on phones only; the keys skip it on wide screens too, where
        // the preview is beside the others anyway.
        let tabs: Vec<EditorTab> = EditorTab::ALL.into_iter().filter(|t| tab_shown(*t)).collect();
        let at = tabs.iter().position(|t| *t == tab.get_untracked()).unwrap_or(0);
        let next = match ev.key().as_str() {
            "ArrowRight" => tabs[(at + 1) % tabs.len()],
            "ArrowLeft" => tabs[(at + tabs.len() - 1) % tabs.len()],
            "Home" => tabs[0],
            "End" => tabs[tabs.len() - 1],
            _ => return,
        };
        ev.prevent_default();
        choose(next);
        focus_tab(next);
    };
    view! {
        <div role="tablist" aria-label="Campaign editor" class="mb-4 flex gap-1 border-b border-slate-200" data-testid="editor-tabs"
            on:keydown=on_keydown>
            {EditorTab::ALL.into_iter().map(|t| {
                let selected = move || tab.get() == t;
                let base = if t == EditorTab::Preview { "lg:hidden " } else { "" };
                let badge = move || {
                    let (p, w) = (problems(t), warnings(t));
                    let (class, count, kind) = if p > 0 {
                        ("badge bg-red-100 text-red-700 ring-red-200", p, "problem")
                    } else if w > 0 {
                        ("badge bg-amber-100 text-amber-800 ring-amber-200", w, "warning")
                    } else {
                        return None;
                    };
                    let words = if count == 1 { kind.to_string() } else { format!("{kind}s") };
                    Some(view! {
                        <span class=class data-testid=format!("{}-{kind}s", t.key())>
                            {count}<span class="sr-only">{format!(" {words}")}</span>
                        </span>
                    })
                };
                view! {
                    <button type="button" role="tab" id=t.tab_id() aria-controls=t.panel_id()
                        aria-selected=move || selected().to_string()
                        tabindex=move || if selected() { "0" } else { "-1" }
                        class=move || format!("{base}-mb-px inline-flex min-h-11 items-center gap-1.5 border-b-2 px-3 text-sm {}",
                            if selected() { "border-indigo-600 font-medium text-indigo-700" } else { "border-transparent text-slate-600 hover:text-slate-900" })
                        on:click=move |_| choose(t)>
                        {t.label()}
                        {badge}
                    </button>
                }
            }).collect_view()}
        </div>
    }
}

/// Whether a tab is on screen (the preview's is hidden on wide screens).
fn tab_shown(tab: EditorTab) -> bool {
    #[cfg(feature = "hydrate")]
    {
        use web_sys::wasm_bindgen::JsCast;
        document()
            .get_element_by_id(&tab.tab_id())
            .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
            .is_some_and(|e| e.offset_parent().is_some())
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = tab;
        true
    }
}

/// Moves the keyboard focus to a tab (after the arrow keys chose it).
fn focus_tab(tab: EditorTab) {
    #[cfg(feature = "hydrate")]
    {
        use web_sys::wasm_bindgen::JsCast;
        if let Some(button) =
            document().get_element_by_id(&tab.tab_id()).and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
        {
            let _ = button.focus();
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = tab;
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
