//! Saved segments: a condition tree over a workspace's readers — lists, tags, custom
//! fields, sign-up, address and engagement — that campaigns target and exclude.
//!
//! The tree is plain data, stored as JSON (`segments.definition`) and compiled by the database
//! (`segment_where` in `engine/sql/segments.sql`) from fixed SQL fragments, each value a bound parameter: nothing
//! typed by an author ever becomes SQL text. A tree is `all`/`any` of rules, each a condition or
//! a group (`all`/`any` of conditions): nested one level, as the type says.

use serde::{Deserialize, Serialize};

use crate::field::{Field, FieldKind};
use crate::invalid::{Invalid, Problems};
use crate::{CampaignId, ListId, SegmentId, TagId};

/// The longest segment name.
pub const MAX_NAME_CHARS: usize = 80;
/// Rules in a tree, and conditions in a group.
pub const MAX_RULES: usize = 20;
/// The longest window, in days.
pub const MAX_DAYS: u32 = 3650;

string_enum!(
    /// How a tree or group combines its rules.
    Match, invalid = "Match all or any of the rules.", default = All {
        All = "all",
        Any = "any",
    }
);

string_enum!(
    /// A reader's place on a list.
    ListState, invalid = "Unknown list state: use subscribed, pending, unsubscribed, member or not_member.", default = Subscribed {
        /// Confirmed.
        Subscribed = "subscribed",
        /// Waiting for the confirmation link.
        Pending = "pending",
        Unsubscribed = "unsubscribed",
        /// On it in any state.
        Member = "member",
        /// Never on it.
        NotMember = "not_member",
    }
);

string_enum!(
    /// How a custom field's value is compared. Which ones a field takes depends on its type
    /// ([`FieldOp::for_kind`]).
    FieldOp, invalid = "Unknown comparison.", default = Eq {
        Eq = "eq",
        Ne = "ne",
        Contains = "contains",
        StartsWith = "starts_with",
        Lt = "lt",
        Gt = "gt",
        /// Inclusive at both ends.
        Between = "between",
        IsSet = "is_set",
        IsEmpty = "is_empty",
        Before = "before",
        After = "after",
        WithinLastDays = "within_last_days",
        /// The day and month come round within the next N days (birthdays, renewals).
        AnniversaryWithinDays = "anniversary_within_days",
    }
);

string_enum!(
    /// How the sign-up date is compared.
    DateOp, invalid = "Unknown comparison: use before, after or within_last_days.", default = WithinLastDays {
        Before = "before",
        After = "after",
        WithinLastDays = "within_last_days",
    }
);

string_enum!(
    /// How a reader first arrived: the source of its first consent record.
    SignupSource, invalid = "Unknown source: use hosted_form, import, api or admin.", default = HostedForm {
        HostedForm = "hosted_form",
        Import = "import",
        Api = "api",
        Admin = "admin",
    }
);

impl FieldOp {
    /// The comparisons a field of `kind` takes.
    pub fn for_kind(kind: FieldKind) -> &'static [FieldOp] {
        use FieldOp::*;
        match kind {
            FieldKind::Text => &[Eq, Ne, Contains, StartsWith, IsSet, IsEmpty],
            FieldKind::Choice => &[Eq, Ne, IsSet, IsEmpty],
            FieldKind::Number => &[Eq, Ne, Lt, Gt, Between, IsSet, IsEmpty],
            FieldKind::Date => &[Eq, Before, After, Between, WithinLastDays, AnniversaryWithinDays, IsSet, IsEmpty],
            FieldKind::YesNo => &[Eq, IsSet, IsEmpty],
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            FieldOp::Eq => "is",
            FieldOp::Ne => "is not",
            FieldOp::Contains => "contains",
            FieldOp::StartsWith => "starts with",
            FieldOp::Lt => "is less than",
            FieldOp::Gt => "is more than",
            FieldOp::Between => "is between",
            FieldOp::IsSet => "is set",
            FieldOp::IsEmpty => "is empty",
            FieldOp::Before => "is before",
            FieldOp::After => "is after",
            FieldOp::WithinLastDays => "is within the last N days",
            FieldOp::AnniversaryWithinDays => "comes round in the next N days",
        }
    }

    /// What the comparison reads besides the field: a value, two, or a number of days.
    pub fn operands(self) -> Operands {
        match self {
            FieldOp::IsSet | FieldOp::IsEmpty => Operands::None,
            FieldOp::Between => Operands::Two,
            FieldOp::WithinLastDays | FieldOp::AnniversaryWithinDays => Operands::Days,
            _ => Operands::One,
        }
    }
}

