//! Sending: everything between "this message, to this address" and an SMTP server's reply, used
//! alike by campaigns, transactional mail and account mail. The feature modules (`audience`,
//! `campaigns`, `transactional`, …) build on it; nothing here imports them.
//!
//! - `identities`: which SMTP server and sender a workspace uses, with its limits and DKIM key;
//!   `domains`: the sending domains a workspace proved it owns.
//! - `render` and `template_sandbox`: templates to a signed MIME message, in a sandboxed child.
//! - `smtp_client`: the hand-written pipelined client; `lease`: row leases and the fence that
//!   stops a transaction once its lease may be gone; `rate`: Postgres token buckets.
//! - `mail` and `mail_quota`: Herald's own mail (sign-up, invites), and its per-recipient limit.

pub mod domains;
pub mod identities;
pub mod lease;
pub mod mail;
pub mod mail_quota;
pub mod rate;
pub mod render;
pub mod smtp_client;
pub mod template_sandbox;
