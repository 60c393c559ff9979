//! Automations: a trigger, then steps each reader walks in order — an email, a wait,
//! a tag added or removed, an exit. Each reader's place is a row (a *run*); each step runs once
//! per run, and an email step is a send-log row of the step's own campaign, so it is sent
//! exactly once through the same claim / fence / acknowledgement machinery as a campaign.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::campaign::{BodyFormat, MAX_BODY_BYTES};
use crate::invalid::{Invalid, Problems};
use crate::{AutomationId, AutomationStepId, CampaignId, ListId, SegmentId, TagId};

/// The longest automation name.
pub const MAX_NAME_CHARS: usize = 200;
/// Steps in one automation.
pub const MAX_STEPS: usize = 50;
/// The longest wait: a year.
pub const MAX_WAIT_MINUTES: u64 = 366 * 24 * 60;
/// The longest event name (`POST /api/v1/readers/{id}/events`).
pub const MAX_EVENT_NAME_CHARS: usize = 100;
/// The most event data kept for a run (its JSON, in bytes).
pub const MAX_EVENT_DATA_BYTES: usize = 16 * 1024;

string_enum!(
    /// Where an automation is in its life. Only a live one lets readers in and moves them on.
    AutomationStatus, invalid = "Unknown state: use draft, live, paused or archived.", default = Draft {
        Draft = "draft",
        Live = "live",
        /// Nobody enters and nobody moves on; waiting readers keep their place.
        Paused = "paused",
        /// Ended for good: waiting readers left it.
        Archived = "archived",
    }
);

string_enum!(
    /// Whether a reader can go through an automation more than once.
    Reentry, invalid = "Choose once, after_finish or every_time.", default = Once {
        /// One run per reader, ever.
        Once = "once",
        /// Again once the earlier run ended.
        AfterFinish = "after_finish",
        /// Every time the trigger fires, even while an earlier run is under way.
        EveryTime = "every_time",
    }
);

string_enum!(
    /// A wait's unit.
    WaitUnit, invalid = "Wait minutes, hours or days.", default = Days {
        Minutes = "minutes",
        Hours = "hours",
        Days = "days",
    }
);

string_enum!(
    /// A day of the week, for "wait until Tuesday 09:00" (Postgres's `to_char(…, 'dy')`).
    Weekday, invalid = "Choose days as mon, tue, wed, thu, fri, sat or sun.", default = Mon {
        Mon = "mon",
        Tue = "tue",
        Wed = "wed",
        Thu = "thu",
        Fri = "fri",
        Sat = "sat",
        Sun = "sun",
    }
);

impl Weekday {
    /// "Tue".
    pub fn short_name(self) -> &'static str {
        match self {
            Weekday::Mon => "Mon",
            Weekday::Tue => "Tue",
            Weekday::Wed => "Wed",
            Weekday::Thu => "Thu",
            Weekday::Fri => "Fri",
            Weekday::Sat => "Sat",
            Weekday::Sun => "Sun",
        }
    }
}

string_enum!(
    /// What happens to readers waiting at a step that an edit removes.
    RemovedStepReaders, invalid = "Move them to the next step, or let them exit.", default = Next {
        /// They go on with the step that followed it.
        Next = "next",
        /// They leave the automation.
        Exit = "exit",
    }
);

string_enum!(
    /// Where a reader's run is.
    RunState, invalid = "Unknown run state.", default = Waiting {
        /// At a step, waiting for its time.
        Waiting = "waiting",
        /// Went through every step (or reached an exit step).
        Finished = "finished",
        /// Left early: unsubscribed, suppressed, the automation archived, a step removed.
        Exited = "exited",
    }
);

/// What lets a reader in.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trigger {
    /// The reader is confirmed on the list (single opt-in, the confirmation link, an import, the API).
    ListConfirmed { list_id: ListId },
    /// The tag is added to the reader (by hand, in bulk, by an import or the API).
    TagAdded { tag_id: TagId },
    /// `POST /api/v1/readers/{id}/events` with this name; its `data` is `{{ event.* }}` in the mail.
    Event { name: String },
    /// The reader comes to match the segment (checked every minute; who matched when the
    /// automation went live does not count).
    SegmentEntered { segment_id: SegmentId },
    /// The month and day of the reader's date field are today's (UTC): birthdays, renewals.
    /// With re-entry "every time", each year.
    DateAnniversary { field: String },
}

