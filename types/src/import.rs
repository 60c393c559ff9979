//! CSV imports as the pages and the engine see them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{ImportId, ListId};
use crate::reader::Existing;

string_enum!(
    /// How an import handles consent: the workspace attests the readers agreed (confirmed), or
    /// each reader is mailed an opt-in link first and joins the lists on clicking it.
    ImportMode, invalid = "Choose how consent is handled: confirmed or opt-in email.", default = Confirmed {
        Confirmed = "confirmed",
        OptIn = "opt_in",
    }
);

string_enum!(
    /// Where an import is: its file arriving (uploading), waiting for its column mapping
    /// (uploaded), waiting for a worker (queued), importing (running), then done or failed. A
    /// failed import can be mapped and started again; it resumes after its last committed line.
    ImportStatus, invalid = "Unknown import status.", default = Uploading {
        Uploading = "uploading",
        Uploaded = "uploaded",
        Queued = "queued",
        Running = "running",
        Done = "done",
        Failed = "failed",
    }
);

impl ImportStatus {
    /// Its columns can be mapped and the import started (again).
    pub fn can_start(self) -> bool {
        matches!(self, ImportStatus::Uploaded | ImportStatus::Failed)
    }

    /// It can be deleted: nothing is importing it and it did not finish.
    pub fn can_discard(self) -> bool {
        matches!(self, ImportStatus::Uploading | ImportStatus::Uploaded | ImportStatus::Failed)
    }

    /// A worker has it or will take it.
    pub fn in_progress(self) -> bool {
        matches!(self, ImportStatus::Queued | ImportStatus::Running)
    }
}

/// One import: its file, its mapping and its progress.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Import {
    pub id: ImportId,
    pub file_name: String,
    pub size_bytes: i64,
    pub status: ImportStatus,
    pub delimiter: String,
    /// The header row (read only while the mapping is still to be chosen).
    pub columns: Vec<String>,
    /// The first rows after the header (as `columns`).
    pub preview: Vec<Vec<String>>,
    /// Per column: "email", "name", "attributes.<key>" or "ignore".
    pub mapping: Vec<String>,
    pub list_ids: Vec<ListId>,
    pub mode: ImportMode,
    pub existing: Existing,
    pub rows_read: i64,
    pub created: i64,
    pub updated: i64,
    pub skipped: i64,
    pub invalid: i64,
    pub bytes_done: i64,
    pub error: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub rows_per_second: f64,
}

impl Import {
    /// How far through its file it is, 0–100 (100 only once done).
    pub fn percent(&self) -> u8 {
        if self.status == ImportStatus::Done {
            100
        } else if self.size_bytes > 0 {
            ((self.bytes_done as f64 / self.size_bytes as f64) * 100.0).clamp(0.0, 99.0) as u8
        } else {
            0
        }
    }
}

/// An import in the list of recent ones.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ImportSummary {
    pub id: ImportId,
    pub file_name: String,
    pub status: ImportStatus,
    pub rows_read: i64,
    pub invalid: i64,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_finished_import_is_complete() {
        let mut import = Import {
            id: ImportId(uuid::Uuid::nil()),
            file_name: "readers.csv".into(),
            size_bytes: 1000,
            status: ImportStatus::Running,
            delimiter: ",".into(),
            columns: Vec::new(),
            preview: Vec::new(),
            mapping: Vec::new(),
            list_ids: Vec::new(),
            mode: ImportMode::Confirmed,
            existing: Existing::Update,
            rows_read: 10,
            created: 10,
            updated: 0,
            skipped: 0,
            invalid: 0,
            bytes_done: 1000,
            error: None,
            started_at: None,
            finished_at: None,
            rows_per_second: 0.0,
        };
        assert_eq!(import.percent(), 99, "all bytes read is not done");
        import.status = ImportStatus::Done;
        assert_eq!(import.percent(), 100);
        assert!(ImportStatus::Failed.can_start() && ImportStatus::Failed.can_discard());
        assert!(!ImportStatus::Running.can_discard() && ImportStatus::Running.in_progress());
    }
}
