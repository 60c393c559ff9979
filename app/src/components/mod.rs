pub mod chart;
pub mod shell;
pub mod timezone;
pub mod ui;
pub mod upload;
