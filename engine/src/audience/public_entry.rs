//! What stands between a public form (the hosted page, an embedded form) and the confirmation
//! mail each entry sends to a typed address: budgets shared by every process, and a proof of
//! work once a budget is spent.
//!
//! - **Per client** (its IPv4 address or IPv6 /64): form posts a minute. Past it the post is
//!   refused outright, as before, but counted in Postgres now, so N web processes allow what one
//!   does.
//! - **Per list and per workspace**: entries an hour. Past either, an entry must bring a solved
//!   ALTCHA challenge (Proof-of-Work v2, PBKDF2/SHA-256; the `altcha` crate creates and verifies
//!   it, the hosted page solves it with WebCrypto). A person's browser spends a second or two on
//!   one; a script typing thousands of strangers' addresses from many clients spends a
//!   CPU-second on each, and nothing it does empties the budget for the people it cannot stop.
//!
//! The budgets are GCRA buckets in `rate_buckets` (the send engine's, [`rate::try_take`]): a
//! refused entry takes nothing. A solution counts once: the signature of its challenge is kept
//! in `public_entry_solutions` until the challenge expires, in the statement that accepts it.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use rand::Rng as _;

use crate::domain::{ListId, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::infra::tokens::Signer;
use crate::sending::rate;

pub use altcha::Challenge;

/// The form field that carries a solution: base64 of `{"challenge": …, "solution": …}`, what
/// the ALTCHA widget posts under this name, so the widget could stand in for Herald's script.
pub const SOLUTION_FIELD: &str = "altcha";

/// How long a challenge may be solved and used.
pub const CHALLENGE_VALID_SECONDS: i64 = 600;

/// The key derivation every challenge uses: the one WebCrypto offers in every browser.
const ALGORITHM: &str = "PBKDF2/SHA-256";

/// Where a challenge names the workspace it was made for (a solution is good for that
/// workspace's form only).
const WORKSPACE_DATA: &str = "workspace";

/// The budgets and the work a challenge asks for (docs/operations.md, "Settings").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryLimits {
    /// Form posts per client per minute, all usable at once (`HERALD_PUBLIC_FORM_POSTS_PER_MINUTE`).
    pub posts_per_client_per_minute: u32,
    /// Entries per list per hour without a challenge, all usable at once
    /// (`HERALD_PUBLIC_ENTRIES_PER_LIST_PER_HOUR`).
    pub per_list_per_hour: u32,
    /// The same per workspace, across its lists (`HERALD_PUBLIC_ENTRIES_PER_WORKSPACE_PER_HOUR`).
    pub per_workspace_per_hour: u32,
    /// PBKDF2 iterations of one attempt (`HERALD_PUBLIC_ENTRY_CHALLENGE_COST`).
    pub challenge_cost: u32,
    /// Attempts a solver may need: each challenge's answer is drawn from the upper half of
    /// `1..=challenge_max_counter` (`HERALD_PUBLIC_ENTRY_CHALLENGE_MAX_COUNTER`).
    pub challenge_max_counter: u32,
}

impl Default for EntryLimits {
    fn default() -> Self {
        // A launch shared widely brings a few hundred sign-ups an hour to one workspace; past
        // that, the people still signing up wait a second or two for the check (about
        // 2,250 × 1,000 PBKDF2 iterations: 1–2 s in a browser, about a CPU-second natively).
        Self {
            posts_per_client_per_minute: 20,
            per_list_per_hour: 100,
            per_workspace_per_hour: 300,
            challenge_cost: 1_000,
            challenge_max_counter: 3_000,
        }
    }
}

/// Every bucket this module keeps starts with this (expired ones are cleared by prefix).
const KEY_PREFIX: &str = "public-entry:";

