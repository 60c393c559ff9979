-- Issue 31 §2: limits per account, on top of the per-workspace ones. Workspaces were free and
-- unlimited, so a limit per workspace meant nothing: one account made 500 workspaces and sent
-- the daily invitations of each. Each workspace now counts against the account that made it
-- (`tenants.account_id`, the first owner for workspaces made before this migration); the
-- account's own limits are NULL for the installation's defaults (`AccountLimits` in the
-- engine), and an operator raises them with `herald admin set-limits --email`.
ALTER TABLE tenants ADD COLUMN account_id uuid REFERENCES users (id) ON DELETE SET NULL;
UPDATE tenants t SET account_id = (
    SELECT m.user_id FROM memberships m WHERE m.tenant_id = t.id AND m.role = 'owner'
    ORDER BY m.created_at, m.user_id LIMIT 1);
CREATE INDEX tenants_account_id_idx ON tenants (account_id);

ALTER TABLE users
    ADD COLUMN workspaces_max int CHECK (workspaces_max >= 0),
    ADD COLUMN transactional_per_day int CHECK (transactional_per_day >= 0),
    ADD COLUMN test_sends_per_day int CHECK (test_sends_per_day >= 0),
    ADD COLUMN system_mail_per_day int CHECK (system_mail_per_day >= 0);

-- What an account used, for the limits counted over 24 hours across its workspaces. Not a
-- workspace table: it is keyed by the account, and only the engine's claims touch it.
CREATE TABLE account_usage (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('transactional', 'test_send')),
    n          int NOT NULL CHECK (n > 0),
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX account_usage_account_idx ON account_usage (account_id, kind, at);

-- System mail (invites, confirmations) per account too: NULL when the mail may go (and it is
-- counted), else which limit refused it: 'recipient', 'workspace:<limit>' or 'account:<limit>'.
DROP FUNCTION claim_system_mail(uuid, text, int, int);
CREATE FUNCTION claim_system_mail(p_tenant uuid, p_recipient text, p_per_workspace int, p_per_recipient int,
                                  p_per_account int)
    RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    workspace_limit int := coalesce((SELECT system_mail_per_day FROM tenants WHERE id = p_tenant), p_per_workspace);
    account uuid := (SELECT account_id FROM tenants WHERE id = p_tenant);
    account_limit int := coalesce((SELECT system_mail_per_day FROM users WHERE id = account), p_per_account);
BEGIN
    -- One claim at a time per recipient, per workspace and per account: two requests cannot
    -- both take the last slot.
    PERFORM pg_advisory_xact_lock(hashtextextended('system_mail:' || p_recipient, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('system_mail:' || p_tenant::text, 0));
    IF account IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('system_mail_account:' || account::text, 0));
    END IF;
    IF (SELECT count(*) FROM system_mail_log
        WHERE recipient = p_recipient AND sent_at > now() - interval '1 day') >= p_per_recipient THEN
        RETURN 'recipient';
    END IF;
    IF (SELECT count(*) FROM system_mail_log
        WHERE tenant_id = p_tenant AND sent_at > now() - interval '1 day') >= workspace_limit THEN
        RETURN 'workspace:' || workspace_limit;
    END IF;
    IF account IS NOT NULL AND (SELECT count(*) FROM system_mail_log
        WHERE tenant_id IN (SELECT id FROM tenants WHERE account_id = account)
          AND sent_at > now() - interval '1 day') >= account_limit THEN
        RETURN 'account:' || account_limit;
    END IF;
    INSERT INTO system_mail_log (tenant_id, recipient) VALUES (p_tenant, p_recipient);
    -- Now and then, forget what no longer counts.
    IF random() < 0.01 THEN
        DELETE FROM system_mail_log WHERE sent_at < now() - interval '1 day';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION claim_system_mail(uuid, text, int, int, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_system_mail(uuid, text, int, int, int) TO herald_app;
