//! Limits per account, on top of the per-workspace ones. Workspaces are free, so a
//! limit that only counts one workspace means nothing: an account makes another. Each workspace
//! counts against the account that made it (`tenants.account_id`); test sends count against the
//! member who sends them.
//!
//! An account starts with [`Defaults`]; an operator raises one account's limits with
//! `herald admin set-limits --email` (the NULL columns of `users` are the defaults). Usage over
//! the last 24 hours lives in `account_usage`, and a claim takes an advisory lock on the
//! account and kind so two requests cannot both take the last slot.

use chrono::{DateTime, Utc};

use crate::domain::{TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};

/// The installation's limits for an account an operator has not changed.
pub struct Defaults;

impl Defaults {
    /// Workspaces one account may own.
    pub const WORKSPACES: i32 = 3;
    /// Transactional messages on an account's first day; the allowance doubles every day the
    /// account ages, up to [`Self::TRANSACTIONAL_WARM`] (100, 200, 400 … 10,000 on day 8): a
    /// fresh sign-up cannot pour its first day's mail through the operator's relay.
    pub const TRANSACTIONAL_FIRST_DAY: i32 = 100;
    pub const TRANSACTIONAL_WARM: i32 = 10_000;
    /// Test emails a member may send per day, across every workspace.
    pub const TEST_SENDS_PER_DAY: i32 = 50;
}

/// What an account used, counted per 24 hours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    Transactional,
    TestSend,
}

impl Usage {
    fn as_str(self) -> &'static str {
        match self {
            Usage::Transactional => "transactional",
            Usage::TestSend => "test_send",
        }
    }
}

/// One account's limits as they apply now.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AccountLimits {
    pub workspaces: i32,
    pub transactional_per_day: i32,
    pub test_sends_per_day: i32,
    /// `None`: the installation's (`HERALD_SYSTEM_MAIL_PER_ACCOUNT`).
    pub system_mail_per_day: Option<i32>,
}

#[derive(sqlx::FromRow)]
struct Overrides {
    created_at: DateTime<Utc>,
    workspaces_max: Option<i32>,
    transactional_per_day: Option<i32>,
    test_sends_per_day: Option<i32>,
    system_mail_per_day: Option<i32>,
}

/// The transactional allowance of an account `created_at`, on `now`.
pub fn warming_transactional(created_at: DateTime<Utc>, now: DateTime<Utc>) -> i32 {
    let days = (now - created_at).num_days().clamp(0, 30) as u32;
    let warmed = i64::from(Defaults::TRANSACTIONAL_FIRST_DAY) << days;
    warmed.min(i64::from(Defaults::TRANSACTIONAL_WARM)) as i32
}

impl Overrides {
    fn limits(&self, now: DateTime<Utc>) -> AccountLimits {
        AccountLimits {
            workspaces: self.workspaces_max.unwrap_or(Defaults::WORKSPACES),
            transactional_per_day: self
                .transactional_per_day
                .unwrap_or_else(|| warming_transactional(self.created_at, now)),
            test_sends_per_day: self.test_sends_per_day.unwrap_or(Defaults::TEST_SENDS_PER_DAY),
            system_mail_per_day: self.system_mail_per_day,
        }
    }
}

const OVERRIDES: &str =
    "SELECT created_at, workspaces_max, transactional_per_day, test_sends_per_day, system_mail_per_day
     FROM users WHERE id = $1";

/// `account`'s limits now.
#[tracing::instrument(skip_all)]
pub async fn limits(db: &Db, account: UserId) -> Result<AccountLimits> {
    let row: Overrides =
        sqlx::query_as(OVERRIDES).bind(account).fetch_optional(db.pool()).await?.ok_or(Error::NotFound)?;
    Ok(row.limits(Utc::now()))
}

