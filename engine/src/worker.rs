//! The workers: the job handlers, the supervisor and the loop that keeps them running. Nothing
//! in the engine imports this module (it sits above every feature); `herald worker` and
//! `herald serve` start it through [`run_workers`].

use apalis::prelude::*;
use apalis_postgres::PostgresStorage;

use crate::campaigns::store::CampaignStatus;
use crate::domain::CampaignId;
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::jobs::{DeliverCampaign, ImportReaders, Jobs, SendSystemMail, StartCampaign, unique_worker_name};
use crate::sending::mail::Mailer;
use crate::sending::message::DkimSigner;

async fn import_readers(
    job: ImportReaders,
    cx: Data<crate::audience::import::ImportContext>,
) -> Result<(), BoxDynError> {
    crate::audience::import::run(&cx, job.tenant, job.import).await.map_err(|e| Box::new(e) as BoxDynError)
}

async fn start_campaign(job: StartCampaign, cx: Data<CampaignWorkerContext>) -> Result<(), BoxDynError> {
    let run = async {
        let c = crate::campaigns::store::get(&cx.delivery.db, job.tenant, job.campaign).await?;
        if !matches!(c.status, CampaignStatus::Sending | CampaignStatus::Paused) {
            return Ok(());
        }
        let identity = crate::sending::identities::resolve(
            &cx.delivery.db,
            &cx.delivery.signer,
            job.tenant,
            c.identity_id,
            &cx.delivery.config.default_identity,
            &cx.delivery.config.egress,
        )
        .await?;
        if c.status == CampaignStatus::Sending {
            // One job per delivery slot; a job whose slot is held by a live loop ends at once.
            cx.jobs.enqueue_deliveries(job.tenant, job.campaign, identity.max_connections).await?;
        }
        if c.fanout_done {
            return Ok(());
        }
        // The fan-out runs under a lease of its own, so the supervisor can tell a dead one from
        // a slow one. (Two fan-outs at once would be safe, the campaign row lock serialises
        // their chunks; the lease only says someone is working.)
        let owner = crate::sending::lease::owner(&cx.delivery.config.worker_id, &format!("fanout:{}", job.campaign));
        let what = crate::sending::lease::LeaseFor::Fanout { tenant: job.tenant, campaign: job.campaign };
        let Some(lease) =
            crate::sending::lease::Lease::acquire(&cx.delivery.db, what, &owner, cx.delivery.config.lease).await?
        else {
            return Ok(());
        };
        crate::campaigns::fanout::run(&cx.delivery.db, job.tenant, job.campaign).await?;
        lease.end().await;
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
/// campaigns that are due, and re-enqueue work for sending campaigns nobody is working on (no
/// live delivery lease, or an unfinished fan-out without one), and choose the winners of A/B
/// tests whose window ended. A tick that fails (Postgres
/// restarting) is logged and the next one tries again.
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
#[tracing::instrument(skip_all)]
pub async fn supervise_once(db: &Db, jobs: &Jobs) -> Result<()> {
    let reaped: i64 = sqlx::query_scalar("SELECT reap_expired_leases()").fetch_one(db.pool()).await?;
    if reaped > 0 {
        tracing::warn!(
            reaped,
            "requeued messages whose lease expired; armed ones count as ambiguous and keep their Message-ID"
        );
    }
    let due: Vec<(crate::domain::TenantId, CampaignId)> =
        sqlx::query_as("SELECT tenant_id, campaign_id FROM start_due_campaigns()").fetch_all(db.pool()).await?;
    for (tenant, campaign) in due {
        tracing::info!(%campaign, "scheduled campaign is due");
        jobs.kick_campaign(db, tenant, campaign, false).await?;
    }
    crate::campaigns::recurring::make_due_editions(db, jobs, chrono::Utc::now()).await?;
    crate::campaigns::ab_test::decide_due(db, jobs).await?;
    let stalled: Vec<(crate::domain::TenantId, CampaignId, bool)> = sqlx::query_as(
        "SELECT tenant_id, campaign_id, fanout_done FROM claim_unattended_campaigns(make_interval(secs => 15))",
    )
    .fetch_all(db.pool())
    .await?;
    for (tenant, campaign, fanout_done) in stalled {
        tracing::warn!(%campaign, "nobody is working on a sending campaign; enqueueing its jobs again");
        jobs.kick_campaign(db, tenant, campaign, fanout_done).await?;
    }
    Ok(())
}

/// What the system-mail worker needs: the mailer, and the keys of workspaces' own senders.
#[derive(Clone)]
struct SystemMailContext {
    mailer: Mailer,
    db: Db,
    signer: crate::infra::tokens::Signer,
}

async fn send_system_mail(job: SendSystemMail, cx: Data<SystemMailContext>) -> Result<(), BoxDynError> {
    let failed = |e: crate::Error| {
        tracing::warn!(error = ?e, "system mail failed; apalis will retry");
        Box::new(e) as BoxDynError
    };
    let mut mail = job.mail;
    let mut dkim = None;
    if let crate::sending::mail::MailFrom::Workspace { tenant, workspace, email, .. } = &mail.from {
        // Signed with the domain's key, or not sent From it at all: the key may have gone since
        // the mail was queued (the domain removed), and unsigned mail From a domain with a DMARC
        // policy would be rejected.
        match crate::sending::domains::dkim_key_for(&cx.db, &cx.signer, *tenant, email).await.map_err(failed)? {
            Some(k) => dkim = Some(DkimSigner::new(&k.selector, &k.domain, &k.private_key_pem).map_err(failed)?),
            None => mail.from = crate::sending::mail::MailFrom::HeraldFor { workspace: workspace.clone() },
        }
    }
    cx.mailer.send(&mail, dkim.as_ref()).await.map_err(failed)
}

/// What the workers need.
pub struct WorkerSetup {
    pub db: Db,
    pub mailer: Mailer,
    pub signer: crate::infra::tokens::Signer,
    pub base_url: String,
    pub delivery: crate::campaigns::delivery::DeliveryConfig,
    /// Delivery jobs (SMTP connections) this process runs at once, across campaigns.
    pub send_concurrency: usize,
    /// The transactional stream's own loops.
    pub transactional: crate::transactional::delivery::TxDeliveryConfig,
    /// Shared with the API's [`crate::transactional::messages::Outbox`]: an enqueue wakes the senders.
    pub transactional_wake: std::sync::Arc<tokio::sync::Notify>,
    /// For the opt-in confirmations imports send ([`crate::sending::mail_quota`]).
    pub system_mail_limits: crate::sending::mail_quota::SystemMailLimits,
    /// The outbound webhooks' senders.
    pub webhooks: crate::outbound_webhooks::delivery::WebhookDeliveryConfig,
}

/// A Postgres job source for `$job`, polled about four times a second while its queue is
/// empty ([`crate::infra::job_poll::Gated`]: apalis alone polls hundreds of times a second). (A macro:
/// the backend's concrete type is unnameable.)
macro_rules! pg_backend {
    ($job:ty, $db:expr) => {
        crate::infra::job_poll::Gated::new(
            PostgresStorage::<$job>::new($db.pool()),
            std::time::Duration::from_millis(250),
        )
    };
}

/// Workers whose job poller stopped (Postgres went away) and is being restarted, with the
/// error: `/readyz` answers 503 while this is not empty.
static DEAD_WORKERS: std::sync::Mutex<std::collections::BTreeMap<&'static str, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The job workers that are down right now, with why (see [`DEAD_WORKERS`]).
pub fn dead_workers() -> Vec<(&'static str, String)> {
    DEAD_WORKERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|(k, v)| (*k, v.clone()))
        .collect()
}

fn mark_worker(kind: &'static str, dead: Option<String>) {
    let mut map = DEAD_WORKERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match dead {
        Some(why) => {
            map.insert(kind, why);
        }
        None => {
            map.remove(kind);
        }
    }
}

/// Runs one apalis worker until `stop`, and builds it again (under a new unique name, with
/// backoff from 1 s to 30 s) whenever it dies. apalis 1.0 ends a worker for good at its first
/// failed poll or heartbeat (a Postgres restart): without this, the process stays up with no
/// one taking its jobs. The worker counts as dead for `/readyz` until a new one has run 5 s.
async fn keep_running<F, Fut, E>(kind: &'static str, mut make: F, stop: tokio::sync::watch::Receiver<bool>)
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), E>>,
    E: std::fmt::Display,
{
    const HEALTHY_AFTER: std::time::Duration = std::time::Duration::from_secs(5);
    let mut backoff = std::time::Duration::from_secs(1);
    loop {
        let run = make(unique_worker_name(kind));
        tokio::pin!(run);
        let healthy = tokio::time::sleep(HEALTHY_AFTER);
        tokio::pin!(healthy);
        let mut marked_healthy = false;
        let result = loop {
            tokio::select! {
                r = &mut run => break r,
                _ = &mut healthy, if !marked_healthy => {
                    marked_healthy = true;
                    backoff = std::time::Duration::from_secs(1);
                    mark_worker(kind, None);
                }
            }
        };
        if *stop.borrow() {
            mark_worker(kind, None);
            return;
        }
        let why = match result {
            Ok(()) => "the worker stopped without being asked to".to_string(),
            Err(e) => e.to_string(),
        };
        tracing::error!(worker = kind, error = %why, "job worker died; starting it again in {backoff:?}");
        mark_worker(kind, Some(why));
        let mut stop_wait = stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop_wait.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(std::time::Duration::from_secs(30));
    }
}

/// Runs the job workers and the campaign supervisor until `shutdown` completes, then lets
/// in-flight jobs finish.
pub async fn run_workers<F>(setup: WorkerSetup, shutdown: F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let WorkerSetup {
        db,
        mailer,
        signer,
        base_url,
        delivery,
        send_concurrency,
        transactional,
        transactional_wake,
        system_mail_limits,
        webhooks,
    } = setup;
    let signer_for_webhooks = signer.clone();
    let tx_cx = crate::transactional::delivery::TxDeliveryContext {
        db: db.clone(),
        signer: signer.clone(),
        config: std::sync::Arc::new(transactional),
        wake: transactional_wake,
    };
    let jobs = Jobs::new(&db).with_system_mail_limits(system_mail_limits);
    let system_mail_cx = SystemMailContext { mailer: mailer.clone(), db: db.clone(), signer: signer.clone() };
    let confirmation_mail =
        crate::automations::scheduler::ConfirmationMail { signer: signer.clone(), base_url: base_url.clone() };
    let import_cx =
        crate::audience::import::ImportContext { db: db.clone(), signer: signer.clone(), jobs: jobs.clone(), base_url };
    let campaign_cx = CampaignWorkerContext {
        delivery: crate::campaigns::delivery::DeliveryContext {
            db: db.clone(),
            signer,
            config: std::sync::Arc::new(delivery),
        },
        jobs: jobs.clone(),
    };
    // One shutdown signal, fanned out to every worker.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let automations =
        tokio::spawn(crate::automations::scheduler::run(db.clone(), jobs.clone(), confirmation_mail, stop_rx.clone()));
    let webhook_cx = crate::outbound_webhooks::delivery::WebhookContext {
        db: db.clone(),
        signer: signer_for_webhooks,
        jobs: jobs.clone(),
        config: std::sync::Arc::new(webhooks),
    };
    let webhook_senders = tokio::spawn(crate::outbound_webhooks::delivery::run(webhook_cx, stop_rx.clone()));
    let supervisor = tokio::spawn(supervise(db.clone(), jobs, stop_rx.clone()));
    let transactional = tokio::spawn(crate::transactional::delivery::run(tx_cx, stop_rx.clone()));
    let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
        Ok::<(), std::io::Error>(())
    };
    let s = stop_rx.clone();
    let mail = keep_running(
        "system-mail",
        |name| {
            WorkerBuilder::new(name)
                .backend(pg_backend!(SendSystemMail, db))
                .data(system_mail_cx.clone())
                .build(send_system_mail)
                .run_until(until(s.clone()))
        },
        stop_rx.clone(),
    );
    let s = stop_rx.clone();
    let import = keep_running(
        "import",
        |name| {
            WorkerBuilder::new(name)
                .backend(pg_backend!(ImportReaders, db))
                .data(import_cx.clone())
                .build(import_readers)
                .run_until(until(s.clone()))
        },
        stop_rx.clone(),
    );
    let s = stop_rx.clone();
    let start = keep_running(
        "campaign-start",
        |name| {
            WorkerBuilder::new(name)
                .backend(pg_backend!(StartCampaign, db))
                .data(campaign_cx.clone())
                .concurrency(4)
                .build(start_campaign)
                .run_until(until(s.clone()))
        },
        stop_rx.clone(),
    );
    let s = stop_rx.clone();
    let delivery = keep_running(
        "delivery",
        |name| {
            WorkerBuilder::new(name)
                .backend(pg_backend!(DeliverCampaign, db))
                .data(campaign_cx.clone())
                .concurrency(send_concurrency.max(1))
                .build(deliver_campaign)
                .run_until(until(s.clone()))
        },
        stop_rx.clone(),
    );
    tokio::join!(mail, import, start, delivery);
    supervisor.abort();
    // A batch in flight is one transaction: stopping mid-way rolls it back, nothing half-done.
    automations.abort();
    // The transactional loops finish the message in hand, then stop; so do webhook attempts.
    let _ = transactional.await;
    let _ = webhook_senders.await;
    Ok(())
}
