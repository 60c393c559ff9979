-- Backfills repeated for databases whose owner is not a superuser (every managed Postgres).
--
-- Migrations 10 and 13 backfilled tables they had just put under FORCE ROW LEVEL SECURITY. Run
-- by an ordinary owner with no workspace set, their SELECTs saw no rows, so they copied none:
-- list counts read 0 until the next change, growth charts started empty and campaigns that had
-- finished before 13 had no stats row. From this migration on, migrations run with the system
-- role's view of every workspace (see engine/src/infra/migrate.rs), so each backfill is made
-- again here; on a database where they did copy everything, this changes nothing.

-- Recounted from the subscriptions themselves; no subscription may change meanwhile, or a
-- trigger's increment could be overwritten by a count taken before it.
-- Waits at most 10 s for the lock (queued behind it, every subscription write would wait too);
-- a busy database fails the migration, and the next start tries again.
SET LOCAL lock_timeout = '10s';
LOCK TABLE subscriptions IN SHARE MODE;
INSERT INTO list_counts AS c (tenant_id, list_id, status, n)
SELECT tenant_id, list_id, status, count(*) FROM subscriptions GROUP BY 1, 2, 3
ON CONFLICT (list_id, status) DO UPDATE SET n = excluded.n WHERE c.n <> excluded.n;
UPDATE list_counts c SET n = 0
WHERE c.n <> 0 AND NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.list_id = c.list_id AND s.status = c.status);

-- Days that have a row were counted by the triggers since 13 (or by 13 itself): left alone.
INSERT INTO audience_daily (tenant_id, day, subscribes, unsubscribes)
SELECT tenant_id, day, sum(s), sum(u) FROM (
    SELECT tenant_id, (confirmed_at AT TIME ZONE 'UTC')::date AS day, 1 AS s, 0 AS u FROM subscriptions WHERE confirmed_at IS NOT NULL
    UNION ALL
    SELECT tenant_id, (unsubscribed_at AT TIME ZONE 'UTC')::date, 0, 1 FROM subscriptions WHERE unsubscribed_at IS NOT NULL
) x GROUP BY 1, 2
ON CONFLICT (tenant_id, day) DO NOTHING;

INSERT INTO campaign_stats (campaign_id, tenant_id) SELECT id, tenant_id FROM campaigns
ON CONFLICT (campaign_id) DO NOTHING;
