//! The editor's sections of fields: message, sender, audience, content (the form's state is in
//! `editor_form`).

use leptos::prelude::*;

use super::block_editor::{BlockBody, BlockEditor};
use crate::components::ui::{Card, LoadError};
use crate::error::AppError;
use crate::pages::audience::ListsView;
use crate::pages::campaigns::editor_form::{Form, input_class};
use crate::pages::settings::IdentitiesView;
use herald_types::{Block, BlockDocument, BodyFormat, FieldError};

/// The last save's warnings for `field` (unknown merge tags), in amber under it.
#[component]
pub fn FieldWarnings(form: Form, field: &'static str) -> impl IntoView {
    let messages = move || {
        form.warnings.with(|w| {
            w.iter().filter(|w| w.field.as_deref() == Some(field)).map(|w| w.message.clone()).collect::<Vec<_>>()
        })
    };
    view! {
        <Show when=move || !messages().is_empty()>
            <ul class="mt-1 space-y-0.5 text-xs text-amber-700" data-testid=format!("{field}-warnings") role="status">
                {move || messages().into_iter().map(|m| view! { <li>"⚠ " {m}</li> }).collect_view()}
                {(field == "from_email").then(|| view! {
                    <li><a href="/settings/domains" class="text-indigo-600 hover:underline">"Verify a domain in Settings → Domains"</a></li>
                })}
            </ul>
        </Show>
    }
}

/// A labelled text input bound to one draft field, with its hint and its error.
#[component]
pub fn TextField(
    form: Form,
    field: &'static str,
    label: &'static str,
    value: RwSignal<String>,
    #[prop(optional)] placeholder: &'static str,
    #[prop(optional)] hint: &'static str,
    #[prop(optional)] input_type: &'static str,
    #[prop(optional)] extra_class: &'static str,
    #[prop(optional)] maxlength: Option<u32>,
    #[prop(optional)] required: bool,
) -> impl IntoView {
    let error = form.error(field);
    let input_id = format!("campaign-{}", field.replace('_', "-"));
    let hint_id = format!("{input_id}-hint");
    let error_id = format!("{input_id}-error");
    let described = format!("{hint_id} {error_id}");
    view! {
        <div>
            <label for=input_id.clone() class="label">{label}</label>
            // `value` for the server's HTML, `prop:value` so a value the save filled in shows.
            <input id=input_id type=if input_type.is_empty() { "text" } else { input_type }
                class=move || input_class(error(), extra_class)
                value=value.get_untracked() prop:value=value placeholder=placeholder maxlength=maxlength required=required
                autocomplete="off" aria-describedby=described aria-invalid=move || error().is_some().to_string()
                on:input=move |ev| {
                    value.set(event_target_value(&ev));
                    form.changed.run(());
                }/>
            {(!hint.is_empty()).then(|| view! { <p id=hint_id class="mt-1 text-xs text-slate-500">{hint}</p> })}
            <p id=error_id class="mt-1 text-xs text-red-600" role="alert">{error}</p>
        </div>
    }
}

#[component]
pub fn MessageFields(form: Form) -> impl IntoView {
    view! {
        <Card title="Message">
            <div class="space-y-4">
                <TextField form=form field="name" label="Name" value=form.name maxlength=200 required=true
                    hint="For you and your team; readers never see it."/>
                <TextField form=form field="subject" label="Subject" value=form.subject maxlength=300
                    placeholder="What's new this week, {{ reader.name }}"
                    hint="Template variables work here too: {{ reader.name }}, {{ reader.attributes.city }}."/>
                <FieldWarnings form=form field="subject"/>
                <TextField form=form field="preheader" label="Preheader" value=form.preheader maxlength=300
                    placeholder="The line inboxes show after the subject"/>
                <FieldWarnings form=form field="preheader"/>
            </div>
        </Card>
    }
}

