//! The claim: queued rows of a still-sending campaign, taken with `FOR UPDATE SKIP LOCKED` under
//! the loop's fencing token, each reader checked again in the same transaction (active, still
//! confirmed where the campaign needs it, not suppressed, within the frequency cap), and the
//! same check made again before a message whose claim has grown old.

use super::*;

/// Why a claimed row's reader may not be mailed now (SQL, NULL when they may): the claim's test
/// and the one made again before a late message ([`RECHECK_ELIGIBILITY`]). `s` is the send row,
/// `r` its reader; the arguments are the placeholders of the tenant, of the campaign's lists, of
/// its automation, of the original it resends and whether machine opens count there, and a
/// condition true when the campaign's audience no longer holds the reader. Each is the condition that let the reader in, not a looser one: an automation's
/// step asks what the scheduler asked (`automation_unmailable`: on the trigger's own list, for
/// an automation a list starts), a campaign with segments asks its audience tree again, so
/// leaving the list that brought a reader stops mail still queued for them even while they
/// stay on another list.
macro_rules! not_eligible {
    ($tenant:literal, $lists:literal, $automation:literal, $original:literal, $machine_opens:literal, $left_audience:literal) => {
        concat!(
            "CASE WHEN ",
            $automation,
            "::uuid IS NOT NULL THEN automation_unmailable(",
            $tenant,
            ", s.reader_id, ",
            $automation,
            ")
                  WHEN r.status <> 'active' THEN 'reader ' || r.status
                  WHEN NOT EXISTS (SELECT 1 FROM subscriptions x WHERE x.reader_id = s.reader_id
                                   AND (",
            $lists,
            "::uuid[] IS NULL OR x.list_id = ANY(",
            $lists,
            ")) AND x.status = 'confirmed') THEN 'unsubscribed'
                  WHEN EXISTS (SELECT 1 FROM suppressions x WHERE x.tenant_id = ",
            $tenant,
            "
                               AND x.email_lower = lower(r.email)) THEN 'suppressed'
                  WHEN ",
            $original,
            "::uuid IS NOT NULL AND ",
            crate::campaigns::resend::engaged_with_original!($tenant, $original, $machine_opens),
            " THEN 'engaged with the original'
                  WHEN ",
            $left_audience,
            " THEN 'left the audience'
             END"
        )
    };
}

/// The lists a reader must still be confirmed on to be mailed: the campaign's, or — when
/// segments bring readers in (`None`) — any of the workspace's (the audience tree then decides
/// the rest). An automation's step campaign has no lists of its own: `automation_unmailable`
/// asks its trigger's.
pub(super) fn consent_lists(c: &Campaign) -> Option<&[crate::domain::ListId]> {
    if c.segment_ids.is_empty() && c.automation_id.is_none() { Some(&c.list_ids) } else { None }
}

/// How old a claim's checks of its readers may be when a message's data goes out: older, they
/// are made again for that message, so nobody is mailed more than about this long (plus one
/// SMTP transaction) after their unsubscribe or suppression committed.
pub(super) const RECHECK_ELIGIBILITY: Duration = Duration::from_secs(1);

/// What the frequency cap decided for a claim's readers (see `Sender::apply_cap`).
#[derive(Default)]
pub(super) struct CapDecision {
    /// Readers whose marks moved to this campaign, with the marks they had.
    moved: std::collections::HashMap<i64, (Option<DateTime<Utc>>, Option<Uuid>)>,
    /// Readers held by another campaign's row that is not final yet.
    deferred: HashSet<i64>,
    /// Readers another campaign has mailed within the cap.
    skipped: HashSet<i64>,
}

/// A reader's frequency-cap marks, as a claim finds them under the reader's row lock.
#[derive(sqlx::FromRow)]
pub(super) struct CapMark {
    reader: i64,
    at: Option<DateTime<Utc>>,
    campaign: Option<Uuid>,
    /// `at` is within the cap's window.
    within: bool,
    /// The status of the row of `campaign` for this reader, if it has one (`not sending` for a
    /// queued or held row of a campaign that is paused or ended).
    other: Option<String>,
}

impl Sender<'_> {
    pub(super) async fn claim(&mut self, n: i64) -> Result<Vec<Claimed>> {
        let token = self.lease.token;
        let (tenant, campaign) = (self.tenant, self.campaign.id);
        // A row expires for age only after a retry failed too (`attempts` counts the claims
        // that reached the wire): one soft failure early in a long send is never its last try.
        // The queue age counts from the row's first claim (`first_claimed_at`, set by `claim_messages` in `engine/sql/sending.sql`): waiting its turn
        // behind the rate, a spread or a pause costs none; only failing to get through does.
        let max_age_secs = self.max_queue_age_hours as f64 * 3600.0;
        let mut tx = self.cx.db.tenant_tx(tenant).await?;
        self.claimed_at = Instant::now();
        let mut rows: Vec<Claimed> = sqlx::query_as(concat!(
            "WITH lease AS (
                 SELECT token FROM leases WHERE token = $7 AND expires_at > clock_timestamp() FOR KEY SHARE
             ), picked AS (
                 SELECT s.id FROM sends s
                 WHERE s.campaign_id = $2 AND s.status = 'queued' AND s.next_attempt_at <= now() AND s.id > $6
                   AND EXISTS (SELECT 1 FROM campaigns c WHERE c.tenant_id = $1 AND c.id = $2 AND c.status = 'sending')
                   AND EXISTS (SELECT 1 FROM lease)
                 ORDER BY s.id LIMIT $3
                 FOR UPDATE SKIP LOCKED
             ), audience AS (
                 -- The tree the fan-out fixed (campaigns with segments), asked once for the
                 -- whole claim: which of its readers it still holds.
                 SELECT c.audience FROM campaigns c WHERE c.tenant_id = $1 AND c.id = $2 AND c.audience IS NOT NULL
             ), held AS (
                 SELECT h.id FROM audience a CROSS JOIN LATERAL segment_holds(
                     a.audience, ARRAY(SELECT s.reader_id FROM picked JOIN sends s ON s.id = picked.id)) AS h(id)
             )
             SELECT s.id, s.reader_id, s.email, r.name, r.attributes, s.attempts, s.feed, s.variant, s.entry,
                    s.message_reader_id,
                    CASE WHEN s.first_claimed_at < now() - make_interval(secs => $5) AND s.attempts >= 2 THEN 'expired'
                         ELSE ",
            not_eligible!(
                "$1",
                "$4",
                "$8",
                "$9",
                "$10",
                "(EXISTS (SELECT 1 FROM audience) AND NOT EXISTS (SELECT 1 FROM held h WHERE h.id = s.reader_id))"
            ),
            "
                    END AS skip
             FROM picked JOIN sends s ON s.id = picked.id JOIN readers r ON r.id = s.reader_id
             ORDER BY s.id"
        ))
        .bind(tenant)
        .bind(campaign)
        .bind(n)
        .bind(consent_lists(&self.campaign))
        .bind(max_age_secs)
        .bind(self.cursor)
        .bind(token)
        .bind(self.campaign.automation_id)
        .bind(self.campaign.resend_of)
        .bind(self.campaign.resend_machine_opens)
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(rows);
        }
        // The frequency cap, read at every claim (the author may change it mid-send), applied
        // atomically: row locks on readers serialise two campaigns claiming the same reader.
        // With no cap the readers are not touched at all: rewriting every reader row per
        // campaign (and their search indexes) would cost more than the send itself. The cap
        // therefore counts mail sent after it was switched on.
        self.frequency_cap_hours = sqlx::query_scalar("SELECT frequency_cap_hours FROM tenants WHERE id = $1")
            .bind(tenant)
            .fetch_one(&mut *tx)
            .await?;
        let candidates: Vec<i64> = rows.iter().filter(|r| r.skip.is_none()).map(|r| r.reader_id).collect();
        let cap = match self.frequency_cap_hours {
            Some(hours) if !candidates.is_empty() && !self.campaign.cap_exempt => {
                self.apply_cap(&mut tx, &candidates, hours).await?
            }
            _ => CapDecision::default(),
        };
        if !cap.deferred.is_empty() {
            // Another campaign holds these readers with a row that may still be sent or given
            // back: they wait for it (still queued, no attempt counted) instead of losing both.
            let ids: Vec<i64> = rows.iter().filter(|r| cap.deferred.contains(&r.reader_id)).map(|r| r.id).collect();
            sqlx::query(
                "UPDATE sends SET next_attempt_at = now() + make_interval(secs => $3),
                        reason = 'waiting for another campaign (frequency cap)', updated_at = now()
                 WHERE tenant_id = $1 AND id = ANY($2) AND status = 'queued'",
            )
            .bind(tenant)
            .bind(&ids)
            .bind(self.cx.config.retry_base.as_secs_f64())
            .execute(&mut *tx)
            .await?;
            rows.retain(|r| !cap.deferred.contains(&r.reader_id));
        }
        for row in rows.iter_mut() {
            if row.skip.is_none() && cap.skipped.contains(&row.reader_id) {
                row.skip = Some("frequency cap".into());
            }
        }
        let previous = cap.moved;
        let (skipped, claimed): (Vec<Claimed>, Vec<Claimed>) = rows.into_iter().partition(|r| r.skip.is_some());
        if !skipped.is_empty() {
            let ids: Vec<i64> = skipped.iter().map(|r| r.id).collect();
            let reasons: Vec<String> = skipped.iter().map(|r| r.skip.clone().unwrap_or_default()).collect();
            sqlx::query(
                "UPDATE sends s SET status = CASE WHEN x.reason = 'expired' THEN 'expired' ELSE 'skipped' END,
                        reason = x.reason, updated_at = now()
                 FROM unnest($2::bigint[], $3::text[]) AS x(id, reason) WHERE s.tenant_id = $1 AND s.id = x.id",
            )
            .bind(tenant)
            .bind(&ids)
            .bind(&reasons)
            .execute(&mut *tx)
            .await?;
        }
        if !claimed.is_empty() {
            let ids: Vec<i64> = claimed.iter().map(|r| r.id).collect();
            let prev_at: Vec<Option<DateTime<Utc>>> =
                claimed.iter().map(|r| previous.get(&r.reader_id).and_then(|p| p.0)).collect();
            let prev_campaign: Vec<Option<Uuid>> =
                claimed.iter().map(|r| previous.get(&r.reader_id).and_then(|p| p.1)).collect();
            let moved: Vec<bool> = claimed.iter().map(|r| previous.contains_key(&r.reader_id)).collect();
            // The first window of rows is armed by the claim itself (no row version of its own;
            // rows that end without SMTP are disarmed by the write that ends them).
            let window = self.cx.config.ack_batch.max(1);
            let arm: Vec<bool> = (0..ids.len()).map(|i| i < window).collect();
            // Claimed only under a lease that is live now: the statements above may have waited
            // (reader rows locked by an import, a saturated pool) past its end. The lease row is
            // held since the first statement (KEY SHARE), so the reaper cannot delete it between
            // this check and the commit; a lease that ran out meanwhile claims nothing.
            let claimed_now = sqlx::query(
                "UPDATE sends s SET status = 'sending', lease_token = $3, armed = x.arm, attempts = s.attempts + 1,
                        first_claimed_at = coalesce(s.first_claimed_at, now()),
                        cap_prev_at = CASE WHEN s.cap_moved THEN s.cap_prev_at ELSE x.prev_at END,
                        cap_prev_campaign = CASE WHEN s.cap_moved THEN s.cap_prev_campaign ELSE x.prev_campaign END,
                        cap_moved = s.cap_moved OR x.moved, updated_at = now()
                 FROM unnest($2::bigint[], $4::timestamptz[], $5::uuid[], $6::bool[], $7::bool[])
                      AS x(id, prev_at, prev_campaign, arm, moved)
                 WHERE s.tenant_id = $1 AND s.id = x.id
                   AND EXISTS (SELECT 1 FROM leases l WHERE l.token = $3 AND l.expires_at > clock_timestamp())",
            )
            .bind(tenant)
            .bind(&ids)
            .bind(token)
            .bind(&prev_at)
            .bind(&prev_campaign)
            .bind(&arm)
            .bind(&moved)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if claimed_now < ids.len() as u64 {
                // Nothing of this claim stands: the skips and the readers' cap marks roll back
                // with it, and the loop's renewal finds the lease gone.
                tx.rollback().await?;
                return Ok(Vec::new());
            }
            tx.commit().await?;
            self.armed.extend(ids.iter().take(window));
            return Ok(claimed);
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// Why `row`'s reader may not be mailed now (unsubscribed, suppressed, blocklisted or
    /// erased since the claim), or `None`.
    pub(super) async fn not_eligible_now(&self, row: &Claimed) -> Result<Option<String>> {
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let reason: Option<Option<String>> = sqlx::query_scalar(concat!(
            "SELECT ",
            not_eligible!(
                "$1",
                "$3",
                "$4",
                "$5",
                "$6",
                "EXISTS (SELECT 1 FROM campaigns c WHERE c.tenant_id = $1 AND c.id = s.campaign_id AND c.audience IS NOT NULL
                            AND NOT EXISTS (SELECT 1 FROM segment_holds(c.audience, ARRAY[s.reader_id])))"
            ),
            " FROM sends s JOIN readers r ON r.id = s.reader_id WHERE s.tenant_id = $1 AND s.id = $2"
        ))
        .bind(self.tenant)
        .bind(row.id)
        .bind(consent_lists(&self.campaign))
        .bind(self.campaign.automation_id)
        .bind(self.campaign.resend_of)
        .bind(self.campaign.resend_machine_opens)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(reason.unwrap_or_else(|| Some("reader erased".into())))
    }

    /// Readers of these rows (still this lease's, not sent) get back the frequency-cap marks
    /// they had before this campaign first claimed them, unless another campaign has moved
    /// them since. Whatever the cap is now: a row claimed under a cap gives back what it took.
    pub(super) async fn give_back_cap(&self, tx: &mut crate::infra::db::Tx, ids: &[i64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "WITH back AS (
                 UPDATE sends s SET cap_moved = false
                 WHERE s.tenant_id = $1 AND s.id = ANY($2) AND s.lease_token = $3 AND s.status = 'sending' AND s.cap_moved
                 RETURNING s.reader_id, s.cap_prev_at, s.cap_prev_campaign
             )
             UPDATE readers r SET last_campaign_at = b.cap_prev_at, last_campaign_id = b.cap_prev_campaign
             FROM back b WHERE r.tenant_id = $1 AND r.id = b.reader_id AND r.last_campaign_id = $4",
        )
        .bind(self.tenant)
        .bind(ids)
        .bind(self.lease.token)
        .bind(self.campaign.id)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Decides, under the readers' row locks, which candidates this claim may mail (their marks
    /// move to this campaign), which must wait and which are skipped for good. A reader mailed
    /// by another campaign within `hours` is skipped only once that campaign's row for them is
    /// `sent` (or gone); while it may still be sent or given back, the reader waits. A row of
    /// the other campaign that ended unsent no longer holds the reader.
    pub(super) async fn apply_cap(
        &self,
        tx: &mut crate::infra::db::Tx,
        readers: &[i64],
        hours: i32,
    ) -> Result<CapDecision> {
        let marks: Vec<CapMark> = sqlx::query_as(
            "SELECT r.id AS reader, r.last_campaign_at AS at, r.last_campaign_id AS campaign,
                    coalesce(r.last_campaign_at > now() - make_interval(hours => $3::int), false) AS within,
                    (SELECT CASE WHEN x.status IN ('queued', 'held') AND c.status <> 'sending' THEN 'not sending'
                                 ELSE x.status END
                     FROM sends x JOIN campaigns c ON c.tenant_id = x.tenant_id AND c.id = x.campaign_id
                     WHERE x.reader_id = r.id AND x.campaign_id = r.last_campaign_id
                     ORDER BY x.entry DESC LIMIT 1) AS other
             FROM readers r WHERE r.tenant_id = $1 AND r.id = ANY($2) ORDER BY r.id FOR NO KEY UPDATE OF r",
        )
        .bind(self.tenant)
        .bind(readers)
        .bind(hours)
        .fetch_all(&mut **tx)
        .await?;
        let mut decision = CapDecision::default();
        let mut moving = Vec::new();
        for CapMark { reader, at, campaign: last, within, other } in marks {
            let held_by_other = at.is_some() && last != Some(self.campaign.id.0) && within;
            match (held_by_other, other.as_deref()) {
                // A row of a campaign that is not sending now (paused, cancelled) holds nobody:
                // waiting for it could last for ever. Should it resume, its own claim finds
                // this campaign's row and waits or skips in turn.
                (false, _) | (true, Some("failed" | "skipped" | "cancelled" | "expired" | "not sending")) => {
                    if last != Some(self.campaign.id.0) {
                        decision.moved.insert(reader, (at, last));
                        moving.push(reader);
                    }
                }
                (true, Some("queued" | "sending")) => {
                    decision.deferred.insert(reader);
                }
                (true, _) => {
                    decision.skipped.insert(reader);
                }
            }
        }
        if !moving.is_empty() {
            sqlx::query(
                "UPDATE readers SET last_campaign_at = now(), last_campaign_id = $3 WHERE tenant_id = $1 AND id = ANY($2)",
            )
            .bind(self.tenant)
            .bind(&moving)
            .bind(self.campaign.id)
            .execute(&mut **tx)
            .await?;
        }
        Ok(decision)
    }

    /// For an edition fed from a URL: fetches the claimed readers' data, a few at a time. A row
    /// without data gets `skip = NO_DATA`; a failed fetch gets the reason to retry later.
    pub(super) async fn fetch_feeds(&self, rows: &mut [Claimed]) {
        let Some(client) = &self.feed_client else { return };
        let requests: Vec<(i64, String)> = rows
            .iter()
            .filter(|r| r.feed.is_none())
            .map(|r| (r.id, crate::campaigns::feed_fetch::url_for(&self.campaign.feed_url, &r.email, r.reader_id)))
            .collect();
        if requests.is_empty() {
            return;
        }
        let mut fetched = crate::campaigns::feed_fetch::fetch_all(client, &self.cx.config.egress, requests).await;
        for row in rows.iter_mut() {
            match fetched.remove(&row.id) {
                Some(crate::campaigns::feed_fetch::Fetched::Data(v)) => row.feed = Some(v),
                Some(crate::campaigns::feed_fetch::Fetched::NoData) => row.skip = Some(NO_DATA.into()),
                Some(crate::campaigns::feed_fetch::Fetched::Failed(why)) => row.skip = Some(why),
                None => {}
            }
        }
    }
}
