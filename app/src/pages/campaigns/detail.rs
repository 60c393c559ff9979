//! What the campaign editor shares with its panels (preview, send, progress): the campaign as
//! they load it, and what waits for the next save. Here, below all of them, so the panels need
//! not import the editor that places them.

use herald_types::{Campaign, FieldError};
use serde::{Deserialize, Serialize};

/// A campaign as the editor and the progress view load it: the stored campaign (its fields
/// flattened into this object) and what this member may do with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CampaignDetail {
    #[serde(flatten)]
    pub campaign: Campaign,
    pub can_edit: bool,
    /// The workspace has no postal address yet: sending will be refused.
    pub postal_address_missing: bool,
    /// The workspace requires approval and this member cannot give it: "Send" asks for it.
    pub approval_needed: bool,
    /// An owner or admin: may approve a request.
    pub can_approve: bool,
    /// The latest approval request, if any was made.
    pub approval: Option<herald_types::ApprovalRequest>,
    /// Merge tags nobody provides (a typo renders as nothing), by field: shown, never blocking.
    pub warnings: Vec<FieldError>,
}

/// What waits for the autosave before it runs, so it acts on what the author sees.
#[derive(Clone, Debug, PartialEq)]
pub enum AfterSave {
    TestSend(String),
    SendNow,
    Schedule { at: String, timezone: String },
}