/// The account a workspace's usage counts against (`None` for a workspace whose maker is gone:
/// only the workspace's own limits apply to it).
pub(crate) async fn account_of(tx: &mut Tx, tenant: TenantId) -> Result<Option<UserId>> {
    Ok(sqlx::query_scalar("SELECT account_id FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_optional(&mut **tx)
        .await?
        .flatten())
}

/// Counts `n` of `usage` against `account` in `tx` (so it is undone when `tx` is), or refuses
/// with what to do and when to try again (429).
pub(crate) async fn claim(tx: &mut Tx, account: UserId, usage: Usage, n: i32) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('account_usage:' || $1::text || ':' || $2, 0))")
        .bind(account)
        .bind(usage.as_str())
        .execute(&mut **tx)
        .await?;
    let row: Overrides =
        sqlx::query_as(OVERRIDES).bind(account).fetch_optional(&mut **tx).await?.ok_or(Error::NotFound)?;
    let limits = row.limits(Utc::now());
    let limit = match usage {
        Usage::Transactional => limits.transactional_per_day,
        Usage::TestSend => limits.test_sends_per_day,
    };
    let (used, oldest): (i64, Option<DateTime<Utc>>) = sqlx::query_as(
        "SELECT coalesce(sum(n), 0)::bigint, min(at) FROM account_usage
         WHERE account_id = $1 AND kind = $2 AND at > now() - interval '1 day'",
    )
    .bind(account)
    .bind(usage.as_str())
    .fetch_one(&mut **tx)
    .await?;
    if used + i64::from(n) > i64::from(limit) {
        let retry_after_secs =
            oldest.map_or(3600, |at| (at + chrono::Duration::days(1) - Utc::now()).num_seconds().max(60) as u64);
        let what = match usage {
            Usage::Transactional => format!(
                "Your account may send {limit} transactional messages a day while it is new (the allowance grows \
                 every day, up to {}), and {used} went out in the last 24 hours.",
                Defaults::TRANSACTIONAL_WARM
            ),
            Usage::TestSend => {
                format!("Your account may send {limit} test emails a day, and {used} went out in the last 24 hours.")
            }
        };
        return Err(Error::Busy {
            message: format!("{what} Try again later, or ask the operator to raise your account's limit."),
            retry_after_secs,
        });
    }
    sqlx::query("INSERT INTO account_usage (account_id, kind, n) VALUES ($1, $2, $3)")
        .bind(account)
        .bind(usage.as_str())
        .bind(n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Before `account` makes another workspace: it may own [`AccountLimits::workspaces`].
pub(crate) async fn check_new_workspace(tx: &mut Tx, account: UserId) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('account_workspaces:' || $1::text, 0))")
        .bind(account)
        .execute(&mut **tx)
        .await?;
    let row: Overrides =
        sqlx::query_as(OVERRIDES).bind(account).fetch_optional(&mut **tx).await?.ok_or(Error::NotFound)?;
    let limit = row.limits(Utc::now()).workspaces;
    let owned: i64 = sqlx::query_scalar("SELECT count(*) FROM memberships WHERE user_id = $1 AND role = 'owner'")
        .bind(account)
        .fetch_one(&mut **tx)
        .await?;
    if owned >= i64::from(limit) {
        return Err(Error::Refused(format!(
            "Your account may own {limit} workspaces and owns {owned}. Delete one you no longer use, or ask the \
             operator to raise your account's limit."
        )));
    }
    Ok(())
}

/// A limit an operator sets on one account; `None` puts it back to the installation's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Workspaces,
    TransactionalPerDay,
    TestSendsPerDay,
    SystemMailPerDay,
}

