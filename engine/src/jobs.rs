//! Background jobs on apalis's Postgres backend.
//!
//! The queue is at-least-once: a job may run twice after a crash. Jobs whose effect must happen
//! once (campaign sends) keep their own idempotency record in Herald's tables; system mail (invites,
//! confirmations) tolerates the rare duplicate.

use apalis::prelude::*;
use apalis_postgres::PostgresStorage;
use serde::{Deserialize, Serialize};

use crate::db::Db;
use crate::error::{Error, Result};
use crate::mail::{Mailer, OutgoingMail};

/// Mail the product sends on its own behalf: invites now, confirmations later.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SendSystemMail {
    pub mail: OutgoingMail,
}

/// Runs one CSV import (see [`crate::audience::import`]); resumable.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ImportReaders {
    pub tenant: crate::domain::TenantId,
    pub import: uuid::Uuid,
}

/// Starts (or restarts) work on a sending campaign: enqueues its delivery jobs, then runs the
/// fan-out if it is not finished. Idempotent, so the supervisor may enqueue it again whenever a
/// campaign looks stalled.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StartCampaign {
    pub tenant: crate::domain::TenantId,
    pub campaign: uuid::Uuid,
}

/// One delivery loop (one SMTP connection) on a campaign; a campaign gets as many as its sending
/// identity allows connections. A duplicate is harmless: rows are only taken by a claim.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeliverCampaign {
    pub tenant: crate::domain::TenantId,
    pub campaign: uuid::Uuid,
    pub slot: u32,
}

/// Enqueues jobs. Cheap to clone.
#[derive(Clone)]
pub struct Jobs {
    system_mail: PostgresStorage<SendSystemMail>,
    imports: PostgresStorage<ImportReaders>,
    campaigns: PostgresStorage<StartCampaign>,
    deliveries: PostgresStorage<DeliverCampaign>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Jobs")
    }
}

impl Jobs {
    pub fn new(db: &Db) -> Self {
        Self {
            system_mail: PostgresStorage::new(db.pool()),
            imports: PostgresStorage::new(db.pool()),
            campaigns: PostgresStorage::new(db.pool()),
            deliveries: PostgresStorage::new(db.pool()),
        }
    }

    /// See [`StartCampaign`]. The database handle is unused today but keeps the call sites
    /// honest about where the campaign lives.
    pub async fn kick_campaign(
        &self,
        _db: &Db,
        tenant: crate::domain::TenantId,
        campaign: uuid::Uuid,
        _fanout_done: bool,
    ) -> Result<()> {
        let mut storage = self.campaigns.clone();
        storage
            .push(StartCampaign { tenant, campaign })
            .await
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue campaign start: {e}")))?;
        Ok(())
    }

    async fn enqueue_deliveries(&self, tenant: crate::domain::TenantId, campaign: uuid::Uuid, n: u32) -> Result<()> {
        let mut storage = self.deliveries.clone();
        for slot in 0..n {
            storage
                .push(DeliverCampaign { tenant, campaign, slot })
                .await
                .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue delivery: {e}")))?;
        }
        Ok(())
    }

    pub async fn enqueue_system_mail(&self, mail: OutgoingMail) -> Result<()> {
        let mut storage = self.system_mail.clone();
        storage
            .push(SendSystemMail { mail })
            .await
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue system mail: {e}")))?;
        Ok(())
    }

    pub async fn enqueue_import(&self, tenant: crate::domain::TenantId, import: uuid::Uuid) -> Result<()> {
        let mut storage = self.imports.clone();
        storage
            .push(ImportReaders { tenant, import })
            .await
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue import: {e}")))?;
        Ok(())
    }
}

async fn import_readers(
    job: ImportReaders,
    cx: Data<crate::audience::import::ImportContext>,
) -> Result<(), BoxDynError> {
    crate::audience::import::run(&cx, job.tenant, job.import).await.map_err(|e| Box::new(e) as BoxDynError)
}

