-- Mail Herald sends on a workspace's behalf (invites, opt-in confirmations, those an import
-- sends) is counted per workspace and per recipient across every workspace, over the last 24
-- hours, so that neither a workspace nor a stranger rotating workspaces, lists and addresses can
-- aim Herald at someone's inbox. The log is not the runtime role's to read or write: only
-- `claim_system_mail` touches it. An operator raises one workspace's limit with
-- `herald admin set-limits` (`tenants.system_mail_per_day`).
ALTER TABLE tenants ADD COLUMN system_mail_per_day int CHECK (system_mail_per_day >= 0);

CREATE TABLE system_mail_log (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- No foreign key: a deleted workspace's mail still counts against its recipients.
    tenant_id uuid NOT NULL,
    recipient text NOT NULL,
    sent_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX system_mail_log_tenant_idx ON system_mail_log (tenant_id, sent_at);
CREATE INDEX system_mail_log_recipient_idx ON system_mail_log (recipient, sent_at);
REVOKE ALL ON system_mail_log FROM herald_app;
-- Row-level security like every table with a tenant_id: the runtime role has no policy (and no
-- grant), so it sees nothing; the owner, which `claim_system_mail` runs as, counts across
-- workspaces because counting across workspaces is the point.
ALTER TABLE system_mail_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE system_mail_log FORCE ROW LEVEL SECURITY;
CREATE POLICY system_mail_log_owner ON system_mail_log TO CURRENT_USER USING (true) WITH CHECK (true);

-- NULL when the mail may go (and it is counted), else which limit refused it:
-- 'recipient' or 'workspace:<limit>'.
CREATE FUNCTION claim_system_mail(p_tenant uuid, p_recipient text, p_per_workspace int, p_per_recipient int)
    RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    workspace_limit int := coalesce((SELECT system_mail_per_day FROM tenants WHERE id = p_tenant), p_per_workspace);
BEGIN
    -- One claim at a time per recipient and per workspace: two requests cannot both take the
    -- last slot.
    PERFORM pg_advisory_xact_lock(hashtextextended('system_mail:' || p_recipient, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('system_mail:' || p_tenant::text, 0));
    IF (SELECT count(*) FROM system_mail_log
        WHERE recipient = p_recipient AND sent_at > now() - interval '1 day') >= p_per_recipient THEN
        RETURN 'recipient';
    END IF;
    IF (SELECT count(*) FROM system_mail_log
        WHERE tenant_id = p_tenant AND sent_at > now() - interval '1 day') >= workspace_limit THEN
        RETURN 'workspace:' || workspace_limit;
    END IF;
    INSERT INTO system_mail_log (tenant_id, recipient) VALUES (p_tenant, p_recipient);
    -- Now and then, forget what no longer counts.
    IF random() < 0.01 THEN
        DELETE FROM system_mail_log WHERE sent_at < now() - interval '1 day';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION claim_system_mail(uuid, text, int, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_system_mail(uuid, text, int, int) TO herald_app;
