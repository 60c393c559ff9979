//! The campaign editor's form state: a signal per field, shared by the editor, its sections and
//! its panels, and what a save sends ([`Form::input`], checked in the browser first). The views
//! that show these fields are in `fields` (message, sender, audience, content), `ab_test` and
//! `block_editor`; each imports this module, and this one imports none of them.

use leptos::prelude::*;

use crate::error::AppError;
use crate::pages::campaigns::repeat::RepeatForm;
use herald_types::ab_test::MAX_VARIANTS;
use herald_types::{AbMetric, AbTest, Campaign, CampaignInput, FieldError, Invalid, Variant};

/// The editor's state, shared by its sections. Every field is a signal; `changed` (re)starts
/// the autosave countdown.
#[derive(Clone, Copy)]
pub struct Form {
    pub name: RwSignal<String>,
    pub subject: RwSignal<String>,
    pub preheader: RwSignal<String>,
    pub identity_id: RwSignal<String>,
    pub from_name: RwSignal<String>,
    pub from_email: RwSignal<String>,
    pub reply_to: RwSignal<String>,
    pub list_ids: RwSignal<Vec<String>>,
    pub attribute_filter: RwSignal<String>,
    pub segment_ids: RwSignal<Vec<String>>,
    /// The excluded segment's id, or empty.
    pub exclude_segment_id: RwSignal<String>,
    /// Who a send started now would reach, counted by the server after each save.
    pub audience: Resource<Result<herald_types::AudienceCount, AppError>>,
    pub body_format: RwSignal<String>,
    pub body: RwSignal<String>,
    pub spread_on: RwSignal<bool>,
    pub spread_hours: RwSignal<String>,
    pub tracking: RwSignal<String>,
    pub repeat: RepeatForm,
    pub ab: AbForm,
    /// A resend's original: its audience is that campaign's readers who did not open it.
    pub resend_of: Option<herald_types::CampaignId>,
    pub errors: RwSignal<Vec<FieldError>>,
    /// What the last save found that renders wrongly without being an error (unknown merge
    /// tags), by field.
    pub warnings: RwSignal<Vec<FieldError>>,
    /// The template error the preview of the saved campaign ran into, where it is (a block's
    /// field in a block document): the block editor marks that block.
    pub render_error: RwSignal<Option<FieldError>>,
    pub changed: Callback<()>,
}

/// A value the browser parses before saving; `field` files its message.
pub fn parsed<T: std::str::FromStr>(field: &str, raw: &str, message: &str) -> Result<T, Invalid> {
    raw.trim().parse().map_err(|_| Invalid::field(field, message))
}

impl Form {
    /// The input to save, or what to fix first (every field the browser can check).
    pub fn input(&self) -> Result<CampaignInput, Invalid> {
        let mut problems = herald_types::Problems::default();
        let spread_hours = if self.spread_on.get_untracked() {
            let raw = self.spread_hours.get_untracked().replace(',', ".");
            problems.take(parsed::<f64>("spread_hours", &raw, "Enter a number of hours between 0 and 168 (a week)."))
        } else {
            None
        };
        let identity_id = match self.identity_id.get_untracked().trim() {
            "" => None,
            raw => problems.take(parsed("identity_id", raw, "Choose a sender from the list.")),
        };
        let recurrence = problems.take(self.repeat.recurrence()).flatten();
        let ab_test = problems.take(self.ab.test()).flatten();
        let input = CampaignInput {
            name: self.name.get_untracked(),
            subject: self.subject.get_untracked(),
            preheader: self.preheader.get_untracked(),
            identity_id,
            from_name: self.from_name.get_untracked(),
            from_email: self.from_email.get_untracked(),
            reply_to: self.reply_to.get_untracked(),
            list_ids: self.list_ids.get_untracked().iter().filter_map(|l| l.parse().ok()).collect(),
            attribute_filter: self.attribute_filter.get_untracked(),
            segment_ids: self.segment_ids.get_untracked().iter().filter_map(|l| l.parse().ok()).collect(),
            exclude_segment_id: match self.exclude_segment_id.get_untracked().trim() {
                "" => None,
                raw => problems.take(parsed("exclude_segment_id", raw, "Choose a segment from the list.")),
            },
            body_format: self.body_format.get_untracked().parse().unwrap_or_default(),
            body: self.body.get_untracked(),
            spread_hours,
            tracking: self.tracking.get_untracked().parse().unwrap_or_default(),
            recurrence,
            feed: self.repeat.feed(),
            feed_url: self.repeat.feed_url.get_untracked(),
            ab_test,
        };
        problems.check(input.validate());
        problems.into_result().map(|()| input)
    }

