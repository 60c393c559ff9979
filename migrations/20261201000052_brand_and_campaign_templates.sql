-- A workspace's brand and its saved campaign templates (issue 34). The brand is copied into a
-- block document when a campaign starts (herald_types::Brand::dress), so nothing sent reads it.
CREATE TABLE workspace_brands (
    tenant_id   uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    accent      text NOT NULL CHECK (accent ~ '^#[0-9a-f]{6}$'),
    background  text NOT NULL CHECK (background ~ '^#[0-9a-f]{6}$'),
    text_colour text NOT NULL CHECK (text_colour ~ '^#[0-9a-f]{6}$'),
    font        text NOT NULL CHECK (font IN ('sans', 'serif', 'wide', 'mono')),
    logo_src    text NOT NULL DEFAULT '' CHECK (length(logo_src) <= 2000),
    logo_width  int NOT NULL CHECK (logo_width BETWEEN 16 AND 600),
    footer_text text NOT NULL DEFAULT '' CHECK (length(footer_text) <= 1000),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE workspace_brands ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_brands FORCE ROW LEVEL SECURITY;
CREATE POLICY workspace_brands_tenant ON workspace_brands FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());

CREATE TABLE campaign_templates (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          uuid NOT NULL,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    subject     text NOT NULL DEFAULT '',
    preheader   text NOT NULL DEFAULT '',
    body_format text NOT NULL CHECK (body_format IN ('markdown', 'html', 'blocks')),
    body        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
-- One name once per workspace, whatever its case.
CREATE UNIQUE INDEX campaign_templates_name ON campaign_templates (tenant_id, lower(name));
ALTER TABLE campaign_templates ENABLE ROW LEVEL SECURITY;
ALTER TABLE campaign_templates FORCE ROW LEVEL SECURITY;
CREATE POLICY campaign_templates_tenant ON campaign_templates FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
