//! Segment counts at scale (migration 45): the typed side table of field values that
//! answers equality and ranges from one index must say what the readers' attributes say after
//! every kind of write — a reader made, its attributes changed by the API or by any statement,
//! a field made after its values, a field or reader deleted, a field made while readers change
//! — and the count of an "all" tree, which joins its conditions' reader-id sets, must name the
//! same readers as the conditions taken one at a time. Random steps print their seed
//! (`HERALD_SEGMENT_SEED` replays one).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;

use crate::helpers::*;
use herald_types::TenantId;

fn seed() -> u64 {
    let seed = std::env::var("HERALD_SEGMENT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("segment counts: seed {seed} (HERALD_SEGMENT_SEED={seed} replays it)");
    seed
}

/// One of `choices`, drawn from `rng`.
fn one<'a>(rng: &mut StdRng, choices: &[&'a str]) -> &'a str {
    choices[rng.gen_range(0..choices.len())]
}

/// Rows where the side table and the attributes disagree, both ways, in every workspace.
async fn drift(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "WITH expected AS (
             SELECT r.tenant_id, r.id AS reader_id, f.key AS field_key, field_value_of(f.kind, r.attributes -> f.key) AS value
             FROM readers r JOIN fields f ON f.tenant_id = r.tenant_id AND f.kind <> 'text'
             WHERE field_value_of(f.kind, r.attributes -> f.key) IS NOT NULL)
         SELECT count(*) FROM (
             (SELECT * FROM expected EXCEPT SELECT tenant_id, reader_id, field_key, value FROM field_values)
             UNION ALL
             (SELECT tenant_id, reader_id, field_key, value FROM field_values EXCEPT SELECT * FROM expected)) d",
    )
    .fetch_one(&app.owner)
    .await
    .expect("drift")
}

async fn rows_of(app: &TestApp, tenant: TenantId, key: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM field_values WHERE tenant_id = $1 AND field_key = $2")
        .bind(tenant)
        .bind(key)
        .fetch_one(&app.owner)
        .await
        .expect("rows")
}

/// A value of a random JSON type for a random key, as any writer might leave it: right types,
/// numbers and dates as text, long text, booleans, null.
fn random_value(rng: &mut StdRng) -> Value {
    match rng.gen_range(0..9) {
        0 => json!(rng.gen_range(-50..150)),
        1 => json!(rng.gen_range(0.0..100.0)),
        2 => json!(rng.gen_range(0..90).to_string()),
        3 => json!(format!("{}-{:02}-{:02}", rng.gen_range(1950..2030), rng.gen_range(1..13), rng.gen_range(1..29))),
        4 => json!(rng.gen_bool(0.5)),
        5 => json!(one(rng, &["Free", "Pro", "pro"])),
        6 => json!("x".repeat(rng.gen_range(90..130))),
        7 => Value::Null,
        _ => json!({"nested": 1}),
    }
}

