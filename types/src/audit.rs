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
    AutomationStarted = "automation.started", "Turned an automation on";
    AutomationPaused = "automation.paused", "Paused an automation";
    AutomationArchived = "automation.archived", "Archived an automation";
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
    EndpointCreated = "webhook_endpoint.created", "Added a webhook endpoint";
    EndpointChanged = "webhook_endpoint.changed", "Changed a webhook endpoint";
    EndpointDeleted = "webhook_endpoint.deleted", "Deleted a webhook endpoint";
    EndpointSecretRotated = "webhook_endpoint.secret_rotated", "Rotated a webhook endpoint's secret";
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
    /// The actor's name, when they are a member of the workspace with a name: the log says
    /// "Anna paused …", with the address beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_name: Option<String>,
    pub action: AuditAction,
    /// What was acted on: a campaign id, an address, a key's name.
    pub object: String,
    /// The object's name when the object is an id of something that still exists (a
    /// campaign's name, an API key's, an import's file), so the log reads as sentences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_name: Option<String>,
    /// What else a reader of the log needs (a new role, a time); `{}` when nothing.
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub detail: serde_json::Value,
    pub ip: String,
}

impl AuditEntry {
    /// What the actor did, as the end of a sentence that starts with the actor
    /// ("paused “Spring issue”"): names rather than ids, the detail that matters in words.
    pub fn sentence(&self) -> String {
        use AuditAction::*;
        let text = |key: &str| self.detail.get(key).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        // The object by its name; an id whose thing is gone by what it was.
        let named = |gone: &str| match &self.object_name {
            Some(name) => format!("“{name}”"),
            None if self.object.is_empty() || looks_like_id(&self.object) => gone.to_string(),
            None => format!("“{}”", self.object),
        };
        let campaign = named("a campaign");
        // The object itself when a person can read it (an address, a domain, a name).
        let readable = Some(self.object.as_str()).filter(|o| !o.is_empty() && !looks_like_id(o));
        match self.action {
            CampaignSent => format!("sent {campaign}"),
            CampaignScheduled => {
                let at = self.detail.get("at").and_then(|v| v.as_str()).and_then(|at| at.parse::<DateTime<Utc>>().ok());
                match at {
                    Some(at) => format!("scheduled {campaign} for {} UTC", at.format("%-d %b %Y, %H:%M")),
                    None => format!("scheduled {campaign}"),
                }
            }
            CampaignUnscheduled => format!("unscheduled {campaign}"),
            CampaignPaused => format!("paused {campaign}"),
            CampaignResumed => format!("resumed {campaign}"),
            CampaignCancelled => format!("cancelled {campaign}"),
            CampaignStopped => format!("stopped the recurring campaign {campaign}"),
            AutomationStarted => format!("turned on the automation {}", named("an automation")),
            AutomationPaused => format!("paused the automation {}", named("an automation")),
            AutomationArchived => format!("archived the automation {}", named("an automation")),
            WinnerPicked => match self.detail.get("winner").and_then(|v| v.as_u64()) {
                Some(i) => {
                    format!("sent version {} of {campaign} to the rest", crate::ab_test::variant_label(i as usize))
                }
                None => format!("picked the winner of {campaign}"),
            },
            ApprovalRequested => format!("asked for approval to send {campaign}"),
            ApprovalGiven => format!("approved sending {campaign}"),
            ApprovalRejected => format!("turned down sending {campaign}"),
            SettingsChanged => "changed the workspace settings".into(),
            SendingPolicyChanged => "changed the sending policy".into(),
            TeamRulesChanged => {
                let rule = |key: &str, what: &str| match self.detail.get(key).and_then(|v| v.as_bool()) {
                    Some(true) => format!("{what} required"),
                    Some(false) => format!("{what} not required"),
                    None => String::new(),
                };
                let rules: Vec<String> = [
                    rule("require_two_factor", "two-factor sign-in"),
                    rule("require_send_approval", "approval to send"),
                ]
                .into_iter()
                .filter(|r| !r.is_empty())
                .collect();
                if rules.is_empty() {
                    "changed the team rules".into()
                } else {
                    format!("changed the team rules: {}", rules.join(", "))
                }
            }
            IdentitySaved => match readable {
                Some(name) => format!("saved the SMTP identity “{name}”"),
                None => "saved an SMTP identity".into(),
            },
            IdentityDeleted => format!("deleted {}", named("an SMTP identity")),
            DomainAdded => match readable {
                Some(domain) => format!("added the sending domain {domain}"),
                None => "added a sending domain".into(),
            },
            DomainDeleted => format!("removed {}", named("a sending domain")),
            MemberInvited => {
                let who = readable.unwrap_or("a member");
                match text("role") {
                    role if role.is_empty() => format!("invited {who}"),
                    role => format!("invited {who} as {role}"),
                }
            }
            InviteWithdrawn => "withdrew an invite".into(),
            MemberJoined => "joined the workspace".into(),
            MemberRoleChanged => match (readable, text("role")) {
                (Some(who), role) if !role.is_empty() => format!("made {who} {role}"),
                (None, role) if !role.is_empty() => format!("changed a member's role to {role}"),
                _ => "changed a member's role".into(),
            },
            MemberRemoved => format!("removed {} from the workspace", readable.unwrap_or("a member")),
            MemberLeft => "left the workspace".into(),
            ApiKeyCreated => match (readable, text("role")) {
                (Some(name), role) if !role.is_empty() => format!("created the API key “{name}” ({role})"),
                (Some(name), _) => format!("created the API key “{name}”"),
                (None, _) => "created an API key".into(),
            },
            ApiKeyRevoked => match &self.object_name {
                Some(name) => format!("revoked the API key “{name}”"),
                None => "revoked an API key".into(),
            },
            ImportStarted => format!("started importing {}", named("a file")),
            ExportDownloaded => "exported readers".into(),
            ReaderErased if self.object.ends_with(" readers") => format!("erased {}", self.object),
            ReaderErased => "erased a reader".into(),
            SuppressionRemoved => format!("took {} off the suppression list", readable.unwrap_or("an address")),
            WebhookConfigured => match text("provider") {
                p if p.is_empty() => "configured a provider webhook".into(),
                p => format!("configured the {p} webhook"),
            },
            WebhookRotated => "gave a provider webhook a new address".into(),
            EndpointCreated => format!("added the webhook endpoint {}", named("an endpoint")),
            EndpointChanged => format!("changed the webhook endpoint {}", named("an endpoint")),
            EndpointDeleted => format!("deleted the webhook endpoint {}", named("an endpoint")),
            EndpointSecretRotated => format!("rotated the secret of the webhook endpoint {}", named("an endpoint")),
            AccountSuspended => match text("reason") {
                r if r.is_empty() => "suspended the workspace's account".into(),
                r => format!("suspended the workspace's account: {r}"),
            },
            AccountReinstated => "lifted the account's suspension".into(),
            TransactionalResumed => "resumed transactional sending after the guard paused it".into(),
        }
    }

