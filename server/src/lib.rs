//! The `herald` binary's library half: configuration, router, sessions, workers and CLI.
//! `main.rs` only calls [`cli::run`]; tests call [`startup::Application::build`].

pub mod cli;
pub mod config;
pub mod metrics;
pub mod routes;
pub mod security;
pub mod seed;
pub mod sessions;
pub mod startup;
