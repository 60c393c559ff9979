//! Herald's web UI: Leptos pages (server-rendered, then hydrated) and the server functions they
//! call. Server functions are thin: check the session and role, call one engine use case, map
//! its error. Everything under `ssr` is compiled into the server only.

#![recursion_limit = "256"]

pub mod access;
pub mod auth;
#[cfg(feature = "ssr")]
pub mod charts;
pub mod components;
pub mod error;
pub mod pages;
#[cfg(feature = "ssr")]
pub mod ssr;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{ParentRoute, Route, Router, Routes};
use leptos_router::path;

use components::shell::AppShell;
use pages::{
    account::overview::AccountPage,
    audience::fields::FieldsPage,
    audience::import::ImportPage,
    audience::imports::ImportsPage,
    audience::overview::AudiencePage,
    audience::reader::ReaderPage,
    audience::readers::ReadersPage,
    audience::segment::SegmentPage,
    audience::segments::SegmentsPage,
    audience::suppressions::SuppressionsPage,
    audience::tags::TagsPage,
    automations::editor::AutomationPage,
    automations::list::AutomationsPage,
    campaigns::editor::CampaignPage,
    campaigns::list::CampaignsPage,
    campaigns::stats::CampaignStatsPage,
    campaigns::templates::CampaignTemplatesPage,
    dashboard::DashboardPage,
    forgot_password::ForgotPasswordPage,
    invite::InvitePage,
    login::LoginPage,
    login_two_factor::LoginTwoFactorPage,
    media::MediaPage,
    new_workspace::NewWorkspacePage,
    not_found::NotFoundPage,
    reset_password::ResetPasswordPage,
    settings::api_keys::ApiKeysPage,
    settings::audit::AuditLogPage,
    settings::brand::BrandPage,
    settings::domains::SendingDomainsPage,
    settings::general::SettingsPage,
    settings::members::MembersPage,
    settings::sending::SendingPage,
    settings::webhook_endpoints::{WebhookEndpointPage, WebhookEndpointsPage},
    signup::SignupPage,
    signup_finish::SignupFinishPage,
    transactional::message::TransactionalMessagePage,
    transactional::overview::TransactionalPage,
    transactional::template::TxTemplatePage,
    transactional::templates::TxTemplatesPage,
    verify_email::VerifyEmailPage,
};

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <script src="/charts.js" defer nonce=leptos::nonce::use_nonce()></script>
                // Without it the browser asks for /favicon.ico, a 404 on every first visit.
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <MetaTags/>
            </head>
            <body class="bg-slate-50 text-slate-800 antialiased">
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="leptos" href="/pkg/herald.css"/>
        <Title text="Herald"/>
        <Router>
            <Routes fallback=NotFoundPage>
                <Route path=path!("/login") view=LoginPage/>
                <Route path=path!("/login/two-factor") view=LoginTwoFactorPage/>
                <Route path=path!("/verify-email") view=VerifyEmailPage/>
                <Route path=path!("/signup") view=SignupPage/>
                <Route path=path!("/signup/finish") view=SignupFinishPage/>
                <Route path=path!("/forgot-password") view=ForgotPasswordPage/>
                <Route path=path!("/reset-password") view=ResetPasswordPage/>
                <Route path=path!("/workspaces/new") view=NewWorkspacePage/>
                <Route path=path!("/invite/:token") view=InvitePage/>
                <ParentRoute path=path!("") view=AppShell>
                    <Route path=path!("") view=DashboardPage/>
                    <Route path=path!("/audience") view=AudiencePage/>
                    <Route path=path!("/audience/readers") view=ReadersPage/>
                    <Route path=path!("/audience/readers/:id") view=ReaderPage/>
                    <Route path=path!("/audience/suppressions") view=SuppressionsPage/>
                    <Route path=path!("/audience/segments") view=SegmentsPage/>
                    <Route path=path!("/audience/segments/:id") view=SegmentPage/>
                    <Route path=path!("/audience/tags") view=TagsPage/>
                    <Route path=path!("/audience/fields") view=FieldsPage/>
                    <Route path=path!("/audience/imports") view=ImportsPage/>
                    <Route path=path!("/audience/imports/:id") view=ImportPage/>
                    <Route path=path!("/automations") view=AutomationsPage/>
                    <Route path=path!("/automations/:id") view=AutomationPage/>
                    <Route path=path!("/campaigns") view=CampaignsPage/>
                    <Route path=path!("/media") view=MediaPage/>
                    // Before `/campaigns/:id`: the first route that matches wins.
                    <Route path=path!("/campaigns/templates") view=CampaignTemplatesPage/>
                    <Route path=path!("/campaigns/:id") view=CampaignPage/>
                    <Route path=path!("/campaigns/:id/stats") view=CampaignStatsPage/>
                    <Route path=path!("/transactional") view=TransactionalPage/>
                    <Route path=path!("/transactional/messages/:id") view=TransactionalMessagePage/>
                    <Route path=path!("/transactional/templates") view=TxTemplatesPage/>
                    <Route path=path!("/transactional/templates/:id") view=TxTemplatePage/>
                    <Route path=path!("/settings") view=SettingsPage/>
                    <Route path=path!("/settings/sending") view=SendingPage/>
                    <Route path=path!("/settings/domains") view=SendingDomainsPage/>
                    <Route path=path!("/settings/brand") view=BrandPage/>
                    <Route path=path!("/settings/members") view=MembersPage/>
                    <Route path=path!("/settings/api-keys") view=ApiKeysPage/>
                    <Route path=path!("/settings/webhooks") view=WebhookEndpointsPage/>
                    <Route path=path!("/settings/webhooks/:id") view=WebhookEndpointPage/>
                    <Route path=path!("/settings/audit") view=AuditLogPage/>
                    <Route path=path!("/account") view=AccountPage/>
                </ParentRoute>
            </Routes>
        </Router>
    }
}
