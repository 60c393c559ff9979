-- A delivery loop with nothing due now gives its connection slot back after a few seconds
-- (`RELEASE_IDLE_SLOT_AFTER`): the slots belong to the sending identity, shared by every
-- campaign on it — for the default server, by every workspace — and a send whose remaining rows
-- were all deferred (retries backing off, readers held by the frequency cap) held them for as
-- long as it waited, so one workspace could stop all the others' mail (found with issue 32's
-- browser test, which sent after the crawler had seeded a campaign deferred for a year).
-- So the supervisor starts loops only for a campaign with something to do: a fan-out still to
-- finish, a queued row due now, or no queued row left (the loop then marks it sent). A campaign
-- whose every queued row waits is picked up again when the first one comes due.
DROP FUNCTION claim_unattended_campaigns(interval);
CREATE FUNCTION claim_unattended_campaigns(every interval)
RETURNS TABLE (tenant_id uuid, campaign_id uuid, fanout_done boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE campaigns c SET heartbeat_at = now()
    WHERE c.status = 'sending' AND (c.heartbeat_at IS NULL OR c.heartbeat_at < now() - every)
      AND ((NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot >= 0 AND l.expires_at > now())
            AND (NOT c.fanout_done
                 OR EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status = 'queued' AND s.next_attempt_at <= now())
                 OR NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status = 'queued')))
           OR (NOT c.fanout_done
               AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot = -1 AND l.expires_at > now())))
    RETURNING c.tenant_id, c.id, c.fanout_done
$$;
REVOKE ALL ON FUNCTION claim_unattended_campaigns(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_unattended_campaigns(interval) TO herald_app;
