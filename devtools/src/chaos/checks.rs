//! The checks, once everything has settled: the whole queue against what the sink received
//! ([`check`]), and each rule the scene's automations and sends prove on their own.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use herald_engine::CampaignId;
use herald_types::AutomationId;
use sqlx::PgPool;
use uuid::Uuid;

use super::RoundReport;
use super::automations::Signup;
use super::scene::{Scene, SceneCampaign};
use crate::smtp_sink::MailSink;

/// Every campaign sent or cancelled with nothing queued or in flight, every message final, every
/// webhook delivery done.
///
/// A paused automation's readers keep their place until its author resumes it: they are not
/// waiting for anything the round does.
pub(super) async fn settled(owner: &PgPool) -> anyhow::Result<bool> {
    let open: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM campaigns WHERE status NOT IN ('sent', 'cancelled', 'recurring')
                                                AND automation_id IS NULL)
              + (SELECT count(*) FROM automation_runs r WHERE r.state = 'waiting'
                   AND EXISTS (SELECT 1 FROM automations a
                               WHERE a.tenant_id = r.tenant_id AND a.id = r.automation_id AND a.status = 'live'))
              + (SELECT count(*) FROM sends WHERE status IN ('queued', 'sending'))
              + (SELECT count(*) FROM messages WHERE status IN ('queued', 'sending'))
              + (SELECT count(*) FROM outbound_deliveries WHERE state = 'pending')",
    )
    .fetch_one(owner)
    .await?;
    Ok(open == 0)
}

/// The A/B test: a winner was chosen, nobody is left held, every reader sent has a version, and
/// each copy received is the version its reader's row names (so no reader got two versions:
/// their copies are of one row).
async fn check_ab_versions(
    owner: &PgPool,
    sink: &MailSink,
    c: &SceneCampaign,
    v: &mut Vec<String>,
) -> anyhow::Result<()> {
    let (winner, held): (Option<i16>, i64) = sqlx::query_as(
        "SELECT ab_winner, (SELECT count(*) FROM sends WHERE campaign_id = $1 AND status = 'held') FROM campaigns WHERE id = $1",
    )
    .bind(c.id)
    .fetch_one(owner)
    .await?;
    if winner.is_none() || held > 0 {
        v.push(format!("{}: winner {winner:?}, {held} readers still held", c.name));
    }
    let versions: HashMap<String, Option<i16>> =
        sqlx::query_as("SELECT lower(email), variant FROM sends WHERE campaign_id = $1 AND status <> 'skipped'")
            .bind(c.id)
            .fetch_all(owner)
            .await?
            .into_iter()
            .collect();
    let id = c.id.to_string();
    let mut by_version = [0usize; 2];
    for mail in sink.messages().await {
        let parsed = mail.parse();
        let ours = parsed.headers.iter().any(|(k, val)| k.eq_ignore_ascii_case("message-id") && val.contains(&id));
        if !ours {
            continue;
        }
        let rcpt = mail.rcpt_to.first().cloned().unwrap_or_default();
        let label = parsed.subject.strip_prefix("AB version ").and_then(|s| s.chars().next());
        let got = label.map(|l| (l as u8).wrapping_sub(b'A') as i16);
        match versions.get(&rcpt) {
            Some(Some(want)) if got == Some(*want) => by_version[*want as usize % 2] += 1,
            want => v.push(format!("{}: {rcpt} got {:?} but its row names version {want:?}", c.name, parsed.subject)),
        }
    }
    eprintln!("chaos: {} copies of version A {}, of B {}, winner {winner:?}", c.name, by_version[0], by_version[1]);
    Ok(())
}

/// What the sink accepted for one (campaign or message, recipient): the distinct Message-IDs,
/// and when the data of each copy ended.
type Received = (BTreeSet<String>, Vec<DateTime<Utc>>);

