//! A workspace's brand, the starter layouts dressed in it, and authors' saved campaign
//! templates. The shapes and checks are in [`herald_types::brand`]; this stores them.
//!
//! Nothing that sends reads these tables: a campaign carries its own copy of the brand in its
//! block document, taken when it starts ([`start_document`]).

use herald_types::{
    BlockDocument, BodyFormat, Brand, CampaignTemplate, CampaignTemplateId, CampaignTemplateInput,
    CampaignTemplateSummary, Colour, Font, Invalid, Layout, LayoutView, Theme,
};

use crate::domain::{Role, TenantId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::Db;

/// Bounds what one workspace can store.
pub const MAX_TEMPLATES_PER_WORKSPACE: i64 = 200;

#[derive(sqlx::FromRow)]
struct BrandRow {
    accent: String,
    background: String,
    text_colour: String,
    font: Font,
    logo_src: String,
    logo_width: i32,
    footer_text: String,
}

impl BrandRow {
    fn into_brand(self) -> Result<Brand> {
        let colour = |s: &str| Colour::parse(s).map_err(|e| Error::Unexpected(anyhow::anyhow!("stored brand: {e}")));
        Ok(Brand {
            theme: Theme {
                accent: colour(&self.accent)?,
                background: colour(&self.background)?,
                text: colour(&self.text_colour)?,
                font: self.font,
            },
            logo_src: self.logo_src,
            logo_width: u32::try_from(self.logo_width).unwrap_or(herald_types::brand::DEFAULT_LOGO_WIDTH),
            footer_text: self.footer_text,
        })
    }
}

/// The workspace's brand: Herald's default until one is saved.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn get(db: &Db, tenant: TenantId) -> Result<Brand> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row: Option<BrandRow> = sqlx::query_as(
        "SELECT accent, background, text_colour, font, logo_src, logo_width, footer_text
         FROM workspace_brands WHERE tenant_id = $1",
    )
    .bind(tenant)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    row.map_or_else(|| Ok(Brand::default()), BrandRow::into_brand)
}

/// Saves the brand (authors may: it is how their mail looks). Campaigns already started keep
/// the brand they were started with.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn update(db: &Db, tenant: TenantId, role: Role, brand: &Brand) -> Result<Brand> {
    if !role.can_author() {
        return Err(Error::Forbidden);
    }
    brand.validate()?;
    check_footer(tenant, brand).await?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "INSERT INTO workspace_brands (tenant_id, accent, background, text_colour, font, logo_src, logo_width, footer_text)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (tenant_id) DO UPDATE SET accent = $2, background = $3, text_colour = $4, font = $5,
             logo_src = $6, logo_width = $7, footer_text = $8, updated_at = now()",
    )
    .bind(tenant)
    .bind(brand.theme.accent.as_str())
    .bind(brand.theme.background.as_str())
    .bind(brand.theme.text.as_str())
    .bind(brand.theme.font)
    .bind(brand.logo_src.trim())
    .bind(i32::try_from(brand.logo_width).unwrap_or(i32::MAX))
    .bind(brand.footer_text.trim())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    get(db, tenant).await
}

/// The footer text is copied into every campaign started from now on: a merge-tag mistake in it
/// is refused here, beside its field, not found later in each of them.
async fn check_footer(tenant: TenantId, brand: &Brand) -> Result<()> {
    use crate::sending::message::{CampaignContent, CompiledCampaign, Workspace};
    let content = CampaignContent {
        subject: String::new(),
        preheader: String::new(),
        format: BodyFormat::Blocks,
        body: brand.dress(BlockDocument::default().blocks).to_json(),
    };
    let workspace = Workspace { name: String::new(), postal_address: String::new() };
    let turn = crate::sending::template_sandbox::Turn::request(tenant);
    match CompiledCampaign::compile(&content, &workspace, turn).await? {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::Invalid(Invalid::field(
            "footer_text",
            format!("The footer text has a merge-tag mistake: {}", e.message),
        ))),
    }
}

/// Every starter layout, dressed in the workspace's brand.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn layouts(db: &Db, tenant: TenantId) -> Result<Vec<LayoutView>> {
    let brand = get(db, tenant).await?;
    Ok(Layout::ALL
        .iter()
        .map(|&layout| LayoutView {
            layout,
            name: layout.name().into(),
            description: layout.description().into(),
            body: layout.document(&brand),
        })
        .collect())
}

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
        Start::Blank => blocks("Untitled campaign", get(db, tenant).await?.dress(BlockDocument::default().blocks)),
        Start::Layout(layout) => blocks(layout.name(), layout.document(&get(db, tenant).await?)),
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
