//! The round's `herald worker` processes: started, killed, frozen and restarted by the faults,
//! each reaching Postgres through a [`Partition`] of its own.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, Command};

use super::partition::Partition;
use super::{BATCH, LEASE_SECONDS, SATURATED_POOL, SMTP_TIMEOUT_SECONDS};

pub(super) struct Workers {
    bin: PathBuf,
    env: Vec<(String, String)>,
    /// Each worker's own way to Postgres, so one can be cut off while the others are not.
    pub(super) links: Vec<Partition>,
    /// `DATABASE_URL` with `{port}` where the worker's link's port goes.
    database_url: String,
    logs: PathBuf,
    pub(super) slots: Vec<Option<Child>>,
    started: usize,
    /// Workers that exited without being killed (a worker must survive its database).
    pub(super) exited: Vec<String>,
    /// Their `HERALD_SECRET_KEY`: what the round seals a webhook endpoint's secret with.
    pub(super) secret: String,
}

impl Workers {
    /// `count` workers (at least one), none started yet (see [`Workers::ensure_all`]): their
    /// settings, each one's link to the Postgres on `postgres_port`, and `logs` for their output.
    pub(super) async fn new(
        bin: &Path,
        count: usize,
        postgres_port: u16,
        owner_url: &str,
        sink_addr: SocketAddr,
        logs: &Path,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(logs)?;
        let secret = hex::encode(rand::random::<[u8; 32]>());
        let env: Vec<(String, String)> = [
            ("HERALD_ENV", "production".into()),
            ("HERALD_SECRET_KEY", secret.clone()),
            ("HERALD_BASE_URL", "https://chaos.herald.test".into()),
            ("HERALD_SMTP_URL", format!("smtp://{sink_addr}")),
            ("HERALD_SEND_LEASE_SECONDS", LEASE_SECONDS.to_string()),
            ("HERALD_SMTP_TIMEOUT_SECONDS", SMTP_TIMEOUT_SECONDS.to_string()),
            ("HERALD_SEND_BATCH", BATCH.to_string()),
            ("HERALD_SEND_RETRY_BASE_SECONDS", "0.1".into()),
            ("HERALD_SEND_MAX_ATTEMPTS", "60".into()),
            ("HERALD_SMTP_RATE", "100000".into()),
            ("HERALD_SMTP_BURST", "1000".into()),
            ("HERALD_SEND_CONCURRENCY", "8".into()),
            ("HERALD_TRANSACTIONAL_BACKOFF", "0.2,0.4,0.8,1.6,3.2,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5".into()),
            ("HERALD_DB_MAX_CONNECTIONS", "16".into()),
            ("RUST_LOG", "warn,herald_engine=info".into()),
        ]
        .into_iter()
        .chain(super::webhooks::WORKER_ENV.iter().map(|(k, v)| (*k, v.to_string())))
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let mut links = Vec::new();
        for _ in 0..count.max(1) {
            links.push(Partition::start(postgres_port).await?);
        }
        Ok(Self {
            bin: bin.to_path_buf(),
            env,
            links,
            database_url: owner_url.replace(&format!(":{postgres_port}/"), ":{port}/"),
            logs: logs.to_path_buf(),
            slots: (0..count.max(1)).map(|_| None).collect(),
            started: 0,
            exited: Vec::new(),
            secret,
        })
    }

    pub(super) fn spawn(&mut self, slot: usize) -> anyhow::Result<()> {
        self.started += 1;
        let log = std::fs::File::create(self.logs.join(format!("worker-{slot}-{}.log", self.started)))?;
        let child = Command::new(&self.bin)
            .arg("worker")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("DATABASE_URL", self.database_url.replace("{port}", &self.links[slot].port.to_string()))
            // Worker 0's pool is saturated for good: fewer connections than its loops (eight
            // delivery, two transactional, the supervisor and the job pollers) want at once.
            .envs((slot == 0).then_some(("HERALD_DB_MAX_CONNECTIONS", SATURATED_POOL)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        self.slots[slot] = Some(child);
        Ok(())
    }

    /// SIGKILL: no cleanup, leases and apalis jobs left behind.
    pub(super) async fn kill(&mut self, slot: usize) {
        if let Some(mut child) = self.slots[slot].take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// SIGSTOP, then SIGCONT after `pause` (in the background, so other faults go on meanwhile):
    /// a worker frozen mid-transaction for longer than its lease (a VM paused, a process
    /// starved), whose renewals, fences and open transactions freeze with it.
    pub(super) fn freeze(&self, slot: usize, pause: Duration) {
        let Some(pid) = self.slots[slot].as_ref().and_then(Child::id) else { return };
        tokio::spawn(async move {
            let signal = |sig: &'static str| Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
            if signal("STOP").await.is_ok_and(|s| s.success()) {
                tokio::time::sleep(pause).await;
                let _ = signal("CONT").await;
            }
        });
    }

    /// Starts any worker that is not running; one that exited on its own is noted.
    pub(super) fn ensure_all(&mut self) -> anyhow::Result<()> {
        for slot in 0..self.slots.len() {
            let alive = match self.slots[slot].as_mut() {
                Some(c) => match c.try_wait() {
                    Ok(None) => true,
                    Ok(Some(status)) => {
                        self.exited.push(format!("worker {slot} exited on its own ({status}); see its log"));
                        false
                    }
                    Err(_) => false,
                },
                None => false,
            };
            if !alive {
                self.spawn(slot)?;
            }
        }
        Ok(())
    }
}
