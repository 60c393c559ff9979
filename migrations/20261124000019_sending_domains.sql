-- Sending domains (issue 15 §3): a workspace proves it controls a domain with a DNS TXT token
-- before mail From that domain (or a subdomain of it) goes out through the server's default
-- identity. Herald generates the DKIM key pair; the private half is sealed like identity keys.
CREATE TABLE sending_domains (
    id                 uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    domain             text NOT NULL CHECK (domain ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$'),
    verification_token text NOT NULL,
    dkim_selector      text NOT NULL,
    dkim_key_sealed    text NOT NULL,
    -- base64 DER SubjectPublicKeyInfo: the p= of the DKIM record.
    dkim_public_key    text NOT NULL,
    -- Set by a DNS check that found the token, or by an operator (`herald admin verify-domain`).
    verified_at        timestamptz,
    verified_by        text CHECK (verified_by IN ('dns', 'operator')),
    -- Set while the last check found the DKIM record with this key: only then does Herald sign
    -- with it (a signature whose key is not published is worse than none).
    dkim_verified_at   timestamptz,
    checked_at         timestamptz,
    -- The last check, record by record, so the page shows it after a reload.
    last_check         jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, domain)
);
ALTER TABLE sending_domains ENABLE ROW LEVEL SECURITY;
ALTER TABLE sending_domains FORCE ROW LEVEL SECURITY;
CREATE POLICY sending_domains_tenant ON sending_domains FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());

-- An operator may let a workspace send From any address through its own SMTP identity (the
-- identity's server then decides what it accepts): `herald admin set-limits --own-identity-any-from`.
ALTER TABLE tenants ADD COLUMN own_identity_any_from boolean NOT NULL DEFAULT false;
