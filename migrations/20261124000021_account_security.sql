-- Accounts (issue 17): a password reset link carries the generation it was issued under, so a
-- newer request supersedes it; the password-hash fingerprint it also carries makes it single-use.
ALTER TABLE users ADD COLUMN reset_generation int NOT NULL DEFAULT 0;
-- A user's sessions, for the sessions page and for ending them on a password change or reset.
CREATE INDEX sessions_user_idx ON sessions ((data ->> 'user_id'));