    /// The detail as one line of JSON, empty when there is none.
    pub fn detail_text(&self) -> String {
        match &self.detail {
            serde_json::Value::Object(o) if o.is_empty() => String::new(),
            serde_json::Value::Null => String::new(),
            d => d.to_string(),
        }
    }
}

/// A uuid or a number: an object a person cannot read.
fn looks_like_id(object: &str) -> bool {
    uuid::Uuid::parse_str(object).is_ok() || object.parse::<i64>().is_ok()
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
            actor_name: None,
            action: AuditAction::CampaignSent,
            object: String::new(),
            object_name: None,
            detail: serde_json::json!({}),
            ip: String::new(),
        };
        assert_eq!(e.detail_text(), "");
        e.detail = serde_json::json!({ "role": "admin" });
        assert_eq!(e.detail_text(), r#"{"role":"admin"}"#);
    }

    fn entry(action: AuditAction, object: &str, object_name: Option<&str>, detail: serde_json::Value) -> AuditEntry {
        AuditEntry {
            id: 1,
            at: DateTime::<Utc>::MIN_UTC,
            actor_kind: ActorKind::User,
            actor: "anna@example.com".into(),
            actor_name: Some("Anna".into()),
            action,
            object: object.into(),
            object_name: object_name.map(str::to_string),
            detail,
            ip: String::new(),
        }
    }

    #[test]
    fn entries_read_as_sentences_with_names_not_ids() {
        let id = "0b0d9a4e-8d52-4f5e-9a55-4d6c1a7d3f10";
        let none = serde_json::json!({});
        let cases = [
            (entry(AuditAction::CampaignPaused, id, Some("Spring issue"), none.clone()), "paused “Spring issue”"),
            // A campaign deleted since: what it was, never its id.
            (entry(AuditAction::CampaignSent, id, None, none.clone()), "sent a campaign"),
            (
                entry(
                    AuditAction::CampaignScheduled,
                    id,
                    Some("Spring"),
                    serde_json::json!({"at": "2026-12-01T09:30:00Z", "timezone": "Europe/Paris"}),
                ),
                "scheduled “Spring” for 1 Dec 2026, 09:30 UTC",
            ),
            (
                entry(AuditAction::WinnerPicked, id, Some("Spring"), serde_json::json!({"winner": 1})),
                "sent version B of “Spring” to the rest",
            ),
            (
                entry(AuditAction::MemberRoleChanged, "bob@example.com", None, serde_json::json!({"role": "admin"})),
                "made bob@example.com admin",
            ),
            (
                entry(AuditAction::MemberInvited, "cy@example.com", None, serde_json::json!({"role": "author"})),
                "invited cy@example.com as author",
            ),
            (entry(AuditAction::ApiKeyRevoked, id, Some("Zapier"), none.clone()), "revoked the API key “Zapier”"),
            (entry(AuditAction::ApiKeyRevoked, id, None, none.clone()), "revoked an API key"),
            (entry(AuditAction::ReaderErased, "12 readers", None, none.clone()), "erased 12 readers"),
            (entry(AuditAction::ReaderErased, "42", None, none.clone()), "erased a reader"),
            (
                entry(
                    AuditAction::TeamRulesChanged,
                    "",
                    None,
                    serde_json::json!({"require_two_factor": true, "require_send_approval": false}),
                ),
                "changed the team rules: two-factor sign-in required, approval to send not required",
            ),
            (entry(AuditAction::ImportStarted, id, Some("spring.csv"), none.clone()), "started importing “spring.csv”"),
        ];
        for (e, want) in cases {
            assert_eq!(e.sentence(), want, "{:?}", e.action);
        }
        // Every action has a sentence without an id in it.
        for a in AuditAction::ALL {
            let s = entry(*a, id, None, none.clone()).sentence();
            assert!(!s.is_empty() && !s.contains(id), "{}: {s}", a.as_str());
        }
    }
}
