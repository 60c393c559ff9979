//! What an automation's page shows: runs by state, each step's figures, the readers at a step,
//! and a reader's path through every automation they entered.

use herald_types::{AutomationId, AutomationReport, AutomationStepId, Run, StepStats};

use crate::domain::TenantId;
use crate::error::Result;
use crate::infra::db::Db;

/// Runs by state, and per step: reached, waiting, and (email steps) sent, opened, clicked — the
/// send log's `sent` rows and the tracking's unique opens and clicks of the step's campaign.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn report(db: &Db, tenant: TenantId, id: AutomationId) -> Result<AutomationReport> {
    let mut tx = db.tenant_snapshot_tx(tenant).await?;
    let automation = super::store::get_in(&mut tx, tenant, id).await?;
    let (entered, active, finished, exited): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE state = 'waiting'), count(*) FILTER (WHERE state = 'finished'),
                count(*) FILTER (WHERE state = 'exited')
         FROM automation_runs WHERE tenant_id = $1 AND automation_id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_one(&mut *tx)
    .await?;
    let step_ids: Vec<AutomationStepId> = automation.steps.iter().map(|s| s.id).collect();
    let campaigns: Vec<Option<uuid::Uuid>> = automation.steps.iter().map(|s| s.campaign_id.map(|c| c.0)).collect();
    let steps: Vec<StepStats> = sqlx::query_as(
        "SELECT x.step_id,
                (SELECT count(*) FROM automation_step_log l
                 WHERE l.tenant_id = $1 AND l.automation_id = $2 AND l.step_id = x.step_id)
                + (SELECT count(*) FROM automation_runs r
                   WHERE r.tenant_id = $1 AND r.automation_id = $2
                     AND ((r.state = 'waiting' AND r.step_id = x.step_id)
                          OR (r.state = 'exited' AND r.left_step_id = x.step_id))) AS entered,
                (SELECT count(*) FROM automation_runs r
                 WHERE r.tenant_id = $1 AND r.automation_id = $2 AND r.state = 'waiting' AND r.step_id = x.step_id) AS waiting,
                coalesce((SELECT count(*) FROM sends s WHERE s.campaign_id = x.campaign_id AND s.status = 'sent'), 0) AS sent,
                coalesce((SELECT st.unique_opens FROM campaign_stats st WHERE st.campaign_id = x.campaign_id), 0) AS opened,
                coalesce((SELECT st.unique_clicks FROM campaign_stats st WHERE st.campaign_id = x.campaign_id), 0) AS clicked
         FROM unnest($3::uuid[], $4::uuid[]) WITH ORDINALITY AS x(step_id, campaign_id, n)
         ORDER BY x.n",
    )
    .bind(tenant)
    .bind(id)
    .bind(&step_ids)
    .bind(&campaigns)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(AutomationReport { entered, active, finished, exited, steps })
}

/// A run with its path, newest first; `$1` is the tenant.
const RUN_COLUMNS: &str =
    "r.id, r.automation_id, a.name AS automation_name, r.reader_id, rd.email, r.entry, r.state, r.step_id,
    r.due_at, r.entered_at, r.ended_at, r.exit_reason,
    coalesce((SELECT jsonb_agg(jsonb_build_object('step_id', l.step_id, 'at', l.done_at, 'outcome', l.outcome)
                               ORDER BY l.done_at, l.step_id)
              FROM automation_step_log l WHERE l.tenant_id = $1 AND l.run_id = r.id), '[]') AS path";

/// The readers in an automation, those waiting at `step` when given, latest first (at most 100).
pub async fn runs(db: &Db, tenant: TenantId, id: AutomationId, step: Option<AutomationStepId>) -> Result<Vec<Run>> {
    runs_page(db, tenant, id, step, None, 100).await
}

/// [`runs`], `limit` of them with ids below `before` (a page's last).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn runs_page(
    db: &Db,
    tenant: TenantId,
    id: AutomationId,
    step: Option<AutomationStepId>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Run>> {
    let mut tx = db.tenant_tx(tenant).await?;
    super::store::get_in(&mut tx, tenant, id).await?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RUN_COLUMNS}
         FROM automation_runs r JOIN automations a ON a.tenant_id = r.tenant_id AND a.id = r.automation_id
              JOIN readers rd ON rd.tenant_id = r.tenant_id AND rd.id = r.reader_id
         WHERE r.tenant_id = $1 AND r.automation_id = $2 AND ($3::uuid IS NULL OR (r.state = 'waiting' AND r.step_id = $3))
           AND ($4::bigint IS NULL OR r.id < $4)
         ORDER BY r.id DESC LIMIT $5"
    )))
    .bind(tenant)
    .bind(id)
    .bind(step)
    .bind(before)
    .bind(limit.clamp(1, 1001))
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Every run of one reader, latest first: their path through each automation.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn reader_runs(db: &Db, tenant: TenantId, reader: i64) -> Result<Vec<Run>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RUN_COLUMNS}
         FROM automation_runs r JOIN automations a ON a.tenant_id = r.tenant_id AND a.id = r.automation_id
              JOIN readers rd ON rd.tenant_id = r.tenant_id AND rd.id = r.reader_id
         WHERE r.tenant_id = $1 AND r.reader_id = $2
         ORDER BY r.id DESC LIMIT 100"
    )))
    .bind(tenant)
    .bind(reader)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}
