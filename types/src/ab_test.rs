//! A/B tests: a campaign's other versions, the share of the audience that tests them, and how
//! the winner is chosen. The campaign's own subject, sender name and body are version A; the
//! test adds one to three more (B, C, D). Readers in the test share get one version at random;
//! the rest get the winner once it is known (when the window ends, or earlier by the author).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Invalid;
use crate::invalid::Problems;

/// At most this many versions, A included.
pub const MAX_VARIANTS: usize = 4;

string_enum!(
    /// What makes a version win.
    AbMetric, invalid = "Choose opens or clicks.", default = Opens {
        /// Readers who opened, not counting machine opens (privacy proxies fetch every image).
        Opens = "opens",
        /// Readers who clicked a link.
        Clicks = "clicks",
    }
);

impl AbMetric {
    /// Short enough for a phone's select; opens by privacy proxies never count (said beside it).
    pub fn label(self) -> &'static str {
        match self {
            AbMetric::Opens => "Unique opens",
            AbMetric::Clicks => "Unique clicks",
        }
    }
}

/// One version besides the campaign's own. Empty sender name or body: the campaign's.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Variant {
    pub subject: String,
    #[serde(default)]
    pub from_name: String,
    #[serde(default)]
    pub body: String,
}

/// The test of a campaign.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AbTest {
    /// Versions B, C and D (one to three); the campaign's own content is version A.
    pub variants: Vec<Variant>,
    /// The share of the audience that gets a version at random, in percent (1–100). The rest
    /// gets the winner.
    pub test_percent: u8,
    #[serde(default)]
    pub metric: AbMetric,
    /// How long after the send starts the winner is chosen by the metric (1–72 hours).
    pub window_hours: u16,
}

impl Default for AbTest {
    fn default() -> Self {
        AbTest { variants: vec![Variant::default()], test_percent: 20, metric: AbMetric::Opens, window_hours: 4 }
    }
}

/// "A", "B"… for version `i` (0 is the campaign's own).
pub fn variant_label(i: usize) -> char {
    (b'A' + i.min(25) as u8) as char
}

impl AbTest {
    /// Versions in all, A included.
    pub fn versions(&self) -> usize {
        self.variants.len() + 1
    }

    /// The checks that need no database, each beside its field (`ab_test.variants.1.subject`…;
    /// the index is the version's, so B is 1).
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        if self.variants.is_empty() || self.versions() > MAX_VARIANTS {
            problems.add("ab_test.variants", "A test has two to four versions: add one to three besides A.");
        }
        for (i, v) in self.variants.iter().enumerate() {
            let at = |f: &str| format!("ab_test.variants.{}.{f}", i + 1);
            let label = variant_label(i + 1);
            if v.subject.trim().is_empty() {
                problems.add(&at("subject"), format!("Write version {label}'s subject."));
            } else if v.subject.chars().any(char::is_control) || v.subject.chars().count() > 300 {
                problems.add(&at("subject"), "The subject must be one line of at most 300 characters.");
            }
            if v.from_name.chars().any(char::is_control) || v.from_name.chars().count() > 100 {
                problems.add(&at("from_name"), "The sender name must be one line of at most 100 characters.");
            }
            if v.body.len() > crate::campaign::MAX_BODY_BYTES {
                problems.add(&at("body"), "The body may be at most 1 MB.");
            }
        }
        if !(1..=100).contains(&self.test_percent) {
            problems.add("ab_test.test_percent", "Enter a share between 1 and 100 %.");
        }
        if !(1..=72).contains(&self.window_hours) {
            problems.add("ab_test.window_hours", "Enter a window between 1 and 72 hours.");
        }
        problems.into_result()
    }
}

/// One version's results, as the stats page and `GET /api/v1/campaigns/{id}/ab-test` show them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct VariantResult {
    /// 0 for A, 1 for B…
    pub variant: u8,
    pub subject: String,
    /// Test readers given this version (queued, sent or failed; not skipped).
    pub readers: i64,
    pub sent: i64,
    /// Readers who opened, machine opens not counted.
    pub unique_opens: i64,
    pub unique_clicks: i64,
}