/// Compares the whole queue with what the sink accepted.
pub(super) async fn check(
    owner: &PgPool,
    sink: &MailSink,
    scene: &Scene,
    report: &mut RoundReport,
) -> anyhow::Result<()> {
    // A reader who opted out: no message's data reaches the server more than this long after
    // the opt-out committed (the engine checks again before each message once a claim is a
    // second old). Measured at the end of the data, which Herald controls; a slow server's 250
    // may come later.
    let opt_out_bound = chrono::Duration::seconds(5);
    let got = received(sink, &mut report.copies_received).await;
    let v = &mut report.violations;
    let mut extra_total = 0usize;
    let mut ambiguous_total = 0i64;
    for i in 0..scene.campaigns.len() {
        let (extra, ambiguous) =
            check_campaign(owner, scene, i, &got, opt_out_bound, v, &mut report.messages_expected).await?;
        extra_total += extra;
        ambiguous_total += ambiguous;
    }
    check_ab_versions(owner, sink, &scene.campaigns[scene.ab_test], v).await?;
    check_frequency_cap(owner, scene, &got, v, &mut report.messages_expected).await?;
    check_hard_bounces(owner, v).await?;
    let (extra, ambiguous) = check_transactional(owner, scene, &got, v, &mut report.messages_expected).await?;
    extra_total += extra;
    ambiguous_total += ambiguous;
    report.extra_copies = extra_total;
    report.ambiguous_counted = ambiguous_total;
    Ok(())
}

/// (campaign or message, recipient) → Message-IDs and the times of each copy, counting every
/// copy in `copies_received`.
async fn received(sink: &MailSink, copies_received: &mut usize) -> HashMap<(String, String), Received> {
    let mut got: HashMap<(String, String), Received> = HashMap::new();
    for d in sink.deliveries().await {
        let mid = d.message_id.clone().unwrap_or_default();
        // `<campaign.reader@domain>` or `msg.<id>@domain`.
        let key = mid.split('@').next().unwrap_or_default();
        let owner_key = match key.strip_prefix("msg.") {
            Some(id) => id.to_string(),
            None => key.split('.').next().unwrap_or_default().to_string(),
        };
        let entry = got.entry((owner_key, d.rcpt_to.clone())).or_default();
        entry.0.insert(mid);
        entry.1.push(d.data_end_at);
        *copies_received += 1;
    }
    got
}

/// One campaign (`scene.campaigns[i]`) against the sink: each reader's copies, its audience,
/// the eligible readers who got nothing (added to `messages_expected`), how it ended, and
/// Herald's account of each reader. Returns its extra copies and what it counted as ambiguous.
async fn check_campaign(
    owner: &PgPool,
    scene: &Scene,
    i: usize,
    got: &HashMap<(String, String), Received>,
    opt_out_bound: chrono::Duration,
    v: &mut Vec<String>,
    messages_expected: &mut usize,
) -> anyhow::Result<(usize, i64)> {
    let c = &scene.campaigns[i];
    let key = |rcpt: &str| (c.id.to_string(), rcpt.to_string());
    let (distinct, copies) = check_copies_per_reader(scene, i, got, opt_out_bound, v);
    // Nobody outside the campaign's audience (its lists, its segments less its exclusion).
    let audience: HashSet<&str> = c.readers.iter().map(String::as_str).collect();
    let id = c.id.to_string();
    let outsiders: Vec<&String> =
        got.keys().filter(|(of, rcpt)| *of == id && !audience.contains(rcpt.as_str())).map(|(_, r)| r).collect();
    if !outsiders.is_empty() {
        v.push(format!(
            "{}: {} readers outside its audience got it, e.g. {:?}",
            c.name,
            outsiders.len(),
            &outsiders[..outsiders.len().min(5)]
        ));
    }
    // A row of the send that outlived its queue age expires once a retry failed too: its
    // reader is owed nothing more (`check_soft_failures` fails one that expired sooner).
    let expired: HashSet<String> = if i == scene.soft_failures {
        sqlx::query_scalar(
            "SELECT lower(email) FROM sends WHERE campaign_id = $1 AND status = 'expired' AND attempts >= 2",
        )
        .bind(c.id)
        .fetch_all(owner)
        .await?
        .into_iter()
        .collect()
    } else {
        HashSet::new()
    };
    let expected: Vec<&String> = c
        .readers
        .iter()
        .filter(|r| {
            !r.starts_with("dead")
                && !r.starts_with("reject")
                && !scene.opted_out.contains_key(*r)
                && !scene.stopped.contains_key(*r)
                && !expired.contains(*r)
        })
        .collect();
    if !c.cancelled && i != scene.capped.0 && i != scene.capped.1 {
        *messages_expected += expected.len();
        let missing: Vec<&&String> = expected.iter().filter(|r| !got.contains_key(&key(r))).collect();
        if !missing.is_empty() {
            v.push(format!(
                "{}: {} eligible readers got nothing, e.g. {:?}",
                c.name,
                missing.len(),
                &missing[..missing.len().min(5)]
            ));
        }
    }
    let (status, ambiguous, open): (String, i64, i64) = sqlx::query_as(
        "SELECT c.status,
                (SELECT coalesce(sum(ambiguous), 0) FROM sends s WHERE s.campaign_id = c.id)::bigint,
                (SELECT count(*) FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'sending'))
         FROM campaigns c WHERE c.id = $1",
    )
    .bind(c.id)
    .fetch_one(owner)
    .await?;
    let want = if c.cancelled {
        "cancelled"
    } else if c.automation_step {
        "sending"
    } else {
        "sent"
    };
    if status != want || open != 0 {
        v.push(format!("{}: ended {status} with {open} rows queued or in flight (expected {want}, none)", c.name));
    }
    let sent = check_rows_against_sink(owner, c, got, v).await?;
    eprintln!(
        "chaos: {} {status}: {sent} sent, {distinct} readers received, {copies} copies, {ambiguous} ambiguous",
        c.name
    );
    let extra = copies - distinct;
    if (ambiguous as usize) < extra {
        v.push(format!("{}: {extra} extra copies but only {ambiguous} counted as ambiguous", c.name));
    }
    Ok((extra, ambiguous))
}