async fn start_campaign(job: StartCampaign, cx: Data<CampaignWorkerContext>) -> Result<(), BoxDynError> {
    let run = async {
        let c = crate::campaigns::store::get(&cx.delivery.db, job.tenant, job.campaign).await?;
        if c.status != "sending" && c.status != "paused" {
            return Ok(());
        }
        let identity = crate::campaigns::identities::resolve(
            &cx.delivery.db,
            &cx.delivery.signer,
            job.tenant,
            c.identity_id,
            &cx.delivery.config.default_identity,
        )
        .await?;
        if c.status == "sending" {
            cx.jobs.enqueue_deliveries(job.tenant, job.campaign, identity.max_connections).await?;
        }
        crate::campaigns::fanout::run(&cx.delivery.db, job.tenant, job.campaign).await?;
        Ok::<(), Error>(())
    };
    run.await.map_err(|e| {
        tracing::warn!(error = ?e, campaign = %job.campaign, "campaign start failed; apalis will retry");
        Box::new(e) as BoxDynError
    })
}

async fn deliver_campaign(job: DeliverCampaign, cx: Data<CampaignWorkerContext>) -> Result<(), BoxDynError> {
    crate::campaigns::delivery::deliver(&cx.delivery, job.tenant, job.campaign).await.map_err(|e| {
        tracing::warn!(error = ?e, campaign = %job.campaign, slot = job.slot, "delivery job ended with an error");
        Box::new(e) as BoxDynError
    })
}

#[derive(Clone)]
struct CampaignWorkerContext {
    delivery: crate::campaigns::delivery::DeliveryContext,
    jobs: Jobs,
}

