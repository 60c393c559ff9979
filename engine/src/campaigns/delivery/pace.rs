//! Pace: delivery slots (one SMTP connection each, fenced leases), the identity's rate tokens,
//! a spread send's rate, and giving a connection up to priority (automation) mail.

use super::*;

pub(super) enum SpreadRate {
    NotSending,
    FanoutRunning,
    PerSecond(f64),
}

/// [`take_slot`], and for priority mail a few more tries a second apart: a campaign holding the
/// connection it needs gives it up after its current message.
pub(super) async fn take_slot_soon(
    cx: &DeliveryContext,
    tenant: TenantId,
    campaign: &Campaign,
    identity: &SmtpIdentity,
) -> Result<Option<(Lease, i32)>> {
    const PRIORITY_TRIES: u32 = 10;
    for _ in 1..PRIORITY_TRIES {
        match take_slot(cx, tenant, campaign, identity).await? {
            None if campaign.automation_id.is_some() => tokio::time::sleep(Duration::from_secs(1)).await,
            taken => return Ok(taken),
        }
    }
    take_slot(cx, tenant, campaign, identity).await
}

/// Takes the first free delivery slot of the campaign (its lease and number), or `None` when
/// all are held, or every connection of the identity is in use (by this campaign or others).
/// An automation step's mail is priority mail: when it finds every connection taken, it says so,
/// and a campaign's loop above its share gives one up (`Sender::above_bulk_share`).
pub(super) async fn take_slot(
    cx: &DeliveryContext,
    tenant: TenantId,
    campaign: &Campaign,
    identity: &SmtpIdentity,
) -> Result<Option<(Lease, i32)>> {
    let connections = identity.max_connections.max(1);
    let priority = campaign.automation_id.is_some();
    for slot in 0..connections as i32 {
        let owner = crate::sending::lease::owner(&cx.config.worker_id, &format!("deliver:{}:{slot}", campaign.id));
        let what = LeaseFor::Delivery {
            tenant,
            campaign: campaign.id,
            slot,
            identity: &identity.bucket,
            connections,
            priority,
        };
        if let Some(lease) = Lease::acquire(&cx.db, what, &owner, cx.config.lease).await? {
            // A campaign does not start on a connection it would give up at once.
            let share = rate::bulk_connections(connections) as i32;
            if !priority
                && lease.identity_slot.is_some_and(|s| s >= share)
                && rate::connections_wanted(&cx.db, &identity.bucket).await?
            {
                lease.end().await;
                return Ok(None);
            }
            return Ok(Some((lease, slot)));
        }
    }
    if priority {
        rate::note_connection_demand(&cx.db, &identity.bucket).await?;
    }
    Ok(None)
}

impl Sender<'_> {
    /// Takes tokens from the identity's bucket (an automation's as priority mail, a campaign's
    /// within its share while priority mail has work) and, for a spread campaign, from its own.
    /// Returns the wait and whether priority mail waits for one of the identity's connections.
    pub(super) async fn reserve_tokens(&self, n: u32) -> Result<(Duration, bool)> {
        let db = &self.cx.db;
        let (bucket, identity_rate, burst) =
            (&self.identity.bucket, self.identity.rate_per_second, self.identity.burst);
        let (mut wait, connections_wanted) = if self.campaign.automation_id.is_some() {
            (rate::reserve_priority(db, bucket, n, identity_rate, burst).await?, false)
        } else {
            let r = rate::reserve_bulk(db, bucket, n, identity_rate, burst).await?;
            (r.wait, r.connections_wanted)
        };
        if let (Some(hours), true) = (self.campaign.spread_hours, self.campaign.fanout_done) {
            let per_second = (self.campaign.recipients.max(1) as f64) / (hours * 3600.0);
            let key = format!("campaign:{}", self.campaign.id);
            wait = wait.max(rate::reserve(db, &key, n, per_second, 1).await?);
        }
        Ok((wait, connections_wanted))
    }

    /// This campaign loop holds an identity connection above the campaigns' share (the slots
    /// priority mail takes first): while priority mail has work, it gives it up.
    pub(super) fn above_bulk_share(&self) -> bool {
        let share = rate::bulk_connections(self.identity.max_connections.max(1)) as i32;
        self.lease.identity_slot.is_some_and(|slot| slot >= share)
    }

    /// The spread campaign's pace, once its fan-out has counted the recipients.
    pub(super) async fn spread_rate(&mut self, hours: f64) -> Result<SpreadRate> {
        if !self.campaign.fanout_done {
            let fresh = store::get(&self.cx.db, self.tenant, self.campaign.id).await?;
            if fresh.status != CampaignStatus::Sending {
                return Ok(SpreadRate::NotSending);
            }
            self.campaign = fresh;
            if !self.campaign.fanout_done {
                return Ok(SpreadRate::FanoutRunning);
            }
        }
        Ok(SpreadRate::PerSecond(self.campaign.recipients.max(1) as f64 / (hours * 3600.0)))
    }
}
