//! Reader ids that outlive their reader: when two copies of one mailbox were merged, the merged
//! copy's id names the kept reader (`reader_aliases`). Its own file, so that the paths that
//! resolve signed links (subscribe, web version, feedback) need not import `readers`, which
//! imports them.

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Tx;

/// The reader that reader id `id` names now: itself, or the reader it was merged into when two
/// copies of one mailbox were merged (`reader_aliases`). Mail sent before a merge names the
/// merged copy by id in every signed link (unsubscribe, confirmation, web version) and in its
/// Message-ID, and those must keep working for as long as the mail exists. `None` when neither
/// exists (erased, or another workspace's).
pub async fn resolve_id(tx: &mut Tx, tenant: TenantId, id: i64) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT coalesce((SELECT id FROM readers WHERE tenant_id = $1 AND id = $2),
                         (SELECT reader_id FROM reader_aliases WHERE tenant_id = $1 AND merged_id = $2))",
    )
    .bind(tenant)
    .bind(id)
    .fetch_one(&mut **tx)
    .await?)
}

/// [`resolve_id`] for a link that names a reader: `NotFound` when the reader is gone.
pub async fn current_id(tx: &mut Tx, tenant: TenantId, id: i64) -> Result<i64> {
    resolve_id(tx, tenant, id).await?.ok_or(Error::NotFound)
}