/// Each reader's copies of `scene.campaigns[i]`: one Message-ID, and none later than
/// `opt_out_bound` after an opt-out, another reason to stop, or the campaign's pause. Returns
/// how many readers received it and how many copies.
fn check_copies_per_reader(
    scene: &Scene,
    i: usize,
    got: &HashMap<(String, String), Received>,
    opt_out_bound: chrono::Duration,
    v: &mut Vec<String>,
) -> (usize, usize) {
    let c = &scene.campaigns[i];
    let key = |rcpt: &str| (c.id.to_string(), rcpt.to_string());
    let mut distinct = 0usize;
    let mut copies = 0usize;
    for rcpt in &c.readers {
        let Some((ids, times)) = got.get(&key(rcpt)) else { continue };
        distinct += 1;
        copies += times.len();
        if ids.len() > 1 {
            v.push(format!("{}: {rcpt} got {} different Message-IDs: {ids:?}", c.name, ids.len()));
        }
        if let Some(at) = scene.opted_out.get(rcpt)
            && let Some(late) = times.iter().find(|t| **t > *at + opt_out_bound)
        {
            v.push(format!("{}: {rcpt} opted out at {at} and still got a copy at {late}", c.name));
        }
        // Left the trigger list, opened the original: the same bound, the claim's checks being
        // the same.
        if let Some((at, why)) = scene.stopped.get(rcpt)
            && let Some(late) = times.iter().find(|t| **t > *at + opt_out_bound)
        {
            v.push(format!("{}: {rcpt} {why} at {at} and still got a copy at {late}", c.name));
        }
        // Paused: only what was already on the wire may still arrive (the same bound).
        if let (true, Some((paused, resumed))) = (i == scene.paused_campaign, scene.pause_window)
            && let Some(late) = times.iter().find(|t| **t > paused + opt_out_bound && **t < resumed)
        {
            v.push(format!("{}: {rcpt} got a copy at {late}, paused at {paused}, resumed at {resumed}", c.name));
        }
    }
    (distinct, copies)
}

/// Returns how many of the campaign's rows are recorded `sent`.
async fn check_rows_against_sink(
    owner: &PgPool,
    c: &SceneCampaign,
    got: &HashMap<(String, String), Received>,
    v: &mut Vec<String>,
) -> anyhow::Result<usize> {
    let key = |rcpt: &str| (c.id.to_string(), rcpt.to_string());
    // Herald's account of each reader against the sink's: a row recorded `sent` was
    // received; a received message's row is `sent`, or counted as ambiguous (a copy whose
    // 250 never came back may be followed by a skip or a cancel, which Herald cannot tell).
    let rows: Vec<(String, String, i32)> =
        sqlx::query_as("SELECT lower(email), status, ambiguous FROM sends WHERE campaign_id = $1")
            .bind(c.id)
            .fetch_all(owner)
            .await?;
    let mut sent = 0usize;
    for (rcpt, row_status, row_ambiguous) in rows {
        let received = got.contains_key(&key(&rcpt));
        sent += usize::from(row_status == "sent");
        if row_status == "sent" && !received {
            v.push(format!("{}: {rcpt} is recorded sent but the sink never got it", c.name));
        }
        if received && row_status != "sent" && row_ambiguous == 0 {
            v.push(format!("{}: {rcpt} got a copy but Herald says {row_status}, not ambiguous", c.name));
        }
        // Per row, not only in sum: every copy beyond the first is counted on its own row.
        let copies = got.get(&key(&rcpt)).map_or(0, |g| g.1.len());
        if copies > 1 && copies - 1 > row_ambiguous as usize {
            v.push(format!("{}: {rcpt} got {copies} copies but its row counts {row_ambiguous} ambiguous", c.name));
        }
    }
    Ok(sent)
}

