-- Issue 30 §6, one mailbox, one reader. From this version on every address is stored in its
-- canonical form (herald-types `Email`: NFC, the domain's A-label, the local part lowercased),
-- computed in Rust: Postgres's `lower()` under the C collation folds ASCII only and no SQL
-- function speaks UTS-46. Rows stored before are made canonical, and readers that turn out to be
-- one mailbox are merged, by the Rust data migration named here, which `herald migrate` runs in
-- the same transaction as this file (engine/src/infra/data_migrations.rs).
CREATE TABLE pending_data_migrations (
    name text PRIMARY KEY
);
-- The operator's business, not the app's.
REVOKE ALL ON pending_data_migrations FROM herald_app;
INSERT INTO pending_data_migrations (name) VALUES ('canonical_addresses');

-- Used by that merge when two copies of a mailbox disagree. A complaint or hard bounce protects
-- the sender's reputation and a manual entry is the author's decision; an unsubscribe from
-- everything is the weakest reason (it does not stop transactional mail).
CREATE FUNCTION suppression_strength(reason text) RETURNS int
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT CASE reason WHEN 'complaint' THEN 4 WHEN 'hard_bounce' THEN 3 WHEN 'manual' THEN 2 ELSE 1 END $$;
-- How far a send-log row got, best first: of two rows for one reader and campaign the merge
-- keeps the one that went furthest, so a sent copy is never followed by a second.
CREATE FUNCTION send_progress_rank(status text) RETURNS int
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT CASE status WHEN 'sent' THEN 0 WHEN 'sending' THEN 1 WHEN 'failed' THEN 2 WHEN 'expired' THEN 3
                             WHEN 'skipped' THEN 4 WHEN 'cancelled' THEN 5 ELSE 6 END $$;
