pub mod api;
pub mod dev_inbox;
pub mod export;
pub mod health;
pub mod public;
