//! CSV import: upload (kept in Postgres in 1 MB chunks), preview and column mapping, then a
//! background job that streams the file through the CSV parser in batches.
//!
//! Each batch's readers, subscriptions, ledger rows, error rows, counters and checkpoint commit
//! in one transaction, and readers merge on their lowercased address: a killed or failed import
//! re-run resumes after the last committed line and creates no duplicates.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::io::Read;
use tokio::sync::mpsc;

use super::bulk::{self, Existing, ReaderInput};
use super::consent::Origin;
use crate::domain::{Role, TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use herald_types::ListId;

pub const CHUNK_BYTES: usize = 1024 * 1024;
const BATCH_ROWS: usize = 5_000;
const PREVIEW_ROWS: usize = 5;

pub use herald_types::{Import, ImportId, ImportMode, ImportStatus, ImportSummary};

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn begin_upload(
    db: &Db,
    tenant: TenantId,
    user: Option<UserId>,
    role: Role,
    file_name: &str,
) -> Result<ImportId> {
    role.require(Role::Author)?;
    let id = ImportId::new();
    let name: String = file_name.chars().filter(|c| !c.is_control()).take(200).collect();
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query("INSERT INTO imports (id, tenant_id, created_by, file_name) VALUES ($1, $2, $3, $4)")
        .bind(id)
        .bind(tenant)
        .bind(user)
        .bind(if name.is_empty() { "upload.csv".to_string() } else { name })
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(id)
}

/// What uploads not yet imported may hold together: per workspace
/// (`HERALD_IMPORT_STORAGE_PER_WORKSPACE`) and across the workspaces of one account
/// (`HERALD_IMPORT_STORAGE_PER_ACCOUNT`; workspaces are free).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageCaps {
    pub per_workspace: i64,
    pub per_account: i64,
}

impl StorageCaps {
    /// For the operator's own tools (seeding, benchmarks).
    pub const UNLIMITED: Self = StorageCaps { per_workspace: i64::MAX, per_account: i64::MAX };
}

/// Stores the next 1 MB of an upload, unless the workspace's (or its account's) uploads not yet
/// imported would then hold more than their cap: then an `Invalid` that says what to do, and
/// the caller discards the partial upload.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn append_chunk(
    db: &Db,
    tenant: TenantId,
    id: ImportId,
    seq: i32,
    data: &[u8],
    caps: StorageCaps,
) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    // One check at a time per workspace and per account, so two uploads cannot both take the
    // last megabytes.
    let account = crate::account_limits::account_of(&mut tx, tenant).await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('import-storage:' || $1::text, 0))")
        .bind(account.map_or_else(|| tenant.to_string(), |a| format!("account:{a}")))
        .execute(&mut *tx)
        .await?;
    // octet_length reads a stored chunk's size from its TOAST pointer, not the chunk itself.
    let (stored, account_stored): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(octet_length(data)), 0)::bigint, account_upload_bytes($1)
         FROM import_chunks WHERE tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(&mut *tx)
    .await?;
    let mb = |bytes: i64| bytes / (1024 * 1024);
    if stored + data.len() as i64 > caps.per_workspace {
        return Err(Error::invalid(format!(
            "This workspace's uploads that are not imported yet would hold more than {} MB. Import or discard them \
             (Audience → Imports) and upload again.",
            mb(caps.per_workspace)
        )));
    }
    if account.is_some() && account_stored + data.len() as i64 > caps.per_account {
        return Err(Error::invalid(format!(
            "The uploads not imported yet across your account's workspaces would hold more than {} MB. Import or \
             discard some of them (Audience → Imports in each workspace) and upload again.",
            mb(caps.per_account)
        )));
    }
    sqlx::query("INSERT INTO import_chunks (import_id, tenant_id, seq, data) VALUES ($1, $2, $3, $4)")
        .bind(id)
        .bind(tenant)
        .bind(seq)
        .bind(data)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Deletes an upload that is not importing (uploading, uploaded, or failed): its file, its
/// mapping and its error report. Readers a failed run already imported stay.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn discard(db: &Db, tenant: TenantId, role: Role, id: ImportId) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let status: Option<ImportStatus> =
        sqlx::query_scalar("SELECT status FROM imports WHERE tenant_id = $1 AND id = $2 FOR UPDATE")
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    match status {
        None => return Err(Error::NotFound),
        Some(s) if s.can_discard() => {}
        Some(_) => return Err(Error::Conflict("Only an import that is not running or done can be discarded.".into())),
    }
    sqlx::query("DELETE FROM imports WHERE tenant_id = $1 AND id = $2").bind(tenant).bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Marks the upload complete, detects the delimiter and guesses the column mapping.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn finish_upload(db: &Db, tenant: TenantId, id: ImportId, size: i64) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    finish_in(&mut tx, tenant, id, size).await?;
    tx.commit().await?;
    Ok(())
}