#[component]
pub fn SenderFields(form: Form, identities: Resource<Result<IdentitiesView, AppError>>) -> impl IntoView {
    let identity_error = form.error("identity_id");
    view! {
        <Card title="Sender">
            <div class="space-y-4">
                <div>
                    <label for="campaign-identity" class="label">"Send through"</label>
                    <select id="campaign-identity" class="input"
                        on:change=move |ev| {
                            form.identity_id.set(event_target_value(&ev));
                            form.changed.run(());
                        }>
                        <option value="" selected=form.identity_id.get_untracked().is_empty()>"Default server"</option>
                        <Suspense>
                            {move || Suspend::new(async move {
                                identities.await.map(|v| {
                                    let current = form.identity_id.get_untracked();
                                    v.identities.into_iter().map(|i| {
                                        let id = i.id.to_string();
                                        let selected = id == current;
                                        view! { <option value=id selected=selected>{i.name}</option> }
                                    }).collect_view()
                                }).ok()
                            })}
                        </Suspense>
                    </select>
                    <p class="mt-1 text-xs text-slate-500">
                        "The SMTP server and its limits. Manage identities in "
                        <a href="/settings/sending" class="text-indigo-600 hover:underline">"Settings → Sending"</a>"."
                    </p>
                    <p class="mt-1 text-xs text-red-600" role="alert">{identity_error}</p>
                </div>
                <div class="grid grid-cols-2 gap-4">
                    <TextField form=form field="from_name" label="From name" value=form.from_name maxlength=100
                        placeholder="The Weekly Team"/>
                    <TextField form=form field="from_email" label="From email" value=form.from_email input_type="email"
                        placeholder="news@example.com"/>
                </div>
                <FieldWarnings form=form field="from_email"/>
                <TextField form=form field="reply_to" label="Reply-to" value=form.reply_to input_type="email"
                    placeholder="Replies go to the From address" hint="Optional: where replies go, if not to the From address."/>
            </div>
        </Card>
    }
}

/// The confirmed readers of the chosen lists, added up (a reader on two lists gets one copy,
/// so this is an upper bound), and how many lists that is.
pub fn audience_estimate(lists: &ListsView, chosen: &[String]) -> (usize, i64) {
    let picked: Vec<_> = lists.lists.iter().filter(|l| chosen.contains(&l.list.id.to_string())).collect();
    (picked.len(), picked.iter().map(|l| l.confirmed).sum())
}

