pub mod api;
pub mod dev_inbox;
pub mod export;
pub mod health;
pub mod imports;
pub mod public;
pub mod session_auth;
