-- Issue 32: custom fields. A workspace's typed reader fields; the values stay in
-- `readers.attributes` under the field's key (typed as JSON), so templates, filters, exports and
-- the API keep reading them where they were.
CREATE TABLE fields (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key        text NOT NULL CHECK (key ~ '^[a-z][a-z0-9_]{0,39}$'),
    label      text NOT NULL CHECK (length(label) BETWEEN 1 AND 60),
    kind       text NOT NULL CHECK (kind IN ('text', 'number', 'date', 'yes_no', 'choice')),
    choices    jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(choices) = 'array'),
    position   int NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);
ALTER TABLE fields ENABLE ROW LEVEL SECURITY;
ALTER TABLE fields FORCE ROW LEVEL SECURITY;
CREATE POLICY fields_tenant ON fields FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
-- The system role's policy now, not after this run (`migrate::grant_system_role` adds it to new
-- tables only once the migrations are done): the backfill below writes as that role.
CREATE POLICY fields_system ON fields FOR ALL TO herald_system USING (true) WITH CHECK (true);

-- Existing attributes become fields, their type guessed from every value they hold: all numbers
-- → number, all booleans → yes/no, all strings that are ISO days → date, anything else → text.
-- Nothing is rewritten: the values stay as they are under the same key. Keys that cannot be
-- written in a merge tag (`reader.fields.<key>`) stay plain attributes, shown on the reader page
-- as "other attributes". Run while the owner holds the system role's view of every workspace.
INSERT INTO fields (tenant_id, key, label, kind, position)
SELECT tenant_id, key,
       left(initcap(replace(key, '_', ' ')), 60),
       CASE WHEN bool_and(jsonb_typeof(value) = 'number') THEN 'number'
            WHEN bool_and(jsonb_typeof(value) = 'boolean') THEN 'yes_no'
            WHEN bool_and(jsonb_typeof(value) = 'string' AND value #>> '{}' ~ '^\d{4}-\d{2}-\d{2}$') THEN 'date'
            ELSE 'text' END,
       (row_number() OVER (PARTITION BY tenant_id ORDER BY key))::int
FROM readers, jsonb_each(attributes)
WHERE key ~ '^[a-z][a-z0-9_]{0,39}$' AND jsonb_typeof(value) <> 'null'
GROUP BY tenant_id, key;