#[component]
pub fn AudienceFields(form: Form, lists: Resource<Result<ListsView, AppError>>) -> impl IntoView {
    let filter_error = form.error("attribute_filter");
    let spread_error = form.error("spread_hours");
    view! {
        <Card title="Audience">
            {form.resend_of.map(|original| view! {
                <p class="mb-4 rounded-md bg-indigo-50 px-3 py-2 text-sm text-indigo-900" data-testid="resend-audience">
                    "The readers "
                    <a href=format!("/campaigns/{original}") class="font-medium underline">"the original campaign"</a>
                    " reached who have not opened it, clicked, unsubscribed or bounced since, and are still on its lists."
                </p>
            })}
            <fieldset class:hidden=form.resend_of.is_some()>
                <legend class="label">"Send to these lists"</legend>
                <Suspense fallback=|| view! { <p class="text-sm text-slate-500">"Loading lists…"</p> }>
                    {move || Suspend::new(async move {
                        match lists.await {
                            Ok(v) if v.lists.is_empty() => view! {
                                <p class="text-sm text-slate-500">
                                    "No lists yet. " <a href="/audience" class="text-indigo-600 hover:underline">"Create one in Audience"</a>
                                    " and add readers to it."
                                </p>
                            }.into_any(),
                            Ok(v) => {
                                let chosen = form.list_ids.get_untracked();
                                view! {
                                    <div class="space-y-1" data-testid="campaign-lists">
                                        {v.lists.into_iter().map(|l| {
                                            let id = l.list.id.to_string();
                                            let checked = chosen.contains(&id);
                                            view! {
                                                <label class="flex items-center gap-2 rounded-md px-2 py-1 text-sm hover:bg-slate-50">
                                                    <input type="checkbox" value=id.clone() checked=checked
                                                        on:change=move |ev| {
                                                            let on = event_target_checked(&ev);
                                                            let id = id.clone();
                                                            form.list_ids.update(|c| { c.retain(|x| *x != id); if on { c.push(id); } });
                                                            form.changed.run(());
                                                        }/>
                                                    // A long name wraps, even without a space to break at.
                                                    <span class="min-w-0 font-medium wrap-anywhere text-slate-800">{l.list.name}</span>
                                                    <span class="shrink-0 text-xs text-slate-500">{format!("{} confirmed", l.confirmed)}</span>
                                                </label>
                                            }
                                        }).collect_view()}
                                    </div>
                                }.into_any()
                            }
                            Err(e) => view! { <LoadError error=e/> }.into_any(),
                        }
                    })}
                </Suspense>
                <Suspense>
                    {move || Suspend::new(async move {
                        lists.await.ok().map(|v| view! {
                            <p class="mt-2 text-xs text-slate-500" data-testid="audience-estimate">
                                {move || {
                                    let (n, readers) = form.list_ids.with(|c| audience_estimate(&v, c));
                                    if n == 0 && form.segment_ids.with(Vec::is_empty) {
                                        "Choose at least one list or segment.".to_string()
                                    } else if n == 0 {
                                        "Segments only: readers confirmed on any list who match them.".to_string()
                                    } else {
                                        format!("Up to {readers} confirmed reader{} on {n} list{}; each reader gets one copy.",
                                            if readers == 1 { "" } else { "s" }, if n == 1 { "" } else { "s" })
                                    }
                                }}
                            </p>
                        })
                    })}
                </Suspense>
            </fieldset>
            {form.resend_of.is_none().then(|| view! { <SegmentChoices form=form lists=lists/> })}
            <EligibleCount form=form/>
            <div class="mt-5">
                <label for="campaign-attribute-filter" class="label">"Only readers whose attributes match (optional)"</label>
                <input id="campaign-attribute-filter" class=move || input_class(filter_error(), "font-mono text-xs")
                    value=form.attribute_filter.get_untracked() placeholder="city = \"Lyon\"" autocomplete="off" spellcheck="false"
                    aria-describedby="campaign-attribute-filter-hint campaign-attribute-filter-error"
                    aria-invalid=move || filter_error().is_some().to_string()
                    on:input=move |ev| {
                        form.attribute_filter.set(event_target_value(&ev));
                        form.changed.run(());
                    }/>
                <p id="campaign-attribute-filter-hint" class="mt-1 text-xs text-slate-500">
                    "For example " <code class="rounded bg-slate-100 px-1">"city = \"Lyon\""</code> " or "
                    <code class="rounded bg-slate-100 px-1">"plan in [\"pro\", \"team\"]"</code>". Empty: everyone on the lists."
                </p>
                <p id="campaign-attribute-filter-error" class="mt-1 text-xs text-red-600" role="alert">{filter_error}</p>
            </div>
            <div class="mt-5">
                <div class="flex flex-wrap items-center gap-2 text-sm">
                    <label class="flex items-center gap-2">
                        <input type="checkbox" checked=form.spread_on.get_untracked()
                            on:change=move |ev| {
                                form.spread_on.set(event_target_checked(&ev));
                                form.changed.run(());
                            }/>
                        "Spread the send over"
                    </label>
                    <input id="campaign-spread-hours" type="number" min="0.5" max="168" step="0.5" class="input w-24"
                        aria-label="Hours to spread the send over"
                        value=form.spread_hours.get_untracked() disabled=move || !form.spread_on.get()
                        aria-invalid=move || spread_error().is_some().to_string()
                        on:input=move |ev| {
                            form.spread_hours.set(event_target_value(&ev));
                            form.changed.run(());
                        }/>
                    "hours"
                </div>
                <p class="mt-1 text-xs text-slate-500">"Sends at an even pace instead of as fast as the server allows: gentler on new sending domains."</p>
                <p class="mt-1 text-xs text-red-600" role="alert">{spread_error}</p>
            </div>
            <div class="mt-5">
                <label for="campaign-tracking" class="block text-sm font-medium text-slate-700">"Open and click tracking"</label>
                <select id="campaign-tracking" class="input mt-1 w-72" aria-describedby="campaign-tracking-hint"
                    on:change=move |ev| {
                        form.tracking.set(event_target_value(&ev));
                        form.changed.run(());
                    }>
                    {[("on", "On: per reader"), ("anonymous", "Anonymous: counts only"), ("off", "Off")].into_iter().map(|(v, label)| view! {
                        <option value=v selected=form.tracking.get_untracked() == v>{label}</option>
                    }).collect_view()}
                </select>
                <p id="campaign-tracking-hint" class="mt-1 text-xs text-slate-500">
                    "Adds an invisible image and rewrites links through this server. Anonymous keeps totals without knowing who opened or clicked."
                </p>
            </div>
        </Card>
    }
}

/// A block document as the email HTML it becomes (merge tags still in it), for an author who
/// switches a block campaign to HTML.
#[server(prefix = "/rpc", endpoint = "blocks_to_html")]
pub async fn blocks_to_html(body: String) -> Result<String, AppError> {
    use herald_engine::Role;
    crate::ssr::require_role(Role::Author).await?;
    let doc = BlockDocument::parse(&body).map_err(AppError::Invalid)?;
    herald_engine::sending::message::blocks_to_template(&doc)
        .map_err(|e| AppError::Invalid(herald_types::Invalid::field("body", e.to_string())))
}