/// What a comparison needs typed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    None,
    One,
    Two,
    Days,
}

/// One test of a reader.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Condition {
    /// On a list, in a state (or not on it at all).
    List {
        list_id: ListId,
        state: ListState,
    },
    /// Has (or has not) a tag.
    Tag {
        tag_id: TagId,
        #[serde(default = "yes")]
        has: bool,
    },
    /// A custom field compared with a value typed as the field's type (dates `YYYY-MM-DD`).
    Field {
        key: String,
        op: FieldOp,
        #[serde(default)]
        value: String,
        /// The upper end of `between`.
        #[serde(default)]
        value2: String,
        #[serde(default)]
        days: Option<u32>,
    },
    /// When the reader was added.
    SignedUp {
        op: DateOp,
        /// `YYYY-MM-DD`, for before and after.
        #[serde(default)]
        value: String,
        #[serde(default)]
        days: Option<u32>,
    },
    Source {
        source: SignupSource,
    },
    /// The part of the address after `@`, in any case.
    EmailDomain {
        domain: String,
        #[serde(default = "yes")]
        is: bool,
    },
    /// Opened (or did not open) any campaign — or the given one — within the last `days`
    /// (ever, without). Machine opens (prefetches) never count; a click counts as an open.
    Opened {
        #[serde(default)]
        campaign_id: Option<CampaignId>,
        #[serde(default)]
        days: Option<u32>,
        #[serde(default = "yes")]
        did: bool,
    },
    /// Clicked (or did not click) a link in any campaign — or the given one — within the last
    /// `days` (ever, without).
    Clicked {
        #[serde(default)]
        campaign_id: Option<CampaignId>,
        #[serde(default)]
        days: Option<u32>,
        #[serde(default = "yes")]
        did: bool,
    },
    /// Has never opened a campaign.
    NeverOpened,
    /// Sunset: received at least `campaigns` campaigns since it last opened one (or ever, if it
    /// never did), and opened none of them.
    Unengaged {
        campaigns: u32,
    },
    /// Bounced softly within the last `days`.
    SoftBounced {
        days: u32,
    },
}

fn yes() -> bool {
    true
}

/// A rule of the tree: a condition, or a group of conditions.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum Rule {
    Group(Group),
    Condition(Condition),
}

/// `all`/`any` of conditions, inside a tree.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Group {
    #[serde(rename = "match")]
    pub match_: Match,
    pub conditions: Vec<Condition>,
}

/// A segment's condition tree.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Definition {
    #[serde(rename = "match", default)]
    pub match_: Match,
    pub rules: Vec<Rule>,
}

/// A saved segment.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Segment {
    pub id: SegmentId,
    pub name: String,
    pub definition: Definition,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// `POST /api/v1/segments`, `PUT /api/v1/segments/{id}`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SegmentInput {
    pub name: String,
    pub definition: Definition,
}

/// `GET /api/v1/segments/{id}/count`, `POST /api/v1/segments/count` and the editor's live count.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SegmentCount {
    /// Readers matching, whatever their status (a campaign's eligible count says how many of
    /// them it would mail).
    pub readers: i64,
}

/// A reader matching a segment, as the editor's preview lists it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct SegmentReader {
    pub id: i64,
    pub email: String,
    pub name: String,
}

impl SegmentInput {
    /// Every problem at once. `fields` are the workspace's fields (a field condition's type
    /// decides its comparisons and how its value is read). Errors are keyed `name`,
    /// `rules.<i>` or `rules.<i>.conditions.<j>`, each with `.value`, `.value2`, `.days` or
    /// `.key` when the problem is with that part.
    pub fn validate(&self, fields: &[Field]) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            problems.add("name", format!("Give the segment a name of one line, at most {MAX_NAME_CHARS} characters."));
        }
        problems.check(self.definition.validate(fields));
        problems.into_result()
    }
}

