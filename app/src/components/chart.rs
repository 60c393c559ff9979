//! A chart placeholder: `public/charts.js` draws the ECharts option in `data-chart` (server-built
//! JSON) with the locally served ECharts, also after client-side navigation.

use leptos::prelude::*;

#[component]
pub fn Chart(
    /// The ECharts option as JSON.
    option: String,
    /// What the chart shows, for screen readers.
    #[prop(into)]
    label: String,
    #[prop(into, optional)] testid: String,
) -> impl IntoView {
    view! { <div class="h-72 w-full" data-chart=option role="img" aria-label=label data-testid=testid></div> }
}