/// Adds each capped reader to `messages_expected`.
async fn check_frequency_cap(
    owner: &PgPool,
    scene: &Scene,
    got: &HashMap<(String, String), Received>,
    v: &mut Vec<String>,
    messages_expected: &mut usize,
) -> anyhow::Result<()> {
    // Two campaigns, one frequency cap: each reader gets exactly one of them.
    let (a, b) = (&scene.campaigns[scene.capped.0], &scene.campaigns[scene.capped.1]);
    for rcpt in &a.readers {
        let n = [a.id, b.id].iter().filter(|id| got.contains_key(&(id.to_string(), rcpt.clone()))).count();
        *messages_expected += 1;
        if n == 2 {
            // Both arrived: explained only by a copy Herald could not know of, on a row that
            // ended unsent but counts it as ambiguous (its data went out and no reply came back,
            // then the campaign was cancelled): by Herald's books that campaign never reached
            // the reader, so the other one took them rather than lose them.
            let unknown: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM sends s JOIN readers r ON r.id = s.reader_id
                 WHERE s.campaign_id = ANY($1) AND r.email = $2 AND s.status <> 'sent' AND s.ambiguous > 0",
            )
            .bind(vec![a.id.0, b.id.0])
            .bind(rcpt)
            .fetch_one(owner)
            .await?;
            if unknown > 0 {
                continue;
            }
        }
        if n != 1 {
            v.push(format!("frequency cap: {rcpt} got {n} of the two capped campaigns (expected exactly one)"));
        }
    }
    Ok(())
}

async fn check_hard_bounces(owner: &PgPool, v: &mut Vec<String>) -> anyhow::Result<()> {
    // Hard bounces end suppressed; their rows failed.
    let unsuppressed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM readers r WHERE r.email LIKE 'dead%'
           AND NOT EXISTS (SELECT 1 FROM suppressions x WHERE x.tenant_id = r.tenant_id
                           AND x.email_lower = lower(r.email) AND x.reason = 'hard_bounce')",
    )
    .fetch_one(owner)
    .await?;
    if unsuppressed > 0 {
        v.push(format!("{unsuppressed} unknown users were not suppressed"));
    }
    Ok(())
}

/// Adds each message to `messages_expected`; returns the extra copies and what the messages
/// counted as ambiguous.
async fn check_transactional(
    owner: &PgPool,
    scene: &Scene,
    got: &HashMap<(String, String), Received>,
    v: &mut Vec<String>,
    messages_expected: &mut usize,
) -> anyhow::Result<(usize, i64)> {
    // Transactional: each message exactly once (or more under one Message-ID, counted).
    let mut extra_total = 0usize;
    let mut ambiguous_total = 0i64;
    for (id, to) in &scene.messages {
        *messages_expected += 1;
        let (status, ambiguous): (String, i32) =
            sqlx::query_as("SELECT status, ambiguous FROM messages WHERE id = $1").bind(id).fetch_one(owner).await?;
        let copies = got.get(&(id.to_string(), to.clone())).map(|g| g.1.len()).unwrap_or(0);
        if status != "sent" || copies == 0 {
            v.push(format!("transactional {id} to {to}: {status}, {copies} copies"));
        } else if copies - 1 > ambiguous as usize {
            v.push(format!("transactional {id}: {} extra copies, {ambiguous} counted", copies - 1));
        }
        extra_total += copies.saturating_sub(1);
        ambiguous_total += i64::from(ambiguous);
    }
    Ok((extra_total, ambiguous_total))
}

