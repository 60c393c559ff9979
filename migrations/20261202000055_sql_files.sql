-- Functions, trigger functions and triggers have one current text each, in engine/sql/*.sql,
-- which `herald migrate` applies after the schema migrations (engine/src/infra/sql_files.rs).
-- This table holds the hash of each file as last applied, so a deploy that changes no file
-- replaces nothing (replacing a trigger locks its table).
CREATE TABLE applied_sql_files (
    name text PRIMARY KEY,
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
-- Written by the migrating owner alone; the runtime role reads it for /readyz (is every file of
-- this binary applied?).
REVOKE INSERT, UPDATE, DELETE ON applied_sql_files FROM herald_app;