/// A mail body and its format, wherever they live (a campaign's form, an automation's mail
/// step), for [`switch_body_format`].
#[derive(Clone, Copy)]
pub struct BodyAndFormat {
    pub body: RwSignal<String>,
    /// `blocks`, `markdown` or `html`.
    pub format: RwSignal<String>,
    /// After a switch.
    pub changed: Callback<()>,
    /// A switch that could not be made, and why.
    pub failed: Callback<String>,
}

fn switch_format(form: Form, to: BodyFormat) {
    let errors = form.errors;
    let failed = Callback::new(move |message| errors.set(vec![FieldError { field: Some("body".into()), message }]));
    switch_body_format(BodyAndFormat { body: form.body, format: form.body_format, changed: form.changed, failed }, to);
}

/// Moves the body to another format, keeping what was written: text goes into a paragraph (or
/// an HTML block), blocks become Markdown here or HTML on the server. Blocks that were edited
/// are only turned into something else when the author agrees (their layout is lost).
pub fn switch_body_format(mail: BodyAndFormat, to: BodyFormat) {
    let from: BodyFormat = mail.format.get_untracked().parse().unwrap_or_default();
    if from == to {
        return;
    }
    let body = mail.body.get_untracked();
    let apply = move |body: String| {
        mail.body.set(body);
        mail.format.set(to.as_str().to_string());
        mail.changed.run(());
    };
    match (from, to) {
        (_, BodyFormat::Blocks) => {
            let mut doc = BlockDocument::default();
            if !body.trim().is_empty() {
                let kept =
                    if from == BodyFormat::Html { Block::Html { html: body } } else { Block::Paragraph { text: body } };
                doc.blocks = vec![kept];
            }
            apply(doc.to_json());
        }
        (BodyFormat::Blocks, _) => {
            let untouched = BlockDocument::parse(&body).is_ok_and(|d| d == BlockDocument::default());
            if !untouched && !confirm_lossy(to) {
                // The radio goes back to blocks.
                mail.format.set(String::new());
                mail.format.set(from.as_str().to_string());
                return;
            }
            if to == BodyFormat::Markdown {
                apply(BlockDocument::parse(&body).map(|d| d.to_markdown()).unwrap_or(body));
            } else {
                leptos::task::spawn_local(async move {
                    match blocks_to_html(body.clone()).await {
                        Ok(html) => apply(html),
                        Err(e) => mail.failed.run(e.to_string()),
                    }
                });
            }
        }
        _ => apply(body),
    }
}

#[cfg(feature = "hydrate")]
fn confirm_lossy(to: BodyFormat) -> bool {
    let name = if to == BodyFormat::Html { "HTML" } else { "Markdown" };
    let message = format!(
        "Turn the blocks into {name}? Columns, buttons and spacing become plain {name} and cannot be turned back into blocks."
    );
    window().confirm_with_message(&message).unwrap_or(false)
}

#[cfg(not(feature = "hydrate"))]
fn confirm_lossy(_: BodyFormat) -> bool {
    false
}

#[component]
pub fn ContentFields(form: Form) -> impl IntoView {
    let body_error = form.error("body");
    let format_radio = move |format: BodyFormat, label: &'static str| {
        view! {
            <label class="flex min-h-11 items-center gap-2 text-sm">
                <input type="radio" name="campaign-body-format" value=format.as_str()
                    checked=form.body_format.get_untracked() == format.as_str()
                    prop:checked=move || form.body_format.get() == format.as_str()
                    on:change=move |_| switch_format(form, format)/>
                {label}
            </label>
        }
    };
    let is_blocks = move || form.body_format.get() == BodyFormat::Blocks.as_str();
    view! {
        <Card title="Content">
            <fieldset class="mb-4 flex flex-wrap items-center gap-x-6">
                <legend class="sr-only">"Body format"</legend>
                <span class="text-sm font-medium text-slate-700" aria-hidden="true">"Format"</span>
                {format_radio(BodyFormat::Blocks, "Blocks")}
                {format_radio(BodyFormat::Markdown, "Markdown")}
                {format_radio(BodyFormat::Html, "HTML")}
            </fieldset>
            {move || if is_blocks() {
                let source = BlockBody {
                    body: form.body,
                    changed: form.changed,
                    errors: form.errors.into(),
                    render_error: form.render_error.into(),
                    ids: StoredValue::new(String::new()),
                };
                view! { <BlockEditor source=source/> }.into_any()
            } else {
                view! {
                    <label for="campaign-body" class="label">"Body"</label>
                    <textarea id="campaign-body" rows="24" spellcheck="false"
                        class=move || input_class(body_error(), "min-h-96 font-mono text-xs leading-5")
                        aria-describedby="campaign-body-hint campaign-body-error"
                        aria-invalid=move || body_error().is_some().to_string()
                        placeholder="# Hello {{ reader.name }}\n\nWhat happened this week…"
                        on:input=move |ev| {
                            form.body.set(event_target_value(&ev));
                            form.changed.run(());
                        }>{form.body.get_untracked()}</textarea>
                    <p id="campaign-body-hint" class="mt-1 text-xs text-slate-500">
                        "Variables: " <code class="rounded bg-slate-100 px-1">"{{ reader.name }}"</code>", "
                        <code class="rounded bg-slate-100 px-1">"{{ reader.email }}"</code>", "
                        <code class="rounded bg-slate-100 px-1">"{{ reader.attributes.city | default(\"\") }}"</code>", "
                        <code class="rounded bg-slate-100 px-1">"{{ workspace.name }}"</code>", "
                        <code class="rounded bg-slate-100 px-1">"{{ unsubscribe_url }}"</code>
                        ". An unsubscribe link and your postal address are added at the bottom when the body has none."
                    </p>
                    <p id="campaign-body-error" class="mt-1 text-xs text-red-600" role="alert">{body_error}</p>
                }.into_any()
            }}
            <FieldWarnings form=form field="body"/>
        </Card>
    }
}