/// An API upload's `Idempotency-Key` (as the API checked it: 1–255 printable ASCII) and what
/// makes two uploads the same: the SHA-256 of the file's name and bytes, known only once the
/// file has streamed in.
pub struct UploadKey<'a> {
    pub key: &'a str,
    pub sha256: &'a str,
}

/// What finishing a keyed upload did.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyedUpload {
    /// The key is new: this upload is finished and holds it.
    Finished,
    /// The same file was uploaded with this key before, as this import: the new copy is
    /// discarded and the first one answers.
    Replay(ImportId),
}

/// [`finish_upload`] for an upload sent with an `Idempotency-Key`: the key is taken in the
/// same transaction that finishes the upload, so two copies of one request (a retry, or both
/// at once) leave one import. The same key with another file is refused (`Invalid`, keyed
/// `Idempotency-Key`); either way the copy that lost is discarded.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn finish_keyed_upload(
    db: &Db,
    tenant: TenantId,
    id: ImportId,
    size: i64,
    key: UploadKey<'_>,
) -> Result<KeyedUpload> {
    let key_text = key.key;
    let mut tx = db.tenant_tx(tenant).await?;
    // One finisher per key at a time: the second waits, then finds the first's import.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('import-key:' || $1::text || ':' || $2, 0))")
        .bind(tenant)
        .bind(key_text)
        .execute(&mut *tx)
        .await?;
    let first: Option<(ImportId, Option<String>)> =
        sqlx::query_as("SELECT id, request_sha256 FROM imports WHERE tenant_id = $1 AND idempotency_key = $2")
            .bind(tenant)
            .bind(key_text)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some((first, sha)) = first {
        sqlx::query("DELETE FROM imports WHERE tenant_id = $1 AND id = $2 AND status = 'uploading'")
            .bind(tenant)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if sha.as_deref() != Some(key.sha256) {
            return Err(Error::Invalid(herald_types::Invalid::field(
                "Idempotency-Key",
                "This Idempotency-Key was used for another upload (another file or file name). Use a new key for \
                     a new upload, or resend exactly the first file to get its import.",
            )));
        }
        return Ok(KeyedUpload::Replay(first));
    }
    finish_in(&mut tx, tenant, id, size).await?;
    sqlx::query("UPDATE imports SET idempotency_key = $3, request_sha256 = $4 WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .bind(key_text)
        .bind(key.sha256)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(KeyedUpload::Finished)
}

async fn finish_in(tx: &mut Tx, tenant: TenantId, id: ImportId, size: i64) -> Result<()> {
    let first: Option<Vec<u8>> = sqlx::query_scalar("SELECT data FROM import_chunks WHERE import_id = $1 AND seq = 0")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    let first = first.ok_or_else(|| Error::invalid("The file is empty."))?;
    let delimiter = detect_delimiter(&first);
    let (header, preview) = parse_preview(&first, delimiter);
    if header.is_empty() {
        return Err(Error::Invalid(herald_types::Invalid::field("file", "The file has no header row.")));
    }
    // Refused now, not at Start: a file that is not CSV, or has nobody's address, would
    // otherwise be shown as a mapping of garbage.
    let mapping = guess_mappings(&header, &preview).ok_or_else(|| {
        Error::Invalid(herald_types::Invalid::field(
            "file",
            "No column of this file holds email addresses (the header row and the first rows were read). Each \
             reader needs one: save the file as CSV with a column named “email”, then upload it again.",
        ))
    })?;
    let also = "size_bytes = $5, delimiter = $6, mapping = $7";
    let bind =
        |q: ImportUpdate<'static>| q.bind(size).bind((delimiter as char).to_string()).bind(serde_json::json!(mapping));
    if !transition(tx, tenant, id, (&[ImportStatus::Uploading], ImportStatus::Uploaded), (also, bind)).await? {
        return Err(Error::Conflict("This upload was finished already.".into()));
    }
    Ok(())
}

fn detect_delimiter(data: &[u8]) -> u8 {
    let first_line = data.split(|b| *b == b'\n').next().unwrap_or_default();
    [b',', b';', b'\t'].into_iter().max_by_key(|d| first_line.iter().filter(|b| *b == d).count()).unwrap_or(b',')
}

/// What a column's header says it holds: one of the reader's own parts, or an attribute named
/// after it. Headers are compared without case, spaces, dashes or underscores, so "E-mail",
/// "email_address" and "Email Address" read alike, as do "first_name" and "First name".
fn guess_mapping(header: &str) -> String {
    let h = header.trim().to_lowercase();
    let squeezed: String = h.chars().filter(|c| c.is_alphanumeric()).collect();
    match squeezed.as_str() {
        "email" | "mail" | "emailaddress" | "mailaddress" | "emailadresse" | "courriel" | "correo" => "email".into(),
        "name" | "fullname" | "displayname" => "name".into(),
        "firstname" | "givenname" | "forename" | "fname" | "prenom" | "prénom" | "vorname" => "first_name".into(),
        "lastname" | "surname" | "familyname" | "lname" | "nachname" => "last_name".into(),
        "tags" | "tag" | "labels" => "tags".into(),
        _ => attribute_for(&h),
    }
}

/// The attribute a column is kept as: its header with every other character than letters and
/// digits made `_` ("Home City" → `attributes.home_city`); "ignore" for a header without any.
fn attribute_for(header: &str) -> String {
    let key: String = header.trim().to_lowercase().chars().map(|c| if c.is_alphanumeric() { c } else { '_' }).collect();
    let key = key.trim_matches('_');
    if key.is_empty() { "ignore".into() } else { format!("attributes.{key}") }
}

/// The mapping an upload starts with: each header guessed, each of the reader's parts taken by
/// its first column only (a second "E-mail" column becomes an attribute), and, when no header
/// names the address, the first column whose first rows all read as addresses. `None` when no
/// column holds addresses.
fn guess_mappings(header: &[String], preview: &[Vec<String>]) -> Option<Vec<String>> {
    let mut mapping: Vec<String> = Vec::with_capacity(header.len());
    for h in header {
        let guess = guess_mapping(h);
        let taken =
            !guess.starts_with("attributes.") && guess != "ignore" && guess != "tags" && mapping.contains(&guess);
        mapping.push(if taken { attribute_for(h) } else { guess });
    }
    if !mapping.iter().any(|m| m == "email") {
        let holds_addresses = |i: usize| {
            let mut cells = preview.iter().filter_map(|row| row.get(i)).map(|c| c.trim()).filter(|c| !c.is_empty());
            let first = cells.next();
            first.is_some() && first.into_iter().chain(cells).all(|c| crate::domain::Email::parse(c).is_ok())
        };
        let column = (0..mapping.len()).find(|i| holds_addresses(*i))?;
        mapping[column] = "email".into();
    }
    Some(mapping)
}

/// Header and first rows of a file's first chunk (lossy: for display only).
fn parse_preview(data: &[u8], delimiter: u8) -> (Vec<String>, Vec<Vec<String>>) {
    let mut rdr = csv::ReaderBuilder::new().delimiter(delimiter).has_headers(false).flexible(true).from_reader(data);
    let mut rows = rdr
        .byte_records()
        .take(PREVIEW_ROWS + 1)
        .filter_map(|r| r.ok())
        .map(|r| r.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect::<Vec<_>>());
    let mut header = rows.next().unwrap_or_default();
    if let Some(first) = header.first_mut() {
        *first = first.trim_start_matches('\u{feff}').to_string();
    }
    (header, rows.collect())
}

#[derive(sqlx::FromRow)]
struct ImportRow {
    id: ImportId,
    file_name: String,
    size_bytes: i64,
    status: ImportStatus,
    delimiter: String,
    mapping: serde_json::Value,
    list_ids: Vec<ListId>,
    mode: ImportMode,
    existing: Existing,
    rows_read: i64,
    created: i64,
    updated: i64,
    skipped: i64,
    invalid: i64,
    bytes_done: i64,
    checkpoint_line: i64,
    error: Option<String>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
}

async fn load(db: &Db, tenant: TenantId, id: ImportId) -> Result<ImportRow> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row = sqlx::query_as(
        "SELECT id, file_name, size_bytes, status, delimiter, mapping, list_ids, mode, existing, rows_read, created, updated,
                skipped, invalid, bytes_done, checkpoint_line, error, started_at, finished_at
         FROM imports WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    tx.commit().await?;
    Ok(row)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn get(db: &Db, tenant: TenantId, id: ImportId) -> Result<Import> {
    let r = load(db, tenant, id).await?;
    // The preview is for the mapping step; the progress page polls this every second and does
    // not need the file read again.
    if !r.status.can_start() {
        return Ok(view(r, Vec::new(), Vec::new()));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let first: Option<Vec<u8>> = sqlx::query_scalar(
        "SELECT substring(data FROM 1 FOR 65536) FROM import_chunks WHERE import_id = $1 AND seq = 0",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    let delimiter = r.delimiter.bytes().next().unwrap_or(b',');
    let (columns, preview) = first.map(|f| parse_preview(&f, delimiter)).unwrap_or_default();
    Ok(view(r, columns, preview))
}

fn view(r: ImportRow, columns: Vec<String>, preview: Vec<Vec<String>>) -> Import {
    let elapsed = match (r.started_at, r.finished_at) {
        (Some(s), Some(f)) => (f - s).num_milliseconds(),
        (Some(s), None) => (Utc::now() - s).num_milliseconds(),
        _ => 0,
    };
    Import {
        id: r.id,
        file_name: r.file_name,
        size_bytes: r.size_bytes,
        status: r.status,
        delimiter: r.delimiter,
        columns,
        preview,
        mapping: serde_json::from_value(r.mapping).unwrap_or_default(),
        list_ids: r.list_ids,
        mode: r.mode,
        existing: r.existing,
        rows_read: r.rows_read,
        created: r.created,
        updated: r.updated,
        skipped: r.skipped,
        invalid: r.invalid,
        bytes_done: r.bytes_done,
        error: r.error,
        started_at: r.started_at,
        finished_at: r.finished_at,
        rows_per_second: if elapsed > 0 { r.rows_read as f64 * 1000.0 / elapsed as f64 } else { 0.0 },
    }
}

type ImportUpdate<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The one way an import's status changes: from one of `from` to `to`, setting `also` as well
/// (assignments whose binds start at $5). Says whether it moved.
async fn transition<'q>(
    tx: &mut Tx,
    tenant: TenantId,
    id: ImportId,
    (from, to): (&'q [ImportStatus], ImportStatus),
    (also, bind_also): (&str, impl FnOnce(ImportUpdate<'q>) -> ImportUpdate<'q>),
) -> Result<bool> {
    let also = if also.is_empty() { String::new() } else { format!(", {also}") };
    let update = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE imports SET status = $3{also} WHERE tenant_id = $1 AND id = $2 AND status = ANY($4)"
    )))
    .bind(tenant)
    .bind(id)
    .bind(to)
    .bind(from);
    Ok(bind_also(update).execute(&mut **tx).await?.rows_affected() > 0)
}

/// The newest imports first.
pub async fn recent(db: &Db, tenant: TenantId, limit: i64) -> Result<Vec<ImportSummary>> {
    page(db, tenant, None, limit).await
}

/// Imports newest first, `limit` of them after `after` (a page's last `(created_at, id)`).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn page(
    db: &Db,
    tenant: TenantId,
    after: Option<(DateTime<Utc>, ImportId)>,
    limit: i64,
) -> Result<Vec<ImportSummary>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(
        "SELECT id, file_name, status, rows_read, invalid, created_at FROM imports
          WHERE tenant_id = $1 AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4))
          ORDER BY created_at DESC, id DESC LIMIT $2",
    )
    .bind(tenant)
    .bind(limit)
    .bind(after.map(|a| a.0))
    .bind(after.map(|a| a.1))
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

