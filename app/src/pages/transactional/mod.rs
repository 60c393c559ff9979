//! `/transactional…`: the message log, one message, and the templates.

use herald_types::MessageStatus;
use leptos::prelude::*;

pub mod message;
pub mod overview;
pub mod template;
pub mod templates;

pub const TABS: &[(&str, &str)] = &[("/transactional", "Messages"), ("/transactional/templates", "Templates")];

/// A message's status with its colour.
#[component]
pub fn StatusBadge(status: MessageStatus) -> impl IntoView {
    let cls = match status {
        MessageStatus::Sent => "rounded bg-emerald-50 px-2 py-0.5 text-xs font-medium text-emerald-700",
        MessageStatus::Failed => "rounded bg-red-50 px-2 py-0.5 text-xs font-medium text-red-700",
        MessageStatus::Cancelled => "rounded bg-slate-100 px-2 py-0.5 text-xs font-medium text-slate-600",
        MessageStatus::Queued | MessageStatus::Sending => {
            "rounded bg-amber-50 px-2 py-0.5 text-xs font-medium text-amber-800"
        }
    };
    view! { <span class=cls data-testid="message-status">{status.as_str()}</span> }
}
