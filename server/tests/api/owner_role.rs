//! Herald on a database whose owner is an ordinary role, as every managed Postgres gives: the
//! cross-workspace paths work (they run as the system role), the owner's own queries and the
//! runtime role's still see one workspace or none, data migrations copy existing rows, the
//! reader search keeps its index, and an unsafe runtime role is refused with what to change.

use crate::cli::herald;
use crate::helpers::*;
use crate::sending::SendHarness;
use herald_engine::TenantId;
use herald_engine::audience::{segments, subscribe};
use herald_engine::campaigns::delivery::{FaultHook, FaultPoint};
use herald_engine::campaigns::store;
use herald_engine::infra::data_migrations;
use herald_engine::infra::db::{RUNTIME_ROLE, SYSTEM_ROLE};
use herald_engine::infra::migrate;
use herald_engine::tracking::HitCounters;
use herald_types::segment::Definition;
use reqwest::StatusCode;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection};
use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn cross_workspace_functions_work_when_the_owner_is_not_a_superuser() -> TestResult {
    let t = two_tenants().await;
    let owner = PgPoolOptions::new().max_connections(1).connect(&t.app.db_url).await?;
    // The set-up itself: the tests' owner is an ordinary role (a superuser would hide the bug).
    let (superuser, bypass): (bool, bool) =
        sqlx::query_as("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            .fetch_one(&owner)
            .await?;
    assert!(!superuser && !bypass, "the tests must run as an ordinary owner");

    // The owner itself stays under FORCE: migrations gave back their view of every workspace.
    let owner_sees: i64 = sqlx::query_scalar("SELECT count(*) FROM tenants").fetch_one(&owner).await?;
    assert_eq!(owner_sees, 0, "the owner's own queries must see no workspace");

    // A SECURITY DEFINER look-up across workspaces, as the hosted pages and the CLI make it.
    let slug: String = sqlx::query_scalar("SELECT slug FROM tenants WHERE id = $1::uuid")
        .bind(&t.a_id)
        .fetch_one(&t.app.owner)
        .await?;
    let found: Option<uuid::Uuid> =
        sqlx::query_scalar("SELECT tenant_id_for_slug($1)").bind(&slug).fetch_one(t.app.app.db.pool()).await?;
    assert_eq!(found.map(|u| u.to_string()), Some(t.a_id.clone()));
    // ... and from the operator's CLI (main at ae53492 answered "no workspace with slug").
    let (ok, key, err) = herald(&t.app, &["admin", "create-api-key", "--workspace", &slug], "");
    assert!(ok && key.trim().starts_with("hrld_"), "{key} {err}");

    // Every definer function belongs to the system role (but the named few that keep the
    // owner's rights), every RLS table lets it see its rows.
    let not_system: Vec<String> = sqlx::query_scalar(
        "SELECT p.oid::regprocedure::text FROM pg_proc p
         WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef AND p.proowner <> $1::regrole
           AND p.proname <> ALL($2)",
    )
    .bind(SYSTEM_ROLE)
    .bind(migrate::OWNER_DEFINER_FUNCTIONS)
    .fetch_all(&t.app.owner)
    .await?;
    assert!(not_system.is_empty(), "SECURITY DEFINER functions not owned by {SYSTEM_ROLE}: {not_system:?}");
    let without: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c
         WHERE c.relnamespace = 'public'::regnamespace AND c.relrowsecurity
           AND NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND $1::regrole = ANY (p.polroles))",
    )
    .bind(SYSTEM_ROLE)
    .fetch_all(&t.app.owner)
    .await?;
    assert!(without.is_empty(), "tables without a policy for {SYSTEM_ROLE}: {without:?}");
    Ok(())
}

#[tokio::test]
async fn the_runtime_role_cannot_become_the_system_role_or_see_another_workspace() -> TestResult {
    let t = two_tenants().await;
    let a: TenantId = t.a_id.parse()?;
    let mut tx = t.app.app.db.tenant_tx(a).await?;
    let tenants: Vec<String> = sqlx::query_scalar("SELECT id::text FROM tenants").fetch_all(&mut *tx).await?;
    assert_eq!(tenants, vec![t.a_id.clone()]);
    let memberships: i64 = sqlx::query_scalar("SELECT count(*) FROM memberships WHERE tenant_id = $1::uuid")
        .bind(&t.b_id)
        .fetch_one(&mut *tx)
        .await?;
    assert_eq!(memberships, 0, "workspace B's members leaked into A's transaction");
    tx.rollback().await?;
    let mut conn = t.app.app.db.pool().acquire().await?;
    let became = sqlx::query(sqlx::AssertSqlSafe(format!("SET ROLE {SYSTEM_ROLE}"))).execute(&mut *conn).await;
    assert!(became.is_err(), "the runtime role could take the system role");
    let member: bool = sqlx::query_scalar("SELECT pg_has_role(current_user, $1, 'MEMBER')")
        .bind(SYSTEM_ROLE)
        .fetch_one(&mut *conn)
        .await?;
    assert!(!member);
    Ok(())
}