/// `herald admin set-limits --email`.
#[tracing::instrument(skip_all)]
pub async fn set_limit(db: &Db, email: &str, limit: Limit, value: Option<i32>) -> Result<()> {
    if value.is_some_and(|n| n < 0) {
        return Err(Error::invalid("The limit cannot be negative."));
    }
    let column = match limit {
        Limit::Workspaces => "workspaces_max",
        Limit::TransactionalPerDay => "transactional_per_day",
        Limit::TestSendsPerDay => "test_sends_per_day",
        Limit::SystemMailPerDay => "system_mail_per_day",
    };
    let n = sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE users SET {column} = $2 WHERE lower(email) = lower($1)")))
        .bind(crate::domain::Email::key(email))
        .bind(value)
        .execute(db.pool())
        .await?
        .rows_affected();
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transactional_allowance_doubles_daily_up_to_the_warm_limit() {
        let born = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let on = |days: i64, hours: i64| {
            warming_transactional(born, born + chrono::Duration::days(days) + chrono::Duration::hours(hours))
        };
        assert_eq!(on(0, 0), 100);
        assert_eq!(on(0, 23), 100);
        assert_eq!(on(1, 0), 200);
        assert_eq!(on(6, 0), 6_400);
        assert_eq!(on(7, 0), 10_000);
        assert_eq!(on(400, 0), 10_000);
        assert_eq!(warming_transactional(born, born - chrono::Duration::days(3)), 100, "a clock behind the account");
    }
}

/// [`require_not_suspended`] in its own transaction: for mail that is not a campaign's (test
/// sends, connection tests, confirmations, invites), which must not go out from a suspended
/// account either.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn ensure_not_suspended(db: &crate::infra::db::Db, tenant: TenantId) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    require_not_suspended(&mut tx, tenant).await?;
    tx.commit().await?;
    Ok(())
}

/// Refuses to start or resume a send while the workspace is suspended.
pub(crate) async fn require_not_suspended(tx: &mut Tx, tenant: TenantId) -> Result<()> {
    let suspended: bool = sqlx::query_scalar("SELECT suspended_at IS NOT NULL FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_optional(&mut **tx)
        .await?
        .unwrap_or(false);
    if suspended {
        Err(Error::Refused(
            "This workspace's account is suspended by the operator: nothing can be sent until it is lifted.".into(),
        ))
    } else {
        Ok(())
    }
}

/// One account's sending over the last 24 hours and 7 days (`herald admin accounts`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct AccountActivity {
    pub account_id: UserId,
    pub email: String,
    pub suspended: bool,
    pub workspaces: i64,
    pub campaign_sent_1d: i64,
    pub campaign_sent_7d: i64,
    pub campaign_bounces_7d: i64,
    pub campaign_complaints_7d: i64,
    pub tx_sent_1d: i64,
    pub tx_sent_7d: i64,
    pub tx_bounces_7d: i64,
    pub tx_complaints_7d: i64,
}

impl AccountActivity {
    /// Bounces and complaints per message sent in the last 7 days, in percent.
    pub fn rates_7d(&self) -> (f64, f64) {
        let sent = (self.campaign_sent_7d + self.tx_sent_7d).max(1) as f64;
        let pct = |n: i64| n as f64 * 100.0 / sent;
        (pct(self.campaign_bounces_7d + self.tx_bounces_7d), pct(self.campaign_complaints_7d + self.tx_complaints_7d))
    }
}

/// The busiest `limit` accounts over the last 7 days.
#[tracing::instrument(skip_all)]
pub async fn activity(db: &Db, limit: i64) -> Result<Vec<AccountActivity>> {
    let limit = i32::try_from(limit.clamp(1, 10_000)).unwrap_or(50);
    Ok(sqlx::query_as("SELECT * FROM account_activity($1)").bind(limit).fetch_all(db.pool()).await?)
}

/// [`activity`] as a plain-text table for a terminal.
pub fn activity_table(rows: &[AccountActivity]) -> String {
    let mut out = format!(
        "{:<40} {:>3} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
        "account", "ws", "camp 24h", "camp 7d", "tx 24h", "tx 7d", "bounce%", "complain%"
    );
    for r in rows {
        let (bounces, complaints) = r.rates_7d();
        let name = if r.suspended { format!("{} (suspended)", r.email) } else { r.email.clone() };
        out.push_str(&format!(
            "{:<40} {:>3} {:>9} {:>9} {:>9} {:>9} {:>8.2} {:>9.3}\n",
            name, r.workspaces, r.campaign_sent_1d, r.campaign_sent_7d, r.tx_sent_1d, r.tx_sent_7d, bounces, complaints
        ));
    }
    out
}
