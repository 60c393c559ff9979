pub mod shell;
pub mod ui;
