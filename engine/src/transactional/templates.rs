//! Transactional templates: named, versioned MiniJinja templates for a subject, an HTML body and
//! a text body. Variables come from the API request (`{{ name }}`, `{{ order.total }}`) and are
//! strict: a variable the request did not supply is an error at request time (a 422), never an
//! empty gap in a password-reset email.

use std::sync::Arc;

use minijinja::Value;
use uuid::Uuid;

use crate::domain::{Role, TenantId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::Db;
use crate::sending::message::{self, TemplateError};
use crate::sending::template_sandbox::{Dialect, TemplateSet, Turn};
use herald_types::TemplateId;

pub use herald_types::{RenderedMessage, Template, TemplateInput, TemplateVersion};

const SELECT: &str = "SELECT t.id, t.name, t.description, v.version, v.from_name, v.from_email, v.reply_to, v.subject,
        v.html, v.text_body, v.sample, t.updated_at
    FROM tx_templates t JOIN tx_template_versions v ON v.template_id = t.id AND v.version = t.current_version";

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<Template>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!("{SELECT} WHERE t.tenant_id = $1 ORDER BY t.name")))
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows)
}

/// By id, or by name (what API callers usually pass).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn find(db: &Db, tenant: TenantId, id_or_name: &str) -> Result<Template> {
    let mut tx = db.tenant_tx(tenant).await?;
    let id = Uuid::parse_str(id_or_name.trim()).ok();
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE t.tenant_id = $1 AND (t.id = $2 OR ($2 IS NULL AND t.name = $3))"
    )))
    .bind(tenant)
    .bind(id)
    .bind(id_or_name.trim().to_ascii_lowercase())
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    row.ok_or(Error::NotFound)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn versions(db: &Db, tenant: TenantId, id: TemplateId) -> Result<Vec<TemplateVersion>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(
        "SELECT version, subject, created_at FROM tx_template_versions
         WHERE tenant_id = $1 AND template_id = $2 ORDER BY version DESC",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Checks the input and that its templates compile; returns the normalised input.
fn validate(input: &TemplateInput) -> Result<TemplateInput> {
    let i = input.check()?;
    Compiled::new(&i.subject, &i.html, &i.text_body)?;
    Ok(i)
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create(db: &Db, tenant: TenantId, role: Role, input: &TemplateInput) -> Result<Template> {
    role.require(Role::Author)?;
    let i = validate(input)?;
    let id = TemplateId::new();
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query("INSERT INTO tx_templates (id, tenant_id, name, description) VALUES ($1, $2, $3, $4)")
        .bind(id)
        .bind(tenant)
        .bind(&i.name)
        .bind(&i.description)
        .execute(&mut *tx)
        .await
        .map_err(|e| name_taken(e, &i.name))?;
    insert_version(&mut tx, tenant, id, 1, &i).await?;
    tx.commit().await?;
    find(db, tenant, &id.to_string()).await
}

/// Saves a new version (messages already queued keep theirs).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn update(db: &Db, tenant: TenantId, role: Role, id: TemplateId, input: &TemplateInput) -> Result<Template> {
    role.require(Role::Author)?;
    let i = validate(input)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let version: Option<i32> = sqlx::query_scalar(
        "UPDATE tx_templates SET current_version = current_version + 1, name = $3, description = $4, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 RETURNING current_version",
    )
    .bind(tenant)
    .bind(id)
    .bind(&i.name)
    .bind(&i.description)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| name_taken(e, &i.name))?;
    let version = version.ok_or(Error::NotFound)?;
    insert_version(&mut tx, tenant, id, version, &i).await?;
    tx.commit().await?;
    find(db, tenant, &id.to_string()).await
}

/// A second template with the same name in the workspace is a 409 that names it.
fn name_taken(e: sqlx::Error, name: &str) -> Error {
    if is_unique_violation(&e, "tx_templates_tenant_id_name_key") {
        Error::Conflict(format!("A template named “{name}” already exists."))
    } else {
        e.into()
    }
}

