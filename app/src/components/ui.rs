//! Small presentational pieces shared by the pages.

use leptos::prelude::*;

use crate::error::AppError;

/// The heading row of a page.
#[component]
pub fn PageHeader(#[prop(into)] title: String, #[prop(into, optional)] subtitle: String) -> impl IntoView {
    view! {
        <div class="mb-6">
            <h1 class="text-2xl font-semibold text-slate-900">{title}</h1>
            {(!subtitle.is_empty()).then(|| view! { <p class="mt-1 text-sm text-slate-500">{subtitle}</p> })}
        </div>
    }
}

/// A white card around a section of a page.
#[component]
pub fn Card(children: Children, #[prop(into, optional)] title: String) -> impl IntoView {
    view! {
        <section class="mb-6 rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
            {(!title.is_empty()).then(|| view! { <h2 class="mb-4 text-lg font-medium text-slate-900">{title}</h2> })}
            {children()}
        </section>
    }
}

/// What a page shows when there is nothing yet, with the next step to take.
#[component]
pub fn EmptyState(
    #[prop(into)] title: String,
    #[prop(into)] body: String,
    #[prop(into, optional)] action_href: String,
    #[prop(into, optional)] action_label: String,
) -> impl IntoView {
    view! {
        <div class="my-6 rounded-xl border-2 border-dashed border-slate-200 bg-white px-6 py-12 text-center">
            <h2 class="text-lg font-medium text-slate-900">{title}</h2>
            <p class="mx-auto mt-2 max-w-md text-sm text-slate-500">{body}</p>
            {(!action_href.is_empty()).then(|| view! {
                <a href=action_href class="btn-primary mt-6 inline-block">{action_label}</a>
            })}
        </div>
    }
}

/// The outcome of a server action: its error in red, or nothing.
#[component]
pub fn ActionError<T, S>(value: S) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    S: Get<Value = Option<Result<T, AppError>>> + Send + Sync + 'static,
{
    move || {
        value.get().and_then(|r| r.err()).map(|e| {
            view! {
                <p role="alert" class="mt-3 rounded-md bg-red-50 px-3 py-2 text-sm text-red-700">{e.to_string()}</p>
            }
        })
    }
}

/// An error from loading a page's data.
#[component]
pub fn LoadError(error: AppError) -> impl IntoView {
    view! {
        <p role="alert" class="rounded-md bg-red-50 px-3 py-2 text-sm text-red-700">{error.to_string()}</p>
    }
}

/// "2026-11-22 14:03" in UTC, from an RFC 3339 string.
pub fn short_time(rfc3339: &str) -> String {
    rfc3339.get(0..16).map(|s| s.replace('T', " ")).unwrap_or_else(|| rfc3339.to_string())
}

/// An instant as its author writes dates: the server knows neither the author's
/// locale nor their zone, so it renders `2026-11-22 14:03 UTC`; once in the browser the text
/// becomes the browser's own way (`Nov 22, 2026, 3:03 PM`, `22.11.2026, 15:03`) in its zone.
/// The exact instant stays in `datetime`, and in UTC in the tooltip.
#[component]
pub fn LocalTime(
    /// RFC 3339.
    #[prop(into)]
    at: String,
) -> impl IntoView {
    use crate::components::timezone::{format_utc, locale_format, parse_rfc3339};
    let utc = format!("{} UTC", short_time(&at));
    let text = RwSignal::new(utc.clone());
    // `datetime` takes at most milliseconds; whole seconds are plenty here.
    let datetime = parse_rfc3339(&at).map(format_utc).unwrap_or_else(|| at.clone());
    // Effects run only in the browser, after hydration, so the first render matches the server's.
    Effect::new(move |_| {
        if let Some(local) = locale_format(&at) {
            text.set(local);
        }
    });
    view! { <time datetime=datetime title=utc data-testid="local-time">{move || text.get()}</time> }
}

/// [`LocalTime`] of a time the contract types hold as a date-time.
#[component]
pub fn LocalTimeOf(at: herald_types::chrono::DateTime<herald_types::chrono::Utc>) -> impl IntoView {
    view! { <LocalTime at=at.to_rfc3339()/> }
}

/// [`LocalTimeOf`] of an instant that may not be there, or `none` in its place.
pub fn local_time_or(
    at: Option<herald_types::chrono::DateTime<herald_types::chrono::Utc>>,
    none: &'static str,
) -> AnyView {
    match at {
        Some(at) => view! { <LocalTimeOf at=at/> }.into_any(),
        None => none.into_any(),
    }
}

/// `12.5 %`, or `—` when there is nothing to divide by.
pub fn percent_label(rate: Option<f64>) -> String {
    rate.map_or_else(|| "—".into(), |r| format!("{:.1} %", 100.0 * r))
}