impl Trigger {
    /// The stored kind and key (`automations.trigger_kind`, `trigger_key`).
    pub fn kind_and_key(&self) -> (&'static str, String) {
        match self {
            Trigger::ListConfirmed { list_id } => ("list_confirmed", list_id.to_string()),
            Trigger::TagAdded { tag_id } => ("tag_added", tag_id.to_string()),
            Trigger::Event { name } => ("event", name.trim().to_string()),
            Trigger::SegmentEntered { segment_id } => ("segment_entered", segment_id.to_string()),
            Trigger::DateAnniversary { field } => ("date_anniversary", field.trim().to_string()),
        }
    }

    /// The inverse of [`Trigger::kind_and_key`]; `None` for what no version ever stored.
    pub fn from_kind_and_key(kind: &str, key: &str) -> Option<Self> {
        Some(match kind {
            "list_confirmed" => Trigger::ListConfirmed { list_id: key.parse().ok()? },
            "tag_added" => Trigger::TagAdded { tag_id: key.parse().ok()? },
            "event" => Trigger::Event { name: key.to_string() },
            "segment_entered" => Trigger::SegmentEntered { segment_id: key.parse().ok()? },
            "date_anniversary" => Trigger::DateAnniversary { field: key.to_string() },
            _ => return None,
        })
    }
}

/// What a branch tests, for each reader at it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BranchCondition {
    /// Opened the mail of an earlier email step (by its place, 0 first) in this run; a privacy
    /// proxy's open does not count.
    Opened {
        step: usize,
    },
    /// Clicked a link in the mail of an earlier email step in this run.
    Clicked {
        step: usize,
    },
    HasTag {
        tag_id: TagId,
    },
    /// Matches a saved segment now (lists, tags, field values, engagement…).
    InSegment {
        segment_id: SegmentId,
    },
    /// The reader's field (a custom field's key) has this value, ignoring case and the spaces
    /// around it: "plan is pro".
    FieldIs {
        field: String,
        value: String,
    },
}

/// Where a branch sends a reader.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BranchTarget {
    /// The step after the branch.
    Next,
    /// A later step, by its place (0 first): the branches rejoin there.
    Step { index: usize },
    /// The run ends here.
    Exit,
}

impl BranchTarget {
    fn describe(self) -> String {
        match self {
            BranchTarget::Next => "go on".into(),
            BranchTarget::Step { index } => format!("go to step {}", index + 1),
            BranchTarget::Exit => "exit".into(),
        }
    }
}

/// What a step does.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepAction {
    /// Sends a mail: the same template language as campaigns, plus `{{ event.* }}`, the data of
    /// the event that let the reader in.
    Email {
        subject: String,
        #[serde(default)]
        preheader: String,
        #[serde(default)]
        body_format: BodyFormat,
        #[serde(default)]
        body: String,
    },
    /// Waits this long before the next step.
    Wait {
        amount: u32,
        unit: WaitUnit,
    },
    /// Waits until the next of these days (any day when empty) at this time (`HH:MM`), in the
    /// zone a reader's field names (an IANA name such as `America/New_York`), or in `zone` when
    /// the step names no field or the reader's value is empty or unknown, or, when `zone` is
    /// empty too, in the workspace's time zone (Settings).
    WaitUntil {
        #[serde(default)]
        weekdays: Vec<Weekday>,
        time: String,
        #[serde(default)]
        zone: String,
        #[serde(default)]
        zone_field: Option<String>,
    },
    AddTag {
        tag_id: TagId,
    },
    RemoveTag {
        tag_id: TagId,
    },
    /// Puts the reader on a list, unless they have a subscription to it already (one they left
    /// stays left: consent is theirs to give). A single opt-in list confirms them at once; a
    /// double opt-in list leaves them pending and mails them its confirmation, as its form does.
    Subscribe {
        list_id: ListId,
    },
    /// Takes the reader off a list. Leaving the list that started this automation ends the run.
    Unsubscribe {
        list_id: ListId,
    },
    /// Ends the run here.
    Exit,
    /// Sends each reader on by a condition: `if_yes` where it holds, `if_no` where it does not
    /// (only forward, so a run always ends).
    Branch {
        condition: BranchCondition,
        if_yes: BranchTarget,
        if_no: BranchTarget,
    },
}

