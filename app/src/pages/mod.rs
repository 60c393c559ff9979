//! One file per route, in folders by area that match the routes (`/audience/readers` is
//! `audience/readers.rs`; see `crate::App` for the route table).
//!
//! **The hydration rule: every `Resource` of a page is created at the top of its route
//! component, before any `Suspense` or `Transition`, unconditionally and in a fixed order; a
//! component built inside a `Suspend` takes its resources as props.** Resources find their
//! server-rendered data by a per-request counter. On the server, Leptos runs a `Suspend`'s body
//! more than once (a dry run while data is pending, a double-check, then the real render), and
//! every run that builds a component which makes a `Resource` takes numbers; the browser
//! hydrates the body once. Pages render inside `AppShell`'s `Suspend`, so a resource made one
//! level further in (inside a page's own `Transition`) got another resource's number in the
//! browser, decoded nothing, hydrated as "pending" and panicked ("expected a marker node") where
//! the server had rendered its data. The crawler (`end2end/tests/crawler.spec.ts`) loads every
//! route directly with data in every state and fails on such an error.

pub mod account;
pub mod audience;
pub mod automations;
pub mod campaigns;
pub mod dashboard;
pub mod forgot_password;
pub mod invite;
pub mod login;
pub mod login_two_factor;
pub mod media;
pub mod new_workspace;
pub mod not_found;
pub mod reset_password;
pub mod settings;
pub mod signup;
pub mod signup_finish;
pub mod transactional;
pub mod verify_email;
