//! Sending: everything between "this message, to this address" and an SMTP server's reply, used
//! alike by campaigns, transactional mail and account mail. The feature modules (`audience`,
//! `campaigns`, `transactional`, …) build on it; nothing here imports them.
//!
//! - `identities`: which SMTP server and sender a workspace uses, with its limits and DKIM key;
//!   `domains`: the sending domains a workspace proved it owns.
//! - `message` and `template_sandbox`: templates to a signed MIME message, in a sandboxed child
//!   (`message/`: content, template, escape, layout, text, mime, dkim).
//! - `smtp`: the hand-written pipelined client (`smtp/`: url, error, stream, connection, blast); `lease`: row leases and the fence that
//!   stops a transaction once its lease may be gone; `rate`: Postgres token buckets.
//! - `mail` and `mail_quota`: Herald's own mail (sign-up, invites), and its per-recipient limit.

pub mod domains;
pub mod identities;
pub mod lease;
pub mod mail;
pub mod mail_quota;
pub mod message;
pub mod rate;
pub mod smtp;
pub mod template_sandbox;
