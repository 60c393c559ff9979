//! `/audience/readers/:id`: one reader: attributes editor, subscriptions, consent history, data
//! export and erasure.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf, url_encode};
use crate::error::AppError;
use crate::pages::audience::AudienceTabs;
use herald_types::{ConsentEvent, ReaderEvent, ReaderStatus, Subscription};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReaderView {
    pub id: i64,
    pub email: String,
    pub name: String,
    /// The workspace's custom fields with this reader's value of each (as a form shows it).
    pub fields: Vec<(herald_types::Field, String)>,
    /// Attributes that are no field, as JSON.
    pub attributes_json: String,
    pub status: ReaderStatus,
    pub suppressed: Option<herald_types::SuppressionReason>,
    pub subscriptions: Vec<Subscription>,
    pub tags: Vec<String>,
    pub consent: Vec<ConsentEvent>,
    pub activity: Vec<ReaderEvent>,
    /// Their runs through automations, each with its path.
    pub automations: Vec<herald_types::Run>,
    pub export_json: String,
    pub can_edit: bool,
    pub can_erase: bool,
}

#[server(prefix = "/rpc", endpoint = "get_reader")]
pub async fn get_reader(id: i64) -> Result<ReaderView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::readers};
    let m = require_role(Role::Viewer).await?;
    let d = readers::detail(&m.state.db, m.tenant, id).await?;
    let export = readers::export(&m.state.db, m.tenant, id).await?;
    let activity = herald_engine::campaigns::stats::reader_events(&m.state.db, m.tenant, id).await?;
    let tags = herald_engine::audience::tags::of_reader(&m.state.db, m.tenant, id).await?;
    let automations = herald_engine::automations::report::reader_runs(&m.state.db, m.tenant, id).await?;
    let defined = herald_engine::audience::fields::list(&m.state.db, m.tenant).await?;
    let mut others = d.reader.attributes.as_object().cloned().unwrap_or_default();
    let fields = defined
        .into_iter()
        .map(|f| {
            let value = others.remove(&f.key).map(|v| f.display(&v)).unwrap_or_default();
            (f, value)
        })
        .collect();
    Ok(ReaderView {
        id: d.reader.id,
        email: d.reader.email,
        name: d.reader.name,
        fields,
        attributes_json: serde_json::to_string_pretty(&others).unwrap_or_default(),
        status: d.reader.status,
        suppressed: d.suppressed,
        subscriptions: d.subscriptions,
        tags,
        consent: d.consent,
        activity,
        automations,
        export_json: serde_json::to_string_pretty(&export).unwrap_or_default(),
        can_edit: m.role.can_author(),
        can_erase: m.role.can_administer(),
    })
}

/// `values`: the custom fields' values as typed (`values[plan]=Pro`; empty clears one), each
/// checked against its field's type (errors keyed `attributes.<key>`); `attributes`: the other
/// attributes, as a JSON object.
#[server(prefix = "/rpc", endpoint = "update_reader")]
pub async fn update_reader(
    id: i64,
    name: String,
    attributes: String,
    #[server(default)] values: std::collections::BTreeMap<String, String>,
) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::consent::Origin, audience::fields, audience::readers};
    let m = require_role(Role::Author).await?;
    let mut attributes: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(if attributes.trim().is_empty() { "{}" } else { &attributes })
            .map_err(|e| AppError::invalid(format!("The attributes are not valid JSON: {e}")).respond())?;
    let defined = fields::list(&m.state.db, m.tenant).await?;
    let mut problems = herald_types::Problems::default();
    for (key, raw) in &values {
        let Some(field) = defined.iter().find(|f| &f.key == key) else { continue };
        match field.parse_text(raw) {
            Ok(Some(v)) => {
                attributes.insert(key.clone(), v);
            }
            Ok(None) => {
                attributes.remove(key);
            }
            Err(why) => problems.add(&format!("attributes.{key}"), why),
        }
    }
    problems.into_result()?;
    let attributes = serde_json::Value::Object(attributes);
    readers::update(&m.state.db, m.tenant, m.role, id, &name, attributes, &Origin::new("admin")).await?;
    Ok(())
}

