//! A campaign as every surface sees it: the author's input, the stored view, and its states.
//! Adding a field is a change here, one migration, one query (`engine/src/campaigns/store.rs`)
//! and the editor field (see CONTRIBUTING.md).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ab_test::AbTest;
use crate::invalid::Problems;
use crate::{AutomationId, CampaignId, Email, IdentityId, Invalid, ListId, SegmentId};

string_enum!(
    /// Where a campaign is in its life (a new one is a draft). Moves only forward, except
    /// pause ⇄ sending and scheduled → draft (unschedule).
    CampaignStatus, invalid = "Unknown campaign status.", default = Draft {
        Draft = "draft",
        Scheduled = "scheduled",
        Sending = "sending",
        Paused = "paused",
        Sent = "sent",
        Cancelled = "cancelled",
        /// A recurring campaign whose schedule runs; its editions are campaigns of their own.
        Recurring = "recurring",
    }
);

impl CampaignStatus {
    /// The author may still change what goes out.
    pub fn is_editable(self) -> bool {
        matches!(self, CampaignStatus::Draft | CampaignStatus::Scheduled)
    }

    /// Nothing more will go out.
    pub fn is_finished(self) -> bool {
        matches!(self, CampaignStatus::Sent | CampaignStatus::Cancelled)
    }

    /// For people: "Draft", "Sending"…
    pub fn label(self) -> &'static str {
        match self {
            CampaignStatus::Draft => "Draft",
            CampaignStatus::Scheduled => "Scheduled",
            CampaignStatus::Sending => "Sending",
            CampaignStatus::Paused => "Paused",
            CampaignStatus::Sent => "Sent",
            CampaignStatus::Cancelled => "Cancelled",
            CampaignStatus::Recurring => "Recurring",
        }
    }
}

string_enum!(
    /// How the body is written.
    BodyFormat, invalid = "Choose blocks, Markdown or HTML.", default = Markdown {
        Markdown = "markdown",
        Html = "html",
        /// A [`crate::BlockDocument`] as JSON, built in the block editor (the app's default for
        /// new campaigns; the API's stays Markdown so existing clients keep working).
        Blocks = "blocks",
    }
);

impl BodyFormat {
    /// For people: "Blocks", "Markdown", "HTML".
    pub fn label(self) -> &'static str {
        match self {
            BodyFormat::Markdown => "Markdown",
            BodyFormat::Html => "HTML",
            BodyFormat::Blocks => "Blocks",
        }
    }
}

string_enum!(
    /// Open and click tracking.
    TrackingMode, invalid = "Tracking is on, anonymous or off.", default = On {
        On = "on",
        /// Counts opens and clicks without recording which reader made them.
        Anonymous = "anonymous",
        Off = "off",
    }
);

string_enum!(
    /// Where a recurring campaign's per-reader data comes from.
    FeedSource, invalid = "Per-reader data comes from nowhere, the API, or a URL.", default = None {
        None = "none",
        /// Pushed per reader through `POST /api/v1/campaigns/{id}/feed`.
        Api = "api",
        /// Fetched per reader from `feed_url` when the edition is sent.
        Url = "url",
    }
);

/// When editions go out: every day, on some weekdays, or on a day of the month, at a local time.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Recurrence {
    /// `day`, `week` or `month`.
    pub every: String,
    /// ISO weekdays (1 = Monday … 7 = Sunday), for `week`.
    #[serde(default)]
    pub weekdays: Vec<u8>,
    /// 1–28, for `month` (every month has it).
    #[serde(default)]
    pub month_day: Option<u8>,
    /// `HH:MM`, local to `tz`.
    pub time: String,
    /// An IANA zone such as `Europe/Berlin` (the engine checks Postgres knows it).
    pub tz: String,
}

impl Recurrence {
    pub fn validate(&self) -> Result<(), Invalid> {
        let invalid = |m: &str| Err(Invalid::field("recurrence", m));
        match self.every.as_str() {
            "day" => {}
            "week" => {
                if self.weekdays.is_empty() || self.weekdays.iter().any(|d| !(1..=7).contains(d)) {
                    return invalid("Choose at least one weekday for a weekly schedule.");
                }
            }
            "month" => {
                if !self.month_day.is_some_and(|d| (1..=28).contains(&d)) {
                    return invalid("Choose a day of the month between 1 and 28.");
                }
            }
            _ => return invalid("Repeat every day, week or month."),
        }
        if chrono::NaiveTime::parse_from_str(self.time.trim(), "%H:%M").is_err() {
            return invalid("Give the time as HH:MM, e.g. 13:00.");
        }
        let tz = self.tz.trim();
        if tz.is_empty() || tz.len() > 64 || !tz.chars().all(|c| c.is_ascii_alphanumeric() || "/_+-".contains(c)) {
            return invalid("Choose a time zone such as Europe/Berlin.");
        }
        Ok(())
    }

