//! Authors' saved campaign templates, and what a new campaign starts from: a blank document or a
//! starter layout in the workspace's brand ([`super::brand`]), or a saved template.

use herald_types::{
    BlockDocument, BodyFormat, CampaignTemplate, CampaignTemplateId, CampaignTemplateInput, CampaignTemplateSummary,
    Invalid, Layout,
};

use super::brand;
use crate::domain::{Role, TenantId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::Db;

/// Bounds what one workspace can store.
pub const MAX_TEMPLATES_PER_WORKSPACE: i64 = 200;

/// What a new campaign starts from.
#[derive(Clone, Copy, Debug)]
pub enum Start {
    /// The starter document ([`BlockDocument::default`]) in the workspace's brand.
    Blank,
    Layout(Layout),
    Template(CampaignTemplateId),
}

/// The name and content a campaign starting from `start` gets (one read of the template).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn start_document(db: &Db, tenant: TenantId, start: Start) -> Result<CampaignTemplateInput> {
    let blocks = |name: &str, doc: BlockDocument| CampaignTemplateInput {
        name: name.into(),
        subject: String::new(),
        preheader: String::new(),
        body_format: BodyFormat::Blocks,
        body: doc.to_json(),
    };
    Ok(match start {
        Start::Blank => {
            blocks("Untitled campaign", brand::get(db, tenant).await?.dress(BlockDocument::default().blocks))
        }
        Start::Layout(layout) => blocks(layout.name(), layout.document(&brand::get(db, tenant).await?)),
        Start::Template(id) => {
            let t = get_template(db, tenant, id).await?;
            CampaignTemplateInput {
                name: t.name,
                subject: t.subject,
                preheader: t.preheader,
                body_format: t.body_format,
                body: t.body,
            }
        }
    })
}

const TEMPLATE_COLUMNS: &str = "id, name, subject, preheader, body_format, body, created_at, updated_at";

/// The workspace's saved templates, by name, without their bodies.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list_templates(db: &Db, tenant: TenantId) -> Result<Vec<CampaignTemplateSummary>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(
        "SELECT id, name, subject, body_format, updated_at FROM campaign_templates
         WHERE tenant_id = $1 ORDER BY lower(name), id",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// One template; another workspace's id is not found.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn get_template(db: &Db, tenant: TenantId, id: CampaignTemplateId) -> Result<CampaignTemplate> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {TEMPLATE_COLUMNS} FROM campaign_templates WHERE tenant_id = $1 AND id = $2"
    )))
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    row.ok_or(Error::NotFound)
}

fn name_taken(e: sqlx::Error) -> Error {
    if is_unique_violation(&e, "campaign_templates_name") {
        Error::Invalid(Invalid::field("name", "Another template has this name."))
    } else {
        e.into()
    }
}

/// Saves a new template.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create_template(
    db: &Db,
    tenant: TenantId,
    role: Role,
    input: &CampaignTemplateInput,
) -> Result<CampaignTemplate> {
    if !role.can_author() {
        return Err(Error::Forbidden);
    }
    input.validate()?;
    let mut tx = db.tenant_tx(tenant).await?;
    // Serialises creations in this workspace, so two at once cannot both pass the count.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('campaign_templates:' || $1::text, 0))")
        .bind(tenant)
        .execute(&mut *tx)
        .await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM campaign_templates WHERE tenant_id = $1")
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
    if count >= MAX_TEMPLATES_PER_WORKSPACE {
        return Err(Error::Invalid(Invalid::new(format!(
            "A workspace keeps at most {MAX_TEMPLATES_PER_WORKSPACE} templates: delete one you no longer use."
        ))));
    }
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO campaign_templates (tenant_id, id, name, subject, preheader, body_format, body)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {TEMPLATE_COLUMNS}"
    )))
    .bind(tenant)
    .bind(CampaignTemplateId::new())
    .bind(input.name.trim())
    .bind(&input.subject)
    .bind(&input.preheader)
    .bind(input.body_format)
    .bind(&input.body)
    .fetch_one(&mut *tx)
    .await
    .map_err(name_taken)?;
    tx.commit().await?;
    Ok(row)
}

/// Replaces a template's name and content.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn update_template(
    db: &Db,
    tenant: TenantId,
    role: Role,
    id: CampaignTemplateId,
    input: &CampaignTemplateInput,
) -> Result<CampaignTemplate> {
    if !role.can_author() {
        return Err(Error::Forbidden);
    }
    input.validate()?;
    let mut tx = db.tenant_tx(tenant).await?;
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaign_templates SET name = $3, subject = $4, preheader = $5, body_format = $6, body = $7,
             updated_at = now()
         WHERE tenant_id = $1 AND id = $2 RETURNING {TEMPLATE_COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(input.name.trim())
    .bind(&input.subject)
    .bind(&input.preheader)
    .bind(input.body_format)
    .bind(&input.body)
    .fetch_optional(&mut *tx)
    .await
    .map_err(name_taken)?;
    tx.commit().await?;
    row.ok_or(Error::NotFound)
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn delete_template(db: &Db, tenant: TenantId, role: Role, id: CampaignTemplateId) -> Result<()> {
    if !role.can_author() {
        return Err(Error::Forbidden);
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let deleted = sqlx::query("DELETE FROM campaign_templates WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if deleted == 0 { Err(Error::NotFound) } else { Ok(()) }
}
