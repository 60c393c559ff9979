-- Issue 31 §6: a campaign's (and a workspace's transactional) sending identity was checked only
-- by a foreign key on the identity's id, which the owner checks without row security: a
-- workspace could name another workspace's identity, the runtime then found no such identity
-- under its own tenant, fell back to the operator's relay, and the own-identity exemption had
-- already skipped the verified-domain check for its From. The keys now lead with tenant_id, so
-- only an identity of the same workspace can be named.
CREATE UNIQUE INDEX sending_identities_tenant_id_id_key ON sending_identities (tenant_id, id);
ALTER TABLE sending_identities ADD CONSTRAINT sending_identities_tenant_id_id_key
    UNIQUE USING INDEX sending_identities_tenant_id_id_key;

-- Rows that named another workspace's identity lose it (they were sending through the default
-- relay anyway).
UPDATE campaigns c SET identity_id = NULL
WHERE identity_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM sending_identities i WHERE i.tenant_id = c.tenant_id AND i.id = c.identity_id);
UPDATE tenants t SET transactional_identity_id = NULL
WHERE transactional_identity_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM sending_identities i WHERE i.tenant_id = t.id AND i.id = t.transactional_identity_id);

ALTER TABLE campaigns DROP CONSTRAINT campaigns_identity_id_fkey;
ALTER TABLE campaigns ADD CONSTRAINT campaigns_identity_id_fkey FOREIGN KEY (tenant_id, identity_id)
    REFERENCES sending_identities (tenant_id, id) ON DELETE SET NULL (identity_id);
ALTER TABLE tenants DROP CONSTRAINT tenants_transactional_identity_id_fkey;
ALTER TABLE tenants ADD CONSTRAINT tenants_transactional_identity_id_fkey FOREIGN KEY (id, transactional_identity_id)
    REFERENCES sending_identities (tenant_id, id) ON DELETE SET NULL (transactional_identity_id);
