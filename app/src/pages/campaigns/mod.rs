//! `/campaigns…`: the list, the editor (split by concern), approval, progress, the recurring
//! view and the stats page.

pub mod ab_results;
pub mod ab_test;
pub mod approval;
pub mod block_editor;
pub mod detail;
pub mod editor;
pub mod editor_form;
pub mod editor_tabs;
pub mod fields;
pub mod list;
pub mod preview;
pub mod progress;
pub mod repeat;
pub mod resend;
pub mod send_panel;
pub mod stats;
pub mod templates;
