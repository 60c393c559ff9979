//! The lab: `herald dev …` and `herald bench …` (benchmarks, the chaos suite, the load-test SMTP
//! sink, the app's route list and the tests' ordinary owner) and the crawler's demo data
//! (`herald admin seed-states`, `crate::seed`). Built only with the `lab` feature, which `make dev`
//! and `make test` turn on; the release build and the Dockerfile leave it out of production.

use clap::Subcommand;

use crate::config::Config;
use crate::signals::shutdown_signal;
use crate::startup::Application;

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// The send engine: raw SMTP blast, fan-out against a bare INSERT … SELECT, and an end-to-end
    /// send to a `herald dev smtp-sink` child process, with CPU seconds and peak RSS.
    Send(herald_devtools::bench::SendBench),
    /// CSV import of generated rows through the real import job, then the audience pages'
    /// queries timed on the result.
    Import(herald_devtools::bench::ImportBench),
    /// The open and click endpoints under HTTP load on loopback (the real server in-process,
    /// keep-alive connections), then a check that every hit was stored or counted as dropped.
    Track(herald_devtools::bench_track::TrackBench),
    /// `POST /api/v1/messages` under load, then every key replayed (transactional enqueue).
    Messages(herald_devtools::bench_messages::MessagesBench),
    /// `message.opened` webhooks from the tracking firehose to a local receiver: lag, backlog,
    /// and what an endpoint costs tracking and Postgres.
    Webhooks(herald_devtools::bench_webhooks::WebhooksBench),
    /// A sending campaign's periodic reads at a large send log (idle probe, health check, live
    /// progress, editions list), each against the statement it replaced.
    Scans(herald_devtools::bench_scans::ScansBench),
    /// Segment counts (each fast condition alone and two by two) and a segment's fan-out
    /// against a list's, at a large audience.
    Segments(herald_devtools::bench_segments::SegmentsBench),
    /// An automation's first mail to every reader against a campaign's send, and the
    /// scheduler's cost while they wait.
    Automations(herald_devtools::bench_automations::AutomationsBench),
}

