//! `/audience/segments/:id` (`new` for a new one): the segment editor. Conditions are rows (and
//! groups of rows, one level deep); every change recounts the matching readers and lists the
//! newest of them, and a problem shows beside its condition, keyed as the engine keys it
//! (`rules.1.conditions.0.value`).

use herald_types::segment::{
    Condition, DateOp, Definition, FieldOp, Group, ListState, Match, Operands, Rule, SegmentReader, SignupSource,
};
use herald_types::{CampaignId, Field, FieldError, FieldKind, ListId, SegmentId, SegmentInput, TagId};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use leptos_router::hooks::{use_navigate, use_params_map};
use serde::{Deserialize, Serialize};

use crate::components::ui::{Card, LoadError};
use crate::error::AppError;
use crate::pages::audience::AudienceTabs;

/// What the editor offers to choose from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SegmentEditorData {
    pub segment: Option<herald_types::Segment>,
    pub lists: Vec<(ListId, String)>,
    pub tags: Vec<(TagId, String)>,
    pub fields: Vec<Field>,
    pub campaigns: Vec<(CampaignId, String)>,
    pub can_edit: bool,
}

/// The live count and the newest matching readers.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SegmentPreview {
    pub readers: i64,
    pub newest: Vec<SegmentReader>,
}

/// Names of the workspace's lists, tags and campaigns by id, for conditions in words.
#[cfg(feature = "ssr")]
pub struct Names(std::collections::HashMap<uuid::Uuid, String>);

#[cfg(feature = "ssr")]
impl Names {
    pub fn name(&self, id: uuid::Uuid) -> String {
        self.0.get(&id).map_or_else(|| "(deleted)".to_string(), |n| format!("“{n}”"))
    }
}

#[cfg(feature = "ssr")]
impl Names {
    pub fn of(v: &SegmentEditorData) -> Names {
        Names(
            v.lists
                .iter()
                .map(|(id, n)| (id.0, n.clone()))
                .chain(v.tags.iter().map(|(id, n)| (id.0, n.clone())))
                .chain(v.campaigns.iter().map(|(id, n)| (id.0, n.clone())))
                .collect(),
        )
    }
}

/// The workspace's lists, tags, fields and campaigns, as the editor offers them.
#[cfg(feature = "ssr")]
pub async fn choices(m: &crate::ssr::Member) -> Result<SegmentEditorData, AppError> {
    use herald_engine::audience::{fields, lists, tags};
    use herald_engine::campaigns::store;
    let db = &m.state.db;
    Ok(SegmentEditorData {
        segment: None,
        lists: lists::with_counts(db, m.tenant).await?.into_iter().map(|l| (l.list.id, l.list.name)).collect(),
        tags: tags::list(db, m.tenant).await?.into_iter().map(|t| (t.id, t.name)).collect(),
        fields: fields::list(db, m.tenant).await?,
        campaigns: store::list(db, m.tenant, 200).await?.into_iter().map(|c| (c.id, c.name)).collect(),
        can_edit: m.role.can_author(),
    })
}

#[server(prefix = "/rpc", endpoint = "segment_edit_view")]
pub async fn segment_edit_view(id: String) -> Result<SegmentEditorData, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::segments};
    let m = require_role(Role::Viewer).await?;
    let mut view = choices(&m).await?;
    if id != "new" {
        let id: SegmentId = id.parse().map_err(|_| AppError::NotFound.respond())?;
        view.segment = Some(segments::get(&m.state.db, m.tenant, id).await?);
    }
    Ok(view)
}

/// Counts a tree and lists its newest readers: the one being edited (`edited`), else the saved
/// segment's, else (a new segment) the editor's first condition. JSON in: the tree is nested.
#[server(prefix = "/rpc", endpoint = "preview_segment", input = Json)]
pub async fn preview_segment(id: String, edited: Option<Definition>) -> Result<SegmentPreview, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::segments};
    let m = require_role(Role::Viewer).await?;
    let definition = match edited {
        Some(d) => d,
        None if id == "new" => initial_definition(&choices(&m).await?),
        None => {
            let id: SegmentId = id.parse().map_err(|_| AppError::NotFound.respond())?;
            segments::get(&m.state.db, m.tenant, id).await?.definition
        }
    };
    segments::take_count_allowance(&m.state.db, m.tenant).await?;
    let (readers, newest) = segments::preview(&m.state.db, m.tenant, &definition, 10).await?;
    Ok(SegmentPreview { readers, newest })
}

