pub mod shell;
pub mod timezone;
pub mod ui;
