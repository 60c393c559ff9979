-- The scheduler goes on when one automation fails, and an automation that keeps failing stops
-- on its own: `failures` counts its failed turns in a row (a success sets it back to 0), and at
-- a few the scheduler pauses it with a `pause_reason` in plain words (the database's own message
-- goes to the logs only). `advanced_at` is when the scheduler last gave it a turn: each
-- workspace gets a share of a tick, and the automations served least recently go first, so what
-- a share left due is taken up next time.
ALTER TABLE automations
    ADD COLUMN failures int NOT NULL DEFAULT 0 CHECK (failures >= 0),
    ADD COLUMN advanced_at timestamptz;
