//! `/audience/fields`: the workspace's custom reader fields. Add one with a label, a
//! key for merge tags and a type; change its label and choices; delete it with its values.
//! Readers' values are edited on the reader page, set by the API and imported from CSV columns.

use herald_types::{Field, FieldKind};
use leptos::prelude::*;

use crate::components::ui::{ActionError, Card, ConfirmDialog, EmptyState, LoadError};
use crate::error::AppError;
use crate::pages::audience::AudienceTabs;

#[server(prefix = "/rpc", endpoint = "list_fields")]
pub async fn list_fields() -> Result<Vec<Field>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::fields};
    let m = require_role(Role::Viewer).await?;
    Ok(fields::list(&m.state.db, m.tenant).await?)
}

/// `choices`: one per line (for a choice field).
#[server(prefix = "/rpc", endpoint = "create_field")]
pub async fn create_field(
    label: String,
    key: String,
    kind: FieldKind,
    #[server(default)] choices: String,
) -> Result<Field, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::fields};
    let m = require_role(Role::Author).await?;
    let key = if key.trim().is_empty() { herald_types::field::suggest_key(&label) } else { key.trim().to_string() };
    let input = herald_types::FieldInput { key, label, kind, choices: lines(&choices) };
    Ok(fields::create(&m.state.db, m.tenant, m.role, &input).await?)
}

#[server(prefix = "/rpc", endpoint = "update_field")]
pub async fn update_field(
    key: String,
    label: String,
    kind: FieldKind,
    #[server(default)] choices: String,
) -> Result<Field, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::fields};
    let m = require_role(Role::Author).await?;
    let input = herald_types::FieldInput { key: key.clone(), label, kind, choices: lines(&choices) };
    Ok(fields::update(&m.state.db, m.tenant, m.role, &key, &input).await?)
}

#[server(prefix = "/rpc", endpoint = "delete_field")]
pub async fn delete_field(key: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::fields};
    let m = require_role(Role::Author).await?;
    fields::delete(&m.state.db, m.tenant, m.role, &key).await?;
    Ok(())
}

/// Non-empty lines, trimmed.
pub fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// The message a failed action has for `field`, shown beside it.
pub fn error_for<T, S>(
    value: S,
    field: impl Into<String>,
) -> impl Fn() -> Option<String> + Clone + Send + Sync + 'static
where
    T: Clone + Send + Sync + 'static,
    S: Get<Value = Option<Result<T, AppError>>> + Clone + Send + Sync + 'static,
{
    let field = field.into();
    move || match value.get() {
        Some(Err(AppError::Invalid(e))) => {
            e.errors.iter().find(|e| e.field.as_deref() == Some(field.as_str())).map(|e| e.message.clone())
        }
        _ => None,
    }
}

