//! Campaigns and the send engine. See `delivery` for the exactly-once argument.

pub mod ab_test;
pub mod approval;
pub mod approval_rule;
pub mod brand;
pub mod compose;
pub mod delivery;
pub mod fair_share;
pub mod fanout;
pub mod feed_fetch;
pub mod lifecycle;
pub mod preview;
pub mod progress;
pub mod readiness;
pub mod recurring;
pub mod resend;
pub mod stats;
pub mod store;
pub mod tally;
pub mod targeting;
pub mod templates;
pub mod warmup;
pub mod web_version;
