//! `/audience/segments`: the workspace's saved segments, each with its conditions in words and
//! how many readers match now; a new one, edit or delete (a campaign still to send that uses
//! one keeps it from being deleted).

use herald_types::{Segment, SegmentId};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, ConfirmDialog, EmptyState, LoadError};
use crate::error::AppError;
use crate::pages::audience::AudienceTabs;

/// A segment with its conditions in words and its count now.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SegmentSummary {
    pub segment: Segment,
    pub conditions: Vec<String>,
    pub readers: i64,
}

#[server(prefix = "/rpc", endpoint = "list_segments")]
pub async fn list_segments() -> Result<Vec<SegmentSummary>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::segments};
    let m = require_role(Role::Viewer).await?;
    let choices = super::segment::choices(&m).await?;
    let (names, fields) = (super::segment::Names::of(&choices), choices.fields);
    let mut out = Vec::new();
    for segment in segments::list(&m.state.db, m.tenant).await? {
        let conditions = segment.definition.conditions().map(|c| c.describe(&|id| names.name(id), &fields)).collect();
        // A segment naming a list, tag or campaign deleted since counts as what it can match.
        let readers = segments::count(&m.state.db, m.tenant, &segment.definition).await.unwrap_or(0);
        out.push(SegmentSummary { segment, conditions, readers });
    }
    Ok(out)
}

#[server(prefix = "/rpc", endpoint = "delete_segment")]
pub async fn delete_segment(id: SegmentId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::segments};
    let m = require_role(Role::Author).await?;
    segments::delete(&m.state.db, m.tenant, m.role, id).await?;
    Ok(())
}

#[component]
pub fn SegmentsPage() -> impl IntoView {
    let delete = ServerAction::<DeleteSegment>::new();
    let segments = Resource::new(move || delete.version().get(), |_| list_segments());
    view! {
        <AudienceTabs active="/audience/segments"/>
        <div class="mb-4 flex justify-end">
            <a href="/audience/segments/new" class="btn-primary" data-testid="new-segment">"New segment"</a>
        </div>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match segments.await {
                    Ok(list) if list.is_empty() => view! {
                        <EmptyState title="No segments yet"
                            body="A segment picks readers by what you know about them: lists, tags, fields, where they came from, and whether they open and click. Campaigns can send to segments and leave one out."
                            action_href="/audience/segments/new" action_label="Make a segment"/>
                    }.into_any(),
                    Ok(list) => view! {
                        <Card title="Segments">
                            <ActionError value=delete.value()/>
                            <ul class="divide-y divide-slate-100" data-testid="segments-list">
                                {list.into_iter().map(|s| view! { <SegmentRow summary=s delete=delete/> }).collect_view()}
                            </ul>
                        </Card>
                    }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn SegmentRow(summary: SegmentSummary, delete: ServerAction<DeleteSegment>) -> impl IntoView {
    let confirm = RwSignal::new(false);
    let SegmentSummary { segment, conditions, readers } = summary;
    let id = segment.id;
    let joiner = if segment.definition.match_ == herald_types::segment::Match::Any { " or " } else { " and " };
    let count = if readers == 1 { "1 reader".to_string() } else { format!("{readers} readers") };
    view! {
        <li class="flex flex-wrap items-center justify-between gap-3 py-3" data-testid="segment-row">
            <div class="min-w-0">
                <a href=format!("/audience/segments/{}", id.0) class="font-medium wrap-anywhere text-indigo-700 hover:underline" data-testid="segment-name">
                    {segment.name.clone()}
                </a>
                <span class="ml-3 text-sm text-slate-600" data-testid="segment-count">{count}</span>
                <p class="mt-1 text-xs text-slate-500 break-words">{conditions.join(joiner)}</p>
            </div>
            <button type="button" class="btn-secondary text-red-600" aria-label=format!("Delete {}", segment.name)
                on:click=move |_| confirm.set(true)>"Delete"</button>
            <ConfirmDialog open=confirm title=format!("Delete the segment “{}”?", segment.name) confirm_label="Delete segment" danger=true
                on_confirm=Callback::new(move |()| { delete.dispatch(DeleteSegment { id }); })>
                <p class="text-sm text-slate-600">"The readers stay; only this way of picking them goes."</p>
            </ConfirmDialog>
        </li>
    }
}
