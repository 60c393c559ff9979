//! The workspace audit log's entries, as the log page and the REST API show them (the engine
//! writes and reads them: `herald_engine::audit`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

macro_rules! audit_actions {
    ($($variant:ident = $name:literal, $label:literal;)*) => {
        /// Everything the log records. The names are stable (the API returns them).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
        pub enum AuditAction { $(#[serde(rename = $name)] $variant,)* }

        impl AuditAction {
            pub const ALL: &'static [AuditAction] = &[$(AuditAction::$variant,)*];

            pub const fn as_str(self) -> &'static str {
                match self { $(AuditAction::$variant => $name,)* }
            }

            /// What the log page says.
            pub const fn label(self) -> &'static str {
                match self { $(AuditAction::$variant => $label,)* }
            }

            pub fn parse(s: &str) -> Option<AuditAction> {
                match s { $($name => Some(AuditAction::$variant),)* _ => None }
            }
        }
    };
}

audit_actions! {
    CampaignSent = "campaign.sent", "Sent a campaign";
    CampaignScheduled = "campaign.scheduled", "Scheduled a campaign";
    CampaignUnscheduled = "campaign.unscheduled", "Unscheduled a campaign";
    CampaignPaused = "campaign.paused", "Paused a campaign";
    CampaignResumed = "campaign.resumed", "Resumed a campaign";
    CampaignCancelled = "campaign.cancelled", "Cancelled a campaign";
    CampaignStopped = "campaign.stopped", "Stopped a recurring campaign";
    WinnerPicked = "campaign.winner_picked", "Picked an A/B test's winner";
    ApprovalRequested = "campaign.approval_requested", "Asked for approval to send";
    ApprovalGiven = "campaign.approved", "Approved a send";
    ApprovalRejected = "campaign.approval_rejected", "Turned down a send";
    SettingsChanged = "settings.changed", "Changed the workspace settings";
    SendingPolicyChanged = "sending_policy.changed", "Changed the sending policy";
    TeamRulesChanged = "team_rules.changed", "Changed the team rules";
    IdentitySaved = "identity.saved", "Saved an SMTP identity";
    IdentityDeleted = "identity.deleted", "Deleted an SMTP identity";
    DomainAdded = "domain.added", "Added a sending domain";
    DomainDeleted = "domain.deleted", "Removed a sending domain";
    MemberInvited = "member.invited", "Invited a member";
    InviteWithdrawn = "invite.withdrawn", "Withdrew an invite";
    MemberJoined = "member.joined", "Joined the workspace";
    MemberRoleChanged = "member.role_changed", "Changed a member's role";
    MemberRemoved = "member.removed", "Removed a member";
    MemberLeft = "member.left", "Left the workspace";
    ApiKeyCreated = "api_key.created", "Created an API key";
    ApiKeyRevoked = "api_key.revoked", "Revoked an API key";
    ImportStarted = "import.started", "Started an import";
    ExportDownloaded = "export.downloaded", "Exported readers";
    ReaderErased = "reader.erased", "Erased a reader";
    SuppressionRemoved = "suppression.removed", "Removed a suppression";
    WebhookConfigured = "webhook.configured", "Configured a provider webhook";
    WebhookRotated = "webhook.rotated", "Rotated a provider webhook's address";
    AccountSuspended = "account.suspended", "Suspended the workspace's account";
    AccountReinstated = "account.reinstated", "Lifted the account's suspension";
    TransactionalResumed = "transactional.resumed", "Resumed transactional sending after the guard paused it";
}

string_enum! {
    /// Who acted: a member (by their email), an API key (by its name), or the installation's
    /// operator at the command line.
    ActorKind, invalid = "unknown actor kind" {
        User = "user",
        ApiKey = "api_key",
        Operator = "operator",
    }
}

/// One entry of the log. The actor's name is kept as it was when the entry was written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor_kind: ActorKind,
    pub actor: String,
    pub action: AuditAction,
    /// What was acted on: a campaign id, an address, a key's name.
    pub object: String,
    /// What else a reader of the log needs (a new role, a time); `{}` when nothing.
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub detail: serde_json::Value,
    pub ip: String,
}

impl AuditEntry {
    /// The detail as one line of JSON, empty when there is none.
    pub fn detail_text(&self) -> String {
        match &self.detail {
            serde_json::Value::Object(o) if o.is_empty() => String::new(),
            serde_json::Value::Null => String::new(),
            d => d.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Some(*a));
            assert!(seen.insert(a.as_str()), "{} twice", a.as_str());
            assert_eq!(serde_json::to_value(a).ok(), Some(serde_json::Value::String(a.as_str().into())));
        }
        assert_eq!(AuditAction::parse("campaign.exploded"), None);
    }

    #[test]
    fn empty_detail_reads_as_nothing() {
        let mut e = AuditEntry {
            id: 1,
            at: DateTime::<Utc>::MIN_UTC,
            actor_kind: ActorKind::User,
            actor: "a@b.example".into(),
            action: AuditAction::CampaignSent,
            object: String::new(),
            detail: serde_json::json!({}),
            ip: String::new(),
        };
        assert_eq!(e.detail_text(), "");
        e.detail = serde_json::json!({ "role": "admin" });
        assert_eq!(e.detail_text(), r#"{"role":"admin"}"#);
    }
}