impl StepAction {
    /// The wait's length in minutes (0 for every other step).
    pub fn wait_minutes(&self) -> u64 {
        match self {
            StepAction::Wait { amount, unit } => {
                let per = match unit {
                    WaitUnit::Minutes => 1,
                    WaitUnit::Hours => 60,
                    WaitUnit::Days => 24 * 60,
                };
                u64::from(*amount) * per
            }
            _ => 0,
        }
    }

    /// A few words for the flow and the audit log: "Email “Welcome”", "Wait 2 days".
    pub fn summary(&self) -> String {
        match self {
            StepAction::Email { subject, .. } => format!("Email “{subject}”"),
            StepAction::Wait { amount, unit } => {
                let unit = unit.as_str();
                let unit = if *amount == 1 { unit.trim_end_matches('s') } else { unit };
                format!("Wait {amount} {unit}")
            }
            StepAction::WaitUntil { weekdays, time, .. } => {
                let days = if weekdays.is_empty() || weekdays.len() == 7 {
                    "the next day".to_string()
                } else {
                    weekdays.iter().map(|d| d.short_name()).collect::<Vec<_>>().join(", ")
                };
                format!("Wait until {days} at {time}")
            }
            StepAction::AddTag { .. } => "Add a tag".into(),
            StepAction::RemoveTag { .. } => "Remove a tag".into(),
            StepAction::Subscribe { .. } => "Subscribe to a list".into(),
            StepAction::Unsubscribe { .. } => "Leave a list".into(),
            StepAction::Exit => "Exit".into(),
            StepAction::Branch { condition, if_yes, if_no } => {
                let test = match condition {
                    BranchCondition::Opened { step } => format!("opened step {}", step + 1),
                    BranchCondition::Clicked { step } => format!("clicked in step {}", step + 1),
                    BranchCondition::HasTag { .. } => "has the tag".into(),
                    BranchCondition::InSegment { .. } => "is in the segment".into(),
                    BranchCondition::FieldIs { field, value } => format!("has {field} “{value}”"),
                };
                format!("If the reader {test}: {}; if not: {}", if_yes.describe(), if_no.describe())
            }
        }
    }

    fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        match self {
            StepAction::Email { subject, body, body_format, .. } => {
                if subject.trim().is_empty() {
                    problems.add("subject", "Write a subject.");
                } else if subject.chars().count() > 500 || subject.chars().any(char::is_control) {
                    problems.add("subject", "A subject is one line of at most 500 characters.");
                }
                if body.len() > MAX_BODY_BYTES {
                    problems.add("body", "The body is larger than 1 MiB.");
                } else if *body_format == BodyFormat::Blocks {
                    // Keyed as a campaign's (`body.blocks.2.text`), under the step's prefix.
                    problems.check(crate::BlockDocument::parse(body).and_then(|doc| doc.validate()));
                }
            }
            StepAction::Wait { amount, .. } => {
                if *amount == 0 {
                    problems.add("amount", "Wait at least 1.");
                } else if self.wait_minutes() > MAX_WAIT_MINUTES {
                    problems.add("amount", "Wait at most a year.");
                }
            }
            StepAction::WaitUntil { time, zone, zone_field, .. } => {
                if parse_time_of_day(time).is_none() {
                    problems.add("time", "Write a time of day as HH:MM, such as 09:00.");
                }
                if zone.chars().count() > 64 {
                    problems.add("zone", "Choose a time zone such as Europe/Berlin.");
                }
                if zone_field.as_deref().is_some_and(|f| f.trim().is_empty()) {
                    problems.add("zone_field", "Choose a field, or none.");
                }
            }
            StepAction::Branch { condition: BranchCondition::FieldIs { field, value }, .. } => {
                if field.trim().is_empty() {
                    problems.add("condition", "Choose a field.");
                } else if value.chars().count() > 500 {
                    problems.add("condition", "A value has at most 500 characters.");
                }
            }
            StepAction::AddTag { .. }
            | StepAction::RemoveTag { .. }
            | StepAction::Subscribe { .. }
            | StepAction::Unsubscribe { .. }
            | StepAction::Exit
            | StepAction::Branch { .. } => {}
        }
        problems.into_result()
    }

    /// A branch's references, checked against the steps around it (`at` is its place): the
    /// mail it tests is an earlier email step, and it only sends readers forward.
    fn validate_branch(&self, at: usize, steps: &[StepInput]) -> Result<(), Invalid> {
        let StepAction::Branch { condition, if_yes, if_no } = self else { return Ok(()) };
        let mut problems = Problems::default();
        if let BranchCondition::Opened { step } | BranchCondition::Clicked { step } = condition {
            let is_email = steps.get(*step).is_some_and(|s| matches!(s.action, StepAction::Email { .. }));
            if *step >= at || !is_email {
                problems.add("condition", "Test an email step before this branch.");
            }
        }
        for (field, target) in [("if_yes", if_yes), ("if_no", if_no)] {
            if let BranchTarget::Step { index } = target
                && (*index <= at || *index >= steps.len())
            {
                problems.add(field, "Go to a step after this branch.");
            }
        }
        problems.into_result()
    }
}

