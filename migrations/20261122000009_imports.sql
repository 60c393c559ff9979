-- CSV imports. The uploaded file is kept in Postgres (in 1 MB chunks), not on one machine's
-- disk, so any `herald worker` on any machine can run the import job.
CREATE TABLE imports (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    file_name       text NOT NULL,
    size_bytes      bigint NOT NULL DEFAULT 0,
    -- uploading → uploaded → queued → running → done | failed
    status          text NOT NULL DEFAULT 'uploading',
    delimiter       text NOT NULL DEFAULT ',',
    -- One entry per column: "email", "name", "attributes.<key>" or "ignore".
    mapping         jsonb NOT NULL DEFAULT '[]',
    list_ids        uuid[] NOT NULL DEFAULT '{}',
    -- confirmed: the author attests consent; opt_in: readers get a confirmation email.
    mode            text NOT NULL DEFAULT 'confirmed' CHECK (mode IN ('confirmed', 'opt_in')),
    existing        text NOT NULL DEFAULT 'update' CHECK (existing IN ('update', 'skip')),
    rows_read       bigint NOT NULL DEFAULT 0,
    created         bigint NOT NULL DEFAULT 0,
    updated         bigint NOT NULL DEFAULT 0,
    skipped         bigint NOT NULL DEFAULT 0,
    invalid         bigint NOT NULL DEFAULT 0,
    bytes_done      bigint NOT NULL DEFAULT 0,
    -- The last CSV line whose batch is committed: a re-run resumes after it.
    checkpoint_line bigint NOT NULL DEFAULT 0,
    error           text,
    started_at      timestamptz,
    finished_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX imports_tenant_idx ON imports (tenant_id, created_at DESC);

CREATE TABLE import_chunks (
    import_id uuid NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    seq       integer NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (import_id, seq)
);

CREATE TABLE import_errors (
    import_id uuid NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    line      bigint NOT NULL,
    reason    text NOT NULL,
    raw       text NOT NULL DEFAULT '',
    PRIMARY KEY (import_id, line)
);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['imports', 'import_chunks', 'import_errors'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
    END LOOP;
END $$;
