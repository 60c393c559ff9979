-- An automation's "subscribe" step on a double opt-in list starts a pending subscription and
-- owes the reader the list's confirmation mail (`automation_advance` in
-- engine/sql/automations.sql). The step runs in SQL, where no mail can be signed or queued, so
-- it writes what it owes here, in the same transaction as the subscription; the scheduler mails
-- each row after the commit and deletes it (`audience::subscribe::send_owed_confirmations`). A
-- crash between the commit and the mail leaves the row, and the next pass mails it: the mail is
-- never lost. Nearly always empty.
-- The reader's key is the workspace's and the reader's together, so that the primary key serves
-- the cascade when a reader is erased.
CREATE TABLE confirmation_outbox (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    reader_id  bigint NOT NULL,
    list_id    uuid NOT NULL REFERENCES lists (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, reader_id, list_id),
    FOREIGN KEY (tenant_id, reader_id) REFERENCES readers (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX confirmation_outbox_list_idx ON confirmation_outbox (list_id);
ALTER TABLE confirmation_outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE confirmation_outbox FORCE ROW LEVEL SECURITY;
CREATE POLICY confirmation_outbox_tenant ON confirmation_outbox FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