/// A step as saved: its id stays the same through edits, so readers waiting at it keep their place.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Step {
    pub id: AutomationStepId,
    pub action: StepAction,
    /// An email step's campaign: its send log, report and tracking.
    #[serde(default)]
    pub campaign_id: Option<CampaignId>,
}

/// A step as the editor sends it: no id for a new one.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct StepInput {
    #[serde(default)]
    pub id: Option<AutomationStepId>,
    pub action: StepAction,
}

/// What `POST /api/v1/automations` and `PUT /api/v1/automations/{id}` take.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AutomationInput {
    pub name: String,
    pub trigger: Trigger,
    #[serde(default)]
    pub reentry: Reentry,
    /// Its mail goes out whatever the workspace's frequency cap says (a welcome mail).
    #[serde(default)]
    pub cap_exempt: bool,
    #[serde(default)]
    pub steps: Vec<StepInput>,
    /// On a live automation: what happens to readers waiting at a step this edit removes.
    #[serde(default)]
    pub removed_step_readers: RemovedStepReaders,
}

impl AutomationInput {
    /// Every problem at once, keyed `name`, `trigger.name`, `steps` or `steps.<i>.<field>`.
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            problems
                .add("name", format!("Give the automation a name of one line, at most {MAX_NAME_CHARS} characters."));
        }
        if let Trigger::Event { name } = &self.trigger {
            problems.check(check_event_name(name).map(drop).map_err(|e| e.at("trigger.name")));
        }
        if self.steps.len() > MAX_STEPS {
            problems.add("steps", format!("An automation has at most {MAX_STEPS} steps."));
        }
        let mut seen = Vec::new();
        for (i, step) in self.steps.iter().enumerate() {
            if let Some(id) = step.id {
                if seen.contains(&id) {
                    problems.add(&format!("steps.{i}"), "Two steps have the same id.");
                }
                seen.push(id);
            }
            if let Err(e) = step.action.validate().and_then(|()| step.action.validate_branch(i, &self.steps)) {
                for fe in e.errors {
                    let field = match fe.field {
                        Some(f) => format!("steps.{i}.{f}"),
                        None => format!("steps.{i}"),
                    };
                    problems.add(&field, fe.message);
                }
            }
        }
        problems.into_result()
    }
}

/// `HH:MM` (24-hour) as hours and minutes.
pub fn parse_time_of_day(s: &str) -> Option<(u32, u32)> {
    let (h, m) = s.trim().split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some((h, m))
}

/// An event name as stored: trimmed, 1–100 characters of letters, digits, `_`, `-`, `.`.
pub fn check_event_name(name: &str) -> Result<String, Invalid> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_EVENT_NAME_CHARS {
        return Err(Invalid::new(format!("An event name has 1 to {MAX_EVENT_NAME_CHARS} characters.")));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Err(Invalid::new("An event name is letters, digits, “_”, “-” and “.”: “order_placed”."));
    }
    Ok(name.to_string())
}

