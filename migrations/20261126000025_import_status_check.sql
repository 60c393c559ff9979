-- imports.status was the one stored state without a CHECK constraint: any text was accepted,
-- and a typo in a status-changing UPDATE would have stranded an import that no page could read
-- back (ImportStatus would fail to decode it). The values are ImportStatus's; the test
-- `stored_states` holds every such enum against its column.
ALTER TABLE imports ADD CONSTRAINT imports_status_check
    CHECK (status IN ('uploading', 'uploaded', 'queued', 'running', 'done', 'failed'));
