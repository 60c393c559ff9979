//! The consent ledger: one appended row per subscribe, confirm, unsubscribe, import, API or admin
//! change, with the source, client details and the wording shown (GDPR Art. 7 evidence).

use crate::domain::{ListId, TenantId};
use crate::error::Result;
use crate::infra::db::Tx;

/// Where a change came from.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// `hosted_form`, `confirmation_link`, `unsubscribe_link`, `one_click`, `preference_center`,
    /// `import`, `api`, `admin`.
    pub source: String,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// The consent wording the reader saw, when there was one.
    pub wording: Option<String>,
}

impl Origin {
    pub fn new(source: &str) -> Self {
        Self { source: source.to_string(), ..Default::default() }
    }
}

pub use herald_types::ConsentEvent;

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn record(
    tx: &mut Tx,
    tenant: TenantId,
    reader: i64,
    list: Option<ListId>,
    action: &str,
    origin: &Origin,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, ip, user_agent, wording)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(tenant)
    .bind(reader)
    .bind(list)
    .bind(action)
    .bind(&origin.source)
    .bind(origin.ip.as_deref())
    .bind(origin.user_agent.as_deref().map(|u| u.chars().take(400).collect::<String>()))
    .bind(origin.wording.as_deref())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn for_reader(tx: &mut Tx, tenant: TenantId, reader: i64) -> Result<Vec<ConsentEvent>> {
    Ok(sqlx::query_as(
        "SELECT e.id, e.list_id, l.name AS list_name, e.action, e.source, e.ip, e.user_agent, e.wording, e.created_at
         FROM consent_events e LEFT JOIN lists l ON l.id = e.list_id
         WHERE e.tenant_id = $1 AND e.reader_id = $2 ORDER BY e.id DESC",
    )
    .bind(tenant)
    .bind(reader)
    .fetch_all(&mut **tx)
    .await?)
}
