//! Who receives mail: lists, readers, subscriptions, the consent ledger and the suppression list.

pub mod aliases;
pub mod bulk;
pub mod consent;
pub mod export;
pub mod fields;
pub mod import;
pub mod lists;
pub mod public_entry;
pub mod readers;
pub mod segments;
pub mod subscribe;
pub mod suppressions;
pub mod tags;
