pub mod api;
pub mod dev_inbox;
pub mod health;
pub mod public;
