//! `/campaigns/templates`: where a campaign can start. The starter layouts
//! (newsletter, announcement, plain letter) dressed in the workspace's brand, each with a
//! preview, and the author's saved templates ("Save as template" in the editor makes them).
//! Starting one makes a new draft with its content and opens it.

use herald_types::{
    CampaignId, CampaignTemplate, CampaignTemplateId, CampaignTemplateInput, CampaignTemplateSummary, Layout,
};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, ConfirmDialog, EmptyState, LoadError, LocalTimeOf, PageHeader};
use crate::error::AppError;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayoutCard {
    pub layout: Layout,
    pub name: String,
    pub description: String,
    /// The layout as a sample reader sees it, for the preview frame, or why it cannot render
    /// (a mistake in the brand's footer text).
    pub html: Result<String, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TemplatesView {
    pub layouts: Vec<LayoutCard>,
    pub templates: Vec<CampaignTemplateSummary>,
    pub can_create: bool,
}

#[server(prefix = "/rpc", endpoint = "campaign_templates")]
pub async fn campaign_templates() -> Result<TemplatesView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::campaigns::{brand, preview, templates};
    let m = require_role(Role::Viewer).await?;
    let mut layouts = Vec::new();
    for l in brand::layouts(&m.state.db, m.tenant).await? {
        let html = preview::preview_document(&m.state.db, &m.state.base_url, m.tenant, &l.body).await?;
        layouts.push(LayoutCard { layout: l.layout, name: l.name, description: l.description, html });
    }
    Ok(TemplatesView {
        layouts,
        templates: templates::list_templates(&m.state.db, m.tenant).await?,
        can_create: m.role.can_author(),
    })
}

/// A new draft from a starter layout or a saved template; opens its editor.
#[server(prefix = "/rpc", endpoint = "start_campaign")]
pub async fn start_campaign(
    layout: Option<Layout>,
    template: Option<CampaignTemplateId>,
) -> Result<CampaignId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::campaigns::store::{self, CampaignInput};
    use herald_engine::campaigns::templates::{self, Start};
    let m = require_role(Role::Author).await?;
    let start = match (template, layout) {
        (Some(id), _) => Start::Template(id),
        (None, Some(layout)) => Start::Layout(layout),
        (None, None) => Start::Blank,
    };
    let s = templates::start_document(&m.state.db, m.tenant, start).await?;
    let input = CampaignInput {
        name: s.name,
        subject: s.subject,
        preheader: s.preheader,
        body_format: s.body_format,
        body: s.body,
        ..Default::default()
    };
    let c = store::create(&m.state.db, m.tenant, m.role, &input).await?;
    leptos_axum::redirect(&format!("/campaigns/{}", c.id));
    Ok(c.id)
}

/// Saves what the editor shows as a template (it need not be saved as a campaign first).
#[server(prefix = "/rpc", endpoint = "save_campaign_template")]
pub async fn save_campaign_template(input: CampaignTemplateInput) -> Result<CampaignTemplate, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::templates};
    let m = require_role(Role::Author).await?;
    Ok(templates::create_template(&m.state.db, m.tenant, m.role, &input).await?)
}

#[server(prefix = "/rpc", endpoint = "delete_campaign_template")]
pub async fn delete_campaign_template(id: CampaignTemplateId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::templates};
    let m = require_role(Role::Author).await?;
    Ok(templates::delete_template(&m.state.db, m.tenant, m.role, id).await?)
}