impl Definition {
    pub fn validate(&self, fields: &[Field]) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        if self.rules.is_empty() {
            problems.add("rules", "Add at least one condition.");
        }
        if self.rules.len() > MAX_RULES {
            problems.add("rules", format!("A segment has at most {MAX_RULES} rules."));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            match rule {
                Rule::Condition(c) => problems.check(c.validate(fields).map_err(|e| prefix(e, &format!("rules.{i}")))),
                Rule::Group(g) => {
                    if g.conditions.is_empty() || g.conditions.len() > MAX_RULES {
                        problems.add(&format!("rules.{i}"), format!("A group has 1 to {MAX_RULES} conditions."));
                    }
                    for (j, c) in g.conditions.iter().enumerate() {
                        problems.check(c.validate(fields).map_err(|e| prefix(e, &format!("rules.{i}.conditions.{j}"))));
                    }
                }
            }
        }
        problems.into_result()
    }

    /// Every condition, groups opened.
    pub fn conditions(&self) -> impl Iterator<Item = &Condition> {
        self.rules.iter().flat_map(|r| match r {
            Rule::Condition(c) => std::slice::from_ref(c).iter(),
            Rule::Group(g) => g.conditions.iter(),
        })
    }
}

/// `e` with its fields put under `path` (`value` → `rules.2.value`; no field → `rules.2`).
fn prefix(mut e: Invalid, path: &str) -> Invalid {
    for fe in &mut e.errors {
        fe.field = Some(match fe.field.take() {
            Some(f) => format!("{path}.{f}"),
            None => path.to_string(),
        });
    }
    e
}

fn check_days(days: Option<u32>, required: bool) -> Result<(), Invalid> {
    match days {
        None if required => Err(Invalid::field("days", "How many days?")),
        Some(d) if d == 0 || d > MAX_DAYS => Err(Invalid::field("days", format!("From 1 to {MAX_DAYS} days."))),
        _ => Ok(()),
    }
}

/// A calendar day written exactly `YYYY-MM-DD`, year 1 or later: chrono's parser alone takes
/// `0000-01-01`, `+12345-01-01` and `2026- 1- 5`, which Postgres's `date` refuses or reads
/// otherwise.
pub fn parse_day(value: &str) -> Option<chrono::NaiveDate> {
    let v = value.trim();
    let shaped = v.len() == 10
        && v.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d").ok().filter(|d| shaped && chrono::Datelike::year(d) >= 1)
}

fn check_day(value: &str, field: &str) -> Result<(), Invalid> {
    parse_day(value).map(|_| ()).ok_or_else(|| Invalid::field(field, "A date written YYYY-MM-DD, like 2026-11-26."))
}