/// What a new segment starts with: one condition, confirmed on the first list.
fn initial_items(v: &SegmentEditorData) -> Vec<Item> {
    vec![Item::Row(Row::new(Kind::List, v))]
}

#[cfg(feature = "ssr")]
fn initial_definition(v: &SegmentEditorData) -> Definition {
    definition_of(Match::All, &initial_items(v))
}

/// Saves a new segment (`id` is `new`) or changes one; returns its id.
#[server(prefix = "/rpc", endpoint = "save_segment", input = Json)]
pub async fn save_segment(id: String, input: SegmentInput) -> Result<SegmentId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::segments};
    let m = require_role(Role::Author).await?;
    let saved = if id == "new" {
        segments::create(&m.state.db, m.tenant, m.role, &input).await?
    } else {
        let id: SegmentId = id.parse().map_err(|_| AppError::NotFound.respond())?;
        segments::update(&m.state.db, m.tenant, m.role, id, &input).await?
    };
    Ok(saved.id)
}

/// What a condition row tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    List,
    Tag,
    Field,
    SignedUp,
    Source,
    EmailDomain,
    Opened,
    Clicked,
    NeverOpened,
    Unengaged,
    SoftBounced,
}

impl Kind {
    const ALL: [(Kind, &'static str, &'static str); 11] = [
        (Kind::List, "list", "List"),
        (Kind::Tag, "tag", "Tag"),
        (Kind::Field, "field", "Field"),
        (Kind::SignedUp, "signed_up", "Signed up"),
        (Kind::Source, "source", "Came from"),
        (Kind::EmailDomain, "email_domain", "Email domain"),
        (Kind::Opened, "opened", "Opened"),
        (Kind::Clicked, "clicked", "Clicked"),
        (Kind::NeverOpened, "never_opened", "Never opened"),
        (Kind::Unengaged, "unengaged", "Stopped opening"),
        (Kind::SoftBounced, "soft_bounced", "Bounced softly"),
    ];

    fn from_code(code: &str) -> Kind {
        Kind::ALL.iter().find(|(_, c, _)| *c == code).map_or(Kind::List, |(k, _, _)| *k)
    }
}

/// One condition as the form holds it: plain strings, whatever the kind (`target` is a list,
/// tag or campaign id or a field key; `op` a state, comparison or source; `yes` has / is / did).
#[derive(Clone, Debug, PartialEq)]
struct Row {
    kind: Kind,
    target: String,
    op: String,
    value: String,
    value2: String,
    days: String,
    yes: bool,
}

impl Row {
    fn new(kind: Kind, v: &SegmentEditorData) -> Row {
        let first = |ids: Vec<String>| ids.into_iter().next().unwrap_or_default();
        let (target, op) = match kind {
            Kind::List => (first(v.lists.iter().map(|(id, _)| id.to_string()).collect()), "subscribed".into()),
            Kind::Tag => (first(v.tags.iter().map(|(id, _)| id.to_string()).collect()), String::new()),
            Kind::Field => {
                let f = v.fields.first();
                (
                    f.map(|f| f.key.clone()).unwrap_or_default(),
                    f.map_or("eq", |f| FieldOp::for_kind(f.kind)[0].as_str()).into(),
                )
            }
            Kind::SignedUp => (String::new(), DateOp::WithinLastDays.as_str().into()),
            Kind::Source => (String::new(), SignupSource::HostedForm.as_str().into()),
            _ => (String::new(), String::new()),
        };
        let days = match kind {
            Kind::SignedUp | Kind::SoftBounced | Kind::Opened | Kind::Clicked => "30",
            Kind::Unengaged => "5",
            _ => "",
        };
        Row { kind, target, op, value: String::new(), value2: String::new(), days: days.into(), yes: true }
    }

    fn days(&self) -> Option<u32> {
        self.days.trim().parse().ok()
    }

