-- Send approval (issue 17): under this workspace rule an author writes a campaign and asks for
-- it to go out; an owner or admin approves (it is then sent or scheduled as asked) or turns it
-- down. One request per campaign: a new one replaces a decided one, and editing the campaign
-- withdraws a pending one (what was approved is what goes out).
ALTER TABLE tenants ADD COLUMN require_send_approval boolean NOT NULL DEFAULT false;

CREATE TABLE send_approvals (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    campaign_id  uuid PRIMARY KEY REFERENCES campaigns (id) ON DELETE CASCADE,
    requested_by uuid REFERENCES users (id) ON DELETE SET NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    -- NULL: send as soon as approved; otherwise schedule for then.
    send_at      timestamptz,
    timezone     text NOT NULL DEFAULT '',
    decided_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    decided_at   timestamptz,
    decision     text CHECK (decision IN ('approved', 'rejected')),
    note         text NOT NULL DEFAULT '',
    CHECK ((decided_at IS NULL) = (decision IS NULL))
);
CREATE INDEX send_approvals_pending_idx ON send_approvals (tenant_id) WHERE decided_at IS NULL;
ALTER TABLE send_approvals ENABLE ROW LEVEL SECURITY;
ALTER TABLE send_approvals FORCE ROW LEVEL SECURITY;
CREATE POLICY send_approvals_tenant ON send_approvals FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