/// The send that outlived its queue age: no row expired for its age after a single attempt (one
/// soft failure early in a long send is never a row's last try); whether its readers got their
/// copy is checked with every campaign's.
pub(super) async fn check_soft_failures(owner: &PgPool, c: &SceneCampaign, v: &mut Vec<String>) -> anyhow::Result<()> {
    let early: Vec<(String, i32)> = sqlx::query_as(
        "SELECT lower(email), attempts FROM sends WHERE campaign_id = $1 AND status = 'expired' AND attempts < 2",
    )
    .bind(c.id)
    .fetch_all(owner)
    .await?;
    for (rcpt, attempts) in &early {
        v.push(format!("{}: {rcpt} expired for its queue age after {attempts} attempt(s)", c.name));
    }
    let (retried, expired): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'sent' AND attempts >= 2), count(*) FILTER (WHERE status = 'expired')
         FROM sends WHERE campaign_id = $1",
    )
    .bind(c.id)
    .fetch_one(owner)
    .await?;
    eprintln!("chaos: {}: {retried} sent on a retry, {expired} expired after two attempts or more", c.name);
    Ok(())
}

/// The failing workspace's automation: paused by the scheduler, with a reason, having mailed
/// nobody (its readers never got past the broken step).
pub(super) async fn check_broken_automation(
    owner: &PgPool,
    sink: &MailSink,
    broken: &(AutomationId, Vec<CampaignId>),
    v: &mut Vec<String>,
) -> anyhow::Result<()> {
    let (automation, steps) = broken;
    let (status, reason): (String, Option<String>) =
        sqlx::query_as("SELECT status, pause_reason FROM automations WHERE id = $1")
            .bind(*automation)
            .fetch_one(owner)
            .await?;
    if status != "paused" || reason.is_none() {
        v.push(format!("the failing automation ended {status} (reason {reason:?}), not paused by the scheduler"));
    }
    let ids: Vec<Uuid> = steps.iter().map(|c| c.0).collect();
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM sends WHERE campaign_id = ANY($1)")
        .bind(&ids)
        .fetch_one(owner)
        .await?;
    let ids: Vec<String> = steps.iter().map(ToString::to_string).collect();
    let received = sink
        .deliveries()
        .await
        .iter()
        .filter(|d| d.message_id.as_deref().is_some_and(|m| ids.iter().any(|id| m.contains(id.as_str()))))
        .count();
    if queued > 0 || received > 0 {
        v.push(format!(
            "the failing automation queued {queued} mails and {received} reached the server (expected none)"
        ));
    }
    Ok(())
}

/// One run per event: each reader's one signup event, however many copies came under its key,
/// let them in once (the automation takes every event, so a second run would be a second mail).
pub(super) async fn check_event_entries(
    owner: &PgPool,
    signup: &Signup,
    accepted: &[String],
    v: &mut Vec<String>,
) -> anyhow::Result<()> {
    let runs: HashMap<String, i64> = sqlx::query_as(
        "SELECT lower(r.email), count(*) FROM automation_runs a JOIN readers r ON r.id = a.reader_id
         WHERE a.automation_id = $1 GROUP BY 1",
    )
    .bind(signup.automation)
    .fetch_all(owner)
    .await?
    .into_iter()
    .collect();
    for (rcpt, n) in &runs {
        if *n > 1 {
            v.push(format!("signup: {rcpt}'s one event (sent twice under its Idempotency-Key) made {n} runs"));
        }
    }
    for rcpt in accepted {
        if !runs.contains_key(rcpt) {
            v.push(format!("signup: {rcpt}'s event was accepted but made no run"));
        }
    }
    Ok(())
}

/// The automation's second mail never reached a reader before its first (a sequence's order):
/// a run's next step waits until its last mail is out.
pub(super) async fn check_automation_order(sink: &MailSink, steps: &[CampaignId; 2], v: &mut Vec<String>) {
    let mut first: HashMap<(usize, String), DateTime<Utc>> = HashMap::new();
    for d in sink.deliveries().await {
        let mid = d.message_id.clone().unwrap_or_default();
        let Some(step) = steps.iter().position(|c| mid.contains(&c.to_string())) else { continue };
        let at = first.entry((step, d.rcpt_to.clone())).or_insert(d.data_end_at);
        *at = (*at).min(d.data_end_at);
    }
    for ((step, rcpt), second) in &first {
        if *step == 1
            && let Some(one) = first.get(&(0, rcpt.clone()))
            && second < one
        {
            v.push(format!("automation: {rcpt} got step 2 at {second}, before step 1 at {one}"));
        }
        if *step == 1 && !first.contains_key(&(0, rcpt.clone())) {
            v.push(format!("automation: {rcpt} got step 2 without step 1"));
        }
    }
}