    /// "Every Wednesday at 13:00 (Europe/Berlin)".
    pub fn describe(&self) -> String {
        const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
        let when = match self.every.as_str() {
            "day" => "Every day".to_string(),
            "week" => {
                let names: Vec<&str> =
                    self.weekdays.iter().filter_map(|d| DAYS.get(usize::from(*d).wrapping_sub(1))).copied().collect();
                format!("Every {}", names.join(", "))
            }
            _ => format!("On day {} of every month", self.month_day.unwrap_or(1)),
        };
        format!("{when} at {} ({})", self.time.trim(), self.tz.trim())
    }
}

/// Everything an author edits: the editor's autosave, `POST`/`PUT /api/v1/campaigns` and the
/// engine's `create`/`update` all take this. Field names are the names errors are keyed by.
#[derive(Clone, Debug, Serialize, Deserialize, Default, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CampaignInput {
    pub name: String,
    #[serde(default)]
    pub subject: String,
    /// The preview text inboxes show after the subject.
    #[serde(default)]
    pub preheader: String,
    /// A sending identity; omitted = the server's default SMTP server.
    #[serde(default)]
    pub identity_id: Option<IdentityId>,
    /// Defaults to the workspace's default sender.
    #[serde(default)]
    pub from_name: String,
    #[serde(default)]
    pub from_email: String,
    #[serde(default)]
    pub reply_to: String,
    /// Target lists (their union; each reader once).
    #[serde(default)]
    pub list_ids: Vec<ListId>,
    /// Optional audience condition, e.g. `city = "Lyon"` or `plan in ["pro", "team"]`.
    #[serde(default)]
    pub attribute_filter: String,
    /// Target segments, added to the lists' readers (each reader once). A reader a segment
    /// brings in must be confirmed on at least one of the workspace's lists.
    #[serde(default)]
    pub segment_ids: Vec<SegmentId>,
    /// Readers in this segment get nothing, whatever list or segment brings them in.
    #[serde(default)]
    pub exclude_segment_id: Option<SegmentId>,
    #[serde(default)]
    pub body_format: BodyFormat,
    /// minijinja template: `{{ reader.name }}`, `{{ reader.attributes.city | default("") }}`,
    /// `{{ unsubscribe_url }}`.
    #[serde(default)]
    pub body: String,
    /// Spread the send over this many hours (0–168).
    #[serde(default)]
    pub spread_hours: Option<f64>,
    #[serde(default)]
    pub tracking: TrackingMode,
    /// Makes it recurring: `{"every": "week", "weekdays": [3], "time": "13:00", "tz": "Europe/Berlin"}`
    /// (`every`: `day`, `week` with ISO `weekdays` 1–7, or `month` with `month_day` 1–28). Sending
    /// then starts the schedule, and each slot sends an edition.
    #[serde(default)]
    pub recurrence: Option<Recurrence>,
    /// Per-reader data for recurring editions.
    #[serde(default)]
    pub feed: FeedSource,
    /// With `feed = url`: fetched per reader, `{email}` and `{reader_id}` filled in.
    #[serde(default)]
    pub feed_url: String,
    /// Test versions of the subject (and optionally the sender name and body) on a share of the
    /// audience; the rest gets the winner. Needs tracking with reader ids.
    #[serde(default)]
    pub ab_test: Option<AbTest>,
}

/// `POST /api/v1/campaigns/{id}/resend`: a new draft to the readers of a sent campaign who did
/// not open it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ResendInput {
    /// The new campaign's subject; empty keeps the original's.
    #[serde(default)]
    pub subject: String,
    /// Count an open by a privacy proxy (Apple Mail Privacy Protection fetches every image) as an
    /// open: those readers are then left out too.
    #[serde(default)]
    pub count_machine_opens: bool,
    /// Make another resend although this campaign was resent before: readers who got an
    /// earlier resend and still have not opened get this one too. Without it, a second resend
    /// is refused with how many readers that would be.
    #[serde(default)]
    pub again: bool,
}

