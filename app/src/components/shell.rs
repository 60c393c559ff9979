//! The logged-in frame: navigation, the workspace switcher and the account menu. Pages render
//! inside it through `<Outlet/>` and read the session summary from context.

use leptos::prelude::*;
use leptos_router::components::{A, Outlet, Redirect};
use leptos_router::hooks::use_location;

use crate::auth::{Logout, SessionInfo, SwitchWorkspace, get_session_info};
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
        <Suspense fallback=|| view! { <div class="p-8 text-slate-400">"Loading…"</div> }>
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
    let logout = ServerAction::<Logout>::new();
    let current = info.current.clone().unwrap_or_else(unreachable_workspace);
    let current_id = current.id.clone();
    let nav = [
        ("/", "Dashboard"),
        ("/audience", "Audience"),
        ("/campaigns", "Campaigns"),
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
                        <label for="workspace-switcher" class="px-2 text-xs font-medium uppercase text-slate-400">"Workspace"</label>
                        <div class="flex gap-1">
                            <select id="workspace-switcher" name="workspace_id" data-testid="workspace-switcher"
                                class="w-full rounded-md border-slate-300 text-sm">
                                {info.workspaces.iter().map(|w| {
                                    let selected = w.id == current_id;
                                    view! { <option value=w.id.clone() selected=selected>{w.name.clone()}</option> }
                                }).collect_view()}
                            </select>
                            <button type="submit" class="btn-secondary px-2 text-xs" title="Switch workspace">"Go"</button>
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
                    <div class="text-xs text-slate-400">{current.name.clone()} " · " {current.role.clone()}</div>
                    <ActionForm action=logout attr:class="mt-2">
                        <button type="submit" class="text-sm text-slate-500 hover:text-slate-900">"Log out"</button>
                    </ActionForm>
                </div>
            </aside>
            <main class="min-w-0 flex-1 px-4 py-6 md:px-10 md:py-8">
                <div class="mx-auto max-w-5xl">
                    <Outlet/>
                </div>
            </main>
        </div>
    }
}

fn unreachable_workspace() -> crate::auth::WorkspaceItem {
    crate::auth::WorkspaceItem { id: String::new(), name: String::new(), slug: String::new(), role: "viewer".into() }
}
