//! The approval part of the campaign editor (see `herald_engine::campaigns::approval`): where a
//! request stands, and "Approve" / "Turn down" for owners and admins.

use leptos::prelude::*;

use crate::components::ui::{ActionError, LocalTimeOf};
use crate::error::AppError;
use herald_types::{ApprovalRequest, ApprovalState, CampaignId};

#[server(prefix = "/rpc", endpoint = "approve_send")]
pub async fn approve_send(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audit::Action, campaigns::approval};
    let m = require_role(Role::Admin).await?;
    herald_engine::accounts::require_verified_email(&m.state.db, m.user).await?;
    let c = approval::approve(&m.state.db, &m.state.jobs, m.tenant, m.user, m.role, id).await?;
    m.audit(Action::ApprovalGiven, id, serde_json::json!({ "status": c.status, "scheduled_at": c.scheduled_at })).await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "reject_send")]
pub async fn reject_send(id: CampaignId, note: String) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, audit::Action, campaigns::approval};
    let m = require_role(Role::Admin).await?;
    approval::reject(&m.state.db, m.tenant, m.user, m.role, id, &note).await?;
    m.audit(Action::ApprovalRejected, id, serde_json::json!({ "note": note.trim() })).await;
    Ok(())
}

/// The request's state above the send buttons.
#[component]
pub fn ApprovalStatus(
    id: CampaignId,
    request: ApprovalRequest,
    can_approve: bool,
    refresh: RwSignal<u32>,
) -> impl IntoView {
    let approve = ServerAction::<ApproveSend>::new();
    let reject = ServerAction::<RejectSend>::new();
    Effect::new(move |_| {
        if matches!(approve.value().get(), Some(Ok(()))) || matches!(reject.value().get(), Some(Ok(()))) {
            refresh.update(|r| *r += 1);
        }
    });
    let when = match request.send_at {
        Some(at) => view! { " to go out at " <LocalTimeOf at=at/>"." }.into_any(),
        None => " to send as soon as it is approved.".into_any(),
    };
    let asked = view! { {request.requested_by.clone()}" asked on "<LocalTimeOf at=request.requested_at/>{when} };
    match request.state {
        ApprovalState::Pending => view! {
            <div class="mb-4 rounded-md bg-amber-50 px-3 py-3 text-sm text-amber-900" data-testid="approval-pending">
                <p><strong>"Waiting for approval. "</strong>{asked}" Editing the campaign withdraws the request."</p>
                {can_approve.then(|| {
                    view! {
                        <div class="mt-3 flex flex-wrap items-end gap-3">
                            <button type="button" class="btn-primary" disabled=move || approve.pending().get()
                                on:click=move |_| { approve.dispatch(ApproveSend { id }); }>
                                "Approve"
                            </button>
                            <ActionForm action=reject attr:class="flex flex-wrap items-end gap-2">
                                <input type="hidden" name="id" value=id.to_string()/>
                                <div>
                                    <label for="reject-note" class="sr-only">"Why (for the author)"</label>
                                    <input id="reject-note" name="note" class="input" placeholder="Why (for the author)" maxlength="1000"/>
                                </div>
                                <button type="submit" class="btn-secondary" disabled=move || reject.pending().get()>"Turn down"</button>
                            </ActionForm>
                        </div>
                        <ActionError value=approve.value()/>
                        <ActionError value=reject.value()/>
                    }
                })}
            </div>
        }.into_any(),
        ApprovalState::Rejected => view! {
            <div class="mb-4 rounded-md bg-red-50 px-3 py-3 text-sm text-red-800" data-testid="approval-rejected">
                <strong>{format!("Turned down by {}. ", request.decided_by.clone().unwrap_or_else(|| "an admin".into()))}</strong>
                {(!request.note.is_empty()).then(|| format!("“{}” ", request.note))}
                "Change what is needed and ask again."
            </div>
        }.into_any(),
        ApprovalState::Approved => view! {
            <p class="mb-4 text-sm text-emerald-700" data-testid="approval-approved">
                {format!("Approved by {}.", request.decided_by.clone().unwrap_or_else(|| "an admin".into()))}
            </p>
        }.into_any(),
    }
}
