-- Warm-up (issue 15 §4): a workspace's campaigns may reach this many readers per 24 hours
-- (counted from the campaigns started in that time). NULL is no limit: workspaces that exist
-- when this runs have a sending history; new ones start at the default until an operator raises
-- it (`herald admin set-limits --campaign-mail-per-day`).
ALTER TABLE tenants ADD COLUMN campaign_mail_per_day int CHECK (campaign_mail_per_day >= 0);
ALTER TABLE tenants ALTER COLUMN campaign_mail_per_day SET DEFAULT 10000;
-- The sum over the last 24 hours reads campaigns by start time.
CREATE INDEX campaigns_started_idx ON campaigns (tenant_id, started_at) WHERE started_at IS NOT NULL;