/// Counts one form post from `client` (its limiter key: the IPv4 address or the IPv6 /64);
/// `Some(wait)` when the client has used its posts up.
#[tracing::instrument(skip_all)]
pub async fn take_client(db: &Db, limits: &EntryLimits, client: &str) -> Result<Option<Duration>> {
    // A bucket whose arrival time has passed is the same as no bucket: clearing those now and
    // then keeps one row per client that posted recently, however many clients ever did.
    // Rows another statement holds are skipped (two clean-ups never wait on each other), and a
    // failed clean-up costs the post nothing.
    if rand::random::<f64>() < 0.01 {
        let cleared = sqlx::query(
            "DELETE FROM rate_buckets WHERE key IN (
                 SELECT key FROM rate_buckets WHERE key LIKE 'public-entry:%' AND tat < now()
                 LIMIT 10000 FOR UPDATE SKIP LOCKED)",
        )
        .execute(db.pool())
        .await;
        if let Err(e) = cleared {
            tracing::warn!(error = %e, "clearing spent public form buckets failed");
        }
    }
    let per_minute = limits.posts_per_client_per_minute.max(1);
    rate::try_take(db, &format!("{KEY_PREFIX}client:{client}"), 1, f64::from(per_minute) / 60.0, per_minute).await
}

/// Counts one entry against each of `lists` and the workspace; false (and a challenge is
/// needed) when one of them is spent. `lists` must be the workspace's public lists the entry
/// names, so a post cannot make buckets for ids of its own choosing. A list within its budget
/// keeps the entry it counted when another is spent: a refusal errs towards asking for the check.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn within_budget(db: &Db, limits: &EntryLimits, tenant: TenantId, lists: &[ListId]) -> Result<bool> {
    let hourly = |n: u32| (f64::from(n.max(1)) / 3600.0, n.max(1));
    let (per_second, burst) = hourly(limits.per_list_per_hour);
    for list in lists {
        if rate::try_take(db, &format!("{KEY_PREFIX}list:{list}"), 1, per_second, burst).await?.is_some() {
            return Ok(false);
        }
    }
    let (per_second, burst) = hourly(limits.per_workspace_per_hour);
    Ok(rate::try_take(db, &format!("{KEY_PREFIX}ws:{tenant}"), 1, per_second, burst).await?.is_none())
}

/// The two HMAC secrets of challenges, derived from the server key: one signs a challenge's
/// parameters, the other the key a solver must find (so a solution is checked without
/// deriving it again: a flood of wrong solutions costs Herald two HMACs each).
fn secrets(signer: &Signer) -> (String, String) {
    (
        hex::encode(signer.derive_key("public-entry-challenge")),
        hex::encode(signer.derive_key("public-entry-challenge-key")),
    )
}

/// A signed challenge for the form of workspace `workspace` (its slug), valid for
/// [`CHALLENGE_VALID_SECONDS`]. In the crate's deterministic mode: the answer is a counter
/// Herald drew, so the work is between half and all of `challenge_max_counter` attempts,
/// never a lucky first one.
pub fn new_challenge(signer: &Signer, limits: &EntryLimits, workspace: &str) -> Result<Challenge> {
    let (secret, key_secret) = secrets(signer);
    let max = limits.challenge_max_counter.max(2);
    let counter = rand::thread_rng().gen_range(max / 2..=max);
    let data = BTreeMap::from([(WORKSPACE_DATA.to_string(), serde_json::Value::String(workspace.to_string()))]);
    altcha::create_challenge(altcha::CreateChallengeOptions {
        algorithm: ALGORITHM.to_string(),
        cost: limits.challenge_cost.max(1),
        counter: Some(counter),
        data: Some(data),
        expires_at: Some(chrono::Utc::now().timestamp() + CHALLENGE_VALID_SECONDS),
        hmac_signature_secret: Some(secret),
        hmac_key_signature_secret: Some(key_secret),
        ..Default::default()
    })
    .map_err(|e| Error::Unexpected(anyhow::anyhow!("creating a public form challenge: {e}")))
}

/// The largest solution field taken: a challenge with its solution is well under 1 KB.
const MAX_SOLUTION_BYTES: usize = 4096;

/// The challenge and solution a form posted, or `None` when it is not one.
fn decode(raw: &str) -> Option<altcha::Payload> {
    let raw = raw.trim();
    if raw.is_empty() || raw.len() > MAX_SOLUTION_BYTES {
        return None;
    }
    let json = base64::engine::general_purpose::STANDARD
        .decode(raw)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(raw))
        .ok()?;
    serde_json::from_slice(&json).ok()
}

