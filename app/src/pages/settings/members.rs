//! `/settings/members`: who is in the workspace, their roles, and pending invites.

use herald_types::{InviteId, Member, PendingInvite, Role, UserId};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, ConfirmDialog, LoadError, LocalTimeOf};
use crate::error::AppError;
use crate::pages::settings::SettingsTabs;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MembersView {
    pub members: Vec<Member>,
    pub invites: Vec<PendingInvite>,
    /// The member looking at the page.
    pub me: UserId,
    pub can_manage: bool,
    pub is_owner: bool,
    pub require_two_factor: bool,
    pub require_send_approval: bool,
}

#[server(prefix = "/rpc", endpoint = "list_members")]
pub async fn list_members() -> Result<MembersView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, invites, workspaces};
    let m = require_role(Role::Viewer).await?;
    let members = workspaces::members(&m.state.db, m.tenant).await?;
    // Viewers and authors see the team but not the addresses of people not yet in it.
    let invites = if m.role.can_administer() { invites::pending(&m.state.db, m.tenant).await? } else { Vec::new() };
    let require_two_factor = herald_engine::two_factor::workspace_requires(&m.state.db, m.tenant).await?;
    let require_send_approval = herald_engine::campaigns::approval::required(&m.state.db, m.tenant).await?;
    Ok(MembersView {
        members,
        invites,
        me: m.user,
        can_manage: m.role.can_administer(),
        is_owner: m.role == Role::Owner,
        require_two_factor,
        require_send_approval,
    })
}

/// The workspace's rules for every member: two-factor login, and approval before a send.
/// Checkboxes: a field is present when ticked.
#[server(prefix = "/rpc", endpoint = "save_team_rules")]
pub async fn save_team_rules(two_factor: Option<String>, send_approval: Option<String>) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    let m = require_role(Role::Admin).await?;
    let ticked = |v: Option<String>| v.is_some_and(|v| v == "on" || v == "true");
    let (two_factor, send_approval) = (ticked(two_factor), ticked(send_approval));
    herald_engine::two_factor::set_workspace_requirement(&m.state.db, m.tenant, m.user, m.role, two_factor).await?;
    herald_engine::campaigns::approval::set_required(&m.state.db, m.tenant, m.role, send_approval).await?;
    let detail = serde_json::json!({ "require_two_factor": two_factor, "require_send_approval": send_approval });
    m.audit(herald_engine::audit::Action::TeamRulesChanged, "", detail).await;
    Ok(())
}

/// A member's address for the audit log (their id if the account is gone).
#[cfg(feature = "ssr")]
async fn member_email(m: &crate::ssr::Member, user: herald_engine::UserId) -> String {
    herald_engine::users::get_user(&m.state.db, user).await.map(|u| u.email).unwrap_or_else(|_| user.to_string())
}

#[server(prefix = "/rpc", endpoint = "invite_member")]
pub async fn invite_member(email: String, role: Role) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Email, invites};
    let m = require_role(Role::Admin).await?;
    let email = Email::parse(&email)?;
    let s = &m.state;
    invites::invite_and_mail(&s.db, &s.signer, &s.jobs, &s.base_url, m.tenant, m.user, m.role, &email, role).await?;
    m.audit(herald_engine::audit::Action::MemberInvited, email.as_str(), serde_json::json!({ "role": role.as_str() }))
        .await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "change_member_role")]
pub async fn change_member_role(user_id: UserId, role: Role) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::workspaces;
    let m = require_role(Role::Admin).await?;
    let user = user_id;
    workspaces::set_role(&m.state.db, m.tenant, m.role, user, role).await?;
    m.audit(
        herald_engine::audit::Action::MemberRoleChanged,
        member_email(&m, user).await,
        serde_json::json!({ "role": role.as_str() }),
    )
    .await;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "remove_member")]
pub async fn remove_member(user_id: UserId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::workspaces;
    let m = require_role(Role::Admin).await?;
    let user = user_id;
    let email = member_email(&m, user).await;
    workspaces::remove_member(&m.state.db, m.tenant, m.role, user).await?;
    m.audit(herald_engine::audit::Action::MemberRemoved, email, serde_json::json!({})).await;
    Ok(())
}