/// A stored automation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Automation {
    pub id: AutomationId,
    pub name: String,
    pub status: AutomationStatus,
    pub trigger: Trigger,
    pub reentry: Reentry,
    pub cap_exempt: bool,
    /// Why the engine paused it (a step's template broke, its mail or its steps kept failing),
    /// in plain words.
    pub pause_reason: Option<String>,
    /// The workspace's daily warm-up limit, when its mail today has reached it: this
    /// automation's mail waits (readers keep their place) until the limit allows more.
    #[serde(default)]
    pub warmup_limit_reached: Option<i64>,
    pub steps: Vec<Step>,
    /// Readers in it now (waiting at a step).
    pub active: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One step's figures: how many readers reached it, wait at it now, and — for an email — what
/// its campaign's log and tracking say.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct StepStats {
    pub step_id: AutomationStepId,
    /// Runs that reached it (done or waiting at it).
    pub entered: i64,
    pub waiting: i64,
    pub sent: i64,
    pub opened: i64,
    pub clicked: i64,
}

/// The automation's report: runs by state, and each step's figures in step order.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AutomationReport {
    pub entered: i64,
    pub active: i64,
    pub finished: i64,
    pub exited: i64,
    pub steps: Vec<StepStats>,
}

/// A reader's run, as the "readers at this step" list and the reader's page show it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Run {
    /// The run's own id: its place among the automation's runs (later runs have larger ones).
    pub id: i64,
    pub automation_id: AutomationId,
    pub automation_name: String,
    pub reader_id: i64,
    pub email: String,
    /// 1 for the reader's first run through this automation, 2 for the next…
    pub entry: i32,
    pub state: RunState,
    /// The step it waits at (waiting runs only).
    pub step_id: Option<AutomationStepId>,
    /// When that step runs.
    pub due_at: Option<DateTime<Utc>>,
    pub entered_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// Why it left early.
    pub exit_reason: Option<String>,
    /// The steps it went through, in order.
    #[cfg_attr(feature = "sqlx", sqlx(json))]
    pub path: Vec<RunStep>,
}

/// A step a run went through.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RunStep {
    pub step_id: AutomationStepId,
    pub at: DateTime<Utc>,
    /// "queued", "waited", "tagged", "untagged", "subscribed", "unsubscribed", "yes", "no", "exit".
    pub outcome: String,
}

/// What `POST /api/v1/readers/{id}/events` takes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ReaderEventInput {
    /// Automations triggered by this name let the reader in.
    pub name: String,
    /// A JSON object, `{{ event.* }}` in their mail (at most 16 KiB).
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub data: serde_json::Value,
}

