//! `/campaigns`. Until the campaign editor lands, an honest empty state.

use leptos::prelude::*;

use crate::components::ui::{EmptyState, PageHeader};

#[component]
pub fn CampaignsPage() -> impl IntoView {
    view! {
        <PageHeader title="Campaigns" subtitle="Write, schedule and send"/>
        <EmptyState
            title="No campaigns yet"
            body="The campaign editor and send engine are not built yet. Invite the authors who will write your newsletter so they are ready when it is."
            action_href="/settings/members"
            action_label="Invite your team"/>
    }
}