    fn condition(&self) -> Condition {
        match self.kind {
            Kind::List => Condition::List {
                list_id: self.target.parse().unwrap_or(ListId::NIL),
                state: self.op.parse().unwrap_or(ListState::Subscribed),
            },
            Kind::Tag => Condition::Tag { tag_id: self.target.parse().unwrap_or(TagId::NIL), has: self.yes },
            Kind::Field => Condition::Field {
                key: self.target.clone(),
                op: self.op.parse().unwrap_or(FieldOp::Eq),
                value: self.value.clone(),
                value2: self.value2.clone(),
                days: self.days(),
            },
            Kind::SignedUp => Condition::SignedUp {
                op: self.op.parse().unwrap_or(DateOp::WithinLastDays),
                value: self.value.clone(),
                days: self.days(),
            },
            Kind::Source => Condition::Source { source: self.op.parse().unwrap_or(SignupSource::HostedForm) },
            Kind::EmailDomain => Condition::EmailDomain { domain: self.value.clone(), is: self.yes },
            Kind::Opened | Kind::Clicked => {
                let campaign_id = self.target.parse::<CampaignId>().ok();
                let (days, did) = (self.days(), self.yes);
                if self.kind == Kind::Opened {
                    Condition::Opened { campaign_id, days, did }
                } else {
                    Condition::Clicked { campaign_id, days, did }
                }
            }
            Kind::NeverOpened => Condition::NeverOpened,
            Kind::Unengaged => Condition::Unengaged { campaigns: self.days().unwrap_or(0) },
            Kind::SoftBounced => Condition::SoftBounced { days: self.days().unwrap_or(0) },
        }
    }

    fn of(c: &Condition) -> Row {
        let blank = |kind| Row {
            kind,
            target: String::new(),
            op: String::new(),
            value: String::new(),
            value2: String::new(),
            days: String::new(),
            yes: true,
        };
        let days = |d: &Option<u32>| d.map(|d| d.to_string()).unwrap_or_default();
        match c {
            Condition::List { list_id, state } => {
                Row { target: list_id.0.to_string(), op: state.as_str().into(), ..blank(Kind::List) }
            }
            Condition::Tag { tag_id, has } => Row { target: tag_id.0.to_string(), yes: *has, ..blank(Kind::Tag) },
            Condition::Field { key, op, value, value2, days: d } => Row {
                target: key.clone(),
                op: op.as_str().into(),
                value: value.clone(),
                value2: value2.clone(),
                days: days(d),
                ..blank(Kind::Field)
            },
            Condition::SignedUp { op, value, days: d } => {
                Row { op: op.as_str().into(), value: value.clone(), days: days(d), ..blank(Kind::SignedUp) }
            }
            Condition::Source { source } => Row { op: source.as_str().into(), ..blank(Kind::Source) },
            Condition::EmailDomain { domain, is } => {
                Row { value: domain.clone(), yes: *is, ..blank(Kind::EmailDomain) }
            }
            Condition::Opened { campaign_id, days: d, did } | Condition::Clicked { campaign_id, days: d, did } => Row {
                target: campaign_id.map(|c| c.0.to_string()).unwrap_or_default(),
                days: days(d),
                yes: *did,
                ..blank(if matches!(c, Condition::Opened { .. }) { Kind::Opened } else { Kind::Clicked })
            },
            Condition::NeverOpened => blank(Kind::NeverOpened),
            Condition::Unengaged { campaigns } => Row { days: campaigns.to_string(), ..blank(Kind::Unengaged) },
            Condition::SoftBounced { days: d } => Row { days: d.to_string(), ..blank(Kind::SoftBounced) },
        }
    }
}

/// A rule of the tree as the form holds it.
#[derive(Clone, Debug, PartialEq)]
enum Item {
    Row(Row),
    Group(Match, Vec<Row>),
}

fn definition_of(match_: Match, items: &[Item]) -> Definition {
    Definition {
        match_,
        rules: items
            .iter()
            .map(|i| match i {
                Item::Row(r) => Rule::Condition(r.condition()),
                Item::Group(m, rows) => {
                    Rule::Group(Group { match_: *m, conditions: rows.iter().map(Row::condition).collect() })
                }
            })
            .collect(),
    }
}

