//! Integration tests: the real app on a random port, a fresh Postgres database per test (copied
//! from a template migrated once per run), real SMTP into the project's own mail sink.
//! Needs `DATABASE_URL` (`make test` provides one). Whatever role it names, the tests migrate and
//! run as an ordinary owner that is not a superuser, as on managed Postgres
//! (`herald_devtools::ordinary_owner`).

mod helpers;

mod ab_tests;
mod access;
mod account_limits;
mod account_security;
mod accounts;
mod api_keys;
mod audience;
mod audience_api;
mod audit_log;
mod automation_steps;
mod automations;
mod bench_import;
mod brand;
mod campaigns_api;
mod chaos;
mod cli;
mod database;
mod dns;
mod eligibility_at_delivery;
mod email_verification;
mod fields;
mod idempotency;
mod imports;
mod imports_api;
mod invites;
mod media;
mod operability;
mod outbound_webhooks;
mod owner_role;
mod public_forms;
mod recurring;
mod render_freeze;
mod resends;
mod roles;
mod security;
mod segment_counts;
mod segments;
mod send_approval;
mod send_engine;
mod sending;
mod sending_domains;
mod soft_failures;
mod sql_files;
mod statement_bounds;
mod stored_states;
mod tags;
mod template_limits;
mod tenancy;
mod tracking;
mod transactional;
mod two_factor;
mod warmup;
mod web_version;
mod webhooks;