/// Accepts the solution a form posted for workspace `workspace` (its slug) and uses it up:
/// true when it solves a challenge Herald signed for that workspace, not expired and not
/// used before. Anything else (a forged, altered, expired, foreign or replayed solution, or
/// none at all) is false.
#[tracing::instrument(skip_all)]
pub async fn redeem(db: &Db, signer: &Signer, workspace: &str, solution: &str) -> Result<bool> {
    let Some(payload) = decode(solution) else {
        return Ok(false);
    };
    let params = &payload.challenge.parameters;
    let for_workspace = params.data.as_ref().and_then(|d| d.get(WORKSPACE_DATA)).and_then(|v| v.as_str());
    let (Some(signature), Some(expires_at)) = (payload.challenge.signature.as_deref(), params.expires_at) else {
        return Ok(false);
    };
    if for_workspace != Some(workspace) || params.algorithm != ALGORITHM || expires_at <= 0 {
        return Ok(false);
    }
    let (secret, key_secret) = secrets(signer);
    let options = altcha::VerifySolutionOptions {
        hmac_key_signature_secret: Some(key_secret),
        ..altcha::VerifySolutionOptions::new(&payload.challenge, &payload.solution, secret)
    };
    // The client wrote every byte of it: an error is a wrong solution, not Herald's fault.
    if !altcha::verify_solution(options).is_ok_and(|r| r.verified) {
        return Ok(false);
    }
    // Once: the first statement to record the signature wins, whichever process runs it. Some
    // expired rows go in the same statement (their challenges no longer verify anyway); rows
    // another statement holds are left for the next, so two never wait on each other.
    let first: Option<i32> = sqlx::query_scalar(
        "WITH expired AS (
             DELETE FROM public_entry_solutions WHERE signature IN (
                 SELECT signature FROM public_entry_solutions WHERE expires_at < now()
                 ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED))
         INSERT INTO public_entry_solutions (signature, expires_at) VALUES ($1, to_timestamp($2))
         ON CONFLICT (signature) DO NOTHING
         RETURNING 1",
    )
    .bind(signature)
    .bind(expires_at as f64)
    .fetch_optional(db.pool())
    .await?;
    Ok(first.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(challenge: &Challenge, solution: &altcha::Solution) -> String {
        let json = serde_json::json!({ "challenge": challenge, "solution": solution });
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, json.to_string())
    }

    #[test]
    fn a_challenge_is_solved_by_the_crates_solver_and_names_its_workspace() {
        let signer = Signer::new(b"test-secret-key-that-is-long-enough-0123456789");
        let limits = EntryLimits { challenge_cost: 10, challenge_max_counter: 40, ..EntryLimits::default() };
        let challenge = new_challenge(&signer, &limits, "garden").expect("a challenge");
        assert_eq!(challenge.parameters.algorithm, ALGORITHM);
        assert!(challenge.parameters.expires_at.is_some_and(|t| t > chrono::Utc::now().timestamp()));
        let solution = altcha::solve_challenge(altcha::SolveChallengeOptions::new(&challenge))
            .expect("solves")
            .expect("within the time limit");
        assert!((20..=40).contains(&solution.counter), "{}", solution.counter);
        let decoded = decode(&payload(&challenge, &solution)).expect("decodes");
        assert_eq!(decoded.solution.derived_key, solution.derived_key);
        let (secret, key_secret) = secrets(&signer);
        let verified = altcha::verify_solution(altcha::VerifySolutionOptions {
            hmac_key_signature_secret: Some(key_secret),
            ..altcha::VerifySolutionOptions::new(&decoded.challenge, &decoded.solution, secret)
        })
        .expect("verifies");
        assert!(verified.verified);
        // Another server key signed nothing Herald accepts.
        let (other, other_key) = secrets(&Signer::new(b"another-secret-key-that-is-long-enough-012345"));
        let forged = altcha::verify_solution(altcha::VerifySolutionOptions {
            hmac_key_signature_secret: Some(other_key),
            ..altcha::VerifySolutionOptions::new(&decoded.challenge, &decoded.solution, other)
        })
        .expect("verifies");
        assert!(!forged.verified);
        assert!(decode("not base64 at all!").is_none());
        assert!(decode(&"A".repeat(MAX_SOLUTION_BYTES + 4)).is_none());
    }
}
