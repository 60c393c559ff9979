//! `herald dev chaos`: the send engine's promise, tried against real faults.
//!
//! One round builds a scene on **a Postgres cluster of its own** (initdb in a temporary directory,
//! so it can restart it), starts **real `herald worker` processes** against it and the project's
//! SMTP sink (in this process, misbehaving on purpose), and then, while the sends run, injects
//! faults chosen by a seeded random generator (the seed is printed; the same seed replays the same
//! choices): SIGKILL of workers, SIGSTOP of a worker for longer than its lease (then SIGCONT),
//! one worker cut off from Postgres (a proxy per worker that black-holes its link, then heals),
//! `pg_ctl restart -m immediate`, `pg_terminate_backend` of the workers' connections, SMTP replies
//! slower than the lease, 4xx, drops mid-DATA, accept-then-drop, 5xx; a pause and resume, a
//! cancel, unsubscribes and suppressions mid-send; "retry failed" mid-send; two campaigns under
//! one frequency cap; a spread send; a scheduled send; a recurring campaign's edition;
//! transactional messages at the same time. Beside them, each a rule of its own under the same
//! faults: readers leaving the list that started their automation while its mail is queued
//! (they stay on another list); a send that outlives the queue age, its first attempts refused
//! with a 4xx; a resend to non-openers whose readers open the original mid-send (and a second
//! resend refused); another workspace whose automation fails every turn; events sent twice
//! under one Idempotency-Key; a webhook endpoint receiving `message.sent` whose receiver fails
//! now and then. When everything has settled it checks the whole
//! queue against what the sink received (see [`checks::check`]): every eligible reader accepted exactly
//! once, every extra copy under the first one's Message-ID and counted as ambiguous on its own
//! row, no data for anyone unsubscribed or suppressed more than 5 s after the commit (nor for a
//! paused campaign between 5 s after its pause and its resume, nor for a reader who left the
//! trigger list or opened the original), hard bounces suppressed, no row expired for its age
//! after a single attempt, the failing automation paused, one run per event, each campaign's
//! sent count equal to what the sink saw, one `message.sent` event per message recorded sent, and
//! every event delivered to the receiver at least once.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;

mod automations;
mod capped;
mod checks;
mod faults;
mod fixtures;
mod partition;
mod postgres;
mod resend;
mod round;
mod scene;
mod soft_failures;
mod stage;
mod webhooks;
mod workers;

/// `herald dev chaos` options.
#[derive(Clone, Debug, clap::Args)]
pub struct ChaosArgs {
    /// Keep running rounds (each with a fresh scene and its own seed) for this many minutes;
    /// 0 runs one round.
    #[arg(long, default_value_t = 0.0)]
    pub minutes: f64,
    /// The first round's seed (printed either way); later rounds use seed + round.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Readers of the main campaign.
    #[arg(long, default_value_t = 1500)]
    pub readers: usize,
    /// `herald worker` processes.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// How long faults are injected per round.
    #[arg(long, default_value_t = 40)]
    pub fault_seconds: u64,
    /// The `herald` binary to run as workers (default: this one).
    #[arg(long)]
    pub bin: Option<PathBuf>,
}

impl Default for ChaosArgs {
    fn default() -> Self {
        Self { minutes: 0.0, seed: None, readers: 1500, workers: 3, fault_seconds: 40, bin: None }
    }
}

/// The lease the workers run with: short, so that faults that cost a lease cost seconds.
const LEASE_SECONDS: u64 = 4;
/// Worker 0's pool size (see `Workers::spawn`).
const SATURATED_POOL: &str = "4";
/// Rows a worker claims at once.
const BATCH: u64 = 10;
const SLOW_REPLY_MAX: Duration = Duration::from_secs(2 * LEASE_SECONDS);
const SMTP_TIMEOUT_SECONDS: u64 = 3;

/// What one round found.
#[derive(Debug, Default)]
pub struct RoundReport {
    pub seed: u64,
    pub messages_expected: usize,
    pub copies_received: usize,
    pub extra_copies: usize,
    pub ambiguous_counted: i64,
    pub faults: BTreeMap<&'static str, usize>,
    pub violations: Vec<String>,
    pub elapsed: Duration,
}

impl std::fmt::Display for RoundReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} messages expected, {} copies received ({} extra, {} counted ambiguous), faults {:?}, {} violations, {:.0} s",
            self.seed,
            self.messages_expected,
            self.copies_received,
            self.extra_copies,
            self.ambiguous_counted,
            self.faults,
            self.violations.len(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// Runs rounds for `args.minutes` (at least one); returns every round's report. Stops at the
/// first round with a violation.
pub async fn run(args: &ChaosArgs) -> anyhow::Result<Vec<RoundReport>> {
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("where is the herald binary?")?,
    };
    let first = args.seed.unwrap_or_else(rand::random);
    let started = Instant::now();
    let mut reports = Vec::new();
    for round in 0.. {
        let seed = first.wrapping_add(round);
        eprintln!("chaos round {round}: seed {seed} (replay with --seed {seed})");
        let report =
            round::run_round(&bin, args, seed).await.with_context(|| format!("chaos round with seed {seed}"))?;
        eprintln!("chaos round {round}: {report}");
        let failed = !report.violations.is_empty();
        reports.push(report);
        if failed || started.elapsed().as_secs_f64() >= args.minutes * 60.0 {
            break;
        }
    }
    Ok(reports)
}