/// Housekeeping every process runs, independent of apalis's own orphan recovery (which needs
/// another live worker and five minutes): requeue rows whose lease expired, start scheduled
/// campaigns that are due, and re-enqueue work for sending campaigns nobody is working on.
async fn supervise(db: Db, jobs: Jobs, mut stop: tokio::sync::watch::Receiver<bool>) {
    const TICK: std::time::Duration = std::time::Duration::from_secs(1);
    loop {
        if let Err(e) = supervise_once(&db, &jobs).await {
            tracing::warn!(error = ?e, "campaign supervisor tick failed");
        }
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One supervisor pass; public so tests can drive it without waiting.
pub async fn supervise_once(db: &Db, jobs: &Jobs) -> Result<()> {
    let reaped: i64 = sqlx::query_scalar("SELECT reap_expired_leases()").fetch_one(db.pool()).await?;
    if reaped > 0 {
        tracing::warn!(reaped, "requeued messages whose lease expired; they are re-sent with the same Message-ID");
    }
    let due: Vec<(crate::domain::TenantId, uuid::Uuid)> =
        sqlx::query_as("SELECT tenant_id, campaign_id FROM start_due_campaigns()").fetch_all(db.pool()).await?;
    for (tenant, campaign) in due {
        tracing::info!(%campaign, "scheduled campaign is due");
        jobs.kick_campaign(db, tenant, campaign, false).await?;
    }
    let reaped: i64 = sqlx::query_scalar("SELECT reap_expired_message_leases()").fetch_one(db.pool()).await?;
    if reaped > 0 {
        tracing::warn!(reaped, "requeued transactional messages whose lease expired");
    }
    crate::campaigns::recurring::make_due_editions(db, jobs, chrono::Utc::now()).await?;
    let stalled: Vec<(crate::domain::TenantId, uuid::Uuid, bool)> = sqlx::query_as(
        "SELECT tenant_id, campaign_id, fanout_done FROM claim_stalled_campaigns(make_interval(secs => 15))",
    )
    .fetch_all(db.pool())
    .await?;
    for (tenant, campaign, fanout_done) in stalled {
        tracing::warn!(%campaign, "sending campaign had no heartbeat; enqueueing its jobs again");
        jobs.kick_campaign(db, tenant, campaign, fanout_done).await?;
    }
    Ok(())
}

async fn send_system_mail(job: SendSystemMail, mailer: Data<Mailer>) -> Result<(), BoxDynError> {
    mailer.send(&job.mail).await.map_err(|e| {
        tracing::warn!(error = ?e, "system mail failed; apalis will retry");
        Box::new(e) as BoxDynError
    })
}

/// A name no other process uses, now or after a restart: apalis tracks liveness per worker name,
/// and a restarted worker reusing its name would keep its own orphaned jobs looking alive.
pub fn unique_worker_name(kind: &str) -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    format!("{kind}@{host}:{}:{}", std::process::id(), &nonce[..8])
}

/// What the workers need.
pub struct WorkerSetup {
    pub db: Db,
    pub mailer: Mailer,
    pub signer: crate::tokens::Signer,
    pub base_url: String,
    pub delivery: crate::campaigns::delivery::DeliveryConfig,
    /// Delivery jobs (SMTP connections) this process runs at once, across campaigns.
    pub send_concurrency: usize,
    /// The transactional stream's own loops.
    pub transactional: crate::transactional::delivery::TxDeliveryConfig,
    /// Shared with the API's [`crate::transactional::messages::Outbox`]: an enqueue wakes the senders.
    pub transactional_wake: std::sync::Arc<tokio::sync::Notify>,
}

/// A Postgres job source for `$job`, polled about four times a second while its queue is
/// empty ([`crate::job_poll::Gated`]: apalis alone polls hundreds of times a second). (A macro:
/// the backend's concrete type is unnameable.)
macro_rules! pg_backend {
    ($job:ty, $db:expr) => {
        crate::job_poll::Gated::new(PostgresStorage::<$job>::new($db.pool()), std::time::Duration::from_millis(250))
    };
}

/// Runs the job workers and the campaign supervisor until `shutdown` completes, then lets
/// in-flight jobs finish.
pub async fn run_workers<F>(setup: WorkerSetup, shutdown: F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let WorkerSetup { db, mailer, signer, base_url, delivery, send_concurrency, transactional, transactional_wake } =
        setup;
    let tx_cx = crate::transactional::delivery::TxDeliveryContext {
        db: db.clone(),
        signer: signer.clone(),
        config: std::sync::Arc::new(transactional),
        wake: transactional_wake,
    };
    let jobs = Jobs::new(&db);
    let mail_worker = WorkerBuilder::new(unique_worker_name("system-mail"))
        .backend(pg_backend!(SendSystemMail, db))
        .data(mailer)
        .build(send_system_mail);
    let import_worker = WorkerBuilder::new(unique_worker_name("import"))
        .backend(pg_backend!(ImportReaders, db))
        .data(crate::audience::import::ImportContext {
            db: db.clone(),
            signer: signer.clone(),
            jobs: jobs.clone(),
            base_url,
        })
        .build(import_readers);
    let campaign_cx = CampaignWorkerContext {
        delivery: crate::campaigns::delivery::DeliveryContext {
            db: db.clone(),
            signer,
            config: std::sync::Arc::new(delivery),
        },
        jobs: jobs.clone(),
    };
    let start_worker = WorkerBuilder::new(unique_worker_name("campaign-start"))
        .backend(pg_backend!(StartCampaign, db))
        .data(campaign_cx.clone())
        .concurrency(4)
        .build(start_campaign);
    let delivery_worker = WorkerBuilder::new(unique_worker_name("delivery"))
        .backend(pg_backend!(DeliverCampaign, db))
        .data(campaign_cx)
        .concurrency(send_concurrency.max(1))
        .build(deliver_campaign);
    // One shutdown signal, fanned out to every worker.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let supervisor = tokio::spawn(supervise(db.clone(), jobs, stop_rx.clone()));
    let transactional = tokio::spawn(crate::transactional::delivery::run(tx_cx, stop_rx.clone()));
    let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
        Ok::<(), std::io::Error>(())
    };
    let (a, b, c, d) = tokio::join!(
        mail_worker.run_until(until(stop_rx.clone())),
        import_worker.run_until(until(stop_rx.clone())),
        start_worker.run_until(until(stop_rx.clone())),
        delivery_worker.run_until(until(stop_rx)),
    );
    supervisor.abort();
    // The transactional loops finish the message in hand, then stop.
    let _ = transactional.await;
    a.map_err(|e| anyhow::anyhow!("system mail worker stopped: {e}"))?;
    b.map_err(|e| anyhow::anyhow!("import worker stopped: {e}"))?;
    c.map_err(|e| anyhow::anyhow!("campaign start worker stopped: {e}"))?;
    d.map_err(|e| anyhow::anyhow!("delivery worker stopped: {e}"))
}