#[component]
pub fn FieldsPage() -> impl IntoView {
    let create = ServerAction::<CreateField>::new();
    let update = ServerAction::<UpdateField>::new();
    let delete = ServerAction::<DeleteField>::new();
    let fields = Resource::new(
        move || (create.version().get(), update.version().get(), delete.version().get()),
        |_| list_fields(),
    );
    view! {
        <AudienceTabs active="/audience/fields"/>
        <NewField create=create/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match fields.await {
                    Ok(list) if list.is_empty() => view! {
                        <EmptyState title="No custom fields yet"
                            body="Fields hold what you know about each reader — a plan, a birthday, a city — typed, so imports and the API cannot put text where a number belongs. Use them in mail as {{ reader.fields.<key> }}."/>
                    }.into_any(),
                    Ok(list) => view! {
                        <Card title="Fields">
                            <ActionError value=update.value()/>
                            <ActionError value=delete.value()/>
                            <ul class="divide-y divide-slate-100" data-testid="fields-list">
                                {list.into_iter().map(|f| view! { <FieldRow field=f update=update delete=delete/> }).collect_view()}
                            </ul>
                        </Card>
                    }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The "add a field" form, on the fields page and beside an import's column mapping (where the
/// new field is offered in every column's choices as soon as it exists).
#[component]
pub fn NewField(
    create: ServerAction<CreateField>,
    #[prop(optional, into)] title: Option<String>,
    #[prop(optional)] hint: &'static str,
) -> impl IntoView {
    let kind = RwSignal::new(FieldKind::Text.as_str().to_string());
    let label_error = error_for(create.value(), "label");
    let key_error = error_for(create.value(), "key");
    let choices_error = error_for(create.value(), "choices");
    view! {
        <Card title=title.unwrap_or_else(|| "Add a field".into())>
            {(!hint.is_empty()).then(|| view! { <p class="mb-3 text-sm text-slate-600">{hint}</p> })}
            <ActionForm action=create attr:class="grid gap-3 sm:grid-cols-2">
                <div>
                    <label for="field-label" class="label">"Label"</label>
                    <input id="field-label" name="label" class="input" maxlength="60" required placeholder="Plan"/>
                    <p class="mt-1 text-xs text-red-600" role="alert">{label_error}</p>
                </div>
                <div>
                    <label for="field-key" class="label">"Key"</label>
                    <input id="field-key" name="key" class="input font-mono text-xs" maxlength="40" placeholder="made from the label"/>
                    <p class="mt-1 text-xs text-slate-500">"In mail: {{ reader.fields.key }}. Lowercase letters, digits and _."</p>
                    <p class="mt-1 text-xs text-red-600" role="alert">{key_error}</p>
                </div>
                <div>
                    <label for="field-kind" class="label">"Type"</label>
                    <select id="field-kind" name="kind" class="input" on:change=move |ev| kind.set(event_target_value(&ev))>
                        {FieldKind::ALL.iter().map(|k| view! { <option value=k.as_str()>{k.label()}</option> }).collect_view()}
                    </select>
                </div>
                <Show when=move || kind.get() == FieldKind::Choice.as_str()>
                    <div>
                        <label for="field-choices" class="label">"Choices, one per line"</label>
                        <textarea id="field-choices" name="choices" rows="3" class="input" placeholder="Free\nPro"></textarea>
                        <p class="mt-1 text-xs text-red-600" role="alert">{choices_error.clone()}</p>
                    </div>
                </Show>
                <div class="sm:col-span-2">
                    <button type="submit" class="btn-primary" disabled=move || create.pending().get()>"Add field"</button>
                </div>
            </ActionForm>
            {move || match create.value().get() {
                Some(Err(AppError::Invalid(_))) | None | Some(Ok(_)) => None,
                Some(Err(e)) => Some(view! { <p role="alert" class="mt-3 text-sm text-red-700">{e.to_string()}</p> }),
            }}
        </Card>
    }
}

#[component]
fn FieldRow(field: Field, update: ServerAction<UpdateField>, delete: ServerAction<DeleteField>) -> impl IntoView {
    let editing = RwSignal::new(false);
    let confirm = RwSignal::new(false);
    let f = StoredValue::new(field.clone());
    let key = field.key.clone();
    view! {
        <li class="py-3" data-testid="field-row">
            <div class="flex flex-wrap items-center justify-between gap-3">
                <div class="min-w-0">
                    <span class="font-medium wrap-anywhere text-slate-800" data-testid="field-label">{field.label.clone()}</span>
                    <span class="badge ml-2">{field.kind.label()}</span>
                    <code class="ml-2 text-xs text-slate-500">{format!("{{{{ reader.fields.{} }}}}", field.key)}</code>
                    {(!field.choices.is_empty()).then(|| view! { <p class="mt-1 text-xs text-slate-500">{field.choices.join(" · ")}</p> })}
                </div>
                <div class="flex gap-2">
                    <button type="button" class="btn-secondary" aria-label=format!("Edit {}", field.label) on:click=move |_| editing.update(|e| *e = !*e)>"Edit"</button>
                    <button type="button" class="btn-secondary text-red-600" aria-label=format!("Delete {}", field.label) on:click=move |_| confirm.set(true)>"Delete"</button>
                </div>
            </div>
            <Show when=move || editing.get()>
                <ActionForm action=update attr:class="mt-3 flex flex-wrap items-end gap-3">
                    <input type="hidden" name="key" value=f.with_value(|f| f.key.clone())/>
                    <input type="hidden" name="kind" value=f.with_value(|f| f.kind.as_str())/>
                    <div>
                        <label for=format!("label-{}", f.with_value(|f| f.key.clone())) class="label">"Label"</label>
                        <input id=format!("label-{}", f.with_value(|f| f.key.clone())) name="label" class="input" maxlength="60" required value=f.with_value(|f| f.label.clone())/>
                    </div>
                    {f.with_value(|f| f.kind == FieldKind::Choice).then(|| view! {
                        <div>
                            <label for=format!("choices-{}", f.with_value(|f| f.key.clone())) class="label">"Choices, one per line"</label>
                            <textarea id=format!("choices-{}", f.with_value(|f| f.key.clone())) name="choices" rows="3" class="input">{f.with_value(|f| f.choices.join("\n"))}</textarea>
                        </div>
                    })}
                    <button type="submit" class="btn-primary">"Save"</button>
                </ActionForm>
            </Show>
            <ConfirmDialog open=confirm title=format!("Delete the field “{}”?", field.label) confirm_label="Delete field" danger=true
                on_confirm=Callback::new(move |()| { delete.dispatch(DeleteField { key: key.clone() }); })>
                <p class="text-sm text-slate-600">"Its value is removed from every reader. Mail that uses it renders nothing there."</p>
            </ConfirmDialog>
        </li>
    }
}
