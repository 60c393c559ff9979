//! The logged-in frame: navigation, the workspace switcher and the account menu. Pages render
//! inside it through `<Outlet/>` and read the session summary from context.

use leptos::prelude::*;
use leptos_router::components::{A, Outlet, Redirect};
use leptos_router::hooks::use_location;

use crate::auth::{Logout, ResendVerification, SessionInfo, SwitchWorkspace, get_session_info};
use crate::components::ui::LoadError;

/// The session summary, provided to every page inside the shell.
#[derive(Clone, Debug)]
pub struct Current(pub SessionInfo);

pub fn use_current() -> SessionInfo {
    expect_context::<Current>().0
}

#[component]
pub fn AppShell() -> impl IntoView {
    let info = Resource::new(|| (), |_| get_session_info());
    let location = use_location();
    view! {
        <Suspense fallback=|| view! { <div class="p-8 text-slate-500">"Loading…"</div> }>
            {move || Suspend::new(async move {
                match info.await {
                    Ok(Some(info)) if info.current.is_some() => {
                        provide_context(Current(info.clone()));
                        view! { <Frame info=info/> }.into_any()
                    }
                    Ok(Some(_)) => view! { <Redirect path="/workspaces/new"/> }.into_any(),
                    Ok(None) => {
                        let next = location.pathname.get_untracked();
                        view! { <Redirect path=format!("/login?next={next}")/> }.into_any()
                    }
                    Err(e) => view! { <div class="p-8"><LoadError error=e/></div> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Frame(info: SessionInfo) -> impl IntoView {
    let switch = ServerAction::<SwitchWorkspace>::new();
    // Every page shows the workspace's data: once switched, load the dashboard afresh (a client
    // route change to "/" from "/" would keep the old workspace's page).
    Effect::new(move |_| {
        if let Some(Ok(())) = switch.value().get() {
            #[cfg(feature = "hydrate")]
            {
                let _ = leptos::prelude::window().location().set_href("/");
            }
        }
    });
    let logout = ServerAction::<Logout>::new();
    let current = info.current.clone().unwrap_or_else(unreachable_workspace);
    let current_id = current.id.clone();
    let two_factor_required = info.two_factor_required;
    let nav = [
        ("/", "Dashboard"),
        ("/audience", "Audience"),
        ("/campaigns", "Campaigns"),
        ("/automations", "Automations"),
        ("/media", "Media"),
        ("/transactional", "Transactional"),
        ("/settings", "Settings"),
    ];
    // Below 768 px the sidebar is a menu behind a button; it closes again after each navigation.
    let menu_open = RwSignal::new(false);
    let location = use_location();
    Effect::new(move |_| {
        location.pathname.track();
        menu_open.set(false);
    });
    let aside_class = move || {
        if menu_open.get() {
            "fixed inset-y-0 left-0 z-40 flex w-64 flex-col overflow-y-auto border-r border-slate-200 bg-white shadow-xl"
        } else {
            "hidden w-60 shrink-0 flex-col border-r border-slate-200 bg-white md:flex"
        }
    };
    view! {
        <div class="flex min-h-screen flex-col bg-slate-50 md:flex-row">
            <header class="flex items-center justify-between border-b border-slate-200 bg-white px-4 py-3 md:hidden">
                <span class="text-lg font-bold tracking-tight text-indigo-600">"Herald"</span>
                <button type="button" class="btn-secondary px-3 py-1.5" aria-controls="app-sidebar"
                    aria-expanded=move || menu_open.get().to_string()
                    on:click=move |_| menu_open.update(|o| *o = !*o)>
                    {move || if menu_open.get() { "Close" } else { "Menu" }}
                </button>
            </header>
            {move || menu_open.get().then(|| view! {
                <div class="fixed inset-0 z-30 bg-slate-900/30 md:hidden" aria-hidden="true"
                    on:click=move |_| menu_open.set(false)></div>
            })}
            <aside id="app-sidebar" class=aside_class>
                <div class="px-5 py-5 text-xl font-bold tracking-tight text-indigo-600">"Herald"</div>
                <div class="px-3">
                    <ActionForm action=switch attr:class="space-y-1" attr:aria-label="Switch workspace">
                        <label for="workspace-switcher" class="px-2 text-xs font-medium uppercase text-slate-500">"Workspace"</label>
                        <div class="flex gap-1">
                            // Choosing is switching (the button is for a browser without scripts,
                            // and shows when reached by keyboard).
                            <select id="workspace-switcher" name="workspace_id" data-testid="workspace-switcher"
                                class="input min-h-11 w-full"
                                on:change=move |ev| { switch.dispatch(SwitchWorkspace { workspace_id: event_target_value(&ev) }); }>
                                {info.workspaces.iter().map(|w| {
                                    let selected = w.id == current_id;
                                    view! { <option value=w.id.clone() selected=selected>{w.name.clone()}</option> }
                                }).collect_view()}
                            </select>
                            <button type="submit" class="btn-secondary sr-only px-2 text-xs focus:not-sr-only">"Switch"</button>
                        </div>
                    </ActionForm>
                    <a href="/workspaces/new" class="mt-1 block px-2 text-xs text-indigo-600 hover:underline">"+ New workspace"</a>
                </div>
                <nav class="mt-6 flex-1 space-y-1 px-3" aria-label="Main">
                    {nav.into_iter().map(|(href, label)| view! {
                        <A href=href exact=href == "/" attr:class="nav-link">{label}</A>
                    }).collect_view()}
                    {info.dev_mode.then(|| view! {
                        <a href="/dev/inbox" class="nav-link" target="_blank">"Dev inbox ↗"</a>
                    })}
                </nav>
                <div class="border-t border-slate-200 p-4 text-sm">
                    <a href="/account" class="block truncate font-medium text-slate-700 hover:text-indigo-700" data-testid="current-user"
                        title="Your account">{info.email.clone()}</a>
                    <div class="text-xs text-slate-500">{current.name.clone()} " · " {current.role.as_str()}</div>
                    <ActionForm action=logout attr:class="mt-2">
                        <button type="submit" class="text-sm text-slate-500 hover:text-slate-900">"Log out"</button>
                    </ActionForm>
                </div>
            </aside>
            <main class="min-w-0 flex-1 px-4 py-6 md:px-10 md:py-8">
                <div class="mx-auto max-w-5xl">
                    {(!info.email_verified).then(|| view! { <VerifyEmailBanner email=info.email.clone()/> })}
                    {move || {
                        // The account page stays reachable: it is where two-factor is turned on.
                        let blocked = two_factor_required && location.pathname.get() != "/account";
                        if blocked { view! { <TwoFactorRequired/> }.into_any() } else { view! { <Outlet/> }.into_any() }
                    }}
                </div>
            </main>
        </div>
    }
}

/// Until the sign-up link is opened: what is held back, and a way to get a new link.
#[component]
fn VerifyEmailBanner(email: String) -> impl IntoView {
    let resend = ServerAction::<ResendVerification>::new();
    view! {
        <div role="status" class="mb-6 flex flex-wrap items-center justify-between gap-3 rounded-lg border border-amber-200 bg-amber-50 px-4 py-3 text-sm text-amber-900"
            data-testid="verify-email-banner">
            <span>
                "Confirm your address: we sent a link to " <strong>{email}</strong>
                ". Until you open it you cannot send campaigns, create API keys or join workspaces."
            </span>
            <ActionForm action=resend>
                <button type="submit" class="btn-secondary px-3 py-1 text-xs" disabled=move || resend.pending().get()>
                    {move || match resend.value().get() {
                        Some(Ok(())) => "Sent: check your inbox",
                        _ => "Send the link again",
                    }}
                </button>
            </ActionForm>
            <crate::components::ui::ActionError value=resend.value()/>
        </div>
    }
}

/// Shown instead of a page of a workspace that requires two-factor, to a member without it.
#[component]
fn TwoFactorRequired() -> impl IntoView {
    view! {
        <section class="rounded-xl border border-slate-200 bg-white p-8 text-center shadow-sm" data-testid="two-factor-required">
            <h1 class="text-lg font-semibold text-slate-900">"Two-factor authentication required"</h1>
            <p class="mt-2 text-sm text-slate-600">
                "This workspace asks every member to log in with a code from an authenticator app as well as a password."
            </p>
            <a href="/account" class="btn-primary mt-4">"Turn it on in your account"</a>
        </section>
    }
}

fn unreachable_workspace() -> crate::auth::WorkspaceItem {
    crate::auth::WorkspaceItem {
        id: String::new(),
        name: String::new(),
        slug: String::new(),
        role: herald_types::Role::Viewer,
    }
}