/// Leaves the current workspace (any role; not its only owner), then shows another one.
#[server(prefix = "/rpc", endpoint = "leave_workspace")]
pub async fn leave_workspace() -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, workspaces};
    let m = require_role(Role::Viewer).await?;
    workspaces::leave(&m.state.db, m.tenant, m.user).await?;
    m.audit(herald_engine::audit::Action::MemberLeft, member_email(&m, m.user).await, serde_json::json!({})).await;
    leptos_axum::redirect("/");
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "revoke_invite")]
pub async fn revoke_invite(invite_id: InviteId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, invites};
    let m = require_role(Role::Admin).await?;
    let id = invite_id;
    invites::revoke(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::InviteWithdrawn, id, serde_json::json!({})).await;
    Ok(())
}

#[component]
pub fn MembersPage() -> impl IntoView {
    let invite = ServerAction::<InviteMember>::new();
    let change = ServerAction::<ChangeMemberRole>::new();
    let remove = ServerAction::<RemoveMember>::new();
    let revoke = ServerAction::<RevokeInvite>::new();
    let rule = ServerAction::<SaveTeamRules>::new();
    let data = Resource::new(
        move || {
            (
                invite.version().get(),
                change.version().get(),
                remove.version().get(),
                revoke.version().get(),
                rule.version().get(),
            )
        },
        |_| list_members(),
    );
    view! {
        <SettingsTabs active="/settings/members"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! {
                        <MembersBody v=v.clone() invite=invite change=change remove=remove revoke=revoke/>
                        {v.can_manage.then(|| view! {
                            <TeamRules two_factor=v.require_two_factor send_approval=v.require_send_approval rule=rule/>
                        })}
                    }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
        <LeaveWorkspace/>
    }
}

/// Rules every member of the workspace follows.
#[component]
fn TeamRules(two_factor: bool, send_approval: bool, rule: ServerAction<SaveTeamRules>) -> impl IntoView {
    view! {
        <Card title="Team rules">
            <ActionForm action=rule attr:class="space-y-3">
                <label class="flex items-start gap-3 text-sm">
                    <input type="checkbox" name="two_factor" value="on" checked=two_factor class="mt-0.5"/>
                    <span>
                        <span class="font-medium text-slate-800">"Require two-factor authentication"</span>
                        <span class="block text-slate-500">
                            "Members without it see only a request to turn it on until they do. You need it yourself to turn this on."
                        </span>
                    </span>
                </label>
                <label class="flex items-start gap-3 text-sm">
                    <input type="checkbox" name="send_approval" value="on" checked=send_approval class="mt-0.5"/>
                    <span>
                        <span class="font-medium text-slate-800">"Require approval before a campaign is sent"</span>
                        <span class="block text-slate-500">
                            "Authors write campaigns and ask for them to go out; an owner or admin approves or turns down each request."
                        </span>
                    </span>
                </label>
                <button type="submit" class="btn-secondary" disabled=move || rule.pending().get()>"Save rules"</button>
                <span class="ml-3 text-sm text-emerald-700" role="status" data-testid="rules-saved">
                    {move || (!rule.pending().get() && rule.value().get().is_some_and(|r| r.is_ok())).then_some("Saved.")}
                </span>
                <ActionError value=rule.value()/>
            </ActionForm>
        </Card>
    }
}

#[component]
fn LeaveWorkspace() -> impl IntoView {
    let leave = ServerAction::<LeaveWorkspace>::new();
    let confirm = RwSignal::new(false);
    view! {
        <Card title="Leave this workspace">
            <p class="mb-4 text-sm text-slate-500">
                "You lose access at once; an admin can invite you again. The only owner cannot leave: make someone else owner first."
            </p>
            <button type="button" class="btn-secondary text-red-700" on:click=move |_| confirm.set(true)>"Leave workspace"</button>
            <ActionError value=leave.value()/>
            <ConfirmDialog open=confirm title="Leave this workspace?" confirm_label="Leave" danger=true
                on_confirm=Callback::new(move |_| { leave.dispatch(LeaveWorkspace {}); })>
                "You will no longer see its audience, campaigns or settings."
            </ConfirmDialog>
        </Card>
    }
}

