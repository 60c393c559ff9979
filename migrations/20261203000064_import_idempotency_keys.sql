-- An upload through the API (`POST /api/v1/imports`) may carry an `Idempotency-Key`. The file
-- streams in before the key can be judged (its fingerprint is the file's SHA-256), so the key is
-- kept on the import itself, set in the transaction that finishes the upload: a retried upload
-- with the same key and file answers the first import, and the copy it streamed is discarded.
ALTER TABLE imports
    ADD COLUMN idempotency_key text CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    ADD COLUMN request_sha256  text;
CREATE UNIQUE INDEX imports_idempotency_key_idx ON imports (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