/// How many automations an event let the reader into.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct EventAccepted {
    pub entered: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(steps: Vec<StepAction>) -> AutomationInput {
        AutomationInput {
            name: "Welcome".into(),
            trigger: Trigger::Event { name: "signed_up".into() },
            reentry: Reentry::Once,
            cap_exempt: false,
            steps: steps.into_iter().map(|action| StepInput { id: None, action }).collect(),
            removed_step_readers: RemovedStepReaders::Next,
        }
    }

    #[test]
    fn problems_are_keyed_by_the_step_and_field() {
        let bad = input(vec![
            StepAction::Wait { amount: 2, unit: WaitUnit::Days },
            StepAction::Email {
                subject: " ".into(),
                preheader: String::new(),
                body_format: BodyFormat::Markdown,
                body: String::new(),
            },
            StepAction::Wait { amount: 400, unit: WaitUnit::Days },
        ]);
        let e = bad.validate().expect_err("three problems");
        assert!(e.message_for("steps.1.subject").is_some());
        assert!(e.message_for("steps.2.amount").is_some());
        assert!(e.message_for("steps.0.amount").is_none());
        assert!(input(vec![StepAction::Exit]).validate().is_ok());

        // A mail built from blocks is checked as a campaign's, its blocks' problems under the step.
        let blocks = |body: &str| StepAction::Email {
            subject: "Hi".into(),
            preheader: String::new(),
            body_format: BodyFormat::Blocks,
            body: body.into(),
        };
        let e = input(vec![
            StepAction::Exit,
            blocks(r#"{"version": 1, "blocks": [{"type": "heading", "text": " ", "level": 1}]}"#),
        ])
        .validate()
        .expect_err("an empty heading");
        assert!(e.message_for("steps.1.body.blocks.0.text").is_some(), "{e:?}");
        assert!(input(vec![blocks("not a document")]).validate().is_err());
        assert!(
            input(vec![blocks(r#"{"version": 1, "blocks": [{"type": "paragraph", "text": "Hello"}]}"#)])
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn a_branch_tests_an_earlier_mail_and_only_goes_forward() {
        let mail = StepAction::Email {
            subject: "Hi".into(),
            preheader: String::new(),
            body_format: BodyFormat::Markdown,
            body: String::new(),
        };
        let branch = |condition, if_no| StepAction::Branch { condition, if_yes: BranchTarget::Next, if_no };
        let wait = StepAction::Wait { amount: 1, unit: WaitUnit::Days };
        let ok = input(vec![
            mail.clone(),
            wait.clone(),
            branch(BranchCondition::Opened { step: 0 }, BranchTarget::Step { index: 3 }),
            mail.clone(),
        ]);
        assert!(ok.validate().is_ok());
        let bad = input(vec![
            mail.clone(),
            branch(BranchCondition::Clicked { step: 2 }, BranchTarget::Step { index: 0 }),
            wait,
        ]);
        let e = bad.validate().expect_err("a mail after it, a target before it");
        assert!(e.message_for("steps.1.condition").is_some());
        assert!(e.message_for("steps.1.if_no").is_some());
        assert!(input(vec![branch(BranchCondition::Opened { step: 0 }, BranchTarget::Exit)]).validate().is_err());
        assert_eq!(
            branch(BranchCondition::Opened { step: 0 }, BranchTarget::Exit).summary(),
            "If the reader opened step 1: go on; if not: exit"
        );
    }

    #[test]
    fn event_names_are_plain_words() {
        assert_eq!(check_event_name(" order_placed ").as_deref(), Ok("order_placed"));
        assert!(check_event_name("").is_err());
        assert!(check_event_name("order placed").is_err());
        assert!(check_event_name("x'; drop").is_err());
    }

    #[test]
    fn triggers_round_trip_through_kind_and_key() {
        for t in [
            Trigger::ListConfirmed { list_id: ListId(uuid::Uuid::from_u128(7)) },
            Trigger::TagAdded { tag_id: TagId(uuid::Uuid::from_u128(8)) },
            Trigger::Event { name: "paid".into() },
            Trigger::SegmentEntered { segment_id: SegmentId(uuid::Uuid::from_u128(9)) },
            Trigger::DateAnniversary { field: "birthday".into() },
        ] {
            let (kind, key) = t.kind_and_key();
            assert_eq!(Trigger::from_kind_and_key(kind, &key), Some(t));
        }
        assert_eq!(StepAction::Wait { amount: 1, unit: WaitUnit::Days }.summary(), "Wait 1 day");
        assert_eq!(StepAction::Wait { amount: 90, unit: WaitUnit::Minutes }.wait_minutes(), 90);
    }

    #[test]
    fn a_wait_until_names_a_time_of_day_and_a_zone() {
        let until = |time: &str, zone: &str| StepAction::WaitUntil {
            weekdays: vec![Weekday::Tue, Weekday::Thu],
            time: time.into(),
            zone: zone.into(),
            zone_field: None,
        };
        assert!(input(vec![until("09:00", "Europe/Berlin")]).validate().is_ok());
        let e = input(vec![until("25:00", &"Z".repeat(65))]).validate().expect_err("a bad time and zone");
        assert!(e.message_for("steps.0.time").is_some());
        assert!(e.message_for("steps.0.zone").is_some());
        // No zone of its own: the workspace's.
        assert!(input(vec![until("09:00", " ")]).validate().is_ok());
        assert!(input(vec![until("9:5", "UTC")]).validate().is_err());
        assert_eq!(parse_time_of_day("7:30"), Some((7, 30)));
        assert_eq!(until("09:00", "UTC").summary(), "Wait until Tue, Thu at 09:00");
        let json = serde_json::to_value(until("09:00", "UTC")).expect("json");
        assert_eq!(json["weekdays"], serde_json::json!(["tue", "thu"]));
        let field = StepAction::Branch {
            condition: BranchCondition::FieldIs { field: String::new(), value: "pro".into() },
            if_yes: BranchTarget::Next,
            if_no: BranchTarget::Exit,
        };
        assert!(input(vec![field]).validate().expect_err("no field").message_for("steps.0.condition").is_some());
    }
}