fn items_of(d: &Definition) -> Vec<Item> {
    d.rules
        .iter()
        .map(|r| match r {
            Rule::Condition(c) => Item::Row(Row::of(c)),
            Rule::Group(g) => Item::Group(g.match_, g.conditions.iter().map(Row::of).collect()),
        })
        .collect()
}

/// Where a row sits: `(rule, Some(condition))` inside a group.
type At = (usize, Option<usize>);

fn path_of((i, j): At) -> String {
    match j {
        Some(j) => format!("rules.{i}.conditions.{j}"),
        None => format!("rules.{i}"),
    }
}

#[component]
pub fn SegmentPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let data = Resource::new(id, segment_edit_view);
    // The tree being edited, once it differs from what the page loaded; the live count follows
    // it (made here, not in the editor: see the hydration rule in `crate::pages`).
    let edited = RwSignal::new(None::<Definition>);
    let preview = Resource::new(move || (id(), edited.get()), |(id, edited)| preview_segment(id, edited));
    view! {
        <AudienceTabs active="/audience/segments"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <Editor v=v id=id() edited=edited preview=preview/> }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Editor(
    v: SegmentEditorData,
    id: String,
    edited: RwSignal<Option<Definition>>,
    preview: Resource<Result<SegmentPreview, AppError>>,
) -> impl IntoView {
    let v = StoredValue::new(v);
    let name = RwSignal::new(v.with_value(|v| v.segment.as_ref().map(|s| s.name.clone()).unwrap_or_default()));
    let match_ = RwSignal::new(v.with_value(|v| v.segment.as_ref().map_or(Match::All, |s| s.definition.match_)));
    let items = RwSignal::new(v.with_value(|v| match &v.segment {
        Some(s) => items_of(&s.definition),
        None => initial_items(v),
    }));
    let definition = Memo::new(move |_| definition_of(match_.get(), &items.get()));
    let loaded = definition.get_untracked();
    Effect::new(move |_| {
        let now = definition.get();
        if now != loaded || edited.get_untracked().is_some() {
            edited.set(Some(now));
        }
    });
    let save = ServerAction::<SaveSegment>::new();
    let is_new = id == "new";
    let save_id = StoredValue::new(id);
    Effect::new(move |_| {
        if let Some(Ok(new_id)) = save.value().get()
            && is_new
        {
            use_navigate()(&format!("/audience/segments/{new_id}"), Default::default());
        }
    });
    // The problems to show beside conditions: the save's, else the live count's.
    let problems = Memo::new(move |_| {
        let from = |e: &AppError| match e {
            AppError::Invalid(i) => i.errors.clone(),
            _ => Vec::new(),
        };
        match save.value().get() {
            Some(Err(e)) if matches!(e, AppError::Invalid(_)) => from(&e),
            _ => preview.get().and_then(|r| r.err()).map(|e| from(&e)).unwrap_or_default(),
        }
    });
    let problem_at = move |path: String| {
        move || {
            problems.with(|ps: &Vec<FieldError>| {
                ps.iter()
                    .filter(|e| e.field.as_deref().is_some_and(|f| f == path || f.starts_with(&format!("{path}."))))
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        }
    };
    let name_error = problem_at("name".into());
    let rules_error = move || {
        problems.with(|ps| {
            ps.iter()
                .filter(|e| e.field.as_deref() == Some("rules"))
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join(" ")
        })
    };
    let can_edit = v.with_value(|v| v.can_edit);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        save.dispatch(SaveSegment {
            id: save_id.get_value(),
            input: SegmentInput { name: name.get_untracked(), definition: definition.get_untracked() },
        });
    };
    let added = RwSignal::new(0_u32);
    let add_row = move |kind: Kind| items.update(|list| list.push(Item::Row(v.with_value(|v| Row::new(kind, v)))));
    view! {
        <form on:submit=submit class="grid gap-4 lg:grid-cols-3" novalidate>
            <div class="lg:col-span-2 space-y-4">
                <Card title="Segment">
                    <label for="segment-name" class="label">"Name"</label>
                    <input id="segment-name" class="input" maxlength="80" required placeholder="Engaged readers"
                        prop:value=name on:change=move |ev| name.set(event_target_value(&ev))/>
                    <p class="mt-1 text-xs text-red-600" role="alert">{name_error}</p>
                    <div class="mt-4 flex flex-wrap items-center gap-2 text-sm text-slate-700">
                        <label for="segment-match">"Readers who match"</label>
                        <select id="segment-match" class="input w-32" on:change=move |ev| match_.set(event_target_value(&ev).parse().unwrap_or_default())>
                            <option value="all" selected=move || match_.get() == Match::All>"all"</option>
                            <option value="any" selected=move || match_.get() == Match::Any>"any"</option>
                        </select>
                        <span>"of these conditions:"</span>
                    </div>
                    <p class="mt-1 text-xs text-red-600" role="alert">{rules_error}</p>
                    <ol class="mt-3 space-y-3" data-testid="segment-rules">
                        {move || items.get().into_iter().enumerate().map(|(i, item)| match item {
                            Item::Row(row) => view! {
                                <li class="rounded border border-slate-200 p-3" data-testid="segment-rule">
                                    <RowEditor row=row at=(i, None) items=items v=v error=problem_at(path_of((i, None)))/>
                                </li>
                            }.into_any(),
                            Item::Group(m, rows) => view! {
                                <li class="rounded border border-indigo-200 bg-indigo-50/40 p-3" data-testid="segment-group">
                                    <div class="mb-2 flex flex-wrap items-center gap-2 text-sm text-slate-700">
                                        <label for=format!("group-match-{i}")>"Any reader matching"</label>
                                        <select id=format!("group-match-{i}") class="input w-32" on:change=move |ev| {
                                            let m: Match = event_target_value(&ev).parse().unwrap_or_default();
                                            items.update(|list| if let Some(Item::Group(gm, _)) = list.get_mut(i) { *gm = m });
                                        }>
                                            <option value="all" selected=m == Match::All>"all"</option>
                                            <option value="any" selected=m == Match::Any>"any"</option>
                                        </select>
                                        <span>"of:"</span>
                                        <button type="button" class="btn-secondary ml-auto text-xs" on:click=move |_| items.update(|list| { list.remove(i); })>
                                            "Remove group"
                                        </button>
                                    </div>
                                    <p class="text-xs text-red-600" role="alert">{
                                        let at = path_of((i, None));
                                        move || problems.with(|ps| ps.iter().filter(|e| e.field.as_deref() == Some(at.as_str())).map(|e| e.message.clone()).collect::<Vec<_>>().join(" "))
                                    }</p>
                                    <ol class="space-y-2">
                                        {rows.into_iter().enumerate().map(|(j, row)| view! {
                                            <li class="rounded border border-slate-200 bg-white p-2">
                                                <RowEditor row=row at=(i, Some(j)) items=items v=v error=problem_at(path_of((i, Some(j))))/>
                                            </li>
                                        }).collect_view()}
                                    </ol>
                                    <button type="button" class="btn-secondary mt-2 text-xs" on:click=move |_| {
                                        let row = v.with_value(|v| Row::new(Kind::Tag, v));
                                        items.update(|list| if let Some(Item::Group(_, rows)) = list.get_mut(i) { rows.push(row) });
                                    }>"Add a condition to the group"</button>
                                </li>
                            }.into_any(),
                        }).collect_view()}
                    </ol>
                    <div class="mt-3 flex flex-wrap gap-2">
                        <label for="add-condition" class="sr-only">"Add a condition"</label>
                        <select id="add-condition" class="input w-auto" data-testid="add-condition"
                            on:change=move |ev| {
                                let code = event_target_value(&ev);
                                if !code.is_empty() {
                                    add_row(Kind::from_code(&code));
                                }
                                // Back to the prompt, so the same kind can be added again.
                                added.update(|n| *n += 1);
                            }
                            prop:value=move || { added.track(); String::new() }>
                            <option value="">"Add a condition…"</option>
                            {Kind::ALL.iter().map(|(_, code, label)| view! { <option value=*code>{*label}</option> }).collect_view()}
                        </select>
                        <button type="button" class="btn-secondary" on:click=move |_| {
                            let row = v.with_value(|v| Row::new(Kind::Opened, v));
                            items.update(|list| list.push(Item::Group(Match::Any, vec![row])));
                        }>"Add a group (any of…)"</button>
                    </div>
                </Card>
                {can_edit.then(|| view! {
                    <div class="flex items-center gap-3">
                        <button type="submit" class="btn-primary" data-testid="save-segment" disabled=move || save.pending().get()>"Save segment"</button>
                        {move || match save.value().get() {
                            Some(Ok(_)) => Some(view! { <span class="text-sm text-green-700" role="status">"Saved."</span> }.into_any()),
                            Some(Err(AppError::Invalid(_))) => Some(view! { <span class="text-sm text-red-700" role="alert">"Fix the problems shown above."</span> }.into_any()),
                            Some(Err(e)) => Some(view! { <span class="text-sm text-red-700" role="alert">{e.to_string()}</span> }.into_any()),
                            None => None,
                        }}
                    </div>
                })}
            </div>
            <LivePreview preview=preview/>
        </form>
    }
}

#[component]
fn LivePreview(preview: Resource<Result<SegmentPreview, AppError>>) -> impl IntoView {
    // Slow conditions (the sunset rule at a large audience) keep the last count with a note.
    let pending = RwSignal::new(false);
    // Shown only once hydrated: the server's render of a pending count would not match the
    // browser's first render.
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    view! {
        <aside class="lg:col-span-1">
            <Card title="Matching readers">
                <p class="h-4 text-xs text-slate-500" role="status">{move || (hydrated.get() && pending.get()).then_some("Counting…")}</p>
                <Transition fallback=|| view! { <p class="text-slate-500">"Counting…"</p> } set_pending=pending.write_only()>
                    {move || Suspend::new(async move {
                        match preview.await {
                            Ok(p) => view! {
                                <p class="text-3xl font-semibold text-slate-900" data-testid="segment-live-count">{p.readers}</p>
                                <p class="text-sm text-slate-500">{if p.readers == 1 { "reader matches now" } else { "readers match now" }}</p>
                                <ul class="mt-3 divide-y divide-slate-100 text-sm" data-testid="segment-preview">
                                    {p.newest.into_iter().map(|r| view! {
                                        <li class="py-1.5 break-all">
                                            <a href=format!("/audience/readers/{}", r.id) class="text-indigo-700 hover:underline">{r.email}</a>
                                            {(!r.name.is_empty()).then(|| view! { <span class="ml-1 text-slate-500">{r.name}</span> })}
                                        </li>
                                    }).collect_view()}
                                </ul>
                            }.into_any(),
                            Err(AppError::Invalid(_)) => view! {
                                <p class="text-sm text-slate-500">"Finish the conditions marked in red to see who matches."</p>
                            }.into_any(),
                            Err(e) => view! { <p class="text-sm text-red-700" role="alert">{e.to_string()}</p> }.into_any(),
                        }
                    })}
                </Transition>
            </Card>
        </aside>
    }
}

/// One condition's inputs. Changes write the row back into `items` (on `change`, not on every
/// keystroke, so the count follows finished values).
#[component]
fn RowEditor(
    row: Row,
    at: At,
    items: RwSignal<Vec<Item>>,
    v: StoredValue<SegmentEditorData>,
    error: impl Fn() -> String + Send + Sync + 'static,
) -> impl IntoView {
    let set = move |f: Box<dyn FnOnce(&mut Row)>| {
        items.update(|list| {
            let row = match (list.get_mut(at.0), at.1) {
                (Some(Item::Row(r)), None) => Some(r),
                (Some(Item::Group(_, rows)), Some(j)) => rows.get_mut(j),
                _ => None,
            };
            if let Some(r) = row {
                f(r);
            }
        })
    };
    let remove = move |_| {
        items.update(|list| match at.1 {
            None => {
                list.remove(at.0);
            }
            Some(j) => {
                if let Some(Item::Group(_, rows)) = list.get_mut(at.0) {
                    rows.remove(j);
                }
            }
        })
    };
    let key = path_of(at).replace('.', "-");
    let id_for = move |part: &str| format!("{key}-{part}");
    let kind = row.kind;
    let on_kind = move |ev: leptos::ev::Event| {
        let kind = Kind::from_code(&event_target_value(&ev));
        let fresh = v.with_value(|v| Row::new(kind, v));
        set(Box::new(move |r| *r = fresh));
    };
    let text = move |part: &'static str| {
        move |ev: leptos::ev::Event| {
            let value = event_target_value(&ev);
            set(Box::new(move |r| match part {
                "target" => r.target = value,
                "op" => r.op = value,
                "value" => r.value = value,
                "value2" => r.value2 = value,
                _ => r.days = value,
            }))
        }
    };
    let yes_no = move |ev: leptos::ev::Event| {
        let yes = event_target_value(&ev) == "yes";
        set(Box::new(move |r| r.yes = yes));
    };
    let select = |id: String,
                  label: &'static str,
                  current: String,
                  options: Vec<(String, String)>,
                  on: Box<dyn Fn(leptos::ev::Event) + Send + Sync>| {
        view! {
            <label for=id.clone() class="sr-only">{label}</label>
            <select id=id class="input w-auto max-w-full" on:change=on>
                {options.into_iter().map(|(value, text)| {
                    let selected = value == current;
                    view! { <option value=value selected=selected>{text}</option> }
                }).collect_view()}
            </select>
        }
    };
    let input = |id: String,
                 label: &'static str,
                 current: String,
                 kind: &'static str,
                 placeholder: &'static str,
                 on: Box<dyn Fn(leptos::ev::Event) + Send + Sync>| {
        view! {
            <label for=id.clone() class="sr-only">{label}</label>
            <input id=id type=kind class="input w-36" value=current placeholder=placeholder on:change=on/>
        }
    };
    let yes_select = |labels: (&'static str, &'static str), yes: bool| {
        select(
            id_for("yes"),
            "Whether",
            if yes { "yes" } else { "no" }.into(),
            vec![("yes".into(), labels.0.into()), ("no".into(), labels.1.into())],
            Box::new(yes_no),
        )
    };
    let days_input = |label: &'static str, placeholder: &'static str| {
        input(id_for("days"), label, row.days.clone(), "number", placeholder, Box::new(text("days")))
    };
    let body = match kind {
        Kind::List => view! {
            {select(id_for("state"), "State", row.op.clone(), ListState::ALL.iter().map(|s| (s.as_str().to_string(), match s {
                ListState::Subscribed => "is subscribed to", ListState::Pending => "is waiting to confirm",
                ListState::Unsubscribed => "unsubscribed from", ListState::Member => "is on", ListState::NotMember => "is not on",
            }.to_string())).collect(), Box::new(text("op")))}
            {select(id_for("target"), "List", row.target.clone(), v.with_value(|v| v.lists.iter().map(|(id, n)| (id.0.to_string(), n.clone())).collect()), Box::new(text("target")))}
        }.into_any(),
        Kind::Tag => view! {
            {yes_select(("has the tag", "does not have the tag"), row.yes)}
            {select(id_for("target"), "Tag", row.target.clone(), v.with_value(|v| v.tags.iter().map(|(id, n)| (id.0.to_string(), n.clone())).collect()), Box::new(text("target")))}
        }.into_any(),
        Kind::Field => {
            let field = v.with_value(|v| v.fields.iter().find(|f| f.key == row.target).cloned());
            let op: FieldOp = row.op.parse().unwrap_or_default();
            let kind = field.as_ref().map_or(FieldKind::Text, |f| f.kind);
            let input_type = match kind {
                FieldKind::Number => "number",
                FieldKind::Date => "date",
                _ => "text",
            };
            let choices = field.as_ref().map(|f| f.choices.clone()).unwrap_or_default();
            let value_input = |part: &'static str, current: String| -> AnyView {
                if kind == FieldKind::Choice && !matches!(op, FieldOp::Contains | FieldOp::StartsWith) {
                    let mut options: Vec<(String, String)> = vec![(String::new(), "Choose…".into())];
                    options.extend(choices.iter().map(|c| (c.clone(), c.clone())));
                    select(id_for(part), "Value", current, options, Box::new(text(part))).into_any()
                } else if kind == FieldKind::YesNo {
                    select(id_for(part), "Value", current, vec![(String::new(), "Choose…".into()), ("yes".into(), "yes".into()), ("no".into(), "no".into())], Box::new(text(part))).into_any()
                } else {
                    input(id_for(part), "Value", current, input_type, "", Box::new(text(part))).into_any()
                }
            };
            let operands = match op.operands() {
                Operands::None => ().into_any(),
                Operands::One => value_input("value", row.value.clone()),
                Operands::Two => view! { {value_input("value", row.value.clone())} <span class="text-sm text-slate-500">"and"</span> {value_input("value2", row.value2.clone())} }.into_any(),
                Operands::Days => days_input("Days", "days").into_any(),
            };
            view! {
                {select(id_for("target"), "Field", row.target.clone(), v.with_value(|v| v.fields.iter().map(|f| (f.key.clone(), f.label.clone())).collect()), Box::new(move |ev| {
                    let key = event_target_value(&ev);
                    let first = v.with_value(|v| v.fields.iter().find(|f| f.key == key).map(|f| FieldOp::for_kind(f.kind)[0]));
                    set(Box::new(move |r| { r.target = key; r.op = first.unwrap_or_default().as_str().into(); r.value.clear(); r.value2.clear(); }));
                }))}
                {select(id_for("op"), "Comparison", row.op.clone(), FieldOp::for_kind(kind).iter().map(|o| (o.as_str().to_string(), o.label().replace(" N ", " … ").to_string())).collect(), Box::new(text("op")))}
                {operands}
            }.into_any()
        }
        Kind::SignedUp => {
            let op: DateOp = row.op.parse().unwrap_or_default();
            view! {
                {select(id_for("op"), "When", row.op.clone(), vec![
                    ("within_last_days".into(), "in the last … days".into()), ("before".into(), "before".into()), ("after".into(), "after".into()),
                ], Box::new(text("op")))}
                {if op == DateOp::WithinLastDays { days_input("Days", "days").into_any() } else { input(id_for("value"), "Date", row.value.clone(), "date", "", Box::new(text("value"))).into_any() }}
            }.into_any()
        }
        Kind::Source => select(id_for("op"), "Source", row.op.clone(), SignupSource::ALL.iter().map(|s| (s.as_str().to_string(), s.label().to_string())).collect(), Box::new(text("op"))).into_any(),
        Kind::EmailDomain => view! {
            {yes_select(("is at", "is not at"), row.yes)}
            {input(id_for("value"), "Domain", row.value.clone(), "text", "example.com", Box::new(text("value")))}
        }.into_any(),
        Kind::Opened | Kind::Clicked => {
            let mut campaigns: Vec<(String, String)> = vec![(String::new(), "any campaign".into())];
            campaigns.extend(v.with_value(|v| v.campaigns.iter().map(|(id, n)| (id.0.to_string(), n.clone())).collect::<Vec<_>>()));
            let labels = if kind == Kind::Opened { ("opened", "did not open") } else { ("clicked in", "did not click in") };
            view! {
                {yes_select(labels, row.yes)}
                {select(id_for("target"), "Campaign", row.target.clone(), campaigns, Box::new(text("target")))}
                <span class="text-sm text-slate-500">"in the last"</span>
                {days_input("Days (empty: ever)", "ever")}
                <span class="text-sm text-slate-500">"days"</span>
            }.into_any()
        }
        Kind::NeverOpened => view! { <span class="text-sm text-slate-600">"has never opened a campaign"</span> }.into_any(),
        Kind::Unengaged => view! {
            <span class="text-sm text-slate-600">"opened none of the last"</span>
            {days_input("Campaigns", "5")}
            <span class="text-sm text-slate-600">"campaigns it received"</span>
        }.into_any(),
        Kind::SoftBounced => view! {
            <span class="text-sm text-slate-600">"in the last"</span>
            {days_input("Days", "30")}
            <span class="text-sm text-slate-600">"days"</span>
        }.into_any(),
    };
    view! {
        <div class="flex flex-wrap items-center gap-2">
            <label for=id_for("kind") class="sr-only">"Condition"</label>
            <select id=id_for("kind") class="input w-auto" data-testid="condition-kind" on:change=on_kind>
                {Kind::ALL.iter().map(|(k, code, label)| view! { <option value=*code selected=*k == kind>{*label}</option> }).collect_view()}
            </select>
            {body}
            <button type="button" class="btn-secondary ml-auto text-xs" aria-label="Remove this condition" on:click=remove>"Remove"</button>
        </div>
        <p class="mt-1 text-xs text-red-600" role="alert">{error}</p>
    }
}
