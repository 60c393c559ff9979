//! A/B tests (the campaign's `ab_test`, `ab_seed` and `ab_winner` columns; `due_ab_tests` in
//! `engine/sql/sending.sql`). The fan-out writes every reader's row at once:
//! the test share's readers `queued` with a version chosen from a hash of their id seeded per
//! campaign, the rest `held` (`ab_rest`). The winner is one update under the campaign's row
//! lock — the one the fan-out's chunks take — that records it and turns every held row into a
//! queued row of the winning version; a chunk written after it queues its rest readers with the
//! winner at once. So each reader has one row and one version, and a crash during the choice
//! either left every rest row held (the supervisor chooses again) or none.

use chrono::{DateTime, Utc};

use super::store::{self, Campaign};
use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::jobs::Jobs;
use herald_types::{AbResults, AbTest, CampaignStatus, VariantResult};

/// The campaign as version `v` sends it (0, or anything past its versions: the campaign itself).
pub fn version(c: &Campaign, v: usize) -> Campaign {
    let mut out = c.clone();
    if let Some(alt) = c.ab_test.as_ref().and_then(|t| v.checked_sub(1).and_then(|i| t.variants.get(i))) {
        out.subject = alt.subject.clone();
        if !alt.from_name.trim().is_empty() {
            out.from_name = alt.from_name.trim().to_string();
        }
        if !alt.body.trim().is_empty() {
            out.body = alt.body.clone();
        }
    }
    out
}

/// Versions the campaign sends (1 without a test).
pub fn versions(c: &Campaign) -> usize {
    c.ab_test.as_ref().map_or(1, AbTest::versions)
}

/// What the fan-out's insert binds to split the audience: the seed (none without a test), the
/// test share in percent, the number of versions and the winner once chosen.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Split {
    pub seed: Option<i64>,
    pub percent: i32,
    pub versions: i32,
    pub winner: Option<i16>,
}

/// The campaign's split, fixing its seed and the end of its window the first time (in the
/// fan-out's transaction, under its row lock, so every chunk reads the same).
pub(crate) async fn split(
    tx: &mut Tx,
    tenant: TenantId,
    campaign: CampaignId,
    test: Option<&AbTest>,
    seed: Option<i64>,
    winner: Option<i16>,
) -> Result<Split> {
    let Some(test) = test else {
        return Ok(Split { seed: None, percent: 100, versions: 1, winner: None });
    };
    let seed = match seed {
        Some(s) => s,
        None => {
            let s: i64 = rand::random();
            sqlx::query(
                "UPDATE campaigns SET ab_seed = $3, ab_decide_at = now() + make_interval(hours => $4)
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(campaign)
            .bind(s)
            .bind(i32::from(test.window_hours))
            .execute(&mut **tx)
            .await?;
            tracing::info!(%campaign, seed = s, "A/B test split seeded");
            s
        }
    };
    Ok(Split { seed: Some(seed), percent: i32::from(test.test_percent), versions: test.versions() as i32, winner })
}

/// Side by side: each version's test readers, sent, unique opens and clicks.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn results(db: &Db, tenant: TenantId, id: CampaignId) -> Result<AbResults> {
    let mut tx = db.tenant_tx(tenant).await?;
    let r = results_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(r)
}

async fn results_in(tx: &mut Tx, tenant: TenantId, id: CampaignId) -> Result<AbResults> {
    let campaign = store::get_in(tx, tenant, id).await?;
    let Some(test) = campaign.ab_test.clone() else {
        return Err(Error::Conflict("This campaign has no A/B test.".into()));
    };
    let (decide_at, decided_at, held): (Option<DateTime<Utc>>, Option<DateTime<Utc>>, i64) = sqlx::query_as(
        "SELECT c.ab_decide_at, c.ab_decided_at,
                (SELECT count(*) FROM sends s WHERE s.tenant_id = $1 AND s.campaign_id = $2 AND s.status = 'held')
         FROM campaigns c WHERE c.tenant_id = $1 AND c.id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    // Only the test share's rows (`NOT ab_rest`): the rest is sent the winner afterwards.
    let counted: Vec<(i16, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT s.variant, count(*) FILTER (WHERE s.status <> 'skipped'), count(*) FILTER (WHERE s.status = 'sent'),
                count(*) FILTER (WHERE s.status = 'sent' AND EXISTS (
                    SELECT 1 FROM events e WHERE e.tenant_id = $1 AND e.reader_id = s.reader_id AND e.campaign_id = $2
                      AND e.kind = 'open' AND NOT e.prefetch)),
                count(*) FILTER (WHERE s.status = 'sent' AND EXISTS (
                    SELECT 1 FROM events e WHERE e.tenant_id = $1 AND e.reader_id = s.reader_id AND e.campaign_id = $2
                      AND e.kind = 'click'))
         FROM sends s WHERE s.tenant_id = $1 AND s.campaign_id = $2 AND s.variant IS NOT NULL AND NOT s.ab_rest
         GROUP BY s.variant",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&mut **tx)
    .await?;
    let variants = (0..test.versions())
        .map(|v| {
            let c = counted.iter().find(|r| r.0 as usize == v);
            VariantResult {
                variant: v as u8,
                subject: version(&campaign, v).subject,
                readers: c.map_or(0, |r| r.1),
                sent: c.map_or(0, |r| r.2),
                unique_opens: c.map_or(0, |r| r.3),
                unique_clicks: c.map_or(0, |r| r.4),
            }
        })
        .collect();
    Ok(AbResults {
        metric: test.metric,
        test_percent: test.test_percent,
        window_hours: test.window_hours,
        decide_at,
        winner: campaign.ab_winner.map(|w| w as u8),
        decided_at,
        held,
        variants,
    })
}

/// Chooses the winner — `variant`, or the metric's leader now — and releases the held readers
/// with it, in one transaction. Picking the winner already chosen again is a no-op; picking
/// another once one is chosen is a conflict (its mail may be out).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn pick_winner(
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
    role: Role,
    id: CampaignId,
    variant: Option<u8>,
) -> Result<AbResults> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let campaign = store::get_in(&mut tx, tenant, id).await?;
    let Some(test) = &campaign.ab_test else {
        return Err(Error::Conflict("This campaign has no A/B test.".into()));
    };
    if let Some(v) = variant
        && v as usize >= test.versions()
    {
        return Err(Error::Invalid(herald_types::Invalid::field(
            "variant",
            format!("Choose a version from A to {}.", herald_types::ab_test::variant_label(test.versions() - 1)),
        )));
    }
    match campaign.status {
        CampaignStatus::Sending | CampaignStatus::Paused | CampaignStatus::Sent => {}
        CampaignStatus::Cancelled => return Err(Error::Conflict("This send was cancelled.".into())),
        _ => return Err(Error::Conflict("The test has not started: send the campaign first.".into())),
    }
    let chosen = decide(&mut tx, tenant, id, variant).await?;
    let results = results_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    if let Decision::Chosen { released, .. } = chosen
        && released > 0
    {
        jobs.kick_campaign(db, tenant, id, true).await?;
    }
    match (chosen, variant) {
        (Decision::Already(w), Some(v)) if w != v => Err(Error::Conflict(format!(
            "Version {} already won; its mail may be out.",
            herald_types::ab_test::variant_label(w as usize)
        ))),
        _ => Ok(results),
    }
}