#[component]
fn MembersBody(
    v: MembersView,
    invite: ServerAction<InviteMember>,
    change: ServerAction<ChangeMemberRole>,
    remove: ServerAction<RemoveMember>,
    revoke: ServerAction<RevokeInvite>,
) -> impl IntoView {
    let can_manage = v.can_manage;
    let me = v.me;
    let roles: &'static [&'static str] =
        if v.is_owner { &["owner", "admin", "author", "viewer"] } else { &["admin", "author", "viewer"] };
    let sent_to = move || match invite.value().get() {
        Some(Ok(())) => Some("Invite sent."),
        _ => None,
    };
    view! {
        {can_manage.then(|| view! {
            <Card title="Invite a teammate">
                <ActionForm action=invite attr:class="flex flex-wrap items-end gap-3">
                    <div class="min-w-64 flex-1">
                        <label for="invite-email" class="label">"Email"</label>
                        <input id="invite-email" name="email" type="email" required class="input" placeholder="name@example.com"/>
                    </div>
                    <div>
                        <label for="invite-role" class="label">"Role"</label>
                        <select id="invite-role" name="role" class="input">
                            <option value="author" selected>"Author — audience and campaigns"</option>
                            <option value="admin">"Admin — also members, settings, API keys"</option>
                            <option value="viewer">"Viewer — read only"</option>
                        </select>
                    </div>
                    <button type="submit" class="btn-primary" disabled=move || invite.pending().get()>"Send invite"</button>
                </ActionForm>
                <p class="mt-2 text-sm text-emerald-600" role="status">{sent_to}</p>
                <ActionError value=invite.value()/>
            </Card>
        })}
        <Card title="Members">
            <ActionError value=change.value()/>
            <ActionError value=remove.value()/>
            <table class="w-full text-left text-sm" data-testid="members-table">
                <thead class="text-xs uppercase text-slate-500">
                    <tr><th class="py-2">"Member"</th><th>"Role"</th><th>"Joined"</th><th></th></tr>
                </thead>
                <tbody class="divide-y divide-slate-100">
                    {v.members.into_iter().map(|m| {
                        let uid = m.user_id.to_string();
                        let uid2 = uid.clone();
                        let current_role = m.role.as_str();
                        let is_me = m.user_id == me;
                        let editable = can_manage && (roles.contains(&m.role.as_str()));
                        view! {
                            <tr>
                                <td class="py-3">
                                    <div class="font-medium text-slate-800">
                                        {m.email.clone()} {is_me.then_some(" (you)")}
                                        {m.two_factor.then(|| view! {
                                            <span class="badge ml-2 bg-emerald-100 text-emerald-800" title="Logs in with two-factor authentication">"2FA"</span>
                                        })}
                                    </div>
                                    <div class="text-xs text-slate-500">{m.name.clone()}</div>
                                </td>
                                <td>
                                    {if editable {
                                        view! {
                                            <ActionForm action=change attr:class="flex items-center gap-2">
                                                <input type="hidden" name="user_id" value=uid/>
                                                <select name="role" class="rounded-md border-slate-300 text-sm" aria-label=format!("Role of {}", m.email)>
                                                    {roles.iter().map(|r| view! { <option value=*r selected=*r == current_role>{*r}</option> }).collect_view()}
                                                </select>
                                                <button type="submit" class="link-button text-indigo-600">"Change"</button>
                                            </ActionForm>
                                        }.into_any()
                                    } else {
                                        view! { <span class="badge">{m.role.as_str()}</span> }.into_any()
                                    }}
                                </td>
                                <td class="text-slate-500"><LocalTimeOf at=m.joined_at/></td>
                                <td class="text-right">
                                    {(editable && !is_me).then(|| view! {
                                        <ActionForm action=remove>
                                            <input type="hidden" name="user_id" value=uid2/>
                                            <button type="submit" class="link-button text-red-600">"Remove"</button>
                                        </ActionForm>
                                    })}
                                </td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </Card>
        {(can_manage && !v.invites.is_empty()).then(|| view! {
            <Card title="Pending invites">
                <ActionError value=revoke.value()/>
                <ul class="divide-y divide-slate-100 text-sm" data-testid="pending-invites">
                    {v.invites.into_iter().map(|i| view! {
                        <li class="flex items-center justify-between py-2">
                            <span>{i.email} " · " <span class="badge">{i.role.as_str()}</span>
                                <span class="ml-2 text-xs text-slate-500">"expires " <LocalTimeOf at=i.expires_at/></span></span>
                            <ActionForm action=revoke>
                                <input type="hidden" name="invite_id" value=i.id.to_string()/>
                                <button type="submit" class="link-button text-red-600">"Withdraw"</button>
                            </ActionForm>
                        </li>
                    }).collect_view()}
                </ul>
            </Card>
        })}
    }
}