/// Adds tags (comma-separated names; new ones become tags).
#[server(prefix = "/rpc", endpoint = "add_reader_tags")]
pub async fn add_reader_tags(id: i64, tags: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::tags as t};
    let m = require_role(Role::Author).await?;
    let names: Vec<String> = tags.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect();
    t::add_to_reader(&m.state.db, m.tenant, m.role, id, &names).await?;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "remove_reader_tag")]
pub async fn remove_reader_tag(id: i64, tag: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::tags as t};
    let m = require_role(Role::Author).await?;
    t::remove_from_reader(&m.state.db, m.tenant, m.role, id, &[tag]).await?;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "erase_reader")]
pub async fn erase_reader(id: i64) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::readers};
    let m = require_role(Role::Admin).await?;
    readers::erase(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::ReaderErased, id, serde_json::json!({})).await;
    leptos_axum::redirect("/audience/readers");
    Ok(())
}

#[component]
pub fn ReaderPage() -> impl IntoView {
    let id = move || use_params_map().with(|p| p.get("id")).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    let save = ServerAction::<UpdateReader>::new();
    let erase = ServerAction::<EraseReader>::new();
    let tag = ServerAction::<AddReaderTags>::new();
    let untag = ServerAction::<RemoveReaderTag>::new();
    // Reloaded after a save that worked only: a refused one keeps what was typed in the form
    // (its errors show beside the fields), instead of putting the stored values back.
    let saved = Memo::new(move |before: Option<&u32>| {
        let before = before.copied().unwrap_or(0);
        if matches!(save.value().get(), Some(Ok(()))) { before + 1 } else { before }
    });
    let data = Resource::new(
        move || (id(), saved.get(), tag.version().get(), untag.version().get()),
        |(id, ..)| get_reader(id),
    );
    let known_tags = Resource::new(move || tag.version().get(), |_| crate::pages::audience::tags::list_tags());
    view! {
        <AudienceTabs active="/audience/readers"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(r) => view! { <ReaderBody r=r save=save erase=erase tag=tag untag=untag known_tags=known_tags/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ReaderBody(
    r: ReaderView,
    save: ServerAction<UpdateReader>,
    erase: ServerAction<EraseReader>,
    tag: ServerAction<AddReaderTags>,
    untag: ServerAction<RemoveReaderTag>,
    known_tags: Resource<Result<Vec<herald_types::Tag>, AppError>>,
) -> impl IntoView {
    let ro = !r.can_edit;
    let download = format!("data:application/json;charset=utf-8,{}", url_encode(&r.export_json));
    let file_name = format!("reader-{}.json", r.id);
    let confirm_erase = RwSignal::new(false);
    view! {
        <div class="mb-4 flex flex-wrap items-center justify-between gap-3">
            <div class="min-w-0">
                <h2 class="text-xl font-semibold wrap-anywhere text-slate-900" data-testid="reader-email">{r.email.clone()}</h2>
                <p class="text-sm text-slate-500"><span class="badge">{r.status.as_str()}</span>
                    {r.suppressed.map(|s| view! { <span class="badge ml-2 bg-red-50 text-red-700">"suppressed: " {s.label()}</span> })}</p>
            </div>
            <a href=download download=file_name class="btn-secondary">"Export data (JSON)"</a>
        </div>
        <div class="grid grid-cols-2 gap-6">
            <Card title="Profile">
                <ActionForm action=save attr:class="space-y-3">
                    <input type="hidden" name="id" value=r.id/>
                    <div><label for="r-name" class="label">"Name"</label><input id="r-name" name="name" class="input" value=r.name.clone() disabled=ro/></div>
                    {r.fields.iter().cloned().map(|(f, value)| view! { <FieldInput field=f value=value save=save ro=ro/> }).collect_view()}
                    <p class="text-xs text-slate-500">
                        <a href="/audience/fields" class="text-indigo-600 hover:underline">"Custom fields"</a>
                        " are typed and show here one by one."
                    </p>
                    <div>
                        <label for="r-attrs" class="label">"Other attributes (JSON object)"</label>
                        <textarea id="r-attrs" name="attributes" rows="4" class="input font-mono text-xs" disabled=ro>{r.attributes_json.clone()}</textarea>
                    </div>
                    {(!ro).then(|| view! { <button type="submit" class="btn-primary">"Save"</button> })}
                    <ActionError value=save.value()/>
                </ActionForm>
            </Card>
            <Card title="Tags">
                <ul class="flex flex-wrap gap-2" data-testid="reader-tags">
                    {r.tags.is_empty().then(|| view! { <li class="text-sm text-slate-500">"No tags."</li> })}
                    {r.tags.iter().cloned().map(|t| {
                        let (id, label) = (r.id, format!("Remove tag {t}"));
                        view! {
                            <li class="badge inline-flex max-w-full items-center gap-1 break-all normal-case" data-testid="reader-tag">
                                {t.clone()}
                                {(!ro).then(move || view! {
                                    <ActionForm action=untag attr:class="inline">
                                        <input type="hidden" name="id" value=id/>
                                        <input type="hidden" name="tag" value=t/>
                                        <button type="submit" class="-my-2 -mr-2 inline-flex w-11 items-center justify-center text-slate-500 hover:text-red-600" aria-label=label>"×"</button>
                                    </ActionForm>
                                })}
                            </li>
                        }
                    }).collect_view()}
                </ul>
                {(!ro).then(|| view! {
                    <ActionForm action=tag attr:class="mt-3 flex flex-wrap items-end gap-2">
                        <input type="hidden" name="id" value=r.id/>
                        <div class="min-w-40 flex-1">
                            <label for="r-tags" class="label">"Add tags"</label>
                            <input id="r-tags" name="tags" class="input" list="reader-known-tags" autocomplete="off"
                                placeholder="vip, early" required/>
                            <crate::pages::audience::TagOptions id="reader-known-tags" tags=known_tags/>
                        </div>
                        <button type="submit" class="btn-secondary">"Add"</button>
                    </ActionForm>
                })}
                <ActionError value=tag.value()/>
                <ActionError value=untag.value()/>
            </Card>
            <Card title="Subscriptions">
                {if r.subscriptions.is_empty() {
                    view! { <p class="text-sm text-slate-500">"Not on any list."</p> }.into_any()
                } else {
                    view! {
                        <ul class="divide-y divide-slate-100 text-sm" data-testid="subscriptions">
                            {r.subscriptions.into_iter().map(|s| view! {
                                <li class="flex justify-between gap-3 py-2"><span class="min-w-0 wrap-anywhere">{s.list_name.clone()}</span>
                                    <span class="shrink-0"><span class="badge">{s.status.as_str()}</span><span class="ml-2 text-xs text-slate-500"><LocalTimeOf at=s.since()/></span></span></li>
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }}
            </Card>
        </div>
        {(!r.automations.is_empty()).then(|| view! {
            <Card title="Automations">
                <ul class="divide-y divide-slate-100 text-sm" data-testid="reader-automations">
                    {r.automations.clone().into_iter().map(|run| {
                        let state = match run.state {
                            herald_types::RunState::Waiting => match run.due_at {
                                Some(due) => view! { "next step " <LocalTimeOf at=due/> }.into_any(),
                                None => "in it".into_any(),
                            },
                            herald_types::RunState::Finished => "finished".into_any(),
                            herald_types::RunState::Exited => format!("left: {}", run.exit_reason.clone().unwrap_or_default()).into_any(),
                        };
                        let path = if run.path.is_empty() {
                            "entered, no step done yet".into_any()
                        } else {
                            run.path.iter().enumerate().map(|(i, p)| view! {
                                {(i > 0).then_some(" → ")}{p.outcome.clone()}" "<LocalTimeOf at=p.at/>
                            }).collect_view().into_any()
                        };
                        view! {
                            <li class="py-2">
                                <a href=format!("/automations/{}", run.automation_id) class="font-medium text-indigo-700 hover:underline">{run.automation_name.clone()}</a>
                                <span class="ml-2 text-slate-600">{format!("(time {}) ", run.entry)}{state}</span>
                                <p class="text-xs text-slate-500 break-words">{path}</p>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            </Card>
        })}
        <Card title="Activity">
            {if r.activity.is_empty() {
                view! { <p class="text-sm text-slate-500">"No messages or events yet."</p> }.into_any()
            } else {
                view! {
                    <table class="w-full text-left text-xs" data-testid="reader-activity">
                        <thead class="uppercase text-slate-500"><tr><th class="py-1">"When"</th><th>"Event"</th><th>"Campaign"</th><th>"Detail"</th></tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {r.activity.into_iter().map(|e| view! {
                                <tr>
                                    <td class="py-1"><LocalTimeOf at=e.at/></td>
                                    <td>{e.kind.clone()}</td>
                                    <td>{match (e.campaign_id, e.campaign_name.clone()) {
                                        (Some(id), Some(name)) => view! { <a class="text-indigo-600 hover:underline" href=format!("/campaigns/{id}/stats")>{name}</a> }.into_any(),
                                        _ => view! { <span class="text-slate-500">"—"</span> }.into_any(),
                                    }}</td>
                                    <td class="max-w-xs truncate" title=e.summary().to_string()>{e.summary().to_string()}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </Card>
        <Card title="Consent history">
            <table class="w-full text-left text-xs">
                <thead class="uppercase text-slate-500"><tr><th class="py-1">"When"</th><th>"What"</th><th>"List"</th><th>"Source"</th><th>"IP"</th></tr></thead>
                <tbody class="divide-y divide-slate-100">
                    {r.consent.into_iter().map(|e| view! {
                        <tr title=e.wording.clone().unwrap_or_default()>
                            <td class="py-1"><LocalTimeOf at=e.created_at/></td><td>{e.action}</td><td>{e.list_name.unwrap_or_default()}</td>
                            <td>{e.source}</td><td>{e.ip.unwrap_or_default()}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </Card>
        {r.can_erase.then(|| view! {
            <Card title="Erase this reader">
                <p class="text-sm text-slate-500">"Removes their profile and subscriptions for good (GDPR erasure). If they are on the suppression list, that entry stays so they are never mailed again."</p>
                <label class="mt-3 flex items-center gap-2 text-sm"><input type="checkbox" on:change=move |ev| confirm_erase.set(event_target_checked(&ev))/>"I understand this cannot be undone"</label>
                <ActionForm action=erase attr:class="mt-3">
                    <input type="hidden" name="id" value=r.id/>
                    <button type="submit" class="btn-primary bg-red-600 hover:bg-red-700" disabled=move || !confirm_erase.get()>"Erase reader"</button>
                </ActionForm>
                <ActionError value=erase.value()/>
            </Card>
        })}
    }
}

/// One custom field's input, by its type, with its error beside it.
#[component]
fn FieldInput(field: herald_types::Field, value: String, save: ServerAction<UpdateReader>, ro: bool) -> impl IntoView {
    use herald_types::FieldKind;
    let id = format!("field-{}", field.key);
    let name = format!("values[{}]", field.key);
    let error = crate::pages::audience::fields::error_for(save.value(), format!("attributes.{}", field.key));
    let control = match field.kind {
        FieldKind::YesNo | FieldKind::Choice => {
            let options: Vec<String> = match field.kind {
                FieldKind::YesNo => vec!["yes".into(), "no".into()],
                _ => field.choices.clone(),
            };
            view! {
                <select id=id.clone() name=name class="input" disabled=ro>
                    <option value="" selected=value.is_empty()>"—"</option>
                    {options.into_iter().map(|o| { let (selected, label) = (o == value, o.clone()); view! { <option value=o selected=selected>{label}</option> } }).collect_view()}
                </select>
            }.into_any()
        }
        kind => {
            let input_type = match kind {
                FieldKind::Number => "text",
                FieldKind::Date => "date",
                _ => "text",
            };
            let inputmode = if kind == FieldKind::Number { "decimal" } else { "text" };
            view! { <input id=id.clone() name=name type=input_type inputmode=inputmode class="input" value=value disabled=ro/> }.into_any()
        }
    };
    view! {
        <div>
            <label for=id class="label">{field.label.clone()}</label>
            {control}
            <p class="mt-1 text-xs text-red-600" role="alert" data-testid=format!("field-error-{}", field.key)>{error}</p>
        </div>
    }
}
