//! Automations: welcome mails and drip sequences built on the campaigns' engine.
//!
//! - **Entry.** Database triggers let readers in as the write that fires them commits: a
//!   confirmed subscription (`list_confirmed`), a new tag (`tag_added`); the API's reader events
//!   call the same function (`automation_enter` in `engine/sql/automations.sql`), which applies the re-entry rule.
//!   Every path that confirms a reader or tags one — the hosted form, the confirmation link, an
//!   import, the API, bulk tagging — therefore starts automations without knowing about them.
//! - **A run per reader and entry** holds the step it waits at and when that step is due
//!   (an indexed time: the scheduler probes one index entry per live automation, whatever number
//!   of readers wait).
//! - **Each step once.** [`scheduler`] runs due steps in batches (`automation_advance`): the
//!   step's row in `automation_step_log` is written first and its primary key refuses a second,
//!   in the same transaction as the step's effect and the run's move to the next step.
//! - **Email steps are campaigns.** Each email step owns a campaign row (`automation_id` set,
//!   never listed among campaigns) that is `sending` while the automation is live; reaching the
//!   step writes that campaign's send-log row for the run's entry, and the campaigns' delivery
//!   claims, fences, acknowledges and tracks it: a crash, a duplicate job or a Postgres restart
//!   never sends a step twice, and an extra copy is counted ambiguous with the same Message-ID.
//! - **Leaving.** A reader who unsubscribes, is suppressed or blocked leaves every run at the
//!   commit (the triggers in `engine/sql/automations.sql`); delivery checks each message again before its data goes out.

pub mod events;
pub mod report;
pub mod scheduler;
pub mod store;

pub use herald_types::{Automation, AutomationId, AutomationInput, AutomationStatus, AutomationStepId};
