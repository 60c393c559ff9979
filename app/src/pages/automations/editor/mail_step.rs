//! An automation's mail step: its subject, preheader and body, the body built from blocks in
//! the campaign editor's block editor (the one editor, brand and all) or written as Markdown or
//! HTML, and a preview of the mail as the editor holds it, saved or not.
//!
//! What the author types is written back into the automation's steps *untracked*: the steps'
//! list re-renders on a tracked change, which would rebuild this editor under the author's
//! cursor. The save reads the steps as they are.

use std::time::Duration;

use herald_types::{BodyFormat, FieldError, StepAction, StepInput};
use leptos::prelude::*;

use super::server::preview_automation_mail;
use crate::components::ui::LoadError;
use crate::pages::campaigns::block_editor::{BlockBody, BlockEditor};
use crate::pages::campaigns::fields::{BodyAndFormat, switch_body_format};
use crate::pages::campaigns::preview::{PreviewBody, PreviewMode, PreviewModeTabs};

#[component]
#[allow(clippy::too_many_arguments)]
pub(super) fn MailStep(
    i: usize,
    subject: String,
    preheader: String,
    body_format: BodyFormat,
    body: String,
    steps: RwSignal<Vec<StepInput>>,
    editable: bool,
    /// The last save's problems, every step's: this step's blocks mark their own fields.
    problems: Memo<Vec<FieldError>>,
) -> impl IntoView {
    let subject = RwSignal::new(subject);
    let preheader = RwSignal::new(preheader);
    let format = RwSignal::new(body_format.as_str().to_string());
    let body = RwSignal::new(body);
    // Bumped a moment after the last change: the preview, when open, renders again.
    let edited = RwSignal::new(0_u32);
    let pause = StoredValue::new(None::<TimeoutHandle>);
    let write_back = Callback::new(move |()| {
        let action = StepAction::Email {
            subject: subject.get_untracked(),
            preheader: preheader.get_untracked(),
            body_format: format.get_untracked().parse().unwrap_or_default(),
            body: body.get_untracked(),
        };
        steps.update_untracked(|s| {
            if let Some(step) = s.get_mut(i) {
                step.action = action;
            }
        });
        if let Some(handle) = pause.get_value() {
            handle.clear();
        }
        let again = move || {
            edited.try_update(|n| *n += 1);
        };
        pause.set_value(set_timeout_with_handle(again, Duration::from_millis(600)).ok());
    });
    // This step's problems, keyed as the block editor names them (`body.blocks.0.text`).
    let prefix = format!("steps.{i}.");
    let errors = Signal::derive(move || {
        problems.with(|all| {
            all.iter()
                .filter_map(|e| {
                    let field = e.field.as_deref()?.strip_prefix(prefix.as_str())?;
                    Some(FieldError { field: Some(field.to_string()), message: e.message.clone() })
                })
                .collect::<Vec<_>>()
        })
    });
    let render_error = RwSignal::new(None::<FieldError>);
    let failed = Callback::new(move |message: String| {
        render_error.set(Some(FieldError { field: Some("body".into()), message }));
    });
    let mail = BodyAndFormat { body, format, changed: write_back, failed };
    let blocks = BlockBody {
        body,
        changed: write_back,
        errors,
        render_error: render_error.into(),
        ids: StoredValue::new(format!("step-{i}-")),
    };
    let format_radio = move |to: BodyFormat, label: &'static str| {
        view! {
            <label class="flex min-h-11 items-center gap-2 text-sm">
                <input type="radio" name=format!("step-{i}-format") value=to.as_str() disabled=!editable
                    checked=format.get_untracked() == to.as_str()
                    prop:checked=move || format.get() == to.as_str()
                    on:change=move |_| switch_body_format(mail, to)/>
                {label}
            </label>
        }
    };
    let body_id = format!("step-{i}-body");
    view! {
        <div class="grid gap-2">
            <label for=format!("step-{i}-subject") class="label">"Subject"</label>
            <input id=format!("step-{i}-subject") class="input" disabled=!editable prop:value=subject data-testid="step-subject"
                on:input=move |ev| { subject.set(event_target_value(&ev)); write_back.run(()); }/>
            <label for=format!("step-{i}-preheader") class="label">"Preheader"</label>
            <input id=format!("step-{i}-preheader") class="input" disabled=!editable prop:value=preheader
                on:input=move |ev| { preheader.set(event_target_value(&ev)); write_back.run(()); }/>
            <fieldset class="flex flex-wrap items-center gap-x-6">
                <legend class="sr-only">{format!("Step {}: body format", i + 1)}</legend>
                <span class="text-sm font-medium text-slate-700" aria-hidden="true">"Body"</span>
                {format_radio(BodyFormat::Blocks, "Blocks")}
                {format_radio(BodyFormat::Markdown, "Markdown")}
                {format_radio(BodyFormat::Html, "HTML")}
            </fieldset>
            {move || if format.get() == BodyFormat::Blocks.as_str() {
                view! { <fieldset disabled=!editable class="min-w-0" data-testid="step-blocks"><BlockEditor source=blocks/></fieldset> }.into_any()
            } else {
                let body_id = body_id.clone();
                view! {
                    <label for=body_id.clone() class="sr-only">{format!("Step {}: body", i + 1)}</label>
                    <textarea id=body_id class="input min-h-32 font-mono text-sm" disabled=!editable data-testid="step-body"
                        prop:value=move || body.get_untracked()
                        on:input=move |ev| { body.set(event_target_value(&ev)); write_back.run(()); }></textarea>
                }.into_any()
            }}
            <MailPreview i=i subject=subject preheader=preheader format=format body=body edited=edited mark=render_error/>
        </div>
    }
}

