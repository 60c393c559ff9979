-- Issue 32: tags on readers. A tag is a workspace's name for a group of readers, added and
-- removed by hand, in bulk, by the API, from an import column and (later) by automations.
-- Keys lead with tenant_id, so a row can only name a tag and a reader of its own workspace
-- (the owner checks foreign keys without row security).
CREATE UNIQUE INDEX readers_tenant_id_id_key ON readers (tenant_id, id);
ALTER TABLE readers ADD CONSTRAINT readers_tenant_id_id_key UNIQUE USING INDEX readers_tenant_id_id_key;

CREATE TABLE tags (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         uuid NOT NULL,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 50),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
-- One tag per name per workspace, whatever its case.
CREATE UNIQUE INDEX tags_tenant_name_key ON tags (tenant_id, lower(name));

CREATE TABLE reader_tags (
    tenant_id uuid NOT NULL,
    tag_id    uuid NOT NULL,
    reader_id bigint NOT NULL,
    tagged_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, tag_id, reader_id),
    FOREIGN KEY (tenant_id, tag_id) REFERENCES tags (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, reader_id) REFERENCES readers (tenant_id, id) ON DELETE CASCADE
);
-- A reader's tags (the reader page, erasure's cascade).
CREATE INDEX reader_tags_reader_idx ON reader_tags (tenant_id, reader_id);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tags', 'reader_tags'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
    END LOOP;
END $$;
