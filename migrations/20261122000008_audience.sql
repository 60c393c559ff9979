-- Audience: lists, readers (subscribers), per-list subscriptions, the consent ledger and the
-- suppression list. Every table is tenant-owned and protected by a FORCEd RLS policy.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE lists (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        text NOT NULL,
    slug        text NOT NULL,
    description text NOT NULL DEFAULT '',
    opt_in      text NOT NULL DEFAULT 'double' CHECK (opt_in IN ('single', 'double')),
    visibility  text NOT NULL DEFAULT 'public' CHECK (visibility IN ('public', 'private')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, slug)
);

-- bigint ids: compact keys for keyset pagination and the join-heavy send paths at 1M+ readers.
CREATE TABLE readers (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email      text NOT NULL,
    name       text NOT NULL DEFAULT '',
    attributes jsonb NOT NULL DEFAULT '{}',
    status     text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'unsubscribed', 'blocklisted')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- One reader per address per workspace, whatever its case.
CREATE UNIQUE INDEX readers_tenant_email_key ON readers (tenant_id, lower(email));
CREATE INDEX readers_tenant_id_idx ON readers (tenant_id, id DESC);
CREATE INDEX readers_attributes_idx ON readers USING gin (attributes jsonb_path_ops);
CREATE INDEX readers_search_idx ON readers USING gin ((lower(email) || ' ' || lower(name)) gin_trgm_ops);

CREATE TABLE subscriptions (
    tenant_id            uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    list_id              uuid NOT NULL REFERENCES lists (id) ON DELETE CASCADE,
    reader_id            bigint NOT NULL REFERENCES readers (id) ON DELETE CASCADE,
    status               text NOT NULL CHECK (status IN ('unconfirmed', 'confirmed', 'unsubscribed')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    confirmed_at         timestamptz,
    unsubscribed_at      timestamptz,
    -- The latest opt-in mail: its nonce makes the confirmation link single-use, its time limits
    -- how often a form can make Herald mail one address.
    confirmation_nonce   uuid,
    confirmation_sent_at timestamptz,
    PRIMARY KEY (list_id, reader_id)
);
CREATE INDEX subscriptions_reader_idx ON subscriptions (reader_id);
CREATE INDEX subscriptions_list_status_idx ON subscriptions (list_id, status, reader_id);

-- Append-only evidence of consent (GDPR Art. 7): who agreed or withdrew, to what, when, how,
-- and the wording they saw.
CREATE TABLE consent_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    reader_id  bigint REFERENCES readers (id) ON DELETE SET NULL,
    list_id    uuid REFERENCES lists (id) ON DELETE SET NULL,
    action     text NOT NULL,
    source     text NOT NULL,
    ip         text,
    user_agent text,
    wording    text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX consent_events_reader_idx ON consent_events (tenant_id, reader_id, id DESC);

-- Addresses this workspace must never mail, whatever list they are on.
CREATE TABLE suppressions (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email_lower text NOT NULL,
    reason      text NOT NULL CHECK (reason IN ('hard_bounce', 'complaint', 'manual', 'unsubscribed_all')),
    source      text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, email_lower)
);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['lists', 'readers', 'subscriptions', 'consent_events', 'suppressions'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
    END LOOP;
END $$;

-- The ledger is never deleted from by the app; erasure only blanks the personal data in it.
REVOKE DELETE ON consent_events FROM herald_app;
