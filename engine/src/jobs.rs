//! Background jobs on apalis's Postgres backend: the job payloads and the handle that enqueues
//! them. The handlers that run them are in `crate::worker`, above every feature module; this
//! module imports none of them, so any feature may enqueue.
//!
//! The queue is at-least-once: a job may run twice after a crash. Jobs whose effect must happen
//! once (campaign sends) keep their own idempotency record in Herald's tables; system mail (invites,
//! confirmations) tolerates the rare duplicate.

use apalis::prelude::*;
use apalis_postgres::PostgresStorage;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::sending::mail::OutgoingMail;

/// Mail the product sends on its own behalf: invites now, confirmations later.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SendSystemMail {
    pub mail: OutgoingMail,
}

/// Runs one CSV import (see [`crate::audience::import`]); resumable.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ImportReaders {
    pub tenant: crate::domain::TenantId,
    pub import: herald_types::ImportId,
}

/// Starts (or restarts) work on a sending campaign: enqueues its delivery jobs, then runs the
/// fan-out if it is not finished. Idempotent, so the supervisor may enqueue it again whenever a
/// campaign looks stalled.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StartCampaign {
    pub tenant: crate::domain::TenantId,
    pub campaign: crate::domain::CampaignId,
}

/// One delivery loop (one SMTP connection) on a campaign; a campaign gets as many as its sending
/// identity allows connections. A duplicate is harmless: rows are only taken by a claim.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeliverCampaign {
    pub tenant: crate::domain::TenantId,
    pub campaign: crate::domain::CampaignId,
    pub slot: u32,
}

/// Enqueues jobs. Cheap to clone.
#[derive(Clone)]
pub struct Jobs {
    db: Db,
    system_mail_limits: crate::sending::mail_quota::SystemMailLimits,
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
            db: db.clone(),
            system_mail_limits: Default::default(),
            system_mail: PostgresStorage::new(db.pool()),
            imports: PostgresStorage::new(db.pool()),
            campaigns: PostgresStorage::new(db.pool()),
            deliveries: PostgresStorage::new(db.pool()),
        }
    }

    /// See [`StartCampaign`]. The database handle is unused today but keeps the call sites
    /// honest about where the campaign lives.
    #[tracing::instrument(skip_all, fields(%tenant, %campaign))]
    pub async fn kick_campaign(
        &self,
        _db: &Db,
        tenant: crate::domain::TenantId,
        campaign: crate::domain::CampaignId,
        _fanout_done: bool,
    ) -> Result<()> {
        let mut storage = self.campaigns.clone();
        storage
            .push(StartCampaign { tenant, campaign })
            .await
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue campaign start: {e}")))?;
        Ok(())
    }

    pub(crate) async fn enqueue_deliveries(
        &self,
        tenant: crate::domain::TenantId,
        campaign: crate::domain::CampaignId,
        n: u32,
    ) -> Result<()> {
        let mut storage = self.deliveries.clone();
        for slot in 0..n {
            storage
                .push(DeliverCampaign { tenant, campaign, slot })
                .await
                .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue delivery: {e}")))?;
        }
        Ok(())
    }

    /// The limits [`Self::enqueue_workspace_mail`] applies.
    pub fn with_system_mail_limits(mut self, limits: crate::sending::mail_quota::SystemMailLimits) -> Self {
        self.system_mail_limits = limits;
        self
    }

    /// Queues mail sent on `tenant`'s behalf, if its quotas allow ([`crate::sending::mail_quota`]).
    #[tracing::instrument(skip_all, fields(%tenant))]
    pub async fn enqueue_workspace_mail(&self, tenant: crate::domain::TenantId, mail: OutgoingMail) -> Result<()> {
        // A suspended account's workspaces send nothing: confirmations and invites included.
        crate::account_limits::ensure_not_suspended(&self.db, tenant).await?;
        crate::sending::mail_quota::claim(&self.db, tenant, self.system_mail_limits, &mail.to).await?;
        let mut storage = self.system_mail.clone();
        storage
            .push(SendSystemMail { mail })
            .await
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue system mail: {e}")))?;
        Ok(())
    }

    /// Mail about an account (a password reset): no workspace asked for it, so only the
    /// per-recipient limit applies.
    #[tracing::instrument(skip_all)]
    pub async fn enqueue_account_mail(&self, mail: OutgoingMail) -> Result<()> {
        let limits =
            crate::sending::mail_quota::SystemMailLimits { per_workspace: i32::MAX, ..self.system_mail_limits };
        crate::sending::mail_quota::claim(&self.db, crate::domain::TenantId(uuid::Uuid::nil()), limits, &mail.to)
            .await?;
        let mut storage = self.system_mail.clone();
        storage
            .push(SendSystemMail { mail })
            .await
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue system mail: {e}")))?;
        Ok(())
    }

    #[tracing::instrument(skip_all, fields(%tenant, %import))]
    pub async fn enqueue_import(&self, tenant: crate::domain::TenantId, import: herald_types::ImportId) -> Result<()> {
        let mut storage = self.imports.clone();
        storage
            .push(ImportReaders { tenant, import })
            .await
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("enqueue import: {e}")))?;
        Ok(())
    }
}

/// A name no other process uses, now or after a restart: apalis tracks liveness per worker name,
/// and a restarted worker reusing its name would keep its own orphaned jobs looking alive.
pub fn unique_worker_name(kind: &str) -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    format!("{kind}@{host}:{}:{}", std::process::id(), &nonce[..8])
}