impl ResendInput {
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.subject.chars().any(char::is_control) || self.subject.chars().count() > 300 {
            return Err(Invalid::field("subject", "The subject must be one line of at most 300 characters."));
        }
        Ok(())
    }
}

/// The largest body an author may save.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

impl CampaignInput {
    /// The checks that need no database, every field at once. Header-bound fields must be one
    /// line. The engine adds the audience condition and the feed URL.
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        let mut one_line = |field: &str, label: &str, v: &str, max: usize| {
            if v.chars().any(char::is_control) {
                problems.add(field, format!("The {label} must be one line."));
            } else if v.chars().count() > max {
                problems.add(field, format!("The {label} may have at most {max} characters."));
            }
        };
        let name = self.name.trim();
        one_line("name", "name", name, 200);
        one_line("subject", "subject", &self.subject, 300);
        one_line("preheader", "preheader", &self.preheader, 300);
        one_line("from_name", "sender name", &self.from_name, 100);
        if name.is_empty() {
            problems.add("name", "Give the campaign a name.");
        }
        for (field, value) in [("from_email", &self.from_email), ("reply_to", &self.reply_to)] {
            if !value.trim().is_empty() {
                problems.check(Email::parse(value).map(drop).map_err(|e| e.at(field)));
            }
        }
        if self.body.len() > MAX_BODY_BYTES {
            problems.add("body", "The body may be at most 1 MB.");
        } else if self.body_format == BodyFormat::Blocks {
            problems.check(crate::BlockDocument::parse(&self.body).and_then(|doc| doc.validate()));
        }
        if let Some(h) = self.spread_hours
            && !(h > 0.0 && h <= 168.0)
        {
            problems.add("spread_hours", "Enter a number of hours between 0 and 168 (a week).");
        }
        if self.segment_ids.len() > 10 {
            problems.add("segment_ids", "A campaign targets at most 10 segments.");
        }
        if self.exclude_segment_id.is_some_and(|x| self.segment_ids.contains(&x)) {
            problems.add("exclude_segment_id", "A segment cannot be both sent to and excluded.");
        }
        if let Some(r) = &self.recurrence {
            problems.check(r.validate());
        }
        if self.feed != FeedSource::None && self.recurrence.is_none() {
            problems.add("feed", "Per-reader data feeds are for recurring campaigns.");
        }
        if let Some(t) = &self.ab_test {
            problems.check(t.validate());
            if self.tracking != TrackingMode::On {
                problems
                    .add("ab_test", "An A/B test needs tracking with reader ids (Tracking: on) to find its winner.");
            }
            if self.recurrence.is_some() {
                problems.add("ab_test", "Recurring campaigns cannot be A/B tested.");
            }
        }
        problems.into_result()
    }
}

