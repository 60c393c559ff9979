//! The guards that pause a campaign on its own: too many hard bounces, too many complaints, or a
//! step campaign that cannot send (which pauses its whole automation).

use super::*;

/// Bounce and complaint rates above these pause the campaign (after `MIN_SAMPLE` outcomes).
pub(super) const MAX_HARD_BOUNCE_RATE: f64 = 0.05;

pub(super) const MIN_SAMPLE: i64 = 100;

pub(super) const HEALTH_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Gmail's bulk-sender limit is a 0.3 % spam rate; complaints arrive by webhook, after the
/// message, so they are checked on a timer against the messages sent so far.
pub(super) const MAX_COMPLAINT_RATE: f64 = 0.003;

pub(super) const MIN_COMPLAINT_SAMPLE: i64 = 1000;

pub(super) const COMPLAINT_CHECK_EVERY: Duration = Duration::from_secs(30);

impl Sender<'_> {
    /// Pauses the campaign when hard bounces pass 5 % of outcomes (after a minimum sample).
    /// Returns true when it paused.
    pub(super) async fn check_health(&mut self) -> Result<bool> {
        let over = |outcomes: i64, bounces: i64| {
            outcomes >= MIN_SAMPLE && (bounces as f64) / (outcomes as f64) > MAX_HARD_BOUNCE_RATE
        };
        // First the campaign's counters: one row, where counting the send log walked every row
        // of the campaign every 5 s in every loop once a single address had bounced. Bounces are
        // counted there at once and sends every few seconds (each loop's tally), so the lag can
        // only overstate the rate: below the limit there, below it in fact.
        self.tally.flush(&self.cx.db, self.tenant, self.campaign.id).await?;
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let counters: Option<(i64, i64)> = sqlx::query_as(
            "SELECT sent + failed, hard_bounces FROM campaign_stats WHERE tenant_id = $1 AND campaign_id = $2",
        )
        .bind(self.tenant)
        .bind(self.campaign.id)
        .fetch_optional(&mut *tx)
        .await?;
        if !counters.is_some_and(|(outcomes, bounces)| over(outcomes, bounces)) {
            tx.commit().await?;
            return Ok(false);
        }
        // Over the limit by the counters: confirm on the send log before pausing anyone's send.
        let (outcomes, bounces): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE status IN ('sent', 'failed')), count(*) FILTER (WHERE hard_bounce)
             FROM sends WHERE tenant_id = $1 AND campaign_id = $2",
        )
        .bind(self.tenant)
        .bind(self.campaign.id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        if over(outcomes, bounces) {
            let why = format!(
                "Paused: {bounces} of {outcomes} messages hard-bounced ({:.1} %, the limit is {:.0} %). Check the list's quality before resuming.",
                100.0 * bounces as f64 / outcomes as f64,
                100.0 * MAX_HARD_BOUNCE_RATE
            );
            auto_pause(self.cx, self.tenant, self.campaign.id, &why).await?;
            return Ok(true);
        }
        Ok(false)
    }
}

impl Sender<'_> {
    /// Pauses the campaign when provider-reported complaints pass Gmail's 0.3 %. One row read.
    pub(super) async fn check_complaints(&self) -> Result<bool> {
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let row: Option<(i64, i64)> =
            sqlx::query_as("SELECT complaints, sent FROM campaign_stats WHERE tenant_id = $1 AND campaign_id = $2")
                .bind(self.tenant)
                .bind(self.campaign.id)
                .fetch_optional(&mut *tx)
                .await?;
        tx.commit().await?;
        let Some((complaints, sent)) = row else { return Ok(false) };
        if sent >= MIN_COMPLAINT_SAMPLE && (complaints as f64) / (sent as f64) > MAX_COMPLAINT_RATE {
            let why = format!(
                "Paused: {complaints} spam complaints for {sent} messages ({:.2} %, Gmail's limit is 0.3 %). Check how these readers subscribed before resuming.",
                100.0 * complaints as f64 / sent as f64
            );
            auto_pause(self.cx, self.tenant, self.campaign.id, &why).await?;
            return Ok(true);
        }
        Ok(false)
    }
}

pub(super) async fn auto_pause(
    cx: &DeliveryContext,
    tenant: TenantId,
    campaign: CampaignId,
    reason: &str,
) -> Result<()> {
    tracing::warn!(%campaign, reason, "campaign paused itself");
    if crate::campaigns::lifecycle::pause_automation_of(&cx.db, tenant, campaign, reason).await? {
        return Ok(());
    }
    match crate::campaigns::lifecycle::pause(&cx.db, tenant, crate::domain::Role::Owner, campaign, reason).await {
        Ok(_) | Err(Error::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}
