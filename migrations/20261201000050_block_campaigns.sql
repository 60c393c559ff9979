-- Block campaigns (issue 34): a campaign's body may be a block document (JSON, read by
-- herald_types::BlockDocument), rendered to email HTML through MJML once per campaign.
ALTER TABLE campaigns DROP CONSTRAINT campaigns_body_format_check;
ALTER TABLE campaigns ADD CONSTRAINT campaigns_body_format_check
    CHECK (body_format IN ('markdown', 'html', 'blocks'));
