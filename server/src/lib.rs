//! The `herald` binary's library half: configuration, router, sessions, workers and CLI.
//! `main.rs` only calls [`cli::run`]; tests call [`startup::Application::build`].

pub mod cli;
pub mod config;
#[cfg(feature = "lab")]
pub mod lab;
pub mod metrics;
pub mod routes;
pub mod security;
#[cfg(feature = "lab")]
pub mod seed;
pub mod sessions;
pub mod signals;
pub mod startup;
