//! The editor's "A/B test" card: the other versions of the subject (and, if the author wants,
//! of the sender name and the body), the share of the audience that tests them, the metric and
//! the window. The campaign's own content above is version A.

use leptos::prelude::*;

use crate::components::ui::Card;
use crate::pages::campaigns::editor_form::{Form, SLOTS, input_class};
use herald_types::AbMetric;
use herald_types::ab_test::variant_label;

#[component]
pub fn AbTestFields(form: Form) -> impl IntoView {
    let ab = form.ab;
    let changed = form.changed;
    let card_error = form.error("ab_test");
    let variants_error = form.error("ab_test.variants");
    let percent_error = form.error("ab_test.test_percent");
    let window_error = form.error("ab_test.window_hours");
    let version = move |i: usize| {
        let label = variant_label(i + 1);
        // The messages of versions B, C and D, filed by the server as `ab_test.variants.1.subject`…
        let errors = form.errors;
        let error_of = move |f: &'static str| {
            let field = format!("ab_test.variants.{}.{f}", i + 1);
            Signal::derive(move || {
                errors
                    .with(|e| e.iter().find(|e| e.field.as_deref() == Some(field.as_str())).map(|e| e.message.clone()))
            })
        };
        let (subject_error, from_error, body_error) = (error_of("subject"), error_of("from_name"), error_of("body"));
        let id = move |f: &str| format!("campaign-ab-{}-{f}", label.to_ascii_lowercase());
        let more =
            RwSignal::new(!ab.from_names[i].get_untracked().is_empty() || !ab.bodies[i].get_untracked().is_empty());
        view! {
            <div class="rounded-md border border-slate-200 p-3" data-testid=format!("ab-version-{label}")>
                <div class="flex items-center justify-between">
                    <label for=id("subject") class="label">{format!("Version {label}: subject")}</label>
                    // The last of C and D can go (B stays while the test is on).
                    {(i > 0 && i + 1 == ab.versions.get_untracked()).then(|| view! {
                        <button type="button" class="text-xs text-slate-500 hover:text-red-600"
                            aria-label=format!("Remove version {label}")
                            on:click=move |_| { ab.versions.set(i); changed.run(()); }>"Remove"</button>
                    })}
                </div>
                <input id=id("subject") class=move || input_class(subject_error.get(), "") maxlength="300" autocomplete="off"
                    value=ab.subjects[i].get_untracked() prop:value=ab.subjects[i]
                    aria-invalid=move || subject_error.get().is_some().to_string()
                    on:input=move |ev| { ab.subjects[i].set(event_target_value(&ev)); changed.run(()); }/>
                <p class="mt-1 text-xs text-red-600" role="alert">{subject_error}</p>
                <label class="mt-2 flex items-center gap-2 text-xs text-slate-600">
                    <input type="checkbox" checked=more.get_untracked() on:change=move |ev| more.set(event_target_checked(&ev))/>
                    "Also try another sender name or body"
                </label>
                <Show when=move || more.get()>
                    <div class="mt-2 space-y-2">
                        <label for=id("from") class="label">{format!("Version {label}: from name")}</label>
                        <input id=id("from") class=move || input_class(from_error.get(), "") maxlength="100" autocomplete="off"
                            placeholder="Empty: version A's"
                            value=ab.from_names[i].get_untracked()
                            on:input=move |ev| { ab.from_names[i].set(event_target_value(&ev)); changed.run(()); }/>
                        <p class="text-xs text-red-600" role="alert">{from_error}</p>
                        <label for=id("body") class="label">{format!("Version {label}: body")}</label>
                        <textarea id=id("body") rows="8" spellcheck="false"
                            class=move || input_class(body_error.get(), "font-mono text-xs")
                            placeholder="Empty: version A's body"
                            on:input=move |ev| { ab.bodies[i].set(event_target_value(&ev)); changed.run(()); }>
                            {ab.bodies[i].get_untracked()}
                        </textarea>
                        <p class="text-xs text-red-600" role="alert">{body_error}</p>
                    </div>
                </Show>
            </div>
        }
    };
    view! {
        <Card title="A/B test">
            <label class="flex items-center gap-2 text-sm">
                <input type="checkbox" data-testid="ab-test-on" checked=ab.on.get_untracked()
                    on:change=move |ev| { ab.on.set(event_target_checked(&ev)); changed.run(()); }/>
                "Test other versions on part of the audience, then send the winner to the rest"
            </label>
            <p class="mt-1 text-xs text-red-600" role="alert">{card_error}</p>
            <Show when=move || ab.on.get()>
                <div class="mt-4 space-y-3">
                    <p class="text-xs text-slate-500">"Version A is the subject, sender and body above. Each reader gets one version."</p>
                    {move || (0..ab.versions.get().clamp(1, SLOTS)).map(version).collect_view()}
                    <p class="text-xs text-red-600" role="alert">{variants_error}</p>
                    <Show when=move || { ab.versions.get() < SLOTS }>
                        <button type="button" class="btn-secondary text-xs"
                            on:click=move |_| { ab.versions.update(|n| *n = (*n + 1).min(SLOTS)); changed.run(()); }>
                            {move || format!("Add version {}", variant_label(ab.versions.get() + 1))}
                        </button>
                    </Show>
                    <div class="grid grid-cols-1 gap-4 sm:grid-cols-3">
                        <div>
                            <label for="campaign-ab-percent" class="label">"Test share (%)"</label>
                            <input id="campaign-ab-percent" type="number" min="1" max="100" class=move || input_class(percent_error(), "")
                                value=ab.percent.get_untracked() aria-invalid=move || percent_error().is_some().to_string()
                                on:input=move |ev| { ab.percent.set(event_target_value(&ev)); changed.run(()); }/>
                            <p class="mt-1 text-xs text-red-600" role="alert">{percent_error}</p>
                        </div>
                        <div>
                            <label for="campaign-ab-metric" class="label">"Winner by"</label>
                            <select id="campaign-ab-metric" class="input min-w-40"
                                on:change=move |ev| {
                                    ab.metric.set(event_target_value(&ev).parse().unwrap_or_default());
                                    changed.run(());
                                }>
                                {AbMetric::ALL.iter().map(|m| view! {
                                    <option value=m.as_str() selected=ab.metric.get_untracked() == *m>{m.label()}</option>
                                }).collect_view()}
                            </select>
                        </div>
                        <div>
                            <label for="campaign-ab-window" class="label">"Decide after (hours)"</label>
                            <input id="campaign-ab-window" type="number" min="1" max="72" class=move || input_class(window_error(), "")
                                value=ab.window_hours.get_untracked() aria-invalid=move || window_error().is_some().to_string()
                                on:input=move |ev| { ab.window_hours.set(event_target_value(&ev)); changed.run(()); }/>
                            <p class="mt-1 text-xs text-red-600" role="alert">{window_error}</p>
                        </div>
                    </div>
                    <p class="text-xs text-slate-500">
                        "The rest of the audience waits; when the window ends the version with the best rate goes to them "
                        "(opens by privacy proxies, which open every message, do not count). "
                        "You can pick one earlier on the campaign's page. Needs tracking on (per reader)."
                    </p>
                </div>
            </Show>
        </Card>
    }
}