pub struct StartImport {
    pub mapping: Vec<String>,
    pub into: ImportInto,
    pub mode: ImportMode,
    pub existing: Existing,
}

/// Where the imported readers go. "No list" is a choice of its own, never what an unticked
/// form means: readers on no list get no campaign, and an import that put 48 of 51 readers
/// nowhere without a word was a trap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportInto {
    Lists(Vec<ListId>),
    NoList,
}

impl ImportInto {
    /// From the mapping form: the ticked lists, and whether "Add them to no list" was ticked.
    pub fn from_form(lists: Vec<ListId>, no_list: bool) -> Result<Self> {
        match (lists.is_empty(), no_list) {
            (false, _) => Ok(Self::Lists(lists)),
            (true, true) => Ok(Self::NoList),
            (true, false) => Err(Error::Invalid(herald_types::Invalid::field(
                "lists",
                "Choose a list to add the readers to, or tick “Add them to no list”.",
            ))),
        }
    }

    pub fn list_ids(&self) -> &[ListId] {
        match self {
            Self::Lists(ids) => ids,
            Self::NoList => &[],
        }
    }
}

/// Checks the choices and queues the import job. Allowed once uploaded, and again after a
/// failure (it resumes where it stopped).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn start(
    db: &Db,
    jobs: &crate::jobs::Jobs,
    tenant: TenantId,
    role: Role,
    id: ImportId,
    s: StartImport,
) -> Result<()> {
    role.require(Role::Author)?;
    if s.mapping.iter().filter(|m| *m == "email").count() != 1 {
        return Err(Error::invalid("Map exactly one column to Email."));
    }
    for (role, label) in [("name", "Name"), ("first_name", "First name"), ("last_name", "Last name")] {
        if s.mapping.iter().filter(|m| *m == role).count() > 1 {
            return Err(Error::invalid(format!("Map at most one column to {label}.")));
        }
    }
    for m in &s.mapping {
        let ok = m == "email"
            || m == "name"
            || m == "first_name"
            || m == "last_name"
            || m == "tags"
            || m == "ignore"
            || m.strip_prefix("attributes.").is_some_and(|k| !k.is_empty());
        if !ok {
            return Err(Error::invalid(format!("Unknown column mapping “{m}”.")));
        }
    }
    let list_ids = s.into.list_ids();
    if s.mode == ImportMode::OptIn && list_ids.is_empty() {
        return Err(Error::invalid("Opt-in emails ask readers to confirm a list: choose at least one."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let startable: Vec<ImportStatus> = ImportStatus::ALL.iter().copied().filter(|s| s.can_start()).collect();
    let started = transition(
        &mut tx,
        tenant,
        id,
        (&startable, ImportStatus::Queued),
        ("mapping = $5, list_ids = $6, mode = $7, existing = $8, error = NULL", |q| {
            q.bind(serde_json::json!(s.mapping)).bind(list_ids).bind(s.mode).bind(s.existing)
        }),
    )
    .await?;
    if !started {
        let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM imports WHERE tenant_id = $1 AND id = $2)")
            .bind(tenant)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        return Err(if exists {
            Error::Conflict("This import is already queued, running or finished.".into())
        } else {
            Error::NotFound
        });
    }
    // Lists must be this workspace's.
    let owned: i64 = sqlx::query_scalar("SELECT count(*) FROM lists WHERE tenant_id = $1 AND id = ANY($2)")
        .bind(tenant)
        .bind(list_ids)
        .fetch_one(&mut *tx)
        .await?;
    if owned as usize != list_ids.len() {
        return Err(Error::NotFound);
    }
    tx.commit().await?;
    jobs.enqueue_import(tenant, id).await
}

/// A `Read` over the file's chunks, fetched one at a time from Postgres by an async task.
struct ChunkReader {
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos >= self.buf.len() {
            match self.rx.recv() {
                Ok(next) => {
                    self.buf = next;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// One parsed row: its line number, the reader (or why the row is invalid) and the raw text.
type ParsedRow = (u64, std::result::Result<ReaderInput, String>, String);

struct Batch {
    rows: Vec<ParsedRow>,
    last_line: u64,
    bytes: u64,
}

fn build_reader(fields: &[&str], mapping: &[String]) -> ReaderInput {
    let mut input = ReaderInput { email: String::new(), name: String::new(), attributes: None, tags: Vec::new() };
    let mut attrs = serde_json::Map::new();
    let (mut first, mut last) = ("", "");
    for (value, role) in fields.iter().zip(mapping) {
        match role.as_str() {
            "email" => input.email = value.trim().to_string(),
            "name" => input.name = value.trim().to_string(),
            "first_name" => first = value.trim(),
            "last_name" => last = value.trim(),
            // Comma-separated names ("vip, early"); a bad name makes the row invalid (see bulk).
            "tags" => input.tags.extend(value.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string)),
            other => {
                if let Some(key) = other.strip_prefix("attributes.")
                    && !value.trim().is_empty()
                {
                    attrs.insert(key.to_string(), serde_json::Value::String(value.trim().to_string()));
                }
            }
        }
    }
    // A full name wins; else the first and last names make it.
    if input.name.is_empty() {
        input.name = [first, last].into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ");
    }
    input.attributes = Some(serde_json::Value::Object(attrs));
    input
}

/// Parses the whole file on a blocking thread, sending batches of rows after `checkpoint`.
fn parse(
    reader: ChunkReader,
    delimiter: u8,
    mapping: Vec<String>,
    checkpoint: u64,
    out: tokio::sync::mpsc::Sender<Batch>,
) {
    let mut rdr = csv::ReaderBuilder::new().delimiter(delimiter).has_headers(false).flexible(true).from_reader(reader);
    let width = mapping.len();
    let mut batch = Batch { rows: Vec::with_capacity(BATCH_ROWS), last_line: checkpoint, bytes: 0 };
    let mut record = csv::ByteRecord::new();
    let mut first = true;
    loop {
        let line = rdr.position().line();
        match rdr.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                // A broken quote or similar: report the line; the parser resynchronises on the next.
                if line > checkpoint {
                    batch.rows.push((line, Err(format!("unreadable CSV: {e}")), String::new()));
                }
                continue;
            }
        }
        let line = record.position().map(|p| p.line()).unwrap_or(line);
        if first {
            first = false;
            continue; // the header
        }
        batch.last_line = line;
        batch.bytes = rdr.position().byte();
        if line <= checkpoint {
            continue;
        }
        let sep = (delimiter as char).to_string();
        let raw: String =
            record.iter().map(String::from_utf8_lossy).collect::<Vec<_>>().join(&sep).chars().take(500).collect();
        let parsed = if record.len() != width {
            Err(format!("expected {width} columns, found {}", record.len()))
        } else {
            match record.iter().map(std::str::from_utf8).collect::<std::result::Result<Vec<&str>, _>>() {
                Ok(fields) => Ok(build_reader(&fields, &mapping)),
                Err(_) => Err("not valid UTF-8 text (save the file as UTF-8)".to_string()),
            }
        };
        batch.rows.push((line, parsed, raw));
        if batch.rows.len() >= BATCH_ROWS {
            let next = Batch { rows: Vec::with_capacity(BATCH_ROWS), last_line: batch.last_line, bytes: batch.bytes };
            if out.blocking_send(std::mem::replace(&mut batch, next)).is_err() {
                return;
            }
        }
    }
    batch.bytes = rdr.position().byte();
    let _ = out.blocking_send(batch);
}

/// What the import job needs besides the database: opt-in mode mails confirmations.
#[derive(Clone, Debug)]
pub struct ImportContext {
    pub db: Db,
    pub signer: crate::infra::tokens::Signer,
    pub jobs: crate::jobs::Jobs,
    pub base_url: String,
}

/// The import job: resumable, idempotent per batch.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn run(cx: &ImportContext, tenant: TenantId, id: ImportId) -> Result<()> {
    let db = &cx.db;
    let imp = load(db, tenant, id).await?;
    if !imp.status.in_progress() {
        return Ok(()); // done, failed or never started: nothing to do (a duplicate delivery)
    }
    {
        let mut tx = db.tenant_tx(tenant).await?;
        let also = "started_at = coalesce(started_at, now())";
        transition(
            &mut tx,
            tenant,
            id,
            (&[ImportStatus::Queued, ImportStatus::Running], ImportStatus::Running),
            (also, |q| q),
        )
        .await?;
        tx.commit().await?;
    }
    match run_batches(cx, tenant, &imp).await {
        Ok(()) => {
            let mut tx = db.tenant_tx(tenant).await?;
            let also = "finished_at = now(), bytes_done = size_bytes";
            transition(&mut tx, tenant, id, (&[ImportStatus::Running], ImportStatus::Done), (also, |q| q)).await?;
            sqlx::query("DELETE FROM import_chunks WHERE import_id = $1").bind(id).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = ?e, import = %id, "import failed; it can be re-run and resumes after the last committed line");
            let mut tx = db.tenant_tx(tenant).await?;
            let why = "The import stopped because of an internal error. Run it again: it continues where it stopped.";
            transition(
                &mut tx,
                tenant,
                id,
                (&[ImportStatus::Running], ImportStatus::Failed),
                ("error = $5", |q| q.bind(why)),
            )
            .await?;
            tx.commit().await?;
            Err(e)
        }
    }
}

async fn run_batches(cx: &ImportContext, tenant: TenantId, imp: &ImportRow) -> Result<()> {
    let db = &cx.db;
    let opt_in = imp.mode == ImportMode::OptIn;
    let workspace = crate::workspaces::get(db, tenant).await?.name;
    let list_names: Vec<String> = {
        let mut tx = db.tenant_tx(tenant).await?;
        let names =
            sqlx::query_scalar("SELECT name FROM lists WHERE tenant_id = $1 AND id = ANY($2) ORDER BY lower(name)")
                .bind(tenant)
                .bind(&imp.list_ids)
                .fetch_all(&mut *tx)
                .await?;
        tx.commit().await?;
        names
    };
    let mapping: Vec<String> = serde_json::from_value(imp.mapping.clone()).unwrap_or_default();
    let delimiter = imp.delimiter.bytes().next().unwrap_or(b',');
    let existing = imp.existing;
    let origin = Origin {
        wording: Some(if opt_in {
            format!("Imported from {}; each reader is asked to confirm by email.", imp.file_name)
        } else {
            format!("Imported from {} by a workspace member, who attests the readers' consent.", imp.file_name)
        }),
        ..Origin::new("import")
    };

    // Chunks flow Postgres → (async fetcher) → std channel → (blocking parser) → batches.
    let (chunk_tx, chunk_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
    let fetch_db = db.clone();
    let import_id = imp.id;
    let fetcher = tokio::spawn(async move {
        let mut seq = 0i32;
        loop {
            let mut tx = fetch_db.tenant_tx(tenant).await?;
            let data: Option<Vec<u8>> =
                sqlx::query_scalar("SELECT data FROM import_chunks WHERE import_id = $1 AND seq = $2")
                    .bind(import_id)
                    .bind(seq)
                    .fetch_optional(&mut *tx)
                    .await?;
            tx.commit().await?;
            let Some(data) = data else { return Ok::<(), Error>(()) };
            let sender = chunk_tx.clone();
            // The channel is bounded: waiting for room must not block the async runtime.
            if tokio::task::spawn_blocking(move || sender.send(data))
                .await
                .map_err(|e| Error::Unexpected(e.into()))?
                .is_err()
            {
                return Ok(());
            }
            seq += 1;
        }
    });
    let (batch_tx, mut batch_rx) = tokio::sync::mpsc::channel::<Batch>(2);
    let checkpoint = imp.checkpoint_line.max(0) as u64;
    let parser = tokio::task::spawn_blocking(move || {
        parse(ChunkReader { rx: chunk_rx, buf: Vec::new(), pos: 0 }, delimiter, mapping, checkpoint, batch_tx)
    });

    while let Some(batch) = batch_rx.recv().await {
        let mut tx = db.tenant_tx(tenant).await?;
        let mut inputs = Vec::with_capacity(batch.rows.len());
        let mut input_lines = Vec::with_capacity(batch.rows.len());
        let mut errors: Vec<(i64, String, String)> = Vec::new();
        for (line, parsed, raw) in &batch.rows {
            match parsed {
                Ok(input) => {
                    inputs.push(input.clone());
                    input_lines.push((*line, raw));
                }
                Err(reason) => errors.push((*line as i64, reason.clone(), raw.clone())),
            }
        }
        // Confirmed mode subscribes in the same statement; opt-in mode starts pending
        // subscriptions and mails after the batch commits.
        let confirmed_lists: &[ListId] = if opt_in { &[] } else { &imp.list_ids };
        let out = bulk::upsert(&mut tx, tenant, &inputs, confirmed_lists, existing, &origin).await?;
        let to_mail = if opt_in {
            super::subscribe::start_pending(&mut tx, tenant, &out.reader_ids, &imp.list_ids, &origin).await?
        } else {
            Vec::new()
        };
        for rejected in &out.invalid {
            if let Some((line, raw)) = input_lines.get(rejected.index) {
                errors.push((*line as i64, rejected.reason.clone(), (*raw).clone()));
            }
        }
        if !errors.is_empty() {
            let (lines, rest): (Vec<i64>, Vec<(String, String)>) =
                errors.into_iter().map(|(l, r, raw)| (l, (r, raw))).unzip();
            let (reasons, raws): (Vec<String>, Vec<String>) = rest.into_iter().unzip();
            sqlx::query(
                "INSERT INTO import_errors (import_id, tenant_id, line, reason, raw)
                 SELECT $1, $2, l, r, w FROM unnest($3::bigint[], $4::text[], $5::text[]) AS t(l, r, w)
                 ON CONFLICT (import_id, line) DO NOTHING",
            )
            .bind(imp.id)
            .bind(tenant)
            .bind(&lines)
            .bind(&reasons)
            .bind(&raws)
            .execute(&mut *tx)
            .await?;
        }
        let invalid_now: i64 = sqlx::query_scalar("SELECT count(*) FROM import_errors WHERE import_id = $1")
            .bind(imp.id)
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE imports SET rows_read = rows_read + $3, created = created + $4, updated = updated + $5, skipped = skipped + $6,
                    invalid = $7, checkpoint_line = $8, bytes_done = $9
             WHERE tenant_id = $1 AND id = $2",
        )
        .bind(tenant)
        .bind(imp.id)
        .bind(batch.rows.len() as i64)
        .bind(out.created as i64)
        .bind(out.updated as i64)
        .bind(out.skipped as i64)
        .bind(invalid_now)
        .bind(batch.last_line as i64)
        .bind(batch.bytes as i64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let public = super::subscribe::PublicContext { db, signer: &cx.signer, jobs: &cx.jobs, base_url: &cx.base_url };
        for (reader, email, pairs) in to_mail {
            let Ok(email) = crate::domain::Email::parse(&email) else {
                tracing::warn!(reader, "stored address no longer parses; confirmation not sent");
                continue;
            };
            match super::subscribe::send_confirmation(&public, tenant, reader, &email, &workspace, &list_names, pairs)
                .await
            {
                Ok(()) => {}
                // A mail quota ([`crate::sending::mail_quota`]): the reader stays unconfirmed, the import
                // goes on.
                Err(Error::Invalid(why)) => tracing::warn!(reader, %why, "confirmation not sent"),
                Err(e) => return Err(e),
            }
        }
    }
    parser.await.map_err(|e| Error::Unexpected(e.into()))?;
    fetcher.await.map_err(|e| Error::Unexpected(e.into()))??;
    Ok(())
}

/// The invalid rows as CSV (line, reason, row), for download, written into `out` in chunks as
/// they are read (an import with a million bad rows is never one string in memory). "line" is
/// the row number as a spreadsheet shows it: the header is 1, and a quoted cell spanning lines
/// stays one row. Stops quietly if the receiver goes away (the client disconnected).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn stream_errors_csv(db: &Db, tenant: TenantId, id: ImportId, out: mpsc::Sender<Vec<u8>>) -> Result<()> {
    load(db, tenant, id).await?;
    let mut tx = db.tenant_tx(tenant).await?;
    let mut csv = super::export::CsvChunks::new(out, &["line", "reason", "row"])?;
    {
        let mut rows = sqlx::query_as::<_, (i64, String, String)>(
            "SELECT line, reason, raw FROM import_errors WHERE tenant_id = $1 AND import_id = $2 ORDER BY line",
        )
        .bind(tenant)
        .bind(id)
        .fetch(&mut *tx);
        while let Some((line, reason, raw)) = rows.try_next().await? {
            if !csv.row(&[&line.to_string(), &reason, &raw]).await? {
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
    fn delimiters_and_mappings_are_guessed() {
        assert_eq!(detect_delimiter(b"email;name;city\na;b;c"), b';');
        assert_eq!(detect_delimiter(b"email,name\n"), b',');
        assert_eq!(detect_delimiter(b"email\tname\n"), b'\t');
        assert_eq!(guess_mapping("E-mail"), "email");
        assert_eq!(guess_mapping("Full Name"), "name");
        assert_eq!(guess_mapping("Home City"), "attributes.home_city");
        assert_eq!(guess_mapping("first_name"), "first_name");
        assert_eq!(guess_mapping("Last Name"), "last_name");
        assert_eq!(guess_mapping("Email Address"), "email");
        let (h, rows) = parse_preview("\u{feff}email,name\n\"a@x.io\",\"Line\nBreak\"\n".as_bytes(), b',');
        assert_eq!(h, vec!["email", "name"]);
        assert_eq!(rows[0][1], "Line\nBreak");
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_upload_needs_a_column_of_addresses_named_or_not() {
        let header = strings(&["Contact", "first_name", "Surname", "E-mail", "Email"]);
        let rows = vec![strings(&["ada@example.com", "Ada", "Lovelace", "x", "y"])];
        // Named: the first "email" column; the second becomes an attribute.
        assert_eq!(
            guess_mappings(&header, &rows),
            Some(strings(&["attributes.contact", "first_name", "last_name", "email", "attributes.email"]))
        );
        // Unnamed: the column whose rows are addresses.
        let header = strings(&["Contact", "Name"]);
        let rows = vec![strings(&["ada@example.com", "Ada"]), strings(&["", "Nobody"])];
        assert_eq!(guess_mappings(&header, &rows), Some(strings(&["email", "name"])));
        // None, or a file that is not CSV at all: refused.
        assert_eq!(guess_mappings(&strings(&["Name", "City"]), &[strings(&["Ada", "Lyon"])]), None);
        assert_eq!(guess_mappings(&strings(&["\u{89}PNG\r"]), &[strings(&["\u{1a}\n"])]), None);
    }

    #[test]
    fn first_and_last_names_make_the_name_unless_a_full_name_is_given() {
        let mapping = strings(&["email", "first_name", "last_name"]);
        assert_eq!(build_reader(&["a@example.com", "Ada", "Lovelace"], &mapping).name, "Ada Lovelace");
        assert_eq!(build_reader(&["a@example.com", "", "Lovelace"], &mapping).name, "Lovelace");
        let mapping = strings(&["email", "name", "first_name"]);
        assert_eq!(build_reader(&["a@example.com", "Countess", "Ada"], &mapping).name, "Countess");
        assert_eq!(build_reader(&["a@example.com", "", "Ada"], &mapping).name, "Ada");
    }
}

/// The fuzz target's way in (`fuzz/fuzz_targets/csv_import.rs`): an uploaded file goes through
/// what `finish_upload` and the import job do with it, in chunks the input chooses, without a
/// database. Panics are the bugs; every row must come out as a reader or a line's error.
#[cfg(feature = "fuzzing")]
pub fn fuzz_csv(data: &[u8]) {
    let Some((&chunk, file)) = data.split_first() else { return };
    let delimiter = detect_delimiter(file);
    let (header, _preview) = parse_preview(file, delimiter);
    let mapping = guess_mappings(&header, &_preview).unwrap_or_default();
    let (chunk_tx, chunk_rx) = std::sync::mpsc::channel();
    for part in file.chunks(usize::from(chunk).max(1)) {
        let _ = chunk_tx.send(part.to_vec());
    }
    drop(chunk_tx);
    let (batch_tx, mut batch_rx) = tokio::sync::mpsc::channel(1 << 16);
    parse(ChunkReader { rx: chunk_rx, buf: Vec::new(), pos: 0 }, delimiter, mapping, 0, batch_tx);
    while let Ok(batch) = batch_rx.try_recv() {
        for (_, parsed, _) in batch.rows {
            if let Ok(reader) = parsed {
                let _ = crate::domain::Email::parse(&reader.email);
            }
        }
    }
}
