//! `/transactional/templates/:id` (`new` for a new one): edit a transactional template, preview
//! it with sample variables, and save a new version. Template mistakes are shown with their
//! place before anything is saved; a variable the sample lacks is an error here just as it is a
//! 422 for an API request.

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map};
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf, PageHeader};
use crate::error::AppError;
use herald_types::{RenderedMessage, TemplateId, TemplateInput, TemplateVersion};
use leptos::server_fn::codec::Json;

/// The editor's starting point: the current version (or the starter for a new template).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TemplateEditView {
    pub template: TemplateInput,
    /// 0 for a new template.
    pub version: i32,
    pub versions: Vec<TemplateVersion>,
    pub can_edit: bool,
}

#[cfg(feature = "ssr")]
const STARTER_HTML: &str = "<p>Hi {{ name }},</p>\n<p>Reset your password with <a href=\"{{ reset_url }}\">this link</a>. It works for one hour.</p>";

#[server(prefix = "/rpc", endpoint = "tx_template_view")]
pub async fn tx_template_view(id: String) -> Result<TemplateEditView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::transactional::templates;
    let m = require_role(Role::Viewer).await?;
    let can_edit = m.role.can_author();
    if id == "new" {
        let template = TemplateInput {
            subject: "Reset your password, {{ name }}".into(),
            html: STARTER_HTML.into(),
            sample: serde_json::json!({ "name": "Ada", "reset_url": "https://example.com/reset?token=abc" }),
            ..Default::default()
        };
        return Ok(TemplateEditView { template, version: 0, versions: Vec::new(), can_edit });
    }
    let id: TemplateId = id.parse().map_err(|_| AppError::NotFound.respond())?;
    let t = templates::find(&m.state.db, m.tenant, &id.to_string()).await?;
    let versions = templates::versions(&m.state.db, m.tenant, id).await?;
    Ok(TemplateEditView { template: t.input(), version: t.version, versions, can_edit })
}

/// Renders unsaved sources with the sample variables. JSON in, so the sample keeps its types.
#[server(prefix = "/rpc", endpoint = "preview_tx_template", input = Json)]
pub async fn preview_tx_template(template: TemplateInput) -> Result<RenderedMessage, AppError> {
    use crate::ssr::{count_preview, require_role};
    use herald_engine::Role;
    use herald_engine::transactional::templates;
    let m = require_role(Role::Viewer).await?;
    count_preview(&m)?;
    Ok(templates::preview(m.tenant, &template.subject, &template.html, &template.text_body, &template.sample).await?)
}

/// Saves a new template (`id` is `new`) or a new version; returns the template's id.
#[server(prefix = "/rpc", endpoint = "save_tx_template", input = Json)]
pub async fn save_tx_template(id: String, template: TemplateInput) -> Result<TemplateId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::transactional::templates;
    let m = require_role(Role::Author).await?;
    // The preview's rule holds for saving too: the sample must render.
    templates::preview(m.tenant, &template.subject, &template.html, &template.text_body, &template.sample).await?;
    let t = if id == "new" {
        templates::create(&m.state.db, m.tenant, m.role, &template).await?
    } else {
        let id: TemplateId = id.parse().map_err(|_| AppError::NotFound.respond())?;
        templates::update(&m.state.db, m.tenant, m.role, id, &template).await?
    };
    Ok(t.id)
}

/// The sample variables as typed: a JSON object, or the message to show beside the field.
fn parse_sample(raw: &str) -> Result<serde_json::Value, String> {
    let raw = if raw.trim().is_empty() { "{}" } else { raw };
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err("The sample variables must be a JSON object, like {\"name\": \"Ada\"}.".into()),
        Err(e) => Err(format!("The sample variables are not valid JSON: {e}")),
    }
}