/// A page heading with a row of tabs under it (Settings, Audience).
#[component]
pub fn TabbedHeader(
    #[prop(into)] title: String,
    #[prop(into, optional)] subtitle: String,
    tabs: &'static [(&'static str, &'static str)],
    active: &'static str,
) -> impl IntoView {
    let label = title.clone();
    view! {
        <PageHeader title=title subtitle=subtitle/>
        <nav class="mb-6 flex gap-6 border-b border-slate-200 text-sm" aria-label=label>
            {tabs.iter().map(|(href, label)| {
                let cls = if *href == active {
                    "-mb-px border-b-2 border-indigo-600 pb-2 font-medium text-indigo-700"
                } else {
                    "pb-2 text-slate-500 hover:text-slate-800"
                };
                view! { <a href=*href class=cls>{*label}</a> }
            }).collect_view()}
        </nav>
    }
}

/// Percent-encodes a query-string value or a data: URL payload.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A modal that asks before a consequential action (send, cancel, delete). It opens while `open`
/// is true; the confirm button takes the focus, Escape or "Cancel" closes it, and confirming
/// closes it and calls `on_confirm`.
#[component]
pub fn ConfirmDialog(
    open: RwSignal<bool>,
    #[prop(into)] title: String,
    #[prop(into)] confirm_label: String,
    #[prop(optional)] danger: bool,
    #[prop(into)] on_confirm: Callback<()>,
    children: ChildrenFn,
) -> impl IntoView {
    let confirm_ref = NodeRef::<leptos::html::Button>::new();
    Effect::new(move |_| {
        if open.get()
            && let Some(button) = confirm_ref.get()
        {
            let _ = button.focus();
        }
    });
    let confirm_class = if danger {
        "btn-primary bg-red-600 hover:bg-red-500 active:bg-red-700 focus-visible:outline-red-600"
    } else {
        "btn-primary"
    };
    let title_id = format!("dialog-{}", title.to_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
    view! {
        <Show when=move || open.get()>
            <div class="fixed inset-0 z-50 flex items-center justify-center bg-slate-900/40 p-4"
                on:keydown=move |ev| if ev.key() == "Escape" { open.set(false) }>
                <div role="dialog" aria-modal="true" aria-labelledby=title_id.clone()
                    class="w-full max-w-md rounded-xl bg-white p-6 shadow-xl">
                    <h2 id=title_id.clone() class="text-lg font-semibold text-slate-900">{title.clone()}</h2>
                    <div class="mt-2 text-sm text-slate-600">{children()}</div>
                    <div class="mt-6 flex justify-end gap-3">
                        <button type="button" class="btn-secondary" on:click=move |_| open.set(false)>"Cancel"</button>
                        <button type="button" class=confirm_class node_ref=confirm_ref on:click=move |_| {
                            open.set(false);
                            on_confirm.run(());
                        }>{confirm_label.clone()}</button>
                    </div>
                </div>
            </div>
        </Show>
    }
}

/// "2 h 5 min", "3 min 20 s", "45 s".
pub fn human_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    if s >= 3600 {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}

/// Puts `text` on the clipboard and says so. A refused permission leaves the text on the page
/// to select by hand (the promise is not awaited).
#[component]
pub fn CopyButton(
    #[prop(into)] text: String,
    #[prop(into)] label: String,
    #[prop(into, optional)] class: String,
) -> impl IntoView {
    let copied = RwSignal::new(false);
    let class = if class.is_empty() { "btn-secondary".to_string() } else { class };
    view! {
        <button type="button" class=class on:click=move |_| {
            #[cfg(feature = "hydrate")]
            {
                let _ = leptos::prelude::window().navigator().clipboard().write_text(&text);
            }
            #[cfg(not(feature = "hydrate"))]
            let _ = &text;
            copied.set(true);
        }>{move || if copied.get() { "Copied".to_string() } else { label.clone() }}</button>
    }
}

/// The frame of the logged-out pages: a centred card under the product name.
#[component]
pub fn AuthCard(#[prop(into)] title: String, children: Children) -> impl IntoView {
    view! {
        <div class="flex min-h-screen items-center justify-center bg-slate-50 px-4">
            <div class="w-full max-w-sm">
                <div class="mb-6 text-center text-2xl font-bold tracking-tight text-indigo-600">"Herald"</div>
                <div class="rounded-xl border border-slate-200 bg-white p-8 shadow-sm">
                    <h1 class="mb-6 text-xl font-semibold text-slate-900">{title}</h1>
                    {children()}
                </div>
            </div>
        </div>
    }
}