#[derive(Clone, Copy, Debug)]
enum Decision {
    /// The winner was chosen before this call.
    Already(u8),
    Chosen {
        winner: u8,
        released: u64,
    },
}

/// Records the winner and releases the held rows, under the row lock the fan-out's chunks
/// take: a chunk either committed before (its held rows are released here) or starts after
/// (and queues its rest readers with the winner). `variant` none: the leader now.
async fn decide(tx: &mut Tx, tenant: TenantId, id: CampaignId, variant: Option<u8>) -> Result<Decision> {
    let winner: Option<Option<i16>> =
        sqlx::query_scalar("SELECT ab_winner FROM campaigns WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE")
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    match winner {
        None => return Err(Error::NotFound),
        Some(Some(w)) => return Ok(Decision::Already(w as u8)),
        Some(None) => {}
    }
    let winner = match variant {
        Some(v) => v,
        None => results_in(tx, tenant, id).await?.leader(),
    };
    sqlx::query("UPDATE campaigns SET ab_winner = $3, ab_decided_at = now(), updated_at = now() WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .bind(winner as i16)
        .execute(&mut **tx)
        .await?;
    let released = sqlx::query(
        "UPDATE sends SET status = 'queued', variant = $3, next_attempt_at = now(), updated_at = now()
         WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'held'",
    )
    .bind(tenant)
    .bind(id)
    .bind(winner as i16)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    tracing::info!(campaign = %id, winner, released, "A/B test winner chosen");
    Ok(Decision::Chosen { winner, released })
}

/// The supervisor's part: every test whose window ended gets the metric's leader as winner.
/// Each runs in its workspace's own transaction; one that fails is logged and tried again on
/// the next tick.
#[tracing::instrument(skip_all)]
pub async fn decide_due(db: &Db, jobs: &Jobs) -> Result<()> {
    let due: Vec<(TenantId, CampaignId)> =
        sqlx::query_as("SELECT tenant_id, campaign_id FROM due_ab_tests()").fetch_all(db.pool()).await?;
    for (tenant, id) in due {
        let mut tx = db.tenant_tx(tenant).await?;
        let decision = decide(&mut tx, tenant, id, None).await;
        match decision {
            Ok(d) => {
                tx.commit().await?;
                if let Decision::Chosen { winner, released } = d {
                    tracing::info!(campaign = %id, winner, released, "A/B test window ended");
                    if released > 0 {
                        jobs.kick_campaign(db, tenant, id, true).await?;
                    }
                }
            }
            Err(e) => tracing::warn!(error = ?e, campaign = %id, "could not choose an A/B test's winner"),
        }
    }
    Ok(())
}

/// Every version must compile before a send starts (its body and subject are templates too).
pub(crate) async fn check_versions(
    c: &Campaign,
    workspace: &crate::sending::message::Workspace,
    tenant: TenantId,
) -> Result<()> {
    for v in 1..versions(c) {
        let turn = crate::sending::template_sandbox::Turn::request(tenant);
        let label = herald_types::ab_test::variant_label(v);
        crate::sending::message::CompiledCampaign::compile(&store::content(&version(c, v)), workspace, turn)
            .await?
            .map_err(|e| Error::invalid(format!("Fix version {label}'s template first: {e}")))?;
    }
    Ok(())
}
