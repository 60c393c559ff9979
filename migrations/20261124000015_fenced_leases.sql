-- Send engine v2: fenced leases (see README, "The guarantee and its window").
--
-- Every sending loop (campaign delivery, transactional, a campaign's fan-out) holds one row in
-- `leases`. Its `token` is the fencing token: rows a loop claims carry it, and every write the
-- loop makes to them afterwards is conditional on it, so a loop whose lease was taken away can
-- no longer change rows someone else now owns. The owning process renews its lease every
-- half-second from a task of its own (one tiny UPDATE per loop, not one per message) and fences
-- itself when it cannot: it stops writing SMTP data before the lease can run out in Postgres.
-- The reaper deletes expired leases and gives their rows back to the queue.
CREATE TABLE leases (
    token       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- `kind@host:pid:nonce/loop`, for people reading the table; never used to decide anything.
    owner       text NOT NULL,
    -- A campaign's delivery slot (0 … connections − 1) or its fan-out (slot −1); both NULL for
    -- a transactional loop. One live lease per (campaign, slot): a campaign never has more
    -- delivery loops than its identity allows connections, however many jobs were enqueued.
    campaign_id uuid,
    slot        int,
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX leases_slot_idx ON leases (campaign_id, slot) WHERE slot IS NOT NULL;
CREATE INDEX leases_expiry_idx ON leases (expires_at);
-- No tenant data in here (ids only), and the supervisor reads it across workspaces.
GRANT SELECT, INSERT, UPDATE, DELETE ON leases TO herald_app;

-- `armed`: the row is, or is about to be, in an SMTP transaction under its lease. A worker arms
-- a row before it writes the message's data, in the same statement as the previous outcome (or
-- the claim), so arming costs no round trip of its own. When a lease is reaped only armed rows
-- count as *ambiguous* (they may have been delivered); the rest of a dead worker's batch was
-- never handed to SMTP and goes back silently. `lease_token` stays on a reaped row until the
-- next claim, so a 250 that arrives late can still be recorded if nobody has claimed the row.
ALTER TABLE sends
    ADD COLUMN lease_token bigint,
    ADD COLUMN armed boolean NOT NULL DEFAULT false,
    -- The reader's frequency-cap marks before this row's claim moved them, so a row that ends
    -- without being sent (no data, a render error, a pause or cancel) gives the reader back.
    ADD COLUMN cap_prev_at timestamptz,
    ADD COLUMN cap_prev_campaign uuid;
ALTER TABLE messages
    ADD COLUMN lease_token bigint,
    ADD COLUMN armed boolean NOT NULL DEFAULT false;
-- A worker name and an expiry per row are gone: ownership is the token, expiry the lease's.
DROP INDEX sends_lease_idx;
DROP INDEX messages_lease_idx;
ALTER TABLE sends DROP COLUMN lease_owner, DROP COLUMN lease_expires_at;
ALTER TABLE messages DROP COLUMN lease_owner, DROP COLUMN lease_expires_at;
CREATE INDEX sends_lease_token_idx ON sends (lease_token) WHERE status = 'sending';
-- Measured: right after a fan-out the statistics say `sends` is empty, and the claim took the
-- (campaign_id, status) index, fetched every queued row of the campaign and sorted them to take
-- 50 (≈ 200 ms a claim at 100k rows, most of Postgres's time). With `id` in the index every
-- candidate plan reads the queue in claim order and stops after the batch.
DROP INDEX sends_status_idx;
CREATE INDEX sends_status_idx ON sends (campaign_id, status, id);
CREATE INDEX messages_lease_token_idx ON messages (lease_token) WHERE status = 'sending';

-- A row of a cancelled campaign never goes back to the queue, whoever gives it back (a loop
-- releasing its batch, a retry, the reaper, "retry failed"): it ends `cancelled`. The campaign
-- row is read FOR SHARE, so a give-back racing a cancel waits for the cancel to commit and
-- sees it (cancel locks the campaign first, then cancels the queued rows).
CREATE FUNCTION sends_never_queued_in_cancelled() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF (SELECT c.status FROM campaigns c WHERE c.id = NEW.campaign_id FOR SHARE) = 'cancelled' THEN
        NEW.status := 'cancelled';
        NEW.armed := false;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER sends_never_queued_in_cancelled BEFORE UPDATE OF status ON sends
    FOR EACH ROW WHEN (NEW.status = 'queued' AND OLD.status <> 'queued')
    EXECUTE FUNCTION sends_never_queued_in_cancelled();

-- Renews the caller's leases and says, for each one still held, the status of its campaign
-- (a loop stops within a tick of a pause or cancel). A token missing from the answer is lost.
CREATE FUNCTION renew_leases(p_tokens bigint[], p_secs float8)
RETURNS TABLE (token bigint, campaign_status text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE leases l SET expires_at = now() + make_interval(secs => p_secs)
    WHERE l.token = ANY(p_tokens) AND l.expires_at > now()
    RETURNING l.token, (SELECT c.status FROM campaigns c WHERE c.id = l.campaign_id)
$$;

-- Expired leases end, and their rows go back to the queue (a cancelled campaign's rows end
-- `cancelled`, see the trigger). Only armed rows are counted as ambiguous.
DROP FUNCTION reap_expired_leases();
CREATE FUNCTION reap_expired_leases() RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH dead AS (
        DELETE FROM leases WHERE expires_at < now() RETURNING token
    ), sends_back AS (
        UPDATE sends s SET status = 'queued', ambiguous = s.ambiguous + s.armed::int, armed = false, updated_at = now()
        FROM dead WHERE s.lease_token = dead.token AND s.status = 'sending'
        RETURNING 1
    ), messages_back AS (
        UPDATE messages m SET status = 'queued', ambiguous = m.ambiguous + m.armed::int, armed = false, updated_at = now()
        FROM dead WHERE m.lease_token = dead.token AND m.status = 'sending'
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM sends_back) + (SELECT count(*) FROM messages_back)
$$;
DROP FUNCTION reap_expired_message_leases();
REVOKE ALL ON FUNCTION reap_expired_leases() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION reap_expired_leases() TO herald_app;
REVOKE ALL ON FUNCTION renew_leases(bigint[], float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION renew_leases(bigint[], float8) TO herald_app;

-- Sending campaigns that nobody works on: no live delivery lease, or a fan-out that is not done
-- and has no live lease. At most once per `every` per campaign (heartbeat_at is the last kick),
-- so only one supervisor re-enqueues the jobs. Replaces the heartbeat written by idle loops,
-- which hid a dead fan-out and made slow batches look stalled.
DROP FUNCTION claim_stalled_campaigns(interval);
CREATE FUNCTION claim_unattended_campaigns(every interval)
RETURNS TABLE (tenant_id uuid, campaign_id uuid, fanout_done boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE campaigns c SET heartbeat_at = now()
    WHERE c.status = 'sending' AND (c.heartbeat_at IS NULL OR c.heartbeat_at < now() - every)
      AND (NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot >= 0 AND l.expires_at > now())
           OR (NOT c.fanout_done
               AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot = -1 AND l.expires_at > now())))
    RETURNING c.tenant_id, c.id, c.fanout_done
$$;
REVOKE ALL ON FUNCTION claim_unattended_campaigns(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_unattended_campaigns(interval) TO herald_app;

-- Transactional claims carry the loop's lease token instead of a worker name and lease time.
DROP FUNCTION claim_messages(text, int, float8, timestamptz);
CREATE FUNCTION claim_messages(p_token bigint, p_limit int, p_now timestamptz)
RETURNS TABLE (id uuid, tenant_id uuid, attempts int, skip text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH picked AS (
        SELECT m.id FROM messages m
        WHERE m.status = 'queued' AND m.next_attempt_at <= p_now
          AND EXISTS (SELECT 1 FROM leases l WHERE l.token = p_token AND l.expires_at > now())
        ORDER BY m.next_attempt_at LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE messages m SET status = 'sending', lease_token = p_token, armed = false, attempts = m.attempts + 1,
                          updated_at = now()
    FROM picked WHERE m.id = picked.id
    RETURNING m.id, m.tenant_id, m.attempts,
        (SELECT 'suppressed (' || x.reason || ')' FROM suppressions x
         WHERE x.tenant_id = m.tenant_id AND x.email_lower = lower(m.to_email) AND x.reason <> 'unsubscribed_all' LIMIT 1)
$$;
REVOKE ALL ON FUNCTION claim_messages(bigint, int, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_messages(bigint, int, timestamptz) TO herald_app;

-- The 250s of many rows in one statement, each conditional on the lease token, and the next
-- rows armed in the same round trip. A row the reaper gave back but nobody claimed again still
-- carries the token: it is recorded as sent (the message did go out) and no longer counted as
-- ambiguous. A row claimed again by another loop is not touched: the second copy it may get is
-- already counted. Returns the ids recorded.
DROP FUNCTION record_sent(uuid, bigint, text, text);
CREATE FUNCTION record_sent(p_tenant uuid, p_token bigint, p_ids bigint[], p_replies text[],
                            p_provider_ids text[], p_at timestamptz[], p_arm bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant::text, true);
    IF cardinality(p_arm) > 0 THEN
        UPDATE sends SET armed = true
        WHERE tenant_id = p_tenant AND id = ANY(p_arm) AND lease_token = p_token AND status = 'sending' AND NOT armed;
    END IF;
    RETURN QUERY
    UPDATE sends s SET status = 'sent', sent_at = x.at, smtp_reply = x.reply, provider_id = x.provider_id,
                       reason = NULL, armed = false,
                       ambiguous = s.ambiguous - (s.status = 'queued' AND s.ambiguous > 0)::int,
                       updated_at = now()
    FROM unnest(p_ids, p_replies, p_provider_ids, p_at) AS x(id, reply, provider_id, at)
    WHERE s.tenant_id = p_tenant AND s.id = x.id AND s.lease_token = p_token AND s.status IN ('sending', 'queued')
    RETURNING s.id;
END $$;
