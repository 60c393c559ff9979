//! A workspace's brand and the starter layouts dressed in it. The shapes and checks are in
//! [`herald_types::brand`]; this stores them. Authors' saved templates are in
//! [`super::templates`].
//!
//! Nothing that sends reads this table: a campaign carries its own copy of the brand in its
//! block document, taken when it starts ([`super::templates::start_document`]).

use herald_types::{BlockDocument, BodyFormat, Brand, Colour, Font, Invalid, Layout, LayoutView, Theme};

use crate::domain::{Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;

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
