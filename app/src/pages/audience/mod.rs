//! `/audience…`: lists, readers, imports and suppressions.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::TabbedHeader;
use crate::error::AppError;
use herald_types::ListWithCounts;

pub mod fields;
pub mod import;
pub mod imports;
pub mod overview;
pub mod reader;
pub mod readers;
pub mod segment;
pub mod segments;
pub mod suppressions;
pub mod tags;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListsView {
    pub lists: Vec<ListWithCounts>,
    /// The workspace's segments, by name (the campaign editor's audience).
    pub segments: Vec<(herald_types::SegmentId, String)>,
    pub workspace_slug: String,
    pub base_url: String,
    pub can_edit: bool,
}

#[server(prefix = "/rpc", endpoint = "list_lists")]
pub async fn list_lists() -> Result<ListsView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audience::lists, workspaces};
    let m = require_role(Role::Viewer).await?;
    let ws = workspaces::get(&m.state.db, m.tenant).await?;
    let lists = lists::with_counts(&m.state.db, m.tenant).await?;
    let segments = herald_engine::audience::segments::list(&m.state.db, m.tenant)
        .await?
        .into_iter()
        .map(|s| (s.id, s.name))
        .collect();
    Ok(ListsView {
        lists,
        segments,
        workspace_slug: ws.slug,
        base_url: m.state.base_url.clone(),
        can_edit: m.role.can_author(),
    })
}

/// A `<datalist>` of the workspace's tag names, for inputs that name a tag (`list=id`).
#[component]
pub fn TagOptions(id: &'static str, tags: Resource<Result<Vec<herald_types::Tag>, AppError>>) -> impl IntoView {
    view! {
        <datalist id=id>
            <Suspense>
                {move || Suspend::new(async move {
                    tags.await.map(|tags| tags.into_iter().map(|t| view! { <option value=t.name/> }).collect_view()).ok()
                })}
            </Suspense>
        </datalist>
    }
}

/// The tabs above every audience page.
#[component]
pub fn AudienceTabs(active: &'static str) -> impl IntoView {
    const TABS: &[(&str, &str)] = &[
        ("/audience", "Lists"),
        ("/audience/readers", "Readers"),
        ("/audience/segments", "Segments"),
        ("/audience/tags", "Tags"),
        ("/audience/fields", "Fields"),
        ("/audience/imports", "Import"),
        ("/audience/suppressions", "Suppression list"),
    ];
    view! { <TabbedHeader title="Audience" subtitle="Lists, readers and who must never be mailed" tabs=TABS active=active/> }
}