#[derive(Subcommand, Debug)]
pub enum Dev {
    /// Print the web app's page routes, one per line, as the router declares them (`:id` for a
    /// parameter); the browser crawler reads them so a new page cannot be left out of it.
    Routes,
    /// Run an SMTP sink that accepts everything, for load tests of the send engine, optionally
    /// misbehaving on purpose. Keeps the last 2000 messages and a record of every delivery in
    /// memory; runs until Ctrl-C and logs the accepted count and rate every second.
    ///
    /// Example: herald dev smtp-sink --fail-rate 0.1 --reject-pattern bounce --delay-ms 5
    SmtpSink {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:2525")]
        listen: String,
        /// Fraction of messages (0 to 1) that fail at random, as --fail-at says.
        #[arg(long, default_value_t = 0.0)]
        fail_rate: f64,
        /// The reply random failures get.
        #[arg(long, default_value = "451 4.3.0 Try again later")]
        fail_reply: String,
        /// Where random failures happen: at RCPT TO, after the data (message not kept), by hanging
        /// up in the middle of the data, or by hanging up after keeping the message (ambiguous).
        #[arg(long, value_enum, default_value_t = FailAt::Data)]
        fail_at: FailAt,
        /// Recipients containing this text are refused at RCPT TO with --reject-reply (repeatable).
        #[arg(long)]
        reject_pattern: Vec<String>,
        #[arg(long, default_value = "550 5.1.1 User unknown")]
        reject_reply: String,
        /// Wait this many milliseconds before replying to each message's data.
        #[arg(long)]
        delay_ms: Option<u64>,
    },
    /// The send engine's chaos suite: real `herald worker` processes against a Postgres cluster
    /// it creates (and restarts), the project's SMTP sink misbehaving, and randomised faults
    /// from a printed seed; checks every reader got exactly one message (docs/chaos.md).
    ///
    /// Example: herald dev chaos --minutes 30
    Chaos(herald_devtools::chaos::ChaosArgs),
    /// Print an ordinary owner's URL (not a superuser, not BYPASSRLS) for the server and
    /// database in DATABASE_URL, creating the role when DATABASE_URL is a superuser's: the
    /// browser tests run Herald as it runs on managed Postgres.
    OrdinaryOwner,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FailAt {
    Rcpt,
    Data,
    DropMidData,
    DropAfterData,
}

/// What the benchmarks take from the configuration, with a way to start the web server as
/// `herald serve` builds it (on a free loopback port, without workers or mail catcher).
pub fn bench_env(config: &Config) -> herald_devtools::BenchEnv {
    let mut serve_config = config.clone();
    serve_config.bind = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    serve_config.run_workers = false;
    serve_config.dev_smtp_bind = None;
    // A benchmark's one key makes thousands of requests a second: it measures the work each one
    // costs, with the per-key count still taken (one statement each) but never refusing.
    serve_config.api_requests_per_minute = u32::MAX / 2;
    herald_devtools::BenchEnv {
        database_url: config.database_url.clone(),
        app_database_url: config.app_database_url.clone(),
        base_url: config.base_url.clone(),
        secret_key: config.secret_key.clone(),
        mail_from: config.mail_from.clone(),
        db_max_connections: config.db_max_connections,
        send_batch_size: config.send.batch_size,
        send_ack_batch: config.send.ack_batch,
        serve: std::sync::Arc::new(move || {
            let config = serve_config.clone();
            Box::pin(async move {
                let app = Application::build(&config).await?;
                let (addr, hit_counters) = (app.addr, app.hit_counters.clone());
                let (stop, stopped) = tokio::sync::watch::channel(false);
                let server = tokio::spawn(app.run(stopped));
                let stop = Box::pin(async move {
                    let _ = stop.send(true);
                    server.await?
                });
                Ok(herald_devtools::Served { addr, hit_counters, stop })
            })
        }),
    }
}

pub async fn run_dev(dev: Dev) -> anyhow::Result<()> {
    match dev {
        Dev::Routes => {
            for route in leptos_axum::generate_route_list(herald_app::App) {
                println!("{}", route.path());
            }
            Ok(())
        }
        Dev::Chaos(args) => run_chaos(&args).await,
        Dev::OrdinaryOwner => {
            let url = std::env::var("DATABASE_URL").map_err(|_| anyhow::anyhow!("DATABASE_URL is not set"))?;
            println!("{}", herald_devtools::ordinary_owner::ensure(&url).await?.owner_url);
            Ok(())
        }
        Dev::SmtpSink { listen, fail_rate, fail_reply, fail_at, reject_pattern, reject_reply, delay_ms } => {
            run_sink(listen, fail_rate, fail_reply, fail_at, reject_pattern, reject_reply, delay_ms).await
        }
    }
}

/// `herald dev chaos`: the rounds' figures, and every violation with its seed.
async fn run_chaos(args: &herald_devtools::chaos::ChaosArgs) -> anyhow::Result<()> {
    let reports = herald_devtools::chaos::run(args).await?;
    let failed: Vec<_> = reports.iter().filter(|r| !r.violations.is_empty()).collect();
    let copies: usize = reports.iter().map(|r| r.copies_received).sum();
    let expected: usize = reports.iter().map(|r| r.messages_expected).sum();
    let extra: usize = reports.iter().map(|r| r.extra_copies).sum();
    let counted: i64 = reports.iter().map(|r| r.ambiguous_counted).sum();
    let mut faults: std::collections::BTreeMap<&str, usize> = Default::default();
    for (k, v) in reports.iter().flat_map(|r| r.faults.iter()) {
        *faults.entry(k).or_default() += v;
    }
    println!(
        "{} rounds: {expected} messages expected, {copies} copies received, {extra} extra (each under its first copy's \
         Message-ID), {counted} counted ambiguous; faults {faults:?}",
        reports.len()
    );
    for r in &failed {
        for v in &r.violations {
            println!("seed {}: {v}", r.seed);
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(anyhow::anyhow!("the promise was broken; see above")) }
}

async fn run_sink(
    listen: String,
    fail_rate: f64,
    fail_reply: String,
    fail_at: FailAt,
    reject_pattern: Vec<String>,
    reject_reply: String,
    delay_ms: Option<u64>,
) -> anyhow::Result<()> {
    use herald_devtools::smtp_sink::{FaultAction, FaultRule, Faults, MailSink};
    let mut faults = Faults::none();
    for pattern in reject_pattern {
        faults = faults.with_rule(FaultRule::new(pattern, FaultAction::RejectRcpt(reject_reply.clone())));
    }
    if fail_rate > 0.0 {
        let action = match fail_at {
            FailAt::Rcpt => FaultAction::RejectRcpt(fail_reply),
            FailAt::Data => FaultAction::RejectData(fail_reply),
            FailAt::DropMidData => FaultAction::DropMidData,
            FailAt::DropAfterData => FaultAction::DropAfterData,
        };
        faults = faults.with_random(fail_rate, action);
    }
    if let Some(ms) = delay_ms {
        faults = faults.with_reply_delay(std::time::Duration::from_millis(ms));
    }
    faults.validate().map_err(|e| anyhow::anyhow!(e))?;
    let (sink, addr) = MailSink::start(&listen).await?;
    tracing::info!(?faults, "SMTP sink listening on smtp://{addr}; Ctrl-C to stop");
    sink.set_faults(faults);
    let mut shutdown = shutdown_signal();
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    let (mut last_count, mut last_at) = (0, std::time::Instant::now());
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            _ = tick.tick() => {
                let count = sink.accepted_count();
                if count != last_count {
                    let rate = count.saturating_sub(last_count) as f64 / last_at.elapsed().as_secs_f64();
                    tracing::info!("{count} accepted, {rate:.0}/s, {} faults injected", sink.faults_injected());
                }
                (last_count, last_at) = (count, std::time::Instant::now());
            }
        }
    }
    tracing::info!("{} accepted in all, {} faults injected", sink.accepted_count(), sink.faults_injected());
    Ok(())
}