    // `use<>`: the closure copies the signal out and does not borrow `self` (edition 2024 would
    // otherwise capture the borrow, which only the release build without erased components sees).
    pub fn error(&self, field: &'static str) -> impl Fn() -> Option<String> + Copy + Send + Sync + use<> {
        let errors = self.errors;
        move || errors.with(|e| e.iter().find(|e| e.field.as_deref() == Some(field)).map(|e| e.message.clone()))
    }

    /// The first message for any of `fields` (a section that edits several).
    pub fn section_error(
        &self,
        fields: &'static [&'static str],
    ) -> impl Fn() -> Option<String> + Copy + Send + Sync + use<> {
        let errors = self.errors;
        move || {
            errors.with(|e| {
                e.iter().find(|e| e.field.as_deref().is_some_and(|f| fields.contains(&f))).map(|e| e.message.clone())
            })
        }
    }
}

/// Classes for a text input, red once its field has an error.
pub fn input_class(error: Option<String>, extra: &'static str) -> String {
    let base = if error.is_some() { "input border-red-400" } else { "input" };
    if extra.is_empty() { base.to_string() } else { format!("{base} {extra}") }
}

/// Versions B, C and D, as typed.
pub const SLOTS: usize = MAX_VARIANTS - 1;

/// The card's signals (strings as typed; [`AbForm::test`] parses).
#[derive(Clone, Copy)]
pub struct AbForm {
    pub on: RwSignal<bool>,
    /// How many of B, C, D are in use (1–3).
    pub versions: RwSignal<usize>,
    pub subjects: [RwSignal<String>; SLOTS],
    pub from_names: [RwSignal<String>; SLOTS],
    pub bodies: [RwSignal<String>; SLOTS],
    pub percent: RwSignal<String>,
    pub metric: RwSignal<AbMetric>,
    pub window_hours: RwSignal<String>,
}

impl AbForm {
    pub fn new(c: &Campaign) -> Self {
        let t = c.ab_test.clone();
        let stored = t.clone().unwrap_or_default();
        let slot = |f: fn(&Variant) -> String| {
            std::array::from_fn(|i| RwSignal::new(stored.variants.get(i).map(f).unwrap_or_default()))
        };
        AbForm {
            on: RwSignal::new(t.is_some()),
            versions: RwSignal::new(stored.variants.len().clamp(1, SLOTS)),
            subjects: slot(|v| v.subject.clone()),
            from_names: slot(|v| v.from_name.clone()),
            bodies: slot(|v| v.body.clone()),
            percent: RwSignal::new(stored.test_percent.to_string()),
            metric: RwSignal::new(stored.metric),
            window_hours: RwSignal::new(stored.window_hours.to_string()),
        }
    }

    /// The test (`None`: off), or what to fix in this card.
    pub fn test(&self) -> Result<Option<AbTest>, Invalid> {
        if !self.on.get_untracked() {
            return Ok(None);
        }
        let mut problems = herald_types::Problems::default();
        let percent = problems.take(parsed(
            "ab_test.test_percent",
            &self.percent.get_untracked(),
            "Enter a share between 1 and 100 %.",
        ));
        let window = problems.take(parsed(
            "ab_test.window_hours",
            &self.window_hours.get_untracked(),
            "Enter a window between 1 and 72 hours.",
        ));
        problems.into_result()?;
        let variants = (0..self.versions.get_untracked().clamp(1, SLOTS))
            .map(|i| Variant {
                subject: self.subjects[i].get_untracked(),
                from_name: self.from_names[i].get_untracked(),
                body: self.bodies[i].get_untracked(),
            })
            .collect();
        Ok(Some(AbTest {
            variants,
            test_percent: percent.unwrap_or_default(),
            metric: self.metric.get_untracked(),
            window_hours: window.unwrap_or_default(),
        }))
    }
}
