//! `/automations`: welcome mails and drip sequences.

pub mod editor;
pub mod list;

use herald_types::{ListId, TagId, Trigger};

/// The trigger in words, with the workspace's list and tag names.
pub fn trigger_text(t: &Trigger, lists: &[(ListId, String)], tags: &[(TagId, String)]) -> String {
    let named = |found: Option<&String>| found.map_or_else(|| "(deleted)".to_string(), |n| format!("“{n}”"));
    match t {
        Trigger::ListConfirmed { list_id } => {
            format!("A reader is confirmed on {}", named(lists.iter().find(|(id, _)| id == list_id).map(|(_, n)| n)))
        }
        Trigger::TagAdded { tag_id } => {
            format!("A reader gets the tag {}", named(tags.iter().find(|(id, _)| id == tag_id).map(|(_, n)| n)))
        }
        Trigger::Event { name } => format!("The API reports the event “{name}”"),
        Trigger::SegmentEntered { .. } => "A reader comes into a segment".to_string(),
        Trigger::DateAnniversary { field } => format!("The anniversary of a reader's “{field}”"),
    }
}
