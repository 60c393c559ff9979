-- An SES webhook remembers the SNS topic it first heard from (a subscription confirmation, or,
-- for webhooks confirmed before this migration, the first notification) and refuses every
-- other topic: Amazon signs all topics' messages alike, so a signature alone does not say the
-- message is about this workspace's mail. "New URL" in Settings rotates the token and forgets
-- the topic.
ALTER TABLE sending_identities ADD COLUMN webhook_sns_topic text;

DROP FUNCTION webhook_identity(text);
CREATE FUNCTION webhook_identity(p_token text)
    RETURNS TABLE (tenant_id uuid, identity_id uuid, provider text, secret_sealed text, sns_topic text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT i.tenant_id, i.id, i.webhook_provider, i.webhook_secret_sealed, i.webhook_sns_topic FROM sending_identities i
    WHERE i.webhook_token = p_token AND i.webhook_provider IS NOT NULL
$$;
REVOKE ALL ON FUNCTION webhook_identity(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_identity(text) TO herald_app;
