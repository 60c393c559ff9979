//! Any path no route matches.

use leptos::prelude::*;

#[component]
pub fn NotFoundPage() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        res.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <div class="flex min-h-screen flex-col items-center justify-center bg-slate-50">
            <h1 class="text-4xl font-bold text-slate-900">"404"</h1>
            <p class="mt-2 text-slate-500">"There is nothing at this address."</p>
            <a href="/" class="btn-primary mt-6">"Go to the dashboard"</a>
        </div>
    }
}