/// The one definer function that keeps the owner's rights (ANALYZE needs them before Postgres
/// 17): the runtime role can refresh the statistics of the three bulk tables, once they are stale
/// only, and of no other table.
#[tokio::test]
async fn the_runtime_role_refreshes_statistics_of_the_bulk_tables_only() -> TestResult {
    let t = two_tenants().await;
    let app = t.app.app.db.pool();
    let never: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = 'automation_runs'::regclass")
        .fetch_one(app)
        .await?;
    assert!(never < 0.0, "a fresh database's automation_runs has never been analysed ({never})");
    let analysed: bool = sqlx::query_scalar("SELECT analyze_if_stale('automation_runs')").fetch_one(app).await?;
    assert!(analysed, "never analysed is stale");
    let now: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = 'automation_runs'::regclass")
        .fetch_one(app)
        .await?;
    assert!(now >= 0.0, "ANALYZE ran as the owner ({now})");
    let again: bool = sqlx::query_scalar("SELECT analyze_if_stale('automation_runs')").fetch_one(app).await?;
    assert!(!again, "fresh statistics are left alone");
    for table in ["tenants", "users; DROP TABLE tenants", "pg_authid"] {
        let refused = sqlx::query_scalar::<_, bool>("SELECT analyze_if_stale($1)").bind(table).fetch_one(app).await;
        let code = refused.err().and_then(|e| e.as_database_error().and_then(|d| d.code().map(|c| c.into_owned())));
        assert_eq!(code.as_deref(), Some("22023"), "{table} must be refused");
    }
    Ok(())
}

/// Migration 10 backfills `list_counts` from `subscriptions`, migration 13 `audience_daily`
/// and `campaign_stats`: run by an ordinary owner they copy nothing (FORCE hides every row), and
/// migration 27 makes each backfill again with the system role's view. Seeded in two workspaces
/// before 10 and before 13; checked after 27, and the owner keeps no view of its own.
#[tokio::test]
async fn data_migrations_copy_every_workspaces_rows_as_an_ordinary_owner() -> TestResult {
    let url = fresh_empty_database().await?;
    let owner = PgPoolOptions::new().max_connections(2).connect(&url).await?;
    let db = url.rsplit('/').next().unwrap_or_default().to_string();
    migrate::run_until(&owner, Some(20261122000009)).await?;
    let inspector = PgPoolOptions::new().max_connections(1).connect(&inspector_url(&db).await).await?;

    let mut lists = Vec::new();
    for (n, slug) in ["one", "two"].into_iter().enumerate() {
        let tenant = uuid::Uuid::new_v4();
        let list = uuid::Uuid::new_v4();
        sqlx::query("INSERT INTO tenants (id, name, slug) VALUES ($1, $2, $2)")
            .bind(tenant)
            .bind(slug)
            .execute(&inspector)
            .await?;
        sqlx::query("INSERT INTO lists (id, tenant_id, name, slug) VALUES ($1, $2, 'L', 'l')")
            .bind(list)
            .bind(tenant)
            .execute(&inspector)
            .await?;
        // n + 3 confirmed and 2 unsubscribed readers each.
        sqlx::query(
            "WITH r AS (INSERT INTO readers (tenant_id, email)
                        SELECT $1, 'r' || g || '@example.com' FROM generate_series(1, $3) g RETURNING id)
             INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at, unsubscribed_at)
             SELECT $1, $2, id, CASE WHEN row_number() OVER (ORDER BY id) <= 2 THEN 'unsubscribed' ELSE 'confirmed' END,
                    now() - interval '2 days', CASE WHEN row_number() OVER (ORDER BY id) <= 2 THEN now() END
             FROM r",
        )
        .bind(tenant)
        .bind(list)
        .bind(n as i32 + 5)
        .execute(&inspector)
        .await?;
        lists.push((tenant, list, n as i64 + 3));
    }

    migrate::run_until(&owner, Some(20261122000012)).await?;
    for (tenant, _, _) in &lists {
        sqlx::query("INSERT INTO campaigns (id, tenant_id, name) VALUES ($1, $2, 'Before 13')")
            .bind(uuid::Uuid::new_v4())
            .bind(tenant)
            .execute(&inspector)
            .await?;
    }

    migrate::run_until(&owner, Some(20261127000027)).await?;
    for (tenant, list, confirmed) in &lists {
        let counts: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, n FROM list_counts WHERE list_id = $1 ORDER BY status")
                .bind(list)
                .fetch_all(&inspector)
                .await?;
        assert_eq!(counts, vec![("confirmed".into(), *confirmed), ("unsubscribed".into(), 2)], "list {list}");
        let (subscribes, unsubscribes): (i64, i64) = sqlx::query_as(
            "SELECT coalesce(sum(subscribes), 0)::bigint, coalesce(sum(unsubscribes), 0)::bigint
             FROM audience_daily WHERE tenant_id = $1",
        )
        .bind(tenant)
        .fetch_one(&inspector)
        .await?;
        assert_eq!((subscribes, unsubscribes), (confirmed + 2, 2), "workspace {tenant}");
        let stats: i64 = sqlx::query_scalar("SELECT count(*) FROM campaign_stats WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_one(&inspector)
            .await?;
        assert_eq!(stats, 1, "workspace {tenant}");
    }

    // The rest applies on top, and the owner is left without the system role's view.
    migrate::run_on(&owner).await?;
    // USAGE: has its privileges (on Postgres 16 the role's creator keeps an ADMIN-only grant).
    let member: bool =
        sqlx::query_scalar("SELECT pg_has_role(current_user, $1, 'USAGE')").bind(SYSTEM_ROLE).fetch_one(&owner).await?;
    assert!(!member, "the owner kept the system role after migrating");
    Ok(())
}