impl Condition {
    /// The checks that need no database (the engine checks that lists, tags and campaigns
    /// exist). Errors are keyed by the condition's own parts (`value`, `days`, …).
    pub fn validate(&self, fields: &[Field]) -> Result<(), Invalid> {
        match self {
            Condition::List { .. } | Condition::Tag { .. } | Condition::Source { .. } | Condition::NeverOpened => {
                Ok(())
            }
            Condition::Field { key, op, value, value2, days } => {
                let Some(field) = fields.iter().find(|f| &f.key == key) else {
                    return Err(Invalid::field("key", "Choose one of the workspace's fields."));
                };
                if !FieldOp::for_kind(field.kind).contains(op) {
                    return Err(Invalid::field(
                        "op",
                        format!("A {} field cannot be compared that way.", field.kind.label().to_lowercase()),
                    ));
                }
                let one = |raw: &str, at: &str| -> Result<(), Invalid> {
                    if raw.trim().is_empty() {
                        return Err(Invalid::field(at, "Type a value to compare with."));
                    }
                    match field.kind {
                        FieldKind::Date => check_day(raw, at),
                        // Contains and starts-with take any text, even in a choice field.
                        _ if matches!(op, FieldOp::Contains | FieldOp::StartsWith) => Ok(()),
                        _ => field.parse_text(raw).map(|_| ()).map_err(|e| Invalid::field(at, e)),
                    }
                };
                match op.operands() {
                    Operands::None => Ok(()),
                    Operands::One => one(value, "value"),
                    Operands::Two => {
                        let mut p = Problems::default();
                        p.check(one(value, "value"));
                        p.check(one(value2, "value2"));
                        p.into_result()
                    }
                    Operands::Days => check_days(*days, true),
                }
            }
            Condition::SignedUp { op, value, days } => match op {
                DateOp::WithinLastDays => check_days(*days, true),
                DateOp::Before | DateOp::After => check_day(value, "value"),
            },
            Condition::EmailDomain { domain, .. } => {
                let d = domain.trim().trim_start_matches('@');
                let ok =
                    !d.is_empty() && d.len() <= 253 && d.chars().all(|c| c.is_alphanumeric() || c == '.' || c == '-');
                if ok { Ok(()) } else { Err(Invalid::field("domain", "A domain, like example.com.")) }
            }
            Condition::Opened { days, .. } | Condition::Clicked { days, .. } => check_days(*days, false),
            Condition::Unengaged { campaigns } => {
                if (1..=1000).contains(campaigns) {
                    Ok(())
                } else {
                    Err(Invalid::field("campaigns", "From 1 to 1000 campaigns."))
                }
            }
            Condition::SoftBounced { days } => check_days(Some(*days), true),
        }
    }

    /// The condition in words, for lists and summaries; `names` gives a list's, tag's or
    /// campaign's name by id.
    pub fn describe(&self, names: &dyn Fn(uuid::Uuid) -> String, fields: &[Field]) -> String {
        let within = |days: &Option<u32>| match days {
            Some(d) => format!(" in the last {d} days"),
            None => String::new(),
        };
        let what = |c: &Option<CampaignId>| match c {
            Some(c) => format!("“{}”", names(c.0)),
            None => "any campaign".to_string(),
        };
        match self {
            Condition::List { list_id, state } => {
                let list = names(list_id.0);
                match state {
                    ListState::Subscribed => format!("subscribed to {list}"),
                    ListState::Pending => format!("waiting to confirm {list}"),
                    ListState::Unsubscribed => format!("unsubscribed from {list}"),
                    ListState::Member => format!("on {list}"),
                    ListState::NotMember => format!("not on {list}"),
                }
            }
            Condition::Tag { tag_id, has } => {
                format!("{} tag {}", if *has { "has" } else { "has not" }, names(tag_id.0))
            }
            Condition::Field { key, op, value, value2, days } => {
                let label = fields.iter().find(|f| &f.key == key).map_or(key.as_str(), |f| f.label.as_str());
                match op.operands() {
                    Operands::None => format!("{label} {}", op.label()),
                    Operands::One => format!("{label} {} {value}", op.label()),
                    Operands::Two => format!("{label} is between {value} and {value2}"),
                    Operands::Days => {
                        format!("{label} {}", op.label().replace('N', &days.unwrap_or_default().to_string()))
                    }
                }
            }
            Condition::SignedUp { op, value, days } => match op {
                DateOp::Before => format!("signed up before {value}"),
                DateOp::After => format!("signed up after {value}"),
                DateOp::WithinLastDays => format!("signed up in the last {} days", days.unwrap_or_default()),
            },
            Condition::Source { source } => format!("came from {}", source.label()),
            Condition::EmailDomain { domain, is } => {
                format!("address {} at {}", if *is { "is" } else { "is not" }, domain.trim().trim_start_matches('@'))
            }
            Condition::Opened { campaign_id, days, did } => {
                format!("{} {}{}", if *did { "opened" } else { "did not open" }, what(campaign_id), within(days))
            }
            Condition::Clicked { campaign_id, days, did } => {
                format!("{} in {}{}", if *did { "clicked" } else { "did not click" }, what(campaign_id), within(days))
            }
            Condition::NeverOpened => "never opened a campaign".to_string(),
            Condition::Unengaged { campaigns } => format!("opened none of the last {campaigns} campaigns it received"),
            Condition::SoftBounced { days } => format!("bounced softly in the last {days} days"),
        }
    }
}

