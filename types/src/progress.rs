//! How far a campaign's send got, as the progress view, `GET /api/v1/campaigns/{id}/progress`
//! and `…/report` show it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::CampaignStatus;

string_enum!(
    /// Where one reader's message is (a row of the send log).
    SendStatus, invalid = "Unknown send status." {
        Queued = "queued",
        /// Outside an A/B test's share: waits for the winning version.
        Held = "held",
        /// Claimed by a delivery loop, in an SMTP transaction.
        Sending = "sending",
        Sent = "sent",
        Failed = "failed",
        /// Nothing to send to this reader (suppressed, capped, no data…); the reason says why.
        Skipped = "skipped",
        Cancelled = "cancelled",
        /// Queued for longer than the workspace allows.
        Expired = "expired",
    }
);

/// Counts per send status, the rate and an ETA.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Progress {
    pub status: CampaignStatus,
    pub pause_reason: Option<String>,
    pub fanout_done: bool,
    pub recipients: i64,
    pub queued: i64,
    /// Waiting for an A/B test's winner.
    #[serde(default)]
    pub held: i64,
    pub sending: i64,
    pub sent: i64,
    pub failed: i64,
    pub skipped: i64,
    pub expired: i64,
    pub cancelled: i64,
    pub hard_bounces: i64,
    /// Messages re-sent after an ambiguous outcome (lease expired mid-SMTP).
    pub ambiguous: i64,
    /// Messages per second over the last 10 seconds.
    pub rate: f64,
    /// Seconds until the queue is empty at the current rate.
    pub eta_seconds: Option<i64>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Progress {
    /// The count of rows in `status`.
    pub fn count_mut(&mut self, status: SendStatus) -> &mut i64 {
        match status {
            SendStatus::Queued => &mut self.queued,
            SendStatus::Held => &mut self.held,
            SendStatus::Sending => &mut self.sending,
            SendStatus::Sent => &mut self.sent,
            SendStatus::Failed => &mut self.failed,
            SendStatus::Skipped => &mut self.skipped,
            SendStatus::Expired => &mut self.expired,
            SendStatus::Cancelled => &mut self.cancelled,
        }
    }

    /// Rows with a final outcome so far.
    pub fn finished(&self) -> i64 {
        self.sent + self.failed + self.skipped + self.expired + self.cancelled
    }

    /// Every row written so far (the fan-out may still be adding).
    pub fn total(&self) -> i64 {
        self.finished() + self.queued + self.held + self.sending
    }

    /// Rows with a final outcome, out of all rows written so far.
    pub fn done_fraction(&self) -> f64 {
        match self.total() {
            0 if self.status == CampaignStatus::Sent => 1.0,
            0 => 0.0,
            total => self.finished() as f64 / total as f64,
        }
    }

    /// Finished share, 0–100, rounded down (a sent campaign is 100 even with no rows).
    pub fn percent(&self) -> u8 {
        if self.status == CampaignStatus::Sent {
            100
        } else {
            (self.done_fraction() * 100.0).floor().clamp(0.0, 100.0) as u8
        }
    }

    /// Still moving: worth polling.
    pub fn live(&self) -> bool {
        self.status == CampaignStatus::Sending || (self.status == CampaignStatus::Paused && self.sending > 0)
    }
}

/// One failed message, for the report.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Failure {
    pub email: String,
    pub status: SendStatus,
    pub reason: Option<String>,
    pub attempts: i32,
    pub hard_bounce: bool,
    pub updated_at: DateTime<Utc>,
}

/// How many readers got nothing, for one reason.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SkipCount {
    pub reason: String,
    pub count: i64,
}

/// The progress, the latest failures and why readers were skipped.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Report {
    pub progress: Progress,
    /// The most recent failures (up to 200), newest first.
    pub failures: Vec<Failure>,
    /// Why readers got nothing, most common first.
    pub skipped: Vec<SkipCount>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_is_rounded_down_and_full_when_sent() {
        let p = Progress { status: CampaignStatus::Sending, sent: 999, queued: 1, ..Default::default() };
        assert_eq!(p.percent(), 99, "rounded down");
        assert!(p.live());
        let done = Progress { status: CampaignStatus::Sent, ..p };
        assert_eq!((done.percent(), done.live()), (100, false));
        assert_eq!(Progress::default().done_fraction(), 0.0);
    }
}
