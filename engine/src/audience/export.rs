//! CSV export of the readers matching a filter, streamed in chunks (never the whole file in
//! memory), with spreadsheet formula injection neutralised (OWASP: a cell starting with
//! `= + - @`, tab or CR gets a leading `'`).

use futures::TryStreamExt;
use sqlx::{Postgres, QueryBuilder};
use tokio::sync::mpsc;

use super::readers::{ReaderFilter, push_filter};
use crate::db::Db;
use crate::domain::TenantId;
use crate::error::Result;

pub const HEADER: &str = "email,name,status,created_at,lists,attributes\r\n";
/// Bytes handed to the response at a time.
pub(crate) const CHUNK: usize = 64 * 1024;

/// One CSV cell: neutralised against formula injection, then quoted when needed.
pub fn cell(value: &str) -> String {
    let neutral =
        if value.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{value}") } else { value.to_string() };
    if neutral.contains([',', '"', '\n', '\r']) || neutral.starts_with(' ') || neutral.ends_with(' ') {
        format!("\"{}\"", neutral.replace('"', "\"\""))
    } else {
        neutral
    }
}

/// Writes the CSV for `filter` into `out` chunk by chunk. Stops quietly if the receiver goes
/// away (the client disconnected).
pub async fn stream_csv(db: &Db, tenant: TenantId, filter: &ReaderFilter, out: mpsc::Sender<Vec<u8>>) -> Result<()> {
    let mut q = QueryBuilder::<Postgres>::new(
        "SELECT r.email, r.name, r.status, to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                coalesce((SELECT string_agg(l.name, '; ' ORDER BY l.name) FROM subscriptions s JOIN lists l ON l.id = s.list_id
                          WHERE s.reader_id = r.id AND s.status = 'confirmed'), ''),
                r.attributes::text
         FROM readers r WHERE r.tenant_id = ",
    );
    q.push_bind(tenant);
    push_filter(&mut q, filter)?;
    q.push(" ORDER BY r.id");
    let mut tx = db.tenant_tx(tenant).await?;
    let mut buf = HEADER.as_bytes().to_vec();
    {
        let mut rows = q.build_query_as::<(String, String, String, String, String, String)>().fetch(&mut *tx);
        while let Some((email, name, status, created, lists, attrs)) = rows.try_next().await? {
            let line = [cell(&email), cell(&name), cell(&status), cell(&created), cell(&lists), cell(&attrs)].join(",");
            buf.extend_from_slice(line.as_bytes());
            buf.extend_from_slice(b"\r\n");
            if buf.len() >= CHUNK && out.send(std::mem::take(&mut buf)).await.is_err() {
                return Ok(());
            }
        }
    }
    tx.commit().await?;
    if !buf.is_empty() {
        let _ = out.send(buf).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn cells_are_neutralised_and_quoted() {
        assert_eq!(cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(cell("+1"), "'+1");
        assert_eq!(cell("-2"), "'-2");
        assert_eq!(cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(cell("\tx"), "'\tx");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell("line\nbreak"), "\"line\nbreak\"");
    }
}