impl SignupSource {
    pub fn label(self) -> &'static str {
        match self {
            SignupSource::HostedForm => "a subscribe form",
            SignupSource::Import => "an import",
            SignupSource::Api => "the API",
            SignupSource::Admin => "a workspace member",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields() -> Vec<Field> {
        vec![
            Field {
                key: "plan".into(),
                label: "Plan".into(),
                kind: FieldKind::Choice,
                choices: vec!["Free".into(), "Pro".into()],
            },
            Field { key: "age".into(), label: "Age".into(), kind: FieldKind::Number, choices: vec![] },
            Field { key: "birthday".into(), label: "Birthday".into(), kind: FieldKind::Date, choices: vec![] },
        ]
    }

    #[test]
    fn the_json_form_round_trips_and_nests_one_level() {
        let def: Definition = serde_json::from_value(json!({
            "match": "all",
            "rules": [
                {"kind": "tag", "tag_id": "00000000-0000-0000-0000-000000000001"},
                {"match": "any", "conditions": [
                    {"kind": "opened", "days": 30},
                    {"kind": "field", "key": "age", "op": "between", "value": "18", "value2": "30"}
                ]},
                {"kind": "never_opened"}
            ]
        }))
        .expect("parses");
        assert_eq!(def.conditions().count(), 4);
        assert!(matches!(def.rules[0], Rule::Condition(Condition::Tag { has: true, .. })));
        assert!(matches!(&def.rules[1], Rule::Group(g) if g.match_ == Match::Any));
        let again: Definition = serde_json::from_value(serde_json::to_value(&def).expect("json")).expect("parses");
        assert_eq!(again, def);
        assert!(def.validate(&fields()).is_ok());
        // A group inside a group is not a condition.
        let deeper = json!({"rules": [{"match": "any", "conditions": [{"match": "all", "conditions": []}]}]});
        assert!(serde_json::from_value::<Definition>(deeper).is_err());
    }

    #[test]
    fn days_are_written_one_way_only() {
        assert!(parse_day("2026-11-26").is_some());
        for bad in ["0000-01-01", "-0001-01-01", "+12345-01-01", "2026- 1- 5", "5-1-1", "2026-02-30", ""] {
            assert!(parse_day(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn problems_are_keyed_by_where_they_are() {
        let input = SegmentInput {
            name: " ".into(),
            definition: Definition {
                match_: Match::All,
                rules: vec![
                    Rule::Condition(Condition::Field {
                        key: "age".into(),
                        op: FieldOp::Gt,
                        value: "old".into(),
                        value2: String::new(),
                        days: None,
                    }),
                    Rule::Group(Group {
                        match_: Match::Any,
                        conditions: vec![
                            Condition::Field {
                                key: "plan".into(),
                                op: FieldOp::Lt,
                                value: "1".into(),
                                value2: String::new(),
                                days: None,
                            },
                            Condition::SoftBounced { days: 0 },
                            Condition::Field {
                                key: "nope".into(),
                                op: FieldOp::Eq,
                                value: "1".into(),
                                value2: String::new(),
                                days: None,
                            },
                            Condition::Field {
                                key: "birthday".into(),
                                op: FieldOp::Between,
                                value: "2026-01-01".into(),
                                value2: "01/02/2026".into(),
                                days: None,
                            },
                        ],
                    }),
                ],
            },
        };
        let keys: Vec<String> =
            input.validate(&fields()).expect_err("bad").errors.into_iter().filter_map(|e| e.field).collect();
        assert_eq!(
            keys,
            [
                "name",
                "rules.0.value",
                "rules.1.conditions.0.op",
                "rules.1.conditions.1.days",
                "rules.1.conditions.2.key",
                "rules.1.conditions.3.value2"
            ]
        );
        let empty = Definition::default();
        assert_eq!(empty.validate(&[]).expect_err("empty").message_for("rules"), Some("Add at least one condition."));
    }
}
