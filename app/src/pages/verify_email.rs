//! `/verify-email?token=…`: the link from the sign-up mail. Opening it confirms the address.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::auth::verify_email;
use crate::components::ui::AuthCard;
use crate::components::ui::LoadError;
use crate::error::AppError;

#[component]
pub fn VerifyEmailPage() -> impl IntoView {
    let token = move || use_query_map().with(|q| q.get("token")).unwrap_or_default();
    // No token (a mangled link): say so without asking the server.
    let result = Resource::new(token, |token| async move {
        if token.trim().is_empty() {
            Err(AppError::invalid("This confirmation link is incomplete: open the whole link from the mail."))
        } else {
            verify_email(token).await
        }
    });
    view! {
        <AuthCard title="Confirm your address">
            <Suspense fallback=|| view! { <p class="text-slate-400">"Confirming…"</p> }>
                {move || Suspend::new(async move {
                    match result.await {
                        Ok(()) => view! {
                            <p role="status" class="text-sm text-emerald-800" data-testid="email-verified">
                                "Thank you: your address is confirmed. You can now send campaigns, create API keys and join workspaces."
                            </p>
                        }.into_any(),
                        Err(AppError::Conflict(m)) => view! {
                            <p role="status" class="text-sm text-slate-700" data-testid="email-verified">{m}</p>
                        }.into_any(),
                        Err(e) => view! { <LoadError error=e/> }.into_any(),
                    }
                })}
            </Suspense>
            <p class="mt-6 text-center text-sm text-slate-500">
                <a href="/" class="text-indigo-600 hover:underline">"Go to Herald"</a>
            </p>
        </AuthCard>
    }
}
