-- Erasing readers at scale. Deleting a reader sets `consent_events.reader_id` to NULL (the
-- ledger outlives the reader), which needs an index leading with reader_id: the one from 0008
-- led with tenant_id, so each deleted reader scanned the whole ledger, and deleting a workspace
-- of 1M readers never finished. Reader ids are unique across workspaces, so (reader_id, id)
-- serves the reader page's history as well, at no extra cost per imported row.
DROP INDEX consent_events_reader_idx;
CREATE INDEX consent_events_reader_idx ON consent_events (reader_id, id DESC);