/// Addresses stored before they were canonical are rewritten, and readers of one
/// workspace that are one mailbox are merged by the data migration 29 asks for, as the ordinary
/// owner: an unsubscribe or suppression on either copy wins, the consent ledger keeps every
/// entry (and says why), the send log keeps one row per campaign (the one that was sent), the
/// list counts follow, and another workspace's copy is left alone.
#[tokio::test]
async fn existing_copies_of_one_mailbox_are_merged_without_losing_consent() -> TestResult {
    let url = fresh_empty_database().await?;
    let owner = PgPoolOptions::new().max_connections(2).connect(&url).await?;
    let db = url.rsplit('/').next().unwrap_or_default().to_string();
    migrate::run_until(&owner, Some(20261127000028)).await?;
    let inspector = PgPoolOptions::new().max_connections(1).connect(&inspector_url(&db).await).await?;
    let exec = |sql: &'static str| sqlx::query(sql);

    let (tenant, other) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let (news, offers, campaign) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    for (id, slug) in [(tenant, "merged"), (other, "other")] {
        exec("INSERT INTO tenants (id, name, slug) VALUES ($1, $2, $2)")
            .bind(id)
            .bind(slug)
            .execute(&inspector)
            .await?;
    }
    for (id, slug) in [(news, "news"), (offers, "offers")] {
        exec("INSERT INTO lists (id, tenant_id, name, slug) VALUES ($1, $2, $3, $3)")
            .bind(id)
            .bind(tenant)
            .bind(slug)
            .execute(&inspector)
            .await?;
    }
    exec("INSERT INTO campaigns (id, tenant_id, name) VALUES ($1, $2, 'Sent to both')")
        .bind(campaign)
        .bind(tenant)
        .execute(&inspector)
        .await?;
    let reader = |t: uuid::Uuid, email: &'static str| {
        let inspector = inspector.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO readers (tenant_id, email, name) VALUES ($1, $2, 'Anna') RETURNING id",
            )
            .bind(t)
            .bind(email)
            .fetch_one(&inspector)
            .await
        }
    };
    // The first copy: on both lists, confirmed, and sent the campaign; the second: unsubscribed
    // from "news", still queued for the campaign.
    let unicode = reader(tenant, "Anna@Exämple.com").await?;
    let ascii = reader(tenant, "anna@xn--exmple-cua.com").await?;
    // In another workspace, two copies neither of which is canonical yet (the second is found
    // as the first one's copy, and must not be merged a second time when its own turn comes).
    let elsewhere = reader(other, "Anna@Exämple.com").await?;
    reader(other, "ANNA@XN--EXMPLE-CUA.COM").await?;
    for (r, list, status) in
        [(unicode, news, "confirmed"), (unicode, offers, "confirmed"), (ascii, news, "unsubscribed")]
    {
        exec(
            "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at, unsubscribed_at)
             VALUES ($1, $2, $3, $4, now() - interval '1 day', CASE WHEN $4 = 'unsubscribed' THEN now() END)",
        )
        .bind(tenant)
        .bind(list)
        .bind(r)
        .bind(status)
        .execute(&inspector)
        .await?;
        exec("INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source) VALUES ($1, $2, $3, $4, 'form')")
            .bind(tenant)
            .bind(r)
            .bind(list)
            .bind(if status == "confirmed" { "confirm" } else { "unsubscribe" })
            .execute(&inspector)
            .await?;
    }
    for (r, status) in [(unicode, "sent"), (ascii, "queued")] {
        exec("INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status) VALUES ($1, $2, $3, 'x', $4)")
            .bind(tenant)
            .bind(campaign)
            .bind(r)
            .bind(status)
            .execute(&inspector)
            .await?;
    }
    for (email, reason) in
        [("ÄNNE@x.io", "manual"), ("änne@x.io", "complaint"), ("Zoë@Exämple.com", "unsubscribed_all")]
    {
        exec("INSERT INTO suppressions (tenant_id, email_lower, reason) VALUES ($1, $2, $3)")
            .bind(tenant)
            .bind(email)
            .bind(reason)
            .execute(&inspector)
            .await?;
    }
    // A transactional message still queued: its claim matches suppressions by its address.
    exec(
        "INSERT INTO messages (id, tenant_id, idempotency_key, request_hash, to_email, from_email, subject, html, text_body)
         VALUES ($1, $2, 'k', 'h', 'Änne@X.io', 'a@x.io', 's', '', '')",
    )
    .bind(uuid::Uuid::new_v4())
    .bind(tenant)
    .execute(&inspector)
    .await?;
    exec("INSERT INTO users (id, email, password_hash) VALUES ($1, 'Boss@Exämple.com', 'x')")
        .bind(uuid::Uuid::new_v4())
        .execute(&inspector)
        .await?;

    migrate::run_on(&owner).await?;

    let readers: Vec<(i64, String, String)> =
        sqlx::query_as("SELECT id, email, status FROM readers WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_all(&inspector)
            .await?;
    assert_eq!(readers, vec![(unicode, "anna@xn--exmple-cua.com".to_string(), "active".to_string())]);
    let subscriptions: Vec<(uuid::Uuid, String)> =
        sqlx::query_as("SELECT list_id, status FROM subscriptions WHERE reader_id = $1 ORDER BY status")
            .bind(unicode)
            .fetch_all(&inspector)
            .await?;
    assert_eq!(
        subscriptions,
        vec![(offers, "confirmed".into()), (news, "unsubscribed".into())],
        "the unsubscribe wins"
    );
    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, n FROM list_counts WHERE list_id = $1 AND n <> 0 ORDER BY status")
            .bind(news)
            .fetch_all(&inspector)
            .await?;
    assert_eq!(counts, vec![("unsubscribed".into(), 1)]);
    let ledger: Vec<String> =
        sqlx::query_scalar("SELECT action FROM consent_events WHERE tenant_id = $1 AND reader_id = $2 ORDER BY id")
            .bind(tenant)
            .bind(unicode)
            .fetch_all(&inspector)
            .await?;
    assert_eq!(ledger, ["confirm", "confirm", "unsubscribe", "merged"], "every entry kept");
    let sends: Vec<String> = sqlx::query_scalar("SELECT status FROM sends WHERE campaign_id = $1")
        .bind(campaign)
        .fetch_all(&inspector)
        .await?;
    assert_eq!(sends, ["sent"], "the sent row is kept, the queued copy dropped");
    let suppressions: Vec<(String, String)> =
        sqlx::query_as("SELECT email_lower, reason FROM suppressions WHERE tenant_id = $1 ORDER BY 1")
            .bind(tenant)
            .fetch_all(&inspector)
            .await?;
    assert_eq!(
        suppressions,
        vec![
            ("zoë@xn--exmple-cua.com".to_string(), "unsubscribed_all".to_string()),
            ("änne@x.io".into(), "complaint".into())
        ]
    );
    let elsewhere_readers: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, email FROM readers WHERE tenant_id = $1").bind(other).fetch_all(&inspector).await?;
    assert_eq!(elsewhere_readers, vec![(elsewhere, "anna@xn--exmple-cua.com".to_string())], "never across workspaces");
    let merges: i64 =
        sqlx::query_scalar("SELECT count(*) FROM consent_events WHERE tenant_id = $1 AND action = 'merged'")
            .bind(other)
            .fetch_one(&inspector)
            .await?;
    assert_eq!(merges, 1);
    let boss: i64 = sqlx::query_scalar("SELECT count(*) FROM users WHERE email = 'boss@xn--exmple-cua.com'")
        .fetch_one(&inspector)
        .await?;
    assert_eq!(boss, 1);
    let queued: String = sqlx::query_scalar("SELECT to_email FROM messages").fetch_one(&inspector).await?;
    assert_eq!(queued, "änne@x.io");
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_data_migrations").fetch_one(&inspector).await?;
    assert_eq!(pending, 0, "done once");
    Ok(())
}

