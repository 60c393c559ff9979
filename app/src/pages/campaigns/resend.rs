//! New drafts from a campaign, on its page: on a sent campaign, "Send again to readers who did
//! not open" makes a resend draft (optionally with a new subject) and opens it, and both
//! campaigns link to each other; "Duplicate" copies any campaign into a new draft.

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use crate::components::ui::{ActionError, ConfirmDialog};
use crate::error::AppError;
use herald_types::{Campaign, CampaignId, CampaignStatus, TrackingMode};

/// Makes the resend draft of `id`; returns the new campaign's id.
#[server(prefix = "/rpc", endpoint = "resend_to_non_openers")]
pub async fn resend_to_non_openers(
    id: CampaignId,
    subject: String,
    count_machine_opens: bool,
    #[server(default)] again: bool,
) -> Result<CampaignId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::resend};
    let m = require_role(Role::Author).await?;
    let input = herald_types::ResendInput { subject, count_machine_opens, again };
    Ok(resend::create(&m.state.db, m.tenant, m.role, id, &input).await?.id)
}

/// Makes a draft copy of `id`; returns the new campaign's id.
#[server(prefix = "/rpc", endpoint = "duplicate_campaign")]
pub async fn duplicate_campaign(id: CampaignId) -> Result<CampaignId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, campaigns::store};
    let m = require_role(Role::Author).await?;
    Ok(store::duplicate(&m.state.db, m.tenant, m.role, id).await?.id)
}

/// Links between a resend and its original, and for authors the buttons that make a new draft
/// from this campaign (a resend needs it sent with per-reader tracking).
#[component]
pub fn ResendLinks(c: Campaign, can_act: bool) -> impl IntoView {
    let offer = can_act && c.status == CampaignStatus::Sent && c.tracking == TrackingMode::On;
    let id = c.id;
    view! {
        <div class="mb-6 flex flex-wrap items-center gap-3 text-sm" data-testid="resend-links">
            {c.resend_of.map(|original| view! {
                <span class="text-slate-600">
                    "Sent to the readers of "
                    <a href=format!("/campaigns/{original}") class="font-medium text-indigo-600 hover:underline"
                        data-testid="resend-original">"the original campaign"</a>
                    " who did not open it."
                </span>
            })}
            {(!c.resends.is_empty()).then(|| view! {
                <span class="text-slate-600">"Sent again: "</span>
                {c.resends.iter().enumerate().map(|(i, r)| view! {
                    <a href=format!("/campaigns/{r}") class="font-medium text-indigo-600 hover:underline" data-testid="resend-copy">
                        {format!("resend {}", i + 1)}
                    </a>
                }).collect_view()}
            })}
            {offer.then(|| view! { <ResendButton id=id subject=c.subject.clone() resent=!c.resends.is_empty()/> })}
            {can_act.then(|| view! { <DuplicateButton id=id/> })}
        </div>
    }
}

#[component]
fn ResendButton(id: CampaignId, subject: String, resent: bool) -> impl IntoView {
    let resend = ServerAction::<ResendToNonOpeners>::new();
    let open = RwSignal::new(false);
    let new_subject = RwSignal::new(String::new());
    let machine = RwSignal::new(false);
    // A second resend of one original mails the first one's readers again: only when asked.
    let again = RwSignal::new(false);
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(made)) = resend.value().get() {
            navigate(&format!("/campaigns/{made}"), Default::default());
        }
    });
    view! {
        <button type="button" class="btn-secondary" data-testid="resend-button" on:click=move |_| open.set(true)>
            "Send again to readers who did not open"
        </button>
        <ActionError value=resend.value()/>
        <ConfirmDialog open=open title="Send again to readers who did not open?" confirm_label="Make the draft"
            on_confirm=move |()| {
                resend.dispatch(ResendToNonOpeners {
                    id,
                    subject: new_subject.get_untracked(),
                    count_machine_opens: machine.get_untracked(),
                    again: again.get_untracked(),
                });
            }>
            <p>"A new draft goes to the readers this campaign reached who have not opened it, clicked, unsubscribed or bounced since. You can change it before sending."</p>
            <label for="resend-subject" class="label mt-3">"New subject (optional)"</label>
            <input id="resend-subject" class="input" maxlength="300" placeholder=subject.clone()
                on:input=move |ev| new_subject.set(event_target_value(&ev))/>
            <label class="mt-3 flex items-center gap-2">
                <input type="checkbox" on:change=move |ev| machine.set(event_target_checked(&ev))/>
                "Count opens by privacy proxies as opens (leave those readers out too)"
            </label>
            {resent.then(|| view! {
                <p class="mt-3 rounded bg-amber-50 p-2 text-amber-800" data-testid="resend-again-warning">
                    "This campaign was already sent again. Readers who got that resend and still have not opened it would get this one too."
                </p>
                <label class="mt-2 flex items-center gap-2">
                    <input type="checkbox" data-testid="resend-again" on:change=move |ev| again.set(event_target_checked(&ev))/>
                    "Make another resend anyway"
                </label>
            })}
        </ConfirmDialog>
    }
}

#[component]
fn DuplicateButton(id: CampaignId) -> impl IntoView {
    let duplicate = ServerAction::<DuplicateCampaign>::new();
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(made)) = duplicate.value().get() {
            navigate(&format!("/campaigns/{made}"), Default::default());
        }
    });
    view! {
        <button type="button" class="btn-secondary" data-testid="duplicate-button"
            disabled=move || duplicate.pending().get()
            on:click=move |_| { duplicate.dispatch(DuplicateCampaign { id }); }>
            "Duplicate as a new draft"
        </button>
        <ActionError value=duplicate.value()/>
    }
}