/// A stored campaign, as the editor, the progress view and `GET /api/v1/campaigns/{id}` show it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Campaign {
    pub id: CampaignId,
    pub name: String,
    pub subject: String,
    pub preheader: String,
    pub identity_id: Option<IdentityId>,
    pub from_name: String,
    pub from_email: String,
    pub reply_to: String,
    pub list_ids: Vec<ListId>,
    pub attribute_filter: String,
    pub segment_ids: Vec<SegmentId>,
    pub exclude_segment_id: Option<SegmentId>,
    pub body_format: BodyFormat,
    pub body: String,
    pub status: CampaignStatus,
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The zone the author scheduled in, for display.
    pub schedule_tz: String,
    pub spread_hours: Option<f64>,
    pub tracking: TrackingMode,
    /// Why the engine paused it (too many failures, the bounce rate…), or the author did.
    pub pause_reason: Option<String>,
    /// A recurring campaign's schedule; `None` for one-off sends.
    #[cfg_attr(feature = "sqlx", sqlx(json(nullable)))]
    pub recurrence: Option<Recurrence>,
    pub feed: FeedSource,
    pub feed_url: String,
    /// On an edition: the recurring campaign it was made from, and its slot.
    pub parent_id: Option<CampaignId>,
    pub edition_slot: Option<DateTime<Utc>>,
    #[cfg_attr(feature = "sqlx", sqlx(json(nullable)))]
    pub ab_test: Option<AbTest>,
    /// The A/B test's winning version (0 is A), once chosen.
    pub ab_winner: Option<i16>,
    /// A resend's original: this campaign goes to the original's readers who did not open it.
    pub resend_of: Option<CampaignId>,
    /// On a resend: an open by a privacy proxy (a machine open) counts as an open.
    pub resend_machine_opens: bool,
    /// The resends made from this campaign, oldest first.
    pub resends: Vec<CampaignId>,
    /// An automation's email step: it sends to the readers who reach that step, for as long as
    /// the automation is live, and never appears among the campaigns.
    pub automation_id: Option<AutomationId>,
    /// Sent whatever the workspace's frequency cap says (an automation's welcome mail).
    pub cap_exempt: bool,
    pub fanout_done: bool,
    pub recipients: i64,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_campaign_filter_is_checked_field_by_field() {
        let f = |q: &str, status: &str, from: &str, to: &str| CampaignFilter {
            q: q.into(),
            status: status.into(),
            from: from.into(),
            to: to.into(),
            limit: None,
            cursor: None,
        };
        let all = f("", "", "", "").parse().expect("no filter");
        assert_eq!((all.status, all.from, all.limit), (None, None, 200));
        let some = f(" spring ", "sent", "2026-11-01", "2026-11-30").parse().expect("a filter");
        assert_eq!((some.words.as_str(), some.status), ("spring", Some(CampaignStatus::Sent)));
        let e = f("", "shipped", "11/01/2026", "").parse().expect_err("two problems");
        assert!(e.message_for("status").is_some() && e.message_for("from").is_some());
        assert!(f("", "", "2026-12-01", "2026-11-01").parse().expect_err("backwards").message_for("to").is_some());
        assert!(f("x", "", "", "").is_set() && !f(" ", "", "", "").is_set());
    }

    #[test]
    fn states_round_trip_through_text() {
        for s in CampaignStatus::ALL {
            assert_eq!(s.as_str().parse::<CampaignStatus>().ok(), Some(*s));
        }
        assert!("shipping".parse::<CampaignStatus>().is_err());
        assert_eq!("HTML".parse::<BodyFormat>().ok(), Some(BodyFormat::Html));
    }

    #[test]
    fn an_input_names_every_wrong_field_at_once() {
        let input = CampaignInput {
            name: " ".into(),
            subject: "two\nlines".into(),
            from_email: "nope".into(),
            spread_hours: Some(500.0),
            feed: FeedSource::Api,
            ..Default::default()
        };
        let e = input.validate().expect_err("invalid");
        for field in ["name", "subject", "from_email", "spread_hours", "feed"] {
            assert!(e.message_for(field).is_some(), "{field}: {e:?}");
        }
        assert_eq!(e.message_for("name"), Some("Give the campaign a name."));
        let ok = CampaignInput { name: "Spring".into(), ..Default::default() };
        assert_eq!(ok.validate(), Ok(()));
    }

    #[test]
    fn missing_choices_take_their_defaults() {
        let input: CampaignInput = serde_json::from_value(serde_json::json!({"name": "x"})).expect("parses");
        assert_eq!(
            (input.body_format, input.tracking, input.feed),
            (BodyFormat::Markdown, TrackingMode::On, FeedSource::None)
        );
        assert!(
            serde_json::from_value::<CampaignInput>(serde_json::json!({"name": "x", "tracking": "sometimes"})).is_err()
        );
    }
}

/// `GET /api/v1/campaigns/{id}/audience`: who a send started now would reach.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AudienceCount {
    /// Readers it would mail: active, confirmed (on a target list, or on any list for a reader a
    /// segment brings in), not suppressed, outside the frequency cap, not excluded.
    pub eligible: i64,
    /// Readers its lists and segments bring in that it would skip (inactive, suppressed,
    /// within the frequency cap).
    pub skipped: i64,
}

/// One edition of a recurring campaign, for its page and the API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Edition {
    pub id: CampaignId,
    /// The schedule slot it was made for.
    pub slot: DateTime<Utc>,
    pub status: CampaignStatus,
    pub recipients: i64,
    pub sent: i64,
    /// Readers the edition's feed had no data for.
    pub skipped_no_data: i64,
    pub failed: i64,
}

/// A campaign that went out, with its engagement, for the dashboard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct RecentCampaign {
    pub id: CampaignId,
    pub name: String,
    pub finished_at: Option<DateTime<Utc>>,
    pub sent: i64,
    pub unique_opens: i64,
    pub unique_clicks: i64,
}

impl RecentCampaign {
    /// Unique opens over messages sent, `None` before anything was sent.
    pub fn open_rate(&self) -> Option<f64> {
        rate(self.unique_opens, self.sent)
    }

    pub fn click_rate(&self) -> Option<f64> {
        rate(self.unique_clicks, self.sent)
    }
}

