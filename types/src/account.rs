//! A person's own account, as the account page shows it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One place the person is logged in. The account page lists them; ending one logs it out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginSession {
    /// Stands for the session without being its id (which would log in whoever read it).
    pub handle: String,
    /// "Firefox on Linux", from the User-Agent.
    pub device: String,
    pub ip: String,
    pub started_at: Option<DateTime<Utc>>,
    pub last_seen: Option<DateTime<Utc>>,
    /// The session this request came in on.
    pub current: bool,
}

/// Whether two-factor login is on, since when, and how many recovery codes are unused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwoFactorStatus {
    pub enabled_at: Option<DateTime<Utc>>,
    pub recovery_codes_left: i64,
}

/// What the account page shows to enrol: scan the QR code, or type the secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwoFactorEnrolment {
    pub secret_base32: String,
    pub otpauth_url: String,
    /// An `<svg>` element, made on the server from the URL (no network, no script).
    pub qr_svg: String,
}