#[component]
pub fn TxTemplatePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let data = Resource::new(id, tx_template_view);
    view! {
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <Editor v=v id=id()/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Editor(v: TemplateEditView, id: String) -> impl IntoView {
    let form = RwSignal::new(v.template.clone());
    let sample_text = RwSignal::new(serde_json::to_string_pretty(&v.template.sample).unwrap_or_else(|_| "{}".into()));
    let sample_error = RwSignal::new(None::<String>);
    // The form with its sample parsed, or nothing (and the message beside the field).
    let current = move || match parse_sample(&sample_text.get_untracked()) {
        Ok(sample) => {
            sample_error.set(None);
            Some(TemplateInput { sample, ..form.get_untracked() })
        }
        Err(message) => {
            sample_error.set(Some(message));
            None
        }
    };
    let preview = ServerAction::<PreviewTxTemplate>::new();
    let save = ServerAction::<SaveTxTemplate>::new();
    let is_new = id == "new";
    let saved_id = id.clone();
    // A new template's page becomes its own page once saved; saving again is a new version.
    Effect::new(move |_| {
        if let Some(Ok(new_id)) = save.value().get()
            && is_new
        {
            use_navigate()(&format!("/transactional/templates/{new_id}"), Default::default());
        }
    });
    let title = if is_new { "New template".to_string() } else { v.template.name.clone() };
    let subtitle = if is_new {
        "Transactional template".to_string()
    } else {
        format!("Transactional template · version {}", v.version)
    };
    let field = move |get: fn(&TemplateInput) -> String, set: fn(&mut TemplateInput, String)| {
        (move || get(&form.read()), move |ev| form.update(|f| set(f, event_target_value(&ev))))
    };
    let (name, set_name) = field(|f| f.name.clone(), |f, v| f.name = v);
    let (description, set_description) = field(|f| f.description.clone(), |f, v| f.description = v);
    let (from_name, set_from_name) = field(|f| f.from_name.clone(), |f, v| f.from_name = v);
    let (from_email, set_from_email) = field(|f| f.from_email.clone(), |f, v| f.from_email = v);
    let (subject, set_subject) = field(|f| f.subject.clone(), |f, v| f.subject = v);
    let (html, set_html) = field(|f| f.html.clone(), |f, v| f.html = v);
    let (text, set_text) = field(|f| f.text_body.clone(), |f, v| f.text_body = v);
    let can_edit = v.can_edit;
    view! {
        <PageHeader title=title subtitle=subtitle/>
        <a href="/transactional/templates" class="mb-4 inline-block text-sm text-indigo-600 hover:underline">"← Templates"</a>
        <div class="grid gap-6 lg:grid-cols-2">
            <Card title="Template">
                <div class="space-y-3 text-sm">
                    <label class="block">"Name (what the API names)"
                        <input class="input mt-1 font-mono" name="name" required placeholder="password-reset"
                            prop:value=name on:input=set_name/></label>
                    <label class="block">"Description"
                        <input class="input mt-1" name="description" prop:value=description on:input=set_description/></label>
                    <div class="grid grid-cols-2 gap-3">
                        <label class="block">"Sender name"
                            <input class="input mt-1" name="from_name" prop:value=from_name on:input=set_from_name/></label>
                        <label class="block">"Sender address"
                            <input class="input mt-1" name="from_email" type="email" placeholder="Workspace default"
                                prop:value=from_email on:input=set_from_email/></label>
                    </div>
                    <label class="block">"Subject"
                        <input class="input mt-1" name="subject" required prop:value=subject on:input=set_subject/></label>
                    <label class="block">"HTML body"
                        <textarea class="input mt-1 font-mono text-xs" name="html" rows="8" prop:value=html on:input=set_html></textarea></label>
                    <label class="block">"Text body (optional: made from the HTML when empty)"
                        <textarea class="input mt-1 font-mono text-xs" name="text_body" rows="4" prop:value=text on:input=set_text></textarea></label>
                    <label class="block">"Sample variables (JSON)"
                        <textarea class="input mt-1 font-mono text-xs" name="sample" rows="5" prop:value=move || sample_text.get()
                            aria-invalid=move || sample_error.with(Option::is_some).to_string()
                            on:input=move |ev| sample_text.set(event_target_value(&ev))></textarea></label>
                    {move || sample_error.get().map(|m| view! { <p class="text-xs text-red-600" role="alert" data-testid="sample-error">{m}</p> })}
                    <p class="text-xs text-slate-500">"Variables are strict: a request that lacks one the template uses is refused (422) instead of sending a gap."</p>
                    <div class="flex gap-2">
                        <button type="button" class="btn-secondary" data-testid="preview-template"
                            on:click=move |_| { if let Some(template) = current() { preview.dispatch(PreviewTxTemplate { template }); } }>"Preview"</button>
                        {can_edit.then(|| view! {
                            <button type="button" class="btn-primary" data-testid="save-template"
                                on:click=move |_| { if let Some(template) = current() { save.dispatch(SaveTxTemplate { id: saved_id.clone(), template }); } }>
                                {if is_new { "Create template" } else { "Save new version" }}</button>
                        })}
                    </div>
                    <ActionError value=save.value()/>
                    <p class="text-sm text-emerald-700" role="status" data-testid="template-saved">
                        {move || (save.value().get().is_some_and(|r| r.is_ok()) && !is_new).then_some("Saved as a new version.")}
                    </p>
                </div>
            </Card>
            <div>
                <Card title="Preview">
                    <ActionError value=preview.value()/>
                    {move || match preview.value().get() {
                        Some(Ok(p)) => view! {
                            <p class="mb-2 text-sm"><span class="text-slate-500">"Subject: "</span>
                                <strong data-testid="preview-subject">{p.subject}</strong></p>
                            <iframe title="Template preview" sandbox="" srcdoc=p.html class="h-72 w-full rounded border border-slate-200"></iframe>
                            <pre class="mt-3 whitespace-pre-wrap rounded bg-slate-50 p-3 text-xs">{p.text}</pre>
                        }.into_any(),
                        _ => view! { <p class="text-sm text-slate-500">"Preview renders the template with the sample variables."</p> }.into_any(),
                    }}
                </Card>
                {(!v.versions.is_empty()).then(|| view! {
                    <Card title="Versions">
                        <ul class="space-y-1 text-sm" data-testid="template-versions">
                            {v.versions.iter().map(|version| view! {
                                <li class="flex gap-3"><span class="w-10 font-mono">{format!("v{}", version.version)}</span>
                                    <span class="flex-1 truncate">{version.subject.clone()}</span>
                                    <span class="text-slate-500"><LocalTimeOf at=version.created_at/></span></li>
                            }).collect_view()}
                        </ul>
                        <p class="mt-2 text-xs text-slate-500">"Queued messages keep the version they were made from."</p>
                    </Card>
                })}
            </div>
        </div>
    }
}
