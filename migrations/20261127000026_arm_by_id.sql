-- record_sent armed the next rows with `id = ANY(p_arm) AND lease_token = p_token`, and the
-- planner answered it from the lease-token index: every entry of the loop's token, one per row
-- version it had claimed or armed since the last vacuum (6,001 scans reading 920,162 entries
-- for a send of 100k, `pg_stat_user_indexes`; 1.7 s of Postgres, 25 µs a row armed). The token
-- is now compared with IS NOT DISTINCT FROM (the same test for a token that is never NULL, but
-- no index answers it), so each id is a primary-key lookup, as for the 250s below, whose
-- `status IN (…)` keeps that partial index out already. Nothing else changes.
CREATE OR REPLACE FUNCTION record_sent(p_tenant uuid, p_token bigint, p_ids bigint[], p_replies text[],
                                       p_provider_ids text[], p_at timestamptz[], p_arm bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant::text, true);
    IF cardinality(p_arm) > 0 THEN
        UPDATE sends s SET armed = true
        FROM unnest(p_arm) AS x(id)
        WHERE s.tenant_id = p_tenant AND s.id = x.id AND s.lease_token IS NOT DISTINCT FROM p_token
          AND s.status = 'sending' AND NOT s.armed;
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