/// A signed token in `text` after `path` (`/u/`, `/v/`, `/o/`): up to the first character no
/// token has.
fn token_after(text: &str, path: &str) -> String {
    let at = text.find(path).map(|i| i + path.len()).unwrap_or(text.len());
    text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect()
}

/// Mail sent before a merge names the merged copy by id: its one-click unsubscribe, web-version
/// and confirmation links act for the kept reader, its open pixel counts for it, the merged
/// copy's engagement is the kept reader's in segments, and the message that was in flight
/// during the merge goes out again under the Message-ID it may already have arrived under.
#[tokio::test]
async fn mail_sent_before_a_merge_still_answers_for_the_kept_reader() -> TestResult {
    let h = SendHarness::new(0).await?;
    let (app, tenant) = (&h.app, h.tenant);
    let offers = h.add_list("Offers", 0, "nobody").await?;
    // The older copy, already canonical, on no list; the newer one, written another way (as
    // before addresses were canonical), confirmed on the campaign's list and waiting for its
    // confirmation on another.
    let insert = "INSERT INTO readers (tenant_id, email, name) VALUES ($1, $2, 'Anna') RETURNING id";
    let kept: i64 =
        sqlx::query_scalar(insert).bind(tenant).bind("anna@xn--exmple-cua.com").fetch_one(&app.owner).await?;
    let dup: i64 = sqlx::query_scalar(insert).bind(tenant).bind("Anna@Exämple.com").fetch_one(&app.owner).await?;
    let nonce = uuid::Uuid::new_v4();
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at, confirmation_nonce, confirmation_sent_at)
         VALUES ($1, $2, $4, 'confirmed', now(), NULL, NULL), ($1, $3, $4, 'unconfirmed', NULL, $5, now())",
    )
    .bind(tenant)
    .bind(h.list)
    .bind(offers)
    .bind(dup)
    .bind(nonce)
    .execute(&app.owner)
    .await?;

    let input = store::CampaignInput {
        name: "Before the merge".into(),
        subject: "News".into(),
        from_email: "news@sender.test".into(),
        list_ids: vec![h.list.into()],
        body: "Hello {{ reader.name }}!\n\n[View in your browser]({{ web_version_url }})\n\n[Unsubscribe]({{ unsubscribe_url }})"
            .into(),
        ..Default::default()
    };
    let campaign = store::create(&app.app.db, tenant, Role::Owner, &input).await?.id;
    h.start(campaign).await?;
    // Engagement: the kept copy opened once, long ago; the other opened twice and clicked, lately.
    for (reader, kind, days) in [(kept, "open", 40), (dup, "open", 3), (dup, "open", 2), (dup, "click", 2)] {
        sqlx::query(
            "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, at)
             VALUES ($1, $2, $3, $4, now() - make_interval(days => $5))",
        )
        .bind(tenant)
        .bind(campaign)
        .bind(reader)
        .bind(kind)
        .bind(days)
        .execute(&app.owner)
        .await?;
    }

    // The message goes out and is accepted, but its worker dies before recording that: the row
    // stays armed under the dead worker's lease while the merge runs.
    let identity = h.identity(100_000.0, 1000)?;
    let crash: FaultHook = Arc::new(|point: FaultPoint, _send: i64| point == FaultPoint::After250);
    let crashed = h.deliver(&h.worker(&identity, Some(crash)), campaign, 1).await;
    assert!(crashed.iter().any(|r| r.is_err()), "the worker died after the 250");
    let message_id = format!("{campaign}.{dup}@sender.test");
    let (received, _) = h.received().await;
    assert_eq!(received.into_values().flatten().collect::<BTreeSet<_>>(), BTreeSet::from([message_id.clone()]));
    // Its links, as the reader has them.
    let mail = h.sink.messages().await.into_iter().next().expect("the message arrived").parse();
    let parts = format!("{}\n{}", mail.html.unwrap_or_default(), mail.text.unwrap_or_default());
    let unsubscribe = token_after(&parts, "/u/");
    let web_version = token_after(&parts, "/v/");
    let pixel = token_after(&parts, "/o/");
    assert!(!unsubscribe.is_empty() && !web_version.is_empty() && !pixel.is_empty(), "{parts}");
    // And a confirmation link for the other list, as the confirmation mail carries it.
    let confirmation = app.app.signer.sign(
        subscribe::CONFIRM_PURPOSE,
        Some(chrono::Utc::now().timestamp() + 3600),
        &serde_json::json!({ "t": tenant, "r": dup, "l": [[offers, nonce]] }),
    );

    let mut tx = app.owner.begin().await?;
    let merged = data_migrations::canonical_addresses(&mut tx).await?;
    tx.commit().await?;
    assert_eq!(merged.readers_merged, 1);
    let readers: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1").bind(tenant).fetch_all(&app.owner).await?;
    assert_eq!(readers, vec![kept]);

    // The message in flight goes out again, now to the kept reader, under the same Message-ID.
    assert!(h.reap().await? > 0, "the dead worker's row comes back, counted ambiguous");
    for r in h.deliver(&h.worker(&identity, None), campaign, 1).await {
        r?;
    }
    let (received, copies) = h.received().await;
    assert_eq!(copies, 2, "the message in flight was sent again");
    assert_eq!(
        received.into_values().flatten().collect::<BTreeSet<_>>(),
        BTreeSet::from([message_id]),
        "a re-sent copy keeps the Message-ID of the one that may have arrived"
    );

    // The merged copy's engagement is the kept reader's.
    let (opens, clicks): (i64, i64) =
        sqlx::query_as("SELECT opens, clicks FROM reader_engagement WHERE tenant_id = $1 AND reader_id = $2")
            .bind(tenant)
            .bind(kept)
            .fetch_one(&app.owner)
            .await?;
    assert_eq!((opens, clicks), (3, 1));
    let opened_lately: Definition =
        serde_json::from_value(serde_json::json!({ "match": "all", "rules": [{ "kind": "opened", "days": 7 }] }))?;
    let (_, matching) = segments::preview(&app.app.db, tenant, &opened_lately, 10).await?;
    assert_eq!(matching.iter().map(|r| r.id).collect::<Vec<_>>(), vec![kept], "opened within a week");

    let client = reqwest::Client::new();
    // The web version: the kept reader's copy.
    let page = client.get(format!("{}/v/{web_version}", app.base)).send().await?;
    assert_eq!(page.status(), StatusCode::OK, "the web version of mail sent before the merge");
    assert!(page.text().await?.contains("Hello Anna!"));

    // The open pixel counts for the kept reader.
    let thunderbird = "Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Thunderbird/115.3.1";
    let person = reqwest::Client::builder().user_agent(thunderbird).build()?;
    assert_eq!(person.get(format!("{}/o/{pixel}", app.base)).send().await?.status(), StatusCode::OK);
    for _ in 0..100 {
        if HitCounters::get(&app.hits.stored) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let opens_now: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE tenant_id = $1 AND reader_id = $2 AND kind = 'open' AND at > now() - interval '1 hour'",
    )
    .bind(tenant)
    .bind(kept)
    .fetch_one(&app.owner)
    .await?;
    assert_eq!(opens_now, 1, "the open of mail sent before the merge is the kept reader's");

    // The confirmation link confirms the kept reader, which the pending subscription moved to.
    let preview = client.get(format!("{}/confirm/{confirmation}", app.base)).send().await?;
    assert_eq!(preview.status(), StatusCode::OK);
    assert!(preview.text().await?.contains("anna@xn--exmple-cua.com"));
    let done = client.post(format!("{}/confirm/{confirmation}", app.base)).send().await?;
    assert_eq!(done.status(), StatusCode::OK);

    // One-click unsubscribe (RFC 8058), as the mail provider posts it.
    let left = client
        .post(format!("{}/u/{unsubscribe}", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("List-Unsubscribe=One-Click")
        .send()
        .await?;
    assert_eq!(left.status(), StatusCode::OK, "one-click unsubscribe in mail sent before the merge");
    let subscriptions: Vec<(uuid::Uuid, String)> =
        sqlx::query_as("SELECT list_id, status FROM subscriptions WHERE reader_id = $1 ORDER BY status")
            .bind(kept)
            .fetch_all(&app.owner)
            .await?;
    assert_eq!(subscriptions, vec![(offers, "confirmed".to_string()), (h.list, "unsubscribed".to_string())]);
    let ledger: Vec<String> = sqlx::query_scalar(
        "SELECT action || ':' || source FROM consent_events WHERE tenant_id = $1 AND reader_id = $2 ORDER BY id",
    )
    .bind(tenant)
    .bind(kept)
    .fetch_all(&app.owner)
    .await?;
    assert_eq!(ledger, ["merged:migration", "confirm:confirmation_link", "unsubscribe:one_click"]);
    Ok(())
}

/// Merges made before readers had aliases: the migration that brought them finds each merged id
/// in the ledger's `merged` entry, so an old link works again, and sums the kept reader's
/// engagement again from the events the merge moved to it.
#[tokio::test]
async fn merges_made_before_aliases_get_them_from_the_ledger() -> TestResult {
    let url = fresh_empty_database().await?;
    let owner = PgPoolOptions::new().max_connections(2).connect(&url).await?;
    let db = url.rsplit('/').next().unwrap_or_default().to_string();
    migrate::run_until(&owner, Some(20261202000060)).await?;
    let inspector = PgPoolOptions::new().max_connections(1).connect(&inspector_url(&db).await).await?;

    let (tenant, list, campaign) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    sqlx::query("INSERT INTO tenants (id, name, slug) VALUES ($1, 'Merged', 'merged')")
        .bind(tenant)
        .execute(&inspector)
        .await?;
    sqlx::query("INSERT INTO lists (id, tenant_id, name, slug) VALUES ($1, $2, 'News', 'news')")
        .bind(list)
        .bind(tenant)
        .execute(&inspector)
        .await?;
    sqlx::query("INSERT INTO campaigns (id, tenant_id, name) VALUES ($1, $2, 'Sent to both')")
        .bind(campaign)
        .bind(tenant)
        .execute(&inspector)
        .await?;
    let insert = "INSERT INTO readers (tenant_id, email, name) VALUES ($1, $2, 'Bea') RETURNING id";
    let kept: i64 =
        sqlx::query_scalar(insert).bind(tenant).bind("bea@xn--exmple-cua.com").fetch_one(&inspector).await?;
    let dup: i64 = sqlx::query_scalar(insert).bind(tenant).bind("Bea@Exämple.com").fetch_one(&inspector).await?;
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at) VALUES ($1, $2, $3, 'confirmed', now())",
    )
    .bind(tenant)
    .bind(list)
    .bind(kept)
    .execute(&inspector)
    .await?;
    for (reader, days) in [(kept, 40), (dup, 3), (dup, 2)] {
        sqlx::query(
            "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, at)
             VALUES ($1, $2, $3, 'open', now() - make_interval(days => $4))",
        )
        .bind(tenant)
        .bind(campaign)
        .bind(reader)
        .bind(days)
        .execute(&inspector)
        .await?;
    }
    // The merge as it was made before aliases: the events moved, the merged copy deleted (its
    // engagement summary with it), and the ledger told.
    for sql in [
        "UPDATE events SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
        "INSERT INTO consent_events (tenant_id, reader_id, action, source, wording)
         VALUES ($1, $2, 'merged', 'migration',
                 'Reader #' || $3 || ' had the same mailbox written another way and was merged into this reader.')",
        "DELETE FROM readers WHERE tenant_id = $1 AND id = $3",
    ] {
        sqlx::query(sql).bind(tenant).bind(kept).bind(dup).execute(&inspector).await?;
    }
    let opens: i64 = sqlx::query_scalar("SELECT opens FROM reader_engagement WHERE reader_id = $1")
        .bind(kept)
        .fetch_one(&inspector)
        .await?;
    assert_eq!(opens, 1, "the set-up: the merged copy's opens were lost");

    migrate::run_on(&owner).await?;

    let alias: Option<i64> =
        sqlx::query_scalar("SELECT reader_id FROM reader_aliases WHERE tenant_id = $1 AND merged_id = $2")
            .bind(tenant)
            .bind(dup)
            .fetch_optional(&inspector)
            .await?;
    assert_eq!(alias, Some(kept));
    let (opens, recent): (i64, bool) = sqlx::query_as(
        "SELECT opens, last_open_at > now() - interval '7 days' FROM reader_engagement WHERE reader_id = $1",
    )
    .bind(kept)
    .fetch_one(&inspector)
    .await?;
    assert_eq!((opens, recent), (3, true), "the events the merge moved count for the kept reader");

    // A one-click unsubscribe link mailed to the merged copy before the merge.
    let app = spawn_app_on(&url, &[("HERALD_RUN_WORKERS", "false")]).await;
    let link = subscribe::unsubscribe_url(&app.app.signer, &app.base, TenantId(tenant), dup, Some(list.into()));
    let client = reqwest::Client::new();
    let page = client.get(&link).send().await?;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await?.contains("bea@xn--exmple-cua.com"), "the page of the reader it became");
    let left = client
        .post(&link)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("List-Unsubscribe=One-Click")
        .send()
        .await?;
    assert_eq!(left.status(), StatusCode::OK);
    let status: String = sqlx::query_scalar("SELECT status FROM subscriptions WHERE reader_id = $1 AND list_id = $2")
        .bind(kept)
        .bind(list)
        .fetch_one(&inspector)
        .await?;
    assert_eq!(status, "unsubscribed");
    Ok(())
}

