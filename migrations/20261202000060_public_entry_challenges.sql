-- A public form past its budget takes an entry only with a solved proof-of-work challenge
-- (engine/src/audience/public_entry.rs), and each solution only once: the signature of its
-- challenge is kept here until the challenge expires, inserted by the statement that accepts the
-- solution, so two processes (or two posts racing) cannot both use it. The budgets themselves
-- are buckets in `rate_buckets`. Not a workspace table: a signature is an HMAC that names no
-- workspace and no person, and whichever process accepts the next solution clears the expired.
CREATE TABLE public_entry_solutions (
    signature  text PRIMARY KEY CHECK (length(signature) <= 256),
    expires_at timestamptz NOT NULL
);
CREATE INDEX public_entry_solutions_expiry_idx ON public_entry_solutions (expires_at);