/// The segments to send to (added to the lists' readers) and one to leave out.
#[component]
fn SegmentChoices(form: Form, lists: Resource<Result<ListsView, AppError>>) -> impl IntoView {
    let exclude_error = form.error("exclude_segment_id");
    view! {
        <Suspense>
            {move || Suspend::new(async move {
                let v = lists.await.ok()?;
                if v.segments.is_empty() {
                    return Some(view! {
                        <p class="mt-4 text-xs text-slate-500">
                            "To pick readers by tags, fields or engagement, "
                            <a href="/audience/segments/new" class="text-indigo-600 hover:underline">"make a segment"</a>"."
                        </p>
                    }.into_any());
                }
                let chosen = form.segment_ids.get_untracked();
                let excluded = form.exclude_segment_id.get_untracked();
                let options = v.segments.clone();
                Some(view! {
                    <fieldset class="mt-4">
                        <legend class="label">"And readers in these segments"</legend>
                        <div class="space-y-1" data-testid="campaign-segments">
                            {v.segments.into_iter().map(|(id, name)| {
                                let id = id.to_string();
                                let checked = chosen.contains(&id);
                                view! {
                                    <label class="flex items-center gap-2 rounded-md px-2 py-1 text-sm hover:bg-slate-50">
                                        <input type="checkbox" value=id.clone() checked=checked
                                            on:change=move |ev| {
                                                let on = event_target_checked(&ev);
                                                let id = id.clone();
                                                form.segment_ids.update(|c| { c.retain(|x| *x != id); if on { c.push(id); } });
                                                form.changed.run(());
                                            }/>
                                        <span class="min-w-0 font-medium wrap-anywhere text-slate-800">{name}</span>
                                    </label>
                                }
                            }).collect_view()}
                        </div>
                    </fieldset>
                    <div class="mt-3">
                        <label for="campaign-exclude-segment" class="label">"Leave out readers in"</label>
                        <select id="campaign-exclude-segment" class="input" aria-invalid=move || exclude_error().is_some().to_string()
                            on:change=move |ev| {
                                form.exclude_segment_id.set(event_target_value(&ev));
                                form.changed.run(());
                            }>
                            <option value="" selected=excluded.is_empty()>"Nobody"</option>
                            {options.into_iter().map(|(id, name)| {
                                let selected = excluded == id.to_string();
                                view! { <option value=id.to_string() selected=selected>{name}</option> }
                            }).collect_view()}
                        </select>
                        <p class="mt-1 text-xs text-red-600" role="alert">{exclude_error}</p>
                    </div>
                }.into_any())
            })}
        </Suspense>
    }
}

/// The exact count a send would reach, as of the last save.
#[component]
fn EligibleCount(form: Form) -> impl IntoView {
    view! {
        <Transition>
            {move || Suspend::new(async move {
                form.audience.await.ok().map(|a| view! {
                    <p class="mt-3 rounded-md bg-slate-50 px-3 py-2 text-sm text-slate-700" data-testid="eligible-count">
                        <strong>{a.eligible}</strong>
                        {format!(" reader{} would get this now", if a.eligible == 1 { "" } else { "s" })}
                        {(a.skipped > 0).then(|| format!(" ({} skipped: unsubscribed elsewhere, suppressed or within the frequency cap)", a.skipped))}
                        "."
                    </p>
                })
            })}
        </Transition>
    }
}