/// Which campaigns `GET /api/v1/campaigns` and the campaigns page list: every field may be left
/// empty (no filter). Strings, so a form's empty field and the API's absent parameter mean the
/// same; [`CampaignFilter::parse`] says what is wrong, keyed by field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct CampaignFilter {
    /// Words in the name or subject, ignoring case.
    #[serde(default)]
    pub q: String,
    /// One status: draft, scheduled, sending, paused, sent, cancelled or recurring.
    #[serde(default)]
    pub status: String,
    /// On or after this day (`2026-11-01`, UTC): the day it was sent or started, else the day it
    /// is scheduled for, else the day it was made.
    #[serde(default)]
    pub from: String,
    /// On or before this day.
    #[serde(default)]
    pub to: String,
    /// At most this many, newest first: 1 to 500, 200 when absent.
    #[serde(default)]
    pub limit: Option<i64>,
    /// The API's paging: the previous page's `next_cursor`.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// A [`CampaignFilter`] checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CampaignQuery {
    pub words: String,
    pub status: Option<CampaignStatus>,
    pub from: Option<chrono::NaiveDate>,
    pub to: Option<chrono::NaiveDate>,
    pub limit: i64,
    /// Campaigns after this one in the list's order: a page's last `(created_at, id)`.
    pub after: Option<(DateTime<Utc>, CampaignId)>,
}

impl CampaignFilter {
    pub fn parse(&self) -> Result<CampaignQuery, Invalid> {
        let mut problems = Problems::default();
        let mut day = |field: &str, s: &str| {
            let s = s.trim();
            if s.is_empty() {
                return None;
            }
            let parsed = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
            if parsed.is_none() {
                problems.add(field, "Write a day as YYYY-MM-DD, such as 2026-11-01.");
            }
            parsed
        };
        let (from, to) = (day("from", &self.from), day("to", &self.to));
        if let (Some(f), Some(t)) = (from, to)
            && f > t
        {
            problems.add("to", "The last day comes after the first.");
        }
        let status = problems.take(CampaignStatus::parse_optional(&self.status).map_err(|e| e.at("status"))).flatten();
        if self.q.chars().count() > 200 {
            problems.add("q", "Search for at most 200 characters.");
        }
        if self.limit.is_some_and(|l| !(1..=500).contains(&l)) {
            problems.add("limit", "Ask for 1 to 500 campaigns.");
        }
        problems.into_result()?;
        Ok(CampaignQuery {
            words: self.q.trim().to_string(),
            status,
            from,
            to,
            limit: self.limit.unwrap_or(200),
            after: None,
        })
    }

    /// Any filter is set (the page then says "no campaign matches" rather than "no campaigns yet").
    pub fn is_set(&self) -> bool {
        [&self.q, &self.status, &self.from, &self.to].iter().any(|s| !s.trim().is_empty())
    }
}

/// `part` over `whole`, `None` when `whole` is not positive (nothing to divide by).
pub fn rate(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// `POST /api/v1/campaigns/{id}/schedule`: when to send.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ScheduleInput {
    /// When to send (RFC 3339, e.g. `2026-12-01T09:00:00+01:00`).
    pub at: DateTime<Utc>,
    /// The time zone the author thinks in, kept for display (e.g. `Europe/Paris`).
    #[serde(default = "utc")]
    pub timezone: String,
}

fn utc() -> String {
    "UTC".into()
}

/// One reader's data for a recurring campaign's next edition, keyed by reader id or address.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FeedItem {
    /// A reader id or an email address.
    pub reader: String,
    /// This reader's data for the next edition, a JSON object (`{{ feed.… }}` in the template).
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub data: serde_json::Value,
}

/// What a feed upload did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FeedResult {
    /// Readers whose data was stored for the next edition.
    pub stored: u64,
    /// Items not stored, by their index in the request, with the reason.
    pub rejected: Vec<crate::invalid::Rejected>,
}

string_enum!(
    /// Where a send-approval request is: waiting for an owner or admin, approved (the send it
    /// asked for ran), or turned down.
    ApprovalState, invalid = "Unknown approval state.", default = Pending {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
    }
);

/// A campaign's latest send-approval request, as its page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct ApprovalRequest {
    pub requested_by: String,
    pub requested_at: DateTime<Utc>,
    /// `None`: send as soon as approved.
    pub send_at: Option<DateTime<Utc>>,
    pub timezone: String,
    pub state: ApprovalState,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub note: String,
}
