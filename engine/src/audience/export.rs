//! CSV export of the readers matching a filter, streamed in chunks (never the whole file in
//! memory), with spreadsheet formula injection neutralised (OWASP: a cell starting with
//! `= + - @`, tab or CR gets a leading `'`).

use futures::TryStreamExt;
use sqlx::{Postgres, QueryBuilder};
use tokio::sync::mpsc;

use super::readers::{ReaderFilter, push_filter};
use crate::domain::TenantId;
use crate::error::Result;
use crate::infra::db::Db;

pub const HEADER: [&str; 6] = ["email", "name", "status", "created_at", "lists", "attributes"];
/// Bytes handed to the response at a time.
pub(crate) const CHUNK: usize = 64 * 1024;

/// A cell a spreadsheet would run as a formula gets a leading `'`. The `csv` writer does the
/// quoting; this is the one thing it cannot know.
pub fn neutral(value: &str) -> std::borrow::Cow<'_, str> {
    if value.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{value}").into() } else { value.into() }
}

/// A CSV download written in chunks of about [`CHUNK`] bytes into a channel (the response body),
/// so no export is ever one string in memory. Rows are CRLF-terminated, cells neutralised.
pub(crate) struct CsvChunks {
    writer: csv::Writer<Vec<u8>>,
    out: mpsc::Sender<Vec<u8>>,
}

fn csv_writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::with_capacity(CHUNK))
}

fn csv_error(e: impl std::error::Error + Send + Sync + 'static) -> crate::Error {
    crate::Error::Unexpected(anyhow::Error::new(e).context("writing CSV"))
}

impl CsvChunks {
    pub(crate) fn new(out: mpsc::Sender<Vec<u8>>, header: &[&str]) -> Result<Self> {
        let mut chunks = Self { writer: csv_writer(), out };
        chunks.write(header)?;
        Ok(chunks)
    }

    fn write(&mut self, cells: &[&str]) -> Result<()> {
        self.writer.write_record(cells.iter().map(|c| neutral(c).into_owned())).map_err(csv_error)?;
        // Into the Vec, so its length says how much is waiting.
        self.writer.flush().map_err(csv_error)
    }

    /// The bytes written so far, leaving an empty writer.
    fn take(&mut self) -> Result<Vec<u8>> {
        std::mem::replace(&mut self.writer, csv_writer()).into_inner().map_err(|e| csv_error(e.into_error()))
    }

    /// Adds a row; false once the receiver has gone away (the client disconnected).
    pub(crate) async fn row(&mut self, cells: &[&str]) -> Result<bool> {
        self.write(cells)?;
        if self.writer.get_ref().len() >= CHUNK {
            let chunk = self.take()?;
            return Ok(self.out.send(chunk).await.is_ok());
        }
        Ok(true)
    }

    /// Sends what is left.
    pub(crate) async fn finish(mut self) -> Result<()> {
        let rest = self.take()?;
        if !rest.is_empty() {
            let _ = self.out.send(rest).await;
        }
        Ok(())
    }
}

/// Writes the CSV for `filter` into `out` chunk by chunk. Stops quietly if the receiver goes
/// away (the client disconnected).
#[tracing::instrument(skip_all, fields(%tenant))]
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
    let mut csv = CsvChunks::new(out, &HEADER)?;
    {
        let mut rows = q.build_query_as::<(String, String, String, String, String, String)>().fetch(&mut *tx);
        while let Some((email, name, status, created, lists, attrs)) = rows.try_next().await? {
            if !csv.row(&[&email, &name, &status, &created, &lists, &attrs]).await? {
                return Ok(());
            }
        }
    }
    tx.commit().await?;
    csv.finish().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_are_neutralised() {
        assert_eq!(neutral("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(neutral("+1"), "'+1");
        assert_eq!(neutral("-2"), "'-2");
        assert_eq!(neutral("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(neutral("\tx"), "'\tx");
        assert_eq!(neutral("plain"), "plain");
    }

    #[tokio::test]
    async fn rows_are_quoted_by_the_csv_writer_and_sent_in_chunks() -> anyhow::Result<()> {
        let (tx, mut rx) = mpsc::channel(64);
        let mut csv = CsvChunks::new(tx, &["a", "b"])?;
        assert!(csv.row(&["=1+1", "a,b"]).await?);
        assert!(csv.row(&["line\nbreak", "say \"hi\""]).await?);
        let long = "x".repeat(CHUNK);
        assert!(csv.row(&[&long, ""]).await?);
        csv.finish().await?;
        let mut all = Vec::new();
        let mut chunks = 0;
        while let Some(chunk) = rx.recv().await {
            chunks += 1;
            all.extend(chunk);
        }
        assert_eq!(chunks, 1, "the long row filled one chunk, and nothing was left");
        let text = String::from_utf8(all)?;
        assert!(text.starts_with("a,b\r\n'=1+1,\"a,b\"\r\n\"line\nbreak\",\"say \"\"hi\"\"\"\r\n"), "{text:?}");
        Ok(())
    }
}
