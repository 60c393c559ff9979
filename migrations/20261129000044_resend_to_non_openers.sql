-- Resend to non-openers (issue 32): a draft made from a sent campaign whose audience is the
-- readers the original reached who have not opened, clicked, unsubscribed, bounced or complained
-- since (`resend_machine_opens`: a privacy proxy's open counts as an open). The fan-out walks the
-- original's sent rows by their ids (`sends_status_idx`), not the workspace's readers.
CREATE UNIQUE INDEX campaigns_tenant_id_id_key ON campaigns (tenant_id, id);
ALTER TABLE campaigns
    ADD COLUMN resend_of uuid,
    ADD COLUMN resend_machine_opens boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT campaigns_resend_of_fkey FOREIGN KEY (tenant_id, resend_of)
        REFERENCES campaigns (tenant_id, id) ON DELETE SET NULL (resend_of);
-- The original's page lists its resends.
CREATE INDEX campaigns_resend_of_idx ON campaigns (tenant_id, resend_of) WHERE resend_of IS NOT NULL;
