-- A/B tests with an automatic winner (issue 32).
--
-- A campaign's `ab_test` holds its other versions (B, C, D: subject, optionally from name and
-- body; the campaign's own content is version A), the test share, the metric and the window.
-- The fan-out writes every reader's send-log row at once: readers in the test share get a
-- version at random (`variant`, from a hash of the reader id seeded by `ab_seed`, so a re-run
-- chunk chooses the same), the rest are `held`. Choosing the winner is one update, under the
-- campaign's row lock, that sets `ab_winner` and turns every held row into a queued row of the
-- winning version: a crash before its commit leaves all of them held, after it none, so the
-- rest of the audience is neither sent twice nor stranded, and no reader ever has two versions
-- (one row per reader and campaign, as always).
ALTER TABLE campaigns
    ADD COLUMN ab_test jsonb,
    -- Set with the fan-out's first chunk.
    ADD COLUMN ab_seed bigint,
    -- When the window ends and the supervisor picks the winner by the metric.
    ADD COLUMN ab_decide_at timestamptz,
    ADD COLUMN ab_winner smallint,
    ADD COLUMN ab_decided_at timestamptz,
    ADD CONSTRAINT campaigns_ab_winner_check CHECK (ab_winner BETWEEN 0 AND 3);

ALTER TABLE sends
    -- The version this reader is sent (NULL: the campaign has no test, or the row is held).
    ADD COLUMN variant smallint,
    -- Written for the rest of the audience, not the test share: the results count only the others.
    ADD COLUMN ab_rest boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT sends_variant_check CHECK (variant BETWEEN 0 AND 3) NOT VALID;
-- `held`: written by the fan-out for the readers outside an A/B test's share, released with the
-- winning version. Delivery claims only `queued` rows.
ALTER TABLE sends DROP CONSTRAINT sends_status_check;
ALTER TABLE sends ADD CONSTRAINT sends_status_check
    CHECK (status IN ('queued', 'held', 'sending', 'sent', 'failed', 'skipped', 'cancelled', 'expired')) NOT VALID;
ALTER TABLE sends VALIDATE CONSTRAINT sends_status_check;
ALTER TABLE sends VALIDATE CONSTRAINT sends_variant_check;

CREATE INDEX campaigns_ab_due_idx ON campaigns (ab_decide_at) WHERE ab_winner IS NULL AND ab_decide_at IS NOT NULL;

-- The A/B tests whose window has ended without a winner, in every workspace: the supervisor
-- picks each one's winner in that workspace's own transaction (a sent one had nobody held: a
-- test of the whole audience, whose winner is only recorded).
CREATE FUNCTION due_ab_tests()
RETURNS TABLE (tenant_id uuid, campaign_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT c.tenant_id, c.id FROM campaigns c
    WHERE c.ab_winner IS NULL AND c.ab_decide_at IS NOT NULL AND c.ab_decide_at <= now()
      AND c.status IN ('sending', 'paused', 'sent')
$$;
REVOKE ALL ON FUNCTION due_ab_tests() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION due_ab_tests() TO herald_app;

-- As in migration 42, with held rows counted as waiting: a campaign whose test is sent and whose
-- rest waits for the winner has nothing to do until then (the winner's update queues the rows
-- and kicks its delivery; should that kick be lost, the rows are due and this finds them).
DROP FUNCTION claim_unattended_campaigns(interval);
CREATE FUNCTION claim_unattended_campaigns(every interval)
RETURNS TABLE (tenant_id uuid, campaign_id uuid, fanout_done boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE campaigns c SET heartbeat_at = now()
    WHERE c.status = 'sending' AND (c.heartbeat_at IS NULL OR c.heartbeat_at < now() - every)
      AND ((NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot >= 0 AND l.expires_at > now())
            AND (NOT c.fanout_done
                 OR EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status = 'queued' AND s.next_attempt_at <= now())
                 OR NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'held'))))
           OR (NOT c.fanout_done
               AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot = -1 AND l.expires_at > now())))
    RETURNING c.tenant_id, c.id, c.fanout_done
$$;
REVOKE ALL ON FUNCTION claim_unattended_campaigns(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_unattended_campaigns(interval) TO herald_app;