/// The step's mail as a sample reader sees it, rendered when the author opens it and again a
/// moment after each change; its template error marks the block it is in.
#[component]
fn MailPreview(
    i: usize,
    subject: RwSignal<String>,
    preheader: RwSignal<String>,
    format: RwSignal<String>,
    body: RwSignal<String>,
    edited: RwSignal<u32>,
    mark: RwSignal<Option<FieldError>>,
) -> impl IntoView {
    let open = RwSignal::new(false);
    let mode = RwSignal::new(PreviewMode::Desktop);
    let preview = Resource::new(
        move || (open.get(), edited.get()),
        move |(open, _)| async move {
            if !open {
                return Ok(None);
            }
            preview_automation_mail(
                subject.get_untracked(),
                preheader.get_untracked(),
                format.get_untracked().parse().unwrap_or_default(),
                body.get_untracked(),
            )
            .await
            .map(Some)
        },
    );
    view! {
        <div class="mt-2">
            <button type="button" class="btn-secondary" aria-expanded=move || open.get().to_string()
                aria-controls=format!("step-{i}-preview") on:click=move |_| open.update(|o| *o = !*o)>
                {move || if open.get() { "Hide the preview" } else { "Preview this mail" }}
            </button>
            <div id=format!("step-{i}-preview") class="mt-3" class:hidden=move || !open.get() data-testid="step-preview">
                <div class="mb-2 flex flex-wrap items-center justify-between gap-2">
                    <PreviewModeTabs mode=mode/>
                    <span class="text-xs text-slate-500">"As a sample reader; {{ event.* }} is empty here."</span>
                </div>
                <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Rendering…"</p> }>
                    {move || Suspend::new(async move {
                        match preview.await {
                            Ok(Some(p)) => view! { <PreviewBody p=p mode=mode mark=Some(mark)/> }.into_any(),
                            Ok(None) => ().into_any(),
                            Err(e) => view! { <LoadError error=e/> }.into_any(),
                        }
                    })}
                </Transition>
            </div>
        </div>
    }
}
