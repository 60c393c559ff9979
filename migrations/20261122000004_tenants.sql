-- A tenant is a workspace. Its row is visible inside its own tenant transaction and to its members.
CREATE TABLE tenants (
    id                 uuid PRIMARY KEY,
    name               text NOT NULL,
    slug               text NOT NULL UNIQUE,
    postal_address     text NOT NULL DEFAULT '',
    default_from_name  text NOT NULL DEFAULT '',
    default_from_email text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
