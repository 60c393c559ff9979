//! `/audience`: lists and readers. Until the audience feature lands, an honest empty state.

use leptos::prelude::*;

use crate::components::ui::{EmptyState, PageHeader};

#[component]
pub fn AudiencePage() -> impl IntoView {
    view! {
        <PageHeader title="Audience" subtitle="Lists, readers and sign-up pages"/>
        <EmptyState
            title="No readers yet"
            body="Lists, hosted subscribe pages and CSV import are not built yet. Meanwhile, set your postal address and default sender so the first campaign can go out as soon as they are."
            action_href="/settings"
            action_label="Open workspace settings"/>
    }
}
