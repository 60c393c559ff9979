-- Readers merged as one mailbox (the `canonical_addresses` data migration) keep answering to
-- their old id. Mail sent before a merge names the merged copy by id in every link Herald put
-- in it (unsubscribe, including RFC 8058 one-click, confirmation, web version, open pixel and
-- tracked links) and in its Message-ID (which complaint and bounce reports quote), and an
-- unsubscribe link must work for as long as the mail exists.

-- 1. merged id → the reader it became. A later merge of that reader re-points its aliases;
--    erasing it erases them.
CREATE TABLE reader_aliases (
    tenant_id uuid NOT NULL,
    -- The id of the reader merged away: no longer in `readers`, and never given again.
    merged_id bigint NOT NULL,
    reader_id bigint NOT NULL,
    PRIMARY KEY (tenant_id, merged_id),
    FOREIGN KEY (tenant_id, reader_id) REFERENCES readers (tenant_id, id) ON DELETE CASCADE
);
-- For the cascade when a reader is erased, and for a merge re-pointing a reader's aliases.
CREATE INDEX reader_aliases_reader_idx ON reader_aliases (tenant_id, reader_id);
ALTER TABLE reader_aliases ENABLE ROW LEVEL SECURITY;
ALTER TABLE reader_aliases FORCE ROW LEVEL SECURITY;
CREATE POLICY reader_aliases_tenant ON reader_aliases FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
-- Now, not after this run: the backfill below writes as the system role.
CREATE POLICY reader_aliases_system ON reader_aliases FOR ALL TO herald_system USING (true) WITH CHECK (true);
-- Written only by merges, which `herald migrate` runs; the app reads.
REVOKE INSERT, UPDATE, DELETE ON reader_aliases FROM herald_app;

-- 2. The reader id a send-log row's Message-ID names, when it is not `reader_id`. A merge moves
--    the merged copy's rows to the kept reader; one that was in flight (being sent, armed, or
--    counted ambiguous: it may have arrived) is re-sent with the Message-ID it may have arrived
--    under, so the receiver drops the second copy as a duplicate. No foreign key: the reader
--    it names was merged away.
ALTER TABLE sends ADD COLUMN message_reader_id bigint;

-- 3. The merges that ran before this migration. The merge wrote a `merged` entry in the kept
--    reader's consent ledger naming the merged copy ("Reader #<id> had the same mailbox written
--    another way and was merged into this reader."); a later merge moved the entry on with the
--    rest of the ledger, so the entry's reader is the one the id names today.
INSERT INTO reader_aliases (tenant_id, merged_id, reader_id)
SELECT DISTINCT ON (c.tenant_id, m.id) c.tenant_id, m.id, c.reader_id
FROM consent_events c
CROSS JOIN LATERAL (SELECT substring(c.wording FROM 'Reader #(\d+)')::bigint AS id) m
WHERE c.action = 'merged' AND c.reader_id IS NOT NULL AND m.id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM readers r WHERE r.id = m.id)
ORDER BY c.tenant_id, m.id, c.id DESC;

-- Their engagement: the merged copy's events were moved to the kept reader but its summary row
-- was deleted with it, so the kept reader could look unengaged to segments. Summed again from
-- the event log for these readers only (as the trigger `reader_engagement_apply` sums new
-- events), keeping the greater of each value: a summary that outlived events dropped from the
-- log does not go down, and nothing is counted twice.
INSERT INTO reader_engagement AS e (tenant_id, reader_id, last_open_at, last_click_at, opens, clicks, last_soft_bounce_at)
SELECT ev.tenant_id, ev.reader_id,
       max(ev.at) FILTER (WHERE ev.kind IN ('open', 'click') AND NOT ev.prefetch),
       max(ev.at) FILTER (WHERE ev.kind = 'click'),
       count(*) FILTER (WHERE ev.kind = 'open' AND NOT ev.prefetch),
       count(*) FILTER (WHERE ev.kind = 'click'),
       max(ev.at) FILTER (WHERE ev.kind = 'bounce_soft')
FROM (SELECT DISTINCT tenant_id, reader_id FROM reader_aliases) a
JOIN events ev ON ev.reader_id = a.reader_id AND ev.tenant_id = a.tenant_id
WHERE ev.kind IN ('open', 'click', 'bounce_soft')
GROUP BY 1, 2
ORDER BY 1, 2
ON CONFLICT (tenant_id, reader_id) DO UPDATE SET
    last_open_at = greatest(e.last_open_at, excluded.last_open_at),
    last_click_at = greatest(e.last_click_at, excluded.last_click_at),
    opens = greatest(e.opens, excluded.opens),
    clicks = greatest(e.clicks, excluded.clicks),
    last_soft_bounce_at = greatest(e.last_soft_bounce_at, excluded.last_soft_bounce_at);
