-- Issue 30 §7: a row's queue age counts from when the engine first took it to send (its first
-- claim), not from the fan-out. The max age exists so that an outage never ends in a burst of
-- stale mail; counted from the fan-out it also expired the tail of every slow send (an identity
-- at 10/s gets 1.7M messages out in 48 h: the rest expired unsent). Waiting one's turn behind the
-- identity's rate, a spread, a warm-up or a pause now costs no age; failing to get through does.
-- NULL until the first claim (and again when a claim is given back unattempted, or the author
-- retries the failures).
ALTER TABLE sends ADD COLUMN first_claimed_at timestamptz;

-- Issue 30 §7: an idle delivery loop asks every 100–300 ms whether anything is due. The claim
-- walks `sends_claim_idx` in id order, and when every row is deferred (retries backing off,
-- readers waiting on the frequency cap) it walked all of them to find none. This index answers
-- "anything due?" in a few pages.
CREATE INDEX sends_due_idx ON sends (campaign_id, next_attempt_at) WHERE status = 'queued';
