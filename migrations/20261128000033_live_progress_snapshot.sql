-- Issue 30 §7: the progress of a campaign still sending was a count of its whole send log on
-- every page view and API read (722 ms at 1M rows, `herald bench scans`), per viewer. Views now
-- share one count per campaign, at most 2 s old, and one viewer recounts at a time
-- (`campaigns::progress::view`).
ALTER TABLE campaign_stats
    ADD COLUMN live_progress jsonb,
    ADD COLUMN live_at timestamptz,
    ADD COLUMN live_refresh_from timestamptz;
