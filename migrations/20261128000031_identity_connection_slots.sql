-- Issue 30 §7: an identity's connection limit holds across campaigns and processes. A delivery
-- loop's lease held a slot of its campaign only, so k campaigns on one identity opened
-- k × max_connections connections to its server (which throttles or blocks past its limit). A
-- delivery lease now also holds one of the identity's slots (0 … max_connections − 1), keyed by
-- the identity's rate-bucket name; a loop that finds none free ends, and the supervisor starts
-- it again once one is.
ALTER TABLE leases ADD COLUMN identity_key text, ADD COLUMN identity_slot int;
CREATE UNIQUE INDEX leases_identity_slot_idx ON leases (identity_key, identity_slot) WHERE identity_slot IS NOT NULL;
