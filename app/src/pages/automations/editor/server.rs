//! The automation editor's data and its server functions: the view, save, the state changes
//! and the test send.

use herald_types::{Automation, AutomationId, AutomationInput, AutomationReport, ListId, Run, SegmentId, TagId};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AutomationEditorData {
    pub automation: Option<Automation>,
    pub report: Option<AutomationReport>,
    pub runs: Vec<Run>,
    pub lists: Vec<(ListId, String)>,
    pub tags: Vec<(TagId, String)>,
    pub segments: Vec<(SegmentId, String)>,
    /// Date fields, by key and label (the anniversary trigger).
    pub date_fields: Vec<(String, String)>,
    /// Every custom field, by key and label (a reader's time zone, a branch on a value).
    pub fields: Vec<(String, String)>,
    /// The workspace's time zone: where a "wait until" naming no zone falls.
    pub workspace_zone: String,
    /// Block documents in the workspace's brand, as JSON: the welcome a new automation starts
    /// with, and the mail a new email step starts with.
    pub welcome_blocks: String,
    pub mail_blocks: String,
    pub can_edit: bool,
}

#[server(prefix = "/rpc", endpoint = "automation_edit_view")]
pub async fn automation_edit_view(id: String) -> Result<AutomationEditorData, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::audience::{lists, tags};
    use herald_engine::automations::{report, store};
    let m = require_role(Role::Viewer).await?;
    let db = &m.state.db;
    let mut data = AutomationEditorData {
        automation: None,
        report: None,
        runs: Vec::new(),
        lists: lists::with_counts(db, m.tenant).await?.into_iter().map(|l| (l.list.id, l.list.name)).collect(),
        tags: tags::list(db, m.tenant).await?.into_iter().map(|t| (t.id, t.name)).collect(),
        segments: herald_engine::audience::segments::list(db, m.tenant)
            .await?
            .into_iter()
            .map(|s| (s.id, s.name))
            .collect(),
        date_fields: Vec::new(),
        fields: Vec::new(),
        workspace_zone: herald_engine::workspaces::get(db, m.tenant).await?.time_zone,
        welcome_blocks: String::new(),
        mail_blocks: String::new(),
        can_edit: m.role.can_author(),
    };
    let brand = herald_engine::campaigns::brand::get(db, m.tenant).await?;
    data.mail_blocks = brand.dress(herald_types::BlockDocument::default().blocks).to_json();
    data.welcome_blocks = brand
        .dress(vec![
            herald_types::Block::Heading { text: "Hi {{ reader.name | default(\"there\") }},".into(), level: 1 },
            herald_types::Block::Paragraph {
                text: "Thank you for joining. Here is what to expect from us, and how often.\n\nSee you in your inbox!"
                    .into(),
            },
        ])
        .to_json();
    for f in herald_engine::audience::fields::list(db, m.tenant).await? {
        if f.kind == herald_types::FieldKind::Date {
            data.date_fields.push((f.key.clone(), f.label.clone()));
        }
        data.fields.push((f.key, f.label));
    }
    if id != "new" {
        let id: AutomationId = id.parse().map_err(|_| AppError::NotFound.respond())?;
        data.automation = Some(store::get(db, m.tenant, id).await?);
        data.report = Some(report::report(db, m.tenant, id).await?);
        data.runs = report::runs(db, m.tenant, id, None).await?;
    }
    Ok(data)
}

/// A mail step as a sample reader would get it, as the editor holds it (saved or not).
#[server(prefix = "/rpc", endpoint = "preview_automation_mail", input = Json)]
pub async fn preview_automation_mail(
    subject: String,
    preheader: String,
    body_format: herald_types::BodyFormat,
    body: String,
) -> Result<crate::pages::campaigns::preview::PreviewView, AppError> {
    use crate::ssr::{count_preview, require_role};
    use herald_engine::{Role, campaigns::preview, sending::message::CampaignContent};
    let m = require_role(Role::Viewer).await?;
    count_preview(&m)?;
    let content = CampaignContent { subject, preheader, format: body_format, body };
    let rendered = preview::preview_content(&m.state.db, &m.state.base_url, m.tenant, &content).await?;
    Ok(preview::PreviewOutcome::of(rendered, "a sample reader".into()).into())
}

/// Saves a new automation (`id` is `new`) or changes one; returns its id.
#[server(prefix = "/rpc", endpoint = "save_automation", input = Json)]
pub async fn save_automation(id: String, input: AutomationInput) -> Result<AutomationId, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, automations::store};
    let m = require_role(Role::Author).await?;
    let saved = if id == "new" {
        store::create(&m.state.db, m.tenant, m.role, &input).await?
    } else {
        let id: AutomationId = id.parse().map_err(|_| AppError::NotFound.respond())?;
        store::update(&m.state.db, m.tenant, m.role, id, &input).await?
    };
    Ok(saved.id)
}

/// `start`, `pause`, `archive` or `delete`; true when it was deleted.
#[server(prefix = "/rpc", endpoint = "change_automation")]
pub async fn change_automation(id: AutomationId, action: String) -> Result<bool, AppError> {
    use crate::ssr::require_role;
    use herald_engine::audit::Action;
    use herald_engine::{Role, automations::store};
    let m = require_role(Role::Author).await?;
    let db = &m.state.db;
    match action.as_str() {
        "start" => {
            store::start(db, &m.state.jobs, m.tenant, m.role, id).await?;
            m.audit(Action::AutomationStarted, id, serde_json::json!({})).await;
        }
        "pause" => {
            store::pause(db, m.tenant, m.role, id).await?;
            m.audit(Action::AutomationPaused, id, serde_json::json!({})).await;
        }
        "archive" => {
            store::archive(db, m.tenant, m.role, id).await?;
            m.audit(Action::AutomationArchived, id, serde_json::json!({})).await;
        }
        "delete" => {
            store::delete(db, m.tenant, m.role, id).await?;
            return Ok(true);
        }
        _ => return Err(AppError::NotFound),
    }
    Ok(false)
}

/// Test mode: each email step's mail, in order, to one address, at once (waits skipped; tags
/// and branches are not applied: nobody's data changes). Marked `[Test]`, rendered for a sample
/// reader; counted against the test allowance like a campaign's test. One line per mail.
#[server(prefix = "/rpc", endpoint = "test_automation")]
pub async fn test_automation(id: AutomationId, address: String) -> Result<Vec<String>, AppError> {
    use crate::ssr::require_role;
    use herald_engine::{Role, automations::store, campaigns::preview};
    let m = require_role(Role::Author).await?;
    let automation = store::get(&m.state.db, m.tenant, id).await?;
    let mut out = Vec::new();
    for (i, step) in automation.steps.iter().enumerate() {
        let Some(campaign) = step.campaign_id else { continue };
        let results = preview::test_send(
            &m.state.db,
            &m.state.signer,
            &m.state.base_url,
            &m.state.default_identity,
            &m.state.egress,
            m.tenant,
            m.user,
            m.role,
            campaign,
            std::slice::from_ref(&address),
        )
        .await?;
        for (to, r) in results {
            out.push(match r {
                Ok(_) => format!("Step {}: sent to {to}.", i + 1),
                Err(why) => format!("Step {}: {why}", i + 1),
            });
        }
    }
    if out.is_empty() {
        return Err(AppError::Invalid(herald_types::Invalid::new("Add an email step first.")));
    }
    Ok(out)
}
