//! What a round runs on: its own Postgres cluster, migrated, the pools that reach it, and the
//! project's SMTP sink, misbehaving on purpose.

use std::net::SocketAddr;
use std::time::Duration;

use herald_engine::Db;
use herald_engine::jobs::Jobs;
use sqlx::PgPool;

use super::partition::LossyLink;
use super::postgres::OwnedPostgres;
use crate::smtp_sink::{FaultAction, FaultRule, Faults, MailSink};

pub(super) struct Stage {
    /// Stopped and deleted when the stage is dropped, before the pools below close.
    pub(super) pg: OwnedPostgres,
    /// The ordinary owner's URL: what the workers connect as.
    pub(super) owner_url: String,
    /// The inspector (the owner's privileges and every workspace's rows, not a superuser).
    pub(super) owner: PgPool,
    pub(super) db: Db,
    /// What the signup events are sent through: a link that loses Postgres's replies now and
    /// then, a COMMIT's among them, so a client retries an event that was already recorded.
    pub(super) events_db: Db,
    pub(super) events_link: LossyLink,
    pub(super) jobs: Jobs,
    pub(super) sink: MailSink,
    pub(super) sink_addr: SocketAddr,
    /// The sink's faults during the fault phase, but for a slow spell or the soft-failure send's
    /// refusals.
    pub(super) base_faults: Faults,
}

impl Stage {
    /// `seed` draws which of Postgres's replies to the events' link are lost.
    pub(super) async fn start(seed: u64) -> anyhow::Result<Self> {
        let pg = OwnedPostgres::start().await?;
        // Migrated and run as an ordinary owner, as on managed Postgres; `owner` below is the
        // inspector (the owner's privileges and every workspace's rows, not a superuser).
        crate::ordinary_owner::ensure(&pg.url("postgres")).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE herald OWNER {}", crate::ordinary_owner::OWNER_ROLE)))
            .execute(&PgPool::connect(&pg.url("postgres")).await?)
            .await?;
        let owner_url = crate::ordinary_owner::with_user(&pg.url("herald"), crate::ordinary_owner::OWNER_ROLE)?;
        herald_engine::infra::migrate::run(&owner_url).await?;
        let inspector_url = crate::ordinary_owner::with_user(&pg.url("herald"), crate::ordinary_owner::INSPECTOR_ROLE)?;
        let owner = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&inspector_url).await?;
        let db = Db::connect(&herald_engine::infra::db::runtime_url(&owner_url, None)?, 8).await?;
        let jobs = Jobs::new(&db);
        let events_link = LossyLink::start(pg.port, seed).await?;
        let events_url = owner_url.replace(&format!(":{}/", pg.port), &format!(":{}/", events_link.port));
        let events_db = Db::connect(&herald_engine::infra::db::runtime_url(&events_url, None)?, 4).await?;
        // Once connected: one reply chunk in twenty lost, so most events need a retry or two, and
        // some retries come after a COMMIT that took effect.
        events_link.lose(50_000);

        // The sink: random 4xx (at RCPT and after the data), drops mid-DATA, accept-then-drop;
        // `dead…` addresses are unknown users (5xx, hard bounce), `reject…` ones get a 5xx.
        let (sink, sink_addr) = MailSink::start("127.0.0.1:0").await?;
        let base_faults = Faults::none()
            .with_rule(FaultRule::new("dead", FaultAction::user_unknown()))
            .with_rule(FaultRule::new("reject", FaultAction::RejectData("554 5.7.1 Rejected as spam".into())))
            .with_random(0.02, FaultAction::mailbox_busy())
            .with_random(0.03, FaultAction::try_again_later())
            .with_random(0.05, FaultAction::DropMidData)
            .with_random(0.005, FaultAction::DropAfterData)
            .with_random_reply_delay(Duration::from_millis(20));
        sink.set_faults(base_faults.clone());
        Ok(Self { pg, owner_url, owner, db, events_db, events_link, jobs, sink, sink_addr, base_faults })
    }
}