#[tokio::test]
async fn typed_values_follow_every_writer_of_attributes() -> TestResult {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("values@example.com", "Field values").await;
    let tenant: TenantId = ws.parse()?;
    let api = Api::for_owner(&app, &owner).await;
    for field in [
        json!({"key": "plan", "label": "Plan", "kind": "choice", "choices": ["Free", "Pro"]}),
        json!({"key": "age", "label": "Age", "kind": "number"}),
        json!({"key": "birthday", "label": "Birthday", "kind": "date"}),
        json!({"key": "member", "label": "Member", "kind": "yes_no"}),
        json!({"key": "city", "label": "City", "kind": "text"}),
    ] {
        let (status, body) = api.post("/api/v1/fields", field).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // Made through the API (values checked and normalised: "41" becomes 41).
    let readers: Vec<Value> = (0..40)
        .map(|i| {
            json!({"email": format!("r{i}@values.test"), "attributes": {
                "plan": if i % 2 == 0 { "Free" } else { "Pro" }, "age": (i * 3).to_string(), "birthday": format!("19{:02}-01-15", 50 + i),
                "member": i % 3 == 0, "city": "Lyon"}})
        })
        .collect();
    let (status, body) = api.post("/api/v1/readers/bulk", json!({"readers": readers})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(drift(&app).await, 0, "seed {seed}: readers made through the API");
    assert_eq!(rows_of(&app, tenant, "age").await, 40);
    assert_eq!(rows_of(&app, tenant, "city").await, 0, "text is compared in the JSON");

    // Changed through the API.
    let id: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 AND email = 'r1@values.test'")
        .bind(tenant)
        .fetch_one(&app.owner)
        .await?;
    let (status, body) = api
        .send(reqwest::Method::PATCH, &format!("/api/v1/readers/{id}"), Some(json!({"attributes": {"age": 99}})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let value: Value = sqlx::query_scalar(
        "SELECT value FROM field_values WHERE tenant_id = $1 AND reader_id = $2 AND field_key = 'age'",
    )
    .bind(tenant)
    .bind(id)
    .fetch_one(&app.owner)
    .await?;
    assert_eq!(value, json!(99));
    assert_eq!(rows_of(&app, tenant, "plan").await, 39, "the attributes were replaced: no plan any more");
    assert_eq!(drift(&app).await, 0, "seed {seed}: a reader changed through the API");

    // Any statement, any values: random writes of every type, one reader or many at a time.
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 ORDER BY id")
        .bind(tenant)
        .fetch_all(&app.owner)
        .await?;
    for step in 0..30 {
        let key = one(&mut rng, &["plan", "age", "birthday", "member", "city", "score"]);
        let chosen: Vec<i64> = ids.iter().copied().filter(|_| rng.gen_bool(0.3)).collect();
        let value = random_value(&mut rng);
        let statement = if rng.gen_bool(0.2) {
            "UPDATE readers SET attributes = attributes - $3 WHERE tenant_id = $1 AND id = ANY($2)"
        } else {
            "UPDATE readers SET attributes = jsonb_set(attributes, ARRAY[$3], $4) WHERE tenant_id = $1 AND id = ANY($2)"
        };
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .bind(tenant)
            .bind(&chosen)
            .bind(key)
            .bind(&value)
            .execute(&app.owner)
            .await?;
        assert_eq!(drift(&app).await, 0, "seed {seed}: step {step} wrote {key} = {value}");
    }
    // A status change leaves the values as they are.
    sqlx::query("UPDATE readers SET status = 'unsubscribed' WHERE tenant_id = $1")
        .bind(tenant)
        .execute(&app.owner)
        .await?;
    assert_eq!(drift(&app).await, 0, "seed {seed}: a status change");

    // A field made after its values were written takes them.
    sqlx::query("UPDATE readers SET attributes = attributes || '{\"rank\": 7}' WHERE tenant_id = $1 AND id % 2 = 0")
        .bind(tenant)
        .execute(&app.owner)
        .await?;
    let (status, body) = api.post("/api/v1/fields", json!({"key": "rank", "label": "Rank", "kind": "number"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let even = ids.iter().filter(|id| *id % 2 == 0).count() as i64;
    assert_eq!(rows_of(&app, tenant, "rank").await, even);
    assert_eq!(drift(&app).await, 0, "seed {seed}: a field made after its values");

    // A deleted field's values go; a deleted reader's values go.
    let (status, _) = api.send(reqwest::Method::DELETE, "/api/v1/fields/rank", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(rows_of(&app, tenant, "rank").await, 0);
    let (status, _) = api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{}", ids[0]), None).await;
    assert!(status.is_success(), "{status}");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM field_values WHERE reader_id = $1")
        .bind(ids[0])
        .fetch_one(&app.owner)
        .await?;
    assert_eq!(left, 0);
    assert_eq!(drift(&app).await, 0, "seed {seed}: deletions");
    // The runtime role reads the table in its own workspace only, and cannot write it.
    let mut tx = app.app.db.tenant_tx(tenant).await?;
    let written = sqlx::query("DELETE FROM field_values").execute(&mut *tx).await;
    assert!(written.is_err(), "only the triggers write the side table");
    Ok(())
}

/// A field made while a transaction changes the same attribute on every reader, in both orders:
/// the change uncommitted when the field is made, and the field uncommitted when the change is
/// made. Either way the side table must end with the readers' latest values: without the lock
/// the field's backfill and the readers' trigger take, the first order leaves the backfill's
/// stale values (it read the readers before the change committed, and the change's trigger did
/// not see the field) and the second leaves no values for the change.
#[tokio::test]
async fn a_field_made_while_readers_change_ends_with_their_latest_values() -> TestResult {
    let app = spawn_app().await;
    let (_, ws) = app.owner_with_workspace("race@example.com", "Race").await;
    let tenant: TenantId = ws.parse()?;
    sqlx::query(
        "INSERT INTO readers (tenant_id, email) SELECT $1, 'r' || g || '@race.test' FROM generate_series(1, 500) g",
    )
    .bind(tenant)
    .execute(&app.owner)
    .await?;
    for (round, change_first) in [(0, true), (1, false)] {
        let key = format!("k{round}");
        sqlx::query("UPDATE readers SET attributes = jsonb_build_object($2::text, 1) WHERE tenant_id = $1")
            .bind(tenant)
            .bind(&key)
            .execute(&app.owner)
            .await?;
        let change = "UPDATE readers SET attributes = jsonb_build_object($2::text, 2) WHERE tenant_id = $1";
        let make = "INSERT INTO fields (tenant_id, key, label, kind) VALUES ($1, $2, $2, 'number')";
        let (first, second) = if change_first { (change, make) } else { (make, change) };
        // The first statement's transaction stays open while the second runs on another
        // connection, then commits; the second either waits for it (the lock) or not.
        let mut open = app.owner.begin().await?;
        sqlx::query(sqlx::AssertSqlSafe(first)).bind(tenant).bind(&key).execute(&mut *open).await?;
        let pool = app.owner.clone();
        let key2 = key.clone();
        let second = tokio::spawn(async move {
            sqlx::query(sqlx::AssertSqlSafe(second)).bind(tenant).bind(&key2).execute(&pool).await
        });
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        open.commit().await?;
        second.await??;
        let stale: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM readers r LEFT JOIN field_values v
               ON v.tenant_id = r.tenant_id AND v.reader_id = r.id AND v.field_key = $2
             WHERE r.tenant_id = $1 AND v.value IS DISTINCT FROM '2'::jsonb",
        )
        .bind(tenant)
        .bind(&key)
        .fetch_one(&app.owner)
        .await?;
        assert_eq!(
            stale,
            0,
            "{} first: {stale} of 500 readers lack their latest value",
            if change_first { "the change" } else { "the field" }
        );
    }
    assert_eq!(drift(&app).await, 0);
    Ok(())
}

/// One random condition of the pool the count can join (and some it cannot), as a tree node.
fn random_condition(rng: &mut StdRng, lists: &[String], tags: &[String]) -> Value {
    let list = &lists[rng.gen_range(0..lists.len())];
    let tag = &tags[rng.gen_range(0..tags.len())];
    let low = rng.gen_range(0..60);
    match rng.gen_range(0..13) {
        0 => {
            json!({"kind": "list", "list_id": list, "state": one(rng, &["subscribed", "unsubscribed", "member", "pending"])})
        }
        1 => json!({"kind": "list", "list_id": list, "state": "not_member"}),
        2 => json!({"kind": "tag", "tag_id": tag, "has": rng.gen_bool(0.7)}),
        3 => {
            json!({"kind": "field", "key": "plan", "op": one(rng, &["eq", "ne"]), "value": one(rng, &["Free", "Pro"])})
        }
        4 => {
            json!({"kind": "field", "key": "age", "op": "between", "value": low.to_string(), "value2": (low + 25).to_string()})
        }
        5 => json!({"kind": "field", "key": "age", "op": one(rng, &["lt", "gt", "eq"]), "value": low.to_string()}),
        6 => {
            json!({"kind": "field", "key": "joined", "op": one(rng, &["before", "after"]), "value": format!("20{:02}-06-01", rng.gen_range(10..25))})
        }
        7 => json!({"kind": "field", "key": "member", "op": "eq", "value": one(rng, &["true", "false"])}),
        8 => json!({"kind": "field", "key": "age", "op": one(rng, &["is_set", "is_empty"])}),
        9 => json!({"kind": "opened", "days": rng.gen_range(1..60), "did": rng.gen_bool(0.7)}),
        10 => json!({"kind": "clicked", "days": rng.gen_range(1..60)}),
        11 => json!({"kind": "email_domain", "domain": format!("d{}.test", rng.gen_range(0..4))}),
        _ => json!({"kind": "soft_bounced", "days": rng.gen_range(1..30)}),
    }
}

#[tokio::test]
async fn a_count_of_several_conditions_names_the_readers_each_names() -> TestResult {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("counts@example.com", "Counts").await;
    let tenant: TenantId = ws.parse()?;
    let api = Api::for_owner(&app, &owner).await;
    for field in [
        json!({"key": "plan", "label": "Plan", "kind": "choice", "choices": ["Free", "Pro"]}),
        json!({"key": "age", "label": "Age", "kind": "number"}),
        json!({"key": "joined", "label": "Joined", "kind": "date"}),
        json!({"key": "member", "label": "Member", "kind": "yes_no"}),
    ] {
        let (status, body) = api.post("/api/v1/fields", field).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let mut lists = Vec::new();
    for name in ["Alpha", "Beta", "Gamma"] {
        let (status, list) = api.post("/api/v1/lists", json!({"name": name, "opt_in": "single"})).await;
        assert_eq!(status, StatusCode::CREATED, "{list}");
        lists.push(list["id"].as_str().expect("id").to_string());
    }
    // 400 readers with random values, lists, states, tags and engagement; another workspace with
    // the same shape, which must never be counted.
    let (_, other) = app.owner_with_workspace("counts-other@example.com", "Other").await;
    let other: TenantId = other.parse()?;
    for (workspace, n) in [(tenant, 400), (other, 100)] {
        for i in 0..n {
            let mut attributes = serde_json::Map::new();
            for key in ["plan", "age", "joined", "member"] {
                if rng.gen_bool(0.8) {
                    let value = match key {
                        "plan" => json!(one(&mut rng, &["Free", "Pro"])),
                        "age" => json!(rng.gen_range(0..90)),
                        "joined" => json!(format!("20{:02}-{:02}-10", rng.gen_range(10..25), rng.gen_range(1..13))),
                        _ => json!(rng.gen_bool(0.5)),
                    };
                    attributes.insert(key.into(), value);
                }
            }
            sqlx::query("INSERT INTO readers (tenant_id, email, attributes) VALUES ($1, $2, $3)")
                .bind(workspace)
                .bind(format!("r{i}@d{}.test", i % 4))
                .bind(Value::Object(attributes))
                .execute(&app.owner)
                .await?;
        }
    }
    // The other workspace has the same fields (made after its readers: their values backfilled).
    sqlx::query("INSERT INTO fields (tenant_id, key, label, kind, choices) SELECT $1, key, label, kind, choices FROM fields WHERE tenant_id = $2")
        .bind(other)
        .bind(tenant)
        .execute(&app.owner)
        .await?;
    // Memberships, tags and engagement drawn from the seed, so a failing round replays.
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 ORDER BY id")
        .bind(tenant)
        .fetch_all(&app.owner)
        .await?;
    for list in &lists {
        let members: Vec<i64> = ids.iter().copied().filter(|_| rng.gen_bool(0.5)).collect();
        let states: Vec<&str> =
            members.iter().map(|_| one(&mut rng, &["confirmed", "confirmed", "unconfirmed", "unsubscribed"])).collect();
        sqlx::query(
            "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status)
             SELECT $1, $2::uuid, m.id, m.status FROM unnest($3::bigint[], $4::text[]) AS m(id, status)",
        )
        .bind(tenant)
        .bind(list)
        .bind(&members)
        .bind(&states)
        .execute(&app.owner)
        .await?;
    }
    let mut tags = Vec::new();
    for name in ["t1", "t2"] {
        let id = uuid::Uuid::new_v4();
        let tagged: Vec<i64> = ids.iter().copied().filter(|_| rng.gen_bool(0.3)).collect();
        sqlx::query("INSERT INTO tags (tenant_id, id, name) VALUES ($1, $2, $3)")
            .bind(tenant)
            .bind(id)
            .bind(name)
            .execute(&app.owner)
            .await?;
        sqlx::query("INSERT INTO reader_tags (tenant_id, tag_id, reader_id) SELECT $1, $2, unnest($3::bigint[])")
            .bind(tenant)
            .bind(id)
            .bind(&tagged)
            .execute(&app.owner)
            .await?;
        tags.push(id.to_string());
    }
    let engaged: Vec<i64> = ids.iter().copied().filter(|_| rng.gen_bool(0.6)).collect();
    let kinds: Vec<&str> = engaged.iter().map(|_| one(&mut rng, &["open", "click", "bounce_soft"])).collect();
    let days: Vec<i32> = engaged.iter().map(|_| rng.gen_range(0..90)).collect();
    sqlx::query(
        "INSERT INTO events (tenant_id, reader_id, kind, at)
         SELECT $1, e.id, e.kind, now() - make_interval(days => e.days)
         FROM unnest($2::bigint[], $3::text[], $4::int[]) AS e(id, kind, days)",
    )
    .bind(tenant)
    .bind(&engaged)
    .bind(&kinds)
    .bind(&days)
    .execute(&app.owner)
    .await?;
    // The other workspace's readers are engaged too.
    sqlx::query("INSERT INTO events (tenant_id, reader_id, kind) SELECT tenant_id, id, 'open' FROM readers WHERE tenant_id = $1")
        .bind(other)
        .execute(&app.owner)
        .await?;

    // Each random "all" tree: its count (the joined id sets) against the readers every one of
    // its conditions names alone (each listed by the fan-out's query), intersected here.
    let readers_of = |rule: Value| {
        let db = app.app.db.clone();
        async move {
            let mut tx = db.tenant_tx(tenant).await.expect("tx");
            let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM segment_readers($1, NULL, NULL, NULL) AS m(id)")
                .bind(json!({"match": "all", "rules": [rule]}))
                .fetch_all(&mut *tx)
                .await
                .expect("readers");
            ids.into_iter().collect::<BTreeSet<i64>>()
        }
    };
    for round in 0..60 {
        let rules: Vec<Value> = (0..rng.gen_range(1..4)).map(|_| random_condition(&mut rng, &lists, &tags)).collect();
        let mut expected: Option<BTreeSet<i64>> = None;
        for rule in &rules {
            let ids = readers_of(rule.clone()).await;
            expected = Some(match expected {
                None => ids,
                Some(so_far) => so_far.intersection(&ids).copied().collect(),
            });
        }
        let tree = json!({"match": "all", "rules": rules});
        let (status, count) = api.post("/api/v1/segments/count", tree.clone()).await;
        assert_eq!(status, StatusCode::OK, "{count}");
        assert_eq!(
            count["readers"].as_i64(),
            Some(expected.unwrap_or_default().len() as i64),
            "seed {seed}, round {round}: {tree}"
        );
    }
    Ok(())
}
