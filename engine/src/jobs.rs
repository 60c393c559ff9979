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

/// Enqueues jobs. Cheap to clone.
#[derive(Clone)]
pub struct Jobs {
    system_mail: PostgresStorage<SendSystemMail>,
    imports: PostgresStorage<ImportReaders>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Jobs")
    }
}

impl Jobs {
    pub fn new(db: &Db) -> Self {
        Self { system_mail: PostgresStorage::new(db.pool()), imports: PostgresStorage::new(db.pool()) }
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

/// Runs the job workers until `shutdown` completes, then lets in-flight jobs finish.
pub async fn run_workers<F>(
    db: Db,
    mailer: Mailer,
    signer: crate::tokens::Signer,
    base_url: String,
    shutdown: F,
) -> anyhow::Result<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    // LISTEN/NOTIFY wakes the worker the moment a job is inserted; the interval picks up retries
    // whose run_at has come, and anything a missed notification left behind.
    let backend = PostgresStorage::<SendSystemMail>::new(db.pool())
        .with_pubsub()
        .poll_with_strategy(Strategy::new().interval(std::time::Duration::from_secs(1)));
    let mail_worker =
        WorkerBuilder::new(unique_worker_name("system-mail")).backend(backend).data(mailer).build(send_system_mail);
    let import_backend = PostgresStorage::<ImportReaders>::new(db.pool())
        .with_pubsub()
        .poll_with_strategy(Strategy::new().interval(std::time::Duration::from_secs(1)));
    let import_worker = WorkerBuilder::new(unique_worker_name("import"))
        .backend(import_backend)
        .data(crate::audience::import::ImportContext { db: db.clone(), signer, jobs: Jobs::new(&db), base_url })
        .build(import_readers);
    // One shutdown signal, fanned out to both workers.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
        Ok::<(), std::io::Error>(())
    };
    let (a, b) = tokio::join!(mail_worker.run_until(until(stop_rx.clone())), import_worker.run_until(until(stop_rx)));
    a.map_err(|e| anyhow::anyhow!("system mail worker stopped: {e}"))?;
    b.map_err(|e| anyhow::anyhow!("import worker stopped: {e}"))
}