async fn insert_version(
    tx: &mut crate::infra::db::Tx,
    tenant: TenantId,
    id: TemplateId,
    version: i32,
    i: &TemplateInput,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO tx_template_versions (tenant_id, template_id, version, from_name, from_email, reply_to, subject, html,
                                           text_body, sample)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(tenant)
    .bind(id)
    .bind(version)
    .bind(i.from_name.trim())
    .bind(&i.from_email)
    .bind(&i.reply_to)
    .bind(&i.subject)
    .bind(&i.html)
    .bind(&i.text_body)
    .bind(&i.sample)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: TemplateId) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("DELETE FROM tx_templates WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}

/// Renders unsaved template sources with sample variables: the editor's live preview.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn preview(
    tenant: TenantId,
    subject: &str,
    html: &str,
    text: &str,
    sample: &serde_json::Value,
) -> Result<RenderedMessage> {
    Compiled::new(subject, html, text)?.render(Turn::request(tenant), sample).await
}

/// Parsed templates, rendered once per message in the template sandbox
/// ([`crate::sending::template_sandbox`]).
pub struct Compiled {
    templates: Arc<TemplateSet>,
}

const SUBJECT: &str = "subject";
const HTML: &str = "html";
const TEXT: &str = "text";

impl Compiled {
    pub fn new(subject: &str, html: &str, text: &str) -> Result<Self, TemplateError> {
        let sources = vec![(SUBJECT, subject.to_string()), (HTML, html.to_string()), (TEXT, text.to_string())];
        Ok(Self { templates: Arc::new(TemplateSet::parse(Dialect::Transactional, sources)?) })
    }

    /// Renders with `vars` (a JSON object). A body given only as HTML gets its text twin, and
    /// one given only as text gets a minimal HTML version, so every message is multipart.
    #[tracing::instrument(skip_all)]
    pub async fn render(&self, turn: Turn, vars: &serde_json::Value) -> Result<RenderedMessage> {
        if !vars.is_object() {
            return Err(Error::invalid("`variables` must be a JSON object."));
        }
        let ctx = Value::from_serialize(vars);
        let mut outcomes = self.templates.render(turn, &[SUBJECT, HTML, TEXT], &ctx).await?.into_iter();
        let mut one = || outcomes.next().unwrap_or_else(|| Ok(String::new())).map_err(|f| f.error);
        let subject = message::single_line(&one()?);
        if subject.trim().is_empty() {
            return Err(Error::invalid("The subject rendered empty."));
        }
        let mut html = one()?;
        let mut text = one()?;
        if html.trim().is_empty() && text.trim().is_empty() {
            return Err(Error::invalid("The message body rendered empty."));
        }
        if text.trim().is_empty() {
            text = message::html_to_text(&html);
        }
        if html.trim().is_empty() {
            html = format!(
                "<div style=\"font-family:sans-serif;white-space:pre-wrap\">{}</div>",
                message::escape_html(&text)
            );
        }
        Ok(RenderedMessage { subject, html, text })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    /// Renders on a runtime of its own: these tests are synchronous, renders are not.
    fn render(c: &Compiled, vars: serde_json::Value) -> Result<RenderedMessage> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(c.render(Turn::background(TenantId::new()), &vars))
    }

    #[test]
    fn renders_variables_and_escapes_html_only() {
        let c = Compiled::new("Reset for {{ name }}", "<p>Hi {{ name }}, <a href=\"{{ url }}\">reset</a></p>", "")
            .expect("compiles");
        let r = render(&c, serde_json::json!({ "name": "A<b>", "url": "https://x.test/r?t=1" })).expect("renders");
        assert_eq!(r.subject, "Reset for A<b>");
        assert!(r.html.contains("Hi A&lt;b&gt;"), "{}", r.html);
        assert!(r.text.contains("Hi A<b>"), "{}", r.text);
        assert!(r.text.contains("https://x.test/r?t=1"), "{}", r.text);
    }

    #[test]
    fn a_missing_variable_is_an_error_with_its_place() {
        let c = Compiled::new("Hi", "", "line one\nHello {{ user.name }}").expect("compiles");
        let e = render(&c, serde_json::json!({})).expect_err("strict");
        let msg = e.to_string();
        assert!(msg.starts_with("text, line 2"), "{msg}");
    }

    #[test]
    fn syntax_errors_are_reported_at_compile_time() {
        let e = Compiled::new("Hi {{ name", "", "x").err().expect("syntax error");
        assert_eq!(e.field, "subject");
    }

    #[test]
    fn text_only_gets_an_html_version() {
        let c = Compiled::new("Hi", "", "a < b").expect("compiles");
        let r = render(&c, serde_json::json!({})).expect("renders");
        assert!(r.html.contains("a &lt; b"));
    }
}
