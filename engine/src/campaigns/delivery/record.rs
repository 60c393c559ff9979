//! Recording outcomes: acknowledgements in batches (`record_sent`, conditional on the token),
//! transient failures back in the queue with backoff, permanent ones failed with the reply,
//! skipped rows, and rows given back unsent when the fence closes or the loop stops.

use super::*;

impl Sender<'_> {
    /// The fence closed with `unsent` rows of the batch still ours (none of them is past the end
    /// of its data). Records what is known, gives the rest back, and ends the loop.
    pub(super) async fn on_fence_closed(&mut self, why: Closed, unsent: &[Claimed]) -> Result<()> {
        // Both writes are conditional on the token: harmless if the lease is gone.
        self.flush(&[]).await?;
        self.release(unsent).await?;
        match why {
            Closed::Stopped => Ok(()),
            Closed::LeaseLost => Err(Error::Unexpected(anyhow::anyhow!(
                "the delivery lease could not be renewed; stopped before the end of any message's data"
            ))),
        }
    }

    /// Records the pending 250s and arms `arm` (the next rows to be sent), in one statement
    /// conditional on the lease token, retried through connection failures until it lands.
    pub(super) async fn flush(&mut self, arm: &[i64]) -> Result<()> {
        let arm: Vec<i64> = arm.iter().copied().filter(|id| !self.armed.contains(id)).collect();
        if self.acks.is_empty() && arm.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = self.acks.iter().map(|a| a.id).collect();
        let replies: Vec<&str> = self.acks.iter().map(|a| a.reply.as_str()).collect();
        let provider_ids: Vec<Option<&str>> = self.acks.iter().map(|a| a.provider_id.as_deref()).collect();
        let at: Vec<DateTime<Utc>> = self.acks.iter().map(|a| a.at).collect();
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        let (ids, replies, provider_ids, at, arm_ref) = (&ids, &replies, &provider_ids, &at, &arm);
        let outcomes: Vec<(i64, String)> = persist("record 250s", || async move {
            Ok(sqlx::query_as("SELECT id, outcome FROM record_sent($1, $2, $3, $4, $5, $6, $7)")
                .bind(tenant)
                .bind(token)
                .bind(ids)
                .bind(replies)
                .bind(provider_ids)
                .bind(at)
                .bind(arm_ref)
                .fetch_all(db.pool())
                .await?)
        })
        .await?;
        let (armed, recorded): (Vec<_>, Vec<_>) = outcomes.into_iter().partition(|(_, outcome)| outcome == "armed");
        let recorded: HashSet<i64> = recorded.into_iter().map(|(id, _)| id).collect();
        for ack in self.acks.drain(..) {
            if recorded.contains(&ack.id) {
                self.tally.sent(&ack.email);
            } else {
                // Another loop claimed the row after this lease was lost; its copy is counted.
                tracing::warn!(send = ack.id, "a 250 for a row this loop no longer owns (counted as ambiguous)");
            }
        }
        // Only the rows Postgres armed: one it did not arm was given back (and perhaps claimed
        // by another loop) while this loop's clock still trusted its lease; it is not sent.
        self.armed.extend(armed.into_iter().map(|(id, _)| id));
        Ok(())
    }

    pub(super) async fn on_smtp_error(&mut self, row: &Claimed, e: SmtpError) -> Result<Next> {
        let cfg = self.cx.config.clone();
        let reason = truncate(&e.to_string(), 500);
        self.armed.remove(&row.id);
        // A hard bounce is the recipient's failure, not the server's: it counts toward the
        // bounce-rate guard, never toward the consecutive-failure guard.
        if e.kind != SmtpErrorKind::HardBounce {
            self.consecutive_failures += 1;
        }
        match e.kind {
            SmtpErrorKind::HardBounce => {
                self.bounces_since_check += 1;
                self.fail(row, &reason, true, false, false).await?
            }
            SmtpErrorKind::Permanent => self.fail(row, &reason, false, false, false).await?,
            SmtpErrorKind::Transient | SmtpErrorKind::Fenced if row.attempts >= cfg.max_attempts => {
                let why = format!("gave up after {} attempts: {reason}", row.attempts);
                self.fail(row, &why, false, e.maybe_delivered(), false).await?
            }
            SmtpErrorKind::Transient | SmtpErrorKind::Fenced => {
                self.retry_later(row, &reason, e.maybe_delivered()).await?
            }
        }
        if self.consecutive_failures >= cfg.pause_after_failures {
            let why = format!(
                "Paused after {} failed messages in a row. The last error: {reason}",
                self.consecutive_failures
            );
            auto_pause(self.cx, self.tenant, self.campaign.id, &why).await?;
            return Ok(Next::Stop);
        }
        Ok(Next::Continue)
    }

    /// Puts a row back in the queue with exponential backoff and jitter, or fails it once it used
    /// up its attempts. `maybe_delivered`: the data was complete and no reply came.
    pub(super) async fn retry_later(&mut self, row: &Claimed, reason: &str, maybe_delivered: bool) -> Result<()> {
        let cfg = self.cx.config.clone();
        if row.attempts >= cfg.max_attempts {
            let why = format!("gave up after {} attempts: {reason}", row.attempts);
            return self.fail(row, &why, false, maybe_delivered, false).await;
        }
        let exp = cfg.retry_base.as_secs_f64() * 2f64.powi((row.attempts - 1).clamp(0, 20));
        let jitter = rand::thread_rng().gen_range(0.5..1.5);
        let delay = (exp * jitter).min(cfg.retry_max.as_secs_f64());
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        persist("requeue a message", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            sqlx::query(
                "UPDATE sends SET status = 'queued', next_attempt_at = now() + make_interval(secs => $3), reason = $4,
                        ambiguous = ambiguous + $5, armed = false, updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 AND lease_token = $6 AND status = 'sending'",
            )
            .bind(tenant)
            .bind(row.id)
            .bind(delay)
            .bind(reason)
            .bind(i32::from(maybe_delivered))
            .bind(token)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Ends a claimed row without sending it (an edition's reader with no data); the reader's
    /// frequency-cap marks go back to what they were.
    pub(super) async fn skip_row(&self, row: &Claimed, reason: &str) -> Result<()> {
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        persist("skip a message", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            self.give_back_cap(&mut tx, &[row.id]).await?;
            sqlx::query(
                "UPDATE sends SET status = 'skipped', reason = $3, armed = false, updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 AND lease_token = $4 AND status = 'sending'",
            )
            .bind(tenant)
            .bind(row.id)
            .bind(reason)
            .bind(token)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Marks a row failed; a hard bounce also suppresses the address in this workspace and is
    /// recorded as a bounce event (the same path a provider's bounce webhook takes).
    /// `maybe_delivered`: the last attempt's data was complete and no reply came (ambiguous).
    /// `unsent`: it failed before SMTP, so the reader's frequency-cap marks go back.
    pub(super) async fn fail(
        &mut self,
        row: &Claimed,
        reason: &str,
        hard_bounce: bool,
        maybe_delivered: bool,
        unsent: bool,
    ) -> Result<()> {
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        let source = format!("campaign “{}”", self.campaign.name);
        let source = &source;
        let this = &*self;
        let changed = persist("fail a message", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            if unsent {
                this.give_back_cap(&mut tx, &[row.id]).await?;
            }
            // The row's reader as it is now, not as claimed: a merge of two copies of one
            // mailbox may have moved the row to the kept reader (and deleted the claimed one).
            let failed: Option<i64> = sqlx::query_scalar(
                "UPDATE sends SET status = 'failed', reason = $3, hard_bounce = $4, ambiguous = ambiguous + $5,
                        armed = false, updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 AND lease_token = $6 AND status IN ('sending', 'queued')
                 RETURNING reader_id",
            )
            .bind(tenant)
            .bind(row.id)
            .bind(reason)
            .bind(hard_bounce)
            .bind(i32::from(maybe_delivered))
            .bind(token)
            .fetch_optional(&mut *tx)
            .await?;
            let changed = u64::from(failed.is_some());
            if hard_bounce {
                crate::audience::suppressions::add_in(
                    &mut tx,
                    tenant,
                    &row.email,
                    crate::audience::suppressions::SuppressionReason::HardBounce,
                    source,
                )
                .await?;
                if let Some(reader) = failed {
                    crate::events::record_sync_bounce(&mut tx, tenant, this.campaign.id, reader, reason).await?;
                }
            }
            tx.commit().await?;
            Ok(changed)
        })
        .await?;
        if changed > 0 {
            self.tally.failed(&row.email, hard_bounce);
        }
        Ok(())
    }

    /// Gives rows back to the queue untouched (no attempt counted, frequency-cap marks back).
    pub(super) async fn release(&mut self, rows: &[Claimed]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        for id in &ids {
            self.armed.remove(id);
        }
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        let this = &*self;
        let ids = &ids;
        persist("release messages", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            this.give_back_cap(&mut tx, ids).await?;
            sqlx::query(
                "UPDATE sends SET status = 'queued', attempts = greatest(attempts - 1, 0), armed = false,
                        first_claimed_at = CASE WHEN attempts <= 1 THEN NULL ELSE first_claimed_at END, updated_at = now()
                 WHERE tenant_id = $1 AND id = ANY($2) AND lease_token = $3 AND status = 'sending'",
            )
            .bind(tenant)
            .bind(ids)
            .bind(token)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
