//! The `herald` command line: serve, worker, migrate and operator commands.

use clap::{Parser, Subcommand};
use std::io::Read;
use std::process::ExitCode;

use crate::config::Config;
use crate::signals::shutdown_signal;
use crate::startup::{Application, core, run_background};

#[derive(Parser, Debug)]
#[command(name = "herald", version, about = "Herald: newsletters that reach every reader exactly once.")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the web app and run background workers (the default). In development, migrates first.
    Serve,
    /// Run background workers only. Several may run at once, on several machines, against one database.
    Worker,
    /// Apply database migrations as the DATABASE_URL role (creates the runtime role if needed).
    Migrate,
    /// Operator commands for scripts and first set-up.
    #[command(subcommand)]
    Admin(Admin),
    /// Development and load-test tools (they need no database or settings).
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Dev(crate::lab::Dev),
    /// Benchmarks against the configured database (they create and delete their own workspace).
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Bench(crate::lab::Bench),
    /// Internal: render tenants' templates for a parent `herald` under a memory limit, speaking
    /// on stdin and stdout (see `herald_engine::sending::template_sandbox`).
    #[command(name = "render-sandbox", hide = true)]
    RenderSandbox,
}

// The variants mirror the subcommand names (`create-user`, …), so the shared prefix is wanted.
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand, Debug)]
enum Admin {
    /// Create an account; the password is read from standard input.
    CreateUser {
        #[arg(long)]
        email: String,
        #[arg(long, default_value = "")]
        name: String,
        /// Read the password from standard input (required: passwords never go on the command line).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Create a workspace owned by an existing account.
    CreateWorkspace {
        /// The owner's email.
        #[arg(long)]
        owner: String,
        #[arg(long)]
        name: String,
        /// Defaults to one derived from the name.
        #[arg(long)]
        slug: Option<String>,
    },
    /// Create an API key for a workspace and print it (it is shown only once).
    CreateApiKey {
        /// The workspace's slug.
        #[arg(long)]
        workspace: String,
        #[arg(long, default_value = "Created from the command line")]
        name: String,
    },
    /// Change what one workspace may send (`--workspace`): its daily limit of invitation and
    /// opt-in confirmation emails (e.g. before it imports a double opt-in list), and whether its
    /// own SMTP identities may send From unverified domains. Or what one account may do across
    /// all its workspaces (`--email`): workspaces owned, transactional messages, test emails and
    /// system emails a day. Each takes a number or `default`.
    #[command(group(clap::ArgGroup::new("limit").required(true).multiple(true)))]
    #[command(group(clap::ArgGroup::new("target").required(true).args(["workspace", "email"])))]
    SetLimits {
        /// The workspace's slug.
        #[arg(long)]
        workspace: Option<String>,
        /// The account's email (limits per account).
        #[arg(long)]
        email: Option<String>,
        /// Workspaces the account may own (default 3).
        #[arg(long, group = "limit", requires = "email")]
        workspaces: Option<String>,
        /// Transactional messages per 24 hours across the account's workspaces (default: 100 on
        /// the first day, doubling daily to 10,000).
        #[arg(long, group = "limit", requires = "email")]
        transactional_per_day: Option<String>,
        /// Test emails per 24 hours the account's member may send (default 50).
        #[arg(long, group = "limit", requires = "email")]
        test_sends_per_day: Option<String>,
        /// Emails per 24 hours, or `default` for the installation's (`HERALD_SYSTEM_MAIL_PER_WORKSPACE`).
        #[arg(long, group = "limit")]
        system_mail_per_day: Option<String>,
        /// Readers the workspace's campaigns may reach per 24 hours (new workspaces start at
        /// 10,000 to warm up), or `unlimited`.
        #[arg(long, group = "limit")]
        campaign_mail_per_day: Option<String>,
        /// `true`: mail through the workspace's own SMTP identity may use any From address (its
        /// server decides); `false` (the default): only verified sending domains.
        #[arg(long, group = "limit")]
        own_identity_any_from: Option<bool>,
    },
    /// Suspend an account: its API keys answer 403, its workspaces' sending campaigns pause
    /// within one claim window, scheduled sends and queued transactional mail wait, and each
    /// workspace's audit log records it. `reinstate-account` lifts it.
    SuspendAccount {
        #[arg(long)]
        email: String,
        /// Shown to the account's members (in the paused campaigns' reason and the audit log).
        #[arg(long)]
        reason: String,
    },
    /// Lift a suspension (paused campaigns stay paused until a member resumes them).
    ReinstateAccount {
        #[arg(long)]
        email: String,
    },
    /// What every account sent in the last 24 hours and 7 days (campaign and transactional
    /// messages, bounces, complaints, rates), busiest first: abuse shows here before the relay
    /// blocks the shared domain.
    Accounts {
        /// How many accounts to show.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Mark a workspace's sending domain verified without a DNS check (adds it if missing).
    VerifyDomain {
        /// The workspace's slug.
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        domain: String,
    },
    /// Confirm an account's email address without the mailed link (support, scripted set-ups).
    VerifyEmail {
        #[arg(long)]
        email: String,
    },
    #[cfg(feature = "lab")]
    /// Fill an account's first workspace with data in every state a page can show (lists,
    /// readers, imports, campaigns in each status, a recurring campaign with an edition,
    /// transactional templates and messages, members of each role) and print the concrete paths
    /// of the parameterised routes as JSON. For demos and the browser crawler.
    SeedStates {
        /// The owner's email.
        #[arg(long)]
        owner: String,
    },
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    // Before tracing: stdout is the sandbox's channel to its parent.
    if matches!(cli.command, Some(Command::RenderSandbox)) {
        return match herald_engine::sending::template_sandbox::child_main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("herald render-sandbox: {e}");
                ExitCode::FAILURE
            }
        };
    }
    init_tracing();
    let command = cli.command.unwrap_or(Command::Serve);
    // The dev tools need no settings (no database, no secret key).
    let config = match &command {
        #[cfg(feature = "lab")]
        Command::Dev(_) => None,
        _ => match Config::from_env() {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("herald: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("herald: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match (command, config) {
        #[cfg(feature = "lab")]
        (Command::Dev(dev), _) => runtime.block_on(crate::lab::run_dev(dev)),
        (command, Some(config)) => runtime.block_on(dispatch(command, config)),
        (_, None) => Err(anyhow::anyhow!("no settings")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One clear line; the cause chain is in the log at debug level.
            tracing::debug!(error = ?e, "exiting with an error");
            eprintln!("herald: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,apalis=warn,apalis_postgres=warn,tower_http=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).try_init();
}

async fn dispatch(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::Migrate => {
            herald_engine::infra::migrate::run(&config.database_url).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Serve => {
            if config.is_dev() {
                herald_engine::infra::migrate::run(&config.database_url).await?;
            }
            let app = Application::build(&config).await?;
            tracing::info!(url = %config.base_url, "Herald is listening on http://{}", app.addr);
            if let Some((_, smtp)) = &app.sink {
                tracing::info!("dev mail catcher: smtp://{smtp}, inbox at {}/dev/inbox", config.base_url);
            }
            app.run(shutdown_signal()).await
        }
        Command::Worker => {
            let core = core(&config).await?;
            tracing::info!("worker started");
            run_background(core.worker_setup(&config), shutdown_signal()).await
        }
        Command::Admin(admin) => run_admin(admin, &config).await,
        #[cfg(feature = "lab")]
        Command::Bench(bench) => {
            use crate::lab::Bench;
            let env = crate::lab::bench_env(&config);
            match bench {
                Bench::Send(args) => herald_devtools::bench::run(args, &env).await,
                Bench::Import(args) => herald_devtools::bench::run_import(args, &env).await,
                Bench::Track(args) => herald_devtools::bench_track::run(args, &env).await,
                Bench::Messages(args) => herald_devtools::bench_messages::run(args, &env).await,
                Bench::Webhooks(args) => herald_devtools::bench_webhooks::run(args, &env).await,
                Bench::Scans(args) => herald_devtools::bench_scans::run(args, &env).await,
                Bench::Segments(args) => herald_devtools::bench_segments::run(args, &env).await,
                Bench::Automations(args) => herald_devtools::bench_automations::run(args, &env).await,
            }
        }
        #[cfg(feature = "lab")]
        Command::Dev(dev) => crate::lab::run_dev(dev).await,
        Command::RenderSandbox => Err(anyhow::anyhow!("render-sandbox is started by herald itself")),
    }
}

async fn run_admin(admin: Admin, config: &Config) -> anyhow::Result<()> {
    use herald_engine::{Db, Email, Role, api_keys, users, workspaces};
    let db = Db::connect(&config.app_database_url, 2).await?;
    fn clear(e: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{e}")
    }
    match admin {
        Admin::CreateUser { email, name, password_stdin: _ } => {
            let mut password = String::new();
            std::io::stdin().read_to_string(&mut password)?;
            let password = password.trim_end_matches(['\r', '\n']);
            let email = Email::parse(&email).map_err(clear)?;
            // The operator vouches for the address.
            let id =
                users::create_user(&db, &email, &name, password, users::Address::Confirmed).await.map_err(clear)?;
            println!("created user {email} ({id})");
        }
        Admin::CreateWorkspace { owner, name, slug } => {
            let user = users::find_by_email(&db, &owner)
                .await
                .map_err(clear)?
                .ok_or_else(|| anyhow::anyhow!("no account with email {owner}"))?;
            let ws = workspaces::create(&db, user.id, &name, slug.as_deref()).await.map_err(clear)?;
            println!("created workspace {} (slug {}, id {})", ws.name, ws.slug, ws.id);
        }
        Admin::CreateApiKey { workspace, name } => {
            let tenant = workspaces::id_for_slug(&db, &workspace)
                .await
                .map_err(|_| anyhow::anyhow!("no workspace with slug {workspace}"))?;
            let (_, key) = api_keys::create(&db, tenant, None, Role::Owner, &name, Role::Admin).await.map_err(clear)?;
            println!("{key}");
        }
        Admin::SetLimits {
            workspace: None,
            email: Some(email),
            workspaces: max_workspaces,
            transactional_per_day,
            test_sends_per_day,
            system_mail_per_day,
            campaign_mail_per_day,
            own_identity_any_from,
        } => {
            use herald_engine::account_limits::{self, Limit};
            if campaign_mail_per_day.is_some() || own_identity_any_from.is_some() {
                anyhow::bail!("--campaign-mail-per-day and --own-identity-any-from are limits of a --workspace");
            }
            let parse = |flag: &str, v: &str| -> anyhow::Result<Option<i32>> {
                match v.trim() {
                    "default" => Ok(None),
                    n => n.parse::<i32>().map(Some).map_err(|_| anyhow::anyhow!("--{flag}: a number or `default`")),
                }
            };
            for (flag, limit, value) in [
                ("workspaces", Limit::Workspaces, max_workspaces),
                ("transactional-per-day", Limit::TransactionalPerDay, transactional_per_day),
                ("test-sends-per-day", Limit::TestSendsPerDay, test_sends_per_day),
                ("system-mail-per-day", Limit::SystemMailPerDay, system_mail_per_day),
            ] {
                let Some(value) = value else { continue };
                let n = parse(flag, &value)?;
                account_limits::set_limit(&db, &email, limit, n)
                    .await
                    .map_err(|_| anyhow::anyhow!("no account with email {email}"))?;
                match n {
                    Some(n) => println!("{email}: {flag} {n}"),
                    None => println!("{email}: {flag} back to the installation's default"),
                }
            }
        }
        Admin::SetLimits { workspace: None, .. } => anyhow::bail!("name a --workspace or an account's --email"),
        Admin::SetLimits {
            workspace: Some(workspace),
            system_mail_per_day,
            campaign_mail_per_day,
            own_identity_any_from,
            ..
        } => {
            let tenant = workspaces::id_for_slug(&db, &workspace)
                .await
                .map_err(|_| anyhow::anyhow!("no workspace with slug {workspace}"))?;
            if let Some(per_day) = system_mail_per_day {
                let per_day = match per_day.trim() {
                    "default" => None,
                    n => Some(
                        n.parse::<i32>()
                            .map_err(|_| anyhow::anyhow!("--system-mail-per-day: a number or `default`"))?,
                    ),
                };
                herald_engine::sending::mail_quota::set_workspace_limit(&db, tenant, per_day).await.map_err(clear)?;
                match per_day {
                    Some(n) => println!("{workspace} may send {n} invitation and confirmation emails a day"),
                    None => println!("{workspace} is back to the installation's limit of system emails"),
                }
            }
            if let Some(per_day) = campaign_mail_per_day {
                let per_day = match per_day.trim() {
                    "unlimited" => None,
                    n => Some(
                        n.parse::<i32>()
                            .map_err(|_| anyhow::anyhow!("--campaign-mail-per-day: a number or `unlimited`"))?,
                    ),
                };
                herald_engine::campaigns::warmup::set_limit(&db, tenant, per_day).await.map_err(clear)?;
                match per_day {
                    Some(n) => println!("{workspace}'s campaigns may reach {n} readers a day"),
                    None => println!("{workspace}'s campaigns have no daily limit"),
                }
            }
            if let Some(allowed) = own_identity_any_from {
                herald_engine::sending::domains::set_own_identity_any_from(&db, tenant, allowed)
                    .await
                    .map_err(clear)?;
                match allowed {
                    true => println!("{workspace} may send From any address through its own SMTP identities"),
                    false => println!("{workspace} sends From verified domains only, whatever the identity"),
                }
            }
        }
        Admin::VerifyDomain { workspace, domain } => {
            let tenant = workspaces::id_for_slug(&db, &workspace)
                .await
                .map_err(|_| anyhow::anyhow!("no workspace with slug {workspace}"))?;
            let signer = herald_engine::infra::tokens::Signer::new(&config.secret_key);
            let d =
                herald_engine::sending::domains::mark_verified(&db, &signer, tenant, &domain).await.map_err(clear)?;
            println!("{} is a verified sending domain of {workspace}", d.domain);
        }
        Admin::VerifyEmail { email } => {
            herald_engine::accounts::mark_email_verified(&db, &email)
                .await
                .map_err(|_| anyhow::anyhow!("no account with email {email}"))?;
            println!("{email} is confirmed");
        }
        Admin::SuspendAccount { email, reason } => {
            let affected = herald_engine::suspension::suspend(&db, &email, &reason).await.map_err(|e| match e {
                herald_engine::Error::NotFound => anyhow::anyhow!("no account with email {email}"),
                e => clear(e),
            })?;
            println!("{email} is suspended ({} workspaces)", affected.len());
        }
        Admin::ReinstateAccount { email } => {
            let affected = herald_engine::suspension::reinstate(&db, &email)
                .await
                .map_err(|_| anyhow::anyhow!("no account with email {email}"))?;
            println!("{email} is no longer suspended ({} workspaces)", affected.len());
        }
        Admin::Accounts { limit, json } => {
            // Every account's figures are the operator's alone: read as the owner, not the runtime role.
            let owner = Db::connect(&config.database_url, 1).await?;
            let rows = herald_engine::account_limits::activity(&owner, limit).await.map_err(clear)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!("{}", herald_engine::account_limits::activity_table(&rows));
            }
        }
        #[cfg(feature = "lab")]
        Admin::SeedStates { owner } => {
            let paths = crate::seed::run(config, &owner).await?;
            println!("{}", serde_json::to_string_pretty(&paths)?);
        }
    }
    Ok(())
}
