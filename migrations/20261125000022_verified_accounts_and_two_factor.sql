-- Accounts (issue 17): a verified address, TOTP two-factor login, and a workspace rule that
-- every member uses it.

-- Set when the person opened the link mailed at sign-up. Accounts made before verification
-- existed proved nothing, but locking their owners out of sending would be worse: they count
-- as verified.
ALTER TABLE users ADD COLUMN email_verified_at timestamptz;
UPDATE users SET email_verified_at = created_at;

-- TOTP (RFC 6238). The secret is sealed at rest like SMTP credentials; `totp_pending` holds a
-- secret shown for enrolment until a code from it is confirmed.
ALTER TABLE users ADD COLUMN totp_secret_sealed text;
ALTER TABLE users ADD COLUMN totp_pending_sealed text;
ALTER TABLE users ADD COLUMN totp_enabled_at timestamptz;
-- The time step of the last accepted code: a code is accepted once, and never an older one.
ALTER TABLE users ADD COLUMN totp_last_step bigint NOT NULL DEFAULT 0;
-- Wrong codes in a row; at five the account's second step is locked for a few minutes.
ALTER TABLE users ADD COLUMN totp_failures int NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN totp_locked_until timestamptz;

-- Ten single-use codes for a lost phone, stored as SHA-256 of the code (each has 50 random bits,
-- so a slow hash would add nothing).
CREATE TABLE recovery_codes (
    user_id   uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash text NOT NULL,
    used_at   timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

ALTER TABLE tenants ADD COLUMN require_two_factor boolean NOT NULL DEFAULT false;
