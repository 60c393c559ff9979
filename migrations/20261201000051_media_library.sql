-- The media library (issue 34): images a workspace uploads for its campaigns, served at
-- /media/{tenant}/{hash}.{ext}. A row exists only once its bytes are stored (same transaction
-- for Postgres storage), and serving reads the row first: an unfinished upload is never served.
CREATE TABLE media (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL,
    -- SHA-256 of the stored (re-encoded) bytes, lowercase hex: the URL's file name.
    hash         text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
    content_type text NOT NULL CHECK (content_type IN ('image/png', 'image/jpeg', 'image/gif')),
    width        int NOT NULL CHECK (width > 0),
    height       int NOT NULL CHECK (height > 0),
    bytes        int NOT NULL CHECK (bytes > 0),
    file_name    text NOT NULL,
    created_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, hash)
);
ALTER TABLE media ENABLE ROW LEVEL SECURITY;
ALTER TABLE media FORCE ROW LEVEL SECURITY;
CREATE POLICY media_tenant ON media FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());

-- The bytes, when Postgres stores them (the default; an S3-compatible bucket is the other).
CREATE TABLE media_blobs (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    hash      text NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (tenant_id, hash)
);
-- Images are already compressed: storing them uncompressed saves the CPU of trying.
ALTER TABLE media_blobs ALTER COLUMN data SET STORAGE EXTERNAL;
ALTER TABLE media_blobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE media_blobs FORCE ROW LEVEL SECURITY;
CREATE POLICY media_blobs_tenant ON media_blobs FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());

-- Image storage per account as well as per workspace: every workspace the account made.
CREATE FUNCTION account_media_bytes(p_tenant uuid) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT coalesce(sum(m.bytes), 0)::bigint FROM media m
    WHERE m.tenant_id IN (SELECT t.id FROM tenants t
                          WHERE t.account_id = (SELECT x.account_id FROM tenants x WHERE x.id = p_tenant))
$$;
REVOKE ALL ON FUNCTION account_media_bytes(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION account_media_bytes(uuid) TO herald_app;