impl VariantResult {
    /// The metric's count over the messages sent, 0 with nothing sent.
    pub fn rate(&self, metric: AbMetric) -> f64 {
        let n = match metric {
            AbMetric::Opens => self.unique_opens,
            AbMetric::Clicks => self.unique_clicks,
        };
        if self.sent == 0 { 0.0 } else { n as f64 / self.sent as f64 }
    }
}

/// Where a campaign's test is.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AbResults {
    pub metric: AbMetric,
    pub test_percent: u8,
    pub window_hours: u16,
    /// When the winner is (or was to be) chosen by the metric; set when the send starts.
    pub decide_at: Option<DateTime<Utc>>,
    /// The winning version, once chosen.
    pub winner: Option<u8>,
    pub decided_at: Option<DateTime<Utc>>,
    /// Readers waiting for the winner.
    pub held: i64,
    pub variants: Vec<VariantResult>,
}

impl AbResults {
    /// The version the metric favours now: the highest rate, the earlier version on a tie.
    pub fn leader(&self) -> u8 {
        let mut best = (0u8, f64::MIN);
        for v in &self.variants {
            let r = v.rate(self.metric);
            if r > best.1 {
                best = (v.variant, r);
            }
        }
        best.0
    }

    /// The version ahead of every other, for the pages: none while two or more share the best
    /// rate (a test at 0 to 0 has no leader yet, though a winner picked then would be A).
    pub fn clear_leader(&self) -> Option<u8> {
        let leader = self.leader();
        let best = self.variants.iter().find(|v| v.variant == leader)?.rate(self.metric);
        let tied = self.variants.iter().filter(|v| v.rate(self.metric) == best).count();
        (tied == 1).then_some(leader)
    }
}

/// `POST /api/v1/campaigns/{id}/pick-winner`: the version to send to the rest, or none for the
/// metric's leader now.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PickWinner {
    #[serde(default)]
    pub variant: Option<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_names_each_wrong_field() {
        let t = AbTest {
            variants: vec![Variant { subject: " ".into(), ..Default::default() }],
            test_percent: 0,
            metric: AbMetric::Clicks,
            window_hours: 73,
        };
        let fields: Vec<String> =
            t.validate().expect_err("three wrong fields").errors.into_iter().filter_map(|e| e.field).collect();
        assert_eq!(fields, ["ab_test.variants.1.subject", "ab_test.test_percent", "ab_test.window_hours"]);
        let too_many = AbTest { variants: vec![Variant { subject: "x".into(), ..Default::default() }; 4], ..t };
        assert!(too_many.validate().is_err());
        assert!(
            AbTest { variants: vec![Variant { subject: "B".into(), ..Default::default() }], ..Default::default() }
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn the_leader_has_the_best_rate_and_ties_go_to_the_earlier_version() {
        let v = |variant, sent, unique_opens, unique_clicks| VariantResult {
            variant,
            sent,
            unique_opens,
            unique_clicks,
            ..Default::default()
        };
        let mut r =
            AbResults { variants: vec![v(0, 100, 30, 1), v(1, 50, 20, 5), v(2, 100, 40, 1)], ..Default::default() };
        assert_eq!(r.leader(), 1, "40 % beats 30 % and 40 % (earlier wins the tie)");
        r.metric = AbMetric::Clicks;
        assert_eq!(r.leader(), 1);
        r.variants[1].unique_clicks = 0;
        assert_eq!(r.leader(), 0, "all clicks equal per message: A");
        assert_eq!(r.clear_leader(), None, "a tie has no leader on the page");
        r.metric = AbMetric::Opens;
        assert_eq!(r.clear_leader(), None, "B and C share 40 %");
        r.variants[2].unique_opens = 39;
        assert_eq!(r.clear_leader(), Some(1));
        let none = AbResults { variants: vec![v(0, 10, 0, 0), v(1, 10, 0, 0)], ..Default::default() };
        assert_eq!((none.leader(), none.clear_leader()), (0, None), "0 to 0: A would win, nobody leads");
        assert_eq!(variant_label(2), 'C');
    }
}