/// `search_readers` runs as the system role so that its LIKE (not leakproof) can use the
/// trigram index, which row-level security would deny the runtime role. Read the plans at 100k
/// readers: the system role's uses the index, the runtime role's cannot (so the test can tell).
#[tokio::test]
async fn the_reader_search_keeps_its_trigram_index_and_its_workspace() -> TestResult {
    let t = two_tenants().await;
    let (a, b): (TenantId, TenantId) = (t.a_id.parse()?, t.b_id.parse()?);
    for tenant in [a, b] {
        sqlx::query(
            "INSERT INTO readers (tenant_id, email, name)
             SELECT $1, 'reader' || g || '@example.com', '' FROM generate_series(1, 50000) g",
        )
        .bind(tenant)
        .execute(&t.app.owner)
        .await?;
    }
    sqlx::query("ANALYZE readers").execute(&t.app.owner).await?;
    let query = "EXPLAIN (FORMAT JSON) SELECT r.id FROM readers r WHERE r.tenant_id = $1
                 AND (lower(r.email) || ' ' || lower(r.name)) LIKE '%reader4242@%'";

    let mut conn = t.app.owner.acquire().await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("SET ROLE {SYSTEM_ROLE}"))).execute(&mut *conn).await?;
    let plan: serde_json::Value = sqlx::query_scalar(query).bind(a).fetch_one(&mut *conn).await?;
    sqlx::query("RESET ROLE").execute(&mut *conn).await?;
    assert!(plan.to_string().contains("readers_search_idx"), "the system role's plan: {plan}");

    let mut tx = t.app.app.db.tenant_tx(a).await?;
    let plan: serde_json::Value = sqlx::query_scalar(query).bind(a).fetch_one(&mut *tx).await?;
    assert!(!plan.to_string().contains("readers_search_idx"), "the runtime role's plan: {plan}");

    // Through the function, as the readers page calls it: one match, from A only.
    let found: Vec<String> =
        sqlx::query_scalar("SELECT email FROM search_readers('%reader4242@%', NULL, NULL, '{}', NULL, 50)")
            .fetch_all(&mut *tx)
            .await?;
    assert_eq!(found, vec!["reader4242@example.com".to_string()]);
    let ids_in_b: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM search_readers('%reader%', NULL, NULL, '{}', NULL, NULL) s WHERE s.tenant_id <> $1",
    )
    .bind(a)
    .fetch_one(&mut *tx)
    .await?;
    assert_eq!(ids_in_b, 0, "the search crossed into another workspace");
    Ok(())
}