#[component]
pub fn CampaignTemplatesPage() -> impl IntoView {
    let start = ServerAction::<StartCampaign>::new();
    let delete = ServerAction::<DeleteCampaignTemplate>::new();
    let data = Resource::new(move || delete.version().get(), |_| campaign_templates());
    view! {
        <PageHeader title="Templates" subtitle="Start a campaign from a layout in your brand, or from one of your own"/>
        <p class="mb-6 text-sm text-slate-600">
            "The layouts use your "<a href="/settings/brand" class="text-indigo-600 hover:underline">"brand"</a>
            ": logo, colours, font and footer. "<a href="/campaigns" class="text-indigo-600 hover:underline">"Back to campaigns"</a>
        </p>
        <ActionError value=start.value()/>
        <ActionError value=delete.value()/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <Layouts v=v start=start delete=delete/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Layouts(
    v: TemplatesView,
    start: ServerAction<StartCampaign>,
    delete: ServerAction<DeleteCampaignTemplate>,
) -> impl IntoView {
    let can_create = v.can_create;
    view! {
        <h2 class="mb-3 text-lg font-medium text-slate-900">"Layouts"</h2>
        <ul class="mb-10 grid gap-4 md:grid-cols-2 xl:grid-cols-3" data-testid="layouts">
            {v.layouts.into_iter().map(|l| view! {
                <li class="flex flex-col overflow-hidden rounded-xl border border-slate-200 bg-white">
                    {match l.html {
                        // The frame is a picture of the mail: it takes no focus and no clicks.
                        Ok(html) => view! {
                            <iframe title=format!("{} preview", l.name) srcdoc=html sandbox="" tabindex="-1"
                                class="pointer-events-none h-72 w-full border-b border-slate-200 bg-slate-50"></iframe>
                        }.into_any(),
                        Err(problem) => view! {
                            <p class="h-72 border-b border-slate-200 bg-red-50 p-4 text-sm text-red-700" role="alert">
                                {problem}" Fix it in "<a href="/settings/brand" class="underline">"the brand"</a>"."
                            </p>
                        }.into_any(),
                    }}
                    <div class="flex flex-1 flex-col gap-2 p-4">
                        <h3 class="font-medium text-slate-900">{l.name.clone()}</h3>
                        <p class="flex-1 text-sm text-slate-600">{l.description}</p>
                        {can_create.then(|| view! {
                            <ActionForm action=start>
                                <input type="hidden" name="layout" value=l.layout.as_str()/>
                                <button type="submit" class="btn-primary w-full min-h-11" disabled=move || start.pending().get()
                                    aria-label=format!("Start a campaign from the {} layout", l.name)>"Use this layout"</button>
                            </ActionForm>
                        })}
                    </div>
                </li>
            }).collect_view()}
        </ul>
        <h2 class="mb-3 text-lg font-medium text-slate-900">"Your templates"</h2>
        {if v.templates.is_empty() {
            view! {
                <EmptyState title="No templates yet"
                    body="In the campaign editor, “Save as template” keeps a campaign's subject and content here, to start the next one from."/>
            }.into_any()
        } else {
            view! {
                <ul class="divide-y divide-slate-200 rounded-xl border border-slate-200 bg-white" data-testid="saved-templates">
                    {v.templates.into_iter().map(|t| view! { <TemplateRow t=t can_create=can_create start=start delete=delete/> }).collect_view()}
                </ul>
            }.into_any()
        }}
    }
}

#[component]
fn TemplateRow(
    t: CampaignTemplateSummary,
    can_create: bool,
    start: ServerAction<StartCampaign>,
    delete: ServerAction<DeleteCampaignTemplate>,
) -> impl IntoView {
    let confirm = RwSignal::new(false);
    let id = t.id;
    let name = t.name.clone();
    let (use_label, delete_label) = (format!("Start a campaign from {name}"), format!("Delete {name}"));
    view! {
        <li class="flex flex-wrap items-center gap-3 px-4 py-3">
            <div class="min-w-0 flex-1">
                <p class="truncate font-medium text-slate-900" title=t.name.clone()>{t.name.clone()}</p>
                <p class="truncate text-sm text-slate-500">
                    {if t.subject.is_empty() { "No subject".to_string() } else { t.subject.clone() }}
                    " · "{t.body_format.label()}" · saved "<LocalTimeOf at=t.updated_at/>
                </p>
            </div>
            {can_create.then(|| view! {
                <ActionForm action=start>
                    <input type="hidden" name="template" value=id.to_string()/>
                    <button type="submit" class="btn-primary min-h-11" aria-label=use_label>"Use"</button>
                </ActionForm>
                <button type="button" class="btn-secondary min-h-11" aria-label=delete_label
                    on:click=move |_| confirm.set(true)>"Delete"</button>
                <ConfirmDialog open=confirm title=format!("Delete “{name}”?") confirm_label="Delete template" danger=true
                    on_confirm=Callback::new(move |()| { delete.dispatch(DeleteCampaignTemplate { id }); })>
                    "Campaigns started from it keep their content."
                </ConfirmDialog>
            })}
        </li>
    }
}

/// "Save as template" in the editor: the subject, preheader and content as shown, under a name.
#[component]
pub fn SaveAsTemplatePanel(form: super::editor_form::Form) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let save = Action::new(|input: &CampaignTemplateInput| save_campaign_template(input.clone()));
    let problem = move || match save.value().get() {
        Some(Err(AppError::Invalid(invalid))) => Some(invalid.to_string()),
        Some(Err(other)) => Some(other.to_string()),
        _ => None,
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let fallback = form.name.get_untracked();
        let chosen = name.get_untracked();
        save.dispatch(CampaignTemplateInput {
            name: if chosen.trim().is_empty() { fallback } else { chosen },
            subject: form.subject.get_untracked(),
            preheader: form.preheader.get_untracked(),
            body_format: form.body_format.get_untracked().parse().unwrap_or_default(),
            body: form.body.get_untracked(),
        });
    };
    view! {
        <section class="mb-6 rounded-xl border border-slate-200 bg-white p-6 shadow-sm" aria-labelledby="save-template-title">
            <h2 id="save-template-title" class="mb-3 text-lg font-medium text-slate-900">"Save as template"</h2>
            <form class="flex flex-wrap items-end gap-2" on:submit=submit>
                <div class="min-w-[120px] flex-1">
                    <label for="template-name" class="label">"Template name"</label>
                    <input id="template-name" class="input" maxlength="100" autocomplete="off"
                        placeholder=move || form.name.get()
                        prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))
                        aria-describedby="template-name-error"/>
                </div>
                <button type="submit" class="btn-secondary min-h-11" disabled=move || save.pending().get()>"Save as template"</button>
            </form>
            <p id="template-name-error" class="mt-1 text-xs text-red-600" role="alert">{problem}</p>
            {move || matches!(save.value().get(), Some(Ok(_))).then(|| view! {
                <p class="mt-2 text-sm text-emerald-700" role="status">
                    "Saved. It is under “Your templates” in "
                    <a href="/campaigns/templates" class="font-medium underline">"Templates"</a>"."
                </p>
            })}
        </section>
    }
}