/// `herald serve` refuses a runtime role that is a member of the owner, a member of the system
/// role, or owns a table, with one line saying what to change; `herald migrate` runs the same
/// check on `herald_app`, and a superuser is refused by name.
#[tokio::test]
async fn serve_refuses_a_runtime_role_that_could_see_every_workspace() -> TestResult {
    let app = spawn_app().await;
    let mut owner = PgConnection::connect(&app.db_url).await?;
    let owner_name: String = sqlx::query_scalar("SELECT current_user::text").fetch_one(&mut owner).await?;
    let role = format!("herald_t_rt_{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let run = |sql: String| sqlx::query(sqlx::AssertSqlSafe(sql));
    run(format!("CREATE ROLE {role} LOGIN")).execute(&mut owner).await?;
    let runtime_url = herald_devtools::ordinary_owner::with_user(&app.db_url, &role)?;
    let serve = || {
        let out = Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("serve")
            .env("DATABASE_URL", &app.db_url)
            .env("HERALD_APP_DATABASE_URL", &runtime_url)
            .env("HERALD_ENV", "development")
            .env("HERALD_BIND", "127.0.0.1:0")
            .env("HERALD_DEV_SMTP_BIND", "127.0.0.1:0")
            .env("HERALD_SECRET_KEY", "test-secret-key-that-is-long-enough-0123456789")
            .env("RUST_LOG", "error")
            .output()
            .expect("herald runs");
        assert!(!out.status.success(), "herald serve started with an unsafe runtime role");
        String::from_utf8_lossy(&out.stderr).trim().to_string()
    };

    let outcome = async {
        run(format!("GRANT {owner_name} TO {role}")).execute(&mut owner).await?;
        let err = serve();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&format!("REVOKE {owner_name} FROM {role}")), "{err}");
        run(format!("REVOKE {owner_name} FROM {role}")).execute(&mut owner).await?;

        run(format!("ALTER ROLE {role} CREATEROLE")).execute(&mut owner).await?;
        let err = serve();
        assert!(err.contains(&format!("ALTER ROLE {role} NOCREATEROLE")), "{err}");
        run(format!("ALTER ROLE {role} NOCREATEROLE")).execute(&mut owner).await?;

        run(format!("GRANT {SYSTEM_ROLE} TO {role}")).execute(&mut owner).await?;
        let err = serve();
        assert!(err.contains(&format!("REVOKE {SYSTEM_ROLE} FROM {role}")), "{err}");
        run(format!("REVOKE {SYSTEM_ROLE} FROM {role}")).execute(&mut owner).await?;

        // The owner may act for the role to give it a table: the owner a member of the role,
        // not the other way round (a role cannot be both).
        run(format!("GRANT {role} TO {owner_name}")).execute(&mut owner).await?;
        run(format!("GRANT CREATE ON SCHEMA public TO {role}")).execute(&mut owner).await?;
        run("CREATE TABLE rogue (id int)".into()).execute(&mut owner).await?;
        run(format!("ALTER TABLE rogue OWNER TO {role}")).execute(&mut owner).await?;
        let err = serve();
        assert!(err.contains("owns rogue") && err.contains("ALTER TABLE rogue OWNER TO"), "{err}");
        run("DROP TABLE rogue".into()).execute(&mut owner).await?;

        // herald_app as it is passes; a superuser is refused by name (as `herald migrate` would).
        assert_eq!(migrate::runtime_role_problem(&mut owner, RUNTIME_ROLE, Some(&owner_name)).await?, None);
        let superuser: String =
            sqlx::query_scalar("SELECT rolname::text FROM pg_roles WHERE rolsuper ORDER BY oid LIMIT 1")
                .fetch_one(&mut owner)
                .await?;
        let problem = migrate::runtime_role_problem(&mut owner, &superuser, Some(&owner_name)).await?;
        assert!(problem.is_some_and(|p| p.contains(&format!("ALTER ROLE {superuser} NOSUPERUSER NOBYPASSRLS"))));
        anyhow::Ok(())
    }
    .await;
    let _ = run(format!("DROP OWNED BY {role}")).execute(&mut owner).await;
    run(format!("DROP ROLE {role}")).execute(&mut owner).await?;
    outcome
}
